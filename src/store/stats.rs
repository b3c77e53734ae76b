//! Counts of the backlog and the fleet, for `/api/jobs/queue`, the queue
//! gauges and the CloudWatch scaling metric. Postgres is the true backlog.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::domain::run::RunState;

/// Runs by state: the backlog and the last hour.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct QueueCounts {
    pub queued: i64,
    /// Of `queued`: job message in Redis, not yet claimed.
    pub dispatched: i64,
    /// Of `queued`: waiting out a retry backoff.
    pub delayed: i64,
    pub running: i64,
    pub url_call: i64,
    pub call_done: i64,
    pub completed_last_hour: i64,
    pub failed_last_hour: i64,
    /// Age of the oldest queued run, in seconds (0 when none).
    pub oldest_queued_age_secs: i64,
}

impl QueueCounts {
    /// Runs waiting or in progress: the backlog the fleet scales on.
    pub fn backlog(&self) -> i64 {
        self.queued + self.running + self.url_call + self.call_done
    }
}

pub async fn queue_counts(pool: &PgPool) -> sqlx::Result<QueueCounts> {
    let mut counts = QueueCounts::default();
    // One row per active state; what only a queued run has (dispatched, a
    // backoff, its age) is read from the queued row.
    for row in sqlx::query!(
        r#"SELECT state AS "state: RunState", count(*) AS "runs!",
                  count(*) FILTER (WHERE dispatched_at IS NOT NULL) AS "dispatched!",
                  count(*) FILTER (WHERE not_before > now()) AS "delayed!",
                  COALESCE(EXTRACT(EPOCH FROM now() - min(queued_at)), 0)::bigint AS "oldest_age_secs!"
           FROM crawl_runs
           WHERE state = ANY($1)
           GROUP BY state"#,
        &RunState::ACTIVE as &[RunState]
    )
    .fetch_all(pool)
    .await?
    {
        match row.state {
            RunState::Queued => {
                counts.queued = row.runs;
                counts.dispatched = row.dispatched;
                counts.delayed = row.delayed;
                counts.oldest_queued_age_secs = row.oldest_age_secs;
            }
            RunState::Running => counts.running = row.runs,
            RunState::UrlCall => counts.url_call = row.runs,
            RunState::CallDone => counts.call_done = row.runs,
            RunState::Completed | RunState::Failed | RunState::Skipped | RunState::Cancelled => {}
        }
    }
    (counts.completed_last_hour, counts.failed_last_hour) =
        finished_between(pool, Utc::now() - chrono::TimeDelta::hours(1), None).await?;
    Ok(counts)
}

/// Runs queued or in progress (the scaling metric `QueueWaitingJobs`).
pub async fn backlog(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM crawl_runs WHERE state = ANY($1)"#,
        &RunState::ACTIVE as &[RunState]
    )
    .fetch_one(pool)
    .await
}

/// Runs that completed and that failed from `since`, until `until` (not
/// included) when given: consecutive intervals count each run once.
pub async fn finished_between(
    pool: &PgPool,
    since: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
) -> sqlx::Result<(i64, i64)> {
    let row = sqlx::query!(
        r#"SELECT count(*) FILTER (WHERE state = $3) AS "completed!",
                  count(*) FILTER (WHERE state = $4) AS "failed!"
           FROM crawl_runs
           WHERE finished_at >= $1 AND ($2::timestamptz IS NULL OR finished_at < $2)
             AND state IN ($3, $4)"#,
        since,
        until,
        RunState::Completed as RunState,
        RunState::Failed as RunState
    )
    .fetch_one(pool)
    .await?;
    Ok((row.completed, row.failed))
}

/// A worker seen in the last minute, with what it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSeen {
    pub id: String,
    pub host: String,
    /// Browser crawls at once.
    pub concurrency: i32,
    /// Plain HTTP and JSON crawls at once.
    pub http_concurrency: i32,
    pub in_flight: i64,
    pub started_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
}

pub async fn workers_seen(pool: &PgPool) -> sqlx::Result<Vec<WorkerSeen>> {
    sqlx::query_as!(
        WorkerSeen,
        r#"SELECT w.id, w.host, w.concurrency, w.http_concurrency, w.started_at, w.last_seen_at,
                  (SELECT count(*) FROM crawl_runs r
                   WHERE r.worker_id = w.id AND r.state = ANY($1)) AS "in_flight!"
           FROM workers w
           WHERE w.last_seen_at > now() - interval '1 minute'
           ORDER BY w.id"#,
        &RunState::HELD as &[RunState]
    )
    .fetch_all(pool)
    .await
}

/// Runs that ended in one minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinuteCounts {
    /// The minute's start.
    pub minute: DateTime<Utc>,
    pub completed: i64,
    pub failed: i64,
}

/// Runs completed and failed in each of the last `minutes` minutes, the
/// current one last; minutes without any are there with zeros.
pub async fn finished_per_minute(pool: &PgPool, minutes: i32) -> sqlx::Result<Vec<MinuteCounts>> {
    sqlx::query_as!(
        MinuteCounts,
        r#"SELECT m.minute AS "minute!",
                  count(r.id) FILTER (WHERE r.state = $2) AS "completed!",
                  count(r.id) FILTER (WHERE r.state = $3) AS "failed!"
           FROM generate_series(date_trunc('minute', now()) - make_interval(mins => $1 - 1),
                                date_trunc('minute', now()), interval '1 minute') AS m(minute)
           LEFT JOIN crawl_runs r
             ON r.finished_at >= m.minute AND r.finished_at < m.minute + interval '1 minute'
            AND r.state IN ($2, $3)
           GROUP BY m.minute
           ORDER BY m.minute"#,
        minutes,
        RunState::Completed as RunState,
        RunState::Failed as RunState
    )
    .fetch_all(pool)
    .await
}
