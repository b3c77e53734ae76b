//! URL lists and their URLs. A list's URLs are replaced or extended in one
//! transaction each, so a reader sees the list before an upload or after it,
//! never half of it; a URL kept across a replacement keeps `last_read_at`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::{domain::url_list::UrlListSpec, store::keywords::ScheduleEntry};

/// A stored URL list, with how far its current period has got.
#[derive(Debug, Clone, PartialEq)]
pub struct UrlList {
    pub id: i64,
    pub site_id: i64,
    pub name: String,
    pub schedule: String,
    pub timezone: String,
    pub jitter_secs: i32,
    pub enabled: bool,
    /// The nominal time of the latest fire: the start of the current period.
    pub last_fired_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// URLs in the list.
    pub urls: i64,
    /// When the current period began: the latest of the latest fire and
    /// the latest run's period (a manual crawl starts one).
    pub period_started_at: Option<DateTime<Utc>>,
    /// URLs read since the period began.
    pub read_in_period: i64,
    /// URLs whose page could not be read in the period.
    pub failed_in_period: i64,
    /// The list's run still active, if any.
    pub active_run_id: Option<i64>,
}

/// Why a URL list could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("site {0} does not exist")]
    UnknownSite(i64),
    #[error("the site already has a list named {0:?}")]
    NameTaken(String),
    #[error(transparent)]
    Database(sqlx::Error),
}

impl From<sqlx::Error> for WriteError {
    fn from(e: sqlx::Error) -> Self {
        match e.as_database_error().and_then(|d| d.constraint()) {
            Some("url_lists_name_unique") => WriteError::NameTaken(String::new()),
            _ => WriteError::Database(e),
        }
    }
}

/// The error of a write, naming the list's name when it is taken.
fn named(e: WriteError, spec: &UrlListSpec) -> WriteError {
    match e {
        WriteError::NameTaken(_) => WriteError::NameTaken(spec.name.clone()),
        e => e,
    }
}

/// Stores a new list.
pub async fn create(pool: &PgPool, spec: &UrlListSpec) -> Result<UrlList, WriteError> {
    write(pool, None, spec)
        .await
        .map(|list| list.expect("a new list is always written"))
}

/// Replaces a list's settings (its URLs stay); `None` when there is no such list.
pub async fn update(
    pool: &PgPool,
    id: i64,
    spec: &UrlListSpec,
) -> Result<Option<UrlList>, WriteError> {
    write(pool, Some(id), spec).await
}

/// Inserts a list (`id` None) or updates list `id` with `spec`'s settings,
/// in one statement whose columns are written once; `None` when list `id`
/// does not exist.
async fn write(
    pool: &PgPool,
    id: Option<i64>,
    spec: &UrlListSpec,
) -> Result<Option<UrlList>, WriteError> {
    let mut tx = pool.begin().await?;
    if !super::sites::missing(&mut *tx, &[spec.site_id])
        .await?
        .is_empty()
    {
        return Err(WriteError::UnknownSite(spec.site_id));
    }
    let written = sqlx::query_scalar!(
        r#"WITH changed AS (
               UPDATE url_lists SET site_id = $2, name = $3, schedule = $4, timezone = $5,
                      jitter_secs = $6, enabled = $7, updated_at = now()
               WHERE id = $1 RETURNING id),
           created AS (
               INSERT INTO url_lists (site_id, name, schedule, timezone, jitter_secs, enabled)
               SELECT $2, $3, $4, $5, $6, $7 WHERE $1::bigint IS NULL RETURNING id)
           SELECT id AS "id!" FROM changed UNION ALL SELECT id FROM created"#,
        id,
        spec.site_id,
        spec.name,
        spec.schedule.cron().as_str(),
        spec.schedule.zone().name(),
        spec.schedule.jitter().secs() as i32,
        spec.enabled
    )
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| named(e.into(), spec))?;
    let Some(id) = written else {
        return Ok(None);
    };
    let list = fetch(&mut *tx, id).await?;
    tx.commit().await?;
    Ok(list)
}

async fn fetch(executor: impl sqlx::PgExecutor<'_>, id: i64) -> sqlx::Result<Option<UrlList>> {
    Ok(select(executor, Some(id), None).await?.pop())
}

/// The lists of this id, or of this site, or all, in id order, each with its counts.
async fn select(
    executor: impl sqlx::PgExecutor<'_>,
    id: Option<i64>,
    site_id: Option<i64>,
) -> sqlx::Result<Vec<UrlList>> {
    sqlx::query_as!(
        UrlList,
        r#"SELECT l.id, l.site_id, l.name, l.schedule, l.timezone, l.jitter_secs, l.enabled,
                  l.last_fired_at, l.created_at, l.updated_at, p.started AS period_started_at,
                  (SELECT count(*) FROM url_list_entries e WHERE e.list_id = l.id) AS "urls!",
                  (SELECT count(*) FROM url_list_entries e
                    WHERE e.list_id = l.id AND e.last_read_at >= p.started) AS "read_in_period!",
                  (SELECT count(*) FROM url_list_entries e
                    WHERE e.list_id = l.id AND e.failed_at >= p.started) AS "failed_in_period!",
                  (SELECT r.id FROM crawl_runs r
                    WHERE r.url_list_id = l.id AND r.state IN ('queued', 'running', 'url_call', 'call_done'))
                    AS active_run_id
           FROM url_lists l
           CROSS JOIN LATERAL (
               SELECT GREATEST(l.last_fired_at,
                               (SELECT max(r.period_start) FROM crawl_runs r WHERE r.url_list_id = l.id))
                      AS started
           ) AS p
           WHERE ($1::bigint IS NULL OR l.id = $1) AND ($2::bigint IS NULL OR l.site_id = $2)
           ORDER BY l.id"#,
        id,
        site_id
    )
    .fetch_all(executor)
    .await
}

