//! The CloudWatch publisher of the api: the backlog the ECS scaling policy
//! follows, the crawls finished per interval for the error-rate alarm, and
//! how full Redis is for the memory alarm (the queue lives there: a full
//! Redis refuses new jobs).
//!
//! The backlog is a high-resolution metric put every 10 s: the step policy's
//! alarms (infra/autoscaling.tf) use 10 s periods, which CloudWatch allows
//! only on a metric stored at 1 s resolution, and which need a datapoint in
//! every period. The other figures stay standard-resolution: their alarms
//! look at minutes, and they ride in the same request, so they cost nothing more.
//!
//! One api process publishes at a time (a Postgres advisory lock), because
//! the scaling policy reads the Average of `QueueWaitingJobs`: two publishers
//! would not change it, but a lagging one would drag it. A slow or failing
//! CloudWatch never reaches the api: the publisher is its own task, each
//! tick is bounded by a timeout, and the next tick simply tries again.

use std::time::{Duration, SystemTime};

use anyhow::Context;
use apalis_redis::ConnectionManager;
use aws_sdk_cloudwatch::{
    primitives::DateTime,
    types::{MetricDatum, StandardUnit},
};
use chrono::{DateTime as ChronoTime, Utc};
use sqlx::PgPool;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::{
    ops::{cloudwatch, metrics::metrics},
    store::{
        self,
        leader::{Leadership, PUBLISHER_LOCK},
    },
};

/// Runs queued or in progress: what the fleet scales on.
pub const QUEUE_WAITING_JOBS: &str = "QueueWaitingJobs";
/// `StorageResolution` of [`QUEUE_WAITING_JOBS`], seconds: high resolution,
/// so its alarms may use 10 s periods (60 would round it to the minute).
pub const QUEUE_WAITING_JOBS_RESOLUTION_SECS: i32 = 1;
/// Runs completed during the interval.
pub const CRAWLS_COMPLETED: &str = "CrawlsCompleted";
/// Runs failed (attempts exhausted) during the interval.
pub const CRAWLS_FAILED: &str = "CrawlsFailed";
/// Redis's used memory in percent of its `maxmemory`; not sent when Redis has
/// no `maxmemory` (nothing to be a percentage of) or could not be read.
pub const REDIS_MEMORY_USAGE_PERCENT: &str = "RedisMemoryUsagePercent";

/// How often a standby publisher asks for leadership, at most.
const TAKEOVER_POLL: Duration = Duration::from_secs(5);

/// What and how often to publish.
#[derive(Debug, Clone)]
pub struct PublisherSettings {
    /// CloudWatch namespace, `CrawlerService` by default (the scaling policy and
    /// the alarms name it).
    pub namespace: String,
    /// Time between two puts; each put covers the interval just ended.
    pub interval: Duration,
    /// Bound on one tick (reading Postgres and the put, SDK retries included);
    /// keep it below `interval` so ticks never pile up.
    pub call_timeout: Duration,
}

impl PublisherSettings {
    /// From `CLOUDWATCH_NAMESPACE` and `METRIC_INTERVAL_SECS`; a put may take
    /// half the interval, at most 10 s.
    pub fn from_config(
        common: &crate::config::CommonConfig,
        config: &crate::config::ApiConfig,
    ) -> Self {
        let interval = Duration::from_secs(config.metric_interval_secs.max(1));
        Self {
            namespace: common.cloudwatch_namespace.clone(),
            interval,
            call_timeout: (interval / 2).min(Duration::from_secs(10)),
        }
    }
}

pub use crate::ops::cloudwatch::client_from_env;

/// Runs until `shutdown`: contends for leadership and, while leader, puts
/// the metrics every `interval`. Standing by costs one connection attempt
/// every few seconds.
pub async fn run(
    database_url: String,
    pool: PgPool,
    redis: ConnectionManager,
    client: aws_sdk_cloudwatch::Client,
    settings: PublisherSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    // A test's one-second interval takes over within a second; production's
    // 10 s within 5 s.
    let poll = settings.interval.min(TAKEOVER_POLL);
    let mut announced_standby = false;
    while !shutdown.is_cancelled() {
        match Leadership::try_acquire(&database_url, PUBLISHER_LOCK, "publisher").await {
            Ok(Some(leadership)) => {
                announced_standby = false;
                tracing::info!(namespace = %settings.namespace, "CloudWatch publisher is the leader");
                let sources = Sources {
                    pool: &pool,
                    redis: redis.clone(),
                };
                lead(leadership, sources, &client, &settings, &shutdown).await;
            }
            Ok(None) => {
                if !announced_standby {
                    tracing::info!("another api process publishes to CloudWatch; standing by");
                    announced_standby = true;
                }
                sleep_or_stop(poll, &shutdown).await;
            }
            Err(e) => {
                tracing::warn!(error = ?e, "CloudWatch publisher could not contend for leadership");
                sleep_or_stop(poll, &shutdown).await;
            }
        }
    }
    Ok(())
}

