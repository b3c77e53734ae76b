//! Class 6: secrets. Sites carry secrets the way users give them (an
//! Authorization header, an API key header, a proxy with a user name and a
//! password, a kept session whose cookie the site hands out) and are
//! crawled for real, in browser and http modes, while the other classes
//! run. At the end every answer the driver received and every line the
//! fleet logged (at trace level) is searched for those secrets and for the
//! fleet's own: its tokens and its SESSION_KEY.
//!
//! The same crawls check the SSRF guard behind the API: a page that
//! redirects to the trap, and one that loads an image from it.

use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    Targets,
    client::{Api, Token},
    ledger::Expect,
};

/// Random secrets of one run.
pub struct Secrets {
    pub write_token: String,
    pub read_token: String,
    pub session_key: String,
    /// A: the value of a site's `Authorization: Bearer` header.
    pub header_bearer: String,
    /// B: a site's `X-Api-Key` header.
    pub api_key: String,
    /// C and D: a site's proxy user name and password.
    pub proxy_user: String,
    pub proxy_password: String,
}

fn random_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

impl Secrets {
    pub fn generate() -> Secrets {
        Secrets {
            write_token: format!("write{}", random_hex()),
            read_token: format!("read{}", random_hex()),
            session_key: format!("{}{}", random_hex(), random_hex()),
            header_bearer: format!("bearer{}", random_hex()),
            api_key: format!("apikey{}", random_hex()),
            proxy_user: format!("user{}", random_hex()),
            proxy_password: format!("password{}", random_hex()),
        }
    }
}

/// How long the crawls may take to end once the other classes are done.
const CRAWL_LIMIT: Duration = Duration::from_secs(60);

/// A crawl the class started, and how it should end.
struct Crawl {
    run: i64,
    site: &'static str,
    ends: &'static str,
}

/// What [`start`] set going.
pub struct Started {
    site_ids: Vec<i64>,
    crawls: Vec<Crawl>,
    session_keyword: i64,
}

/// The sites of this class: (name, body, how their crawl should end).
fn sites(targets: &Targets, secrets: &Secrets) -> Vec<(&'static str, Value, &'static str)> {
    let fixture = &targets.fixture;
    let search = format!("{fixture}/search?q={{keyword}}");
    let proxy = format!(
        "http://{}:{}@127.0.0.1:{}",
        secrets.proxy_user, secrets.proxy_password, targets.proxy_port
    );
    let headers = json!({
        "Authorization": format!("Bearer {}", secrets.header_bearer),
        "X-Api-Key": secrets.api_key,
    });
    let trap = format!("http%3A%2F%2F127.0.0.1%3A{}%2F", targets.trap_port);
    let site = |name: &str, render: &str, url: String| {
        json!({
            "name": name, "render": render, "search_url": url, "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}, "link": {"selector": "a.title", "attr": "href"}},
            "stuck_timeout_secs": 20,
        })
    };
    let with = |mut body: Value, extra: Value| {
        for (k, v) in extra.as_object().expect("an object") {
            body[k] = v.clone();
        }
        body
    };
    let secret = json!({"headers": headers, "proxy": proxy});
    vec![
        (
            "secret-browser",
            with(
                site("secret-browser", "browser", search.clone()),
                secret.clone(),
            ),
            "completed",
        ),
        (
            "secret-http",
            with(site("secret-http", "http", search.clone()), secret),
            "completed",
        ),
        (
            "members",
            with(
                site(
                    "members",
                    "browser",
                    format!("{fixture}/members?q={{keyword}}"),
                ),
                json!({"keep_session": true}),
            ),
            "completed",
        ),
        (
            "redirect-to-trap-http",
            with(
                site(
                    "redirect-to-trap-http",
                    "http",
                    format!("{fixture}/redirect?q={{keyword}}&to={trap}r"),
                ),
                json!({"max_attempts": 1}),
            ),
            "failed",
        ),
        (
            "redirect-to-trap-browser",
            with(
                site(
                    "redirect-to-trap-browser",
                    "browser",
                    format!("{fixture}/redirect?q={{keyword}}&to={trap}r"),
                ),
                json!({"max_attempts": 1}),
            ),
            "failed",
        ),
        (
            "image-from-trap",
            with(
                site(
                    "image-from-trap",
                    "browser",
                    format!("{fixture}/embed?q={{keyword}}&src={trap}i.png"),
                ),
                json!({"max_attempts": 1}),
            ),
            "completed",
        ),
    ]
}

