//! Sites in Postgres; their secrets sealed (see `secrets`).

mod secrets;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgPool, types::Json};

use crate::{
    domain::site::{
        Extraction, FieldInput, FieldSpec, Identity, JsonInput, MASK, ProxyUrl, SiteInput, SiteSpec,
    },
    store::sealing::Sealed,
    store::sealing::SessionKey,
};
use secrets::{Secrets, StoredSecrets, write_secrets};
pub use secrets::{SecretsError, count_unsealed, seal_unsealed};

/// A stored site, as the API shows it: the values of its headers and its
/// proxy's credentials are masked (`***`) for every token; they are kept
/// sealed with SESSION_KEY, and sending the masked form back keeps them.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Site {
    pub id: i64,
    pub name: String,
    pub search_url: String,
    pub render: String,
    pub item_selector: Option<String>,
    pub fields: BTreeMap<String, FieldSpec>,
    pub wait_for: Option<String>,
    pub blocked_selector: Option<String>,
    pub json: Option<JsonInput>,
    pub max_pages: i32,
    pub stuck_timeout_secs: Option<i32>,
    pub max_attempts: Option<i32>,
    pub max_requests_per_sec: Option<f64>,
    pub max_concurrent_runs: i32,
    pub stop_on_seen: bool,
    pub keep_session: bool,
    pub exclusive_session: bool,
    pub user_agent: Option<String>,
    /// Header names, each value shown as `***`.
    pub headers: BTreeMap<String, String>,
    /// The proxy, its user name and password shown as `***`.
    pub proxy: Option<String>,
    /// When a run last saved the site's session (keep_session).
    pub session_saved_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(skip)]
    secrets: StoredSecrets,
}

/// Why a stored site is not a site the rules accept.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error(transparent)]
    Secrets(#[from] SecretsError),
    #[error("the stored site breaks a rule: {0}")]
    Invalid(#[from] crate::domain::FieldError),
}

impl Site {
    fn secrets(&self, key: Option<&SessionKey>) -> Result<Secrets, SecretsError> {
        self.secrets.open(self.id, key)
    }

    /// The site as a client would send it, its secrets opened with `key`.
    pub fn input(&self, key: Option<&SessionKey>) -> Result<SiteInput, SecretsError> {
        let secrets = self.secrets(key)?;
        Ok(SiteInput {
            name: self.name.clone(),
            search_url: self.search_url.clone(),
            render: Some(self.render.clone()),
            item_selector: self.item_selector.clone(),
            fields: self
                .fields
                .iter()
                .map(|(name, spec)| (name.clone(), FieldInput::from(spec)))
                .collect(),
            wait_for: self.wait_for.clone(),
            blocked_selector: self.blocked_selector.clone(),
            json: self.json.clone(),
            max_pages: Some(self.max_pages),
            stuck_timeout_secs: self.stuck_timeout_secs,
            max_attempts: self.max_attempts,
            max_requests_per_sec: self.max_requests_per_sec,
            max_concurrent_runs: Some(self.max_concurrent_runs),
            stop_on_seen: Some(self.stop_on_seen),
            keep_session: Some(self.keep_session),
            exclusive_session: Some(self.exclusive_session),
            user_agent: self.user_agent.clone(),
            headers: Some(secrets.headers),
            proxy: secrets.proxy.or_else(|| self.proxy.clone()),
        })
    }

    /// The site's identity (user agent, headers, proxy), its secrets opened
    /// with `key`.
    pub fn identity(&self, key: Option<&SessionKey>) -> Result<Identity, SpecError> {
        let secrets = self.secrets(key)?;
        Ok(Identity::parse(
            self.user_agent.clone(),
            Some(secrets.headers),
            secrets.proxy.or_else(|| self.proxy.clone()),
        )?)
    }

    /// The site as the domain rules see it (it was checked when stored), its
    /// secrets opened with `key`.
    pub fn spec(&self, key: Option<&SessionKey>) -> Result<SiteSpec, SpecError> {
        Ok(self.input(key)?.parse()?)
    }
}

/// The columns a spec is stored in, besides its sealed secrets.
struct Columns<'a> {
    item_selector: Option<&'a str>,
    wait_for: Option<&'a str>,
    blocked_selector: Option<&'a str>,
    json: Option<JsonInput>,
    header_names: Vec<String>,
    /// Credentials masked.
    proxy: Option<String>,
}

