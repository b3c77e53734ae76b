//! A crawlfleet process (`--process=all`: the api, the sender, the worker
//! ending runs) killed with SIGKILL while deliveries are in flight to a slow
//! receiver, then started again: every run that ended has its one message,
//! and every message arrives, signed. Only what was in flight at the kill
//! may arrive twice, with the same `webhook-id`.

use std::{collections::HashMap, time::Duration};

use serde_json::Value;

use super::{LIMIT, create_webhook, endpoint, http_site};
use crate::{
    live::Scrape,
    support::{
        RoleProcess, Roles, TestApp, WebhookReceiver, browser_slots, clean_up_after_killed_worker,
        count_states, descendants, eventually,
    },
};

const RUNS: usize = 12;
/// Deliveries the process sends at once.
const CONCURRENCY: usize = 3;

/// The process under test: short heartbeats (its runs come back quickly
/// after the kill), a short webhook timeout (its leases too), quick retries.
fn spawn_fleet(app: &TestApp) -> RoleProcess {
    RoleProcess::spawn(
        "all",
        &app.config,
        &[
            ("WEBHOOK_CONCURRENCY", CONCURRENCY.to_string()),
            ("WEBHOOK_ENDPOINT_CONCURRENCY", CONCURRENCY.to_string()),
            ("WEBHOOK_TIMEOUT_SECS", "5".into()),
            ("WEBHOOK_RETRY_SCHEDULE_SECS", "1,1,2,2,2,2,2,2,2,2".into()),
        ],
    )
}

#[tokio::test]
async fn a_process_killed_mid_delivery_loses_no_message_and_invents_none() {
    // The process runs a worker too (no browser is opened: the site needs
    // none).
    let _slot = browser_slots(1).await;
    let app = TestApp::spawn_without_browsers(Roles::default(), |c| {
        c.worker.heartbeat_interval_secs = 1;
        c.scheduler.heartbeat_timeout_secs = 5;
        c.scheduler.watchdog_interval_secs = 1;
        c.scheduler.dispatch_claim_timeout_secs = 8;
    })
    .await;
    let receiver = WebhookReceiver::start().await;
    // Slow: each answer takes 1.5 s, so the kill finds deliveries in flight.
    receiver.delay(Duration::from_millis(1500));
    let webhook = create_webhook(&app, &receiver, endpoint(&receiver, &["run.completed"])).await;
    let site = http_site(&app, "shop", "/search?q={keyword}").await;
    let doomed = spawn_fleet(&app);
    let runs = app.queue_crawls(site, "lamp ", RUNS).await;

    // The process's start and a dozen plain HTTP crawls: seconds.
    eventually(LIMIT, "deliveries in flight after some arrived", || async {
        (receiver.received().len() >= 2 && receiver.in_flight() > 0).then_some(())
    })
    .await;
    let pid = doomed.pid();
    let left = descendants(pid);
    doomed.kill().await;
    clean_up_after_killed_worker(&left, pid);
    let at_kill = receiver.received().len();
    assert!(
        at_kill < RUNS,
        "the kill came before every message was sent"
    );

    let fleet = spawn_fleet(&app);
    // Runs held by the killed worker come back after the 5 s heartbeat
    // timeout; leases of the deliveries in flight after 5 + 10 s.
    for run in &runs {
        app.wait_until_completed(*run, LIMIT * 2).await;
    }
    receiver.wait_for_messages(RUNS, LIMIT).await;
    eventually(LIMIT, "every delivery written as delivered", || async {
        let pending: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered'",
        )
        .fetch_one(app.pool())
        .await
        .unwrap();
        (pending == 0).then_some(())
    })
    .await;
    assert_eq!(
        count_states(app.pool()).await.get("completed"),
        Some(&(RUNS as i64))
    );

    // None invented: one message per run in the outbox, one delivery each.
    let messages: Vec<(String, Value)> =
        sqlx::query_as("SELECT msg_id, body::jsonb FROM webhook_messages ORDER BY id")
            .fetch_all(app.pool())
            .await
            .unwrap();
    let mut per_run: HashMap<i64, usize> = HashMap::new();
    for (_, body) in &messages {
        *per_run
            .entry(body["data"]["run_id"].as_i64().unwrap())
            .or_default() += 1;
    }
    assert_eq!(per_run.len(), RUNS, "{per_run:?}");
    assert!(per_run.values().all(|n| *n == 1), "{per_run:?}");
    // None lost: each arrived, signed; only those in flight at the kill twice.
    let arrivals = receiver.arrivals_by_id();
    for (msg_id, _) in &messages {
        assert!(arrivals.contains_key(msg_id), "{msg_id} never arrived");
    }
    assert_eq!(arrivals.len(), RUNS, "nothing but the outbox's messages");
    let repeats: usize = arrivals.values().map(|n| n - 1).sum();
    assert!(repeats <= CONCURRENCY, "{arrivals:?}");
    assert!(receiver.received().iter().all(|m| m.verified.is_ok()));

    let addr = fleet.listening_on("api metrics listening").await;
    let scrape = Scrape::of(&format!("http://{addr}/metrics")).await;
    let id = webhook["id"].to_string();
    let delivered = scrape.count(
        "crawlfleet_webhook_deliveries_total",
        &[("webhook", &id), ("outcome", "delivered")],
    );
    assert!(
        delivered >= 1.0,
        "the restarted sender counts what it delivered"
    );
    assert_eq!(fleet.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}
