//! Kept site sessions, sealed by the worker before they reach Postgres.

use sqlx::PgPool;

/// A sealed session as stored: the worker alone can open it (SESSION_KEY).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedSession {
    pub nonce: Vec<u8>,
    pub sealed: Vec<u8>,
}

pub async fn load(pool: &PgPool, site_id: i64) -> sqlx::Result<Option<SealedSession>> {
    sqlx::query_as!(
        SealedSession,
        "SELECT nonce, sealed FROM site_sessions WHERE site_id = $1",
        site_id
    )
    .fetch_optional(pool)
    .await
}

/// Keeps the session a run ended with, replacing the site's previous one.
pub async fn save(
    pool: &PgPool,
    site_id: i64,
    run_id: i64,
    session: &SealedSession,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO site_sessions (site_id, nonce, sealed, saved_by_run)
           SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM sites WHERE id = $1)
           ON CONFLICT (site_id) DO UPDATE
           SET nonce = EXCLUDED.nonce, sealed = EXCLUDED.sealed,
               saved_by_run = EXCLUDED.saved_by_run, saved_at = now()"#,
        site_id,
        session.nonce,
        session.sealed,
        run_id
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Forgets a site's session; whether there was one.
pub async fn delete(pool: &PgPool, site_id: i64) -> sqlx::Result<bool> {
    let done = sqlx::query!("DELETE FROM site_sessions WHERE site_id = $1", site_id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() > 0)
}
