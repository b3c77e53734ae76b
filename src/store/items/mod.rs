//! Items: each thing a keyword's crawls found on a site, identified across
//! runs (`domain::item`), with its current fields and every value it had.
//! Written as pages are stored and runs complete (`tracking`, called from the
//! fenced writes of `runs`); read here.

pub(super) mod tracking;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::columns::decode;
use crate::domain::{change::FieldDiff, item::IdentifiedBy, site::KnownDetail};

/// An item as last seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub id: i64,
    /// The keyword whose runs found it (`None`: a URL list's item).
    pub keyword_id: Option<i64>,
    /// The URL list whose runs read it (`None`: a keyword's item).
    pub url_list_id: Option<i64>,
    pub site_id: i64,
    pub identified_by: IdentifiedBy,
    /// Its identity: the URL, `key:` and the key field's value, or the content hash.
    pub item_key: String,
    pub item_url: Option<String>,
    pub fields: serde_json::Value,
    pub content_hash: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    /// When it was first seen with its current fields.
    pub last_changed_at: DateTime<Utc>,
    /// When a run that read every page did not find it (`None` while it is there).
    pub removed_at: Option<DateTime<Utc>>,
}

/// One value an item had.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemValue {
    pub id: i64,
    /// The run that first saw it with this value (`None`: from before runs
    /// were recorded with values).
    pub run_id: Option<i64>,
    pub fields: serde_json::Value,
    pub content_hash: String,
    /// When it was first seen with this value.
    pub seen_at: DateTime<Utc>,
    /// What differs from the value before it (`None` for its first value).
    pub diff: Option<FieldDiff>,
}

/// One item; `None` when there is no such item (or retention forgot it).
pub async fn get(pool: &PgPool, id: i64) -> sqlx::Result<Option<Item>> {
    let row = sqlx::query!(
        r#"SELECT id, keyword_id, url_list_id, site_id, identified_by, item_key, item_url, fields, content_hash,
                  first_seen_at, last_seen_at, last_changed_at, removed_at
           FROM items WHERE id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await?;
    row.map(|row| {
        Ok(Item {
            id: row.id,
            keyword_id: row.keyword_id,
            url_list_id: row.url_list_id,
            site_id: row.site_id,
            identified_by: decode("identified_by", &row.identified_by)?,
            item_key: row.item_key,
            item_url: row.item_url,
            fields: row.fields,
            content_hash: row.content_hash,
            first_seen_at: row.first_seen_at,
            last_seen_at: row.last_seen_at,
            last_changed_at: row.last_changed_at,
            removed_at: row.removed_at,
        })
    })
    .transpose()
}

/// Up to `limit` values of item `id`, newest first, older than the value
/// `before` (a cursor) if given; each with what differs from the one before.
pub async fn history(
    pool: &PgPool,
    id: i64,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<ItemValue>> {
    // One more than asked: the oldest value asked for is compared with it.
    let rows = sqlx::query!(
        r#"SELECT id, run_id, fields, content_hash, seen_at FROM item_history
           WHERE item_id = $1 AND ($2::bigint IS NULL OR id < $2)
           ORDER BY id DESC
           LIMIT $3"#,
        id,
        before,
        limit + 1
    )
    .fetch_all(pool)
    .await?;
    let values = rows
        .iter()
        .enumerate()
        .take(limit as usize)
        .map(|(at, row)| ItemValue {
            id: row.id,
            run_id: row.run_id,
            fields: row.fields.clone(),
            content_hash: row.content_hash.clone(),
            seen_at: row.seen_at,
            diff: rows
                .get(at + 1)
                .map(|older| FieldDiff::between(&older.fields, &row.fields)),
        })
        .collect();
    Ok(values)
}

/// What the store knows of the items of `keyword_id`/`site_id` with these
/// identity keys, for deciding whose detail page a run reads: their fields
/// and when their detail page was last read. Keys it does not know are left out.
pub async fn known_details(
    pool: &PgPool,
    (keyword_id, url_list_id): (Option<i64>, Option<i64>),
    site_id: i64,
    keys: &[String],
) -> sqlx::Result<std::collections::HashMap<String, KnownDetail>> {
    let rows = sqlx::query!(
        r#"SELECT item_key, fields, detail_read_at FROM items
           WHERE (keyword_id = $1 OR url_list_id = $4) AND site_id = $2 AND item_key = ANY($3)"#,
        keyword_id,
        site_id,
        keys,
        url_list_id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let known = KnownDetail {
                fields: row.fields,
                detail_read_at: row.detail_read_at,
            };
            (row.item_key, known)
        })
        .collect())
}
