//! Claiming a run and the writes a worker makes while it crawls, each
//! conditional on (run, attempt, worker). How an attempt completes is in
//! `completion`, how it fails or is released in `unfinished`; the runs the
//! watchdog takes back are found by `abandoned`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::row::{RunRow, maybe_run, run_row};
pub use crate::store::fence::{Fence, FenceError};
use crate::{
    domain::{
        page::CrawledPage,
        run::{CrawlRun, RunState, Transition},
    },
    store::items::tracking::record_page,
};

/// A run a worker holds, with what its crawl needs to start: the keyword's
/// text and the version of its site (`sites.updated_at`, which a worker's
/// cache of decoded sites is keyed on).
#[derive(Debug, Clone)]
pub struct ClaimedRun {
    pub fence: Fence,
    pub run: CrawlRun,
    /// The keyword's text; `None` for a URL list's run.
    pub keyword: Option<String>,
    pub site_version: DateTime<Utc>,
}

run_row!(
    /// A claimed run's row, its keyword's text and its site's version.
    ClaimRow {
        keyword: Option<String>,
        site_updated_at: DateTime<Utc>,
    }
);

/// Claims a dispatched run for this worker; `None` when the message is stale or
/// a duplicate (the run moved on, or another worker claimed it). Only a run
/// the dispatcher counts as dispatched can be claimed: a late message of a run
/// taken back from Redis (`redispatch_unclaimed`) is dropped, so it can never
/// start a crawl beyond the site's `max_concurrent_runs`.
///
/// One statement: the run moves to `running`, its attempt's record is opened
/// and the keyword and site version are read, all or nothing.
pub async fn claim(
    pool: &PgPool,
    run_id: i64,
    attempt: i32,
    worker_id: &str,
) -> sqlx::Result<Option<ClaimedRun>> {
    let claim = Transition::claim(attempt);
    let row = sqlx::query_as!(
        ClaimRow,
        r#"WITH claimed AS (
               UPDATE crawl_runs
               SET state = $4, worker_id = $3, started_at = now(), heartbeat_at = now(),
                   state_changed_at = now(), dispatched_at = NULL, pages_crawled = 0, current_url = NULL,
                   -- The version the crawl reads the site at (0: stored before
                   -- versions were kept, no version to name).
                   site_version = (SELECT NULLIF(version, 0) FROM sites WHERE id = crawl_runs.site_id)
               WHERE id = $1 AND attempt = $2 AND state = ANY($5) AND dispatched_at IS NOT NULL
               RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                         worker_id, pages_crawled, items_found, current_url, error, error_kind,
                         queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                         state_changed_at, finished_at, health, health_reason, refusals,
                         stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                         paging_ended, url_list_id, period_start, urls_failed, site_version
           ),
           opened AS (
               INSERT INTO crawl_attempts (run_id, attempt, worker_id)
               SELECT id, attempt, $3 FROM claimed
           )
           SELECT c.id, c.keyword_id, c.site_id, c.state, c.trigger, c.priority, c.attempt,
                  c.max_attempts, c.worker_id, c.pages_crawled, c.items_found, c.current_url,
                  c.error, c.error_kind, c.queued_at, c.not_before, c.dispatched_at, c.started_at,
                  c.heartbeat_at, c.state_changed_at, c.finished_at, c.health, c.health_reason,
                  c.refusals, c.stopped_at_url, c.stop_reason, c.items_new, c.items_changed,
                  c.items_removed, c.paging_ended, c.url_list_id, c.period_start, c.urls_failed, c.site_version,
                  k.keyword AS "keyword?", s.updated_at AS site_updated_at
           FROM claimed c
           LEFT JOIN keywords k ON k.id = c.keyword_id
           JOIN sites s ON s.id = c.site_id"#,
        run_id,
        claim.attempt,
        worker_id,
        claim.to as RunState,
        claim.from as &[RunState]
    )
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (run, (keyword, site_version)) = row.into_parts();
    Ok(Some(ClaimedRun {
        fence: Fence {
            run_id,
            attempt,
            worker_id: worker_id.to_owned(),
        },
        run: run.try_into()?,
        keyword,
        site_version,
    }))
}

/// Records that a page request is in flight.
pub async fn enter_url_call(
    pool: &PgPool,
    fence: &Fence,
    url: &str,
) -> Result<CrawlRun, FenceError> {
    enter_call(pool, fence, url, Transition::enter_url_call(fence.attempt)).await
}

/// Records that a detail page request is in flight (the list page's call
/// goes on, its URL and stuck clock now the detail page's).
pub async fn enter_detail_call(
    pool: &PgPool,
    fence: &Fence,
    url: &str,
) -> Result<CrawlRun, FenceError> {
    enter_call(
        pool,
        fence,
        url,
        Transition::enter_detail_call(fence.attempt),
    )
    .await
}

/// Applies a call's transition: the run on `url`, its stuck clock restarted.
async fn enter_call(
    pool: &PgPool,
    fence: &Fence,
    url: &str,
    call: Transition,
) -> Result<CrawlRun, FenceError> {
    sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = $4, current_url = $5, state_changed_at = now(), heartbeat_at = now()
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($6)
           RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                     worker_id, pages_crawled, items_found, current_url, error, error_kind,
                     queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                     state_changed_at, finished_at, health, health_reason, refusals,
                     stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                     paging_ended, url_list_id, period_start, urls_failed, site_version"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        call.to as RunState,
        url,
        call.from as &[RunState]
    )
    .fetch_optional(pool)
    .await
    .and_then(maybe_run)?
    .ok_or_else(|| fence.superseded())
}

