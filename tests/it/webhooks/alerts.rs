//! The alerts an operator is woken by: `run.degraded` when a site's markup
//! changes under its selectors, `site.blocked` once when it starts refusing
//! us and `site.recovered` once when it stops, and `items.*` with what a
//! crawl found new, changed (with the field diff) and removed.

use std::time::Duration;

use serde_json::{Value, json};

use super::{LIMIT, assert_links_answer, create_webhook, endpoint};
use crate::{
    changes::{catalog_site, crawl, first_price, title},
    support::{ChangingSite, Look, ON_DEMAND, Received, Roles, TestApp, WebhookReceiver},
};

/// Long enough for a message that would come to have come (the sender is
/// woken by the commit).
const QUIET: Duration = Duration::from_secs(3);

async fn fleet() -> TestApp {
    TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await
}

/// The payloads of the messages of type `kind`, in arrival order; each
/// verified by the reference implementation.
fn of_type(received: &[Received], kind: &str) -> Vec<Value> {
    received
        .iter()
        .filter(|r| r.payload["type"] == kind)
        .map(|r| {
            assert_eq!(r.verified, Ok(()), "{}", r.payload);
            r.payload["data"].clone()
        })
        .collect()
}

/// A completed run of keyword `keyword`, as the API shows it.
async fn completed(app: &TestApp, keyword: i64) -> Value {
    crawl(app, keyword).await.remove(0)
}

#[tokio::test]
async fn a_changing_site_sends_run_degraded_then_site_blocked_and_recovered_once_each() {
    let app = fleet().await;
    let receiver = WebhookReceiver::start().await;
    let shop = ChangingSite::start(Look::Products(3)).await;
    let site = app
        .create_site(shop.site_body(
            "changing shop",
            json!({"expect": {"min_items": 2, "required_fields": ["price"]}, "max_attempts": 3}),
        ))
        .await;
    create_webhook(
        &app,
        &receiver,
        endpoint(
            &receiver,
            &["run.degraded", "site.blocked", "site.recovered"],
        ),
    )
    .await;
    let lamp = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    completed(&app, lamp).await;
    tokio::time::sleep(QUIET).await;
    assert!(receiver.received().is_empty(), "a healthy run is no alert");

    // The markup moves: the run completes with nothing and says why.
    shop.show(Look::Restyled);
    let degraded = completed(&app, lamp).await;
    let received = receiver.wait_for_messages(1, LIMIT).await;
    let alerts = of_type(&received, "run.degraded");
    assert_eq!(alerts.len(), 1, "{received:?}");
    assert_eq!(alerts[0]["run_id"], degraded["id"]);
    assert_eq!(alerts[0]["site"], "changing shop");
    assert_eq!(alerts[0]["health"], "degraded");
    assert_eq!(
        alerts[0]["health_reason"],
        "0 items, fewer than the 2 expected"
    );

    // Refused, and still too few: degraded again, and now blocked, once.
    shop.show(Look::Products(1));
    for _ in 0..2 {
        shop.refuse_next(1);
        completed(&app, lamp).await;
    }
    let received = receiver.wait_for_messages(4, LIMIT).await;
    tokio::time::sleep(QUIET).await;
    let received_now = receiver.received();
    assert_eq!(received_now.len(), received.len(), "nothing more came");
    let blocked = of_type(&received, "site.blocked");
    assert_eq!(blocked.len(), 1, "one alert while it stays blocked");
    assert_eq!(blocked[0]["site_id"], site);
    assert!(
        blocked[0]["reason"]
            .as_str()
            .unwrap()
            .contains("the site refused 1 page request(s)"),
        "{}",
        blocked[0]
    );
    assert_eq!(of_type(&received, "run.degraded").len(), 3);
    assert_links_answer(&app, &blocked[0]).await;
    assert_links_answer(&app, &alerts[0]).await;

    // Healthy again: recovered, once.
    shop.show(Look::Products(3));
    completed(&app, lamp).await;
    completed(&app, lamp).await;
    let received = receiver.wait_for_messages(5, LIMIT).await;
    tokio::time::sleep(QUIET).await;
    let recovered = of_type(&receiver.received(), "site.recovered");
    assert_eq!(recovered.len(), 1, "{received:?}");
    assert_eq!(recovered[0]["site_id"], site);
    let (_, health) = app.get(&format!("/api/sites/{site}/health")).await;
    assert_eq!(health["status"], "healthy", "{health}");
    app.stop().await;
}

#[tokio::test]
async fn a_repriced_catalog_sends_items_changed_with_the_diff_and_items_removed() {
    let app = fleet().await;
    let receiver = WebhookReceiver::start().await;
    let site = catalog_site(&app, "catalog", "http", "", json!({})).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let mut body = endpoint(&receiver, &["items.new", "items.changed", "items.removed"]);
    body["keyword_ids"] = json!([keyword]);
    create_webhook(&app, &receiver, body).await;

    let first = completed(&app, keyword).await;
    let received = receiver.wait_for_messages(1, LIMIT).await;
    let new = of_type(&received, "items.new");
    assert_eq!(new.len(), 1, "{received:?}");
    assert_eq!(new[0]["run_id"], first["id"]);
    assert_eq!(new[0]["count"], 12);
    assert_eq!(new[0]["items"].as_array().unwrap().len(), 12);
    assert_eq!(new[0]["items_truncated"], false);

    app.site.reprice("lamp", 3, "$99.00");
    app.site.withdraw("lamp", 7);
    let second = completed(&app, keyword).await;
    let received = receiver.wait_for_messages(3, LIMIT).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(receiver.received().len(), 3, "no items.new: nothing new");
    let changed = of_type(&received, "items.changed");
    assert_eq!(changed.len(), 1, "{received:?}");
    assert_eq!(changed[0]["run_id"], second["id"]);
    assert_eq!(changed[0]["count"], 1);
    let item = &changed[0]["items"][0];
    assert_eq!(item["fields"]["title"], title("lamp", 3));
    assert_eq!(
        item["diff"],
        json!({"price": {"old": first_price(3), "new": "$99.00"}})
    );
    let removed = of_type(&received, "items.removed");
    assert_eq!(removed[0]["count"], 1);
    assert_eq!(removed[0]["items"][0]["fields"]["title"], title("lamp", 7));
    assert_eq!(removed[0]["items"][0]["change"], "removed");
    for event in [&new[0], &changed[0], &removed[0]] {
        assert_links_answer(&app, event).await;
    }
    app.stop().await;
}
