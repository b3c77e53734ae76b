//! Results: listed a page at a time, or exported whole (`export`).

mod export;

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page,
    answer_budget::{PageAnswer, page_within},
    error::ErrorBody,
    extract::ApiQuery,
    page_limit, parse_cursor,
};
use crate::{
    api::view::view,
    domain::change::{Change, FieldDiff},
    store::{
        self,
        results::{CrawlResult, ResultFilter},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(export::export))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ResultQuery {
    keyword_id: Option<i64>,
    /// Results of a URL list's runs.
    url_list_id: Option<i64>,
    site_id: Option<i64>,
    run_id: Option<i64>,
    /// Full-text search over the fields' text (whole words; `"a phrase"`, `or`, `-word`).
    q: Option<String>,
    /// Items first seen at or after this time (RFC 3339).
    first_seen_after: Option<DateTime<Utc>>,
    /// Items first seen before this time.
    first_seen_before: Option<DateTime<Utc>>,
    /// `new` or `changed`: results whose item was that to its run;
    /// `removed`: the items the runs found gone (as last seen).
    change: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// Longest search text, in characters.
const MAX_SEARCH_CHARS: usize = 200;

/// The filters `/api/results` and its export share, checked.
fn filter(
    (keyword_id, url_list_id, site_id, run_id): (
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
    ),
    (q, change): (Option<String>, Option<String>),
    first_seen: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    limit: i64,
) -> Result<ResultFilter, ApiError> {
    let change = change.as_deref().map(Change::parse_filter).transpose()?;
    let text = match q.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(q) => {
            crate::domain::text::check(q, "q", MAX_SEARCH_CHARS)?;
            Some(q.to_owned())
        }
    };
    Ok(ResultFilter {
        keyword_id,
        url_list_id,
        site_id,
        run_id,
        text,
        first_seen_after: first_seen.0,
        first_seen_before: first_seen.1,
        change,
        after: None,
        limit,
    })
}

/// Results in the order they were stored; pass `next_cursor` back as `cursor`
/// for the next page. `change=new|changed` lists the results whose item was
/// new or changed to its run; `change=removed` the items the matching runs
/// found gone, as they were last seen, in the order they were removed (`id`,
/// `run_id` and the cursor are the removal's).
#[utoipa::path(get, path = "/results", tag = "results", security(("bearer" = [])), params(ResultQuery),
    responses((status = 200, body = Page<CrawlResultView>), (status = 400, body = ErrorBody), (status = 422, description = "An unknown `change`", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ResultQuery>,
) -> Result<PageAnswer, ApiError> {
    let filter = ResultFilter {
        after: parse_cursor(query.cursor.as_deref())?,
        ..filter(
            (
                query.keyword_id,
                query.url_list_id,
                query.site_id,
                query.run_id,
            ),
            (query.q, query.change),
            (query.first_seen_after, query.first_seen_before),
            page_limit(query.limit)?,
        )?
    };
    let results = store::results::list(&state.pool, &filter).await?;
    let items = results.into_iter().map(CrawlResultView::from).collect();
    Ok(page_within(
        items,
        filter.limit,
        state.answer_max_bytes,
        |r: &CrawlResultView| r.id,
    ))
}

view! {
    /// One extracted item, as the API shows it.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = CrawlResult)]
    pub struct CrawlResultView from (from: CrawlResult) {} {
        id: i64 = from.id,
        run_id: i64 = from.run_id,
        /// The keyword whose run found it (null: a URL list's run).
        keyword_id: Option<i64> = from.keyword_id,
        /// The URL list whose run read it (null: a keyword's run).
        url_list_id: Option<i64> = from.url_list_id,
        site_id: i64 = from.site_id,
        page: i32 = from.page,
        position: i32 = from.position,
        page_url: String = from.page_url,
        item_url: Option<String> = from.item_url,
        #[schema(value_type = Object)]
        fields: serde_json::Value = from.fields,
        content_hash: String = from.content_hash,
        fetched_at: DateTime<Utc> = from.fetched_at,
        /// When any run of this keyword/site first saw the item.
        first_seen_at: DateTime<Utc> = from.first_seen_at,
        /// When a run last saw it.
        last_seen_at: DateTime<Utc> = from.last_seen_at,
        /// The item (see `/api/items/{id}`); null on results stored before
        /// change tracking.
        item_id: Option<i64> = from.item_id,
        /// What the item was to the run (null before change tracking).
        change: Option<ChangeView> = from.change.map(ChangeView::from),
        /// `changed`: each changed field's old and new value,
        /// `{"price": {"old": "$5.99", "new": "$6.49"}}`.
        #[schema(value_type = Option<Object>)]
        diff: Option<FieldDiff> = from.diff,
    }
}

/// What an item was to a run: `new` (not stored for its keyword/site
/// before), `changed`, `unchanged`, or `removed` (stored before, not found by
/// a run that read every page).
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = Change)]
pub enum ChangeView {
    New,
    Changed,
    Unchanged,
    Removed,
}

impl From<Change> for ChangeView {
    fn from(change: Change) -> Self {
        match change {
            Change::New => ChangeView::New,
            Change::Changed => ChangeView::Changed,
            Change::Unchanged => ChangeView::Unchanged,
            Change::Removed => ChangeView::Removed,
        }
    }
}
