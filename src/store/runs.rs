//! Crawl runs: queueing, dispatch bookkeeping, claiming, and every fenced
//! write a worker makes (DESIGN.md, "Claiming and fencing").

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use crate::domain::run::{RunState, Trigger, retry_backoff};

/// A stored crawl run, as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CrawlRun {
    pub id: i64,
    pub keyword_id: i64,
    pub site_id: i64,
    pub state: String,
    pub trigger: String,
    pub priority: i32,
    pub attempt: i32,
    pub max_attempts: i32,
    pub worker_id: Option<String>,
    pub pages_crawled: i32,
    pub items_found: i32,
    pub current_url: Option<String>,
    pub error: Option<String>,
    pub queued_at: DateTime<Utc>,
    pub not_before: Option<DateTime<Utc>>,
    pub dispatched_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub state_changed_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// What asking for a crawl did, site by site.
#[derive(Debug, Clone, Serialize, Default, utoipa::ToSchema)]
pub struct QueueOutcome {
    /// Runs queued now.
    pub queued: Vec<CrawlRun>,
    /// Sites skipped because the period's result already exists.
    pub skipped: Vec<CrawlRun>,
    /// Sites not queued again because a run of theirs is still active.
    pub already_active: Vec<CrawlRun>,
}

/// Queues one run per site of a keyword; `None` when the keyword does not exist.
/// With `skip_completed_since`, a site that completed a run since then gets a
/// `skipped` run instead (the scheduler's rule for a period already crawled).
pub async fn queue_for_keyword(
    pool: &PgPool,
    keyword_id: i64,
    trigger: Trigger,
    skip_completed_since: Option<DateTime<Utc>>,
    default_max_attempts: i32,
) -> sqlx::Result<Option<QueueOutcome>> {
    let mut tx = pool.begin().await?;
    // FOR SHARE: a concurrent delete of the keyword waits for us, not the reverse.
    let exists = sqlx::query_scalar!(
        "SELECT id FROM keywords WHERE id = $1 FOR SHARE",
        keyword_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    if exists.is_none() {
        return Ok(None);
    }
    let skipped = match skip_completed_since {
        None => Vec::new(),
        Some(since) => {
            sqlx::query_as!(
                CrawlRun,
                r#"INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, priority, max_attempts, finished_at)
                   SELECT k.id, ks.site_id, 'skipped', $2, k.priority, COALESCE(s.max_attempts, $4), now()
                   FROM keywords k
                   JOIN keyword_sites ks ON ks.keyword_id = k.id
                   JOIN sites s ON s.id = ks.site_id
                   WHERE k.id = $1 AND EXISTS (
                       SELECT 1 FROM crawl_runs c
                       WHERE c.keyword_id = k.id AND c.site_id = ks.site_id
                         AND c.state = 'completed' AND c.finished_at >= $3)
                   RETURNING *"#,
                keyword_id,
                trigger.as_str(),
                since,
                default_max_attempts
            )
            .fetch_all(&mut *tx)
            .await?
        }
    };
    let queued = sqlx::query_as!(
        CrawlRun,
        r#"INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, priority, max_attempts)
           SELECT k.id, ks.site_id, 'queued', $2, k.priority, COALESCE(s.max_attempts, $4)
           FROM keywords k
           JOIN keyword_sites ks ON ks.keyword_id = k.id
           JOIN sites s ON s.id = ks.site_id
           WHERE k.id = $1 AND NOT (ks.site_id = ANY($3::bigint[]))
           ORDER BY ks.site_id
           ON CONFLICT (keyword_id, site_id) WHERE state IN ('queued', 'running', 'url_call', 'call_done')
           DO NOTHING
           RETURNING *"#,
        keyword_id,
        trigger.as_str(),
        &skipped.iter().map(|r| r.site_id).collect::<Vec<_>>(),
        default_max_attempts
    )
    .fetch_all(&mut *tx)
    .await?;
    let already_active = sqlx::query_as!(
        CrawlRun,
        r#"SELECT * FROM crawl_runs
           WHERE keyword_id = $1 AND state IN ('queued', 'running', 'url_call', 'call_done')
             AND NOT (id = ANY($2::bigint[]))
           ORDER BY site_id"#,
        keyword_id,
        &queued.iter().map(|r| r.id).collect::<Vec<_>>()
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(QueueOutcome {
        queued,
        skipped,
        already_active,
    }))
}

pub async fn get(pool: &PgPool, id: i64) -> sqlx::Result<Option<CrawlRun>> {
    sqlx::query_as!(CrawlRun, "SELECT * FROM crawl_runs WHERE id = $1", id)
        .fetch_optional(pool)
        .await
}

/// Filters of a run listing; `before` is the cursor (runs are listed newest first).
#[derive(Debug, Default, Clone)]
pub struct RunFilter {
    pub keyword_id: Option<i64>,
    pub site_id: Option<i64>,
    pub state: Option<RunState>,
    pub before: Option<i64>,
    pub limit: i64,
}

pub async fn list(pool: &PgPool, filter: &RunFilter) -> sqlx::Result<Vec<CrawlRun>> {
    sqlx::query_as!(
        CrawlRun,
        r#"SELECT * FROM crawl_runs
           WHERE ($1::bigint IS NULL OR keyword_id = $1)
             AND ($2::bigint IS NULL OR site_id = $2)
             AND ($3::text IS NULL OR state = $3)
             AND ($4::bigint IS NULL OR id < $4)
           ORDER BY id DESC
           LIMIT $5"#,
        filter.keyword_id,
        filter.site_id,
        filter.state.map(RunState::as_str),
        filter.before,
        filter.limit
    )
    .fetch_all(pool)
    .await
}

/// Number of runs in each state.
pub async fn count_by_state(pool: &PgPool) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(r#"SELECT state, count(*) AS "n!" FROM crawl_runs GROUP BY state"#)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|r| (r.state, r.n)).collect())
}

/// Stops a queued or active run; `None` when there is no such run, otherwise
/// the run after the attempt (unchanged when it had already ended). A worker
/// crawling it notices at its next fenced write.
pub async fn cancel(pool: &PgPool, id: i64) -> sqlx::Result<Option<CrawlRun>> {
    let mut tx = pool.begin().await?;
    let cancelled = sqlx::query_as!(
        CrawlRun,
        r#"UPDATE crawl_runs
           SET state = 'cancelled', finished_at = now(), state_changed_at = now(), dispatched_at = NULL
           WHERE id = $1 AND state IN ('queued', 'running', 'url_call', 'call_done')
           RETURNING *"#,
        id
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(run) = cancelled else {
        tx.rollback().await?;
        return get(pool, id).await;
    };
    sqlx::query!(
        r#"UPDATE crawl_attempts SET ended_at = now(), outcome = 'cancelled', reason = 'cancelled by a user'
           WHERE run_id = $1 AND ended_at IS NULL"#,
        id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(run))
}

/// Queues a failed or cancelled run again with a fresh attempt budget. `Ok(None)`
/// when there is no such run; [`RetryRefused`] when it has not ended that way
/// or its keyword/site already has another active run.
pub async fn retry(
    pool: &PgPool,
    id: i64,
    default_max_attempts: i32,
) -> sqlx::Result<Option<Result<CrawlRun, RetryRefused>>> {
    let Some(run) = get(pool, id).await? else {
        return Ok(None);
    };
    if !matches!(run.state.as_str(), "failed" | "cancelled") {
        return Ok(Some(Err(RetryRefused::NotEnded(run.state))));
    }
    // Attempt numbers keep counting (the history stays readable); the budget
    // is the site's attempts again, counted from the next one.
    let retried = sqlx::query_as!(
        CrawlRun,
        r#"UPDATE crawl_runs
           SET state = 'queued', attempt = attempt + 1,
               max_attempts = attempt + COALESCE((SELECT max_attempts FROM sites WHERE sites.id = site_id), $2),
               worker_id = NULL, not_before = NULL, dispatched_at = NULL, finished_at = NULL,
               error = NULL, queued_at = now(), state_changed_at = now()
           WHERE id = $1 AND state IN ('failed', 'cancelled')
           RETURNING *"#,
        id,
        default_max_attempts
    )
    .fetch_optional(pool)
    .await;
    match retried {
        Ok(Some(run)) => Ok(Some(Ok(run))),
        Ok(None) => Ok(Some(Err(RetryRefused::NotEnded(
            "changed meanwhile".into(),
        )))),
        Err(e) if super::violates(&e, "crawl_runs_one_active") => {
            Ok(Some(Err(RetryRefused::PairActive)))
        }
        Err(e) => Err(e),
    }
}

/// Why a retry was refused.
#[derive(Debug, thiserror::Error)]
pub enum RetryRefused {
    #[error("only a failed or cancelled run can be retried; this one is {0}")]
    NotEnded(String),
    #[error("another run of this keyword on this site is active")]
    PairActive,
}

// ---- dispatch -------------------------------------------------------------

/// A run whose job message should be put into Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchedRun {
    pub run_id: i64,
    pub attempt: i32,
}

/// Runs dispatched to Redis and not claimed by a worker yet.
pub async fn count_in_redis(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM crawl_runs WHERE state = 'queued' AND dispatched_at IS NOT NULL"#
    )
    .fetch_one(pool)
    .await
}

