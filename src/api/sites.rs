use axum::{Json, extract::State, http::StatusCode};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page,
    error::ErrorBody,
    extract::{ApiJson, Id},
};
use crate::{
    domain::site::SiteInput,
    store::{
        self,
        sites::{DeleteOutcome, Site},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show, update, delete))
}

const NAME_TAKEN: &str = "sites_name_key";

fn name_taken() -> ApiError {
    ApiError::Conflict {
        message: "a site with this name already exists".into(),
        field: Some("name".into()),
    }
}

/// Create a site.
#[utoipa::path(post, path = "/sites", tag = "sites", security(("bearer" = [])), request_body = SiteInput,
    responses((status = 201, body = Site), (status = 409, description = "Name taken", body = ErrorBody),
              (status = 422, description = "A rule broken; `field` names it", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
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

/// Every site.
#[utoipa::path(get, path = "/sites", tag = "sites", security(("bearer" = [])),
    responses((status = 200, body = Page<Site>), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn list(State(state): State<AppState>) -> Result<Json<Page<Site>>, ApiError> {
    let items = store::sites::list(&state.pool).await?;
    Ok(Json(Page {
        items,
        next_cursor: None,
    }))
}

/// One site.
#[utoipa::path(get, path = "/sites/{id}", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = Site), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<Site>, ApiError> {
    store::sites::get(&state.pool, id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("site", id))
}

/// Replace a site.
#[utoipa::path(put, path = "/sites/{id}", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    request_body = SiteInput,
    responses((status = 200, body = Site), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 422, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
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

/// Delete a site with its runs and results (409 while it has active runs).
#[utoipa::path(delete, path = "/sites/{id}", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
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
