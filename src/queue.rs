//! The job contract over Redis (apalis-redis), configured around its measured
//! defects (QUEUE-NOTES.md): Redis only ever holds a bounded window of jobs,
//! retries belong to our state machine, and the message only names the run.

use std::time::Duration;

use anyhow::Context;
use apalis_redis::{Config as QueueConfig, ConnectionManager, RedisStorage};
use serde::{Deserialize, Serialize};

/// A job message. Tagged and versioned so old and new binaries can share a
/// queue during a rolling deploy; Postgres holds everything else about the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Job {
    /// Crawl attempt `attempt` of run `run_id`.
    CrawlV1 { run_id: i64, attempt: i32 },
}

/// The queue backend of this crate's jobs.
pub type JobQueue = RedisStorage<Job>;

/// A Redis connection manager whose commands wait long enough for apalis'
/// scripts: redis-rs defaults to 500 ms, which turns one slow script into a
/// fatal stream error that stops the worker pool.
pub async fn connect(redis_url: &str) -> anyhow::Result<ConnectionManager> {
    let client = redis::Client::open(redis_url).context("parsing REDIS_URL")?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_number_of_retries(6);
    redis::aio::ConnectionManager::new_with_config(client, config)
        .await
        .context("connecting to Redis")
}

/// The queue, for pushing (dispatcher) or consuming (`batch_size` = the
/// worker's concurrency so a busy worker does not hoard prefetched crawls).
pub fn storage(conn: ConnectionManager, queue_name: &str, batch_size: usize) -> JobQueue {
    let config = QueueConfig::default()
        .queue(queue_name)
        .batch_size(batch_size.max(1))
        .lock_tasks(false)
        .emit_events(false)
        .heartbeat_interval(Duration::from_secs(10))
        .missed_heartbeats(3);
    RedisStorage::new(conn).with_config(config)
}

/// Jobs waiting in Redis for a worker (O(1) commands; apalis' own metrics are broken).
pub async fn pending_in_redis(
    conn: &mut ConnectionManager,
    queue_name: &str,
) -> anyhow::Result<u64> {
    let (active, scheduled): (u64, u64) = redis::pipe()
        .cmd("LLEN")
        .arg(format!("{queue_name}:active"))
        .cmd("ZCARD")
        .arg(format!("{queue_name}:scheduled"))
        .query_async(conn)
        .await
        .context("counting jobs in Redis")?;
    Ok(active + scheduled)
}
