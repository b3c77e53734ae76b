//! A site's identity in every render mode: its user agent and extra headers
//! reach the site, and a proxy (HTTP or SOCKS5, with credentials) carries
//! every request, Chrome's included; responses never show the password.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Backend, Roles, TestApp, TestProxy, on_each_backend};

// One page per run, through a proxy at most, Chrome's start included for the
// first browser run: seconds; 90 s is over ten times that, for a loaded machine.
const LIMIT: Duration = Duration::from_secs(90);
const CREDENTIALS: (&str, &str) = ("crawler", "s3cret");

/// A one-page site of `render` mode searching for items at the fixture.
fn site(app: &TestApp, name: &str, render: &str, extra: Value) -> Value {
    let base = app.site.base_url();
    let mut body = if render == "json" {
        json!({
            "name": name, "render": "json",
            "search_url": format!("{base}/api/search?q={{keyword}}"),
            "json": {"items": "/items"},
            "fields": {"title": {"pointer": "/title"}},
        })
    } else {
        json!({
            "name": name, "render": render,
            "search_url": format!("{base}/search?q={{keyword}}"),
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}},
        })
    };
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    body
}

/// The requests the fixture got for `keyword` on `path`.
fn requests_for(app: &TestApp, path: &str, keyword: &str) -> Vec<crawlfleet_demo::site::Hit> {
    app.site
        .requests(path)
        .into_iter()
        .filter(|h| h.param("q").as_deref() == Some(keyword))
        .collect()
}

async fn crawl_completes(app: &TestApp, keyword: &str, site: i64) {
    let run = app.crawl_to_completion(keyword, site, LIMIT).await;
    assert_eq!(run["items_found"], 5, "{keyword}: {run}");
}

on_each_backend!(the_user_agent_and_headers_of_a_site_reach_it_in_every_mode);
async fn the_user_agent_and_headers_of_a_site_reach_it_in_every_mode(backend: Backend) {
    let app = TestApp::spawn_on(&backend, Roles::fleet(), |_| {}).await;
    let identity = json!({
        "user_agent": "acme-watch/2.0 (+https://acme.example/bot)",
        "headers": {"X-Crawl-Owner": "acme", "Accept-Language": "ko-KR"},
    });
    for (render, path) in [
        ("browser", "/search"),
        ("http", "/search"),
        ("json", "/api/search"),
    ] {
        let keyword = format!("id-{render}");
        let site_id = app
            .create_site(site(&app, &keyword, render, identity.clone()))
            .await;
        crawl_completes(&app, &keyword, site_id).await;
        let hits = requests_for(&app, path, &keyword);
        assert_eq!(hits.len(), 1, "{render}");
        let hit = &hits[0];
        assert_eq!(
            hit.header("user-agent"),
            Some("acme-watch/2.0 (+https://acme.example/bot)"),
            "{render}"
        );
        assert_eq!(hit.header("x-crawl-owner"), Some("acme"), "{render}");
        assert_eq!(hit.header("accept-language"), Some("ko-KR"), "{render}");
    }
    // Without one: Chrome's own agent minus "Headless"; over HTTP, crawlfleet's.
    for render in ["browser", "http"] {
        let keyword = format!("plain-{render}");
        let site_id = app
            .create_site(site(&app, &keyword, render, json!({})))
            .await;
        crawl_completes(&app, &keyword, site_id).await;
        let agent = requests_for(&app, "/search", &keyword)[0]
            .header("user-agent")
            .unwrap()
            .to_owned();
        match render {
            "browser" => assert!(
                agent.contains("Chrome/") && !agent.contains("Headless"),
                "{agent}"
            ),
            _ => assert_eq!(agent, concat!("crawlfleet/", env!("CARGO_PKG_VERSION"))),
        }
        assert!(
            requests_for(&app, "/search", &keyword)[0]
                .header("x-crawl-owner")
                .is_none()
        );
    }
    app.stop().await;
}

