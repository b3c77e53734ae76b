//! Repairs of a site whose markup changed under its selectors, end to end
//! on a real fleet: the degraded run gets a verified proposal with its
//! evidence, `site.repair_proposed` reaches a webhook receiver, accepting it
//! makes a `repaired` version and a re-crawl that is healthy with the same
//! items; under `repair: auto` it is applied at once and undone when the
//! next run is degraded again; under `off` nothing is looked for.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{ChangingSite, Look, ON_DEMAND, Roles, TestApp, WebhookReceiver, eventually};

/// Runs and repairs of a one-page site end within seconds; this is for a
/// loaded 2-core machine.
pub(crate) const LIMIT: Duration = Duration::from_secs(90);
pub(crate) const PRODUCTS: usize = 6;

async fn fleet() -> TestApp {
    TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await
}

/// A site on `shop` expecting at least 3 items a run, with `repair`.
pub(crate) async fn shop_site(app: &TestApp, shop: &ChangingSite, repair: &str) -> i64 {
    let extra = json!({"expect": {"min_items": 3}, "repair": repair, "max_attempts": 1});
    app.create_site(shop.site_body(&format!("shop {repair}"), extra))
        .await
}

/// Crawls `keyword` now and waits for its one run to complete.
pub(crate) async fn crawled(app: &TestApp, keyword: i64) -> Value {
    let run = app.crawl(keyword).await[0];
    app.wait_until_completed(run, LIMIT).await
}

/// The site's repairs, once one is in `state`.
pub(crate) async fn repair_in(app: &TestApp, site: i64, state: &str) -> Value {
    eventually(LIMIT, &format!("a repair {state}"), || async {
        let (status, repairs) = app.get(&format!("/api/sites/{site}/repairs")).await;
        assert_eq!(status, StatusCode::OK, "{repairs}");
        repairs
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["state"] == state)
            .cloned()
    })
    .await
}

/// A run's items as (title, link, price), in page order.
async fn items(app: &TestApp, run: i64) -> Vec<(String, String, String)> {
    let field = |r: &Value, name: &str| r["fields"][name].as_str().unwrap_or_default().to_owned();
    app.results_of_run(run)
        .await
        .iter()
        .map(|r| (field(r, "title"), field(r, "link"), field(r, "price")))
        .collect()
}

pub(crate) async fn newest_version(app: &TestApp, site: i64) -> Value {
    let (status, versions) = app.get(&format!("/api/sites/{site}/versions")).await;
    assert_eq!(status, StatusCode::OK, "{versions}");
    versions["items"][0].clone()
}

