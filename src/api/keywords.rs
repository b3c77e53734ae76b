use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    routing::{get, post},
};

use super::{
    ApiError, AppState, Page,
    extract::{ApiJson, Id},
};
use crate::{
    domain::{FieldError, keyword::KeywordInput, run::Trigger},
    store::{
        self,
        keywords::{Keyword, WriteError},
        runs::QueueOutcome,
    },
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/keywords", get(list).post(create))
        .route("/keywords/{id}", get(show).put(update).delete(delete))
        .route("/keywords/{id}/crawl", post(crawl))
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::UnknownSites(ids) => ApiError::Invalid(FieldError::new(
                "site_ids",
                format!("unknown site ids: {ids:?}"),
            )),
            WriteError::Database(e) => e.into(),
        }
    }
}

async fn create(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<KeywordInput>,
) -> Result<(StatusCode, Json<Keyword>), ApiError> {
    let spec = input.parse()?;
    let keyword = store::keywords::create(&state.pool, &spec).await?;
    Ok((StatusCode::CREATED, Json(keyword)))
}

async fn list(State(state): State<AppState>) -> Result<Json<Page<Keyword>>, ApiError> {
    let items = store::keywords::list(&state.pool).await?;
    Ok(Json(Page {
        items,
        next_cursor: None,
    }))
}

async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<Keyword>, ApiError> {
    store::keywords::get(&state.pool, id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("keyword", id))
}

async fn update(
    State(state): State<AppState>,
    Id(id): Id,
    ApiJson(input): ApiJson<KeywordInput>,
) -> Result<Json<Keyword>, ApiError> {
    let spec = input.parse()?;
    store::keywords::update(&state.pool, id, &spec)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("keyword", id))
}

async fn delete(State(state): State<AppState>, Id(id): Id) -> Result<StatusCode, ApiError> {
    if store::keywords::delete(&state.pool, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("keyword", id))
    }
}

/// Queues a run of the keyword on each of its sites, now; sites with an
/// active run are reported under `already_active` instead of queued twice.
async fn crawl(
    State(state): State<AppState>,
    Id(id): Id,
) -> Result<(StatusCode, Json<QueueOutcome>), ApiError> {
    let outcome = store::runs::queue_for_keyword(
        &state.pool,
        id,
        Trigger::Manual,
        None,
        state.default_max_attempts,
    )
    .await?
    .ok_or_else(|| ApiError::not_found("keyword", id))?;
    for run in &outcome.queued {
        state.events.run_updated(run).await;
    }
    Ok((StatusCode::ACCEPTED, Json(outcome)))
}
