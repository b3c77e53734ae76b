//! The store path from before change tracking, as it was: each page's
//! results and `seen_items` written in one fenced transaction, and the
//! completion. What change tracking is measured against.

use crawlfleet::{
    domain::{item::PageItem, page::CrawledPage},
    store::runs::Fence,
};
use sqlx::PgPool;

/// One page's results and sightings, fenced, as `store::runs::store_page` wrote them.
pub async fn store_page(pool: &PgPool, fence: &Fence, crawled: &CrawledPage<'_>) {
    let mut tx = pool.begin().await.unwrap();
    let (keyword_id, site_id): (i64, i64) = sqlx::query_as(
        r#"SELECT keyword_id, site_id FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = 'url_call'
           FOR UPDATE"#,
    )
    .bind(fence.run_id)
    .bind(fence.attempt)
    .bind(&fence.worker_id)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    let key = |i: &PageItem| i.item_url.clone().unwrap_or_else(|| i.content_hash.clone());
    let keys: Vec<String> = crawled.items.iter().map(key).collect();
    sqlx::query(
        r#"INSERT INTO seen_items (keyword_id, site_id, item_key)
           SELECT DISTINCT $1::bigint, $2::bigint, key FROM UNNEST($3::text[]) AS key
           ON CONFLICT (keyword_id, site_id, item_key) DO UPDATE SET last_seen_at = now()"#,
    )
    .bind(keyword_id)
    .bind(site_id)
    .bind(&keys)
    .execute(&mut *tx)
    .await
    .unwrap();
    let n = crawled.items.len();
    let positions: Vec<i32> = (1..=n as i32).collect();
    let fields: Vec<serde_json::Value> = crawled.items.iter().map(|i| i.fields.clone()).collect();
    let urls: Vec<Option<String>> = crawled.items.iter().map(|i| i.item_url.clone()).collect();
    let hashes: Vec<String> = crawled
        .items
        .iter()
        .map(|i| i.content_hash.clone())
        .collect();
    sqlx::query(
        r#"INSERT INTO crawl_results (run_id, keyword_id, site_id, page, position, page_url, item_url, fields,
                                      content_hash, item_key)
           SELECT $1, $2, $3, $4, item.position, $5, item.url, item.fields, item.hash, item.key
           FROM UNNEST($6::int[], $7::text[], $8::jsonb[], $9::text[], $10::text[])
                AS item(position, url, fields, hash, key)
           ON CONFLICT (run_id, page, position) DO UPDATE
           SET page_url = EXCLUDED.page_url, item_url = EXCLUDED.item_url, fields = EXCLUDED.fields,
               content_hash = EXCLUDED.content_hash, item_key = EXCLUDED.item_key,
               fetched_at = EXCLUDED.fetched_at"#,
    )
    .bind(fence.run_id)
    .bind(keyword_id)
    .bind(site_id)
    .bind(crawled.page)
    .bind(crawled.url)
    .bind(&positions)
    .bind(&urls)
    .bind(&fields)
    .bind(&hashes)
    .bind(&keys)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query("DELETE FROM crawl_results WHERE run_id = $1 AND page = $2 AND position > $3")
        .bind(fence.run_id)
        .bind(crawled.page)
        .bind(n as i32)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        r#"UPDATE crawl_runs
           SET state = 'call_done', pages_crawled = $2, state_changed_at = now(), heartbeat_at = now(),
               items_found = (SELECT count(*) FROM crawl_results WHERE run_id = $1)
           WHERE id = $1
           RETURNING *"#,
    )
    .bind(fence.run_id)
    .bind(crawled.page)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

/// The attempt ended as completed, as `store::runs::complete` ended it.
pub async fn complete(pool: &PgPool, fence: &Fence, last_page: i32) {
    let mut tx = pool.begin().await.unwrap();
    let (last_url,): (Option<String>,) = sqlx::query_as(
        r#"SELECT current_url FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state IN ('running', 'call_done')
           FOR UPDATE"#,
    )
    .bind(fence.run_id)
    .bind(fence.attempt)
    .bind(&fence.worker_id)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    sqlx::query("DELETE FROM crawl_results WHERE run_id = $1 AND page > $2")
        .bind(fence.run_id)
        .bind(last_page)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        r#"UPDATE crawl_runs
           SET state = 'completed', finished_at = now(), state_changed_at = now(), current_url = NULL,
               error = NULL, error_kind = NULL,
               items_found = (SELECT count(*) FROM crawl_results WHERE run_id = $1)
           WHERE id = $1
           RETURNING *"#,
    )
    .bind(fence.run_id)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    sqlx::query(
        r#"UPDATE crawl_attempts SET ended_at = now(), outcome = 'completed', reason = NULL,
                  error_kind = NULL, last_url = $4
           WHERE run_id = $1 AND attempt = $2 AND worker_id = $3 AND ended_at IS NULL"#,
    )
    .bind(fence.run_id)
    .bind(fence.attempt)
    .bind(&fence.worker_id)
    .bind(last_url)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}
