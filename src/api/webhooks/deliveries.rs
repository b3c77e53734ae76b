//! An endpoint's deliveries: each with every attempt (status, latency, the
//! start of the answer, or why there was none), sent again on request, and a
//! sample event sent to test the endpoint.

use crate::api::answer_budget::{PageAnswer, page_within};
use axum::{Extension, Json, extract::State, http::StatusCode};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::view::DeliveryView;
use crate::domain::webhook::{DeliveryState, WebhookEventType};
use crate::{
    api::{
        ApiError, AppState, Page,
        auth::Access,
        error::ErrorBody,
        extract::{ApiJson, ApiQuery, Id, WebhookDelivery},
        page_limit, parse_cursor,
    },
    domain::webhook::{Webhook, WebhookEvent},
    store::{
        self,
        webhooks::{DeliveryFilter, Resend},
    },
};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct DeliveryQuery {
    state: Option<DeliveryState>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// An endpoint's deliveries, newest first, each with every attempt; pass
/// `next_cursor` back as `cursor` for more. A read token sees no answer's body.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "webhooks", security(("bearer" = [])),
    params(("id" = i64, Path), DeliveryQuery),
    responses((status = 200, body = Page<DeliveryView>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    Id(id): Id,
    ApiQuery(query): ApiQuery<DeliveryQuery>,
) -> Result<PageAnswer, ApiError> {
    let filter = DeliveryFilter {
        state: query.state,
        before: parse_cursor(query.cursor.as_deref())?,
        limit: page_limit(query.limit)?,
    };
    endpoint(&state, id).await?;
    let deliveries = store::webhooks::list_deliveries(&state.pool, id, &filter).await?;
    let items = deliveries
        .into_iter()
        .map(|d| DeliveryView::shown_to(d, access))
        .collect();
    Ok(page_within(
        items,
        filter.limit,
        state.answer_max_bytes,
        |d: &DeliveryView| d.id,
    ))
}

/// Send a delivery again now (failed, delivered, or waiting for a retry),
/// with a fresh retry schedule and the same `webhook-id`.
#[utoipa::path(post, path = "/webhooks/{id}/deliveries/{delivery_id}/resend", tag = "webhooks", security(("bearer" = [])),
    params(("id" = i64, Path), ("delivery_id" = i64, Path)),
    responses((status = 202, body = DeliveryView), (status = 404, body = ErrorBody),
              (status = 409, description = "The endpoint is disabled, or the delivery is being sent right now", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn resend(
    State(state): State<AppState>,
    path: WebhookDelivery,
) -> Result<(StatusCode, Json<DeliveryView>), ApiError> {
    let (webhook_id, delivery_id) = (path.webhook_id, path.delivery_id);
    refuse_disabled(&endpoint(&state, webhook_id).await?)?;
    match store::webhooks::resend(&state.pool, webhook_id, delivery_id).await? {
        Resend::Queued(delivery) => Ok((StatusCode::ACCEPTED, Json(delivery.into()))),
        Resend::InFlight => Err(ApiError::Conflict {
            message: format!(
                "delivery {delivery_id} is being sent right now; see its attempts in a moment"
            ),
            field: None,
        }),
        Resend::NotFound => Err(ApiError::NotFound(format!(
            "webhook {webhook_id} has no delivery {delivery_id}"
        ))),
    }
}

/// What to test an endpoint with.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = WebhookTest)]
pub(super) struct TestBody {
    /// The sample's event type; left out: the endpoint's first.
    #[serde(rename = "type", default)]
    event_type: Option<WebhookEventType>,
}

/// Send a sample event (`"test": true` in its data) to this endpoint only,
/// whatever its filters; its delivery shows how the endpoint answered.
#[utoipa::path(post, path = "/webhooks/{id}/test", tag = "webhooks", security(("bearer" = [])),
    params(("id" = i64, Path)), request_body = TestBody,
    responses((status = 202, body = DeliveryView), (status = 404, body = ErrorBody),
              (status = 409, description = "The endpoint is disabled", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn test(
    State(state): State<AppState>,
    Id(id): Id,
    ApiJson(body): ApiJson<TestBody>,
) -> Result<(StatusCode, Json<DeliveryView>), ApiError> {
    let webhook = endpoint(&state, id).await?;
    refuse_disabled(&webhook)?;
    let event_type = body.event_type.unwrap_or(webhook.events[0]);
    let sample = WebhookEvent::sample(event_type, id);
    store::webhooks::queue_to(&state.pool, id, &sample)
        .await?
        .map(|delivery| (StatusCode::ACCEPTED, Json(delivery.into())))
        .ok_or_else(|| ApiError::not_found("webhook", id))
}

async fn endpoint(state: &AppState, id: i64) -> Result<Webhook, ApiError> {
    store::webhooks::get(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook", id))
}

/// Nothing is sent to a disabled endpoint.
fn refuse_disabled(webhook: &Webhook) -> Result<(), ApiError> {
    if webhook.enabled {
        return Ok(());
    }
    let why = webhook
        .disabled_reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    Err(ApiError::Conflict {
        message: format!(
            "webhook {} is disabled{why}; enable it first (PUT with \"enabled\": true)",
            webhook.id
        ),
        field: None,
    })
}