fn columns(spec: &SiteSpec) -> Columns<'_> {
    let header_names = spec.identity.headers.keys().cloned().collect();
    let proxy = spec.identity.proxy.as_ref().map(ProxyUrl::masked);
    let (item_selector, wait_for, blocked_selector, json) = match &spec.extraction {
        Extraction::Html {
            item_selector,
            wait_for,
            blocked_selector,
            ..
        } => (
            Some(item_selector.as_str()),
            wait_for.as_ref().map(|s| s.as_str()),
            blocked_selector.as_ref().map(|s| s.as_str()),
            None,
        ),
        Extraction::Json { items, paging, .. } => (
            None,
            None,
            None,
            Some(JsonInput {
                items: items.as_str().to_owned(),
                next_token: paging.as_ref().map(|p| p.next_token.as_str().to_owned()),
                token_param: paging.as_ref().map(|p| p.token_param.clone()),
            }),
        ),
    };
    Columns {
        item_selector,
        wait_for,
        blocked_selector,
        json,
        header_names,
        proxy,
    }
}

/// Stores a new site, its secrets sealed with `key` (the api refuses a site
/// with secrets when it has no key).
pub async fn create(
    pool: &PgPool,
    spec: &SiteSpec,
    key: Option<&SessionKey>,
) -> sqlx::Result<Site> {
    let c = columns(spec);
    let mut tx = pool.begin().await?;
    let id = sqlx::query_scalar!(
        r#"INSERT INTO sites (name, search_url, render, item_selector, fields, wait_for, blocked_selector,
                              json, max_pages, stuck_timeout_secs, max_attempts, max_requests_per_sec,
                              max_concurrent_runs, stop_on_seen, keep_session, exclusive_session,
                              user_agent, header_names, proxy)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
           RETURNING id"#,
        spec.name,
        spec.search_url.as_str(),
        spec.render.as_str(),
        c.item_selector,
        Json(spec.extraction.fields()) as _,
        c.wait_for,
        c.blocked_selector,
        c.json.map(Json) as _,
        spec.max_pages,
        spec.stuck_timeout_secs,
        spec.max_attempts,
        spec.politeness.max_requests_per_sec,
        spec.politeness.max_concurrent_runs,
        spec.stop_on_seen,
        spec.session.keep,
        spec.session.exclusive,
        spec.identity.user_agent,
        &c.header_names,
        c.proxy,
    )
    .fetch_one(&mut *tx)
    .await?;
    write_secrets(&mut tx, id, &spec.identity, key).await?;
    tx.commit().await?;
    Ok(get(pool, id).await?.expect("just inserted"))
}

/// Replaces a site, its secrets sealed anew with `key`.
pub async fn update(
    pool: &PgPool,
    id: i64,
    spec: &SiteSpec,
    key: Option<&SessionKey>,
) -> sqlx::Result<Option<Site>> {
    let c = columns(spec);
    let mut tx = pool.begin().await?;
    let updated = sqlx::query_scalar!(
        r#"UPDATE sites SET name = $2, search_url = $3, render = $4, item_selector = $5, fields = $6,
                  wait_for = $7, blocked_selector = $8, json = $9, max_pages = $10, stuck_timeout_secs = $11,
                  max_attempts = $12, max_requests_per_sec = $13, max_concurrent_runs = $14,
                  stop_on_seen = $15, keep_session = $16, exclusive_session = $17, user_agent = $18,
                  header_names = $19, proxy = $20, updated_at = now()
           WHERE id = $1
           RETURNING id"#,
        id,
        spec.name,
        spec.search_url.as_str(),
        spec.render.as_str(),
        c.item_selector,
        Json(spec.extraction.fields()) as _,
        c.wait_for,
        c.blocked_selector,
        c.json.map(Json) as _,
        spec.max_pages,
        spec.stuck_timeout_secs,
        spec.max_attempts,
        spec.politeness.max_requests_per_sec,
        spec.politeness.max_concurrent_runs,
        spec.stop_on_seen,
        spec.session.keep,
        spec.session.exclusive,
        spec.identity.user_agent,
        &c.header_names,
        c.proxy,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(id) = updated else {
        return Ok(None);
    };
    write_secrets(&mut tx, id, &spec.identity, key).await?;
    tx.commit().await?;
    get(pool, id).await
}

pub async fn get(pool: &PgPool, id: i64) -> sqlx::Result<Option<Site>> {
    Ok(select(pool, Some(id)).await?.pop())
}

pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<Site>> {
    select(pool, None).await
}

/// One site (`id`) or all of them, in id order.
async fn select(pool: &PgPool, id: Option<i64>) -> sqlx::Result<Vec<Site>> {
    let rows = sqlx::query_as!(
        SiteRow,
        r#"SELECT s.id, s.name, s.search_url, s.render, s.item_selector,
                  s.fields AS "fields: Json<BTreeMap<String, FieldSpec>>",
                  s.wait_for, s.blocked_selector, s.json AS "json: Json<JsonInput>",
                  s.max_pages, s.stuck_timeout_secs, s.max_attempts, s.max_requests_per_sec,
                  s.max_concurrent_runs, s.stop_on_seen, s.keep_session, s.exclusive_session,
                  s.user_agent, s.header_names, s.proxy, s.secrets_nonce, s.secrets_sealed,
                  s.unsealed_headers AS "unsealed_headers: Json<BTreeMap<String, String>>",
                  s.unsealed_proxy, ss.saved_at AS "session_saved_at?", s.created_at, s.updated_at
           FROM sites s LEFT JOIN site_sessions ss ON ss.site_id = s.id
           WHERE ($1::bigint IS NULL OR s.id = $1)
           ORDER BY s.id"#,
        id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(Site::from).collect())
}

/// Deletes a site with its runs and results. Refused (`Ok(None)` is "not found")
/// while a run of the site is active, so no worker writes into a deleted site.
pub async fn delete(pool: &PgPool, id: i64) -> sqlx::Result<DeleteOutcome> {
    let mut tx = pool.begin().await?;
    let found = sqlx::query_scalar!("SELECT id FROM sites WHERE id = $1 FOR UPDATE", id)
        .fetch_optional(&mut *tx)
        .await?;
    if found.is_none() {
        return Ok(DeleteOutcome::NotFound);
    }
    let active = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM crawl_runs
           WHERE site_id = $1 AND state IN ('queued', 'running', 'url_call', 'call_done')"#,
        id
    )
    .fetch_one(&mut *tx)
    .await?;
    if active > 0 {
        return Ok(DeleteOutcome::HasActiveRuns(active));
    }
    sqlx::query!("DELETE FROM sites WHERE id = $1", id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(DeleteOutcome::Deleted)
}

/// What a delete did.
#[derive(Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    NotFound,
    HasActiveRuns(i64),
}