/// Marks up to `limit` due queued runs as dispatched and returns them in the
/// order to push: round-robin across sites, each site's runs by priority then age.
pub async fn take_for_dispatch(pool: &PgPool, limit: i64) -> sqlx::Result<Vec<DispatchedRun>> {
    let rows = sqlx::query!(
        r#"WITH ranked AS (
               SELECT id, priority, queued_at,
                      row_number() OVER (PARTITION BY site_id ORDER BY priority DESC, queued_at, id) AS turn
               FROM crawl_runs
               WHERE state = 'queued' AND dispatched_at IS NULL
                 AND (not_before IS NULL OR not_before <= now())
           ), picked AS (
               SELECT id, turn, priority, queued_at FROM ranked
               ORDER BY turn, priority DESC, queued_at, id
               LIMIT $1
           )
           UPDATE crawl_runs r SET dispatched_at = now()
           FROM picked
           WHERE r.id = picked.id AND r.state = 'queued' AND r.dispatched_at IS NULL
           RETURNING r.id, r.attempt, picked.turn AS "turn!", picked.priority, picked.queued_at"#,
        limit
    )
    .fetch_all(pool)
    .await?;
    let mut rows = rows;
    rows.sort_by(|a, b| {
        (a.turn, -a.priority, a.queued_at, a.id).cmp(&(b.turn, -b.priority, b.queued_at, b.id))
    });
    Ok(rows
        .into_iter()
        .map(|r| DispatchedRun {
            run_id: r.id,
            attempt: r.attempt,
        })
        .collect())
}

