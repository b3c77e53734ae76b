//! Results: the items runs extracted, each with what its item was to its
//! run (change tracking), listed a page at a time; and the queries behind
//! incremental crawls.

use chrono::{DateTime, Utc};
use sqlx::{PgPool, types::Json};

use super::runs::row::decode_optional;
use crate::domain::change::{Change, FieldDiff};

/// One extracted item, with when its keyword/site first and last saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct CrawlResult {
    pub id: i64,
    pub run_id: i64,
    pub keyword_id: i64,
    pub site_id: i64,
    pub page: i32,
    pub position: i32,
    pub page_url: String,
    pub item_url: Option<String>,
    pub fields: serde_json::Value,
    pub content_hash: String,
    pub fetched_at: DateTime<Utc>,
    /// When any run of this keyword/site first saw the item.
    pub first_seen_at: DateTime<Utc>,
    /// When a run last saw it.
    pub last_seen_at: DateTime<Utc>,
    /// Its item (`None` on results stored before change tracking).
    pub item_id: Option<i64>,
    /// What the item was to the run (`None` before change tracking).
    pub change: Option<Change>,
    /// Changed: the fields that changed, old and new.
    pub diff: Option<FieldDiff>,
}

/// Filters of a result listing; `after` is the cursor (results are listed in
/// the order they were stored).
#[derive(Debug, Default, Clone)]
pub struct ResultFilter {
    pub keyword_id: Option<i64>,
    pub site_id: Option<i64>,
    pub run_id: Option<i64>,
    /// Full-text search over the string values of the fields (whole words,
    /// web-search syntax: `"a phrase"`, `or`, `-word`).
    pub text: Option<String>,
    /// Items first seen (by their keyword/site) at or after this time.
    pub first_seen_after: Option<DateTime<Utc>>,
    /// Items first seen before this time.
    pub first_seen_before: Option<DateTime<Utc>>,
    /// Results whose item was new or changed to their run; or, `Removed`,
    /// the items the runs found gone, as last seen (listed in the order they
    /// were removed, `id` and the cursor being the removal's).
    pub change: Option<Change>,
    pub after: Option<i64>,
    pub limit: i64,
}

/// A result row as sqlx reads it.
struct ResultRow {
    id: i64,
    run_id: i64,
    keyword_id: i64,
    site_id: i64,
    page: i32,
    position: i32,
    page_url: String,
    item_url: Option<String>,
    fields: serde_json::Value,
    content_hash: String,
    fetched_at: DateTime<Utc>,
    first_seen_at: DateTime<Utc>,
    last_seen_at: DateTime<Utc>,
    item_id: Option<i64>,
    change: Option<String>,
    diff: Option<Json<FieldDiff>>,
}

impl TryFrom<ResultRow> for CrawlResult {
    type Error = sqlx::Error;

    fn try_from(row: ResultRow) -> sqlx::Result<CrawlResult> {
        Ok(CrawlResult {
            id: row.id,
            run_id: row.run_id,
            keyword_id: row.keyword_id,
            site_id: row.site_id,
            page: row.page,
            position: row.position,
            page_url: row.page_url,
            item_url: row.item_url,
            fields: row.fields,
            content_hash: row.content_hash,
            fetched_at: row.fetched_at,
            first_seen_at: row.first_seen_at,
            last_seen_at: row.last_seen_at,
            item_id: row.item_id,
            change: decode_optional("change", row.change.as_deref())?,
            diff: row.diff.map(|Json(diff)| diff),
        })
    }
}

pub async fn list(pool: &PgPool, filter: &ResultFilter) -> sqlx::Result<Vec<CrawlResult>> {
    let rows = match filter.change {
        Some(Change::Removed) => list_removed(pool, filter).await?,
        change => list_stored(pool, filter, change.map(Change::as_str)).await?,
    };
    rows.into_iter().map(CrawlResult::try_from).collect()
}

/// Stored results, of any change or of one.
async fn list_stored(
    pool: &PgPool,
    filter: &ResultFilter,
    change: Option<&str>,
) -> sqlx::Result<Vec<ResultRow>> {
    sqlx::query_as!(
        ResultRow,
        r#"SELECT r.id, r.run_id, r.keyword_id, r.site_id, r.page, r.position, r.page_url, r.item_url,
                  r.fields, r.content_hash, r.fetched_at,
                  COALESCE(i.first_seen_at, r.fetched_at) AS "first_seen_at!",
                  COALESCE(i.last_seen_at, r.fetched_at) AS "last_seen_at!",
                  r.item_id, r.change, r.diff AS "diff: Json<FieldDiff>"
           FROM crawl_results r
           LEFT JOIN items i
             ON i.keyword_id = r.keyword_id AND i.site_id = r.site_id AND i.item_key = r.item_key
           WHERE ($1::bigint IS NULL OR r.keyword_id = $1)
             AND ($2::bigint IS NULL OR r.site_id = $2)
             AND ($3::bigint IS NULL OR r.run_id = $3)
             AND ($4::bigint IS NULL OR r.id > $4)
             -- The expression of the crawl_results_fields_text index.
             AND ($6::text IS NULL
                  OR jsonb_to_tsvector('simple', r.fields, '["string"]') @@ websearch_to_tsquery('simple', $6))
             AND ($7::timestamptz IS NULL OR COALESCE(i.first_seen_at, r.fetched_at) >= $7)
             AND ($8::timestamptz IS NULL OR COALESCE(i.first_seen_at, r.fetched_at) < $8)
             AND ($9::text IS NULL OR r.change = $9)
           ORDER BY r.id
           LIMIT $5"#,
        filter.keyword_id,
        filter.site_id,
        filter.run_id,
        filter.after,
        filter.limit,
        filter.text,
        filter.first_seen_after,
        filter.first_seen_before,
        change,
    )
    .fetch_all(pool)
    .await
}

