//! The held runs the watchdog takes back: their worker stopped sending
//! heartbeats, or their page request outlived the site's stuck timeout
//! (`domain::run::rescued_as` names the failure; `fail_attempt` ends it).

use std::time::Duration;

use sqlx::PgPool;

use crate::domain::{
    failure::{Failure, FailureKind},
    run::{RunState, rescued_as},
};
use crate::store::fence::Fence;

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
           WHERE r.state = ANY($4) AND r.worker_id IS NOT NULL
             AND (r.heartbeat_at < now() - make_interval(secs => $1)
                  OR (r.state = ANY($5) AND r.state_changed_at
                      < now() - make_interval(secs => COALESCE(s.stuck_timeout_secs::float8, $2) + $3)))
           ORDER BY r.id"#,
        heartbeat_timeout.as_secs_f64(),
        default_stuck_timeout.as_secs_f64(),
        grace.as_secs_f64(),
        &RunState::HELD as &[RunState],
        &RunState::IN_CALL as &[RunState]
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let kind = rescued_as(r.lost);
            let message = match kind {
                FailureKind::WorkerLost => format!(
                    "worker lost: {} sent no heartbeat for {}s",
                    r.worker_id,
                    heartbeat_timeout.as_secs()
                ),
                _ => format!(
                    "stuck: page request did not return (at {})",
                    r.current_url.as_deref().unwrap_or("?")
                ),
            };
            let failure = Failure::new(kind, message);
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
