//! Class 5: every route of the served OpenAPI document, so a route added
//! later is covered without touching this file: without a token and with a
//! wrong one (401 where the document asks for the bearer), with the read
//! token (a GET answers, anything else is 403); then path ids and query
//! parameters no client of ours would send.

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    Targets,
    bodies::valid_site,
    client::{Api, Token},
    ledger::Expect,
};

/// Ids no resource has, or that are no id at all.
const BAD_IDS: &[&str] = &[
    "0",
    "-1",
    "9223372036854775808",
    "99999999999",
    "abc",
    "%00",
    "1.5",
    "1%20OR%201=1",
    "..%2F..%2Fhealth",
];

/// One operation of the document.
struct Route {
    method: Method,
    /// As documented: `/api/sites/{id}`.
    path: String,
    secured: bool,
    query: Vec<String>,
}

/// The ids of a site, a keyword and a run made for this class, so nothing
/// the other classes need is touched if a token is let through wrongly.
struct Owned {
    site: i64,
    keyword: i64,
    run: i64,
}

pub async fn run(api: &Api, targets: &Targets) -> anyhow::Result<()> {
    let doc = api
        .call(
            "the OpenAPI document",
            api.request(Method::GET, "/api/openapi.json", Token::Write),
            Expect::Status(&[200]),
        )
        .await
        .and_then(|a| a.json())
        .context("GET /api/openapi.json")?;
    let routes = routes_of(&doc);
    anyhow::ensure!(!routes.is_empty(), "the OpenAPI document lists no route");
    let owned = make_owned(api, targets).await?;

    for route in &routes {
        let path = concrete(&route.path, &owned);
        let body = json!({});
        for token in [Token::None, Token::Wrong, Token::Read] {
            let expect = match (token, route.secured) {
                (Token::None | Token::Wrong, true) => Expect::Status(&[401]),
                (Token::Read, true) if route.method != Method::GET => Expect::Status(&[403]),
                _ => Expect::NotServerError,
            };
            let mut request = api.request(route.method.clone(), &path, token);
            if matches!(route.method, Method::POST | Method::PUT) {
                request = request.json(&body);
            }
            api.call(
                &format!("route {} {}", route.method, route.path),
                request,
                expect,
            )
            .await;
        }
    }
    bad_ids(api, &routes, targets).await;
    bad_queries(api, &routes, &owned).await;
    Ok(())
}

fn routes_of(doc: &Value) -> Vec<Route> {
    let mut routes = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, operation) in item.as_object().into_iter().flatten() {
            let Ok(method) = method.to_uppercase().parse::<Method>() else {
                continue;
            };
            if !matches!(
                method,
                Method::GET | Method::POST | Method::PUT | Method::DELETE | Method::PATCH
            ) {
                continue;
            }
            let secured = operation["security"]
                .as_array()
                .is_some_and(|s| !s.is_empty());
            let query = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect();
            routes.push(Route {
                method,
                path: path.clone(),
                secured,
                query,
            });
        }
    }
    routes
}

/// The documented path with real ids of this class's own resources.
fn concrete(path: &str, owned: &Owned) -> String {
    let id = if path.starts_with("/api/sites") {
        owned.site
    } else if path.starts_with("/api/keywords") {
        owned.keyword
    } else {
        owned.run
    };
    path.replace("{id}", &id.to_string())
        .replace("{attempt}", "1")
        .replace("{version}", "1")
}

