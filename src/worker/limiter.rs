//! Fleet-wide politeness per site, in Redis: one atomic script decides whether
//! a page request may go now (GCRA, spaced at 1 / max_requests_per_sec, burst
//! of one request), and a refusal (429, 503, a block page) pauses the site for
//! every worker (Retry-After honoured), then ramps its pace back up, halving
//! the slowdown every [`RAMP_STEP`]. Redis' own clock decides, so workers on
//! different hosts agree whatever their clocks say.

use std::time::{Duration, Instant};

use apalis_redis::ConnectionManager;

use super::error::CrawlError;
use crate::{domain::failure::FailureKind, ops::metrics::metrics};

/// A refused site without a Retry-After pauses this long, times its penalty.
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(5);
/// Longest pause a refusal can impose (a Retry-After of a day is capped).
pub const MAX_PAUSE: Duration = Duration::from_secs(600);
/// After a pause the site's pace is divided by its penalty, which halves
/// every step until the full pace is back.
pub const RAMP_STEP: Duration = Duration::from_secs(10);
/// Penalties double with each refusal, up to this.
const MAX_PENALTY: u32 = 64;
/// Pace of a site without a limit of its own while it ramps back up (10/s at full pace).
const UNLIMITED_RAMP_INTERVAL: Duration = Duration::from_millis(100);
/// How long a worker waits for Redis before the attempt fails (it is
/// retried later; going on without the limiter would not be polite).
const REDIS_PATIENCE: Duration = Duration::from_secs(30);

/// Returns microseconds to wait (0: go now). Keys: the site's limit hash.
/// Args: emission interval (µs, 0 = no limit), ramp step (µs), interval while
/// an unlimited site ramps up (µs).
const ACQUIRE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', KEYS[1], 'tat', 'pause_until', 'penalty', 'penalty_since')
local pause_until = tonumber(h[2]) or 0
if pause_until > now then return pause_until - now end
local factor = 1
local penalty = tonumber(h[3]) or 1
if penalty > 1 then
  local steps = math.floor((now - (tonumber(h[4]) or now)) / tonumber(ARGV[2]))
  factor = penalty / (2 ^ steps)
  if factor < 1 then factor = 1 end
end
local interval = tonumber(ARGV[1])
if interval == 0 then
  if factor <= 1 then return 0 end
  interval = tonumber(ARGV[3])
end
interval = interval * factor
local tat = tonumber(h[1]) or now
if tat > now then return tat - now end
redis.call('HSET', KEYS[1], 'tat', now + interval)
redis.call('PEXPIRE', KEYS[1], 3600000 + math.ceil(interval / 1000))
return 0
"#;

/// Records a refusal; returns the pause in microseconds. Args: the site's
/// Retry-After (µs, 0 = none), default pause (µs), max pause (µs), ramp step
/// (µs), max penalty. A refusal during a pause (requests already in flight
/// when the first came back) extends it but does not raise the penalty again.
const REFUSE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', KEYS[1], 'pause_until', 'penalty', 'penalty_since')
local pause_until = tonumber(h[1]) or 0
local penalty = tonumber(h[2]) or 1
if pause_until <= now then
  if penalty > 1 then
    local steps = math.floor((now - (tonumber(h[3]) or now)) / tonumber(ARGV[4]))
    penalty = math.max(1, penalty / (2 ^ steps))
  end
  penalty = math.min(penalty * 2, tonumber(ARGV[5]))
end
local pause = tonumber(ARGV[1])
if pause == 0 then pause = tonumber(ARGV[2]) * penalty / 2 end
pause = math.min(pause, tonumber(ARGV[3]))
pause_until = math.max(pause_until, now + pause)
redis.call('HSET', KEYS[1], 'pause_until', pause_until, 'penalty', penalty,
           'penalty_since', pause_until, 'tat', pause_until)
redis.call('PEXPIRE', KEYS[1], 3600000 + math.ceil((pause_until - now) / 1000))
return pause_until - now
"#;

/// Whose pace a request counts against: a stored site's, or (a preview of a
/// site not saved yet) the host of its search URL's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaceKey {
    Site(i64),
    Host(String),
}

impl From<i64> for PaceKey {
    fn from(site_id: i64) -> Self {
        PaceKey::Site(site_id)
    }
}

impl PaceKey {
    /// The `site` label of the rate-limit metrics (bounded: hosts are not labels).
    fn label(&self) -> String {
        match self {
            PaceKey::Site(id) => id.to_string(),
            PaceKey::Host(_) => "preview".to_owned(),
        }
    }
}

