use sqlx::PgPool;

/// A worker's slots: browser crawls and http/json crawls at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slots {
    pub browser: i64,
    pub http: i64,
}

/// A worker process as it announces itself.
#[derive(Debug, Clone)]
pub struct WorkerProcess {
    pub id: String,
    pub host: String,
    /// `family:revision` on ECS (see `worker::scale_in::release`), else the crate's version.
    pub release: String,
    pub slots: Slots,
}

/// Announces (or refreshes) a worker process and its slots.
pub async fn announce(pool: &PgPool, worker: &WorkerProcess) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO workers (id, host, concurrency, http_concurrency, release)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (id) DO UPDATE
           SET last_seen_at = now(), concurrency = EXCLUDED.concurrency,
               http_concurrency = EXCLUDED.http_concurrency"#,
        worker.id,
        worker.host,
        worker.slots.browser as i32,
        worker.slots.http as i32,
        worker.release,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Whether a live worker of the same task family but another revision started
/// after `worker`: a deployment is replacing it. Releases without a family
/// (`crawlfleet-<version>` off ECS) are never compared with ECS ones.
pub async fn replaced_by_newer_release(
    pool: &PgPool,
    worker: &WorkerProcess,
) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (
               SELECT 1 FROM workers me JOIN workers other
                 ON split_part(other.release, ':', 1) = split_part(me.release, ':', 1)
                AND other.release <> me.release
                AND other.started_at > me.started_at
                AND other.last_seen_at > now() - interval '1 minute'
               WHERE me.id = $1 AND me.release LIKE '%:%'
           ) AS "replaced!""#,
        worker.id
    )
    .fetch_one(pool)
    .await
}

/// Removes a worker that stopped cleanly.
pub async fn retire(pool: &PgPool, id: &str) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM workers WHERE id = $1", id)
        .execute(pool)
        .await?;
    Ok(())
}

/// The slots of the workers seen in the last minute, summed.
pub async fn fleet_slots(pool: &PgPool) -> sqlx::Result<Slots> {
    let row = sqlx::query!(
        r#"SELECT COALESCE(sum(concurrency), 0)::bigint AS "browser!",
                  COALESCE(sum(http_concurrency), 0)::bigint AS "http!"
           FROM workers WHERE last_seen_at > now() - interval '1 minute'"#
    )
    .fetch_one(pool)
    .await?;
    Ok(Slots {
        browser: row.browser,
        http: row.http,
    })
}