/// Creates the sites and starts their crawls; they run while the other
/// classes go on.
pub async fn start(api: &Api, targets: &Targets, secrets: &Secrets) -> anyhow::Result<Started> {
    let mut site_ids = Vec::new();
    let mut ends = Vec::new();
    let mut session_site = None;
    for (name, body, end) in sites(targets, secrets) {
        let id = api
            .create_site(&body, "a secret-carrying site")
            .await
            .with_context(|| format!("creating site {name}"))?;
        if name == "members" {
            session_site = Some(id);
        } else {
            ends.push((id, name, end));
        }
        site_ids.push(id);
    }
    let others: Vec<i64> = ends.iter().map(|(id, _, _)| *id).collect();
    let session_site = session_site.context("the members site")?;
    let keyword = create_keyword(api, "secrets", &others).await?;
    let session_keyword = create_keyword(api, "members", &[session_site]).await?;
    let mut crawls = Vec::new();
    for run in crawl(api, keyword).await? {
        let (_, site, ends) = ends
            .iter()
            .find(|(id, _, _)| *id == run.1)
            .context("a run of a site of ours")?;
        crawls.push(Crawl {
            run: run.0,
            site,
            ends,
        });
    }
    for (run, _) in crawl(api, session_keyword).await? {
        crawls.push(Crawl {
            run,
            site: "members",
            ends: "completed",
        });
    }
    Ok(Started {
        site_ids,
        crawls,
        session_keyword,
    })
}

async fn create_keyword(api: &Api, keyword: &str, sites: &[i64]) -> anyhow::Result<i64> {
    let body = json!({"keyword": keyword, "site_ids": sites, "schedule": "0 0 0 1 1 *"});
    api.json(
        Method::POST,
        "/api/keywords",
        Token::Write,
        &body,
        "a keyword of the secret sites",
        Expect::Status(&[201]),
    )
    .await
    .and_then(|a| a.json()?["id"].as_i64())
    .with_context(|| format!("creating keyword {keyword}"))
}

/// Queues a crawl of `keyword`: its runs, as (run id, site id).
async fn crawl(api: &Api, keyword: i64) -> anyhow::Result<Vec<(i64, i64)>> {
    let outcome = api
        .call(
            "a crawl of the secret sites",
            api.request(
                Method::POST,
                &format!("/api/keywords/{keyword}/crawl"),
                Token::Write,
            ),
            Expect::Status(&[202]),
        )
        .await
        .and_then(|a| a.json())
        .context("queueing a crawl")?;
    Ok(outcome["queued"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|run| Some((run["id"].as_i64()?, run["site_id"].as_i64()?)))
        .collect())
}

/// Waits for the crawls, crawls the kept-session site once more (its second
/// run starts with the sealed cookie), then reads the sites back with both
/// tokens, and the runs and results with the read token.
pub async fn finish(api: &Api, started: Started) -> anyhow::Result<()> {
    let deadline = Instant::now() + CRAWL_LIMIT;
    wait_for_runs(api, &started.crawls, deadline).await;
    let mut crawls = started.crawls;
    for (run, _) in crawl(api, started.session_keyword).await? {
        let again = Crawl {
            run,
            site: "members (second run, kept session)",
            ends: "completed",
        };
        wait_for_runs(api, std::slice::from_ref(&again), deadline).await;
        crawls.push(again);
    }
    for token in [Token::Read, Token::Write] {
        api.call(
            "sites, after the crawls",
            api.request(Method::GET, "/api/sites", token),
            Expect::Status(&[200]),
        )
        .await;
        for id in &started.site_ids {
            api.call(
                "a site, after the crawls",
                api.request(Method::GET, &format!("/api/sites/{id}"), token),
                Expect::Status(&[200]),
            )
            .await;
        }
    }
    for crawl in &crawls {
        let run = crawl.run;
        api.call(
            "a run of a secret site",
            api.request(Method::GET, &format!("/api/runs/{run}"), Token::Read),
            Expect::Status(&[200]),
        )
        .await;
        let results = format!("/api/results?run_id={run}");
        api.call(
            "results of a secret site",
            api.request(Method::GET, &results, Token::Read),
            Expect::Status(&[200]),
        )
        .await;
    }
    Ok(())
}

/// Polls the runs until each has ended or the deadline passes; a run that
/// ends otherwise than it should is reported (the crawl did not exercise
/// the path the search relies on), not failed.
async fn wait_for_runs(api: &Api, crawls: &[Crawl], deadline: Instant) {
    let mut pending: Vec<&Crawl> = crawls.iter().collect();
    while !pending.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut still = Vec::new();
        for crawl in pending {
            let path = format!("/api/runs/{}", crawl.run);
            let run = api
                .call(
                    "a run's state",
                    api.request(Method::GET, &path, Token::Write),
                    Expect::Status(&[200]),
                )
                .await
                .and_then(|a| a.json());
            let state = run
                .as_ref()
                .and_then(|r| r["state"].as_str())
                .unwrap_or("unknown");
            match state {
                "completed" | "failed" | "cancelled" | "skipped" => {
                    if state != crawl.ends {
                        let error = run
                            .as_ref()
                            .map(|r| r["error"].to_string())
                            .unwrap_or_default();
                        api.ledger.unexpected(
                            &format!("crawl of {} (run {})", crawl.site, crawl.run),
                            format!("ended {state}, expected {} (error: {error})", crawl.ends),
                        );
                    }
                }
                _ => still.push(crawl),
            }
        }
        pending = still;
    }
    for crawl in pending {
        api.ledger.unexpected(
            &format!("crawl of {} (run {})", crawl.site, crawl.run),
            format!("still running after {}s", CRAWL_LIMIT.as_secs()),
        );
    }
}
