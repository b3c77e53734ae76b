//! How a site is doing: its last success, how its runs and attempts ended
//! over the last day, and how many items its recent runs found.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::domain::failure::FailureKind;

/// Runs whose item counts a site's health shows.
pub const RECENT_RUNS: i64 = 20;

/// A site's health over the last 24 hours.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteHealth {
    pub site_id: i64,
    pub name: String,
    /// When a run of the site last completed (ever).
    pub last_success_at: Option<DateTime<Utc>>,
    /// Runs that ended (completed or failed) in the last 24 hours.
    pub runs_ended: i64,
    pub runs_completed: i64,
    /// The attempts of the runs that ended in the last 24 hours, and those of
    /// them the site refused (error kind `blocked`).
    pub attempts_ended: i64,
    pub attempts_blocked: i64,
    /// The last completed runs, oldest first.
    pub recent_runs: Vec<RunItems>,
}

/// How many items one completed run found.
#[derive(Debug, Clone, PartialEq)]
pub struct RunItems {
    pub run_id: i64,
    pub finished_at: DateTime<Utc>,
    pub items_found: i32,
}

/// The health of every site, in id order: four queries for the whole
/// fleet (each a pass over the last day's runs, or a few rows per site),
/// not four per site.
pub async fn health_of_all(pool: &PgPool) -> sqlx::Result<Vec<SiteHealth>> {
    let mut tx = pool.begin().await?;
    let sites = sqlx::query!("SELECT id, name FROM sites ORDER BY id")
        .fetch_all(&mut *tx)
        .await?;
    let runs: HashMap<i64, (i64, i64)> = sqlx::query!(
        r#"SELECT site_id,
                  count(*) FILTER (WHERE state IN ('completed', 'failed')) AS "ended!",
                  count(*) FILTER (WHERE state = 'completed') AS "completed!"
           FROM crawl_runs
           WHERE finished_at > now() - interval '24 hours'
           GROUP BY site_id"#
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|row| (row.site_id, (row.ended, row.completed)))
    .collect();
    let attempts: HashMap<i64, (i64, i64)> = sqlx::query!(
        r#"SELECT r.site_id, count(*) AS "ended!",
                  count(*) FILTER (WHERE a.error_kind = $1) AS "blocked!"
           FROM crawl_runs r JOIN crawl_attempts a ON a.run_id = r.id
           WHERE r.finished_at > now() - interval '24 hours' AND a.ended_at IS NOT NULL
           GROUP BY r.site_id"#,
        FailureKind::Blocked.as_str()
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|row| (row.site_id, (row.ended, row.blocked)))
    .collect();
    // Each site's last completed runs, newest first: a short range of the
    // (site_id, finished_at) index per site.
    let mut recent: HashMap<i64, Vec<RunItems>> = HashMap::new();
    for row in sqlx::query!(
        r#"SELECT s.id AS site_id, c.id AS "run_id!", c.finished_at AS "finished_at!",
                  c.items_found AS "items_found!"
           FROM sites s
           CROSS JOIN LATERAL (
               SELECT id, finished_at, items_found FROM crawl_runs
               WHERE site_id = s.id AND state = 'completed' AND finished_at IS NOT NULL
               ORDER BY finished_at DESC
               LIMIT $1) AS c"#,
        RECENT_RUNS
    )
    .fetch_all(&mut *tx)
    .await?
    {
        recent.entry(row.site_id).or_default().push(RunItems {
            run_id: row.run_id,
            finished_at: row.finished_at,
            items_found: row.items_found,
        });
    }
    tx.commit().await?;
    Ok(sites
        .into_iter()
        .map(|site| {
            let (runs_ended, runs_completed) = runs.get(&site.id).copied().unwrap_or_default();
            let (attempts_ended, attempts_blocked) =
                attempts.get(&site.id).copied().unwrap_or_default();
            let mut recent_runs = recent.remove(&site.id).unwrap_or_default();
            let last_success_at = recent_runs.first().map(|run| run.finished_at);
            recent_runs.reverse();
            SiteHealth {
                site_id: site.id,
                name: site.name,
                last_success_at,
                runs_ended,
                runs_completed,
                attempts_ended,
                attempts_blocked,
                recent_runs,
            }
        })
        .collect())
}

/// The health of site `site_id`, as of now; `None` when there is no such site.
pub async fn health(pool: &PgPool, site_id: i64) -> sqlx::Result<Option<SiteHealth>> {
    let Some(name) = sqlx::query_scalar!("SELECT name FROM sites WHERE id = $1", site_id)
        .fetch_optional(pool)
        .await?
    else {
        return Ok(None);
    };
    let last_success_at = sqlx::query_scalar!(
        r#"SELECT finished_at AS "finished_at!" FROM crawl_runs
           WHERE site_id = $1 AND state = 'completed' AND finished_at IS NOT NULL
           ORDER BY finished_at DESC LIMIT 1"#,
        site_id
    )
    .fetch_optional(pool)
    .await?;
    let runs = sqlx::query!(
        r#"SELECT count(*) FILTER (WHERE state IN ('completed', 'failed')) AS "ended!",
                  count(*) FILTER (WHERE state = 'completed') AS "completed!"
           FROM crawl_runs
           WHERE site_id = $1 AND finished_at > now() - interval '24 hours'"#,
        site_id
    )
    .fetch_one(pool)
    .await?;
    // The attempts of the runs that ended in the day (a range of the index
    // above, then each run's attempts by run): not every attempt of the fleet.
    let attempts = sqlx::query!(
        r#"SELECT count(*) AS "ended!", count(*) FILTER (WHERE a.error_kind = $2) AS "blocked!"
           FROM crawl_runs r JOIN crawl_attempts a ON a.run_id = r.id
           WHERE r.site_id = $1 AND r.finished_at > now() - interval '24 hours'
             AND a.ended_at IS NOT NULL"#,
        site_id,
        FailureKind::Blocked.as_str()
    )
    .fetch_one(pool)
    .await?;
    let mut recent_runs = sqlx::query_as!(
        RunItems,
        r#"SELECT id AS run_id, finished_at AS "finished_at!", items_found
           FROM crawl_runs
           WHERE site_id = $1 AND state = 'completed' AND finished_at IS NOT NULL
           ORDER BY finished_at DESC
           LIMIT $2"#,
        site_id,
        RECENT_RUNS
    )
    .fetch_all(pool)
    .await?;
    recent_runs.reverse();
    Ok(Some(SiteHealth {
        site_id,
        name,
        last_success_at,
        runs_ended: runs.ended,
        runs_completed: runs.completed,
        attempts_ended: attempts.ended,
        attempts_blocked: attempts.blocked,
        recent_runs,
    }))
}
