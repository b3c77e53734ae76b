//! A site's proxy draws refusals (429s, closed connections): the fleet
//! retires it for a back-off, no page goes through it while it is retired,
//! the run waits instead of failing, and the proxy returns when its back-off
//! ends; the site's proxies show all of it, credentials masked. The back-off
//! doubles with each retirement in a row, and a page through it resets it;
//! the console's site page shows it.
//!
//! A site's `proxy_pool`: its members share the pages by weight (counted at
//! three loopback proxies), a member that draws a 429 is retired and its
//! share goes to the others until its back-off ends, a pool entirely
//! retired pauses the site (its health says why and until when) and the run
//! waits instead of failing, a pool is checked, masked and versioned as
//! `proxy` is, the console keeps it, and a browser run leaves through a
//! member not retired.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ConsoleBrowser, Roles, TestApp, TestProxy, eventually};

use axum::{Router, extract::Query, response::Html, routing::get};
use std::collections::HashMap;

// A one-page run through a loopback proxy, a 5 s refusal pause and one run
// retry between: seconds; 90 s is far over that on a loaded machine.
const LIMIT: Duration = Duration::from_secs(90);
const CREDENTIALS: (&str, &str) = ("exit-user-3107", "exit-pass-3107");

/// The domain's first back-off, as a worker uses it unless told otherwise.
const FIRST: Duration = crawlfleet::domain::site::FIRST_BACKOFF;

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
        let until =
            crawlfleet::store::proxy_health::record_refusal(pool, site_id, &member, "x", FIRST)
                .await
                .unwrap();
        // Refused again while retired: the same retirement, not a longer one.
        let again =
            crawlfleet::store::proxy_health::record_refusal(pool, site_id, &member, "x", FIRST)
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
    crawlfleet::store::proxy_health::record_refusal(
        app.pool(),
        site_id,
        &member,
        "HTTP 429 at x",
        FIRST,
    )
    .await
    .unwrap();
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(TOKEN).await;
    browser.go(&format!("#/sites/{site_id}")).await;
    let label = format!("proxy 127.0.0.1:{}", proxy.port);
    browser.wait_for_text("#site-health", &label).await;
    browser.wait_for_text("#site-health", "retired until").await;
    browser.wait_for_text("#site-health", "1 refusals").await;

    // A pool site saved from the console's form keeps its pool, and its
    // member's credentials (shown masked, sent back masked).
    let mut body = site(&app, "console-pool", &url);
    body["proxy"] = Value::Null;
    body["proxy_pool"] = json!({"members": [{"url": url, "weight": 3}], "rotation": "per_page"});
    let created: Value = client
        .post(format!("{}/api/sites", app.base))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let pool_site = created["id"].as_i64().unwrap();
    browser.go(&format!("#/sites/{pool_site}")).await;
    browser.wait_for_text("#site-title", "console-pool").await;
    browser.click("#save-site").await;
    browser
        .wait_for_text(".toast:last-of-type", "Site saved")
        .await;
    let key = app.config.common.session_key.as_ref();
    let stored = crawlfleet::store::sites::get(app.pool(), pool_site, key)
        .await
        .unwrap()
        .unwrap();
    let pool = stored.spec.identity.pool.expect("the pool is kept");
    assert_eq!(pool.members()[0].proxy, member);
    assert_eq!(pool.members()[0].weight, 3);
    assert_eq!(pool.rotation().as_str(), "per_page");
    browser.close().await;
    app.stop().await;
}

/// A search on 127.0.0.1 of `PAGES` numbered pages for a keyword starting
/// with `spread` (pages enough for the members' shares to show their
/// weights), `FEW` for any other, one item each.
const PAGES: usize = 90;
const FEW: usize = 12;

