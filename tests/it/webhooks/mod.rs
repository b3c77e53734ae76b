//! Webhooks: endpoints and their rules (here), the events runs send
//! (`runs`), deliveries through a receiver that is down, failing or slow
//! (`retries`), and a process killed mid-delivery (`crash`). Every message
//! is checked by a receiver verifying signatures with the Standard Webhooks
//! reference library.

mod alerts;
mod crash;
mod retries;
mod runs;
mod visibility;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Roles, TestApp, WebhookReceiver};

/// A sent message reaches a receiver on loopback in milliseconds once the
/// sender is woken; retries here are seconds apart. 60 s is ten times the
/// longest wait of these tests, for a loaded machine.
const LIMIT: Duration = Duration::from_secs(60);

/// An endpoint at `receiver` for `events`.
fn endpoint(receiver: &WebhookReceiver, events: &[&str]) -> Value {
    json!({"url": receiver.url(), "events": events})
}

/// Creates an endpoint; the receiver verifies with the secret the response
/// shows. Returns the endpoint.
async fn create_webhook(app: &TestApp, receiver: &WebhookReceiver, body: Value) -> Value {
    let (status, webhook) = app.post("/api/webhooks", body).await;
    assert_eq!(status, StatusCode::CREATED, "{webhook}");
    receiver.verify_with(webhook["secret"].as_str().unwrap());
    webhook
}

/// Every delivery of an endpoint, newest first.
async fn deliveries(app: &TestApp, webhook_id: i64) -> Vec<Value> {
    let (status, page) = app
        .get(&format!("/api/webhooks/{webhook_id}/deliveries"))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"].as_array().unwrap().clone()
}

/// A site answering over plain HTTP at `path_and_query` of the fixture
/// shop: no browser needed.
/// Every link an event's `data` carries (its own, and its run's) answers
/// 200 from the api: the paths the store writes are the api's routes.
async fn assert_links_answer(app: &TestApp, data: &Value) {
    let mut links: Vec<(&String, &Value)> = Vec::new();
    for owner in [data, &data["run"]] {
        links.extend(owner["links"].as_object().into_iter().flatten());
    }
    assert!(!links.is_empty(), "an event with no links: {data}");
    for (name, path) in links {
        let path = path.as_str().expect("a link is a path");
        let (status, body) = app.get(path).await;
        assert_eq!(status, StatusCode::OK, "links.{name} = {path}: {body}");
    }
}

async fn http_site(app: &TestApp, name: &str, path_and_query: &str) -> i64 {
    app.one_page_site(name, path_and_query, json!({"render": "http"}))
        .await
}

const WRITER: &str = "webhook-writer-token";
const READER: &str = "webhook-reader-token";

