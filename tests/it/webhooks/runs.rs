//! The events runs send: a run that completes or fails for good sends one
//! signed message, written in the transaction that ended it; a retried
//! attempt sends none; endpoints' site and keyword filters are respected.

use std::{collections::BTreeSet, time::Duration};

use serde_json::{Value, json};

use super::{LIMIT, assert_links_answer, create_webhook, deliveries, endpoint, http_site};
use crate::support::{Received, Roles, TestApp, WebhookReceiver, dispatch_and_claim};

/// How long a test waits for a message that must not come: the sender is
/// woken by the commit and retries are a second apart, so a message that
/// would come comes within this.
const QUIET: Duration = Duration::from_secs(3);

/// The `data.run_id` of each message, sorted.
fn run_ids(received: &[Received]) -> Vec<i64> {
    let mut ids: Vec<i64> = received
        .iter()
        .map(|r| r.payload["data"]["run_id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_run_that_completes_or_fails_for_good_sends_one_signed_message_and_a_retry_none() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let receiver = WebhookReceiver::start().await;
    let webhook = create_webhook(
        &app,
        &receiver,
        endpoint(&receiver, &["run.completed", "run.failed"]),
    )
    .await;
    let ok = http_site(&app, "shop", "/search?q={keyword}").await;
    let missing = http_site(&app, "gone", "/status/404?q={keyword}").await;
    // Fails once with a 500 (retried), then completes: one event, completed.
    let flaky = app
        .one_page_site(
            "flaky",
            "/flaky?fail=1&key=webhooks&q={keyword}",
            json!({"render": "http", "max_attempts": 2}),
        )
        .await;
    let keyword = app
        .create_keyword("lamp", &[ok, missing, flaky], crate::support::ON_DEMAND)
        .await;
    let runs = app.crawl(keyword).await;
    let mut ended = Vec::new();
    for run in &runs {
        ended.push(
            app.wait_for_run(*run, &["completed", "failed"], LIMIT)
                .await,
        );
    }

    let received = receiver.wait_for_messages(3, LIMIT).await;
    tokio::time::sleep(QUIET).await;
    let received_now = receiver.received();
    assert_eq!(
        received_now.len(),
        3,
        "one message per run: {received_now:?}"
    );
    let mut run_list = runs.clone();
    run_list.sort();
    assert_eq!(run_ids(&received), run_list);
    for run in &ended {
        let message = received
            .iter()
            .find(|m| m.payload["data"]["run_id"] == run["id"])
            .unwrap();
        assert_eq!(message.verified, Ok(()), "{message:?}");
        assert!(message.id.starts_with("msg_"), "{}", message.id);
        let (payload, data) = (&message.payload, &message.payload["data"]);
        let expected_type = format!("run.{}", run["state"].as_str().unwrap());
        assert_eq!(payload["type"], expected_type.as_str(), "{payload}");
        assert!(payload["timestamp"].is_string(), "{payload}");
        assert_eq!(data["keyword"], "lamp");
        assert_eq!(data["keyword_id"], keyword);
        assert_eq!(data["site_id"], run["site_id"]);
        assert_eq!(data["state"], run["state"]);
        assert_eq!(data["attempt"], run["attempt"]);
        assert_eq!(data["items_found"], run["items_found"]);
        assert_eq!(data["error_kind"], run["error_kind"]);
        assert_eq!(data["error"], run["error"]);
        assert_eq!(data["links"]["run"], format!("/api/runs/{}", run["id"]));
        assert_links_answer(&app, data).await;
    }
    let by_site = |site: i64| {
        let run = ended.iter().find(|r| r["site_id"] == site).unwrap();
        let message = received
            .iter()
            .find(|m| m.payload["data"]["run_id"] == run["id"])
            .unwrap();
        (run.clone(), message.payload.clone())
    };
    let (run, payload) = by_site(missing);
    assert_eq!(run["state"], "failed");
    assert_eq!(payload["data"]["error_kind"], "http_status");
    assert_eq!(payload["data"]["site"], "gone");
    let (run, payload) = by_site(flaky);
    assert_eq!(
        run["attempt"], 2,
        "the first attempt failed and was retried"
    );
    assert_eq!(payload["type"], "run.completed");
    let (_, payload) = by_site(ok);
    assert!(payload["data"]["items_found"].as_i64().unwrap() > 0);

    let listed = deliveries(&app, webhook["id"].as_i64().unwrap()).await;
    assert_eq!(listed.len(), 3);
    for delivery in &listed {
        assert_eq!(delivery["state"], "delivered", "{delivery}");
        assert_eq!(delivery["attempt_log"].as_array().unwrap().len(), 1);
        assert_eq!(delivery["attempt_log"][0]["status"], 200);
        let sent = &delivery["payload"];
        assert!(
            received
                .iter()
                .any(|m| m.id == delivery["msg_id"] && &m.payload == sent),
            "the payload listed is the one received: {delivery}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn endpoints_hear_only_the_sites_and_keywords_they_filter_on() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let a = http_site(&app, "a", "/search?q={keyword}").await;
    let b = http_site(&app, "b", "/search?q={keyword}").await;
    let both = app
        .create_keyword("lamp", &[a, b], crate::support::ON_DEMAND)
        .await;
    let only_a = app
        .create_keyword("desk", &[a], crate::support::ON_DEMAND)
        .await;
    let (site_a, keyword_desk, failures) = (
        WebhookReceiver::start().await,
        WebhookReceiver::start().await,
        WebhookReceiver::start().await,
    );
    let mut body = endpoint(&site_a, &["run.completed"]);
    body["site_ids"] = json!([a]);
    create_webhook(&app, &site_a, body).await;
    let mut body = endpoint(&keyword_desk, &["run.completed", "run.failed"]);
    body["keyword_ids"] = json!([only_a]);
    create_webhook(&app, &keyword_desk, body).await;
    create_webhook(&app, &failures, endpoint(&failures, &["run.failed"])).await;

    let mut runs = app.crawl(both).await;
    runs.extend(app.crawl(only_a).await);
    let mut ended: Vec<Value> = Vec::new();
    for run in &runs {
        ended.push(app.wait_until_completed(*run, LIMIT).await);
    }
    let ids_where = |pick: &dyn Fn(&Value) -> bool| -> Vec<i64> {
        let mut ids: Vec<i64> = ended
            .iter()
            .filter(|r| pick(r))
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        ids.sort();
        ids
    };
    site_a.wait_for_messages(2, LIMIT).await;
    keyword_desk.wait_for_messages(1, LIMIT).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        run_ids(&site_a.received()),
        ids_where(&|r| r["site_id"] == a)
    );
    assert_eq!(
        run_ids(&keyword_desk.received()),
        ids_where(&|r| r["keyword_id"] == only_a)
    );
    assert!(failures.received().is_empty(), "no run failed");
    let all: BTreeSet<String> = [&site_a, &keyword_desk]
        .iter()
        .flat_map(|r| r.received())
        .map(|m| {
            assert_eq!(m.verified, Ok(()));
            m.id
        })
        .collect();
    // (lamp, b) went nowhere; (desk, a) went to both endpoints as one message.
    assert_eq!(all.len(), 2, "one message per run, one id wherever it went");
    app.stop().await;
}

/// The messages in the outbox, by type.
async fn outbox(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("SELECT event_type FROM webhook_messages ORDER BY id")
        .fetch_all(app.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn only_the_write_that_ends_a_run_records_its_message() {
    use crawlfleet::{
        domain::{
            failure::{Failure, FailureKind},
            page::{PagesRead, PagingEnd},
        },
        store::{self, runs::FenceError},
    };
    // No sender: the outbox keeps what is recorded.
    let app = TestApp::spawn().await;
    let (status, _) = app
        .post(
            "/api/webhooks",
            json!({"url": "http://127.0.0.1:9/hooks", "events": ["run.completed", "run.failed"]}),
        )
        .await;
    assert_eq!(status, 201);
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let pool = app.pool();
    let run = app.crawl_once("lamp", site).await;

    let first = dispatch_and_claim(pool, run, 1, "worker-a")
        .await
        .unwrap()
        .fence;
    let stuck = Failure::new(FailureKind::Stuck, "stuck: test");
    store::runs::fail_attempt(pool, &first, &stuck)
        .await
        .unwrap();
    assert!(
        outbox(&app).await.is_empty(),
        "a retried attempt is no event"
    );

    let second = dispatch_and_claim(pool, run, 2, "worker-b")
        .await
        .unwrap()
        .fence;
    let late = [
        store::runs::complete(pool, &first, PagesRead::new(1, PagingEnd::LastPage))
            .await
            .map(drop),
        store::runs::fail_attempt(pool, &first, &stuck)
            .await
            .map(drop),
    ];
    for result in late {
        assert!(
            matches!(result, Err(FenceError::Superseded { .. })),
            "{result:?}"
        );
    }
    assert!(
        outbox(&app).await.is_empty(),
        "a write that lost is no event"
    );

    store::runs::complete(pool, &second, PagesRead::new(1, PagingEnd::LastPage))
        .await
        .unwrap();
    let again = store::runs::complete(pool, &second, PagesRead::new(1, PagingEnd::LastPage)).await;
    assert!(
        matches!(again, Err(FenceError::Superseded { .. })),
        "{again:?}"
    );
    assert_eq!(outbox(&app).await, ["run.completed"]);

    // A failure no retry mends ends the run at once: one run.failed.
    let run = app.crawl_once("desk", site).await;
    let fence = dispatch_and_claim(pool, run, 1, "worker-c")
        .await
        .unwrap()
        .fence;
    let gone = Failure::new(FailureKind::HttpStatus, "HTTP 404");
    store::runs::fail_attempt(pool, &fence, &gone)
        .await
        .unwrap();
    assert_eq!(outbox(&app).await, ["run.completed", "run.failed"]);
    let pending: i64 =
        sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(pending, 2, "one delivery each, waiting for a sender");
    app.stop().await;
}
