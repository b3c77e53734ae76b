use sqlx::PgPool;

/// A worker's slots: browser crawls and http/json crawls at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slots {
    pub browser: i64,
    pub http: i64,
}

/// Announces (or refreshes) a worker process and its slots.
pub async fn announce(pool: &PgPool, id: &str, host: &str, slots: Slots) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO workers (id, host, concurrency, http_concurrency) VALUES ($1, $2, $3, $4)
           ON CONFLICT (id) DO UPDATE
           SET last_seen_at = now(), concurrency = EXCLUDED.concurrency,
               http_concurrency = EXCLUDED.http_concurrency"#,
        id,
        host,
        slots.browser as i32,
        slots.http as i32
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