async fn numbered_pages() -> (String, tokio::task::JoinHandle<()>) {
    async fn page(Query(q): Query<HashMap<String, String>>) -> Html<String> {
        let page: usize = q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
        let spread = q.get("q").is_some_and(|k| k.starts_with("spread"));
        if page > if spread { PAGES } else { FEW } {
            return Html("<html><body><ul></ul></body></html>".into());
        }
        Html(format!(
            "<html><body><ul><li class=\"product\"><a class=\"title\" href=\"/p/{page}\">item {page}</a></li></ul></body></html>"
        ))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route("/list", get(page));
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (base, task)
}

fn pool_site(name: &str, base: &str, pool: Value, pages: usize) -> Value {
    json!({
        "name": name, "render": "http",
        "search_url": format!("{base}/list?q={{keyword}}&page={{page}}"),
        "item_selector": "li.product",
        "fields": {"title": {"selector": "a.title"}},
        "max_pages": pages,
        "respect_robots": false,
        "proxy_pool": pool,
        "max_attempts": 3,
    })
}

/// Each member of the site's proxies as the API shows it, by label.
async fn members(app: &TestApp, site_id: i64) -> HashMap<String, Value> {
    let (status, body) = app.get(&format!("/api/sites/{site_id}/proxies")).await;
    assert_eq!(status, 200, "{body}");
    body.as_array()
        .unwrap()
        .iter()
        .map(|m| (m["label"].as_str().unwrap().to_owned(), m.clone()))
        .collect()
}

#[tokio::test]
async fn a_pool_spreads_pages_by_weight_and_a_refusing_member_is_retired_until_its_back_off_ends() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |config| {
        config.worker.proxy_first_backoff_secs = 3;
    })
    .await;
    let (base, shop) = numbered_pages().await;
    let light = TestProxy::start(None).await;
    let middle = TestProxy::start(None).await;
    let heavy = TestProxy::start(Some(CREDENTIALS)).await;
    let pool = json!({"rotation": "per_page", "members": [
        {"url": light.url("http", None), "weight": 1},
        {"url": middle.url("http", None), "weight": 2},
        {"url": heavy.url("http", Some(CREDENTIALS)), "weight": 6},
    ]});
    let site_id = app
        .create_site(pool_site("pool-weights", &base, pool, PAGES))
        .await;
    let run = app.crawl_once("spread", site_id).await;
    let done = app.wait_until_completed(run, LIMIT).await;
    assert_eq!(done["items_found"], PAGES, "{done}");
    let counts = [light.forwarded(), middle.forwarded(), heavy.forwarded()];
    assert_eq!(counts.iter().sum::<usize>(), PAGES, "{counts:?}");
    // By weight: 10, 20 and 60 of 90 expected. Ignoring the weights, each
    // would carry about 30 (the heavy one over 45 is four deviations away).
    assert!(counts[2] > 45, "the heaviest carries most: {counts:?}");
    assert!(counts[0] < 20, "the lightest carries least: {counts:?}");
    assert!(
        counts[0] > 0 && counts[1] > 0,
        "every member carries: {counts:?}"
    );
    let shown = members(&app, site_id).await;
    let heavy_label = format!("127.0.0.1:{}", heavy.port);
    assert_eq!(shown[&heavy_label]["weight"], 6);
    assert_eq!(shown[&heavy_label]["pages"], counts[2] as i64);
    assert_eq!(
        shown[&heavy_label]["url"],
        format!("http://***:***@127.0.0.1:{}/", heavy.port)
    );

    // The heaviest is banned: its first refusal retires it, and the run's
    // pages go through the others while it is retired.
    heavy.answer_429();
    let before = [light.forwarded(), middle.forwarded(), heavy.forwarded()];
    let run = app.crawl_once("banned", site_id).await;
    let member = eventually(LIMIT, "the heavy member is retired", || async {
        let member = members(&app, site_id).await.remove(&heavy_label).unwrap();
        (member["state"] == "retired").then_some(member)
    })
    .await;
    assert!(
        member["last_error"].as_str().unwrap().contains("HTTP 429"),
        "{member}"
    );
    let status = app.get(&format!("/api/sites/{site_id}/health")).await.1;
    assert!(
        status["paused_until"].is_null(),
        "two members carry on: {status}"
    );
    let done = app.wait_until_completed(run, LIMIT).await;
    assert_eq!(done["items_found"], FEW, "{done}");
    assert_eq!(
        heavy.forwarded(),
        before[2],
        "nothing went through it banned"
    );
    let refused = heavy.turned_away();
    assert!(refused >= 1);
    let others = light.forwarded() + middle.forwarded() - before[0] - before[1];
    // Its pages, and the empty one after them that ends the paging.
    assert_eq!(others, FEW + 1, "its share went to the others");
    // Refused once, it carried nothing until its back-off (3 s here) ended:
    // a 12-page run takes far less, so it was refused at most a few times.
    assert!(
        refused <= 3,
        "retired, it was not tried again at once: {refused}"
    );

    // Its back-off over, it returns and carries pages again.
    heavy.forward();
    eventually(LIMIT, "the heavy member returns", || async {
        let member = members(&app, site_id).await.remove(&heavy_label).unwrap();
        (member["state"] == "active").then_some(())
    })
    .await;
    let before = heavy.forwarded();
    let run = app.crawl_once("spread-again", site_id).await;
    app.wait_until_completed(run, LIMIT).await;
    assert!(
        heavy.forwarded() > before + 30,
        "it carries its share again"
    );
    let member = members(&app, site_id).await.remove(&heavy_label).unwrap();
    assert_eq!(member["state"], "active", "{member}");
    assert_eq!(member["consecutive_retirements"], 0, "{member}");
    let text = app
        .get(&format!("/api/sites/{site_id}"))
        .await
        .1
        .to_string();
    assert!(!text.contains(CREDENTIALS.1), "{text}");
    shop.abort();
    app.stop().await;
}