/// Puts runs whose push to Redis failed back into the backlog.
pub async fn undispatch(pool: &PgPool, run_ids: &[i64]) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        "UPDATE crawl_runs SET dispatched_at = NULL WHERE id = ANY($1) AND state = 'queued'",
        run_ids
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Returns to the backlog every run dispatched longer ago than `timeout` that no
/// worker claimed: its message was lost (Redis flushed or restarted).
pub async fn redispatch_unclaimed(pool: &PgPool, timeout: Duration) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        r#"UPDATE crawl_runs SET dispatched_at = NULL
           WHERE state = 'queued' AND dispatched_at < now() - make_interval(secs => $1)"#,
        timeout.as_secs_f64()
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

// ---- worker writes, all fenced ---------------------------------------------

/// The identity every worker write is conditional on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub run_id: i64,
    pub attempt: i32,
    pub worker_id: String,
}

/// A worker write that did not land.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The attempt is no longer this worker's (retried elsewhere, cancelled,
    /// deleted): stop the crawl at once.
    #[error("run {run_id} attempt {attempt} is no longer held by this worker")]
    Superseded { run_id: i64, attempt: i32 },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl Fence {
    fn superseded(&self) -> FenceError {
        FenceError::Superseded {
            run_id: self.run_id,
            attempt: self.attempt,
        }
    }
}

/// A run a worker holds.
#[derive(Debug, Clone)]
pub struct ClaimedRun {
    pub fence: Fence,
    pub run: CrawlRun,
}

