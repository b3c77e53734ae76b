//! Webhook endpoints (here), the outbox their messages wait in (`outbox`:
//! `record` is called inside the transaction of the change that causes the
//! event), the deliveries the scheduler's leader leases, sends and writes
//! the attempts of (`sending`), and the deliveries as the API lists them
//! (`deliveries`); the API paths events link to (`links`). Secrets are sealed with SESSION_KEY, bound to
//! their endpoint's row.

mod deliveries;
mod links;
mod outbox;
mod sending;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use super::{
    columns::decode,
    sealing::{self, Sealed, SessionKey},
};
use crate::domain::webhook::{Webhook, WebhookEventType, WebhookSecret, WebhookSpec};
pub use deliveries::*;
pub use links::ApiLinks;
pub use outbox::*;
pub use sending::*;

/// Why an endpoint could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("unknown site ids: {0:?}")]
    UnknownSites(Vec<i64>),
    #[error("unknown keyword ids: {0:?}")]
    UnknownKeywords(Vec<i64>),
    /// Secrets are kept sealed, with a key this process does not have.
    #[error("a webhook's secret is kept sealed with SESSION_KEY, which is not set here")]
    NoKey,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// What the secret of endpoint `id` is bound to: no other row's opens.
pub(crate) fn secret_bound_to(id: i64) -> Vec<u8> {
    format!("webhook {id} secret").into_bytes()
}

/// Opens the sealed secret of endpoint `id`.
fn open_secret(
    id: i64,
    sealed: Sealed,
    key: Option<&SessionKey>,
) -> Result<WebhookSecret, SecretError> {
    let key = key.ok_or(SecretError::NoKey)?;
    let plain = sealing::open(&sealed, key, &secret_bound_to(id))?;
    let text = String::from_utf8(plain).map_err(|_| SecretError::Unreadable)?;
    WebhookSecret::parse(&text).map_err(|_| SecretError::Unreadable)
}

/// Why an endpoint's secret could not be opened to sign with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SecretError {
    #[error("cannot sign: the webhook's secret is sealed and SESSION_KEY is not set here")]
    NoKey,
    #[error("cannot sign: {0}")]
    NotOpened(#[from] sealing::NotOpened),
    #[error("cannot sign: the webhook's secret is unreadable")]
    Unreadable,
}

/// Checks the filters' ids exist.
async fn check_filters(tx: &mut PgConnection, spec: &WebhookSpec) -> Result<(), WriteError> {
    let missing = super::sites::missing(&mut *tx, &spec.site_ids).await?;
    if !missing.is_empty() {
        return Err(WriteError::UnknownSites(missing));
    }
    let missing = sqlx::query_scalar!(
        r#"SELECT id AS "id!" FROM UNNEST($1::bigint[]) AS wanted(id)
           WHERE NOT EXISTS (SELECT 1 FROM keywords WHERE keywords.id = wanted.id)
           ORDER BY id"#,
        &spec.keyword_ids
    )
    .fetch_all(&mut *tx)
    .await?;
    if !missing.is_empty() {
        return Err(WriteError::UnknownKeywords(missing));
    }
    Ok(())
}

