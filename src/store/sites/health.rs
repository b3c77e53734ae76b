//! How a site is doing: its last success, how its runs and attempts ended
//! over the last day and week, how many items its recent runs found, and its
//! current streak — for one site or the whole fleet in the same few queries.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::domain::{
    failure::FailureKind,
    run::RunState,
    site::{RunVerdict, SiteStatus, Streak},
};

/// Runs whose item counts a site's health shows.
pub const RECENT_RUNS: i64 = 20;
/// Ended runs a streak is counted over, newest first: a longer streak shows
/// as this many.
pub const STREAK_RUNS: i64 = 1000;

/// A site's health, as of now.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteHealth {
    pub site_id: i64,
    pub name: String,
    pub status: SiteStatus,
    /// Since when the site refuses us (cleared by the next healthy run).
    pub blocked_since: Option<DateTime<Utc>>,
    /// Set while every proxy of the site is retired: when the first
    /// returns. Its runs wait (they do not fail) until then.
    pub paused_until: Option<DateTime<Utc>>,
    /// When a run of the site last completed healthy (ever).
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_24h: Window,
    pub last_7d: Window,
    /// The site's last ended runs that went the same way.
    pub streak: Option<Streak>,
    /// The last completed runs, oldest first.
    pub recent_runs: Vec<RunItems>,
}

/// How a site's runs and attempts ended over a span of time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Window {
    /// Runs that ended (completed or failed).
    pub runs_ended: i64,
    pub runs_completed: i64,
    /// Completed, but below the site's expectations.
    pub runs_degraded: i64,
    /// The attempts of those runs, and those the site refused on every try
    /// (error kind `blocked`).
    pub attempts_ended: i64,
    pub attempts_blocked: i64,
}

/// How many items one completed run found, and whether that was healthy.
#[derive(Debug, Clone, PartialEq)]
pub struct RunItems {
    pub run_id: i64,
    pub finished_at: DateTime<Utc>,
    pub items_found: i32,
    pub degraded: bool,
}

/// The health of every site, in id order.
pub async fn health_of_all(pool: &PgPool) -> sqlx::Result<Vec<SiteHealth>> {
    select(pool, None).await
}

/// The health of site `site_id`; `None` when there is no such site.
pub async fn health(pool: &PgPool, site_id: i64) -> sqlx::Result<Option<SiteHealth>> {
    Ok(select(pool, Some(site_id)).await?.pop())
}

