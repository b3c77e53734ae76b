//! Data-health expectations: a run that completes below its site's `expect`
//! is `degraded` with a reason, and the site's health, the console's data and
//! `crawlfleet_site_health{site}` say so; refusals behind it mark the site
//! blocked until a healthy run.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ChangingSite, ConsoleBrowser, Look, ON_DEMAND, Roles, TestApp};

const LIMIT: Duration = Duration::from_secs(60);

async fn fleet() -> TestApp {
    TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await
}

/// A completed run of keyword `keyword` (an id), as the API shows it.
async fn crawl(app: &TestApp, keyword: i64) -> Value {
    let run = app.crawl(keyword).await[0];
    let run = app.wait_for_run(run, &["completed", "failed"], LIMIT).await;
    assert_eq!(run["state"], "completed", "{run}");
    run
}

async fn health(app: &TestApp, site: i64) -> Value {
    let (status, health) = app.get(&format!("/api/sites/{site}/health")).await;
    assert_eq!(status, 200, "{health}");
    health
}

/// The value of `crawlfleet_site_health{site="<site>"}` on the api's /metrics.
async fn gauge(app: &TestApp, site: i64) -> Option<f64> {
    let text = app
        .http
        .get(format!("{}/metrics", app.metrics_base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sample = format!("crawlfleet_site_health{{site=\"{site}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&sample))
        .map(|value| value.parse().unwrap())
}

#[tokio::test]
async fn a_site_whose_markup_changes_degrades_its_next_run_and_its_health_says_so() {
    let app = fleet().await;
    let shop = ChangingSite::start(Look::Products(3)).await;
    let body = shop.site_body(
        "restyled shop",
        json!({"expect": {"min_items": 3, "required_fields": ["price"]}}),
    );
    let site = app.create_site(body).await;
    assert_eq!(gauge(&app, site).await, None, "no run ended: no sample");
    let lamp = app.create_keyword("lamp", &[site], ON_DEMAND).await;

    let first = crawl(&app, lamp).await;
    assert_eq!(first["health"], "healthy", "{first}");
    assert_eq!(first["health_reason"], Value::Null);
    let before = health(&app, site).await;
    assert_eq!(before["status"], "healthy", "{before}");
    assert_eq!(gauge(&app, site).await, Some(2.0));

    shop.show(Look::Restyled);
    let second = crawl(&app, lamp).await;
    assert_eq!(
        second["state"], "completed",
        "an empty page still completes"
    );
    assert_eq!(second["health"], "degraded", "{second}");
    assert_eq!(
        second["health_reason"],
        "0 items, fewer than the 3 expected"
    );
    let after = health(&app, site).await;
    assert_eq!(after["status"], "degraded", "{after}");
    assert_eq!(after["streak"]["verdict"], "degraded");
    assert_eq!(after["streak"]["runs"], 1);
    assert_eq!(after["streak"]["since"], second["finished_at"]);
    assert_eq!(after["last_success_at"], first["finished_at"]);
    for window in ["last_24h", "last_7d"] {
        assert_eq!(after[window]["runs_ended"], 2, "{after}");
        assert_eq!(after[window]["runs_degraded"], 1);
        assert_eq!(
            after[window]["success_rate"], 1.0,
            "degraded runs completed"
        );
        assert_eq!(after[window]["degraded_rate"], 0.5);
    }
    let degraded: Vec<(i64, bool)> = after["recent_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["items_found"].as_i64().unwrap(),
                r["degraded"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(degraded, [(3, false), (0, true)], "oldest first");
    assert_eq!(gauge(&app, site).await, Some(1.0));

    shop.show(Look::WithoutPrices(3));
    let third = crawl(&app, lamp).await;
    assert_eq!(third["health_reason"], "price missing in 3 of 3 items");
    let streak = &health(&app, site).await["streak"];
    assert_eq!(streak["runs"], 2, "{streak}");
    assert_eq!(streak["since"], second["finished_at"]);

    let (_, every) = app.get("/api/sites/health").await;
    assert_eq!(
        every[0]["status"], "degraded",
        "the fleet view agrees: {every}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_site_refusing_pages_behind_a_degraded_run_is_blocked_until_a_healthy_run() {
    let app = fleet().await;
    let shop = ChangingSite::start(Look::Products(1)).await;
    let site = app
        .create_site(shop.site_body(
            "refusing shop",
            json!({"expect": {"min_items": 2}, "max_attempts": 2}),
        ))
        .await;
    let lamp = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    shop.refuse_next(1);
    let refused = crawl(&app, lamp).await;
    assert_eq!(refused["refusals"], 1, "{refused}");
    assert_eq!(
        refused["health_reason"],
        "1 items, fewer than the 2 expected; the site refused 1 page request(s)"
    );
    let blocked = health(&app, site).await;
    assert_eq!(blocked["status"], "blocked", "{blocked}");
    assert!(blocked["blocked_since"].is_string(), "{blocked}");
    assert_eq!(gauge(&app, site).await, Some(0.0));

    shop.show(Look::Products(2));
    let healthy = crawl(&app, lamp).await;
    assert_eq!(healthy["health"], "healthy", "{healthy}");
    let recovered = health(&app, site).await;
    assert_eq!(recovered["status"], "healthy", "{recovered}");
    assert_eq!(recovered["blocked_since"], Value::Null);
    assert_eq!(gauge(&app, site).await, Some(2.0));
    app.stop().await;
}

#[tokio::test]
async fn empty_runs_are_fine_until_more_than_the_site_allows_in_a_row() {
    let app = fleet().await;
    let shop = ChangingSite::start(Look::Products(0)).await;
    let site = app
        .create_site(shop.site_body("quiet shop", json!({"expect": {"max_empty_runs": 1}})))
        .await;
    let rare = app.create_keyword("rare", &[site], ON_DEMAND).await;
    let other = app.create_keyword("other", &[site], ON_DEMAND).await;
    let first = crawl(&app, rare).await;
    assert_eq!(first["health"], "healthy", "{first}");
    let second = crawl(&app, rare).await;
    assert_eq!(second["health"], "degraded", "{second}");
    assert_eq!(
        second["health_reason"],
        "2 empty runs in a row, at most 1 expected"
    );
    let other = crawl(&app, other).await;
    assert_eq!(other["health"], "healthy", "counted per keyword: {other}");
    app.stop().await;
}

#[tokio::test]
async fn expectations_are_checked_and_shown_as_sent() {
    let app = TestApp::spawn().await;
    let shop = ChangingSite::start(Look::Products(1)).await;
    for (expect, field) in [
        (
            json!({"required_fields": ["prise"]}),
            "expect.required_fields",
        ),
        (json!({"min_items": 0}), "expect.min_items"),
        (json!({"max_empty_runs": -1}), "expect.max_empty_runs"),
        (json!({"min_itmes": 3}), "expect"),
    ] {
        let (status, error) = app
            .post("/api/sites", shop.site_body("s", json!({"expect": expect})))
            .await;
        assert_eq!(status, 422, "{expect}: {error}");
        let named = error["error"]["field"].as_str().unwrap_or_default();
        assert!(named.starts_with(field), "{expect}: {error}");
    }
    let expect =
        json!({"min_items": 5, "required_fields": ["price", "title"], "max_empty_runs": 2});
    let site = app
        .create_site(shop.site_body("s", json!({"expect": expect})))
        .await;
    let (_, view) = app.get(&format!("/api/sites/{site}")).await;
    assert_eq!(view["expect"], expect);
    let mut plain = shop.site_body("s", json!({}));
    plain["name"] = json!("plain");
    let plain = app.create_site(plain).await;
    let (_, view) = app.get(&format!("/api/sites/{plain}")).await;
    assert_eq!(
        view["expect"],
        json!({"min_items": null, "required_fields": [], "max_empty_runs": null})
    );
    app.stop().await;
}

#[tokio::test]
async fn the_console_shows_a_degraded_site_and_edits_what_it_expects() {
    const TOKEN: &str = "site-health-console-token";
    let app = TestApp::spawn_with_console(Roles::fleet(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![TOKEN.into()];
    })
    .await;
    let shop = ChangingSite::start(Look::Restyled).await;
    let site = app
        .create_site(shop.site_body("restyled shop", json!({"expect": {"min_items": 1}})))
        .await;
    let lamp = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let run = crawl(&app, lamp).await;
    assert_eq!(run["health"], "degraded", "{run}");

    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(TOKEN).await;
    browser.go("#/sites").await;
    browser
        .wait_for_text(&format!("tr[data-site='{site}'] .status"), "degraded")
        .await;
    browser.go(&format!("#/runs/{}", run["id"])).await;
    browser
        .wait_for_text("#run-health", "0 items, fewer than the 1 expected")
        .await;
    browser.go(&format!("#/sites/{site}")).await;
    browser.wait_for_text("#site-status", "degraded").await;
    browser
        .wait_for_text("#site-health", "1 degraded run(s) in a row")
        .await;

    browser
        .type_into("#site-expect-required_fields", "title, price")
        .await;
    browser.click("#save-site").await;
    let saved = crate::support::eventually(LIMIT, "the edited expectations saved", || async {
        let (_, view) = app.get(&format!("/api/sites/{site}")).await;
        (view["expect"]["required_fields"] == json!(["price", "title"])).then_some(view)
    })
    .await;
    assert_eq!(saved["expect"]["min_items"], 1, "kept: {saved}");
    browser.close().await;
    app.stop().await;
}
