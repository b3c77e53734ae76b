use axum::{Json, Router, extract::State, http::StatusCode, routing::get};

use super::{
    ApiError, AppState, Page,
    extract::{ApiJson, Id},
};
use crate::{
    domain::site::SiteInput,
    store::{
        self,
        sites::{DeleteOutcome, Site},
    },
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/sites", get(list).post(create))
        .route("/sites/{id}", get(show).put(update).delete(delete))
}

const NAME_TAKEN: &str = "sites_name_key";

fn name_taken() -> ApiError {
    ApiError::Conflict {
        message: "a site with this name already exists".into(),
        field: Some("name".into()),
    }
}

async fn create(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<SiteInput>,
) -> Result<(StatusCode, Json<Site>), ApiError> {
    let spec = input.parse()?;
    match store::sites::create(&state.pool, &spec).await {
        Ok(site) => Ok((StatusCode::CREATED, Json(site))),
        Err(e) if store::violates(&e, NAME_TAKEN) => Err(name_taken()),
        Err(e) => Err(e.into()),
    }
}

async fn list(State(state): State<AppState>) -> Result<Json<Page<Site>>, ApiError> {
    let items = store::sites::list(&state.pool).await?;
    Ok(Json(Page {
        items,
        next_cursor: None,
    }))
}

async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<Site>, ApiError> {
    store::sites::get(&state.pool, id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("site", id))
}

async fn update(
    State(state): State<AppState>,
    Id(id): Id,
    ApiJson(input): ApiJson<SiteInput>,
) -> Result<Json<Site>, ApiError> {
    let spec = input.parse()?;
    match store::sites::update(&state.pool, id, &spec).await {
        Ok(Some(site)) => Ok(Json(site)),
        Ok(None) => Err(ApiError::not_found("site", id)),
        Err(e) if store::violates(&e, NAME_TAKEN) => Err(name_taken()),
        Err(e) => Err(e.into()),
    }
}

async fn delete(State(state): State<AppState>, Id(id): Id) -> Result<StatusCode, ApiError> {
    match store::sites::delete(&state.pool, id).await? {
        DeleteOutcome::Deleted => Ok(StatusCode::NO_CONTENT),
        DeleteOutcome::NotFound => Err(ApiError::not_found("site", id)),
        DeleteOutcome::HasActiveRuns(n) => Err(ApiError::Conflict {
            message: format!(
                "site {id} has {n} active run(s); cancel them or wait for them to end"
            ),
            field: None,
        }),
    }
}
