//! How an attempt ends, each write fenced on (run, attempt, worker) and
//! closing the attempt's record: completed, failed (retried or not, by the
//! failure's kind), or handed back by a draining worker. A run that ends
//! completed or failed records its webhook event in the same transaction.

use sqlx::{PgConnection, PgPool};

use super::{
    fenced::{Fence, FenceError},
    health::{self, SiteTransition},
    row::{RunRow, maybe_run, run_row},
};
use crate::{
    domain::{
        change::ChangeSummary,
        failure::{Failure, FailureKind},
        page::{FinalPage, PagesRead},
        run::{AttemptOutcome, CrawlRun, RunHealth, RunState, retry_backoff},
        site::RunTally,
        webhook::{WebhookEvent, WebhookEventType},
    },
    store::{
        items::tracking::{record_page, settle},
        webhooks,
    },
};

/// A completed run and what it found changed.
#[derive(Debug, Clone)]
pub struct Completion {
    pub run: CrawlRun,
    /// Its new, changed and removed items: counts, and the first of each
    /// with their diffs (what events and webhooks tell).
    pub changes: ChangeSummary,
    /// The last page, when the completion stored it: its number and the
    /// results stored for it.
    pub stored_page: Option<(i32, usize)>,
}

run_row!(
    /// A run just completed, whether its site's blocked state changed with
    /// it (to blocked: `true`), and whether any webhook endpoint listens.
    CompletedRow {
        blocked_now: Option<bool>,
        listened: bool,
    }
);

/// Ends the attempt as completed, judged against the site's expectations
/// (`health`); results of pages past the last one crawled (left by an
/// earlier attempt that went further) are removed. When the crawl read every
/// page, the items of its keyword/site it did not find are removed
/// (`items::tracking::settle`); the run records why its paging ended (where,
/// when robots.txt stopped it) and what it found, in the same transaction.
/// The last page, when the crawl left it unstored, is stored in it too.
pub async fn complete(
    pool: &PgPool,
    fence: &Fence,
    pages: PagesRead,
) -> Result<Completion, FenceError> {
    if let Some(last) = &pages.unstored {
        return complete_with_page(pool, fence, &pages, last).await;
    }
    let mut tx = pool.begin().await?;
    // Held (fenced, row locked) and the URL the attempt ended on, in one read.
    let held = sqlx::query!(
        r#"SELECT current_url, keyword_id, site_id FROM crawl_runs
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
        pages.last_page
    )
    .execute(&mut *tx)
    .await?;
    let changes = settle(
        &mut tx,
        fence.run_id,
        (held.keyword_id, held.site_id),
        pages.read_every_page(),
    )
    .await?;
    let mut run: CrawlRun = sqlx::query_as!(
        RunRow,
        r#"UPDATE crawl_runs
           SET state = 'completed', finished_at = now(), state_changed_at = now(), current_url = NULL,
               error = NULL, error_kind = NULL, items_found = (SELECT count(*) FROM crawl_results WHERE run_id = $1),
               items_new = $2, items_changed = $3, items_removed = $4, paging_ended = $5,
               stopped_at_url = $6, stop_reason = $7
           WHERE id = $1
           RETURNING *"#,
        fence.run_id,
        changes.new,
        changes.changed,
        changes.removed,
        pages.end.as_str(),
        pages.stopped.as_ref().map(|stop| stop.url.as_str()),
        pages.stopped.as_ref().map(|stop| stop.reason.as_str()),
    )
    .fetch_one(&mut *tx)
    .await?
    .try_into()?;
    let (health, site) = health::judge_completed(&mut tx, run.id, pages.health_notes()).await?;
    run.health = Some(health);
    close_attempt(
        &mut tx,
        fence,
        AttemptOutcome::Completed,
        None,
        None,
        held.current_url.as_deref(),
    )
    .await?;
    record_ending(&mut tx, &run, Some(&changes), site).await?;
    tx.commit().await?;
    Ok(Completion {
        run,
        changes,
        stored_page: None,
    })
}