on_each_backend!(a_proxy_carries_every_request_of_every_mode);
async fn a_proxy_carries_every_request_of_every_mode(backend: Backend) {
    let app = TestApp::spawn_on(&backend, Roles::fleet(), |_| {}).await;
    let guarded = TestProxy::start(Some(CREDENTIALS)).await;
    let open = TestProxy::start(None).await;
    let cases = [
        ("browser", "http", &guarded, Some(CREDENTIALS)),
        ("browser", "socks5", &guarded, Some(CREDENTIALS)),
        ("browser", "http", &open, None),
        ("http", "http", &guarded, Some(CREDENTIALS)),
        ("http", "socks5", &guarded, Some(CREDENTIALS)),
        ("json", "http", &guarded, Some(CREDENTIALS)),
    ];
    for (render, scheme, proxy, credentials) in cases {
        let keyword = format!("via-{render}-{scheme}-{}", credentials.is_some());
        let proxy_url = proxy.url(scheme, credentials);
        let site_id = app
            .create_site(site(&app, &keyword, render, json!({"proxy": proxy_url})))
            .await;
        crawl_completes(&app, &keyword, site_id).await;
        let path = if render == "json" {
            "/api/search"
        } else {
            "/search"
        };
        let hits = requests_for(&app, path, &keyword);
        assert_eq!(hits.len(), 1, "{keyword}");
        let outbound = proxy.log(|log| log.outbound.clone());
        assert!(
            outbound.contains(&hits[0].peer.unwrap()),
            "{keyword}: the request came from {:?}, not the proxy",
            hits[0].peer
        );
    }
    // Chrome reached the credentialed proxy through its relay (tunnels and
    // SOCKS); reqwest spoke HTTP proxy and SOCKS itself; none was refused.
    let asked = guarded.log(|log| log.asked.clone());
    assert!(
        asked.iter().any(|a| a.starts_with("CONNECT 127.0.0.1:")),
        "{asked:?}"
    );
    assert!(
        asked.iter().any(|a| a.starts_with("GET http://127.0.0.1:")),
        "{asked:?}"
    );
    assert!(asked.iter().any(|a| a.starts_with("SOCKS ")), "{asked:?}");
    assert_eq!(guarded.log(|log| log.refused), 0);
    app.stop().await;
}

const SECRET_HEADER: &str = "Bearer header-secret-4711";

