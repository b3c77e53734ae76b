//! Takes back runs whose worker died or whose page request hangs past its
//! stuck timeout, by the same rule as a failed attempt (retry with backoff, or
//! fail after the last attempt). The conditional update fences out the worker
//! if it was merely slow and comes back.

use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    domain::{failure::Failure, run::CrawlRun},
    events::EventPublisher,
    ops::metrics::metrics,
    store::{self, runs::FenceError},
};

/// Beyond the stuck timeout, the time the worker gets to notice by itself.
const STUCK_GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct WatchdogSettings {
    pub interval: Duration,
    pub heartbeat_timeout: Duration,
    pub default_stuck_timeout: Duration,
}

pub(super) async fn run(
    pool: PgPool,
    events: EventPublisher,
    settings: WatchdogSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    loop {
        match sweep(&pool, &settings).await {
            Ok(taken) => {
                for run in &taken {
                    events.run_updated(run).await;
                }
            }
            Err(e) => tracing::warn!(error = ?e, "watchdog sweep failed; retrying"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(settings.interval) => {}
        }
    }
}

/// Counts a run taken back: the watchdog's own action (by the failure's
/// kind: `stuck` or `worker_lost`), and the failed attempt as the worker
/// counts one.
fn count_taken_back(failure: &Failure, after: &CrawlRun) {
    let m = metrics();
    m.watchdog_actions
        .with_label_values(&[failure.kind.as_str()])
        .inc();
    m.count_attempt_end(after.state, after.site_id, true);
}

/// One pass; returns the runs taken back, as they are now.
pub async fn sweep(pool: &PgPool, settings: &WatchdogSettings) -> anyhow::Result<Vec<CrawlRun>> {
    let abandoned = store::runs::find_abandoned(
        pool,
        settings.heartbeat_timeout,
        settings.default_stuck_timeout,
        STUCK_GRACE,
    )
    .await?;
    let mut taken = Vec::new();
    for run in abandoned {
        match store::runs::fail_attempt(pool, &run.fence, &run.failure).await {
            Ok(after) => {
                count_taken_back(&run.failure, &after);
                tracing::warn!(run_id = run.fence.run_id, attempt = run.fence.attempt, state = %after.state, kind = %run.failure.kind, reason = %run.failure, "run taken back");
                taken.push(after);
            }
            // It moved on between the scan and the update: nothing to do.
            Err(FenceError::Superseded { .. }) => {}
            Err(FenceError::Database(e)) => return Err(e.into()),
        }
    }
    Ok(taken)
}