/// [`complete`] with the last page: it is stored (fenced: the run must be
/// in `url_call` for this attempt and worker, and its row stays locked),
/// the results of pages after it dropped, the changes settled, the run
/// judged, and the run, its attempt's record and its site's blocked state
/// written in one statement, all in one transaction.
async fn complete_with_page(
    pool: &PgPool,
    fence: &Fence,
    pages: &PagesRead,
    last: &FinalPage,
) -> Result<Completion, FenceError> {
    let crawled = last.crawled();
    let mut tx = pool.begin().await?;
    let written = record_page(&mut tx, fence, &crawled, true)
        .await?
        .ok_or_else(|| fence.superseded())?;
    let pair = (written.keyword_id, written.site_id);
    let changes = settle(&mut tx, fence.run_id, pair, pages.read_every_page()).await?;
    let tally = RunTally {
        items: written.run_results as i32,
        refusals: written.refusals,
        bounded: pages.bounded.notes(),
        unparsed: pages.values.notes(),
        ..RunTally::default()
    };
    let health = health::judge(&mut tx, fence.run_id, pair, &written.expectations, tally).await?;
    let blocks = matches!(health, RunHealth::Degraded { blocked: true, .. });
    let row = sqlx::query_as!(
        CompletedRow,
        r#"WITH run AS (
               UPDATE crawl_runs
               SET state = 'completed', finished_at = now(), state_changed_at = now(), heartbeat_at = now(),
                   current_url = NULL, error = NULL, error_kind = NULL, pages_crawled = $4,
                   items_found = $5, items_new = $6, items_changed = $7, items_removed = $8,
                   paging_ended = $9, stopped_at_url = $10, stop_reason = $11, health = $12,
                   health_reason = $13
               WHERE id = $1
               RETURNING *
           ),
           closed AS (
               UPDATE crawl_attempts
               SET ended_at = now(), outcome = 'completed', reason = NULL, error_kind = NULL, last_url = $14
               WHERE run_id = $1 AND attempt = $2 AND worker_id = $3 AND ended_at IS NULL
           ),
           -- Blocked since this run, or healthy again: changed on those transitions only.
           site AS (
               UPDATE sites SET blocked_since = CASE WHEN $15 THEN now() END
               WHERE id = (SELECT site_id FROM run)
                 AND (($15 AND blocked_since IS NULL) OR ($16 AND blocked_since IS NOT NULL))
               RETURNING blocked_since IS NOT NULL AS blocked
           )
           SELECT run.*, (SELECT blocked FROM site) AS "blocked_now?",
                  EXISTS (SELECT 1 FROM webhooks WHERE enabled) AS "listened!"
           FROM run"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        last.page,
        written.run_results as i32,
        changes.new,
        changes.changed,
        changes.removed,
        pages.end.as_str(),
        pages.stopped.as_ref().map(|stop| stop.url.as_str()),
        pages.stopped.as_ref().map(|stop| stop.reason.as_str()),
        health.as_str(),
        health.reason(),
        crawled.url,
        blocks,
        health == RunHealth::Healthy,
    )
    .fetch_one(&mut *tx)
    .await?;
    let (row, (blocked_now, listened)) = row.into_parts();
    let mut run: CrawlRun = row.try_into()?;
    run.health = Some(health);
    let site = blocked_now.map(|blocked| match blocked {
        true => SiteTransition::Blocked,
        false => SiteTransition::Recovered,
    });
    if listened {
        record_events(&mut tx, &run, Some(&changes), site).await?;
    }
    tx.commit().await?;
    Ok(Completion {
        run,
        changes,
        stored_page: Some((last.page, written.stored as usize)),
    })
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
    let site = match run.state == RunState::Failed && failure.kind == FailureKind::Blocked {
        true => health::blocked(&mut tx, run.site_id).await?,
        false => None,
    };
    close_attempt(
        &mut tx,
        fence,
        AttemptOutcome::Failed,
        Some(&failure.message),
        Some(failure.kind),
        run.current_url.as_deref(),
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

/// Records the webhook events of a run that just ended completed or failed
/// (a retried attempt is no event), inside the transaction that ended it, so
/// each exists if and only if the ending does: `run.completed` or
/// `run.failed`; `run.degraded`; `site.blocked` or `site.recovered` when the
/// run changed that; `items.new`, `items.changed`, `items.removed` with what
/// the run found.
async fn record_ending(
    tx: &mut PgConnection,
    run: &CrawlRun,
    changes: Option<&ChangeSummary>,
    site: Option<SiteTransition>,
) -> sqlx::Result<()> {
    if WebhookEventType::of_run_state(run.state).is_none() {
        return Ok(());
    }
    // Most fleets have no endpoint, or none on: then every run ends with
    // this one look at a tiny table, not a lookup per event.
    let listened = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM webhooks WHERE enabled) AS "listened!""#
    )
    .fetch_one(&mut *tx)
    .await?;
    if !listened {
        return Ok(());
    }
    record_events(tx, run, changes, site).await
}

/// [`record_ending`] once it is known that an endpoint listens.
async fn record_events(
    tx: &mut PgConnection,
    run: &CrawlRun,
    changes: Option<&ChangeSummary>,
    site: Option<SiteTransition>,
) -> sqlx::Result<()> {
    let Some(event_type) = WebhookEventType::of_run_state(run.state) else {
        return Ok(());
    };
    let names = sqlx::query!(
        "SELECT k.keyword, s.name FROM keywords k, sites s WHERE k.id = $1 AND s.id = $2",
        run.keyword_id,
        run.site_id
    )
    .fetch_one(&mut *tx)
    .await?;
    let (keyword, site_name) = (names.keyword.as_str(), names.name.as_str());
    let links = &webhooks::ApiLinks;
    let mut events = vec![WebhookEvent::run_ended(
        event_type, run, keyword, site_name, links,
    )];
    if let Some(RunHealth::Degraded { .. }) = run.health {
        events.push(WebhookEvent::run_degraded(run, keyword, site_name, links));
    }
    if let Some(transition) = site {
        let blocked = transition == SiteTransition::Blocked;
        events.push(WebhookEvent::site_changed(
            blocked, run, keyword, site_name, links,
        ));
    }
    if let Some(changes) = changes {
        events.extend(WebhookEvent::items_found(
            run, keyword, site_name, changes, links,
        ));
    }
    for event in &events {
        webhooks::record(tx, event).await?;
    }
    Ok(())
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
