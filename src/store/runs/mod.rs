//! Crawl runs: queueing, listing and retrying (here), dispatch bookkeeping
//! (`dispatch`), claiming and the fenced writes of a crawl (`fenced`), how
//! an attempt completes (`completion`) or ends otherwise: failed, released
//! or cancelled (`unfinished`; docs/design.md, "Claiming and fencing"), and
//! the runs the watchdog takes back (`abandoned`).

mod abandoned;
mod completion;
mod dispatch;
mod evidence;
mod fenced;
mod health;
mod listed;
mod raised;
pub(super) mod row;
mod scheduled;
mod unfinished;

pub use abandoned::*;
pub use completion::*;
pub use dispatch::*;
pub use evidence::*;
pub use fenced::*;
pub use listed::*;
pub use scheduled::*;
pub use unfinished::*;

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::listing::Listing;

use crate::{
    domain::{
        failure::FailureKind,
        run::{Attempt, CrawlRun, RunState, Transition, Trigger},
    },
    store::columns::decode,
};
use row::{AttemptRow, RunRow, maybe_run, runs};

/// What asking for a crawl did, site by site.
#[derive(Debug, Clone, Default)]
pub struct QueueOutcome {
    /// Runs queued now.
    pub queued: Vec<CrawlRun>,
    /// Sites skipped because the period's result already exists.
    pub skipped: Vec<CrawlRun>,
    /// Sites not queued again because a run of theirs is still active.
    pub already_active: Vec<CrawlRun>,
    /// Sites of the keyword not queued because they are disabled.
    pub disabled_sites: Vec<i64>,
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
    let outcome = queue_in(
        &mut tx,
        keyword_id,
        trigger,
        skip_completed_since,
        default_max_attempts,
    )
    .await?;
    tx.commit().await?;
    Ok(outcome)
}

