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
    api::view::view,
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

view! {
    /// An item as last seen.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = Item)]
    pub struct ItemView from (item: Item) {} {
        id: i64 = item.id,
        /// The keyword whose runs found it (null: a URL list's item).
        keyword_id: Option<i64> = item.keyword_id,
        /// The URL list whose runs read it (null: a keyword's item).
        url_list_id: Option<i64> = item.url_list_id,
        site_id: i64 = item.site_id,
        /// What identifies it: `url`, `key` (the site's `item_key` field) or
        /// `content` (any change makes another item).
        identified_by: IdentifiedByView = item.identified_by.into(),
        /// Its identity: the URL, `key:` and the key field's value, or the hash
        /// of its content.
        item_key: String = item.item_key,
        item_url: Option<String> = item.item_url,
        #[schema(value_type = Object)]
        fields: serde_json::Value = item.fields,
        content_hash: String = item.content_hash,
        first_seen_at: DateTime<Utc> = item.first_seen_at,
        last_seen_at: DateTime<Utc> = item.last_seen_at,
        /// When it was first seen with its current fields.
        last_changed_at: DateTime<Utc> = item.last_changed_at,
        /// When a run that read every page did not find it; null while it is there.
        removed_at: Option<DateTime<Utc>> = item.removed_at,
    }
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

view! {
    /// One value an item had, and since when.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = ItemValue)]
    pub struct ItemValueView from (value: ItemValue) {} {
        id: i64 = value.id,
        /// The run that first saw the item with it.
        run_id: Option<i64> = value.run_id,
        #[schema(value_type = Object)]
        fields: serde_json::Value = value.fields,
        content_hash: String = value.content_hash,
        /// When the item was first seen with it.
        seen_at: DateTime<Utc> = value.seen_at,
        /// What differs from the value before it (`{field: {old, new}}`); null
        /// for the item's first value.
        #[schema(value_type = Option<Object>)]
        diff: Option<FieldDiff> = value.diff,
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
