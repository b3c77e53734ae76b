//! Webhooks: endpoints told about runs, sites and items as Standard Webhooks
//! (create, read, replace, delete; here), and their deliveries: listed with
//! every attempt, sent again, or a test sent (`deliveries`).

mod deliveries;
mod view;

use axum::{Extension, Json, extract::State, http::StatusCode};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page,
    auth::Access,
    error::ErrorBody,
    extract::{ApiJson, Id},
};
use crate::{
    domain::{
        FieldError,
        webhook::{WebhookInput, WebhookSecret, WebhookSpec},
    },
    store::{self, webhooks::WriteError},
};
use view::WebhookView;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show, update, delete))
        .routes(routes!(deliveries::list))
        .routes(routes!(deliveries::resend))
        .routes(routes!(deliveries::test))
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::UnknownSites(ids) => {
                FieldError::new("site_ids", format!("unknown site ids: {ids:?}")).into()
            }
            WriteError::UnknownKeywords(ids) => {
                FieldError::new("keyword_ids", format!("unknown keyword ids: {ids:?}")).into()
            }
            WriteError::NoKey => no_key().into(),
            WriteError::Database(e) => e.into(),
        }
    }
}

fn no_key() -> FieldError {
    FieldError::new(
        "secret",
        "webhook secrets are kept sealed: they need SESSION_KEY set on the api and the scheduler",
    )
}

/// The rules beyond the endpoint's own: its URL must lead where crawlfleet
/// may connect (the SSRF guard, exactly as a site's), and its secret needs
/// the key that seals it. A name that does not resolve from here is let
/// through: the sender judges every address it connects to.
async fn check_endpoint(state: &AppState, spec: &WebhookSpec) -> Result<(), ApiError> {
    if let Err(refused) = state.guard.check(&spec.url).await
        && !refused.may_pass_later()
    {
        return Err(FieldError::new("url", refused.to_string()).into());
    }
    if state.session_key.is_none() {
        return Err(no_key().into());
    }
    Ok(())
}

/// Create a webhook endpoint; the response shows its secret in full, the
/// only one that does.
#[utoipa::path(post, path = "/webhooks", tag = "webhooks", security(("bearer" = [])), request_body = WebhookInput,
    responses((status = 201, body = WebhookView),
              (status = 422, description = "A rule broken (a URL the SSRF guard refuses, an unknown event...); `field` names it", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn create(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<WebhookInput>,
) -> Result<(StatusCode, Json<WebhookView>), ApiError> {
    let spec = input.parse()?;
    check_endpoint(&state, &spec).await?;
    let secret = spec.secret.clone().unwrap_or_else(WebhookSecret::generate);
    let webhook =
        store::webhooks::create(&state.pool, &spec, &secret, state.session_key.as_ref()).await?;
    Ok((
        StatusCode::CREATED,
        Json(WebhookView::revealing(webhook, &secret)),
    ))
}

/// Every webhook endpoint (secrets masked; to a read token, URLs too).
#[utoipa::path(get, path = "/webhooks", tag = "webhooks", security(("bearer" = [])),
    responses((status = 200, body = Page<WebhookView>), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
) -> Result<Json<Page<WebhookView>>, ApiError> {
    let webhooks = store::webhooks::list(&state.pool).await?;
    Ok(Json(Page {
        items: webhooks
            .into_iter()
            .map(|w| WebhookView::shown_to(w, access))
            .collect(),
        next_cursor: None,
        cut_at_bytes: None,
    }))
}

/// One webhook endpoint (secret masked; to a read token, its URL too); a
/// disabled one says when and why.
#[utoipa::path(get, path = "/webhooks/{id}", tag = "webhooks", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = WebhookView), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn show(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    Id(id): Id,
) -> Result<Json<WebhookView>, ApiError> {
    store::webhooks::get(&state.pool, id)
        .await?
        .map(|webhook| Json(WebhookView::shown_to(webhook, access)))
        .ok_or_else(|| ApiError::not_found("webhook", id))
}

/// Replace a webhook endpoint. A new `secret` rotates it (and this response
/// shows it); `enabled: true` turns a disabled endpoint back on and sends
/// what waited.
#[utoipa::path(put, path = "/webhooks/{id}", tag = "webhooks", security(("bearer" = [])), params(("id" = i64, Path)),
    request_body = WebhookInput,
    responses((status = 200, body = WebhookView), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn update(
    State(state): State<AppState>,
    Id(id): Id,
    ApiJson(input): ApiJson<WebhookInput>,
) -> Result<Json<WebhookView>, ApiError> {
    let spec = input.parse()?;
    check_endpoint(&state, &spec).await?;
    let webhook = store::webhooks::update(&state.pool, id, &spec, state.session_key.as_ref())
        .await?
        .ok_or_else(|| ApiError::not_found("webhook", id))?;
    Ok(Json(match &spec.secret {
        Some(rotated) => WebhookView::revealing(webhook, rotated),
        None => webhook.into(),
    }))
}

/// Delete a webhook endpoint with its deliveries.
#[utoipa::path(delete, path = "/webhooks/{id}", tag = "webhooks", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn delete(State(state): State<AppState>, Id(id): Id) -> Result<StatusCode, ApiError> {
    if store::webhooks::delete(&state.pool, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("webhook", id))
    }
}