/// Site `only`'s health, or every site's: five queries whatever the number
/// of sites, each a range of the (site_id, finished_at) index per site.
async fn select(pool: &PgPool, only: Option<i64>) -> sqlx::Result<Vec<SiteHealth>> {
    let mut tx = pool.begin().await?;
    let sites = sqlx::query!(
        "SELECT id, name, blocked_since FROM sites WHERE ($1::bigint IS NULL OR id = $1) ORDER BY id",
        only
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut windows: HashMap<i64, (Window, Window)> = HashMap::new();
    for row in sqlx::query!(
        r#"SELECT site_id,
                  count(*) FILTER (WHERE day AND state IN ($2, $3)) AS "ended_24h!",
                  count(*) FILTER (WHERE day AND state = $2) AS "completed_24h!",
                  count(*) FILTER (WHERE day AND health = 'degraded') AS "degraded_24h!",
                  count(*) FILTER (WHERE state IN ($2, $3)) AS "ended_7d!",
                  count(*) FILTER (WHERE state = $2) AS "completed_7d!",
                  count(*) FILTER (WHERE health = 'degraded') AS "degraded_7d!"
           FROM (SELECT site_id, state, health, finished_at > now() - interval '24 hours' AS day
                 FROM crawl_runs
                 WHERE finished_at > now() - interval '7 days'
                   AND ($1::bigint IS NULL OR site_id = $1)) AS ended
           GROUP BY site_id"#,
        only,
        RunState::Completed as RunState,
        RunState::Failed as RunState
    )
    .fetch_all(&mut *tx)
    .await?
    {
        let (day, week) = windows.entry(row.site_id).or_default();
        (day.runs_ended, day.runs_completed, day.runs_degraded) =
            (row.ended_24h, row.completed_24h, row.degraded_24h);
        (week.runs_ended, week.runs_completed, week.runs_degraded) =
            (row.ended_7d, row.completed_7d, row.degraded_7d);
    }
    for row in sqlx::query!(
        r#"SELECT r.site_id,
                  count(*) FILTER (WHERE r.finished_at > now() - interval '24 hours') AS "ended_24h!",
                  count(*) FILTER (WHERE r.finished_at > now() - interval '24 hours'
                                     AND a.error_kind = $2) AS "blocked_24h!",
                  count(*) AS "ended_7d!",
                  count(*) FILTER (WHERE a.error_kind = $2) AS "blocked_7d!"
           FROM crawl_runs r JOIN crawl_attempts a ON a.run_id = r.id
           WHERE r.finished_at > now() - interval '7 days' AND a.ended_at IS NOT NULL
             AND ($1::bigint IS NULL OR r.site_id = $1)
           GROUP BY r.site_id"#,
        only,
        FailureKind::Blocked.as_str()
    )
    .fetch_all(&mut *tx)
    .await?
    {
        let (day, week) = windows.entry(row.site_id).or_default();
        (day.attempts_ended, day.attempts_blocked) = (row.ended_24h, row.blocked_24h);
        (week.attempts_ended, week.attempts_blocked) = (row.ended_7d, row.blocked_7d);
    }
    let mut recent: HashMap<i64, Vec<RunItems>> = HashMap::new();
    for row in sqlx::query!(
        r#"SELECT s.id AS site_id, c.id AS "run_id!", c.finished_at AS "finished_at!",
                  c.items_found AS "items_found!", c.degraded AS "degraded!"
           FROM sites s
           CROSS JOIN LATERAL (
               SELECT id, finished_at, items_found, health IS NOT DISTINCT FROM 'degraded' AS degraded
               FROM crawl_runs
               WHERE site_id = s.id AND state = $3 AND finished_at IS NOT NULL
               ORDER BY finished_at DESC
               LIMIT $2) AS c
           WHERE ($1::bigint IS NULL OR s.id = $1)"#,
        only,
        RECENT_RUNS,
        RunState::Completed as RunState
    )
    .fetch_all(&mut *tx)
    .await?
    {
        recent.entry(row.site_id).or_default().push(RunItems {
            run_id: row.run_id,
            finished_at: row.finished_at,
            items_found: row.items_found,
            degraded: row.degraded,
        });
    }
    let last_success: HashMap<i64, DateTime<Utc>> = sqlx::query!(
        r#"SELECT s.id AS site_id, c.finished_at AS "finished_at!"
           FROM sites s
           CROSS JOIN LATERAL (
               SELECT finished_at FROM crawl_runs
               WHERE site_id = s.id AND finished_at IS NOT NULL
                 AND state = $2 AND health IS DISTINCT FROM 'degraded'
               ORDER BY finished_at DESC
               LIMIT 1) AS c
           WHERE ($1::bigint IS NULL OR s.id = $1)"#,
        only,
        RunState::Completed as RunState
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|row| (row.site_id, row.finished_at))
    .collect();
    // The newest ended runs of each site while their verdict stays that of
    // the newest one: `changed` counts the verdict changes seen so far.
    let mut streaks: HashMap<i64, Streak> = HashMap::new();
    for row in sqlx::query!(
        r#"SELECT site_id AS "site_id!", verdict AS "verdict!", count(*) AS "runs!",
                  min(finished_at) AS "since!"
           FROM (SELECT s.id AS site_id, last.verdict, last.finished_at,
                        count(*) FILTER (WHERE last.verdict <> last.newest)
                            OVER (PARTITION BY s.id ORDER BY last.finished_at DESC) AS changed
                 FROM sites s
                 CROSS JOIN LATERAL (
                     SELECT run_verdict(state, health) AS verdict, finished_at,
                            first_value(run_verdict(state, health))
                                OVER (ORDER BY finished_at DESC) AS newest
                     FROM crawl_runs
                     WHERE site_id = s.id AND finished_at IS NOT NULL
                       AND state IN ($3, $4)
                     ORDER BY finished_at DESC
                     LIMIT $2) AS last
                 WHERE ($1::bigint IS NULL OR s.id = $1)) AS runs
           WHERE changed = 0
           GROUP BY site_id, verdict"#,
        only,
        STREAK_RUNS,
        RunState::Completed as RunState,
        RunState::Failed as RunState
    )
    .fetch_all(&mut *tx)
    .await?
    {
        if let Ok(verdict) = row.verdict.parse::<RunVerdict>() {
            streaks.insert(
                row.site_id,
                Streak {
                    verdict,
                    runs: row.runs,
                    since: row.since,
                },
            );
        }
    }
    let paused = crate::store::proxy_health::paused(&mut tx, only).await?;
    tx.commit().await?;
    Ok(sites
        .into_iter()
        .map(|site| {
            let (last_24h, last_7d) = windows.get(&site.id).copied().unwrap_or_default();
            let mut recent_runs = recent.remove(&site.id).unwrap_or_default();
            recent_runs.reverse();
            let streak = streaks.remove(&site.id);
            SiteHealth {
                site_id: site.id,
                name: site.name,
                status: SiteStatus::of(site.blocked_since, streak.as_ref()),
                blocked_since: site.blocked_since,
                paused_until: paused.get(&site.id).copied(),
                last_success_at: last_success.get(&site.id).copied(),
                last_24h,
                last_7d,
                streak,
                recent_runs,
            }
        })
        .collect())
}