/// Claims a dispatched run for this worker; `None` when the message is stale or
/// a duplicate (the run moved on, or another worker claimed it).
pub async fn claim(
    pool: &PgPool,
    run_id: i64,
    attempt: i32,
    worker_id: &str,
) -> sqlx::Result<Option<ClaimedRun>> {
    let mut tx = pool.begin().await?;
    let run = sqlx::query_as!(
        CrawlRun,
        r#"UPDATE crawl_runs
           SET state = 'running', worker_id = $3, started_at = now(), heartbeat_at = now(),
               state_changed_at = now(), dispatched_at = NULL, pages_crawled = 0, current_url = NULL
           WHERE id = $1 AND attempt = $2 AND state = 'queued'
           RETURNING *"#,
        run_id,
        attempt,
        worker_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(run) = run else {
        return Ok(None);
    };
    sqlx::query!(
        "INSERT INTO crawl_attempts (run_id, attempt, worker_id) VALUES ($1, $2, $3)",
        run_id,
        attempt,
        worker_id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(ClaimedRun {
        fence: Fence {
            run_id,
            attempt,
            worker_id: worker_id.to_owned(),
        },
        run,
    }))
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AttemptOutcome {
    Completed,
    Failed,
    Released,
}

impl AttemptOutcome {
    fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Completed => "completed",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::Released => "released",
        }
    }
}

/// Closes the open attempt record of a fence.
async fn close_attempt(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    fence: &Fence,
    outcome: AttemptOutcome,
    reason: Option<&str>,
    last_url: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE crawl_attempts SET ended_at = now(), outcome = $4, reason = $5, last_url = $6
           WHERE run_id = $1 AND attempt = $2 AND worker_id = $3 AND ended_at IS NULL"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        outcome.as_str(),
        reason,
        last_url
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// One attempt of a run, as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Attempt {
    pub attempt: i32,
    pub worker_id: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: Option<String>,
    pub reason: Option<String>,
    pub last_url: Option<String>,
}

/// Every attempt of a run, oldest first.
pub async fn attempts(pool: &PgPool, run_id: i64) -> sqlx::Result<Vec<Attempt>> {
    sqlx::query_as!(
        Attempt,
        r#"SELECT attempt, worker_id, started_at, ended_at, outcome, reason, last_url
           FROM crawl_attempts WHERE run_id = $1 ORDER BY id"#,
        run_id
    )
    .fetch_all(pool)
    .await
}

/// Records that a page request is in flight.
pub async fn enter_url_call(
    pool: &PgPool,
    fence: &Fence,
    url: &str,
) -> Result<CrawlRun, FenceError> {
    sqlx::query_as!(
        CrawlRun,
        r#"UPDATE crawl_runs
           SET state = 'url_call', current_url = $4, state_changed_at = now(), heartbeat_at = now()
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state IN ('running', 'call_done')
           RETURNING *"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        url
    )
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| fence.superseded())
}

/// Whether the worker still holds the run (not cancelled, not taken over).
pub async fn is_held(pool: &PgPool, fence: &Fence) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3
             AND state IN ('running', 'url_call', 'call_done')) AS "held!""#,
        fence.run_id,
        fence.attempt,
        fence.worker_id
    )
    .fetch_one(pool)
    .await
}

/// Proves the worker still holds the run; its heartbeat for the watchdog.
pub async fn heartbeat(pool: &PgPool, fence: &Fence) -> Result<(), FenceError> {
    let done = sqlx::query!(
        r#"UPDATE crawl_runs SET heartbeat_at = now()
           WHERE id = $1 AND attempt = $2 AND worker_id = $3
             AND state IN ('running', 'url_call', 'call_done')"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id
    )
    .execute(pool)
    .await?;
    if done.rows_affected() == 0 {
        return Err(fence.superseded());
    }
    Ok(())
}

/// One item extracted from a page, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct PageItem {
    pub fields: serde_json::Value,
    pub item_url: Option<String>,
    pub content_hash: String,
}

