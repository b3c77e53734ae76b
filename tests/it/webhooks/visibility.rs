//! What a read token sees of webhooks: no secret. An endpoint's URL can be
//! its key (Slack's incoming webhooks are), so it shows scheme and host
//! only, and the endpoint's answers (which may echo what they were sent, or
//! carry secrets of their own) are left out. A write token sees both.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{LIMIT, READER, WRITER};
use crate::support::{Roles, TestApp, WebhookReceiver, eventually};

const PATH_KEY: &str = "T0AAA/B0BBB/path-key-7731";
const ANSWER: &str = "ok, receiver-session=answer-secret-2290";

#[tokio::test]
async fn a_read_token_sees_webhook_urls_masked_and_no_answers_a_write_token_sees_them() {
    let app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |c| {
        c.api.auth_disabled = false;
        c.api.api_tokens = vec![WRITER.into()];
        c.api.api_read_tokens = vec![READER.into()];
    })
    .await;
    let receiver = WebhookReceiver::start().await;
    receiver.answer(200, ANSWER);
    let url = format!("http://127.0.0.1:{}/services/{PATH_KEY}", receiver.port);
    let (status, created) = app
        .post(
            "/api/webhooks",
            json!({"url": url, "events": ["run.failed"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    receiver.verify_with(created["secret"].as_str().unwrap());
    let id = created["id"].as_i64().unwrap();
    let (status, _) = app
        .post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    receiver.wait_for_messages(1, LIMIT).await;
    let deliveries = format!("/api/webhooks/{id}/deliveries");
    eventually(LIMIT, "the attempt recorded", || async {
        let page = app.get_as(&deliveries, WRITER).await;
        (page["items"][0]["state"] == "delivered").then_some(())
    })
    .await;

    let masked = format!("http://127.0.0.1:{}/***", receiver.port);
    let paths = [
        "/api/webhooks".to_owned(),
        format!("/api/webhooks/{id}"),
        deliveries.clone(),
    ];
    for path in &paths {
        let text = app
            .http
            .get(format!("{}{path}", app.base))
            .bearer_auth(READER)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        for secret in [PATH_KEY, ANSWER, "answer-secret"] {
            assert!(!text.contains(secret), "{path} shows {secret}: {text}");
        }
    }
    let list = app.get_as("/api/webhooks", READER).await;
    assert_eq!(list["items"][0]["url"], masked, "{list}");
    let one = app.get_as(&format!("/api/webhooks/{id}"), READER).await;
    assert_eq!(one["url"], masked, "{one}");
    let page = app.get_as(&deliveries, READER).await;
    let attempt = &page["items"][0]["attempt_log"][0];
    assert_eq!(attempt["status"], 200, "{page}");
    assert_eq!(attempt["response_excerpt"], Value::Null, "{page}");

    // A write token manages the endpoint: it sees both.
    let list = app.get_as("/api/webhooks", WRITER).await;
    assert_eq!(list["items"][0]["url"], url, "{list}");
    let one = app.get_as(&format!("/api/webhooks/{id}"), WRITER).await;
    assert_eq!(one["url"], url, "{one}");
    let page = app.get_as(&deliveries, WRITER).await;
    assert_eq!(
        page["items"][0]["attempt_log"][0]["response_excerpt"],
        ANSWER
    );
    app.stop().await;
}