/// [`queue_for_keyword`] inside the caller's transaction.
async fn queue_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    keyword_id: i64,
    trigger: Trigger,
    skip_completed_since: Option<DateTime<Utc>>,
    default_max_attempts: i32,
) -> sqlx::Result<Option<QueueOutcome>> {
    // The states written out below are predicates of partial indexes the
    // queries read (crawl_runs_keyword_site_finished, crawl_runs_one_active),
    // which a bound parameter would not match; tests/it/lifecycle.rs holds
    // them equal to `RunState::ACTIVE`.
    // FOR SHARE: a concurrent delete of the keyword waits for us, not the reverse.
    let exists = sqlx::query_scalar!(
        "SELECT id FROM keywords WHERE id = $1 FOR SHARE",
        keyword_id
    )
    .fetch_optional(&mut **tx)
    .await?;
    if exists.is_none() {
        return Ok(None);
    }
    let skipped = match skip_completed_since {
        None => Vec::new(),
        Some(since) => {
            // The completed state is written out: it is the predicate of the
            // partial index this reads (crawl_runs_keyword_site_finished).
            sqlx::query_as!(
                RunRow,
                r#"INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, priority, max_attempts, finished_at)
                   SELECT k.id, ks.site_id, $5, $2, k.priority, COALESCE(s.max_attempts, $4), now()
                   FROM keywords k
                   JOIN keyword_sites ks ON ks.keyword_id = k.id
                   JOIN sites s ON s.id = ks.site_id
                   WHERE k.id = $1 AND s.enabled AND EXISTS (
                       SELECT 1 FROM crawl_runs c
                       WHERE c.keyword_id = k.id AND c.site_id = ks.site_id
                         AND c.state = 'completed' AND c.finished_at >= $3)
                   RETURNING id, keyword_id, site_id, state, trigger, priority, attempt,
                             max_attempts, worker_id, pages_crawled, items_found, current_url,
                             error, error_kind, queued_at, not_before, dispatched_at, started_at,
                             heartbeat_at, state_changed_at, finished_at, health, health_reason,
                             refusals, stopped_at_url, stop_reason, items_new, items_changed,
                             items_removed, paging_ended, url_list_id, period_start, urls_failed, site_version"#,
                keyword_id,
                trigger.as_str(),
                since,
                default_max_attempts,
                RunState::Skipped as RunState
            )
            .fetch_all(&mut **tx)
            .await
            .and_then(runs)?
        }
    };
    let queued = sqlx::query_as!(
        RunRow,
        r#"INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, priority, max_attempts)
           SELECT k.id, ks.site_id, $5, $2, k.priority, COALESCE(s.max_attempts, $4)
           FROM keywords k
           JOIN keyword_sites ks ON ks.keyword_id = k.id
           JOIN sites s ON s.id = ks.site_id
           WHERE k.id = $1 AND s.enabled AND NOT (ks.site_id = ANY($3::bigint[]))
           ORDER BY ks.site_id
           -- The only unique index a new run can break is the one over the
           -- active states (crawl_runs_one_active): a pair with an active run.
           ON CONFLICT DO NOTHING
           RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                     worker_id, pages_crawled, items_found, current_url, error, error_kind,
                     queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                     state_changed_at, finished_at, health, health_reason, refusals,
                     stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                     paging_ended, url_list_id, period_start, urls_failed, site_version"#,
        keyword_id,
        trigger.as_str(),
        &skipped.iter().map(|r| r.site_id).collect::<Vec<_>>(),
        default_max_attempts,
        RunState::Queued as RunState
    )
    .fetch_all(&mut **tx)
    .await
    .and_then(runs)?;
    // The active states are written out: they are the predicate of the
    // partial index this reads (crawl_runs_one_active).
    let already_active = sqlx::query_as!(
        RunRow,
        r#"SELECT id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                  worker_id, pages_crawled, items_found, current_url, error, error_kind, queued_at,
                  not_before, dispatched_at, started_at, heartbeat_at, state_changed_at,
                  finished_at, health, health_reason, refusals, stopped_at_url, stop_reason,
                  items_new, items_changed, items_removed, paging_ended, url_list_id, period_start, urls_failed, site_version
           FROM crawl_runs
           WHERE keyword_id = $1 AND state IN ('queued', 'running', 'url_call', 'call_done')
             AND NOT (id = ANY($2::bigint[]))
           ORDER BY site_id"#,
        keyword_id,
        &queued.iter().map(|r| r.id).collect::<Vec<_>>()
    )
    .fetch_all(&mut **tx)
    .await
    .and_then(runs)?;
    let disabled_sites = sqlx::query_scalar!(
        r#"SELECT ks.site_id FROM keyword_sites ks JOIN sites s ON s.id = ks.site_id
           WHERE ks.keyword_id = $1 AND NOT s.enabled
           ORDER BY ks.site_id"#,
        keyword_id
    )
    .fetch_all(&mut **tx)
    .await?;
    Ok(Some(QueueOutcome {
        queued,
        skipped,
        already_active,
        disabled_sites,
    }))
}