#[tokio::test]
async fn secrets_are_never_shown_stay_sealed_at_rest_and_survive_a_round_trip() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |c| {
        c.api.auth_disabled = false;
        c.api.api_tokens = vec!["writer".into()];
        c.api.api_read_tokens = vec!["reader".into()];
    })
    .await;
    let proxy = TestProxy::start(Some(CREDENTIALS)).await;
    let body = site(
        &app,
        "masked",
        "http",
        json!({"proxy": proxy.url("http", Some(CREDENTIALS)),
               "headers": {"Authorization": SECRET_HEADER, "X-Crawl-Owner": "acme"}}),
    );
    let site_id = app.create_site(body).await;
    let masked_proxy = format!("http://***:***@127.0.0.1:{}/", proxy.port);
    // Read and write tokens alike see header names and masks, no user name.
    for token in ["reader", "writer"] {
        let client = reqwest::Client::new();
        for path in [format!("/api/sites/{site_id}"), "/api/sites".to_owned()] {
            let shown = client
                .get(format!("{}{path}", app.base))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            for secret in [SECRET_HEADER, "acme", CREDENTIALS.0, CREDENTIALS.1] {
                assert!(!shown.contains(secret), "{token} {path}: {shown}");
            }
            assert!(shown.contains(&masked_proxy), "{shown}");
            assert!(shown.contains(r#""Authorization":"***""#), "{shown}");
        }
    }
    // At rest, nothing of them is in the clear.
    let row: String = sqlx::query_scalar("SELECT s::text FROM sites s WHERE id = $1")
        .bind(site_id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    for secret in [SECRET_HEADER, "acme", CREDENTIALS.0, CREDENTIALS.1] {
        assert!(!row.contains(secret), "{secret} stored in the clear: {row}");
    }

    // Sent back as shown (a client editing another field), the secrets stay.
    let (_, shown) = app.get(&format!("/api/sites/{site_id}")).await;
    let mut edited = shown.clone();
    for key in ["id", "created_at", "updated_at", "session_saved_at"] {
        edited.as_object_mut().unwrap().remove(key);
    }
    edited["max_attempts"] = json!(2);
    let (status, body) = app.put(&format!("/api/sites/{site_id}"), edited).await;
    assert_eq!(status, 200, "{body}");
    crawl_completes(&app, "masked", site_id).await;
    assert_eq!(
        proxy.log(|log| log.refused),
        0,
        "the kept credentials were sent"
    );
    let hit = &requests_for(&app, "/search", "masked")[0];
    assert_eq!(hit.header("authorization"), Some(SECRET_HEADER));
    assert_eq!(hit.header("x-crawl-owner"), Some("acme"));

    // A new site cannot be given a mask for a secret.
    for (key, value) in [
        ("proxy", json!(masked_proxy)),
        ("headers", json!({"Authorization": "***"})),
    ] {
        let (status, body) = app
            .post(
                "/api/sites",
                site(&app, "mask-only", "http", json!({ key: value })),
            )
            .await;
        assert_eq!(status, 422, "{body}");
        assert!(
            body["error"]["field"].as_str().unwrap().starts_with(key),
            "{body}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn without_session_key_a_site_may_not_have_secrets_to_seal() {
    let app = TestApp::spawn_with(Roles::default(), |c| c.common.session_key = None).await;
    for (key, value) in [
        ("headers", json!({"X-Api-Key": "k"})),
        ("proxy", json!("http://u:p@proxy.example:3128")),
    ] {
        let (status, body) = app
            .post(
                "/api/sites",
                site(&app, "keyless", "http", json!({ key: value })),
            )
            .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["field"], key, "{body}");
    }
    // A proxy without credentials holds no secret.
    app.create_site(site(
        &app,
        "keyless",
        "http",
        json!({"proxy": "http://proxy.example:3128"}),
    ))
    .await;
    app.stop().await;
}

#[tokio::test]
async fn secrets_an_earlier_version_stored_in_the_clear_are_sealed_at_start() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let site_id = app
        .create_site(site(&app, "legacy", "http", json!({})))
        .await;
    // As a row of the previous schema version, after the migration: its
    // secrets in the unsealed columns.
    sqlx::query(
        "UPDATE sites SET unsealed_headers = $2, header_names = '{X-Api-Key}' WHERE id = $1",
    )
    .bind(site_id)
    .bind(json!({"X-Api-Key": "legacy-secret-99"}))
    .execute(app.pool())
    .await
    .unwrap();
    // The workers read them until they are sealed...
    crawl_completes(&app, "legacy", site_id).await;
    let hit = &requests_for(&app, "/search", "legacy")[0];
    assert_eq!(hit.header("x-api-key"), Some("legacy-secret-99"));
    // ...which an api with SESSION_KEY does as it starts.
    let key = app.config.common.session_key.clone().unwrap();
    let sealed = crawlfleet::store::sites::seal_unsealed(app.pool(), &key)
        .await
        .unwrap();
    assert_eq!(sealed, 1);
    let row: String = sqlx::query_scalar("SELECT s::text FROM sites s WHERE id = $1")
        .bind(site_id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert!(!row.contains("legacy-secret-99"), "{row}");
    app.crawl_to_completion("legacy again", site_id, LIMIT)
        .await;
    let hit = &requests_for(&app, "/search", "legacy again")[0];
    assert_eq!(hit.header("x-api-key"), Some("legacy-secret-99"));
    app.stop().await;
}
