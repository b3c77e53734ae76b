//! How an attempt completes, decided as a `Transition` (`domain::run`) and
//! applied once, fenced on (run, attempt, worker) in the states it may
//! complete from: the last page stored when the crawl left it unstored, the
//! items it did not find settled, the run judged against its site's
//! expectations, its attempt's record closed and its site's standing changed
//! as the verdict says. A run that completes records its webhook events in
//! the same transaction (`raised::record_events`).

use sqlx::{PgConnection, PgPool};

use super::{
    fenced::{Fence, FenceError},
    health,
    raised::record_events,
    row::{RunRow, run_row},
};
use crate::{
    domain::{
        change::ChangeSummary,
        page::PagesRead,
        run::{AttemptOutcome, CrawlRun, RunHealth, RunState, SiteTransition, Transition},
        saved_page::SavedPageBounds,
        site::{Expectations, RunTally},
    },
    store::{
        items::tracking::{record_page, settle},
        saved_pages,
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

/// What the completion knows of the held run once its row is locked.
struct Held {
    keyword_id: Option<i64>,
    url_list_id: Option<i64>,
    /// A list run's URLs that could not be read.
    urls_failed: i32,
    site_id: i64,
    refusals: i32,
    expectations: Expectations,
    /// Results the run has, on every page it read.
    items: i32,
    /// The URL the attempt ended on.
    last_url: Option<String>,
    /// The last page, when the completion stored it: its number and results.
    stored_page: Option<(i32, usize)>,
}

/// Ends the attempt as completed, judged against the site's expectations.
/// The last page, when the crawl left it unstored, is stored first (fenced
/// in `url_call`); otherwise the run must be between pages. Results of pages
/// past the last one (left by an earlier attempt that went further) are
/// removed. When the crawl read every page, the items of its keyword/site it
/// did not find are removed (`items::tracking::settle`). Then one guarded
/// statement writes the run (why its paging ended, where robots.txt stopped
/// it, what it found, its health), closes its attempt's record and changes
/// its site's blocked state when the verdict does; all in one transaction.
/// The pages the crawl kept are saved within the default bounds (see
/// [`complete_saving`]).
pub async fn complete(
    pool: &PgPool,
    fence: &Fence,
    pages: PagesRead,
) -> Result<Completion, FenceError> {
    complete_saving(pool, fence, pages, &SavedPageBounds::default()).await
}

/// [`complete`]; a run that completes healthy saves the list pages the
/// crawl kept (`saved_pages::save`, within `saved`) in the same
/// transaction; a degraded run saves none.
pub async fn complete_saving(
    pool: &PgPool,
    fence: &Fence,
    pages: PagesRead,
    saved: &SavedPageBounds,
) -> Result<Completion, FenceError> {
    let with_last_page = pages.unstored.is_some();
    let from = Transition::completes_from(with_last_page);
    let mut tx = pool.begin().await?;
    let held = match &pages.unstored {
        Some(last) => {
            let crawled = last.crawled();
            let written = record_page(&mut tx, fence, from, &crawled, true)
                .await?
                .ok_or_else(|| fence.superseded())?;
            Held {
                keyword_id: written.keyword_id,
                url_list_id: written.url_list_id,
                urls_failed: written.urls_failed,
                site_id: written.site_id,
                refusals: written.refusals,
                expectations: written.expectations,
                items: written.run_results as i32,
                last_url: Some(last.url.clone()),
                stored_page: Some((last.page, written.stored as usize)),
            }
        }
        None => hold_between_pages(&mut tx, fence, from, pages.last_page).await?,
    };
    let pair = (held.keyword_id, held.site_id);
    let changes = settle(&mut tx, fence.run_id, pair, pages.read_every_page()).await?;
    let mut unparsed = pages.values.notes();
    if held.urls_failed > 0 {
        // Each failed URL is on its entry; the run says how many.
        unparsed.push(format!(
            "{} URL(s) of the list could not be read",
            held.urls_failed
        ));
    }
    let tally = RunTally {
        items: held.items,
        refusals: held.refusals,
        bounded: pages.bounded.notes(),
        unparsed,
        ..RunTally::default()
    };
    let target = (held.keyword_id, held.url_list_id, held.site_id);
    let health = health::judge(&mut tx, fence.run_id, target, &held.expectations, tally).await?;
    let done = Transition::complete(fence.attempt, with_last_page, health);
    let row = sqlx::query_as!(
        CompletedRow,
        r#"WITH run AS (
               UPDATE crawl_runs
               SET state = $4, finished_at = now(), state_changed_at = now(), heartbeat_at = now(),
                   current_url = NULL, error = NULL, error_kind = NULL,
                   pages_crawled = COALESCE($5, pages_crawled),
                   items_found = $6, items_new = $7, items_changed = $8, items_removed = $9,
                   paging_ended = $10, stopped_at_url = $11, stop_reason = $12, health = $13,
                   health_reason = $14
               WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($15)
               RETURNING id, keyword_id, site_id, state, trigger, priority, attempt, max_attempts,
                         worker_id, pages_crawled, items_found, current_url, error, error_kind,
                         queued_at, not_before, dispatched_at, started_at, heartbeat_at,
                         state_changed_at, finished_at, health, health_reason, refusals,
                         stopped_at_url, stop_reason, items_new, items_changed, items_removed,
                         paging_ended, url_list_id, period_start, urls_failed, site_version
           ),
           closed AS (
               UPDATE crawl_attempts
               SET ended_at = now(), outcome = $16, reason = NULL, error_kind = NULL, last_url = $17
               WHERE run_id = $1 AND attempt = $2 AND worker_id = $3 AND ended_at IS NULL
                 AND EXISTS (SELECT 1 FROM run)
           ),
           -- The site's standing as the verdict says ($18: blocked, or
           -- recovered), changed only if it was not so already.
           site AS (
               UPDATE sites SET blocked_since = CASE WHEN $18 THEN now() END
               WHERE id = (SELECT site_id FROM run) AND $19 AND (blocked_since IS NULL) = $18
               RETURNING blocked_since IS NOT NULL AS blocked
           )
           SELECT run.id, run.keyword_id, run.site_id, run.state, run.trigger, run.priority,
                  run.attempt, run.max_attempts, run.worker_id, run.pages_crawled, run.items_found,
                  run.current_url, run.error, run.error_kind, run.queued_at, run.not_before,
                  run.dispatched_at, run.started_at, run.heartbeat_at, run.state_changed_at,
                  run.finished_at, run.health, run.health_reason, run.refusals, run.stopped_at_url,
                  run.stop_reason, run.items_new, run.items_changed, run.items_removed,
                  run.paging_ended, run.url_list_id, run.period_start, run.urls_failed, run.site_version,
                  (SELECT blocked FROM site) AS "blocked_now?",
                  EXISTS (SELECT 1 FROM webhooks WHERE enabled) AS "listened!"
           FROM run"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        done.to as RunState,
        held.stored_page.map(|(page, _)| page),
        held.items,
        changes.new,
        changes.changed,
        changes.removed,
        pages.end.as_str(),
        pages.stopped.as_ref().map(|stop| stop.url.as_str()),
        pages.stopped.as_ref().map(|stop| stop.reason.as_str()),
        done.health.as_ref().map(|health| health.as_str()),
        done.health.as_ref().and_then(|health| health.reason()),
        done.from as &[RunState],
        done.closes.map(AttemptOutcome::as_str),
        held.last_url,
        done.site == Some(SiteTransition::Blocked),
        done.site.is_some(),
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| fence.superseded())?;
    let (row, (blocked_now, listened)) = row.into_parts();
    let mut run: CrawlRun = row.try_into()?;
    run.health = done.health;
    if run.state == RunState::Completed && run.health == Some(RunHealth::Healthy) {
        saved_pages::save(&mut tx, run.id, run.site_id, &pages.kept, saved).await?;
    }
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
        stored_page: held.stored_page,
    })
}

