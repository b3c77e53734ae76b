use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::domain::keyword::KeywordSpec;

/// A stored keyword.
#[derive(Debug, Clone, PartialEq)]
pub struct Keyword {
    pub id: i64,
    pub keyword: String,
    pub site_ids: Vec<i64>,
    pub schedule: String,
    /// The IANA zone `schedule` is read in.
    pub timezone: String,
    pub jitter_secs: i32,
    pub enabled: bool,
    pub priority: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Why a keyword could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("unknown site ids: {0:?}")]
    UnknownSites(Vec<i64>),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// Creates a keyword and its site links in one transaction.
pub async fn create(pool: &PgPool, spec: &KeywordSpec) -> Result<Keyword, WriteError> {
    let mut tx = pool.begin().await?;
    let missing = super::sites::missing(&mut *tx, &spec.site_ids).await?;
    if !missing.is_empty() {
        return Err(WriteError::UnknownSites(missing));
    }
    let id = sqlx::query_scalar!(
        "INSERT INTO keywords (keyword, schedule, timezone, jitter_secs, enabled, priority)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        spec.keyword,
        spec.schedule.cron().as_str(),
        spec.schedule.zone().name(),
        spec.schedule.jitter().secs() as i32,
        spec.enabled,
        spec.priority
    )
    .fetch_one(&mut *tx)
    .await?;
    link_sites(&mut tx, id, &spec.site_ids).await?;
    let keyword = fetch(&mut *tx, id)
        .await?
        .expect("inserted in this transaction");
    tx.commit().await?;
    Ok(keyword)
}

/// Replaces a keyword and its site links in one transaction.
pub async fn update(
    pool: &PgPool,
    id: i64,
    spec: &KeywordSpec,
) -> Result<Option<Keyword>, WriteError> {
    let mut tx = pool.begin().await?;
    let found = sqlx::query_scalar!(
        "UPDATE keywords SET keyword = $2, schedule = $3, timezone = $4, jitter_secs = $5,
                enabled = $6, priority = $7, updated_at = now()
         WHERE id = $1 RETURNING id",
        id,
        spec.keyword,
        spec.schedule.cron().as_str(),
        spec.schedule.zone().name(),
        spec.schedule.jitter().secs() as i32,
        spec.enabled,
        spec.priority
    )
    .fetch_optional(&mut *tx)
    .await?;
    if found.is_none() {
        return Ok(None);
    }
    let missing = super::sites::missing(&mut *tx, &spec.site_ids).await?;
    if !missing.is_empty() {
        return Err(WriteError::UnknownSites(missing));
    }
    sqlx::query!("DELETE FROM keyword_sites WHERE keyword_id = $1", id)
        .execute(&mut *tx)
        .await?;
    link_sites(&mut tx, id, &spec.site_ids).await?;
    let keyword = fetch(&mut *tx, id).await?;
    tx.commit().await?;
    Ok(keyword)
}

async fn link_sites(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    keyword_id: i64,
    site_ids: &[i64],
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO keyword_sites (keyword_id, site_id) SELECT $1, UNNEST($2::bigint[])",
        keyword_id,
        site_ids
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn fetch(executor: impl sqlx::PgExecutor<'_>, id: i64) -> sqlx::Result<Option<Keyword>> {
    sqlx::query_as!(
        Keyword,
        r#"SELECT k.id, k.keyword, k.schedule, k.timezone, k.jitter_secs, k.enabled, k.priority, k.created_at, k.updated_at,
                  COALESCE(ARRAY(SELECT site_id FROM keyword_sites WHERE keyword_id = k.id ORDER BY site_id),
                           '{}') AS "site_ids!"
           FROM keywords k WHERE k.id = $1"#,
        id
    )
    .fetch_optional(executor)
    .await
}

pub async fn get(pool: &PgPool, id: i64) -> sqlx::Result<Option<Keyword>> {
    fetch(pool, id).await
}

pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<Keyword>> {
    sqlx::query_as!(
        Keyword,
        r#"SELECT k.id, k.keyword, k.schedule, k.timezone, k.jitter_secs, k.enabled, k.priority, k.created_at, k.updated_at,
                  COALESCE(ARRAY(SELECT site_id FROM keyword_sites WHERE keyword_id = k.id ORDER BY site_id),
                           '{}') AS "site_ids!"
           FROM keywords k ORDER BY k.id"#
    )
    .fetch_all(pool)
    .await
}

/// Deletes a keyword with its runs and results; `false` when there was none.
/// A worker still crawling one of its runs is fenced out by its next write.
pub async fn delete(pool: &PgPool, id: i64) -> sqlx::Result<bool> {
    let deleted = sqlx::query!("DELETE FROM keywords WHERE id = $1", id)
        .execute(pool)
        .await?;
    Ok(deleted.rows_affected() > 0)
}

/// What the scheduler needs to plan a keyword's (or a URL list's) fires; a
/// change of any field (`updated_at` included) replans it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleEntry {
    pub id: i64,
    pub schedule: String,
    pub timezone: String,
    pub jitter_secs: i32,
    pub updated_at: DateTime<Utc>,
}

/// Enables or disables keyword `id` (its schedule is read again, as after
/// any change); whether there is such a keyword.
pub async fn set_enabled(pool: &PgPool, id: i64, enabled: bool) -> sqlx::Result<bool> {
    let done = sqlx::query("UPDATE keywords SET enabled = $2, updated_at = now() WHERE id = $1")
        .bind(id)
        .bind(enabled)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Schedules of enabled keywords.
pub async fn enabled_schedules(pool: &PgPool) -> sqlx::Result<Vec<ScheduleEntry>> {
    sqlx::query_as!(
        ScheduleEntry,
        "SELECT id, schedule, timezone, jitter_secs, updated_at FROM keywords WHERE enabled ORDER BY id"
    )
    .fetch_all(pool)
    .await
}

/// A keyword's schedule, enabled or not; `None` when there is no such keyword.
pub async fn schedule_of(pool: &PgPool, id: i64) -> sqlx::Result<Option<ScheduleEntry>> {
    sqlx::query_as!(
        ScheduleEntry,
        "SELECT id, schedule, timezone, jitter_secs, updated_at FROM keywords WHERE id = $1",
        id
    )
    .fetch_optional(pool)
    .await
}
