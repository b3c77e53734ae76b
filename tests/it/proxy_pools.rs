//! A site's proxy draws refusals (429s, closed connections): the fleet
//! retires it for a back-off, no page goes through it while it is retired,
//! the run waits instead of failing, and the proxy returns when its back-off
//! ends; the site's proxies show all of it, credentials masked. The back-off
//! doubles with each retirement in a row, and a page through it resets it;
//! the console's site page shows it. Over HTTP (the browser's proxy is reached
//! through the relay and is not retired).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ConsoleBrowser, Roles, TestApp, TestProxy, eventually};

// A one-page run through a loopback proxy, a 5 s refusal pause and one run
// retry between: seconds; 90 s is far over that on a loaded machine.
const LIMIT: Duration = Duration::from_secs(90);
const CREDENTIALS: (&str, &str) = ("exit-user-3107", "exit-pass-3107");

/// Turns the proxy into a banned exit.
type Misbehave = fn(&TestProxy);

fn site(app: &TestApp, name: &str, proxy: &str) -> Value {
    json!({
        "name": name, "render": "http",
        "search_url": format!("{}/search?q={{keyword}}", app.site.base_url()),
        "item_selector": "li.product",
        "fields": {"title": {"selector": "a.title"}},
        "proxy": proxy,
        "max_attempts": 3,
    })
}

/// The site's proxies as the API shows them, and the raw body.
async fn proxies(app: &TestApp, site_id: i64) -> (Value, String) {
    let (status, body) = app.get(&format!("/api/sites/{site_id}/proxies")).await;
    assert_eq!(status, 200, "{body}");
    let text = body.to_string();
    (body[0].clone(), text)
}

#[tokio::test]
async fn a_refusing_proxy_is_retired_carries_nothing_while_retired_and_returns() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let proxy = TestProxy::start(Some(CREDENTIALS)).await;
    let misbehaviours: [(&str, Misbehave, &str); 2] = [
        ("banned-429", TestProxy::answer_429, "HTTP 429"),
        ("banned-closed", TestProxy::close_connections, "requesting"),
    ];
    for (keyword, misbehave, why) in misbehaviours {
        let site_id = app
            .create_site(site(&app, keyword, &proxy.url("http", Some(CREDENTIALS))))
            .await;
        misbehave(&proxy);
        let turned_away = proxy.turned_away();
        let run = app.crawl_once(keyword, site_id).await;
        let member = eventually(LIMIT, "the proxy is retired", || async {
            let (member, _) = proxies(&app, site_id).await;
            (member["state"] == "retired").then_some(member)
        })
        .await;
        assert_eq!(member["refusals"], 1, "{keyword}: {member}");
        assert_eq!(member["consecutive_retirements"], 1, "{member}");
        assert!(
            member["last_error"].as_str().unwrap().contains(why),
            "{keyword}: {member}"
        );
        assert_eq!(
            member["url"],
            format!("http://***:***@127.0.0.1:{}/", proxy.port)
        );
        assert_eq!(member["label"], format!("127.0.0.1:{}", proxy.port));
        assert!(proxy.turned_away() > turned_away, "{keyword}");

        // Healthy again but still retired: nothing goes through it, and the
        // run waits rather than failing.
        proxy.forward();
        let (forwarded, turned_away) = (proxy.forwarded(), proxy.turned_away());
        tokio::time::sleep(Duration::from_secs(8)).await;
        assert_eq!(
            proxy.forwarded(),
            forwarded,
            "{keyword}: a page while retired"
        );
        assert_eq!(proxy.turned_away(), turned_away, "{keyword}");
        let (_, shown) = app.get(&format!("/api/runs/{run}")).await;
        assert!(
            !["failed", "completed"].contains(&shown["state"].as_str().unwrap()),
            "{keyword}: {shown}"
        );

        // Its back-off over, it returns by itself and the run completes through it.
        sqlx::query("UPDATE proxy_health SET retired_until = now() WHERE site_id = $1")
            .bind(site_id)
            .execute(app.pool())
            .await
            .unwrap();
        let done = app.wait_until_completed(run, LIMIT).await;
        assert_eq!(done["items_found"], 5, "{done}");
        assert!(proxy.forwarded() > forwarded, "{keyword}");
        let (member, text) = proxies(&app, site_id).await;
        assert_eq!(member["state"], "active", "{member}");
        assert!(member["retired_until"].is_null(), "{member}");
        assert_eq!(member["pages"], 1, "{member}");
        assert_eq!(member["consecutive_retirements"], 0, "a page resets it");
        for secret in [CREDENTIALS.0, CREDENTIALS.1] {
            assert!(!text.contains(secret), "{text}");
        }
    }
    // The metrics name the proxy by host:port, never by its credentials (one
    // registry per process: the api's /metrics shows the worker's).
    let metrics = reqwest::get(format!("{}/metrics", app.metrics_base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let label = format!("proxy=\"127.0.0.1:{}\"", proxy.port);
    for name in [
        "crawlfleet_proxy_pages_total",
        "crawlfleet_proxy_refusals_total",
    ] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with(name) && l.contains(&label)),
            "{name}"
        );
    }
    assert!(!metrics.contains(CREDENTIALS.1));
    app.stop().await;
}