/// Locks the held run (fenced, in one of `from`) whose last page was stored
/// already, and drops the results of pages after `last_page`.
async fn hold_between_pages(
    tx: &mut PgConnection,
    fence: &Fence,
    from: &[RunState],
    last_page: i32,
) -> Result<Held, FenceError> {
    let held = sqlx::query!(
        r#"WITH held AS MATERIALIZED (
               SELECT r.current_url, r.keyword_id, r.url_list_id, r.urls_failed, r.site_id, r.refusals,
                      s.expect_min_items,
                      s.expect_required_fields, s.expect_max_empty_runs
               FROM crawl_runs r JOIN sites s ON s.id = r.site_id
               WHERE r.id = $1 AND r.attempt = $2 AND r.worker_id = $3 AND r.state = ANY($4)
               FOR UPDATE OF r
           ),
           dropped AS (
               DELETE FROM crawl_results
               WHERE run_id = $1 AND page > $5 AND EXISTS (SELECT 1 FROM held)
               RETURNING 1
           )
           -- The statement sees the results as they were before it: those
           -- it drops are taken off.
           SELECT held.current_url, held.keyword_id, held.url_list_id, held.urls_failed, held.site_id,
                  held.refusals, held.expect_min_items,
                  held.expect_required_fields, held.expect_max_empty_runs,
                  ((SELECT count(*) FROM crawl_results WHERE run_id = $1)
                    - (SELECT count(*) FROM dropped))::int AS "items!"
           FROM held"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        from as &[RunState],
        last_page
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| fence.superseded())?;
    Ok(Held {
        keyword_id: held.keyword_id,
        url_list_id: held.url_list_id,
        urls_failed: held.urls_failed,
        site_id: held.site_id,
        refusals: held.refusals,
        expectations: Expectations {
            min_items: held.expect_min_items,
            required_fields: held.expect_required_fields,
            max_empty_runs: held.expect_max_empty_runs,
        },
        items: held.items,
        last_url: held.current_url,
        stored_page: None,
    })
}
