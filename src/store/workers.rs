use sqlx::PgPool;

/// Announces (or refreshes) a worker process and its concurrency.
pub async fn announce(pool: &PgPool, id: &str, host: &str, concurrency: i32) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO workers (id, host, concurrency) VALUES ($1, $2, $3)
           ON CONFLICT (id) DO UPDATE SET last_seen_at = now(), concurrency = EXCLUDED.concurrency"#,
        id,
        host,
        concurrency
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Removes a worker that stopped cleanly.
pub async fn retire(pool: &PgPool, id: &str) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM workers WHERE id = $1", id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Total concurrency of the workers seen in the last minute.
pub async fn fleet_concurrency(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(concurrency), 0)::bigint AS "n!" FROM workers
           WHERE last_seen_at > now() - interval '1 minute'"#
    )
    .fetch_one(pool)
    .await
}
