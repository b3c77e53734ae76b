//! The scheduler's heartbeat: put to the stand-in CloudWatch every interval
//! while the loops it watches turn, withheld while one of them stands still,
//! and put by a real scheduler process (its leader) when enabled.

use std::time::Duration;

use crawlfleet::scheduler::{
    SCHEDULER_HEARTBEAT,
    heartbeat::{self, HeartbeatSettings, Pulse},
};
use tokio_util::sync::CancellationToken;

use super::fake::{FakeCloudWatch, Mode};
use crate::support::{RoleProcess, TestApp, eventually};

/// Beats `pulse` every 50 ms until `stop`.
fn keep_beating(pulse: Pulse, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            pulse.beat();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

#[tokio::test]
async fn the_heartbeat_is_put_while_every_loop_turns_and_withheld_while_one_stands_still() {
    let cw = FakeCloudWatch::start(Mode::Accept).await;
    let (dispatch, cron) = (Pulse::default(), Pulse::default());
    let cron_beats = CancellationToken::new();
    let dispatch_beats = CancellationToken::new();
    let beating = [
        keep_beating(cron.clone(), cron_beats.clone()),
        keep_beating(dispatch.clone(), dispatch_beats.clone()),
    ];
    let shutdown = CancellationToken::new();
    let settings = HeartbeatSettings {
        namespace: "CrawlerService".into(),
        interval: Duration::from_millis(500),
        call_timeout: Duration::from_millis(250),
    };
    let task = tokio::spawn(heartbeat::run(
        cw.client().await,
        settings,
        vec![("dispatch", dispatch.clone()), ("cron", cron)],
        shutdown.clone(),
    ));
    // Both loops turn: a heartbeat every half second, 1, without dimensions.
    let first = cw.put_after(0, Duration::from_secs(5)).await;
    cw.put_after(2, Duration::from_secs(5)).await;
    assert_eq!(first.namespace, "CrawlerService");
    let datum = first.datum(SCHEDULER_HEARTBEAT);
    assert_eq!((datum.value, datum.has_dimensions), (1.0, false));
    assert_eq!(first.data.len(), 1);

    // The dispatch loop hangs (the process lives on): the heartbeats stop.
    dispatch_beats.cancel();
    // The tick under way may still see its last turns: one more put at most.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let stopped_at = cw.puts().len();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(
        cw.puts().len(),
        stopped_at,
        "a heartbeat was put while the dispatch loop stood still"
    );

    // It turns again: so do the heartbeats.
    let dispatch_again = CancellationToken::new();
    let resumed = keep_beating(dispatch, dispatch_again.clone());
    cw.put_after(stopped_at, Duration::from_secs(5)).await;

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the heartbeat stops on shutdown")
        .unwrap()
        .unwrap();
    cron_beats.cancel();
    dispatch_again.cancel();
    for beating in beating.into_iter().chain([resumed]) {
        beating.await.unwrap();
    }
    cw.stop();
}

#[tokio::test]
async fn a_scheduler_process_puts_its_heartbeat_when_enabled() {
    let app = TestApp::spawn_without_browsers(crate::support::Roles::default(), |_| {}).await;
    let cw = FakeCloudWatch::start(Mode::Accept).await;
    let env = vec![
        ("SCHEDULER_HEARTBEAT_ENABLED", "true".to_owned()),
        ("SCHEDULER_HEARTBEAT_SECS", "1".to_owned()),
        ("SCHEDULER_PORT", "0".to_owned()),
        ("AWS_ENDPOINT_URL", cw.endpoint.clone()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
    ];
    let scheduler = RoleProcess::spawn("scheduler", &app.config, &env);
    // It takes the lock (the test app's own scheduler is not running) and
    // puts a second later.
    let put = eventually(Duration::from_secs(30), "a heartbeat arrives", || async {
        cw.puts()
            .into_iter()
            .find(|p| p.data.iter().any(|d| d.name == SCHEDULER_HEARTBEAT))
    })
    .await;
    assert_eq!(put.namespace, "CrawlerService");
    assert_eq!(put.value(SCHEDULER_HEARTBEAT), 1.0);
    assert_eq!(scheduler.terminate(Duration::from_secs(15)).await, 0);
    cw.stop();
    app.stop().await;
}
