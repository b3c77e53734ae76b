//! Deliveries through trouble: a receiver that is down for a while gets
//! every message once it is up, none twice; one that answers 500 shows each
//! attempt, and after a whole retry schedule its endpoint is disabled and
//! says why; enabled again, a resend delivers. A sender cut off from
//! Postgres sends what was recorded meanwhile once it is back.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{LIMIT, create_webhook, deliveries, endpoint, http_site};
use crate::support::{
    CuttableProxy, Roles, TestApp, WebhookReceiver, database_server, eventually, free_port,
};

/// Waits until `check` holds for the endpoint's deliveries; returns them.
async fn deliveries_when(
    app: &TestApp,
    webhook_id: i64,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    eventually(LIMIT, what, || async {
        let listed = deliveries(app, webhook_id).await;
        check(&listed).then_some(listed)
    })
    .await
}

fn attempts(delivery: &Value) -> &Vec<Value> {
    delivery["attempt_log"].as_array().unwrap()
}

#[tokio::test]
async fn a_receiver_down_for_a_while_gets_every_message_once_it_is_up_and_none_twice() {
    // Retries a second or two apart, for about 20 s.
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |c| {
        c.scheduler.webhook_retry_schedule_secs = vec![1, 2, 2, 2, 2, 2, 2, 2, 2, 2];
    })
    .await;
    let port = free_port().unwrap();
    let (status, webhook) = app
        .post(
            "/api/webhooks",
            json!({"url": format!("http://127.0.0.1:{port}/hooks"), "events": ["run.completed"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{webhook}");
    let id = webhook["id"].as_i64().unwrap();
    let site = http_site(&app, "shop", "/search?q={keyword}").await;
    let runs = app.queue_crawls(site, "lamp ", 4).await;
    for run in &runs {
        app.wait_until_completed(*run, LIMIT).await;
    }
    // Down: nothing listens on the port, every attempt is refused.
    let failed_twice = deliveries_when(&app, id, "4 deliveries tried twice", |listed| {
        listed.len() == 4 && listed.iter().all(|d| attempts(d).len() >= 2)
    })
    .await;
    for delivery in &failed_twice {
        assert_eq!(delivery["state"], "pending", "{delivery}");
        let first = &attempts(delivery)[0];
        assert_eq!(first["status"], Value::Null, "{first}");
        let error = first["error"].as_str().unwrap();
        assert!(error.to_lowercase().contains("refused"), "{error}");
    }

    let receiver = WebhookReceiver::start_on(port).await;
    let up_at = std::time::Instant::now();
    receiver.verify_with(webhook["secret"].as_str().unwrap());
    let received = receiver.wait_for_messages(4, LIMIT).await;
    // Retries 2 s apart (±10%) and a poll every second: each message comes
    // within about 3 s of the receiver's return; 10 s allows a loaded machine.
    for message in &received {
        let after = message.arrived_at.duration_since(up_at);
        assert!(
            after < Duration::from_secs(10),
            "{after:?} after it came up"
        );
    }
    let listed = deliveries_when(&app, id, "4 deliveries delivered", |listed| {
        listed.iter().all(|d| d["state"] == "delivered")
    })
    .await;
    // Nothing is left to send: wait out a few retry intervals for a repeat.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let arrivals = receiver.arrivals_by_id();
    assert_eq!(arrivals.len(), 4);
    assert!(
        arrivals.values().all(|n| *n == 1),
        "none twice: {arrivals:?}"
    );
    for message in receiver.received() {
        assert_eq!(message.verified, Ok(()), "signed anew on the late attempt");
    }
    for delivery in &listed {
        let log = attempts(delivery);
        assert!(log.len() >= 3, "{delivery}");
        assert_eq!(log.last().unwrap()["status"], 200);
        assert!(arrivals.contains_key(delivery["msg_id"].as_str().unwrap()));
    }
    app.stop().await;
}

#[tokio::test]
async fn an_endpoint_failing_a_whole_schedule_is_disabled_says_why_and_a_resend_delivers() {
    let app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |c| {
        c.scheduler.webhook_retry_schedule_secs = vec![1, 1];
    })
    .await;
    let receiver = WebhookReceiver::start().await;
    receiver.answer(500, &format!("boom: {}", "x".repeat(3000)));
    let webhook = create_webhook(&app, &receiver, endpoint(&receiver, &["run.failed"])).await;
    let id = webhook["id"].as_i64().unwrap();
    let (status, queued) = app
        .post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let delivery_id = queued["id"].as_i64().unwrap();

    let listed = deliveries_when(&app, id, "the delivery failed", |listed| {
        listed[0]["state"] == "failed"
    })
    .await;
    let log = attempts(&listed[0]);
    assert_eq!(log.len(), 3, "the first attempt and two retries: {log:?}");
    for attempt in log {
        assert_eq!(attempt["status"], 500, "{attempt}");
        assert!(attempt["latency_ms"].as_i64().unwrap() >= 0);
        let excerpt = attempt["response_excerpt"].as_str().unwrap();
        assert!(excerpt.starts_with("boom: xxx"), "{excerpt}");
        assert_eq!(excerpt.len(), 1024, "capped");
    }
    let (_, disabled) = app.get(&format!("/api/webhooks/{id}")).await;
    assert_eq!(disabled["enabled"], false, "{disabled}");
    assert!(disabled["disabled_at"].is_string(), "{disabled}");
    let reason = disabled["disabled_reason"].as_str().unwrap();
    assert!(
        reason.contains("no delivery succeeded") && reason.contains("HTTP 500"),
        "{reason}"
    );

    // Nothing goes to a disabled endpoint.
    let resend = format!("/api/webhooks/{id}/deliveries/{delivery_id}/resend");
    let (status, refused) = app.post(&resend, json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let (status, _) = app
        .post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);

    // Mended and enabled again: a resend delivers the same message.
    receiver.answer(200, "ok");
    let (status, enabled) = app
        .put(
            &format!("/api/webhooks/{id}"),
            json!({"url": receiver.url(), "events": ["run.failed"], "enabled": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{enabled}");
    assert_eq!(enabled["enabled"], true);
    assert_eq!(enabled["disabled_reason"], Value::Null);
    let (status, resent) = app.post(&resend, json!({})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{resent}");
    assert_eq!(resent["state"], "pending");
    let listed = deliveries_when(&app, id, "the resend delivered", |listed| {
        listed[0]["state"] == "delivered"
    })
    .await;
    let log = attempts(&listed[0]);
    assert_eq!(log.len(), 4, "{log:?}");
    assert_eq!(log[3]["status"], 200);
    assert_eq!(log[3]["response_excerpt"], "ok");
    let arrivals = receiver.arrivals_by_id();
    assert_eq!(
        arrivals.len(),
        1,
        "one message, sent four times: {arrivals:?}"
    );
    assert_eq!(arrivals[queued["msg_id"].as_str().unwrap()], 4);
    assert!(receiver.received().iter().all(|m| m.verified.is_ok()));

    let (status, _) = app
        .post(
            &format!("/api/webhooks/{id}/deliveries/999/resend"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.stop().await;
}

#[tokio::test]
async fn a_message_recorded_while_the_sender_cannot_reach_postgres_arrives_once_it_can() {
    use crawlfleet::{
        domain::webhook::{WebhookEvent, WebhookEventType},
        store,
    };
    let server = database_server();
    let proxy = CuttableProxy::start((
        server.host_str().unwrap().to_owned(),
        server.port().unwrap_or(5432),
    ))
    .await;
    // The roles reach Postgres through the proxy; the test directly.
    let app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |c| {
        c.common.database_url = proxy.route(&c.common.database_url);
    })
    .await;
    let receiver = WebhookReceiver::start().await;
    let webhook = create_webhook(&app, &receiver, endpoint(&receiver, &["run.failed"])).await;
    let id = webhook["id"].as_i64().unwrap();
    app.post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    receiver.wait_for_messages(1, LIMIT).await;

    // The sender loses Postgres (its leadership with it); meanwhile a run
    // ends where Postgres is still reachable, recording its message.
    proxy.cut();
    let mut tx = app.pool().begin().await.unwrap();
    let event = WebhookEvent {
        event_type: WebhookEventType::RunFailed,
        site_id: None,
        keyword_id: None,
        data: json!({"run_id": 1}),
    };
    let msg_id = store::webhooks::record(&mut tx, &event)
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        receiver.received().len(),
        1,
        "nothing is sent while cut off"
    );
    proxy.restore();

    // Its NOTIFY went to nobody: the sender finds it when it reads again.
    let received = receiver.wait_for_messages(2, LIMIT).await;
    let late = received.iter().find(|m| m.id == msg_id.as_str()).unwrap();
    assert_eq!(late.verified, Ok(()));
    assert_eq!(late.payload["data"]["run_id"], 1);
    app.stop().await;
}
