//! Sites in Postgres; their secrets sealed (see `secrets`). A site is read
//! back as the domain's [`Site`]: the spec it passed the rules with, decoded
//! from its columns once (no rule is checked again), its secrets opened.

mod health;
mod secrets;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::de::{DeserializeOwned, IntoDeserializer};
use sqlx::{PgPool, types::Json};

use crate::{
    domain::site::{
        Expectations, Extraction, FieldSpec, HtmlItems, Identity, JsonInput, Politeness, ProxyUrl,
        SchemaType, SessionPolicy, Site, SiteSpec, TokenPaging,
    },
    domain::{action::Step, paging::Paging},
    store::sealing::{Sealed, SessionKey},
};
pub use health::{RECENT_RUNS, RunItems, STREAK_RUNS, SiteHealth, Window, health, health_of_all};
pub(crate) use secrets::secrets_bound_to;
use secrets::{Secrets, StoredSecrets, write_secrets};
pub use secrets::{SecretsError, count_unsealed, seal_unsealed};

/// Why a stored site could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// Its header values and proxy are sealed with a key this process does
    /// not have (none, or another one).
    #[error("site {site_id}: {source}")]
    Secrets {
        site_id: i64,
        #[source]
        source: SecretsError,
    },
}

/// The columns a spec is stored in, besides its sealed secrets.
struct Columns<'a> {
    item_selector: Option<&'a str>,
    structured_items: Option<&'a str>,
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
    let [item_selector, wait_for, blocked_selector] = spec.extraction.selectors();
    Columns {
        item_selector,
        structured_items: spec.extraction.structured_items().map(SchemaType::as_str),
        wait_for,
        blocked_selector,
        json: spec.extraction.json_input(),
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
    let row = sqlx::query!(
        r#"INSERT INTO sites (name, search_url, render, item_selector, fields, wait_for, blocked_selector,
                              json, max_pages, stuck_timeout_secs, max_attempts, max_requests_per_sec,
                              max_concurrent_runs, stop_on_seen, keep_session, exclusive_session,
                              user_agent, header_names, proxy, expect_items, enabled,
                              expect_min_items, expect_required_fields, expect_max_empty_runs,
                              respect_robots, item_key, structured_items, paging, actions)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
                   $20, $21, $22, $23, $24, $25, $26, $27, $28, $29)
           RETURNING id, created_at, updated_at"#,
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
        spec.expect_items,
        spec.enabled,
        spec.expect.min_items,
        &spec.expect.required_fields,
        spec.expect.max_empty_runs,
        spec.respect_robots,
        spec.item_key,
        c.structured_items,
        Json(&spec.paging) as _,
        Json(&spec.actions) as _,
    )
    .fetch_one(&mut *tx)
    .await?;
    write_secrets(&mut tx, row.id, &spec.identity, key).await?;
    tx.commit().await?;
    Ok(Site {
        id: row.id,
        spec: spec.clone(),
        session_saved_at: None,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

/// Replaces a site, its secrets sealed anew with `key`; `None` when there is
/// no such site.
pub async fn update(
    pool: &PgPool,
    id: i64,
    spec: &SiteSpec,
    key: Option<&SessionKey>,
) -> sqlx::Result<Option<Site>> {
    let c = columns(spec);
    let mut tx = pool.begin().await?;
    let updated = sqlx::query!(
        r#"UPDATE sites SET name = $2, search_url = $3, render = $4, item_selector = $5, fields = $6,
                  wait_for = $7, blocked_selector = $8, json = $9, max_pages = $10, stuck_timeout_secs = $11,
                  max_attempts = $12, max_requests_per_sec = $13, max_concurrent_runs = $14,
                  stop_on_seen = $15, keep_session = $16, exclusive_session = $17, user_agent = $18,
                  header_names = $19, proxy = $20, expect_items = $21, enabled = $22,
                  expect_min_items = $23, expect_required_fields = $24, expect_max_empty_runs = $25,
                  respect_robots = $26, item_key = $27, structured_items = $28, paging = $29, actions = $30,
                  updated_at = now()
           WHERE id = $1
           RETURNING id, created_at, updated_at,
                     (SELECT saved_at FROM site_sessions WHERE site_id = $1) AS session_saved_at"#,
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
        spec.expect_items,
        spec.enabled,
        spec.expect.min_items,
        &spec.expect.required_fields,
        spec.expect.max_empty_runs,
        spec.respect_robots,
        spec.item_key,
        c.structured_items,
        Json(&spec.paging) as _,
        Json(&spec.actions) as _,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = updated else {
        return Ok(None);
    };
    write_secrets(&mut tx, id, &spec.identity, key).await?;
    tx.commit().await?;
    Ok(Some(Site {
        id: row.id,
        spec: spec.clone(),
        session_saved_at: row.session_saved_at,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }))
}

/// One site, its secrets opened with `key`.
pub async fn get(
    pool: &PgPool,
    id: i64,
    key: Option<&SessionKey>,
) -> Result<Option<Site>, LoadError> {
    Ok(select(pool, Some(id), key).await?.pop())
}

/// Every site, in id order, their secrets opened with `key`.
pub async fn list(pool: &PgPool, key: Option<&SessionKey>) -> Result<Vec<Site>, LoadError> {
    select(pool, None, key).await
}

/// Whether site `id` exists.
pub async fn exists(pool: &PgPool, id: i64) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM sites WHERE id = $1) AS "exists!""#,
        id
    )
    .fetch_one(pool)
    .await
}

