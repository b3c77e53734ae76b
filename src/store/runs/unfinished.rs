//! How an attempt ends without completing, each decided as a `Transition`
//! (`domain::run`) and applied once, guarded on the states it may leave,
//! closing the attempt's record: failed (queued again or not, by the
//! failure's kind), handed back by a draining worker, or cancelled by a user.
//! A failure and a release are fenced on (run, attempt, worker); a cancel on
//! the run's attempt, as no worker asks for it. A run that ends failed
//! records its webhook events in the same transaction
//! (`raised::record_ending`).

use sqlx::{PgConnection, PgPool};

use super::{
    fenced::{Fence, FenceError},
    get, health,
    raised::record_ending,
    row::{RunRow, maybe_run},
};
use crate::domain::{
    failure::{Failure, FailureKind},
    run::{AttemptOutcome, CrawlRun, RunState, Transition},
};

/// What a failing or released attempt knows of its held run once its row
/// is locked.
struct HeldAttempt {
    site_id: i64,
    max_attempts: i32,
    current_url: Option<String>,
}

/// Locks the run `fence` holds, in any held state.
async fn hold(tx: &mut PgConnection, fence: &Fence) -> Result<HeldAttempt, FenceError> {
    sqlx::query_as!(
        HeldAttempt,
        r#"SELECT site_id, max_attempts, current_url FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($4)
           FOR UPDATE"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        &RunState::HELD as &[RunState]
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| fence.superseded())
}

/// Ends a failed attempt as [`Transition::fail`] decides: back to `queued`
/// for the next attempt after a backoff, or `failed` when this was the last
/// attempt or no later attempt can succeed ([`FailureKind::may_succeed_later`]).
pub async fn fail_attempt(
    pool: &PgPool,
    fence: &Fence,
    failure: &Failure,
) -> Result<CrawlRun, FenceError> {
    let mut tx = pool.begin().await?;
    let held = hold(&mut tx, fence).await?;
    let failed = Transition::fail(fence.attempt, held.max_attempts, failure.kind);
    let run = sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = $4, attempt = $5, not_before = now() + make_interval(secs => $6),
               worker_id = CASE WHEN $7 THEN worker_id END,
               finished_at = CASE WHEN $8 THEN now() END,
               dispatched_at = NULL, error = $9, error_kind = $10, state_changed_at = now()
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($11)
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
        failed.attempt,
        failed.not_before.map(|wait| wait.as_secs_f64()),
        failed.keeps_worker(),
        failed.ends_run(),
        failure.message,
        failure.kind as FailureKind,
        failed.from as &[RunState]
    )
    .fetch_optional(&mut *tx)
    .await
    .and_then(maybe_run)?
    .ok_or_else(|| fence.superseded())?;
    let site = match failed.site {
        Some(change) => health::change_standing(&mut tx, held.site_id, change).await?,
        None => None,
    };
    close_attempt(
        &mut tx,
        fence,
        failed.closes,
        Some(&failure.message),
        Some(failure.kind),
        held.current_url.as_deref(),
    )
    .await?;
    record_ending(&mut tx, &run, None, site).await?;
    tx.commit().await?;
    Ok(run)
}

/// Hands a held run back to the queue without counting the attempt against it
/// (the worker is draining: the crawl did not fail).
pub async fn release(pool: &PgPool, fence: &Fence) -> Result<CrawlRun, FenceError> {
    let mut tx = pool.begin().await?;
    let held = hold(&mut tx, fence).await?;
    let released = Transition::release(fence.attempt);
    let run = sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = $4, worker_id = NULL, dispatched_at = NULL, not_before = NULL,
               current_url = NULL, state_changed_at = now()
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
        released.to as RunState,
        released.from as &[RunState]
    )
    .fetch_optional(&mut *tx)
    .await
    .and_then(maybe_run)?
    .ok_or_else(|| fence.superseded())?;
    close_attempt(
        &mut tx,
        fence,
        released.closes,
        Some("worker drained"),
        None,
        held.current_url.as_deref(),
    )
    .await?;
    tx.commit().await?;
    Ok(run)
}

/// Stops a queued or active run; `None` when there is no such run, otherwise
/// the run after the attempt (unchanged when it had already ended). A worker
/// crawling it notices at its next fenced write.
pub async fn cancel(pool: &PgPool, id: i64) -> sqlx::Result<Option<CrawlRun>> {
    loop {
        let Some(run) = get(pool, id).await? else {
            return Ok(None);
        };
        let cancel = Transition::cancel(run.attempt);
        if !cancel.from.contains(&run.state) {
            return Ok(Some(run));
        }
        let mut tx = pool.begin().await?;
        // Guarded on the attempt read: a run that moved on meanwhile (a retry
        // queued another attempt) is read and judged again.
        let cancelled = sqlx::query_as!(
            RunRow,
            r#"UPDATE crawl_runs
               SET state = $3, finished_at = now(), state_changed_at = now(), dispatched_at = NULL
               WHERE id = $1 AND attempt = $2 AND state = ANY($4)
               RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                         worker_id, pages_crawled, items_found, current_url, error, error_kind,
                         queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                         state_changed_at, finished_at, health, health_reason, refusals,
                         stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                         paging_ended, url_list_id, period_start, urls_failed, site_version"#,
            id,
            cancel.attempt,
            cancel.to as RunState,
            cancel.from as &[RunState]
        )
        .fetch_optional(&mut *tx)
        .await
        .and_then(maybe_run)?;
        let Some(run) = cancelled else {
            tx.rollback().await?;
            continue;
        };
        sqlx::query!(
            r#"UPDATE crawl_attempts SET ended_at = now(), outcome = $2, reason = 'cancelled by a user',
                      error_kind = $3
               WHERE run_id = $1 AND ended_at IS NULL"#,
            id,
            cancel.closes.map(AttemptOutcome::as_str),
            FailureKind::Cancelled.as_str()
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        return Ok(Some(run));
    }
}

/// Closes the open attempt record of a fence.
async fn close_attempt(
    tx: &mut PgConnection,
    fence: &Fence,
    outcome: Option<AttemptOutcome>,
    reason: Option<&str>,
    error_kind: Option<FailureKind>,
    last_url: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE crawl_attempts SET ended_at = now(), outcome = $4, reason = $5, error_kind = $6,
                  last_url = $7
           WHERE run_id = $1 AND attempt = $2 AND worker_id = $3 AND ended_at IS NULL"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        outcome.map(AttemptOutcome::as_str),
        reason,
        error_kind.map(FailureKind::as_str),
        last_url
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
