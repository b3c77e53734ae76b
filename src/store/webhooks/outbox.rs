//! The outbox: a message per event, written in the transaction of the change
//! that causes it (so a crash loses none and a rolled-back change sends
//! none), fanned out at once to a delivery for each enabled endpoint whose
//! events and filters want it; and the sender woken by `NOTIFY`, which
//! Postgres sends only when that transaction commits.

use std::time::Duration;

use chrono::Utc;
use sqlx::{PgConnection, PgPool};

use super::deliveries::{Delivery, get_delivery};
use crate::domain::webhook::{MessageId, WebhookEvent};

/// The channel the sender listens on (per database, so tests sharing a
/// server do not wake each other).
pub const WAKE_CHANNEL: &str = "crawlfleet_webhooks";

/// Records `event` for every enabled endpoint that wants it, inside the
/// caller's transaction (`&mut *tx`); `None` when no endpoint does (nothing
/// is written). Call it in the same transaction as the change itself.
pub async fn record(
    conn: &mut PgConnection,
    event: &WebhookEvent,
) -> sqlx::Result<Option<MessageId>> {
    let endpoints = sqlx::query_scalar!(
        r#"SELECT id FROM webhooks
           WHERE enabled AND $1 = ANY(events)
             AND ($2::bigint IS NULL OR cardinality(site_ids) = 0 OR $2 = ANY(site_ids))
             AND ($3::bigint IS NULL OR cardinality(keyword_ids) = 0 OR $3 = ANY(keyword_ids))"#,
        event.event_type.as_str(),
        event.site_id,
        event.keyword_id
    )
    .fetch_all(&mut *conn)
    .await?;
    if endpoints.is_empty() {
        return Ok(None);
    }
    let (msg_id, message) = insert_message(conn, event).await?;
    sqlx::query!(
        r#"INSERT INTO webhook_deliveries (message_id, webhook_id)
           SELECT $1, UNNEST($2::bigint[])"#,
        message,
        &endpoints
    )
    .execute(&mut *conn)
    .await?;
    wake_sender(conn).await?;
    Ok(Some(msg_id))
}

/// Queues `event` to endpoint `webhook_id` alone, whatever its events and
/// filters (a test); `None` when there is no such endpoint.
pub async fn queue_to(
    pool: &PgPool,
    webhook_id: i64,
    event: &WebhookEvent,
) -> sqlx::Result<Option<Delivery>> {
    let mut tx = pool.begin().await?;
    let exists = sqlx::query_scalar!(
        "SELECT id FROM webhooks WHERE id = $1 FOR SHARE",
        webhook_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    if exists.is_none() {
        return Ok(None);
    }
    let (_, message) = insert_message(&mut tx, event).await?;
    let delivery = sqlx::query_scalar!(
        "INSERT INTO webhook_deliveries (message_id, webhook_id) VALUES ($1, $2) RETURNING id",
        message,
        webhook_id
    )
    .fetch_one(&mut *tx)
    .await?;
    wake_sender(&mut tx).await?;
    // Read as queued: once committed, the sender may deliver it at once.
    let queued = get_delivery(&mut tx, webhook_id, delivery).await?;
    tx.commit().await?;
    Ok(queued)
}

async fn insert_message(
    conn: &mut PgConnection,
    event: &WebhookEvent,
) -> sqlx::Result<(MessageId, i64)> {
    let msg_id = MessageId::generate();
    let id = sqlx::query_scalar!(
        r#"INSERT INTO webhook_messages (msg_id, event_type, site_id, keyword_id, body)
           VALUES ($1, $2, $3, $4, $5) RETURNING id"#,
        msg_id.as_str(),
        event.event_type.as_str(),
        event.site_id,
        event.keyword_id,
        event.body(Utc::now())
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok((msg_id, id))
}

/// Wakes the sender when the transaction commits.
pub(super) async fn wake_sender(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query!("SELECT pg_notify($1, '')", WAKE_CHANNEL)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// What asking to send a delivery again did.
#[derive(Debug)]
pub enum Resend {
    /// Due now, on a retry schedule of its own.
    Queued(Delivery),
    /// A sender is sending it right now.
    InFlight,
    NotFound,
}

/// Makes delivery `delivery_id` of endpoint `webhook_id` due now with a
/// fresh retry schedule, whatever it was (failed, delivered, or waiting
/// for a retry); the same message, so the same `webhook-id`.
pub async fn resend(pool: &PgPool, webhook_id: i64, delivery_id: i64) -> sqlx::Result<Resend> {
    let mut tx = pool.begin().await?;
    let done = sqlx::query!(
        r#"UPDATE webhook_deliveries
           SET state = 'pending', attempts = 0, scheduled_at = now(), next_attempt_at = now(),
               lease = NULL, delivered_at = NULL
           WHERE id = $1 AND webhook_id = $2
             AND NOT (state = 'pending' AND lease IS NOT NULL AND next_attempt_at > now())"#,
        delivery_id,
        webhook_id
    )
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        tx.rollback().await?;
        return Ok(
            match get_delivery(&mut *pool.acquire().await?, webhook_id, delivery_id).await? {
                Some(_) => Resend::InFlight,
                None => Resend::NotFound,
            },
        );
    }
    wake_sender(&mut tx).await?;
    // Read as queued: once committed, the sender may deliver it at once.
    let queued = get_delivery(&mut tx, webhook_id, delivery_id).await?;
    tx.commit().await?;
    Ok(match queued {
        Some(delivery) => Resend::Queued(delivery),
        None => Resend::NotFound,
    })
}

/// Deletes messages recorded before `older_than` ago whose deliveries are all
/// done (delivered or failed), with their deliveries and attempts; returns
/// how many messages went.
pub async fn delete_messages_before(pool: &PgPool, older_than: Duration) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        r#"DELETE FROM webhook_messages m
           WHERE created_at < now() - make_interval(secs => $1)
             AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                             WHERE d.message_id = m.id AND d.state = 'pending')"#,
        older_than.as_secs_f64()
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
