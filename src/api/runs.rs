use axum::{
    Json, Router,
    extract::State,
    routing::{get, post},
};
use serde::Deserialize;

use super::{
    ApiError, AppState, Page,
    extract::{ApiQuery, Id},
    page_limit, parse_cursor,
};
use crate::{
    domain::run::RunState,
    store::{
        self,
        runs::{CrawlRun, RunFilter},
    },
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/runs", get(list))
        .route("/runs/{id}", get(show))
        .route("/runs/{id}/cancel", post(cancel))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunQuery {
    keyword_id: Option<i64>,
    site_id: Option<i64>,
    state: Option<RunState>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// Runs, newest first.
async fn list(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<RunQuery>,
) -> Result<Json<Page<CrawlRun>>, ApiError> {
    let filter = RunFilter {
        keyword_id: query.keyword_id,
        site_id: query.site_id,
        state: query.state,
        before: parse_cursor(query.cursor.as_deref())?,
        limit: page_limit(query.limit)?,
    };
    let items = store::runs::list(&state.pool, &filter).await?;
    let next_cursor = (items.len() as i64 == filter.limit)
        .then(|| items.last().map(|r| r.id.to_string()))
        .flatten();
    Ok(Json(Page { items, next_cursor }))
}

async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<CrawlRun>, ApiError> {
    store::runs::get(&state.pool, id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("run", id))
}

/// Cancels a queued or active run; a run that already ended is returned as it is.
async fn cancel(State(state): State<AppState>, Id(id): Id) -> Result<Json<CrawlRun>, ApiError> {
    store::runs::cancel(&state.pool, id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("run", id))
}