pub async fn get(pool: &PgPool, id: i64) -> sqlx::Result<Option<UrlList>> {
    fetch(pool, id).await
}

/// Whether list `id` exists (without counting its URLs, as `get` does).
pub async fn exists(pool: &PgPool, id: i64) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM url_lists WHERE id = $1) AS "exists!""#,
        id
    )
    .fetch_one(pool)
    .await
}

/// Every list, or a site's only.
pub async fn list(pool: &PgPool, site_id: Option<i64>) -> sqlx::Result<Vec<UrlList>> {
    select(pool, None, site_id).await
}

/// Schedules of enabled lists, as the cron loop plans them.
pub async fn enabled_schedules(pool: &PgPool) -> sqlx::Result<Vec<ScheduleEntry>> {
    sqlx::query_as!(
        ScheduleEntry,
        "SELECT id, schedule, timezone, jitter_secs, updated_at FROM url_lists WHERE enabled ORDER BY id"
    )
    .fetch_all(pool)
    .await
}

/// A list's schedule, enabled or not; `None` when there is no such list.
pub async fn schedule_of(pool: &PgPool, id: i64) -> sqlx::Result<Option<ScheduleEntry>> {
    sqlx::query_as!(
        ScheduleEntry,
        "SELECT id, schedule, timezone, jitter_secs, updated_at FROM url_lists WHERE id = $1",
        id
    )
    .fetch_optional(pool)
    .await
}

/// Deletes a list with its URLs; `false` when there was none.
pub async fn delete(pool: &PgPool, id: i64) -> sqlx::Result<bool> {
    let deleted = sqlx::query!("DELETE FROM url_lists WHERE id = $1", id)
        .execute(pool)
        .await?;
    Ok(deleted.rows_affected() > 0)
}

/// What an upload did to a list's URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// URLs the list did not have.
    pub added: i64,
    /// URLs it had already (they keep when they were last read).
    pub kept: i64,
    /// URLs a replacement left out.
    pub removed: i64,
    /// URLs in the list now.
    pub total: i64,
}

/// Whether an upload replaces a list's URLs or adds to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadMode {
    Replace,
    Append,
}

/// Writes an upload's URLs (`lines[i]` is where `urls[i]` stood in it) in one
/// transaction; `None` when there is no such list. Concurrent uploads to one
/// list take turns (the list's row is locked).
pub async fn write_urls(
    pool: &PgPool,
    list_id: i64,
    mode: UploadMode,
    urls: &[String],
    lines: &[i32],
) -> sqlx::Result<Option<Written>> {
    let mut tx = pool.begin().await?;
    let locked = sqlx::query_scalar!("SELECT id FROM url_lists WHERE id = $1 FOR UPDATE", list_id)
        .fetch_optional(&mut *tx)
        .await?;
    if locked.is_none() {
        return Ok(None);
    }
    let removed = match mode {
        UploadMode::Replace => sqlx::query!(
            "DELETE FROM url_list_entries e WHERE e.list_id = $1
               AND NOT EXISTS (SELECT 1 FROM UNNEST($2::text[]) AS new(url) WHERE new.url = e.url)",
            list_id,
            urls
        )
        .execute(&mut *tx)
        .await?
        .rows_affected() as i64,
        UploadMode::Append => 0,
    };
    // Appended lines come after the list's last one.
    let offset = match mode {
        UploadMode::Replace => 0,
        UploadMode::Append => sqlx::query_scalar!(
            r#"SELECT COALESCE(max(line), 0) AS "line!" FROM url_list_entries WHERE list_id = $1"#,
            list_id
        )
        .fetch_one(&mut *tx)
        .await?,
    };
    let added = sqlx::query_scalar!(
        r#"WITH written AS (
               INSERT INTO url_list_entries (list_id, url, line)
               SELECT $1, new.url, new.line + $4 FROM UNNEST($2::text[], $3::int[]) AS new(url, line)
               ON CONFLICT (list_id, url) DO UPDATE
                   SET line = CASE WHEN $5 THEN EXCLUDED.line ELSE url_list_entries.line END
               RETURNING (xmax = 0) AS inserted)
           SELECT count(*) FILTER (WHERE inserted) AS "added!" FROM written"#,
        list_id,
        urls,
        lines,
        offset,
        mode == UploadMode::Replace
    )
    .fetch_one(&mut *tx)
    .await?;
    let total = sqlx::query_scalar!(
        r#"SELECT count(*) AS "total!" FROM url_list_entries WHERE list_id = $1"#,
        list_id
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE url_lists SET updated_at = now() WHERE id = $1",
        list_id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(Written {
        added,
        kept: urls.len() as i64 - added,
        removed,
        total,
    }))
}

/// One URL of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub url: String,
    pub line: i32,
    pub added_at: DateTime<Utc>,
    pub last_read_at: Option<DateTime<Utc>>,
    /// When a run last could not read its page, and why (cleared when one does).
    pub failed_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// A list's URLs in their order, from the line after `after_line`.
pub async fn entries(
    pool: &PgPool,
    list_id: i64,
    after_line: i32,
    limit: i64,
) -> sqlx::Result<Vec<Entry>> {
    sqlx::query_as!(
        Entry,
        "SELECT url, line, added_at, last_read_at, failed_at, last_error FROM url_list_entries
         WHERE list_id = $1 AND line > $2 ORDER BY line LIMIT $3",
        list_id,
        after_line,
        limit
    )
    .fetch_all(pool)
    .await
}
