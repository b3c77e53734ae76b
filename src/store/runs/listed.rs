//! A URL list's runs: queueing one, the entries it has left to read in its
//! period, and its fenced writes: a URL's page stored with its entry marked
//! read in one transaction, or a URL that failed recorded on its entry. A
//! retried or rescued run reads on from the entries not marked read.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{
    fenced::{Fence, FenceError, StoredPage, store_page_with},
    row::{RunRow, maybe_run},
};
use crate::domain::{
    page::CrawledPage,
    run::{CrawlRun, RunState, Transition, Trigger},
};

/// What asking for a list's run did.
#[derive(Debug, Clone)]
pub enum ListQueued {
    /// A run queued now.
    Queued(CrawlRun),
    /// The list's run still active: not queued twice.
    AlreadyActive(CrawlRun),
    /// The list's site is disabled.
    SiteDisabled,
}

/// Queues a run of list `list_id` for the period that starts at
/// `period_start`; `None` when the list does not exist.
pub async fn queue_for_list(
    pool: &PgPool,
    list_id: i64,
    trigger: Trigger,
    period_start: DateTime<Utc>,
    default_max_attempts: i32,
) -> sqlx::Result<Option<ListQueued>> {
    let mut tx = pool.begin().await?;
    let outcome = queue_list_in(
        &mut tx,
        list_id,
        trigger,
        period_start,
        default_max_attempts,
    )
    .await?;
    tx.commit().await?;
    Ok(outcome)
}

/// [`queue_for_list`] within the caller's transaction.
pub(super) async fn queue_list_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    list_id: i64,
    trigger: Trigger,
    period_start: DateTime<Utc>,
    default_max_attempts: i32,
) -> sqlx::Result<Option<ListQueued>> {
    // FOR SHARE: a concurrent delete of the list waits for us.
    let list = sqlx::query!(
        r#"SELECT l.id, s.enabled FROM url_lists l JOIN sites s ON s.id = l.site_id
           WHERE l.id = $1 FOR SHARE OF l"#,
        list_id
    )
    .fetch_optional(&mut **tx)
    .await?;
    let Some(list) = list else {
        return Ok(None);
    };
    if !list.enabled {
        return Ok(Some(ListQueued::SiteDisabled));
    }
    // The only unique index a new run can break is the list's active one
    // (crawl_runs_one_active_list).
    let queued = sqlx::query_as!(
        RunRow,
        r#"INSERT INTO crawl_runs (url_list_id, site_id, state, trigger, priority, max_attempts, period_start)
           SELECT l.id, l.site_id, $3, $2, 0, COALESCE(s.max_attempts, $4), $5
           FROM url_lists l JOIN sites s ON s.id = l.site_id
           WHERE l.id = $1
           ON CONFLICT DO NOTHING
           RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                     worker_id, pages_crawled, items_found, current_url, error, error_kind,
                     queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                     state_changed_at, finished_at, health, health_reason, refusals,
                     stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                     paging_ended, url_list_id, period_start, urls_failed, site_version"#,
        list_id,
        trigger.as_str(),
        RunState::Queued as RunState,
        default_max_attempts,
        period_start
    )
    .fetch_optional(&mut **tx)
    .await
    .and_then(maybe_run)?;
    let outcome = match queued {
        Some(run) => ListQueued::Queued(run),
        None => {
            let active = sqlx::query_as!(
                RunRow,
                r#"SELECT id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                          worker_id, pages_crawled, items_found, current_url, error, error_kind,
                          queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                          state_changed_at, finished_at, health, health_reason, refusals,
                          stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                          paging_ended, url_list_id, period_start, urls_failed, site_version
                   FROM crawl_runs
                   WHERE url_list_id = $1 AND state IN ('queued', 'running', 'url_call', 'call_done')"#,
                list_id
            )
            .fetch_optional(&mut **tx)
            .await
            .and_then(maybe_run)?
            .ok_or_else(|| sqlx::Error::Protocol("a list run conflicted, none is active".into()))?;
            ListQueued::AlreadyActive(active)
        }
    };
    Ok(Some(outcome))
}

/// One URL of a list, as a run reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    pub line: i32,
    pub url: String,
}

/// Up to `limit` entries of list `list_id` after line `after`, in line
/// order, that the period starting at `period_start` has not read yet nor
/// found failing.
pub async fn pending_entries(
    pool: &PgPool,
    list_id: i64,
    period_start: DateTime<Utc>,
    after: i32,
    limit: i64,
) -> sqlx::Result<Vec<PendingEntry>> {
    sqlx::query_as!(
        PendingEntry,
        r#"SELECT line, url FROM url_list_entries
           WHERE list_id = $1 AND line > $3
             AND (last_read_at IS NULL OR last_read_at < $2)
             AND (failed_at IS NULL OR failed_at < $2)
           ORDER BY line
           LIMIT $4"#,
        list_id,
        period_start,
        after,
        limit
    )
    .fetch_all(pool)
    .await
}

/// Stores the page of one URL of list `list_id` (its items and results, as
/// `store_page` does) and marks its entry read, in one fenced transaction:
/// a URL is read once per period, and a superseded worker marks nothing.
pub async fn store_list_page(
    pool: &PgPool,
    fence: &Fence,
    crawled: &CrawledPage<'_>,
    list_id: i64,
) -> Result<StoredPage, FenceError> {
    store_page_with(
        pool,
        fence,
        crawled,
        Transition::store_list_url(fence.attempt),
        Some((list_id, crawled.url)),
    )
    .await
}

/// Records that the page of one URL of list `list_id` could not be read
/// (`error`, as a person reads it) on its entry and counts it on the run,
/// fenced; the run goes on with the next URL.
pub async fn list_url_failed(
    pool: &PgPool,
    fence: &Fence,
    list_id: i64,
    url: &str,
    error: &str,
) -> Result<CrawlRun, FenceError> {
    let failed = Transition::store_list_url(fence.attempt);
    let mut tx = pool.begin().await?;
    let run = sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = $4, urls_failed = urls_failed + 1, state_changed_at = now(), heartbeat_at = now()
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
        failed.to as RunState,
        failed.from as &[RunState]
    )
    .fetch_optional(&mut *tx)
    .await
    .and_then(maybe_run)?
    .ok_or_else(|| fence.superseded())?;
    sqlx::query!(
        r#"UPDATE url_list_entries SET failed_at = now(), last_error = $3
           WHERE list_id = $1 AND url = $2"#,
        list_id,
        url,
        error
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(run)
}