/// Whether the worker still holds the run (not cancelled, not taken over).
pub async fn is_held(pool: &PgPool, fence: &Fence) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($4)) AS "held!""#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        &RunState::HELD as &[RunState]
    )
    .fetch_one(pool)
    .await
}

/// Proves the worker still holds the run; its heartbeat for the watchdog.
pub async fn heartbeat(pool: &PgPool, fence: &Fence) -> Result<(), FenceError> {
    let done = sqlx::query!(
        r#"UPDATE crawl_runs SET heartbeat_at = now()
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($4)"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        &RunState::HELD as &[RunState]
    )
    .execute(pool)
    .await?;
    if done.rows_affected() == 0 {
        return Err(fence.superseded());
    }
    Ok(())
}

/// What storing a page did: the run as it is now, and how many results the
/// page stored and how many items were new or changed to the run.
#[derive(Debug, Clone)]
pub struct StoredPage {
    pub run: CrawlRun,
    pub stored: usize,
    pub new: usize,
    pub changed: usize,
}

/// Stores one page's items and results (change tracking: each item judged
/// new, changed or unchanged against what its keyword/site stored; see
/// `items::tracking::record_page`) and moves the run to `call_done`, in one
/// transaction that holds the run's row: a superseded worker's page never
/// lands. A page stored again (a retried attempt) replaces its rows instead
/// of adding to them.
pub async fn store_page(
    pool: &PgPool,
    fence: &Fence,
    crawled: &CrawledPage<'_>,
) -> Result<StoredPage, FenceError> {
    store_page_with(
        pool,
        fence,
        crawled,
        Transition::store_page(fence.attempt),
        None,
    )
    .await
}

/// [`store_page`] by transition `stored`; with `entry` (a URL list and the
/// URL), that entry is marked read in the same transaction.
pub(super) async fn store_page_with(
    pool: &PgPool,
    fence: &Fence,
    crawled: &CrawledPage<'_>,
    stored: Transition,
    entry: Option<(i64, &str)>,
) -> Result<StoredPage, FenceError> {
    let mut tx = pool.begin().await?;
    if entry.is_some() {
        // A list's URLs in flight commit one after another on the run's
        // row: their commits do not wait for the WAL flush. A database crash
        // can lose the last of them, each with its entry's mark (one
        // transaction), so those URLs are read again, never skipped.
        sqlx::query!("SET LOCAL synchronous_commit = off")
            .execute(&mut *tx)
            .await?;
    }
    // Locks the row when the fence holds in `stored.from`; the update below
    // is guarded again, so the two cannot disagree.
    let written = record_page(&mut tx, fence, stored.from, crawled, false)
        .await?
        .ok_or_else(|| fence.superseded())?;
    let run = sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = $4, pages_crawled = CASE WHEN $9 THEN pages_crawled + 1 ELSE $5 END, state_changed_at = now(),
               heartbeat_at = now(),
               -- A list's URL is stored once a run (its entry is marked read
               -- with it): its results are added, not counted again, which
               -- for a list of many URLs would be quadratic.
               items_found = CASE WHEN $9 THEN items_found + $10
                                  ELSE (SELECT count(*) FROM crawl_results WHERE run_id = $1) END,
               items_new = items_new + $6, items_changed = items_changed + $7
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($8)
           RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                     worker_id, pages_crawled, items_found, current_url, error, error_kind,
                     queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                     state_changed_at, finished_at, health, health_reason, refusals,
                     stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                     paging_ended, url_list_id, period_start, urls_failed, site_version"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        stored.to as RunState,
        crawled.page,
        written.new as i32,
        written.changed as i32,
        stored.from as &[RunState],
        // A list's pages are its URLs, numbered by line: they are counted.
        entry.is_some(),
        written.stored as i32
    )
    .fetch_optional(&mut *tx)
    .await
    .and_then(maybe_run)?
    .ok_or_else(|| fence.superseded())?;
    if let Some((list_id, url)) = entry {
        sqlx::query!(
            r#"UPDATE url_list_entries SET last_read_at = now(), failed_at = NULL, last_error = NULL
               WHERE list_id = $1 AND url = $2"#,
            list_id,
            url
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(StoredPage {
        run,
        stored: written.stored as usize,
        new: written.new as usize,
        changed: written.changed as usize,
    })
}

/// A page request came back refused (429, 503, a block page): the run leaves
/// `url_call` while it waits out the site's pause, so the watchdog does not
/// take a patient crawl for a stuck one.
pub async fn page_refused(pool: &PgPool, fence: &Fence) -> Result<CrawlRun, FenceError> {
    let refused = Transition::page_refused(fence.attempt);
    sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = $4, state_changed_at = now(), heartbeat_at = now(), refusals = refusals + 1
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($5)
           RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                     worker_id, pages_crawled, items_found, current_url, error, error_kind,
                     queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                     state_changed_at, finished_at, health, health_reason, refusals,
                     stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                     paging_ended, url_list_id, period_start, urls_failed, site_version"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        refused.to as RunState,
        refused.from as &[RunState]
    )
    .fetch_optional(pool)
    .await
    .and_then(maybe_run)?
    .ok_or_else(|| fence.superseded())
}