async fn write_secret(
    tx: &mut PgConnection,
    id: i64,
    secret: &WebhookSecret,
    key: &SessionKey,
) -> sqlx::Result<()> {
    let sealed = sealing::seal(key, &secret_bound_to(id), secret.expose().as_bytes());
    sqlx::query!(
        "UPDATE webhooks SET secret_nonce = $2, secret_sealed = $3 WHERE id = $1",
        id,
        sealed.nonce,
        sealed.sealed
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

fn event_names(events: &[WebhookEventType]) -> Vec<String> {
    events.iter().map(|e| e.as_str().to_owned()).collect()
}

/// Stores a new endpoint with `secret` (the spec's, or one the caller
/// generated) sealed with `key`.
pub async fn create(
    pool: &PgPool,
    spec: &WebhookSpec,
    secret: &WebhookSecret,
    key: Option<&SessionKey>,
) -> Result<Webhook, WriteError> {
    let key = key.ok_or(WriteError::NoKey)?;
    let mut tx = pool.begin().await?;
    check_filters(&mut tx, spec).await?;
    // The secret is sealed bound to the id, known once the row is in.
    let id = sqlx::query_scalar!(
        r#"INSERT INTO webhooks (url, events, site_ids, keyword_ids, description, enabled,
                                 secret_nonce, secret_sealed)
           VALUES ($1, $2, $3, $4, $5, $6, '', '') RETURNING id"#,
        spec.url.as_str(),
        &event_names(&spec.events),
        &spec.site_ids,
        &spec.keyword_ids,
        spec.description,
        spec.enabled
    )
    .fetch_one(&mut *tx)
    .await?;
    write_secret(&mut tx, id, secret, key).await?;
    let webhook = fetch(&mut tx, id)
        .await?
        .expect("inserted in this transaction");
    tx.commit().await?;
    Ok(webhook)
}

/// Replaces endpoint `id`; its secret too when the spec has one. Enabling
/// an endpoint clears why it was disabled and makes its pending deliveries
/// due at once. `None` when there is no such endpoint.
pub async fn update(
    pool: &PgPool,
    id: i64,
    spec: &WebhookSpec,
    key: Option<&SessionKey>,
) -> Result<Option<Webhook>, WriteError> {
    let mut tx = pool.begin().await?;
    let was_enabled =
        sqlx::query_scalar!("SELECT enabled FROM webhooks WHERE id = $1 FOR UPDATE", id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(was_enabled) = was_enabled else {
        return Ok(None);
    };
    check_filters(&mut tx, spec).await?;
    sqlx::query!(
        r#"UPDATE webhooks
           SET url = $2, events = $3, site_ids = $4, keyword_ids = $5, description = $6, enabled = $7,
               disabled_at = CASE WHEN $7 THEN NULL ELSE disabled_at END,
               disabled_reason = CASE WHEN $7 THEN NULL ELSE disabled_reason END,
               updated_at = now()
           WHERE id = $1"#,
        id,
        spec.url.as_str(),
        &event_names(&spec.events),
        &spec.site_ids,
        &spec.keyword_ids,
        spec.description,
        spec.enabled
    )
    .execute(&mut *tx)
    .await?;
    if let Some(secret) = &spec.secret {
        write_secret(&mut tx, id, secret, key.ok_or(WriteError::NoKey)?).await?;
    }
    if spec.enabled && !was_enabled {
        // What waited while it was off goes out now, on a schedule of its own.
        sqlx::query!(
            r#"UPDATE webhook_deliveries SET next_attempt_at = now(), attempts = 0, scheduled_at = now()
               WHERE webhook_id = $1 AND state = 'pending'"#,
            id
        )
        .execute(&mut *tx)
        .await?;
        outbox::wake_sender(&mut tx).await?;
    }
    let webhook = fetch(&mut tx, id).await?;
    tx.commit().await?;
    Ok(webhook)
}

pub async fn get(pool: &PgPool, id: i64) -> sqlx::Result<Option<Webhook>> {
    fetch(&mut *pool.acquire().await?, id).await
}

/// Every endpoint, by id.
pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<Webhook>> {
    let rows = sqlx::query_as!(
        WebhookRow,
        r#"SELECT id, url, events, site_ids, keyword_ids, description, enabled, disabled_at,
                  disabled_reason, created_at, updated_at
           FROM webhooks ORDER BY id"#
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(Webhook::try_from).collect()
}

/// Deletes an endpoint with its deliveries; false when there was none.
pub async fn delete(pool: &PgPool, id: i64) -> sqlx::Result<bool> {
    let done = sqlx::query!("DELETE FROM webhooks WHERE id = $1", id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() > 0)
}

async fn fetch(conn: &mut PgConnection, id: i64) -> sqlx::Result<Option<Webhook>> {
    let row = sqlx::query_as!(
        WebhookRow,
        r#"SELECT id, url, events, site_ids, keyword_ids, description, enabled, disabled_at,
                  disabled_reason, created_at, updated_at
           FROM webhooks WHERE id = $1"#,
        id
    )
    .fetch_optional(&mut *conn)
    .await?;
    row.map(Webhook::try_from).transpose()
}

/// A `webhooks` row but its sealed secret (opened only to sign, by `deliveries`).
struct WebhookRow {
    id: i64,
    url: String,
    events: Vec<String>,
    site_ids: Vec<i64>,
    keyword_ids: Vec<i64>,
    description: String,
    enabled: bool,
    disabled_at: Option<DateTime<Utc>>,
    disabled_reason: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<WebhookRow> for Webhook {
    type Error = sqlx::Error;

    fn try_from(row: WebhookRow) -> sqlx::Result<Webhook> {
        Ok(Webhook {
            id: row.id,
            url: decode("url", &row.url)?,
            events: row
                .events
                .iter()
                .map(|e| decode("events", e))
                .collect::<sqlx::Result<_>>()?,
            site_ids: row.site_ids,
            keyword_ids: row.keyword_ids,
            description: row.description,
            enabled: row.enabled,
            disabled_at: row.disabled_at,
            disabled_reason: row.disabled_reason,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}