pub async fn get(pool: &PgPool, id: i64) -> sqlx::Result<Option<CrawlRun>> {
    let row = sqlx::query_as!(
        RunRow,
        r#"SELECT id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                  worker_id, pages_crawled, items_found, current_url, error, error_kind, queued_at,
                  not_before, dispatched_at, started_at, heartbeat_at, state_changed_at,
                  finished_at, health, health_reason, refusals, stopped_at_url, stop_reason,
                  items_new, items_changed, items_removed, paging_ended, url_list_id, period_start, urls_failed, site_version
           FROM crawl_runs WHERE id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await?;
    maybe_run(row)
}

/// Filters of a run listing; `before` is the cursor (runs are listed newest first).
#[derive(Debug, Default, Clone)]
pub struct RunFilter {
    pub keyword_id: Option<i64>,
    pub url_list_id: Option<i64>,
    pub site_id: Option<i64>,
    pub state: Option<RunState>,
    /// Runs whose last failure was of this kind.
    pub error_kind: Option<FailureKind>,
    /// Runs queued at or after this time.
    pub queued_after: Option<DateTime<Utc>>,
    /// Runs queued before this time.
    pub queued_before: Option<DateTime<Utc>>,
    pub before: Option<i64>,
    pub limit: i64,
}

/// Runs, newest first, a page of them; an error when `filter.limit` is not
/// 1 to `listing::MAX_LIMIT`. The query holds only the filters given (see
/// `store::listing`).
pub async fn list(pool: &PgPool, filter: &RunFilter) -> sqlx::Result<Vec<CrawlRun>> {
    let columns = RunRow::RUN_COLUMNS.trim_end_matches(", ");
    let select = format!("SELECT {columns} FROM crawl_runs");
    let mut listing = Listing::new(&select);
    listing
        .filter("keyword_id = ", filter.keyword_id, "")
        .filter("url_list_id = ", filter.url_list_id, "")
        .filter("site_id = ", filter.site_id, "")
        .filter("state = ", filter.state.map(RunState::as_str), "")
        .filter("id < ", filter.before, "")
        .filter(
            "error_kind = ",
            filter.error_kind.map(FailureKind::as_str),
            "",
        )
        .filter("queued_at >= ", filter.queued_after, "")
        .filter("queued_at < ", filter.queued_before, "");
    listing
        .page("id DESC", filter.limit)?
        .build_query_as::<RunRow>()
        .fetch_all(pool)
        .await
        .and_then(runs)
}

/// Number of runs in each state.
pub async fn count_by_state(pool: &PgPool) -> sqlx::Result<Vec<(RunState, i64)>> {
    let rows = sqlx::query!(r#"SELECT state, count(*) AS "n!" FROM crawl_runs GROUP BY state"#)
        .fetch_all(pool)
        .await?;
    rows.into_iter()
        .map(|r| Ok((decode("state", &r.state)?, r.n)))
        .collect()
}

/// Queues a failed or cancelled run again with a fresh attempt budget (the
/// site's attempts, else `default_max_attempts`). `Ok(None)` when there is
/// no such run; [`RetryRefused`] when it has not ended that way or its
/// keyword/site already has another active run.
pub async fn retry(
    pool: &PgPool,
    id: i64,
    default_max_attempts: i32,
) -> sqlx::Result<Option<Result<CrawlRun, RetryRefused>>> {
    let Some(run) = get(pool, id).await? else {
        return Ok(None);
    };
    let budget = sqlx::query_scalar!("SELECT max_attempts FROM sites WHERE id = $1", run.site_id)
        .fetch_optional(pool)
        .await?
        .flatten()
        .unwrap_or(default_max_attempts);
    let Some(retry) = Transition::retry(run.state, run.attempt, budget) else {
        return Ok(Some(Err(RetryRefused::NotEnded(run.state.as_str()))));
    };
    let retried = sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = $3, attempt = $4, max_attempts = $5,
               worker_id = NULL, not_before = NULL, dispatched_at = NULL, finished_at = NULL,
               error = NULL, error_kind = NULL, queued_at = now(), state_changed_at = now()
           WHERE id = $1 AND attempt = $2 AND state = ANY($6)
           RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                     worker_id, pages_crawled, items_found, current_url, error, error_kind,
                     queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                     state_changed_at, finished_at, health, health_reason, refusals,
                     stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                     paging_ended, url_list_id, period_start, urls_failed, site_version"#,
        id,
        run.attempt,
        retry.to as RunState,
        retry.attempt,
        retry.max_attempts,
        retry.from as &[RunState]
    )
    .fetch_optional(pool)
    .await
    .and_then(maybe_run);
    match retried {
        Ok(Some(run)) => Ok(Some(Ok(run))),
        Ok(None) => Ok(Some(Err(RetryRefused::NotEnded("changed meanwhile")))),
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
    NotEnded(&'static str),
    #[error("another run of this keyword on this site is active")]
    PairActive,
}

/// Every attempt of a run, oldest first.
pub async fn attempts(pool: &PgPool, run_id: i64) -> sqlx::Result<Vec<Attempt>> {
    let rows = sqlx::query_as!(
        AttemptRow,
        r#"SELECT a.attempt, a.worker_id, a.started_at, a.ended_at, a.outcome, a.reason, a.error_kind,
                  a.last_url, (e.html IS NOT NULL) AS "kept_html!",
                  (e.screenshot IS NOT NULL) AS "kept_screenshot!"
           FROM crawl_attempts a
           LEFT JOIN attempt_evidence e ON e.run_id = a.run_id AND e.attempt = a.attempt
           WHERE a.run_id = $1 ORDER BY a.id"#,
        run_id
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(Attempt::try_from).collect()
}

/// Deletes ended runs (with their results and attempts) that finished before
/// `older_than` ago; returns how many runs went.
pub async fn delete_finished_before(pool: &PgPool, older_than: Duration) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        r#"DELETE FROM crawl_runs
           WHERE state = ANY($2) AND finished_at < now() - make_interval(secs => $1)"#,
        older_than.as_secs_f64(),
        &RunState::ENDED as &[RunState]
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
