//! Items: one thing a keyword's crawls found on a site, as last seen, and
//! every value it had (change tracking).

use crate::api::answer_budget::{PageAnswer, page_within};
use axum::{Json, extract::State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page, error::ErrorBody, extract::ApiQuery, extract::Id, page_limit,
    parse_cursor,
};
use crate::{
    domain::{change::FieldDiff, item::IdentifiedBy},
    store::{
        self,
        items::{Item, ItemValue},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(show))
        .routes(routes!(history))
}

/// An item as last seen.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Item)]
pub struct ItemView {
    pub id: i64,
    pub keyword_id: i64,
    pub site_id: i64,
    /// What identifies it: `url`, `key` (the site's `item_key` field) or
    /// `content` (any change makes another item).
    pub identified_by: IdentifiedByView,
    /// Its identity: the URL, `key:` and the key field's value, or the hash
    /// of its content.
    pub item_key: String,
    pub item_url: Option<String>,
    #[schema(value_type = Object)]
    pub fields: serde_json::Value,
    pub content_hash: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    /// When it was first seen with its current fields.
    pub last_changed_at: DateTime<Utc>,
    /// When a run that read every page did not find it; null while it is there.
    pub removed_at: Option<DateTime<Utc>>,
}

/// How an item is identified.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = IdentifiedBy)]
pub enum IdentifiedByView {
    Url,
    Key,
    Content,
}

impl From<IdentifiedBy> for IdentifiedByView {
    fn from(by: IdentifiedBy) -> Self {
        match by {
            IdentifiedBy::Url => IdentifiedByView::Url,
            IdentifiedBy::Key => IdentifiedByView::Key,
            IdentifiedBy::Content => IdentifiedByView::Content,
        }
    }
}

impl From<Item> for ItemView {
    fn from(item: Item) -> Self {
        ItemView {
            id: item.id,
            keyword_id: item.keyword_id,
            site_id: item.site_id,
            identified_by: item.identified_by.into(),
            item_key: item.item_key,
            item_url: item.item_url,
            fields: item.fields,
            content_hash: item.content_hash,
            first_seen_at: item.first_seen_at,
            last_seen_at: item.last_seen_at,
            last_changed_at: item.last_changed_at,
            removed_at: item.removed_at,
        }
    }
}

/// One value an item had, and since when.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = ItemValue)]
pub struct ItemValueView {
    pub id: i64,
    /// The run that first saw the item with it.
    pub run_id: Option<i64>,
    #[schema(value_type = Object)]
    pub fields: serde_json::Value,
    pub content_hash: String,
    /// When the item was first seen with it.
    pub seen_at: DateTime<Utc>,
    /// What differs from the value before it (`{field: {old, new}}`); null
    /// for the item's first value.
    #[schema(value_type = Option<Object>)]
    pub diff: Option<FieldDiff>,
}

impl From<ItemValue> for ItemValueView {
    fn from(value: ItemValue) -> Self {
        ItemValueView {
            id: value.id,
            run_id: value.run_id,
            fields: value.fields,
            content_hash: value.content_hash,
            seen_at: value.seen_at,
            diff: value.diff,
        }
    }
}

/// One item: its identity, its fields as last seen, when it was first and
/// last seen, last changed, and removed.
#[utoipa::path(get, path = "/items/{id}", tag = "results", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = ItemView), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<ItemView>, ApiError> {
    let item = store::items::get(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("item", id))?;
    Ok(Json(item.into()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct HistoryQuery {
    limit: Option<i64>,
    cursor: Option<String>,
}

/// Every value the item had, newest first, each with when it was first seen
/// and what differs from the one before; pass `next_cursor` back as `cursor`
/// for older ones.
#[utoipa::path(get, path = "/items/{id}/history", tag = "results", security(("bearer" = [])),
    params(("id" = i64, Path), HistoryQuery),
    responses((status = 200, body = Page<ItemValueView>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn history(
    State(state): State<AppState>,
    Id(id): Id,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<PageAnswer, ApiError> {
    let limit = page_limit(query.limit)?;
    let before = parse_cursor(query.cursor.as_deref())?;
    if store::items::get(&state.pool, id).await?.is_none() {
        return Err(ApiError::not_found("item", id));
    }
    let values = store::items::history(&state.pool, id, before, limit).await?;
    let items = values.into_iter().map(ItemValueView::from).collect();
    Ok(page_within(
        items,
        limit,
        state.answer_max_bytes,
        |v: &ItemValueView| v.id,
    ))
}
