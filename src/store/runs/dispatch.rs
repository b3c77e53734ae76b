//! Moving queued runs into Redis and back: the dispatcher's bookkeeping.
//!
//! Where a query reads runs by a partial index (`crawl_runs_backlog`,
//! `crawl_runs_in_redis`, `crawl_runs_site_active`), its states are written
//! out as the index predicate is: a bound parameter would not match it, and
//! the dispatcher's scans would read every run instead.

use std::time::Duration;

use sqlx::PgPool;

use crate::domain::{run::RunState, site::RenderMode};

/// A run whose job message should be put into Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchedRun {
    pub run_id: i64,
    pub attempt: i32,
    /// A URL list's run (its job message is a variant of its own).
    pub of_list: bool,
}

/// Runs of sites rendered in one of `modes` dispatched to Redis and not
/// claimed by a worker yet.
pub async fn count_in_redis(pool: &PgPool, modes: &[RenderMode]) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM crawl_runs r JOIN sites s ON s.id = r.site_id
           WHERE r.state = 'queued' AND r.dispatched_at IS NOT NULL AND s.render = ANY($1)"#,
        &mode_names(modes) as &[&str]
    )
    .fetch_one(pool)
    .await
}

fn mode_names(modes: &[RenderMode]) -> Vec<&'static str> {
    modes.iter().map(|m| m.as_str()).collect()
}

/// Marks up to `limit` due queued runs of sites rendered in one of `modes` as
/// dispatched and returns them in the order to push: round-robin across
/// sites, each site's runs by priority then age. A site never gets more runs
/// active at once (dispatched or held, in any mode) than its
/// `max_concurrent_runs` (one with an exclusive session); its other runs wait
/// in Postgres without holding up other sites.
pub async fn take_for_dispatch(
    pool: &PgPool,
    modes: &[RenderMode],
    limit: i64,
) -> sqlx::Result<Vec<DispatchedRun>> {
    let rows = sqlx::query!(
        r#"WITH active AS (
               SELECT site_id, count(*) AS n FROM crawl_runs
               WHERE state IN ('running', 'url_call', 'call_done')
                  OR (state = 'queued' AND dispatched_at IS NOT NULL)
               GROUP BY site_id
           ), roomy AS (
               SELECT s.id, CASE WHEN s.exclusive_session THEN 1 ELSE s.max_concurrent_runs END
                              - COALESCE(a.n, 0) AS room
               FROM sites s LEFT JOIN active a ON a.site_id = s.id
               WHERE s.render = ANY($2)
           ), ranked AS (
               -- Each site's next runs, as far as its room (and the limit)
               -- goes: read off the backlog index, not every queued run.
               SELECT r.ctid, r.id, r.priority, r.queued_at, r.turn
               FROM roomy
               CROSS JOIN LATERAL (
                   SELECT c.ctid, c.id, c.priority, c.queued_at,
                          row_number() OVER (ORDER BY c.priority DESC, c.queued_at, c.id) AS turn
                   FROM crawl_runs c
                   WHERE c.site_id = roomy.id AND c.state = 'queued' AND c.dispatched_at IS NULL
                     AND (c.not_before IS NULL OR c.not_before <= now())
                   ORDER BY c.priority DESC, c.queued_at, c.id
                   LIMIT LEAST(roomy.room, $1)
               ) AS r
               WHERE roomy.room > 0
           ), picked AS (
               SELECT ctid, id, turn, priority, queued_at FROM ranked
               ORDER BY turn, priority DESC, queued_at, id
               LIMIT $1
           ), marked AS (
               -- By row address. Joined by id instead, a plan made while
               -- the table looked small (a new fleet, or a burst after a
               -- quiet spell) compared every backlog row with every run
               -- picked; at worst this walks the backlog once.
               UPDATE crawl_runs r SET dispatched_at = now()
               WHERE r.ctid = ANY (ARRAY(SELECT ctid FROM picked))
                 AND r.state = 'queued' AND r.dispatched_at IS NULL
               RETURNING r.id, r.attempt, r.url_list_id
           )
           SELECT m.id, m.attempt, m.url_list_id, p.turn AS "turn!", p.priority, p.queued_at
           FROM marked m JOIN picked p ON p.id = m.id"#,
        limit,
        &mode_names(modes) as &[&str]
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
            of_list: r.url_list_id.is_some(),
        })
        .collect())
}

/// Puts runs whose push to Redis failed back into the backlog.
pub async fn undispatch(pool: &PgPool, run_ids: &[i64]) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        "UPDATE crawl_runs SET dispatched_at = NULL WHERE id = ANY($1) AND state = $2",
        run_ids,
        RunState::Queued as RunState
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
