//! How an attempt ends, each write fenced on (run, attempt, worker) and
//! closing the attempt's record: completed, failed (retried or not, by the
//! failure's kind), or handed back by a draining worker.

use sqlx::PgPool;

use super::{
    fenced::{Fence, FenceError},
    row::{RunRow, maybe_run},
};
use crate::domain::{
    failure::{Failure, FailureKind},
    run::{AttemptOutcome, CrawlRun, retry_backoff},
};

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
        RunRow,
        r#"UPDATE crawl_runs
           SET state = 'completed', finished_at = now(), state_changed_at = now(), current_url = NULL,
               error = NULL, error_kind = NULL, items_found = (SELECT count(*) FROM crawl_results WHERE run_id = $1)
           WHERE id = $1
           RETURNING *"#,
        fence.run_id
    )
    .fetch_one(&mut *tx)
    .await?
    .try_into()?;
    close_attempt(
        &mut tx,
        fence,
        AttemptOutcome::Completed,
        None,
        None,
        last_url.as_deref(),
    )
    .await?;
    tx.commit().await?;
    Ok(run)
}

/// Ends a failed attempt: back to `queued` for the next attempt after a backoff,
/// or `failed` when this was the last attempt or no later attempt can succeed
/// ([`FailureKind::may_succeed_later`]).
pub async fn fail_attempt(
    pool: &PgPool,
    fence: &Fence,
    failure: &Failure,
) -> Result<CrawlRun, FenceError> {
    let permanent = !failure.kind.may_succeed_later();
    let backoff = retry_backoff(fence.attempt + 1);
    let mut tx = pool.begin().await?;
    let run = sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = CASE WHEN $5 OR attempt >= max_attempts THEN 'failed' ELSE 'queued' END,
               finished_at = CASE WHEN $5 OR attempt >= max_attempts THEN now() END,
               not_before = CASE WHEN $5 OR attempt >= max_attempts THEN NULL
                                 ELSE now() + make_interval(secs => $6) END,
               attempt = CASE WHEN $5 OR attempt >= max_attempts THEN attempt ELSE attempt + 1 END,
               worker_id = CASE WHEN $5 OR attempt >= max_attempts THEN worker_id END,
               dispatched_at = NULL, error = $4, error_kind = $7, state_changed_at = now()
           WHERE id = $1 AND attempt = $2 AND worker_id = $3
             AND state IN ('running', 'url_call', 'call_done')
           RETURNING *"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        failure.message,
        permanent,
        backoff.as_secs_f64(),
        failure.kind.as_str()
    )
    .fetch_optional(&mut *tx)
    .await
    .and_then(maybe_run)?
    .ok_or_else(|| fence.superseded())?;
    close_attempt(
        &mut tx,
        fence,
        AttemptOutcome::Failed,
        Some(&failure.message),
        Some(failure.kind),
        run.current_url.as_deref(),
    )
    .await?;
    tx.commit().await?;
    Ok(run)
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
        RunRow,
        r#"UPDATE crawl_runs
           SET state = 'queued', worker_id = NULL, dispatched_at = NULL, not_before = NULL,
               current_url = NULL, state_changed_at = now()
           WHERE id = $1
           RETURNING *"#,
        fence.run_id
    )
    .fetch_one(&mut *tx)
    .await?
    .try_into()?;
    close_attempt(
        &mut tx,
        fence,
        AttemptOutcome::Released,
        Some("worker drained"),
        None,
        last_url.as_deref(),
    )
    .await?;
    tx.commit().await?;
    Ok(run)
}

/// Closes the open attempt record of a fence.
async fn close_attempt(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    fence: &Fence,
    outcome: AttemptOutcome,
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
        outcome.as_str(),
        reason,
        error_kind.map(FailureKind::as_str),
        last_url
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}
