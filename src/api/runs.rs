use axum::http::StatusCode;
use axum::{
    Json, Router,
    extract::State,
    routing::{get, post},
};
use serde::{Deserialize, Serialize};

use super::{
    ApiError, AppState, Page,
    extract::{ApiQuery, Id},
    page_limit, parse_cursor,
};
use crate::{
    domain::run::RunState,
    store::{
        self,
        runs::{Attempt, CrawlRun, RunFilter},
    },
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/runs", get(list))
        .route("/runs/{id}", get(show))
        .route("/runs/{id}/cancel", post(cancel))
        .route("/runs/{id}/retry", post(retry))
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

/// A run with the history of its attempts.
#[derive(Debug, Serialize)]
struct RunDetail {
    #[serde(flatten)]
    run: CrawlRun,
    attempts: Vec<Attempt>,
}

async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<RunDetail>, ApiError> {
    let run = store::runs::get(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    let attempts = store::runs::attempts(&state.pool, id).await?;
    Ok(Json(RunDetail { run, attempts }))
}

/// Queues a failed or cancelled run again, with a fresh attempt budget.
async fn retry(
    State(state): State<AppState>,
    Id(id): Id,
) -> Result<(StatusCode, Json<CrawlRun>), ApiError> {
    match store::runs::retry(&state.pool, id, state.default_max_attempts).await? {
        None => Err(ApiError::not_found("run", id)),
        Some(Ok(run)) => {
            state.events.run_updated(&run).await;
            Ok((StatusCode::ACCEPTED, Json(run)))
        }
        Some(Err(refused)) => Err(ApiError::Conflict {
            message: refused.to_string(),
            field: None,
        }),
    }
}

/// Cancels a queued or active run; a run that already ended is returned as it is.
async fn cancel(State(state): State<AppState>, Id(id): Id) -> Result<Json<CrawlRun>, ApiError> {
    let run = store::runs::cancel(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    state.events.run_updated(&run).await;
    Ok(Json(run))
}