#[tokio::test]
async fn webhook_endpoints_are_created_read_replaced_and_deleted_showing_the_secret_once() {
    let app = TestApp::spawn_with(Roles::default(), |c| {
        c.api.auth_disabled = false;
        c.api.api_tokens = vec![WRITER.into()];
        c.api.api_read_tokens = vec![READER.into()];
    })
    .await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let body = json!({
        "url": "https://hooks.example.com/crawlfleet",
        "events": ["site.blocked", "run.failed", "run.failed"],
        "site_ids": [site],
        "description": "pager bridge",
    });
    let (status, created) = app.post("/api/webhooks", body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_i64().unwrap();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(
        secret.starts_with("whsec_") && secret.len() > 40,
        "{secret}"
    );
    assert_eq!(created["events"], json!(["run.failed", "site.blocked"]));
    assert_eq!(created["site_ids"], json!([site]));
    assert_eq!(created["keyword_ids"], json!([]));
    assert_eq!(created["enabled"], true);
    assert_eq!(created["disabled_reason"], Value::Null);

    // Masked for every token afterwards, writer and reader alike; a reader
    // sees the URL's scheme and host only (visibility.rs).
    for (token, url) in [
        (WRITER, "https://hooks.example.com/crawlfleet"),
        (READER, "https://hooks.example.com/***"),
    ] {
        let shown = app.get_as(&format!("/api/webhooks/{id}"), token).await;
        assert_eq!(shown["secret"], "whsec_***", "{shown}");
        assert_eq!(shown["url"], url);
    }
    let (_, list) = app.get("/api/webhooks").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["secret"], "whsec_***");
    let reader_write = app
        .http
        .delete(format!("{}/api/webhooks/{id}", app.base))
        .bearer_auth(READER)
        .send()
        .await
        .unwrap();
    assert_eq!(reader_write.status(), StatusCode::FORBIDDEN);

    // The masked form sent back keeps the secret; a new one rotates it.
    let mut changed = created.clone();
    for key in [
        "id",
        "enabled",
        "disabled_at",
        "disabled_reason",
        "created_at",
        "updated_at",
    ] {
        changed.as_object_mut().unwrap().remove(key);
    }
    changed["secret"] = json!("whsec_***");
    changed["events"] = json!(["run.completed"]);
    let (status, kept) = app
        .put(&format!("/api/webhooks/{id}"), changed.clone())
        .await;
    assert_eq!(status, StatusCode::OK, "{kept}");
    assert_eq!(kept["secret"], "whsec_***");
    assert_eq!(kept["events"], json!(["run.completed"]));
    let rotated_secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    changed["secret"] = json!(rotated_secret);
    let (status, rotated) = app.put(&format!("/api/webhooks/{id}"), changed).await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    assert_eq!(
        rotated["secret"], rotated_secret,
        "a rotation shows the new secret"
    );
    let (_, shown) = app.get(&format!("/api/webhooks/{id}")).await;
    assert_eq!(shown["secret"], "whsec_***");

    let (status, _) = app.delete(&format!("/api/webhooks/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, gone) = app.get(&format!("/api/webhooks/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
    let (status, _) = app.put(&format!("/api/webhooks/{id}"), body).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.stop().await;
}

#[tokio::test]
async fn bad_webhooks_are_refused_naming_the_field_and_nothing_is_stored() {
    // As in production: the SSRF guard refuses private and metadata targets.
    let app =
        TestApp::spawn_with(Roles::default(), |c| c.common.allow_private_targets = false).await;
    let good = json!({"url": "https://hooks.example.com/x", "events": ["run.failed"]});
    let cases = [
        (
            "url",
            json!({"url": "http://169.254.169.254/latest/meta-data/"}),
            "metadata",
        ),
        ("url", json!({"url": "http://[fd00:ec2::254]/"}), "metadata"),
        (
            "url",
            json!({"url": "http://10.0.0.7:8080/hook"}),
            "private",
        ),
        ("url", json!({"url": "http://127.0.0.1:9/hook"}), "loopback"),
        ("url", json!({"url": "ftp://hooks.example.com/x"}), "http"),
        (
            "url",
            json!({"url": "https://u:p@hooks.example.com/x"}),
            "credentials",
        ),
        ("url", json!({"url": "not a url"}), "valid URL"),
        ("events", json!({"events": []}), "at least one"),
        (
            "events[1]",
            json!({"events": ["run.failed", "run.exploded"]}),
            "run.completed",
        ),
        ("site_ids", json!({"site_ids": [424242]}), "unknown site"),
        (
            "keyword_ids",
            json!({"keyword_ids": [424242]}),
            "unknown keyword",
        ),
        ("keyword_ids", json!({"keyword_ids": [0]}), "positive"),
        ("secret", json!({"secret": "hunter2"}), "whsec_"),
        ("secret", json!({"secret": "whsec_c2hvcnQ="}), "bytes"),
        ("description", json!({"description": "a\u{0}b"}), "control"),
        ("colour", json!({"colour": "red"}), "unknown field"),
    ];
    for (field, change, why) in cases {
        let mut body = good.clone();
        for (key, value) in change.as_object().unwrap() {
            body[key] = value.clone();
        }
        let (status, error) = app.post("/api/webhooks", body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {error}");
        assert_eq!(error["error"]["field"], field, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{field}: {message}");
    }
    let (_, list) = app.get("/api/webhooks").await;
    assert_eq!(list["items"], json!([]), "nothing half-written");
    let outbox: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(outbox, 0, "a refused URL is never sent to");
    app.stop().await;
}

#[tokio::test]
async fn a_test_reaches_that_endpoint_only_signed_and_marked_as_a_test() {
    let app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |_| {}).await;
    let (tested, other) = (
        WebhookReceiver::start().await,
        WebhookReceiver::start().await,
    );
    let webhook = create_webhook(&app, &tested, endpoint(&tested, &["run.failed"])).await;
    create_webhook(&app, &other, endpoint(&other, &["run.failed"])).await;
    let id = webhook["id"].as_i64().unwrap();

    let (status, queued) = app
        .post(
            &format!("/api/webhooks/{id}/test"),
            json!({"type": "site.blocked"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    assert_eq!(queued["state"], "pending");
    let (status, _) = app
        .post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let received = tested.wait_for_messages(2, LIMIT).await;
    for message in &received {
        assert_eq!(message.verified, Ok(()), "{message:?}");
        assert_eq!(message.payload["data"]["test"], true);
        assert_eq!(message.payload["data"]["webhook_id"], id);
        assert!(message.payload["timestamp"].is_string());
    }
    let types: Vec<&Value> = received.iter().map(|m| &m.payload["type"]).collect();
    assert_eq!(types, [&json!("site.blocked"), &json!("run.failed")]);
    assert_eq!(received[0].id, queued["msg_id"].as_str().unwrap());

    let (status, missing) = app.post("/api/webhooks/999/test", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        other.received().is_empty(),
        "a test goes to its endpoint only"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_target_the_guard_refuses_when_sending_is_never_connected_to() {
    let (receiver, trap) = (
        WebhookReceiver::start().await,
        WebhookReceiver::start().await,
    );
    // As in production, with the receiver's address and port let through.
    let allowed = format!("127.0.0.1:{}", receiver.port);
    let app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |c| {
        c.common.allow_private_targets = false;
        c.common.allowed_private_targets = vec![allowed.parse().unwrap()];
        c.scheduler.webhook_retry_schedule_secs = vec![1];
    })
    .await;
    let webhook = create_webhook(&app, &receiver, endpoint(&receiver, &["run.failed"])).await;
    let id = webhook["id"].as_i64().unwrap();
    app.post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    receiver.wait_for_messages(1, LIMIT).await;

    // Where the endpoint leads changes after it was checked (as a name that
    // resolves elsewhere later would): the sender judges it again.
    sqlx::query("UPDATE webhooks SET url = $1 WHERE id = $2")
        .bind(trap.url())
        .bind(id)
        .execute(app.pool())
        .await
        .unwrap();
    let (_, queued) = app
        .post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    let failed = crate::support::eventually(LIMIT, "the refused delivery failed", || async {
        let listed = deliveries(&app, id).await;
        let delivery = listed.into_iter().find(|d| d["id"] == queued["id"])?;
        (delivery["state"] == "failed").then_some(delivery)
    })
    .await;
    for attempt in failed["attempt_log"].as_array().unwrap() {
        assert_eq!(attempt["status"], Value::Null, "{attempt}");
        let error = attempt["error"].as_str().unwrap();
        assert!(
            error.contains("not sent") && error.contains("loopback"),
            "{error}"
        );
    }
    assert!(
        trap.received().is_empty(),
        "the refused target was never reached"
    );
    app.stop().await;
}
