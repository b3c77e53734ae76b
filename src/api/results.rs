use axum::{Json, extract::State};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page, error::ErrorBody, extract::ApiQuery, page_limit, parse_cursor,
};
use crate::store::{
    self,
    results::{CrawlResult, ResultFilter},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ResultQuery {
    keyword_id: Option<i64>,
    site_id: Option<i64>,
    run_id: Option<i64>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// Results in the order they were stored; pass `next_cursor` back as `cursor`
/// for the next page.
#[utoipa::path(get, path = "/results", tag = "results", security(("bearer" = [])), params(ResultQuery),
    responses((status = 200, body = Page<CrawlResult>), (status = 400, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ResultQuery>,
) -> Result<Json<Page<CrawlResult>>, ApiError> {
    let filter = ResultFilter {
        keyword_id: query.keyword_id,
        site_id: query.site_id,
        run_id: query.run_id,
        after: parse_cursor(query.cursor.as_deref())?,
        limit: page_limit(query.limit)?,
    };
    let items = store::results::list(&state.pool, &filter).await?;
    let next_cursor = (items.len() as i64 == filter.limit)
        .then(|| items.last().map(|r| r.id.to_string()))
        .flatten();
    Ok(Json(Page { items, next_cursor }))
}
