//! A site's versions: the spec's columns as they were after each change
//! (`SiteRow::snapshot_of`), recorded in the transaction that made the
//! change, so no change goes unrecorded and no version names a change that
//! did not happen. A write that changes nothing makes no version. Header
//! names and the proxy are not versioned: they are the site's identity,
//! sealed apart, and a restored version keeps today's. A proxy pool's
//! changes are recorded (masked, so the versions show them), but a version
//! reads with today's pool: its members' credentials are today's.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgPool, Postgres, Transaction};

use super::{LoadError, StoredSite, row::SiteRow};
use crate::{
    domain::site::{Site, VersionReason},
    store::sealing::SessionKey,
};

/// What a change is recorded with.
#[derive(Debug, Clone)]
pub struct Revision {
    pub reason: VersionReason,
    /// For a restore: the version brought back.
    pub restored_from: Option<i32>,
    /// Who made it (a prefix of the token's digest), if known.
    pub changed_by: Option<String>,
}

impl Revision {
    pub fn new(reason: VersionReason, changed_by: Option<String>) -> Self {
        Revision {
            reason,
            restored_from: None,
            changed_by,
        }
    }
}

/// One version of a site, as listed.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Version {
    pub version: i32,
    pub reason: VersionReason,
    pub restored_from: Option<i32>,
    pub changed_by: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The spec's columns as they were.
    pub snapshot: Value,
}

/// Before site `id` is changed: if it has no version yet (stored before
/// versions were kept), its state now becomes version 1, `recorded`.
pub(super) async fn record_unversioned(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
) -> sqlx::Result<()> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH recorded AS (
                 INSERT INTO site_versions (site_id, version, reason, snapshot)
                 SELECT s.id, 1, $2, {} FROM sites s
                 WHERE s.id = $1 AND NOT EXISTS (SELECT 1 FROM site_versions WHERE site_id = $1)
                 RETURNING version)
             UPDATE sites SET version = recorded.version FROM recorded WHERE sites.id = $1",
            SiteRow::snapshot_of("s")
        )
    });
    sqlx::query(&SQL)
        .bind(id)
        .bind(VersionReason::Recorded)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// After site `id` was written: its state becomes the next version, unless
/// it is the same as the latest. Returns the version the site is at.
pub(super) async fn record(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
    revision: &Revision,
) -> sqlx::Result<i32> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH current AS (SELECT {} AS snapshot FROM sites s WHERE s.id = $1),
                  latest AS (SELECT version, snapshot FROM site_versions
                             WHERE site_id = $1 ORDER BY version DESC LIMIT 1),
                  made AS (
                      INSERT INTO site_versions (site_id, version, reason, restored_from, changed_by, snapshot)
                      SELECT $1, COALESCE((SELECT version FROM latest), 0) + 1, $2, $3, $4, current.snapshot
                      FROM current
                      WHERE current.snapshot IS DISTINCT FROM (SELECT snapshot FROM latest)
                      RETURNING version)
             UPDATE sites SET version = COALESCE((SELECT version FROM made), sites.version)
             WHERE id = $1
             RETURNING version",
            SiteRow::snapshot_of("s")
        )
    });
    sqlx::query_scalar(&SQL)
        .bind(id)
        .bind(revision.reason)
        .bind(revision.restored_from)
        .bind(revision.changed_by.as_deref())
        .fetch_one(&mut **tx)
        .await
}

/// Site `id`'s versions, newest first, at most `limit`, older than `before`
/// when given.
pub async fn list(
    pool: &PgPool,
    id: i64,
    before: Option<i32>,
    limit: i64,
) -> sqlx::Result<Vec<Version>> {
    sqlx::query_as(
        "SELECT version, reason, restored_from, changed_by, created_at, snapshot
         FROM site_versions
         WHERE site_id = $1 AND ($2::integer IS NULL OR version < $2)
         ORDER BY version DESC
         LIMIT $3",
    )
    .bind(id)
    .bind(before)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// Version `version` of site `id`, and the site as that version reads it
/// (today's secrets opened with `key`, and today's header names and proxy;
/// a column the version did not know keeps today's value).
pub async fn get(
    pool: &PgPool,
    id: i64,
    version: i32,
    key: Option<&SessionKey>,
) -> Result<Option<(Version, Site)>, LoadError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            // `version` is read by both the version and the site it reads as.
            "SELECT v.version, v.reason, v.restored_from, v.changed_by, v.created_at AS version_created_at,
                    v.snapshot, s.id, {}, s.secrets_nonce, s.secrets_sealed, s.unsealed_headers,
                    s.unsealed_proxy, ss.saved_at AS session_saved_at, s.created_at, v.created_at AS updated_at
             FROM site_versions v
             JOIN sites s ON s.id = v.site_id
             LEFT JOIN site_sessions ss ON ss.site_id = s.id
             CROSS JOIN LATERAL jsonb_populate_record(NULL::sites, v.snapshot) r
             WHERE v.site_id = $1 AND v.version = $2",
            SiteRow::versioned_select_list("r", "s", "v.snapshot")
        )
    });
    let row: Option<VersionedSite> = sqlx::query_as(&SQL)
        .bind(id)
        .bind(version)
        .fetch_optional(pool)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let site = row.site.decode(key)?;
    Ok(Some((
        Version {
            version: row.version,
            reason: row.reason,
            restored_from: row.restored_from,
            changed_by: row.changed_by,
            created_at: row.version_created_at,
            snapshot: row.snapshot,
        },
        site,
    )))
}

#[derive(sqlx::FromRow)]
struct VersionedSite {
    version: i32,
    reason: VersionReason,
    restored_from: Option<i32>,
    changed_by: Option<String>,
    version_created_at: DateTime<Utc>,
    snapshot: Value,
    #[sqlx(flatten)]
    site: StoredSite,
}
