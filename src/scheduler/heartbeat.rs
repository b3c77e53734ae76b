//! The scheduler's heartbeat: `SchedulerHeartbeat` = 1, put to CloudWatch
//! every interval (a minute) by the leader, and only while its dispatch loop
//! and its cron loop both turned since the last one. The alarm on it
//! (infra/ec2.tf) hears of what a process count cannot: a scheduler whose
//! process lives but whose loop hangs (a query that never returns, a lock
//! held, a task stuck), and a fleet where no scheduler leads.
//!
//! The leader alone puts it: what the alarm guards is that someone
//! schedules, and only the leader does. Each scheduler putting it would
//! keep the alarm quiet while a standby stands by behind a hung leader that
//! still holds the lock; the leader alone putting it stops the heartbeat
//! exactly when nothing schedules. A put is bounded by a timeout and runs in
//! a task of its own: a slow CloudWatch never holds up a loop.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use aws_sdk_cloudwatch::{
    primitives::DateTime,
    types::{MetricDatum, StandardUnit},
};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::{config::SchedulerConfig, ops::cloudwatch};

/// The heartbeat's metric name, in the fleet's CloudWatch namespace.
pub const SCHEDULER_HEARTBEAT: &str = "SchedulerHeartbeat";

/// The turns of one loop, counted by the loop itself.
#[derive(Debug, Clone, Default)]
pub struct Pulse(Arc<AtomicU64>);

impl Pulse {
    /// One more turn of the loop.
    pub fn beat(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn turns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Where and how often the heartbeat is put.
#[derive(Debug, Clone)]
pub struct HeartbeatSettings {
    pub namespace: String,
    pub interval: Duration,
    /// Bound on one put (SDK retries included).
    pub call_timeout: Duration,
}

impl HeartbeatSettings {
    /// From `SCHEDULER_HEARTBEAT_SECS` and `CLOUDWATCH_NAMESPACE`; a put may
    /// take half the interval, at most 10 s.
    pub fn from_config(namespace: &str, config: &SchedulerConfig) -> Self {
        let interval = Duration::from_secs(config.scheduler_heartbeat_secs.max(1));
        Self {
            namespace: namespace.to_owned(),
            interval,
            call_timeout: (interval / 2).min(Duration::from_secs(10)),
        }
    }
}

/// Puts the heartbeat every interval until `shutdown`, each time all `loops`
/// turned since the last one; otherwise says which did not, and puts none.
pub async fn run(
    client: aws_sdk_cloudwatch::Client,
    settings: HeartbeatSettings,
    loops: Vec<(&'static str, Pulse)>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut seen: Vec<u64> = loops.iter().map(|(_, pulse)| pulse.turns()).collect();
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + settings.interval,
        settings.interval,
    );
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = ticker.tick() => {}
        }
        let now: Vec<u64> = loops.iter().map(|(_, pulse)| pulse.turns()).collect();
        let still: Vec<&str> = loops
            .iter()
            .zip(seen.iter().zip(&now))
            .filter(|(_, (before, after))| before == after)
            .map(|((name, _), _)| *name)
            .collect();
        seen = now;
        if !still.is_empty() {
            tracing::error!(
                loops = ?still,
                "heartbeat withheld: the scheduler's loops did not turn since the last one"
            );
            continue;
        }
        let put = tokio::time::timeout(settings.call_timeout, put_one(&client, &settings));
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            outcome = put => match outcome {
                Ok(Ok(())) => tracing::debug!("scheduler heartbeat put"),
                Ok(Err(e)) => {
                    tracing::warn!(error = ?e, "heartbeat put failed; the next one tries again")
                }
                Err(_) => tracing::warn!(
                    timeout = ?settings.call_timeout,
                    "heartbeat put failed: timed out; the next one tries again"
                ),
            },
        }
    }
}

async fn put_one(
    client: &aws_sdk_cloudwatch::Client,
    settings: &HeartbeatSettings,
) -> anyhow::Result<()> {
    // No dimensions: the alarm matches the bare name.
    let datum = MetricDatum::builder()
        .metric_name(SCHEDULER_HEARTBEAT)
        .value(1.0)
        .unit(StandardUnit::Count)
        .timestamp(DateTime::from(SystemTime::now()))
        .build();
    cloudwatch::put(client, &settings.namespace, vec![datum]).await
}