/// The items runs found gone, each as it was last seen: its page, position
/// and fields then, `fetched_at` its last sighting; `run_id` is the run that
/// found it gone.
async fn list_removed(pool: &PgPool, filter: &ResultFilter) -> sqlx::Result<Vec<ResultRow>> {
    sqlx::query_as!(
        ResultRow,
        r#"SELECT m.id, m.run_id, m.keyword_id, m.site_id, m.page, m.position, m.page_url, m.item_url,
                  m.fields, m.content_hash, m.last_seen_at AS fetched_at, m.first_seen_at, m.last_seen_at,
                  m.item_id AS "item_id?", 'removed' AS "change?", NULL::jsonb AS "diff: Json<FieldDiff>"
           FROM item_removals m
           WHERE ($1::bigint IS NULL OR m.keyword_id = $1)
             AND ($2::bigint IS NULL OR m.site_id = $2)
             AND ($3::bigint IS NULL OR m.run_id = $3)
             AND ($4::bigint IS NULL OR m.id > $4)
             AND ($6::text IS NULL
                  OR jsonb_to_tsvector('simple', m.fields, '["string"]') @@ websearch_to_tsquery('simple', $6))
             AND ($7::timestamptz IS NULL OR m.first_seen_at >= $7)
             AND ($8::timestamptz IS NULL OR m.first_seen_at < $8)
           ORDER BY m.id
           LIMIT $5"#,
        filter.keyword_id,
        filter.site_id,
        filter.run_id,
        filter.after,
        filter.limit,
        filter.text,
        filter.first_seen_after,
        filter.first_seen_before,
    )
    .fetch_all(pool)
    .await
}

/// Which of `item_keys` an earlier run that completed stored for this
/// keyword/site: an incremental crawl does not store them again.
pub async fn stored_by_completed_runs(
    pool: &PgPool,
    keyword_id: i64,
    site_id: i64,
    this_run: i64,
    item_keys: &[String],
) -> sqlx::Result<Vec<String>> {
    if item_keys.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar!(
        r#"SELECT DISTINCT page.item_key AS "item_key!"
           FROM UNNEST($4::text[]) AS page(item_key)
           WHERE EXISTS (
               SELECT 1 FROM crawl_results r JOIN crawl_runs c ON c.id = r.run_id
               WHERE r.keyword_id = $1 AND r.site_id = $2 AND r.item_key = page.item_key
                 AND r.run_id <> $3 AND c.state = 'completed')"#,
        keyword_id,
        site_id,
        this_run,
        item_keys
    )
    .fetch_all(pool)
    .await
}

/// The newest item earlier completed runs stored for this keyword/site: the
/// first result of the last of them that stored any. In a newest-first feed,
/// everything after it was stored before.
pub async fn newest_stored_by_completed_run(
    pool: &PgPool,
    keyword_id: i64,
    site_id: i64,
    this_run: i64,
) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!(
        r#"SELECT r.item_key FROM crawl_results r
           WHERE r.run_id = (
               SELECT c.id FROM crawl_runs c
               WHERE c.keyword_id = $1 AND c.site_id = $2 AND c.id <> $3 AND c.state = 'completed'
                 AND EXISTS (SELECT 1 FROM crawl_results x WHERE x.run_id = c.id)
               ORDER BY c.finished_at DESC, c.id DESC
               LIMIT 1)
           ORDER BY r.page, r.position
           LIMIT 1"#,
        keyword_id,
        site_id,
        this_run
    )
    .fetch_optional(pool)
    .await
}

/// Forgets items no run has seen for `older_than`, with their history
/// (retention); returns how many. The sightings recorded before items were
/// (`seen_items`, no longer written) age out by the same rule.
pub async fn forget_unseen_for(
    pool: &PgPool,
    older_than: std::time::Duration,
) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        r#"WITH before_items AS (
               DELETE FROM seen_items WHERE last_seen_at < now() - make_interval(secs => $1)
           )
           DELETE FROM items WHERE last_seen_at < now() - make_interval(secs => $1)"#,
        older_than.as_secs_f64()
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
