//! Results: the items runs extracted, each with what its item was to its
//! run (change tracking), listed a page at a time; and the queries behind
//! incremental crawls.

use chrono::{DateTime, Utc};
use sqlx::{PgPool, types::Json};

use std::collections::BTreeMap;

use super::{columns::decode_optional, listing::Listing};
use crate::domain::{
    change::{Change, FieldDiff},
    run::RunState,
    site::{FieldSpec, item_field_names},
};

/// One extracted item, with when its keyword/site first and last saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct CrawlResult {
    pub id: i64,
    pub run_id: i64,
    /// The keyword whose run found it (`None`: a URL list's run).
    pub keyword_id: Option<i64>,
    /// The URL list whose run read it (`None`: a keyword's run).
    pub url_list_id: Option<i64>,
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
    pub url_list_id: Option<i64>,
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

/// A result row as sqlx reads it, column by column, by name.
#[derive(sqlx::FromRow)]
struct ResultRow {
    id: i64,
    run_id: i64,
    keyword_id: Option<i64>,
    url_list_id: Option<i64>,
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
            url_list_id: row.url_list_id,
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

/// Results (or removals) in the order they were stored, a page of them; an
/// error when `filter.limit` is not 1 to `listing::MAX_LIMIT`. The query
/// holds only the filters given (see `store::listing`).
pub async fn list(pool: &PgPool, filter: &ResultFilter) -> sqlx::Result<Vec<CrawlResult>> {
    let rows = match filter.change {
        Some(Change::Removed) => list_removed(pool, filter).await?,
        change => list_stored(pool, filter, change).await?,
    };
    rows.into_iter().map(CrawlResult::try_from).collect()
}

/// Stored results, of any change or of one.
async fn list_stored(
    pool: &PgPool,
    filter: &ResultFilter,
    change: Option<Change>,
) -> sqlx::Result<Vec<ResultRow>> {
    let mut listing = Listing::new(
        r#"SELECT r.id, r.run_id, r.keyword_id, r.url_list_id, r.site_id, r.page, r.position, r.page_url,
                  r.item_url, r.fields, r.content_hash, r.fetched_at,
                  COALESCE(i.first_seen_at, li.first_seen_at, r.fetched_at) AS first_seen_at,
                  COALESCE(i.last_seen_at, li.last_seen_at, r.fetched_at) AS last_seen_at,
                  r.item_id, r.change, r.diff
           FROM crawl_results r
           LEFT JOIN items i
             ON i.keyword_id = r.keyword_id AND i.site_id = r.site_id AND i.item_key = r.item_key
           LEFT JOIN items li
             ON li.url_list_id = r.url_list_id AND li.site_id = r.site_id AND li.item_key = r.item_key"#,
    );
    filter_rows(
        &mut listing,
        filter,
        "r",
        "COALESCE(i.first_seen_at, li.first_seen_at, r.fetched_at)",
    );
    listing.filter("r.url_list_id = ", filter.url_list_id, "");
    if let Some(change) = change {
        // New or changed: beside the bound value, the predicate of the
        // partial crawl_results_changes index, without which the plan cached
        // for a bound value cannot use that index.
        let condition = match change {
            Change::New | Change::Changed => "r.change IN ('new', 'changed') AND r.change = ",
            _ => "r.change = ",
        };
        listing.filter(condition, Some(change.as_str()), "");
    }
    listing
        .page("r.id", filter.limit)?
        .build_query_as()
        .fetch_all(pool)
        .await
}

/// The filters stored results and removals share, on the rows of `table`
/// (its alias in the query), first seen at `first_seen` (an expression).
fn filter_rows<'a>(
    listing: &mut Listing<'a>,
    filter: &'a ResultFilter,
    table: &str,
    first_seen: &str,
) {
    listing
        .filter(&format!("{table}.keyword_id = "), filter.keyword_id, "")
        .filter(&format!("{table}.site_id = "), filter.site_id, "")
        .filter(&format!("{table}.run_id = "), filter.run_id, "")
        .filter(&format!("{table}.id > "), filter.after, "")
        // On crawl_results, the expression of its crawl_results_fields_text index.
        .filter(
            &format!(
                "jsonb_to_tsvector('simple', {table}.fields, '[\"string\"]') @@ websearch_to_tsquery('simple', "
            ),
            filter.text.as_deref(),
            ")",
        )
        .filter(&format!("{first_seen} >= "), filter.first_seen_after, "")
        .filter(&format!("{first_seen} < "), filter.first_seen_before, "");
}

/// The items runs found gone, each as it was last seen: its page, position
/// and fields then, `fetched_at` its last sighting; `run_id` is the run that
/// found it gone.
async fn list_removed(pool: &PgPool, filter: &ResultFilter) -> sqlx::Result<Vec<ResultRow>> {
    // A URL list's runs judge no removals (`items::tracking::settle`).
    if filter.url_list_id.is_some() {
        return Ok(Vec::new());
    }
    let mut listing = Listing::new(
        r#"SELECT m.id, m.run_id, m.keyword_id, NULL::bigint AS url_list_id, m.site_id, m.page, m.position, m.page_url, m.item_url,
                  m.fields, m.content_hash, m.last_seen_at AS fetched_at, m.first_seen_at, m.last_seen_at,
                  m.item_id, 'removed' AS change, NULL::jsonb AS diff
           FROM item_removals m"#,
    );
    filter_rows(&mut listing, filter, "m", "m.first_seen_at");
    listing
        .page("m.id", filter.limit)?
        .build_query_as()
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
                 AND r.run_id <> $3 AND c.state = $5)"#,
        keyword_id,
        site_id,
        this_run,
        item_keys,
        RunState::Completed as RunState
    )
    .fetch_all(pool)
    .await
}

/// The newest item earlier completed runs stored for this keyword/site: the
/// first result of the last of them that stored any. In a newest-first feed,
/// everything after it was stored before. The completed state is written
/// out: it is the predicate of the partial index this reads
/// (crawl_runs_keyword_site_finished).
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

/// The fields an item of site `site_id` (else of run `run_id`'s site) has,
/// as the site reads them now (see `Extraction::item_field_names`); `None`
/// when neither is given or there is no such site.
pub async fn item_fields_of(
    pool: &PgPool,
    site_id: Option<i64>,
    run_id: Option<i64>,
) -> sqlx::Result<Option<Vec<String>>> {
    if site_id.is_none() && run_id.is_none() {
        return Ok(None);
    }
    let fields = sqlx::query_scalar!(
        r#"SELECT fields AS "fields: Json<BTreeMap<String, FieldSpec>>" FROM sites
           WHERE id = coalesce($1, (SELECT site_id FROM crawl_runs WHERE id = $2))"#,
        site_id,
        run_id
    )
    .fetch_optional(pool)
    .await?;
    Ok(fields.map(|Json(fields)| item_field_names(&fields)))
}
