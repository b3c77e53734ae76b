//! The job contract over Redis (apalis-redis), configured around its measured
//! defects (docs/dependencies.md): Redis only ever holds a bounded window of jobs,
//! retries belong to our state machine, and the message only names the run.
//! `preview` carries a site preview's request and answer beside its job.

pub mod preview;

use std::{path::Path, time::Duration};

use anyhow::Context;
use apalis_redis::{Config as QueueConfig, ConnectionManager, RedisStorage};
use serde::{Deserialize, Serialize};

use crate::domain::{site::RenderMode, text_enum::text_enum};

/// A job message. Tagged and versioned so old and new binaries can share a
/// queue during a rolling deploy; Postgres holds everything else about the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Job {
    /// Crawl attempt `attempt` of run `run_id`.
    CrawlV1 { run_id: i64, attempt: i32 },
    /// Crawl attempt `attempt` of URL list run `run_id`. A variant of its
    /// own: a worker older than list runs would take the run as a keyword's
    /// and fail it; it cannot read this message and drops it instead, and the
    /// run is dispatched again after `DISPATCH_CLAIM_TIMEOUT_SECS`.
    CrawlListV1 { run_id: i64, attempt: i32 },
    /// Preview `preview_id` ("test this site"): its request waits in Redis
    /// (`preview`). A worker older than this variant cannot read the message
    /// and drops it; the api then answers 503 after its timeout.
    PreviewV1 { preview_id: u64 },
    /// Replay `replay_id`: a site's extraction over its saved pages; its
    /// request and answer travel as a preview's do (`preview`, under the
    /// replay's id). An older worker drops the message, as for a preview.
    ReplayV1 { replay_id: u64 },
}

impl Job {
    /// The message of a crawl attempt: a URL list's run (`of_list`) or a
    /// keyword's.
    pub fn crawl(run_id: i64, attempt: i32, of_list: bool) -> Job {
        match of_list {
            true => Job::CrawlListV1 { run_id, attempt },
            false => Job::CrawlV1 { run_id, attempt },
        }
    }
}

/// The queue backend of this crate's jobs.
pub type JobQueue = RedisStorage<Job>;

text_enum! {
    /// The two kinds of worker slots. Each has its own queue in Redis (and its own
    /// window), so cheap http/json crawls never wait behind browser crawls.
    pub enum Lane as "lane" {
        /// Crawls in headless Chrome (`WORKER_CONCURRENCY` per worker).
        Browser = "browser",
        /// Plain HTTP and JSON crawls (`HTTP_CONCURRENCY` per worker).
        Http = "http",
    }
}

impl Lane {
    /// The render modes whose crawls travel in this lane.
    pub fn render_modes(self) -> &'static [RenderMode] {
        match self {
            Lane::Browser => &[RenderMode::Browser],
            Lane::Http => &[RenderMode::Http, RenderMode::Json],
        }
    }

    /// The lane's queue in Redis: the browser lane keeps the fleet's queue name.
    pub fn queue_name(self, queue_name: &str) -> String {
        match self {
            Lane::Browser => queue_name.to_owned(),
            Lane::Http => format!("{queue_name}:http"),
        }
    }
}

/// A Redis client for `redis_url`; over TLS (`rediss://`) the server's
/// certificate is checked against `ca` (a PEM bundle) when given, else the
/// system's roots.
pub fn client(redis_url: &str, ca: Option<&Path>) -> anyhow::Result<redis::Client> {
    let root_cert = ca
        .map(|ca| std::fs::read(ca).with_context(|| format!("reading {}", ca.display())))
        .transpose()?;
    client_with_root_cert(redis_url, root_cert)
}

/// [`client`] with the CA as PEM bytes (`RedisSettings::root_cert`: a file's
/// or the text given).
pub fn client_with_root_cert(
    redis_url: &str,
    root_cert: Option<Vec<u8>>,
) -> anyhow::Result<redis::Client> {
    crate::ops::tls::use_ring_provider();
    match root_cert {
        None => redis::Client::open(redis_url).context("parsing REDIS_URL"),
        Some(root_cert) => redis::Client::build_with_tls(
            redis_url,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root_cert),
            },
        )
        .context("parsing REDIS_URL with its CA"),
    }
}

/// A connection manager for `redis_url` (see [`connect_client`]).
pub async fn connect(redis_url: &str) -> anyhow::Result<ConnectionManager> {
    connect_client(client(redis_url, None)?).await
}

/// A Redis connection manager whose commands wait long enough for apalis'
/// scripts: redis-rs defaults to 500 ms, which turns one slow script into a
/// fatal stream error that stops the worker pool.
pub async fn connect_client(client: redis::Client) -> anyhow::Result<ConnectionManager> {
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

/// Removes finished jobs (done or dead) with their data and metadata, a batch
/// at a time: apalis-redis 1.0 never deletes anything (~460 B per job).
const TRIM_FINISHED: &str = r#"
local ids = redis.call('SPOP', KEYS[1], ARGV[1])
for _, id in ipairs(ids) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('DEL', KEYS[3] .. ':' .. id)
end
return #ids
"#;

/// Removes registrations of consumers silent for `stale_after` (each process
/// start registers one and a graceful stop leaves it behind).
const TRIM_WORKERS: &str = r#"
local names = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, name in ipairs(names) do
  redis.call('ZREM', KEYS[1], name)
  redis.call('DEL', KEYS[2] .. ':' .. name, KEYS[3] .. ':' .. name)
end
return #names
"#;

const TRIM_BATCH: usize = 500;

/// Deletes finished job data and stale consumer registrations; returns how many
/// jobs were removed. Safe while workers run: only terminal jobs are touched.
pub async fn trim(
    conn: &mut ConnectionManager,
    queue_name: &str,
    stale_after: Duration,
) -> anyhow::Result<u64> {
    let script = redis::Script::new(TRIM_FINISHED);
    let mut removed = 0u64;
    for set in ["done", "dead"] {
        loop {
            let n: usize = script
                .key(format!("{queue_name}:{set}"))
                .key(format!("{queue_name}:data"))
                .key(format!("{queue_name}:meta"))
                .arg(TRIM_BATCH)
                .invoke_async(conn)
                .await
                .with_context(|| format!("trimming {queue_name}:{set}"))?;
            removed += n as u64;
            if n < TRIM_BATCH {
                break;
            }
        }
    }
    let cutoff = chrono::Utc::now().timestamp() - stale_after.as_secs() as i64;
    let _: usize = redis::Script::new(TRIM_WORKERS)
        .key(format!("{queue_name}:workers"))
        .key(format!("{queue_name}:workers:metadata"))
        .key(format!("{queue_name}:inflight"))
        .arg(cutoff)
        .invoke_async(conn)
        .await
        .context("trimming stale consumers")?;
    Ok(removed)
}