/// Publishes every interval until shutdown (leadership released at once, so
/// a standby takes over without waiting for a timeout) or loss of the lock.
async fn lead(
    mut leadership: Leadership,
    mut sources: Sources<'_>,
    client: &aws_sdk_cloudwatch::Client,
    settings: &PublisherSettings,
    shutdown: &CancellationToken,
) {
    // The first put comes one interval after taking over, so every datapoint
    // of CrawlsCompleted/CrawlsFailed covers a whole interval.
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + settings.interval,
        settings.interval,
    );
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut since = Utc::now();
    let stopped = {
        // Pinned across ticks: recreated on every tick, its one-second probe
        // would never run with a short interval.
        let lost = leadership.lost();
        tokio::pin!(lost);
        loop {
            // The put runs inside the select, so shutdown or loss of the lock
            // cuts a put in flight instead of waiting out its timeout.
            let tick = async {
                ticker.tick().await;
                let now = Utc::now();
                // After a failed put the next one covers the failed interval
                // too: its crawls are reported late, never lost. (A put that
                // timed out may have landed: then they count twice, the lesser harm.)
                if publish_bounded(&mut sources, client, settings, since, now).await {
                    since = now;
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break true,
                _ = &mut lost => break false,
                _ = tick => {}
            }
        }
    };
    if stopped {
        leadership.release().await;
    } else {
        tracing::warn!("CloudWatch publisher lost its leadership connection; contending again");
    }
}

/// One tick, bounded by `call_timeout`; its outcome is logged and counted.
/// Whether the put succeeded.
async fn publish_bounded(
    sources: &mut Sources<'_>,
    client: &aws_sdk_cloudwatch::Client,
    settings: &PublisherSettings,
    since: ChronoTime<Utc>,
    until: ChronoTime<Utc>,
) -> bool {
    let outcome = tokio::time::timeout(
        settings.call_timeout,
        publish(sources, client, &settings.namespace, since, until),
    )
    .await;
    match outcome {
        Ok(Ok(backlog)) => {
            metrics().cloudwatch_publishes.inc();
            tracing::debug!(backlog, "scaling metric published");
            true
        }
        Ok(Err(e)) => {
            metrics().cloudwatch_failures.inc();
            tracing::warn!(error = ?e, "CloudWatch put failed; the next tick tries again");
            false
        }
        Err(_) => {
            metrics().cloudwatch_failures.inc();
            tracing::warn!(
                timeout = ?settings.call_timeout,
                "CloudWatch put timed out; the next tick tries again"
            );
            false
        }
    }
}

/// Where the published figures are read.
struct Sources<'a> {
    pool: &'a PgPool,
    redis: ConnectionManager,
}

/// Reads the backlog, the crawls finished from `since` until `until` and
/// Redis's memory, and puts them in one PutMetricData call; returns the backlog.
async fn publish(
    sources: &mut Sources<'_>,
    client: &aws_sdk_cloudwatch::Client,
    namespace: &str,
    since: ChronoTime<Utc>,
    until: ChronoTime<Utc>,
) -> anyhow::Result<i64> {
    let backlog = store::stats::backlog(sources.pool)
        .await
        .context("counting the backlog")?;
    // Intervals meet without overlapping, so a crawl counts in one put only.
    let (completed, failed) = store::stats::finished_between(sources.pool, since, Some(until))
        .await
        .context("counting finished crawls")?;
    // A Redis that cannot be read must not hold back the scaling metric.
    let redis_memory = redis_memory_percent(&mut sources.redis)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = ?e, "could not read Redis's memory; not published this time");
            None
        });
    let at = DateTime::from(SystemTime::now());
    // No dimensions: the scaling policy and the alarms match the bare name.
    let datum = |name: &str, value: f64, unit: StandardUnit| {
        MetricDatum::builder()
            .metric_name(name)
            .value(value)
            .unit(unit)
            .timestamp(at)
    };
    let count = |name: &str, value: i64| datum(name, value as f64, StandardUnit::Count);
    let mut data = vec![
        count(QUEUE_WAITING_JOBS, backlog)
            .storage_resolution(QUEUE_WAITING_JOBS_RESOLUTION_SECS)
            .build(),
        count(CRAWLS_COMPLETED, completed).build(),
        count(CRAWLS_FAILED, failed).build(),
    ];
    if let Some(percent) = redis_memory {
        data.push(datum(REDIS_MEMORY_USAGE_PERCENT, percent, StandardUnit::Percent).build());
    }
    cloudwatch::put(client, namespace, data).await?;
    Ok(backlog)
}

/// Redis's used memory in percent of its `maxmemory` (`INFO memory`);
/// `None` when no `maxmemory` is set.
pub async fn redis_memory_percent(redis: &mut ConnectionManager) -> anyhow::Result<Option<f64>> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(redis)
        .await
        .context("INFO memory")?;
    Ok(memory_percent(&info))
}

fn memory_percent(info: &str) -> Option<f64> {
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse::<f64>().ok())
    };
    let (used, max) = (field("used_memory")?, field("maxmemory")?);
    (max > 0.0).then(|| used / max * 100.0)
}

async fn sleep_or_stop(period: Duration, shutdown: &CancellationToken) {
    tokio::select! {
        _ = tokio::time::sleep(period) => {}
        _ = shutdown.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::memory_percent;

    #[test]
    fn memory_is_a_percentage_of_maxmemory_and_nothing_without_one() {
        let info = "# Memory\r\nused_memory:25165824\r\nused_memory_human:24.00M\r\nmaxmemory:100663296\r\nmaxmemory_human:96.00M\r\n";
        assert_eq!(memory_percent(info), Some(25.0));
        let unbounded = "used_memory:1000\r\nmaxmemory:0\r\n";
        assert_eq!(memory_percent(unbounded), None);
        assert_eq!(memory_percent("used_memory_rss:1\r\n"), None);
    }
}