#[tokio::test]
async fn a_redesigned_site_gets_a_verified_repair_that_once_accepted_crawls_the_same_items() {
    let app = fleet().await;
    let receiver = WebhookReceiver::start().await;
    let (status, webhook) = app
        .post(
            "/api/webhooks",
            json!({"url": receiver.url(), "events": ["site.repair_proposed"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{webhook}");
    receiver.verify_with(webhook["secret"].as_str().unwrap());
    let shop = ChangingSite::start(Look::Products(PRODUCTS)).await;
    let site = shop_site(&app, &shop, "suggest").await;
    let lamp = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let good = crawled(&app, lamp).await;
    assert_eq!(good["health"], "healthy", "{good}");
    let good_items = items(&app, good["id"].as_i64().unwrap()).await;
    assert_eq!(good_items.len(), PRODUCTS);

    shop.show(Look::Redesigned(PRODUCTS));
    let bad = crawled(&app, lamp).await;
    assert_eq!(bad["health"], "degraded", "{bad}");
    let repair = repair_in(&app, site, "proposed").await;
    assert_eq!(repair["run_id"], bad["id"], "{repair}");
    let evidence = &repair["evidence"];
    assert_eq!(evidence["failing_page"]["passed"], true, "{evidence}");
    assert_eq!(evidence["failing_page"]["on_page"], PRODUCTS, "{evidence}");
    assert_eq!(
        evidence["failing_page"]["reproduced"], PRODUCTS,
        "{evidence}"
    );
    assert_eq!(evidence["replay"]["differing"], 0, "{evidence}");
    assert_eq!(evidence["good_run_id"], good["id"]);
    assert_eq!(evidence["item_selector"]["before"], "li.product");
    assert_ne!(evidence["item_selector"]["after"], "li.product");
    assert_eq!(evidence["after"].as_array().unwrap().len(), PRODUCTS);

    let messages = receiver.wait_for_messages(1, LIMIT).await;
    let sent = &messages[0].payload;
    assert_eq!(sent["type"], "site.repair_proposed", "{sent}");
    assert_eq!(sent["data"]["repair_id"], repair["id"], "{sent}");
    assert_eq!(sent["data"]["verified"], true, "{sent}");

    let accept = format!("/api/sites/{site}/repairs/{}/accept", repair["id"]);
    let (status, accepted) = app.post(&accept, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{accepted}");
    let version = newest_version(&app, site).await;
    assert_eq!(version["reason"], "repaired", "{version}");
    assert_eq!(version["version"], accepted["version"]);
    let recrawl = accepted["run_id"].as_i64().expect("a re-crawl queued");
    let run = app.wait_until_completed(recrawl, LIMIT).await;
    assert_eq!(run["health"], "healthy", "{run}");
    assert_eq!(
        items(&app, recrawl).await,
        good_items,
        "the same items as before the change"
    );

    let (status, again) = app.post(&accept, json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    assert_eq!(again["error"]["field"], "repair_id", "{again}");
}

#[tokio::test]
async fn auto_applies_a_verified_repair_and_rolls_it_back_when_the_next_run_is_degraded() {
    let app = fleet().await;
    let shop = ChangingSite::start(Look::Products(PRODUCTS)).await;
    let site = shop_site(&app, &shop, "auto").await;
    let lamp = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    crawled(&app, lamp).await;
    let before = newest_version(&app, site).await;

    shop.show(Look::Redesigned(PRODUCTS));
    assert_eq!(crawled(&app, lamp).await["health"], "degraded");
    let applied = repair_in(&app, site, "applied").await;
    assert_eq!(applied["decided_by"], "auto", "{applied}");
    let repaired = newest_version(&app, site).await;
    assert_eq!(repaired["reason"], "repaired", "{repaired}");
    // The re-crawl it queued reads the new markup.
    let healthy = eventually(LIMIT, "the re-crawl to complete healthy", || async {
        let (_, runs) = app.get(&format!("/api/runs?site_id={site}&limit=10")).await;
        runs["items"]
            .as_array()?
            .iter()
            .find(|r| {
                r["state"] == "completed"
                    && r["health"] == "healthy"
                    && r["site_version"] == repaired["version"]
            })
            .cloned()
    })
    .await;
    assert_eq!(healthy["items_found"], PRODUCTS, "{healthy}");

    // The site goes back to its old markup: the repaired selectors find
    // nothing, and the repair is undone.
    shop.show(Look::Products(PRODUCTS));
    assert_eq!(crawled(&app, lamp).await["health"], "degraded");
    let rolled = repair_in(&app, site, "rolled_back").await;
    assert_eq!(rolled["id"], applied["id"]);
    let back = newest_version(&app, site).await;
    assert_eq!(back["reason"], "rolled_back", "{back}");
    assert_eq!(back["restored_from"], before["version"], "{back}");
    let (_, now) = app.get(&format!("/api/sites/{site}")).await;
    assert_eq!(now["item_selector"], "li.product", "{now}");
    assert_eq!(crawled(&app, lamp).await["health"], "healthy");
}

#[tokio::test]
async fn off_looks_for_no_repair_and_bad_input_is_refused_by_field() {
    let app = fleet().await;
    let shop = ChangingSite::start(Look::Products(PRODUCTS)).await;
    let site = shop_site(&app, &shop, "off").await;
    let lamp = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    crawled(&app, lamp).await;
    shop.show(Look::Redesigned(PRODUCTS));
    assert_eq!(crawled(&app, lamp).await["health"], "degraded");
    // A repair is claimed in the job that ended the run, before the next
    // run of the site can end on the same worker.
    shop.show(Look::Products(PRODUCTS));
    crawled(&app, lamp).await;
    let (_, repairs) = app.get(&format!("/api/sites/{site}/repairs")).await;
    assert_eq!(repairs, json!([]), "off: nothing is looked for");

    let (status, body) = app
        .post(
            "/api/sites",
            shop.site_body("bad policy", json!({"repair": "sometimes"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["field"], "repair", "{body}");
    let (status, body) = app
        .post(
            &format!("/api/sites/{site}/repairs/999999/accept"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = app.get("/api/sites/999999/repairs").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
