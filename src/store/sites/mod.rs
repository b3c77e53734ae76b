//! Sites in Postgres; their secrets sealed (see `secrets`). A site is read
//! back as the domain's [`Site`]: the spec it passed the rules with, decoded
//! from its columns once (no rule is checked again), its secrets opened.

mod health;
mod row;
mod secrets;
pub mod versions;

use std::{collections::BTreeMap, sync::LazyLock};

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgPool, Postgres, Transaction, types::Json};

use crate::{
    domain::{
        run::RunState,
        site::{Site, SiteSpec},
    },
    store::sealing::{Sealed, SessionKey},
};
pub use health::{RECENT_RUNS, RunItems, STREAK_RUNS, SiteHealth, Window, health, health_of_all};
use row::SiteRow;
pub(crate) use secrets::secrets_bound_to;
use secrets::{Secrets, StoredSecrets, write_secrets};
pub use secrets::{SecretsError, count_unsealed, seal_unsealed};
pub use versions::Revision;

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

/// Stores a new site, its secrets sealed with `key` (the api refuses a site
/// with secrets when it has no key), as its version 1.
pub async fn create(
    pool: &PgPool,
    spec: &SiteSpec,
    key: Option<&SessionKey>,
    revision: &Revision,
) -> sqlx::Result<Site> {
    let mut tx = pool.begin().await?;
    let row = SiteRow::of(spec)
        .insert()
        .try_map(|row| Written::from_row(&row))
        .fetch_one(&mut *tx)
        .await?;
    write_secrets(&mut tx, row.id, &spec.identity, key).await?;
    let version = versions::record(&mut tx, row.id, revision).await?;
    tx.commit().await?;
    Ok(Site {
        id: row.id,
        spec: spec.clone(),
        version,
        session_saved_at: None,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

/// Replaces a site, its secrets sealed anew with `key`, as its next version
/// (none when nothing changed); `None` when there is no such site.
pub async fn update(
    pool: &PgPool,
    id: i64,
    spec: &SiteSpec,
    key: Option<&SessionKey>,
    revision: &Revision,
) -> sqlx::Result<Option<Site>> {
    let mut tx = pool.begin().await?;
    let site = update_in(&mut tx, id, spec, key, revision).await?;
    if site.is_some() {
        tx.commit().await?;
    }
    Ok(site)
}

/// [`update`] inside the caller's transaction.
pub async fn update_in(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
    spec: &SiteSpec,
    key: Option<&SessionKey>,
    revision: &Revision,
) -> sqlx::Result<Option<Site>> {
    versions::record_unversioned(tx, id).await?;
    let updated = SiteRow::of(spec)
        .update(id)
        .try_map(|row| Written::from_row(&row))
        .fetch_optional(&mut **tx)
        .await?;
    let Some(row) = updated else {
        return Ok(None);
    };
    write_secrets(tx, id, &spec.identity, key).await?;
    let version = versions::record(tx, id, revision).await?;
    Ok(Some(Site {
        id: row.id,
        spec: spec.clone(),
        version,
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
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT s.id, {}, s.version, s.secrets_nonce, s.secrets_sealed, s.unsealed_headers,
                    s.unsealed_proxy, ss.saved_at AS session_saved_at, s.created_at, s.updated_at
             FROM sites s LEFT JOIN site_sessions ss ON ss.site_id = s.id
             WHERE ($1::bigint IS NULL OR s.id = $1)
             ORDER BY s.id",
            SiteRow::select_list("s")
        )
    });
    let rows: Vec<StoredSite> = sqlx::query_as(&SQL).bind(id).fetch_all(pool).await?;
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
           WHERE site_id = $1 AND state = ANY($2)"#,
        id,
        &RunState::ACTIVE as &[RunState]
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

/// What an INSERT or UPDATE of a site returns.
#[derive(sqlx::FromRow)]
struct Written {
    id: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    /// Only an UPDATE reads it (a new site has kept no session).
    #[sqlx(default)]
    session_saved_at: Option<DateTime<Utc>>,
}

/// A stored site as the SELECT reads it: its row, its secrets as stored,
/// and its bookkeeping.
#[derive(sqlx::FromRow)]
struct StoredSite {
    id: i64,
    #[sqlx(flatten)]
    row: SiteRow,
    version: i32,
    secrets_nonce: Option<Vec<u8>>,
    secrets_sealed: Option<Vec<u8>>,
    unsealed_headers: Json<BTreeMap<String, String>>,
    unsealed_proxy: Option<String>,
    session_saved_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl StoredSite {
    /// The site as the rules accepted it when it was stored, its secrets
    /// opened with `key`.
    fn decode(self, key: Option<&SessionKey>) -> Result<Site, LoadError> {
        let stored_secrets = match (self.secrets_nonce, self.secrets_sealed) {
            (Some(nonce), Some(sealed)) => StoredSecrets::Sealed(Sealed { nonce, sealed }),
            _ => StoredSecrets::Unsealed(Secrets {
                headers: self.unsealed_headers.0,
                proxy: self.unsealed_proxy,
                pool: Vec::new(),
            }),
        };
        let secrets = stored_secrets
            .open(self.id, key)
            .map_err(|source| LoadError::Secrets {
                site_id: self.id,
                source,
            })?;
        Ok(Site {
            id: self.id,
            spec: self.row.spec(secrets)?,
            version: self.version,
            session_saved_at: self.session_saved_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}
