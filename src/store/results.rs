use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

/// One extracted item, as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct CrawlResult {
    pub id: i64,
    pub run_id: i64,
    pub keyword_id: i64,
    pub site_id: i64,
    pub page: i32,
    pub position: i32,
    pub page_url: String,
    pub item_url: Option<String>,
    #[schema(value_type = Object)]
    pub fields: serde_json::Value,
    pub content_hash: String,
    pub fetched_at: DateTime<Utc>,
}

/// Filters of a result listing; `after` is the cursor (results are listed in
/// the order they were stored).
#[derive(Debug, Default, Clone)]
pub struct ResultFilter {
    pub keyword_id: Option<i64>,
    pub site_id: Option<i64>,
    pub run_id: Option<i64>,
    pub after: Option<i64>,
    pub limit: i64,
}

pub async fn list(pool: &PgPool, filter: &ResultFilter) -> sqlx::Result<Vec<CrawlResult>> {
    sqlx::query_as!(
        CrawlResult,
        r#"SELECT id, run_id, keyword_id, site_id, page, position, page_url, item_url, fields,
                  content_hash, fetched_at
           FROM crawl_results
           WHERE ($1::bigint IS NULL OR keyword_id = $1)
             AND ($2::bigint IS NULL OR site_id = $2)
             AND ($3::bigint IS NULL OR run_id = $3)
             AND ($4::bigint IS NULL OR id > $4)
           ORDER BY id
           LIMIT $5"#,
        filter.keyword_id,
        filter.site_id,
        filter.run_id,
        filter.after,
        filter.limit
    )
    .fetch_all(pool)
    .await
}
