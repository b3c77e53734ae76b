//! Deliveries as the API shows them: an endpoint's, each with its attempts.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use crate::{
    domain::webhook::{DeliveryState, WebhookEventType},
    store::columns::decode,
};

/// A message to one endpoint, with its attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub id: i64,
    pub webhook_id: i64,
    pub msg_id: String,
    pub event_type: WebhookEventType,
    pub state: DeliveryState,
    /// Attempts of the current schedule (a resend starts a new one).
    pub attempts: i32,
    /// When it is tried next, while pending.
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The body sent (and signed), JSON.
    pub body: String,
    /// Every attempt, oldest first (across resends).
    pub attempt_log: Vec<DeliveryAttempt>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryAttempt {
    pub attempted_at: DateTime<Utc>,
    /// The HTTP status, when the endpoint answered.
    pub status: Option<i32>,
    /// Why there was no answer (refused, timed out, unsigned...).
    pub error: Option<String>,
    pub latency_ms: i32,
    /// The start of the answer's body.
    pub response_excerpt: Option<String>,
}

/// Which deliveries of an endpoint to list, newest first; `before` is the cursor.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub state: Option<DeliveryState>,
    pub before: Option<i64>,
    pub limit: i64,
}

struct DeliveryRow {
    id: i64,
    webhook_id: i64,
    msg_id: String,
    event_type: String,
    state: String,
    attempts: i32,
    next_attempt_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    body: String,
}

/// A page of endpoint `webhook_id`'s deliveries, each with its attempts.
pub async fn list_deliveries(
    pool: &PgPool,
    webhook_id: i64,
    filter: &DeliveryFilter,
) -> sqlx::Result<Vec<Delivery>> {
    let rows = sqlx::query_as!(
        DeliveryRow,
        r#"SELECT d.id, d.webhook_id, m.msg_id, m.event_type, d.state, d.attempts, d.next_attempt_at,
                  d.delivered_at, d.created_at, m.body
           FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
           WHERE d.webhook_id = $1 AND ($2::text IS NULL OR d.state = $2)
             AND ($3::bigint IS NULL OR d.id < $3)
           ORDER BY d.id DESC
           LIMIT $4"#,
        webhook_id,
        filter.state.map(DeliveryState::as_str),
        filter.before,
        filter.limit
    )
    .fetch_all(pool)
    .await?;
    with_attempts(&mut *pool.acquire().await?, rows).await
}

/// One delivery of an endpoint, read on `conn` (a transaction that queued
/// it reads it before it commits: once committed, the sender may take it).
pub async fn get_delivery(
    conn: &mut PgConnection,
    webhook_id: i64,
    id: i64,
) -> sqlx::Result<Option<Delivery>> {
    let rows = sqlx::query_as!(
        DeliveryRow,
        r#"SELECT d.id, d.webhook_id, m.msg_id, m.event_type, d.state, d.attempts, d.next_attempt_at,
                  d.delivered_at, d.created_at, m.body
           FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
           WHERE d.id = $1 AND d.webhook_id = $2"#,
        id,
        webhook_id
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(with_attempts(conn, rows).await?.pop())
}

async fn with_attempts(
    conn: &mut PgConnection,
    rows: Vec<DeliveryRow>,
) -> sqlx::Result<Vec<Delivery>> {
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let attempts = sqlx::query!(
        r#"SELECT delivery_id, attempted_at, status, error, latency_ms, response_excerpt
           FROM webhook_attempts WHERE delivery_id = ANY($1) ORDER BY id"#,
        &ids
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter()
        .map(|row| {
            let state = decode("state", &row.state)?;
            Ok(Delivery {
                attempt_log: attempts
                    .iter()
                    .filter(|a| a.delivery_id == row.id)
                    .map(|a| DeliveryAttempt {
                        attempted_at: a.attempted_at,
                        status: a.status,
                        error: a.error.clone(),
                        latency_ms: a.latency_ms,
                        response_excerpt: a.response_excerpt.clone(),
                    })
                    .collect(),
                id: row.id,
                webhook_id: row.webhook_id,
                msg_id: row.msg_id,
                event_type: decode("event_type", &row.event_type)?,
                next_attempt_at: (state == DeliveryState::Pending).then_some(row.next_attempt_at),
                state,
                attempts: row.attempts,
                delivered_at: row.delivered_at,
                created_at: row.created_at,
                body: row.body,
            })
        })
        .collect()
}
