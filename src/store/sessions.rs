//! Kept site sessions, sealed by the worker before they reach Postgres.

use sqlx::PgPool;

use super::fence::Fence;
use crate::{domain::run::RunState, store::sealing::Sealed};

/// What site `site_id`'s kept session is bound to: no other site's opens.
pub fn bound_to(site_id: i64) -> Vec<u8> {
    site_id.to_be_bytes().to_vec()
}

/// The site's sealed session: the worker alone opens it (SESSION_KEY).
pub async fn load(pool: &PgPool, site_id: i64) -> sqlx::Result<Option<Sealed>> {
    sqlx::query_as!(
        Sealed,
        "SELECT nonce, sealed FROM site_sessions WHERE site_id = $1",
        site_id
    )
    .fetch_optional(pool)
    .await
}

/// Keeps the session an attempt ended with, replacing the site's previous
/// one; `false` when the attempt is no longer this worker's (a superseded
/// worker must not overwrite the session of the attempt that replaced it).
pub async fn save(
    pool: &PgPool,
    site_id: i64,
    fence: &Fence,
    session: &Sealed,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"INSERT INTO site_sessions (site_id, nonce, sealed, saved_by_run)
           SELECT $1, $2, $3, $4
           WHERE EXISTS (SELECT 1 FROM crawl_runs
                         WHERE id = $4 AND site_id = $1 AND attempt = $5 AND worker_id = $6
                           AND state = ANY($7))
           ON CONFLICT (site_id) DO UPDATE
           SET nonce = EXCLUDED.nonce, sealed = EXCLUDED.sealed,
               saved_by_run = EXCLUDED.saved_by_run, saved_at = now()"#,
        site_id,
        session.nonce,
        session.sealed,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        &RunState::HELD as &[RunState]
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Forgets a site's session; whether there was one.
pub async fn delete(pool: &PgPool, site_id: i64) -> sqlx::Result<bool> {
    let done = sqlx::query!("DELETE FROM site_sessions WHERE site_id = $1", site_id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() > 0)
}