#[tokio::test]
async fn a_pool_entirely_banned_pauses_the_site_says_why_and_the_run_goes_on_when_one_returns() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let (base, shop) = numbered_pages().await;
    let first = TestProxy::start(None).await;
    let second = TestProxy::start(None).await;
    let pool = json!({"members": [
        {"url": first.url("http", None)}, {"url": second.url("socks5", None)},
    ]});
    let site_id = app
        .create_site(pool_site("pool-banned", &base, pool, 2))
        .await;
    first.answer_429();
    second.close_connections();
    let run = app.crawl_once("banned", site_id).await;
    let health = eventually(LIMIT, "the site is paused", || async {
        let (_, health) = app.get(&format!("/api/sites/{site_id}/health")).await;
        health["paused_until"].is_string().then_some(health)
    })
    .await;
    let reason = health["pause_reason"].as_str().unwrap();
    assert!(
        reason.contains("every proxy of the site is retired"),
        "{reason}"
    );
    let shown = members(&app, site_id).await;
    assert!(shown.values().all(|m| m["state"] == "retired"), "{shown:?}");

    // Paused, the run waits: neither failed nor sent out another way.
    first.forward();
    second.forward();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, shown_run) = app.get(&format!("/api/runs/{run}")).await;
    assert!(
        !["failed", "completed"].contains(&shown_run["state"].as_str().unwrap()),
        "{shown_run}"
    );
    assert_eq!(first.forwarded() + second.forwarded(), 0);

    // A member's back-off over (as if 30 s had passed), the run goes on.
    sqlx::query("UPDATE proxy_health SET retired_until = now() WHERE site_id = $1 AND proxy = $2")
        .bind(site_id)
        .bind(format!("http://127.0.0.1:{}", first.port))
        .execute(app.pool())
        .await
        .unwrap();
    let done = app.wait_until_completed(run, LIMIT).await;
    assert_eq!(done["items_found"], 2, "{done}");
    assert_eq!(done["attempt"], 1, "waiting burns no attempt: {done}");
    assert_eq!(first.forwarded(), 2, "through the member that returned");
    assert_eq!(second.forwarded(), 0, "still retired");
    let (_, health) = app.get(&format!("/api/sites/{site_id}/health")).await;
    assert!(health["paused_until"].is_null(), "{health}");
    shop.abort();
    app.stop().await;
}

