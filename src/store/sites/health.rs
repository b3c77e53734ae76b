//! How a site is doing: its last success, how its runs and attempts ended
//! over the last day, and how many items its recent runs found.

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

/// The health of every site, in id order.
pub async fn health_of_all(pool: &PgPool) -> sqlx::Result<Vec<SiteHealth>> {
    let ids = sqlx::query_scalar!("SELECT id FROM sites ORDER BY id")
        .fetch_all(pool)
        .await?;
    let mut all = Vec::with_capacity(ids.len());
    for id in ids {
        // Deleted meanwhile: left out.
        if let Some(health) = health(pool, id).await? {
            all.push(health);
        }
    }
    Ok(all)
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
