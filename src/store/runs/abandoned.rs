//! The held runs the watchdog takes back: their worker stopped sending
//! heartbeats, or their page request outlived the site's stuck timeout.

use std::time::Duration;

use sqlx::PgPool;

use super::fenced::Fence;
use crate::domain::failure::{Failure, FailureKind};

/// A held run the watchdog takes back, and why.
#[derive(Debug, Clone)]
pub struct AbandonedRun {
    pub fence: Fence,
    /// [`FailureKind::WorkerLost`] or [`FailureKind::Stuck`].
    pub failure: Failure,
}

/// Held runs whose worker stopped heartbeating for `heartbeat_timeout`, or whose
/// page request has been in flight longer than the site's stuck timeout plus `grace`.
pub async fn find_abandoned(
    pool: &PgPool,
    heartbeat_timeout: Duration,
    default_stuck_timeout: Duration,
    grace: Duration,
) -> sqlx::Result<Vec<AbandonedRun>> {
    let rows = sqlx::query!(
        r#"SELECT r.id, r.attempt, r.worker_id AS "worker_id!", r.current_url,
                  (r.heartbeat_at < now() - make_interval(secs => $1)) AS "lost!"
           FROM crawl_runs r JOIN sites s ON s.id = r.site_id
           WHERE r.state IN ('running', 'url_call', 'call_done') AND r.worker_id IS NOT NULL
             AND (r.heartbeat_at < now() - make_interval(secs => $1)
                  OR (r.state = 'url_call' AND r.state_changed_at
                      < now() - make_interval(secs => COALESCE(s.stuck_timeout_secs::float8, $2) + $3)))
           ORDER BY r.id"#,
        heartbeat_timeout.as_secs_f64(),
        default_stuck_timeout.as_secs_f64(),
        grace.as_secs_f64()
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let failure = if r.lost {
                Failure::new(
                    FailureKind::WorkerLost,
                    format!(
                        "worker lost: {} sent no heartbeat for {}s",
                        r.worker_id,
                        heartbeat_timeout.as_secs()
                    ),
                )
            } else {
                Failure::new(
                    FailureKind::Stuck,
                    format!(
                        "stuck: page request did not return (at {})",
                        r.current_url.as_deref().unwrap_or("?")
                    ),
                )
            };
            AbandonedRun {
                fence: Fence {
                    run_id: r.id,
                    attempt: r.attempt,
                    worker_id: r.worker_id,
                },
                failure,
            }
        })
        .collect())
}