#[tokio::test]
async fn the_back_off_doubles_in_a_row_and_a_site_without_proxy_has_none() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let proxy = TestProxy::start(None).await;
    let site_id = app
        .create_site(site(&app, "backoff", &proxy.url("socks5", None)))
        .await;
    let member = crawlfleet::domain::site::ProxyUrl::parse(&proxy.url("socks5", None)).unwrap();
    let pool = app.pool();
    let mut lasted = Vec::new();
    for _ in 0..3 {
        let until = crawlfleet::store::proxy_health::record_refusal(pool, site_id, &member, "x")
            .await
            .unwrap();
        // Refused again while retired: the same retirement, not a longer one.
        let again = crawlfleet::store::proxy_health::record_refusal(pool, site_id, &member, "x")
            .await
            .unwrap();
        assert_eq!(again, until);
        lasted.push((until - chrono::Utc::now()).num_seconds());
        sqlx::query("UPDATE proxy_health SET retired_until = now() WHERE site_id = $1")
            .bind(site_id)
            .execute(pool)
            .await
            .unwrap();
    }
    // 30 s, 60 s, 120 s (less the moments between), as the domain's back-off says.
    for (got, want) in lasted.iter().zip([30, 60, 120]) {
        assert!((want - 5..=want).contains(got), "{lasted:?}");
    }
    let (member_view, _) = proxies(&app, site_id).await;
    assert_eq!(member_view["refusals"], 6, "{member_view}");
    assert_eq!(member_view["consecutive_retirements"], 3);
    crawlfleet::store::proxy_health::record_page(pool, site_id, &member)
        .await
        .unwrap();
    let (member_view, _) = proxies(&app, site_id).await;
    assert_eq!(member_view["consecutive_retirements"], 0);

    let plain = app
        .create_site(json!({
            "name": "no-proxy", "render": "http",
            "search_url": format!("{}/search?q={{keyword}}", app.site.base_url()),
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}},
        }))
        .await;
    let (status, body) = app.get(&format!("/api/sites/{plain}/proxies")).await;
    assert_eq!((status.as_u16(), body), (200, json!([])));
    let (status, body) = app.get("/api/sites/999999/proxies").await;
    assert_eq!(status, 404, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn the_console_shows_a_retired_proxy_on_the_site_page() {
    const TOKEN: &str = "proxy-console-token";
    let app = TestApp::spawn_with_console(Roles::fleet(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![TOKEN.into()];
    })
    .await;
    let proxy = TestProxy::start(Some(CREDENTIALS)).await;
    let url = proxy.url("http", Some(CREDENTIALS));
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{}/api/sites", app.base))
        .bearer_auth(TOKEN)
        .json(&site(&app, "console-proxy", &url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let site_id = created["id"].as_i64().unwrap();
    let member = crawlfleet::domain::site::ProxyUrl::parse(&url).unwrap();
    crawlfleet::store::proxy_health::record_refusal(app.pool(), site_id, &member, "HTTP 429 at x")
        .await
        .unwrap();
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(TOKEN).await;
    browser.go(&format!("#/sites/{site_id}")).await;
    let label = format!("proxy 127.0.0.1:{}", proxy.port);
    browser.wait_for_text("#site-health", &label).await;
    browser.wait_for_text("#site-health", "retired until").await;
    browser.wait_for_text("#site-health", "1 refusals").await;
    browser.close().await;
    app.stop().await;
}
