//! Keeps storage flat over months: ended runs and their results older than
//! `RETENTION_DAYS` are deleted daily, and so are webhook messages whose
//! deliveries are done; finished job data in Redis is trimmed every few minutes.

use std::time::{Duration, Instant};

use apalis_redis::ConnectionManager;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{queue, store};

const DATABASE_EVERY: Duration = Duration::from_secs(24 * 3600);
const REDIS_EVERY: Duration = Duration::from_secs(600);
/// A consumer silent this long is gone (they heartbeat every 10 s).
const STALE_CONSUMER: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
pub struct RetentionSettings {
    pub queue_name: String,
    /// `None` keeps runs and results forever.
    pub keep: Option<Duration>,
}

pub(super) async fn run(
    pool: PgPool,
    mut redis: ConnectionManager,
    settings: RetentionSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut last_database: Option<Instant> = None;
    loop {
        if last_database.is_none_or(|t| t.elapsed() >= DATABASE_EVERY) {
            last_database = Some(Instant::now());
            if let Some(keep) = settings.keep {
                match store::runs::delete_finished_before(&pool, keep).await {
                    Ok(n) => tracing::info!(runs = n, "retention: old runs and results deleted"),
                    Err(e) => tracing::warn!(error = ?e, "retention: deleting old runs failed"),
                }
                match store::results::forget_unseen_for(&pool, keep).await {
                    Ok(n) => {
                        tracing::info!(items = n, "retention: items unseen for long forgotten")
                    }
                    Err(e) => tracing::warn!(error = ?e, "retention: forgetting old items failed"),
                }
                match store::webhooks::delete_messages_before(&pool, keep).await {
                    Ok(n) => tracing::info!(
                        messages = n,
                        "retention: old webhook messages and their deliveries deleted"
                    ),
                    Err(e) => {
                        tracing::warn!(error = ?e, "retention: deleting old webhook messages failed")
                    }
                }
            }
        }
        for lane in queue::Lane::ALL {
            let queue_name = lane.queue_name(&settings.queue_name);
            match queue::trim(&mut redis, &queue_name, STALE_CONSUMER).await {
                Ok(n) if n > 0 => {
                    tracing::debug!(jobs = n, queue = %queue_name, "retention: finished jobs trimmed from Redis")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = ?e, "retention: trimming Redis failed"),
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(REDIS_EVERY) => {}
        }
    }
}
