//! One scheduler (and one CloudWatch publisher) acts at a time: it holds a
//! Postgres advisory lock on a connection of its own. If the process dies its connection closes and
//! Postgres releases the lock, so a waiting scheduler takes over.

use std::time::Duration;

use anyhow::Context;
use sqlx::{ConnectOptions, Connection, PgConnection, postgres::PgConnectOptions};

/// Key of the scheduler's advisory lock ("crawlfleet scheduler").
pub const SCHEDULER_LOCK: i64 = 0x6372_6177_6c73_6368;
/// Key of the CloudWatch publisher's advisory lock (one publisher among api processes).
pub const PUBLISHER_LOCK: i64 = 0x6372_6177_6c70_7562;

/// Leadership, held for as long as this value and its connection live.
pub struct Leadership {
    conn: PgConnection,
    lock: i64,
}

impl Leadership {
    /// Tries once to become the leader of `lock` (e.g. [`SCHEDULER_LOCK`]);
    /// `role` names the session in pg_stat_activity.
    pub async fn try_acquire(
        database_url: &str,
        lock: i64,
        role: &str,
    ) -> anyhow::Result<Option<Leadership>> {
        // Named, so an operator (or a test) sees in pg_stat_activity who leads.
        let options: PgConnectOptions = super::connect_options(database_url)?;
        let mut conn = options
            .application_name(&format!("crawlfleet-{role}-{}", std::process::id()))
            .connect()
            .await
            .context("connecting for the leader lock")?;
        let won = sqlx::query_scalar!("SELECT pg_try_advisory_lock($1) AS \"won!\"", lock)
            .fetch_one(&mut conn)
            .await?;
        if won {
            Ok(Some(Leadership { conn, lock }))
        } else {
            conn.close().await.ok();
            Ok(None)
        }
    }

    /// Resolves when the lock's connection is lost (leadership may have passed on).
    pub async fn lost(&mut self) {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let alive = tokio::time::timeout(Duration::from_secs(5), self.conn.ping()).await;
            if !matches!(alive, Ok(Ok(()))) {
                return;
            }
        }
    }

    /// Gives leadership up at once.
    pub async fn release(mut self) {
        let _ = sqlx::query_scalar!("SELECT pg_advisory_unlock($1)", self.lock)
            .fetch_one(&mut self.conn)
            .await;
        let _ = self.conn.close().await;
    }
}