/// The ids among `ids` that name no site.
pub async fn missing(executor: impl sqlx::PgExecutor<'_>, ids: &[i64]) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id!" FROM UNNEST($1::bigint[]) AS wanted(id)
           WHERE NOT EXISTS (SELECT 1 FROM sites WHERE sites.id = wanted.id)
           ORDER BY id"#,
        ids
    )
    .fetch_all(executor)
    .await
}

/// A `sites` row as sqlx reads it (maps are JSONB).
struct SiteRow {
    id: i64,
    name: String,
    search_url: String,
    render: String,
    item_selector: Option<String>,
    fields: Json<BTreeMap<String, FieldSpec>>,
    wait_for: Option<String>,
    blocked_selector: Option<String>,
    json: Option<Json<JsonInput>>,
    max_pages: i32,
    stuck_timeout_secs: Option<i32>,
    max_attempts: Option<i32>,
    max_requests_per_sec: Option<f64>,
    max_concurrent_runs: i32,
    stop_on_seen: bool,
    keep_session: bool,
    exclusive_session: bool,
    user_agent: Option<String>,
    header_names: Vec<String>,
    proxy: Option<String>,
    secrets_nonce: Option<Vec<u8>>,
    secrets_sealed: Option<Vec<u8>>,
    unsealed_headers: Json<BTreeMap<String, String>>,
    unsealed_proxy: Option<String>,
    session_saved_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<SiteRow> for Site {
    fn from(row: SiteRow) -> Self {
        let secrets = match (row.secrets_nonce, row.secrets_sealed) {
            (Some(nonce), Some(sealed)) => StoredSecrets::Sealed(Sealed { nonce, sealed }),
            _ => StoredSecrets::Unsealed(Secrets {
                headers: row.unsealed_headers.0,
                proxy: row.unsealed_proxy,
            }),
        };
        Site {
            id: row.id,
            name: row.name,
            search_url: row.search_url,
            render: row.render,
            item_selector: row.item_selector,
            fields: row.fields.0,
            wait_for: row.wait_for,
            blocked_selector: row.blocked_selector,
            json: row.json.map(|j| j.0),
            max_pages: row.max_pages,
            stuck_timeout_secs: row.stuck_timeout_secs,
            max_attempts: row.max_attempts,
            max_requests_per_sec: row.max_requests_per_sec,
            max_concurrent_runs: row.max_concurrent_runs,
            stop_on_seen: row.stop_on_seen,
            keep_session: row.keep_session,
            exclusive_session: row.exclusive_session,
            user_agent: row.user_agent,
            headers: row
                .header_names
                .into_iter()
                .map(|name| (name, MASK.to_owned()))
                .collect(),
            proxy: row.proxy,
            secrets,
            session_saved_at: row.session_saved_at,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}