/// One site (`id`) or all of them, in id order.
async fn select(
    pool: &PgPool,
    id: Option<i64>,
    key: Option<&SessionKey>,
) -> Result<Vec<Site>, LoadError> {
    let rows = sqlx::query_as!(
        SiteRow,
        r#"SELECT s.id, s.name, s.search_url, s.render, s.item_selector, s.structured_items,
                  s.fields AS "fields: Json<BTreeMap<String, FieldSpec>>", s.item_key,
                  s.wait_for, s.blocked_selector, s.json AS "json: Json<JsonInput>",
                  s.max_pages, s.paging AS "paging: Json<Paging>", s.actions AS "actions: Json<Vec<Step>>", s.stuck_timeout_secs, s.max_attempts, s.max_requests_per_sec,
                  s.max_concurrent_runs, s.stop_on_seen, s.expect_items, s.enabled, s.keep_session,
                  s.expect_min_items, s.expect_required_fields, s.expect_max_empty_runs, s.respect_robots,
                  s.exclusive_session,
                  s.user_agent, s.proxy, s.secrets_nonce, s.secrets_sealed,
                  s.unsealed_headers AS "unsealed_headers: Json<BTreeMap<String, String>>",
                  s.unsealed_proxy, ss.saved_at AS "session_saved_at?", s.created_at, s.updated_at
           FROM sites s LEFT JOIN site_sessions ss ON ss.site_id = s.id
           WHERE ($1::bigint IS NULL OR s.id = $1)
           ORDER BY s.id"#,
        id
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|row| row.decode(key)).collect()
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
    structured_items: Option<String>,
    fields: Json<BTreeMap<String, FieldSpec>>,
    item_key: Option<String>,
    wait_for: Option<String>,
    blocked_selector: Option<String>,
    json: Option<Json<JsonInput>>,
    max_pages: i32,
    paging: Json<Paging>,
    actions: Json<Vec<Step>>,
    stuck_timeout_secs: Option<i32>,
    max_attempts: Option<i32>,
    max_requests_per_sec: Option<f64>,
    max_concurrent_runs: i32,
    stop_on_seen: bool,
    expect_items: bool,
    expect_min_items: Option<i32>,
    expect_required_fields: Vec<String>,
    expect_max_empty_runs: Option<i32>,
    enabled: bool,
    respect_robots: bool,
    keep_session: bool,
    exclusive_session: bool,
    user_agent: Option<String>,
    proxy: Option<String>,
    secrets_nonce: Option<Vec<u8>>,
    secrets_sealed: Option<Vec<u8>>,
    unsealed_headers: Json<BTreeMap<String, String>>,
    unsealed_proxy: Option<String>,
    session_saved_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl SiteRow {
    /// The site as the rules accepted it when it was stored, its secrets
    /// opened with `key`.
    fn decode(self, key: Option<&SessionKey>) -> Result<Site, LoadError> {
        let stored_secrets = match (self.secrets_nonce, self.secrets_sealed) {
            (Some(nonce), Some(sealed)) => StoredSecrets::Sealed(Sealed { nonce, sealed }),
            _ => StoredSecrets::Unsealed(Secrets {
                headers: self.unsealed_headers.0,
                proxy: self.unsealed_proxy,
            }),
        };
        let secrets = stored_secrets
            .open(self.id, key)
            .map_err(|source| LoadError::Secrets {
                site_id: self.id,
                source,
            })?;
        let fields = self.fields.0;
        let extraction = match self.json {
            Some(Json(json)) => Extraction::Json {
                items: stored("json", json.items)?,
                fields,
                paging: match (json.next_token, json.token_param) {
                    (Some(next_token), Some(token_param)) => Some(TokenPaging {
                        next_token: stored("json", next_token)?,
                        token_param,
                    }),
                    _ => None,
                },
            },
            None => Extraction::Html {
                items: match (self.structured_items, self.item_selector) {
                    (Some(item_type), _) => {
                        HtmlItems::Structured(stored("structured_items", item_type)?)
                    }
                    (None, Some(selector)) => {
                        HtmlItems::Selector(stored("item_selector", selector)?)
                    }
                    (None, None) => {
                        return Err(column_error(
                            "item_selector",
                            std::io::Error::other("missing on a site that reads HTML"),
                        ));
                    }
                },
                fields,
                wait_for: self.wait_for.map(|s| stored("wait_for", s)).transpose()?,
                blocked_selector: self
                    .blocked_selector
                    .map(|s| stored("blocked_selector", s))
                    .transpose()?,
            },
        };
        // A proxy with credentials is sealed; one without is in the clear.
        let proxy = secrets
            .proxy
            .or(self.proxy)
            .map(|proxy| ProxyUrl::parse(&proxy))
            .transpose()
            .map_err(|e| column_error("proxy", e))?;
        let spec = SiteSpec {
            name: self.name,
            search_url: stored("search_url", self.search_url)?,
            render: stored("render", self.render)?,
            extraction,
            item_key: self.item_key,
            max_pages: self.max_pages,
            paging: self.paging.0,
            actions: self.actions.0,
            stuck_timeout_secs: self.stuck_timeout_secs,
            max_attempts: self.max_attempts,
            politeness: Politeness {
                max_requests_per_sec: self.max_requests_per_sec,
                max_concurrent_runs: self.max_concurrent_runs,
            },
            stop_on_seen: self.stop_on_seen,
            expect_items: self.expect_items,
            expect: Expectations {
                min_items: self.expect_min_items,
                required_fields: self.expect_required_fields,
                max_empty_runs: self.expect_max_empty_runs,
            },
            enabled: self.enabled,
            respect_robots: self.respect_robots,
            session: SessionPolicy {
                keep: self.keep_session,
                exclusive: self.exclusive_session,
            },
            identity: Identity {
                user_agent: self.user_agent,
                headers: secrets.headers,
                proxy,
            },
        };
        Ok(Site {
            id: self.id,
            spec,
            session_saved_at: self.session_saved_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// A value the rules accepted when it was stored, read back as its type the
/// way serde reads the JSONB columns: without checking the rules again.
fn stored<T: DeserializeOwned>(column: &str, value: String) -> Result<T, LoadError> {
    T::deserialize(IntoDeserializer::<serde::de::value::Error>::into_deserializer(value))
        .map_err(|e| column_error(column, e))
}

fn column_error(column: &str, error: impl std::error::Error + Send + Sync + 'static) -> LoadError {
    LoadError::Database(sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(error),
    })
}