/// Stores one page's items and moves the run to `call_done`, in one transaction
/// that holds the run's row: a superseded worker's page never lands. A page
/// stored again (a retried attempt) replaces its rows instead of adding to them.
pub async fn store_page(
    pool: &PgPool,
    fence: &Fence,
    page: i32,
    page_url: &str,
    items: &[PageItem],
) -> Result<CrawlRun, FenceError> {
    let mut tx = pool.begin().await?;
    let held = sqlx::query!(
        r#"SELECT keyword_id, site_id FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = 'url_call'
           FOR UPDATE"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| fence.superseded())?;
    let positions: Vec<i32> = (1..=items.len() as i32).collect();
    let fields: Vec<serde_json::Value> = items.iter().map(|i| i.fields.clone()).collect();
    let urls: Vec<Option<String>> = items.iter().map(|i| i.item_url.clone()).collect();
    let hashes: Vec<String> = items.iter().map(|i| i.content_hash.clone()).collect();
    sqlx::query!(
        r#"INSERT INTO crawl_results (run_id, keyword_id, site_id, page, position, page_url, item_url, fields, content_hash)
           SELECT $1, $2, $3, $4, item.position, $5, item.url, item.fields, item.hash
           FROM UNNEST($6::int[], $7::text[], $8::jsonb[], $9::text[]) AS item(position, url, fields, hash)
           ON CONFLICT (run_id, page, position) DO UPDATE
           SET page_url = EXCLUDED.page_url, item_url = EXCLUDED.item_url, fields = EXCLUDED.fields,
               content_hash = EXCLUDED.content_hash, fetched_at = EXCLUDED.fetched_at"#,
        fence.run_id,
        held.keyword_id,
        held.site_id,
        page,
        page_url,
        &positions,
        &urls as &[Option<String>],
        &fields,
        &hashes
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "DELETE FROM crawl_results WHERE run_id = $1 AND page = $2 AND position > $3",
        fence.run_id,
        page,
        items.len() as i32
    )
    .execute(&mut *tx)
    .await?;
    let run = sqlx::query_as!(
        CrawlRun,
        r#"UPDATE crawl_runs
           SET state = 'call_done', pages_crawled = $2, state_changed_at = now(), heartbeat_at = now(),
               items_found = (SELECT count(*) FROM crawl_results WHERE run_id = $1)
           WHERE id = $1
           RETURNING *"#,
        fence.run_id,
        page
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(run)
}

/// Ends the attempt as completed; results of pages past the last one crawled
/// (left by an earlier attempt that went further) are removed.
pub async fn complete(
    pool: &PgPool,
    fence: &Fence,
    last_page: i32,
) -> Result<CrawlRun, FenceError> {
    let mut tx = pool.begin().await?;
    // Held (fenced, row locked) and the URL the attempt ended on, in one read.
    let last_url = sqlx::query_scalar!(
        r#"SELECT current_url FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state IN ('running', 'call_done')
           FOR UPDATE"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| fence.superseded())?;
    sqlx::query!(
        "DELETE FROM crawl_results WHERE run_id = $1 AND page > $2",
        fence.run_id,
        last_page
    )
    .execute(&mut *tx)
    .await?;
    let run = sqlx::query_as!(
        CrawlRun,
        r#"UPDATE crawl_runs
           SET state = 'completed', finished_at = now(), state_changed_at = now(), current_url = NULL,
               error = NULL, items_found = (SELECT count(*) FROM crawl_results WHERE run_id = $1)
           WHERE id = $1
           RETURNING *"#,
        fence.run_id
    )
    .fetch_one(&mut *tx)
    .await?;
    close_attempt(
        &mut tx,
        fence,
        AttemptOutcome::Completed,
        None,
        last_url.as_deref(),
    )
    .await?;
    tx.commit().await?;
    Ok(run)
}

/// Ends a failed attempt: back to `queued` for the next attempt after a backoff,
/// or `failed` when this was the last attempt or the error is permanent.
pub async fn fail_attempt(
    pool: &PgPool,
    fence: &Fence,
    reason: &str,
    permanent: bool,
) -> Result<CrawlRun, FenceError> {
    let backoff = retry_backoff(fence.attempt + 1);
    let mut tx = pool.begin().await?;
    let run = sqlx::query_as!(
        CrawlRun,
        r#"UPDATE crawl_runs
           SET state = CASE WHEN $5 OR attempt >= max_attempts THEN 'failed' ELSE 'queued' END,
               finished_at = CASE WHEN $5 OR attempt >= max_attempts THEN now() END,
               not_before = CASE WHEN $5 OR attempt >= max_attempts THEN NULL
                                 ELSE now() + make_interval(secs => $6) END,
               attempt = CASE WHEN $5 OR attempt >= max_attempts THEN attempt ELSE attempt + 1 END,
               worker_id = CASE WHEN $5 OR attempt >= max_attempts THEN worker_id END,
               dispatched_at = NULL, error = $4, state_changed_at = now()
           WHERE id = $1 AND attempt = $2 AND worker_id = $3
             AND state IN ('running', 'url_call', 'call_done')
           RETURNING *"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        reason,
        permanent,
        backoff.as_secs_f64()
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| fence.superseded())?;
    close_attempt(
        &mut tx,
        fence,
        AttemptOutcome::Failed,
        Some(reason),
        run.current_url.as_deref(),
    )
    .await?;
    tx.commit().await?;
    Ok(run)
}

/// A held run the watchdog takes back, and why.
#[derive(Debug, Clone)]
pub struct AbandonedRun {
    pub fence: Fence,
    pub reason: String,
}

/// Held runs whose worker stopped heartbeating for `heartbeat_timeout`, or whose
/// page request has been in flight longer than the site's stuck timeout plus `grace`.
pub async fn find_abandoned(
    pool: &PgPool,
    heartbeat_timeout: Duration,
    default_stuck_timeout: Duration,
    grace: Duration,
) -> sqlx::Result<Vec<AbandonedRun>> {
    let rows = sqlx::query!(
        r#"SELECT r.id, r.attempt, r.worker_id AS "worker_id!", r.current_url,
                  (r.heartbeat_at < now() - make_interval(secs => $1)) AS "lost!"
           FROM crawl_runs r JOIN sites s ON s.id = r.site_id
           WHERE r.state IN ('running', 'url_call', 'call_done') AND r.worker_id IS NOT NULL
             AND (r.heartbeat_at < now() - make_interval(secs => $1)
                  OR (r.state = 'url_call' AND r.state_changed_at
                      < now() - make_interval(secs => COALESCE(s.stuck_timeout_secs::float8, $2) + $3)))
           ORDER BY r.id"#,
        heartbeat_timeout.as_secs_f64(),
        default_stuck_timeout.as_secs_f64(),
        grace.as_secs_f64()
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let reason = if r.lost {
                format!(
                    "worker lost: {} sent no heartbeat for {}s",
                    r.worker_id,
                    heartbeat_timeout.as_secs()
                )
            } else {
                format!(
                    "stuck: page request did not return (at {})",
                    r.current_url.as_deref().unwrap_or("?")
                )
            };
            AbandonedRun {
                fence: Fence {
                    run_id: r.id,
                    attempt: r.attempt,
                    worker_id: r.worker_id,
                },
                reason,
            }
        })
        .collect())
}

/// Hands a held run back to the queue without counting the attempt against it
/// (the worker is draining: the crawl did not fail).
pub async fn release(pool: &PgPool, fence: &Fence) -> Result<CrawlRun, FenceError> {
    let mut tx = pool.begin().await?;
    let last_url = sqlx::query_scalar!(
        r#"SELECT current_url FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3
             AND state IN ('running', 'url_call', 'call_done')
           FOR UPDATE"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| fence.superseded())?;
    let run = sqlx::query_as!(
        CrawlRun,
        r#"UPDATE crawl_runs
           SET state = 'queued', worker_id = NULL, dispatched_at = NULL, not_before = NULL,
               current_url = NULL, state_changed_at = now()
           WHERE id = $1
           RETURNING *"#,
        fence.run_id
    )
    .fetch_one(&mut *tx)
    .await?;
    close_attempt(
        &mut tx,
        fence,
        AttemptOutcome::Released,
        Some("worker drained"),
        last_url.as_deref(),
    )
    .await?;
    tx.commit().await?;
    Ok(run)
}

/// Deletes ended runs (with their results and attempts) that finished before
/// `older_than` ago; returns how many runs went.
pub async fn delete_finished_before(pool: &PgPool, older_than: Duration) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        r#"DELETE FROM crawl_runs
           WHERE state IN ('completed', 'failed', 'skipped', 'cancelled')
             AND finished_at < now() - make_interval(secs => $1)"#,
        older_than.as_secs_f64()
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
