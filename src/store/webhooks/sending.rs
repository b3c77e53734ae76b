//! Deliveries as the sender takes them: it leases what is due (its next
//! attempt pushed to the lease's end, so a sender that dies mid-send has it
//! retried then: at least once, the same `webhook-id` every time) and writes
//! each attempt's result only while it still holds the lease.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use url::Url;
use uuid::Uuid;

use super::{SecretError, open_secret};
use crate::{
    domain::webhook::{DeliveryState, MessageId, WebhookSecret},
    store::{
        columns::decode,
        sealing::{Sealed, SessionKey},
    },
};

/// How much the sender may take now.
#[derive(Debug, Clone)]
pub struct LeaseRequest<'a> {
    /// Deliveries in all.
    pub free: i64,
    /// Deliveries in flight to one endpoint at most.
    pub per_endpoint: i32,
    /// Endpoints with deliveries in flight, and how many.
    pub busy: &'a [(i64, i32)],
    /// How long the sender holds them: past it, they are due again.
    pub lease_for: Duration,
}

/// A delivery taken by the sender.
#[derive(Debug)]
pub struct Leased {
    pub delivery_id: i64,
    pub webhook_id: i64,
    pub lease: Uuid,
    /// This attempt's number in the delivery's schedule (1 = the first).
    pub attempt: i32,
    /// When the schedule began: no success since then and the endpoint is disabled.
    pub scheduled_at: DateTime<Utc>,
    pub msg_id: MessageId,
    pub body: String,
    pub url: Url,
    pub secret: Result<WebhookSecret, SecretError>,
}

/// Leases the deliveries due now, oldest first, within the request's bounds
/// (an endpoint that is slow or down holds at most `per_endpoint` slots).
pub async fn lease_due(
    pool: &PgPool,
    request: &LeaseRequest<'_>,
    key: Option<&SessionKey>,
) -> sqlx::Result<Vec<Leased>> {
    let (busy_ids, busy_counts): (Vec<i64>, Vec<i32>) = request.busy.iter().copied().unzip();
    let lease = Uuid::new_v4();
    let rows = sqlx::query!(
        r#"WITH room AS (
               SELECT w.id, $2::int - COALESCE(b.n, 0) AS room
               FROM webhooks w
               LEFT JOIN UNNEST($3::bigint[], $4::int[]) AS b(webhook_id, n) ON b.webhook_id = w.id
               WHERE w.enabled
           ), due AS (
               SELECT d.id, d.next_attempt_at, r.room,
                      row_number() OVER (PARTITION BY r.id ORDER BY d.next_attempt_at, d.id) AS rank
               FROM room r
               CROSS JOIN LATERAL (
                   SELECT id, next_attempt_at FROM webhook_deliveries
                   WHERE webhook_id = r.id AND state = 'pending' AND next_attempt_at <= now()
                   ORDER BY next_attempt_at, id
                   LIMIT $2
               ) d
               WHERE r.room > 0
           ), chosen AS (
               SELECT id FROM due WHERE rank <= room ORDER BY next_attempt_at, id LIMIT $1
           )
           UPDATE webhook_deliveries d
           SET next_attempt_at = now() + make_interval(secs => $5), lease = $6
           FROM chosen, webhook_messages m, webhooks w
           WHERE d.id = chosen.id AND m.id = d.message_id AND w.id = d.webhook_id
             AND d.state = 'pending' AND d.next_attempt_at <= now()
           RETURNING d.id, d.webhook_id, d.attempts, d.scheduled_at, m.msg_id, m.body, w.url,
                     w.secret_nonce, w.secret_sealed"#,
        request.free,
        request.per_endpoint,
        &busy_ids,
        &busy_counts,
        request.lease_for.as_secs_f64(),
        lease
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            let sealed = Sealed {
                nonce: row.secret_nonce,
                sealed: row.secret_sealed,
            };
            Ok(Leased {
                delivery_id: row.id,
                webhook_id: row.webhook_id,
                lease,
                attempt: row.attempts + 1,
                scheduled_at: row.scheduled_at,
                msg_id: MessageId(row.msg_id),
                body: row.body,
                url: decode("url", &row.url)?,
                secret: open_secret(row.webhook_id, sealed, key),
            })
        })
        .collect()
}