#[tokio::test]
async fn a_pool_is_checked_masked_kept_when_sent_back_masked_and_versioned() {
    // The guard as deployed: only loopback (the fixture, the proxies) let through.
    let app = TestApp::spawn_without_browsers(Roles::default(), |config| {
        config.common.allow_private_targets = false;
        config.common.allowed_private_targets = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let base = app.site.base_url();
    let good = |url: &str| json!({"members": [{"url": url, "weight": 2}]});
    let refused = [
        (
            {
                let mut body = pool_site("both", &base, good("http://127.0.0.1:9"), 1);
                body["proxy"] = json!("http://127.0.0.1:8");
                body
            },
            "proxy_pool",
        ),
        (
            pool_site(
                "bad-url",
                &base,
                json!({"members": [{"url": "http://127.0.0.1:9"}, {"url": "ftp://127.0.0.1:21"}]}),
                1,
            ),
            "proxy_pool.members[1].url",
        ),
        (
            pool_site(
                "bad-weight",
                &base,
                json!({"members": [{"url": "http://127.0.0.1:9", "weight": 0}]}),
                1,
            ),
            "proxy_pool.members[0].weight",
        ),
        (
            pool_site(
                "too-many",
                &base,
                json!({"members": (0..65).map(|i| json!({"url": format!("http://127.0.0.1:{}", 1000 + i)})).collect::<Vec<_>>()}),
                1,
            ),
            "proxy_pool.members",
        ),
        (
            pool_site("metadata", &base, good("http://169.254.169.254:80"), 1),
            "proxy_pool.members[0].url",
        ),
    ];
    for (body, field) in refused {
        let (status, answer) = app.post("/api/sites", body).await;
        assert_eq!(status, 422, "{field}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{answer}");
    }

    let secret = format!("http://{}:{}@127.0.0.1:3128", CREDENTIALS.0, CREDENTIALS.1);
    let mut body = pool_site("pool-kept", &base, good(&secret), 1);
    let site_id = app.create_site(body.clone()).await;
    let (_, shown) = app.get(&format!("/api/sites/{site_id}")).await;
    assert_eq!(
        shown["proxy_pool"],
        json!({"members": [{"url": "http://***:***@127.0.0.1:3128/", "weight": 2}], "rotation": "per_run"})
    );
    // Sent back masked, with another weight: the credentials are kept.
    body["proxy_pool"] = shown["proxy_pool"].clone();
    body["proxy_pool"]["members"][0]["weight"] = json!(5);
    body["proxy_pool"]["rotation"] = json!("sticky");
    let (status, answer) = app
        .put(&format!("/api/sites/{site_id}"), body.clone())
        .await;
    assert_eq!(status, 200, "{answer}");
    let site =
        crawlfleet::store::sites::get(app.pool(), site_id, app.config.common.session_key.as_ref())
            .await
            .unwrap()
            .unwrap();
    let pool = site.spec.identity.pool.unwrap();
    assert_eq!(pool.members()[0].proxy.expose(), format!("{secret}/"));
    assert_eq!(pool.members()[0].weight, 5);
    // At rest the credentials are sealed: the pool's column shows them masked.
    let column: String = sqlx::query_scalar("SELECT proxy_pool::text FROM sites WHERE id = $1")
        .bind(site_id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert!(
        column.contains("***") && !column.contains(CREDENTIALS.1),
        "{column}"
    );
    // Masked credentials do not follow the pool to another address.
    body["proxy_pool"]["members"][0]["url"] = json!("http://***:***@127.0.0.1:3129");
    let (status, answer) = app.put(&format!("/api/sites/{site_id}"), body).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["field"], "proxy_pool.members[0].url");

    // The versions record the change, masked.
    let (_, listed) = app.get(&format!("/api/sites/{site_id}/versions")).await;
    let newest = &listed["items"][0];
    let paths: Vec<&str> = newest["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["proxy_pool.members", "proxy_pool.rotation"],
        "{newest}"
    );
    let text = listed.to_string();
    assert!(!text.contains(CREDENTIALS.1), "{text}");
    let (_, one) = app.get(&format!("/api/sites/{site_id}/versions/1")).await;
    assert!(!one.to_string().contains(CREDENTIALS.1), "{one}");
    app.stop().await;
}

#[tokio::test]
async fn a_browser_run_leaves_through_one_member_the_fleet_has_not_retired() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let retired = TestProxy::start(None).await;
    let open = TestProxy::start(Some(CREDENTIALS)).await;
    let site_id = app
        .create_site(json!({
            "name": "browser-pool", "render": "browser",
            "search_url": format!("{}/search?q={{keyword}}&page={{page}}", app.site.base_url()),
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}},
            "max_pages": 2,
            // robots.txt goes through any member, whatever its health.
            "respect_robots": false,
            "proxy_pool": {"rotation": "per_page", "members": [
                {"url": retired.url("http", None), "weight": 1000},
                {"url": open.url("http", Some(CREDENTIALS)), "weight": 1},
            ]},
        }))
        .await;
    let member = crawlfleet::domain::site::ProxyUrl::parse(&retired.url("http", None)).unwrap();
    crawlfleet::store::proxy_health::record_refusal(
        app.pool(),
        site_id,
        &member,
        "HTTP 429",
        FIRST,
    )
    .await
    .unwrap();
    let run = app.crawl_once("laptop", site_id).await;
    let done = app.wait_until_completed(run, LIMIT).await;
    assert_eq!(done["pages_crawled"], 2, "{done}");
    // Chrome's context left through the member not retired (with its
    // credentials, through the worker's relay), for both pages.
    assert_eq!(retired.forwarded(), 0, "nothing through the retired member");
    assert!(open.forwarded() > 0, "through the open member");
    let open_label = format!("127.0.0.1:{}", open.port);
    let shown = members(&app, site_id).await;
    assert_eq!(shown[&open_label]["pages"], 2, "{shown:?}");
    app.stop().await;
}