/// The fleet's limiter; cheap to clone.
#[derive(Clone)]
pub struct SiteLimiter {
    conn: ConnectionManager,
    prefix: String,
    ramp_step: Duration,
}

impl SiteLimiter {
    /// Limits shared by every worker of the queue `queue_name`.
    pub fn new(conn: ConnectionManager, queue_name: &str) -> Self {
        Self::with_ramp_step(conn, queue_name, RAMP_STEP)
    }

    /// With another ramp step (tests).
    pub fn with_ramp_step(conn: ConnectionManager, queue_name: &str, ramp_step: Duration) -> Self {
        Self {
            conn,
            prefix: format!("{queue_name}:limit:"),
            ramp_step,
        }
    }

    fn key(&self, key: &PaceKey) -> String {
        match key {
            PaceKey::Site(id) => format!("{}site:{id}", self.prefix),
            PaceKey::Host(host) => format!("{}host:{host}", self.prefix),
        }
    }

    /// Asks once whether a request to the site may go now; how long to wait otherwise.
    pub async fn try_acquire(
        &self,
        key: impl Into<PaceKey>,
        max_requests_per_sec: Option<f64>,
    ) -> redis::RedisResult<Duration> {
        let interval_us = max_requests_per_sec.map_or(0, |rate| (1e6 / rate).round() as u64);
        let wait_us: u64 = redis::Script::new(ACQUIRE)
            .key(self.key(&key.into()))
            .arg(interval_us)
            .arg(self.ramp_step.as_micros() as u64)
            .arg(UNLIMITED_RAMP_INTERVAL.as_micros() as u64)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(Duration::from_micros(wait_us))
    }

    /// Waits until a request to the site may go; returns how long it waited.
    pub async fn acquire(
        &self,
        key: impl Into<PaceKey>,
        max_requests_per_sec: Option<f64>,
    ) -> anyhow::Result<Duration> {
        let key = key.into();
        let started = Instant::now();
        let mut redis_down_since: Option<Instant> = None;
        loop {
            match self.try_acquire(key.clone(), max_requests_per_sec).await {
                Ok(wait) if wait.is_zero() => return Ok(started.elapsed()),
                // Others may take the slot meanwhile: ask again after the wait.
                Ok(wait) => {
                    redis_down_since = None;
                    tokio::time::sleep(wait).await;
                }
                Err(e) => {
                    let since = *redis_down_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > REDIS_PATIENCE {
                        anyhow::bail!("the rate limiter (Redis) is unreachable: {e}");
                    }
                    tracing::warn!(error = %e, ?key, "rate limiter unreachable; waiting");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// The site refused a request: every worker pauses it (`retry_after`, or
    /// a default that grows with repeated refusals) and then ramps back up.
    /// Returns the pause.
    pub async fn refuse(
        &self,
        key: impl Into<PaceKey>,
        retry_after: Option<Duration>,
    ) -> redis::RedisResult<Duration> {
        let pause_us: u64 = redis::Script::new(REFUSE)
            .key(self.key(&key.into()))
            .arg(retry_after.map_or(0, |d| d.as_micros().max(1) as u64))
            .arg(DEFAULT_PAUSE.as_micros() as u64)
            .arg(MAX_PAUSE.as_micros() as u64)
            .arg(self.ramp_step.as_micros() as u64)
            .arg(MAX_PENALTY)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(Duration::from_micros(pause_us))
    }
}

/// One site's fleet-wide pace, taken before every request a crawl makes to
/// it: each page, and each redirect hop over plain HTTP.
#[derive(Clone)]
pub struct SitePace {
    pub limiter: SiteLimiter,
    pub key: PaceKey,
    pub max_requests_per_sec: Option<f64>,
}

impl SitePace {
    /// Waits for the site's next request slot; the wait is counted in
    /// `crawlfleet_rate_limit_wait_seconds`. A limiter unreachable for long
    /// fails the attempt (retried later): crawling on without it would not be polite.
    pub async fn wait(&self) -> Result<Duration, CrawlError> {
        let waited = self
            .limiter
            .acquire(self.key.clone(), self.max_requests_per_sec)
            .await
            .map_err(|e| CrawlError::failed(FailureKind::Internal, format!("{e:#}")))?;
        metrics()
            .rate_limit_wait
            .with_label_values(&[&self.key.label()])
            .observe(waited.as_secs_f64());
        Ok(waited)
    }
}