/// What an attempt came to.
#[derive(Debug, Clone)]
pub struct Attempted {
    pub attempted_at: DateTime<Utc>,
    pub status: Option<i32>,
    pub error: Option<String>,
    pub latency_ms: i32,
    pub response_excerpt: Option<String>,
}

/// What becomes of the delivery after an attempt.
#[derive(Debug, Clone)]
pub enum Next {
    Delivered,
    /// Tried again after this long.
    RetryAfter(Duration),
    /// The schedule is spent. If the endpoint had no success since the
    /// schedule began, it is disabled with this reason.
    Failed {
        disable_reason: String,
    },
}

/// What writing an attempt's result did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    Recorded {
        /// The endpoint was disabled by this failure.
        disabled: bool,
    },
    /// The lease ran out and another sender took the delivery: nothing written.
    LeaseLost,
}

/// Writes an attempt of a leased delivery and what becomes of it, in one
/// transaction, if the lease still holds.
pub async fn finish(
    pool: &PgPool,
    leased: &Leased,
    attempted: &Attempted,
    next: &Next,
) -> sqlx::Result<Finished> {
    let (state, retry_after) = match next {
        Next::Delivered => (DeliveryState::Delivered, None),
        Next::RetryAfter(after) => (DeliveryState::Pending, Some(after.as_secs_f64())),
        Next::Failed { .. } => (DeliveryState::Failed, None),
    };
    let mut tx = pool.begin().await?;
    let held = sqlx::query!(
        r#"UPDATE webhook_deliveries
           SET attempts = attempts + 1, lease = NULL, state = $3,
               next_attempt_at = COALESCE(now() + make_interval(secs => $4), next_attempt_at),
               delivered_at = CASE WHEN $3 = 'delivered' THEN now() END
           WHERE id = $1 AND lease = $2"#,
        leased.delivery_id,
        leased.lease,
        state.as_str(),
        retry_after
    )
    .execute(&mut *tx)
    .await?;
    if held.rows_affected() == 0 {
        return Ok(Finished::LeaseLost);
    }
    sqlx::query!(
        r#"INSERT INTO webhook_attempts (delivery_id, attempted_at, status, error, latency_ms, response_excerpt)
           VALUES ($1, $2, $3, $4, $5, $6)"#,
        leased.delivery_id,
        attempted.attempted_at,
        attempted.status,
        attempted.error,
        attempted.latency_ms,
        attempted.response_excerpt
    )
    .execute(&mut *tx)
    .await?;
    let mut disabled = false;
    if let Next::Failed { disable_reason } = next {
        let done = sqlx::query!(
            r#"UPDATE webhooks SET enabled = false, disabled_at = now(), disabled_reason = $2, updated_at = now()
               WHERE id = $1 AND enabled AND NOT EXISTS (
                   SELECT 1 FROM webhook_deliveries
                   WHERE webhook_id = $1 AND state = 'delivered' AND delivered_at >= $3)"#,
            leased.webhook_id,
            disable_reason,
            leased.scheduled_at
        )
        .execute(&mut *tx)
        .await?;
        disabled = done.rows_affected() > 0;
    }
    tx.commit().await?;
    Ok(Finished::Recorded { disabled })
}

/// Deliveries waiting (pending), and how long the oldest due one has waited.
pub async fn backlog(pool: &PgPool) -> sqlx::Result<(i64, f64)> {
    let row = sqlx::query!(
        r#"SELECT count(*) AS "pending!",
                  COALESCE(EXTRACT(EPOCH FROM now() - min(next_attempt_at)
                                   FILTER (WHERE next_attempt_at <= now())), 0)::float8 AS "oldest_due_secs!"
           FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
           WHERE d.state = 'pending' AND w.enabled"#
    )
    .fetch_one(pool)
    .await?;
    Ok((row.pending, row.oldest_due_secs))
}
