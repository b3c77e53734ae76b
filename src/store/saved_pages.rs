//! Saved pages (`saved_pages`): a healthy run's list pages, their bodies
//! deflated and the items stored from each, and the detail pages it read
//! (`saved_detail_pages`), written by the run's completion in its
//! transaction (fenced with it); per site only the last runs within the
//! bounds are kept, the oldest pruned in that same transaction. Read back
//! for a replay, newest run first.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};

use crate::domain::{
    item::PageItem,
    saved_page::{KeptPages, SavedPageBounds},
    site::RenderMode,
};

/// Saves run `run_id`'s pages and their detail pages (site `site_id`, at
/// the site version its claim recorded), then prunes the site's saved runs past `bounds`: beyond
/// the newest `runs`, and from the first whose bytes, newest first, pass
/// `bytes` (the newest run is always kept: the crawl kept its pages within
/// the bytes). Called inside the completion's transaction.
pub(crate) async fn save(
    tx: &mut PgConnection,
    run_id: i64,
    site_id: i64,
    kept: &KeptPages,
    bounds: &SavedPageBounds,
) -> sqlx::Result<()> {
    if kept.pages.is_empty() || !bounds.keeps() {
        return Ok(());
    }
    for page in &kept.pages {
        sqlx::query!(
            r#"INSERT INTO saved_pages (run_id, site_id, site_version, page_no, url, render, body,
                                        raw_bytes, items)
               SELECT $1, $2, site_version, $3, $4, $5, $6, $7, $8
               FROM crawl_runs WHERE id = $1
               ON CONFLICT (run_id, page_no) DO UPDATE
               SET url = excluded.url, render = excluded.render, body = excluded.body,
                   raw_bytes = excluded.raw_bytes, items = excluded.items, saved_at = now()"#,
            run_id,
            site_id,
            page.page,
            page.url,
            page.render.as_str(),
            page.body.deflated,
            page.body.raw_bytes as i32,
            items_json(&page.items)
        )
        .execute(&mut *tx)
        .await?;
    }
    for detail in &kept.details {
        sqlx::query!(
            r#"INSERT INTO saved_detail_pages (run_id, site_id, url, render, body, raw_bytes)
               VALUES ($1, $2, $3, $4, $5, $6)
               ON CONFLICT (run_id, url) DO UPDATE
               SET render = excluded.render, body = excluded.body,
                   raw_bytes = excluded.raw_bytes, saved_at = now()"#,
            run_id,
            site_id,
            detail.url,
            detail.render.as_str(),
            detail.body.deflated,
            detail.body.raw_bytes as i32,
        )
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query!(
        r#"WITH bodies AS (
               SELECT run_id, saved_at, octet_length(body) AS bytes
               FROM saved_pages WHERE site_id = $1
               UNION ALL
               SELECT run_id, NULL, octet_length(body)
               FROM saved_detail_pages WHERE site_id = $1
           ),
           runs AS (
               SELECT run_id, max(saved_at) AS saved_at, sum(bytes) AS bytes
               FROM bodies GROUP BY run_id
           ),
           ranked AS (
               SELECT run_id,
                      row_number() OVER newest AS n,
                      sum(bytes) OVER newest AS total
               FROM runs
               WINDOW newest AS (ORDER BY saved_at DESC NULLS LAST, run_id DESC
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
           ),
           pruned AS (
               SELECT run_id FROM ranked WHERE n > 1 AND (n > $2 OR total > $3)
           ),
           details AS (
               DELETE FROM saved_detail_pages
               WHERE site_id = $1 AND run_id IN (SELECT run_id FROM pruned)
           )
           DELETE FROM saved_pages
           WHERE site_id = $1 AND run_id IN (SELECT run_id FROM pruned)"#,
        site_id,
        i64::from(bounds.runs),
        bounds.bytes as i64
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The items as saved: their fields and URL, in page order.
fn items_json(items: &[PageItem]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|item| json!({"fields": item.fields, "item_url": item.item_url}))
            .collect(),
    )
}

/// One saved page, as read back.
#[derive(Debug, Clone)]
pub struct StoredPage {
    pub run_id: i64,
    pub site_version: Option<i32>,
    pub page_no: i32,
    pub url: String,
    pub render: RenderMode,
    /// Deflated.
    pub body: Vec<u8>,
    pub raw_bytes: i32,
    /// `[{fields, item_url}]`, as the run stored them.
    pub items: Value,
    pub saved_at: DateTime<Utc>,
}

/// Site `site_id`'s saved pages, newest run first and in page order within
/// a run, at most `limit`.
pub async fn of_site(pool: &PgPool, site_id: i64, limit: i64) -> sqlx::Result<Vec<StoredPage>> {
    let rows = sqlx::query!(
        r#"SELECT run_id, site_version, page_no, url, render, body, raw_bytes, items, saved_at
           FROM saved_pages WHERE site_id = $1
           ORDER BY run_id DESC, page_no
           LIMIT $2"#,
        site_id,
        limit
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(StoredPage {
                run_id: row.run_id,
                site_version: row.site_version,
                page_no: row.page_no,
                url: row.url,
                render: crate::store::columns::decode("render", &row.render)?,
                body: row.body,
                raw_bytes: row.raw_bytes,
                items: row.items,
                saved_at: row.saved_at,
            })
        })
        .collect()
}

/// A detail page a saved run read, as read back.
#[derive(Debug, Clone)]
pub struct StoredDetail {
    pub url: String,
    pub render: RenderMode,
    /// Deflated.
    pub body: Vec<u8>,
}

/// The detail pages runs `run_ids` of site `site_id` read, by run and URL.
pub async fn details_of_runs(
    pool: &PgPool,
    site_id: i64,
    run_ids: &[i64],
) -> sqlx::Result<HashMap<(i64, String), StoredDetail>> {
    let rows = sqlx::query!(
        r#"SELECT run_id, url, render, body
           FROM saved_detail_pages WHERE site_id = $1 AND run_id = ANY($2)"#,
        site_id,
        run_ids
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| {
            let detail = StoredDetail {
                url: row.url.clone(),
                render: crate::store::columns::decode("render", &row.render)?,
                body: row.body,
            };
            Ok(((row.run_id, row.url), detail))
        })
        .collect()
}