async fn make_owned(api: &Api, targets: &Targets) -> anyhow::Result<Owned> {
    let mut site = valid_site(targets);
    site["render"] = json!("http");
    site.as_object_mut().expect("a site").remove("wait_for");
    let created =
        |answer: Option<crate::ledger::Answer>| answer.and_then(|a| a.json()?["id"].as_i64());
    let site = created(
        api.json(
            Method::POST,
            "/api/sites",
            Token::Write,
            &site,
            "set-up site",
            Expect::Status(&[201]),
        )
        .await,
    )
    .context("the set-up site of the routes class")?;
    let keyword = json!({"keyword": "routes", "site_ids": [site], "schedule": "0 0 0 1 1 *"});
    let keyword = created(
        api.json(
            Method::POST,
            "/api/keywords",
            Token::Write,
            &keyword,
            "set-up keyword",
            Expect::Status(&[201]),
        )
        .await,
    )
    .context("the set-up keyword of the routes class")?;
    let queued = api
        .call(
            "set-up crawl",
            api.request(
                Method::POST,
                &format!("/api/keywords/{keyword}/crawl"),
                Token::Write,
            ),
            Expect::Status(&[202]),
        )
        .await
        .and_then(|a| a.json())
        .context("the set-up crawl of the routes class")?;
    let run = queued["queued"][0]["id"].as_i64().context("a queued run")?;
    Ok(Owned { site, keyword, run })
}

async fn bad_ids(api: &Api, routes: &[Route], targets: &Targets) {
    for route in routes.iter().filter(|r| r.path.contains("{id}")) {
        for id in BAD_IDS {
            let path = route
                .path
                .replace("{id}", id)
                .replace("{attempt}", "1")
                .replace("{version}", "1");
            let token = if route.method == Method::GET {
                Token::Read
            } else {
                Token::Write
            };
            let mut request = api.request(route.method.clone(), &path, token);
            if route.method == Method::PUT {
                let body = if route.path.starts_with("/api/sites") {
                    valid_site(targets)
                } else {
                    json!({"keyword": "k", "site_ids": [1], "schedule": "0 0 0 1 1 *"})
                };
                request = request.json(&body);
            } else if route.method == Method::POST {
                request = request.json(&json!({}));
            }
            api.call(
                &format!("id {id}"),
                request,
                Expect::Status(&[400, 404, 422]),
            )
            .await;
        }
    }
}

async fn bad_queries(api: &Api, routes: &[Route], owned: &Owned) {
    let long = "9".repeat(10_000);
    let over_search_limit = "a".repeat(201);
    // A listing under an id (a webhook's deliveries) gets a real one, so what
    // is judged is the parameter, not the path.
    // /ws is left out: its one parameter is the token, and without an
    // upgrade it answers 400 whatever the query.
    let listings = routes
        .iter()
        .filter(|r| r.method == Method::GET && !r.query.is_empty() && r.path != "/ws");
    for route in listings {
        for name in &route.query {
            let values: Vec<&str> = match name.as_str() {
                "cursor" => vec![
                    "zz",
                    "-1",
                    "99999999999999999999999",
                    "%00",
                    "",
                    "1e3",
                    "0x10",
                    &long,
                ],
                "limit" => vec![
                    "-1",
                    "0",
                    "1000000000000000000000000000000",
                    "abc",
                    "1001",
                    "%00",
                ],
                "state" => vec!["bogus", "%00", "QUEUED"],
                // Free text: only a control character or too much of it is wrong.
                "q" => vec!["%00", "%07lamp", &over_search_limit],
                _ => vec!["text", "%00", "1e3", "99999999999999999999", "-1"],
            };
            for value in values {
                // A required parameter given, so the one under test is judged.
                let required = match route.query.iter().any(|q| q == "format") {
                    true => "format=csv&",
                    false => "",
                };
                let path = format!("{}?{required}{name}={value}", concrete(&route.path, owned));
                // A negative id or cursor may simply match nothing.
                let expect = if value == "-1" && name != "limit" {
                    Expect::NotServerError
                } else {
                    Expect::rejected(name)
                };
                let shown: String = value.chars().take(24).collect();
                api.call(
                    &format!("{name}={shown}"),
                    api.request(Method::GET, &path, Token::Read),
                    expect,
                )
                .await;
            }
        }
        for query in [
            "evil=1",
            "limit=1&limit=2",
            "cursor=1&cursor=%00",
            &format!("limit={long}"),
        ] {
            let path = format!("{}?{query}", concrete(&route.path, owned));
            api.call(
                "odd query",
                api.request(Method::GET, &path, Token::Read),
                Expect::Status(&[200, 400]),
            )
            .await;
        }
    }
}
