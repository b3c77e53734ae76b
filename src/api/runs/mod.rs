//! Runs: list, show with attempts, cancel, retry; many at once (`bulk`).

mod bulk;
mod view;

pub use view::{CrawlRunView, QueueOutcomeView};

use crate::api::answer_budget::{PageAnswer, page_within};
use axum::{
    Json,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page,
    error::ErrorBody,
    extract::{ApiQuery, Id, RunAttempt},
    page_limit, parse_cursor,
};
use crate::{
    domain::{failure::FailureKind, run::RunState},
    store::{self, runs::RunFilter},
};
use view::AttemptView;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(show))
        .routes(routes!(cancel))
        .routes(routes!(retry))
        .routes(routes!(bulk::bulk))
        .routes(routes!(evidence_html))
        .routes(routes!(evidence_screenshot))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct RunQuery {
    keyword_id: Option<i64>,
    /// Runs of a URL list.
    url_list_id: Option<i64>,
    site_id: Option<i64>,
    state: Option<RunState>,
    /// Runs whose last failure was of this kind.
    error_kind: Option<FailureKind>,
    /// Runs queued at or after this time (RFC 3339, e.g. `2026-11-23T08:00:00Z`).
    queued_after: Option<DateTime<Utc>>,
    /// Runs queued before this time.
    queued_before: Option<DateTime<Utc>>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// Runs, newest first; pass `next_cursor` back as `cursor` for more.
#[utoipa::path(get, path = "/runs", tag = "runs", security(("bearer" = [])), params(RunQuery),
    responses((status = 200, body = Page<CrawlRunView>), (status = 400, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<RunQuery>,
) -> Result<PageAnswer, ApiError> {
    let filter = RunFilter {
        keyword_id: query.keyword_id,
        url_list_id: query.url_list_id,
        site_id: query.site_id,
        state: query.state,
        error_kind: query.error_kind,
        queued_after: query.queued_after,
        queued_before: query.queued_before,
        before: parse_cursor(query.cursor.as_deref())?,
        limit: page_limit(query.limit)?,
    };
    let runs = store::runs::list(&state.pool, &filter).await?;
    let items = runs.into_iter().map(CrawlRunView::from).collect();
    Ok(page_within(
        items,
        filter.limit,
        state.answer_max_bytes,
        |r: &CrawlRunView| r.id,
    ))
}

/// A run with the history of its attempts.
#[derive(Debug, Serialize, ToSchema)]
struct RunDetail {
    #[serde(flatten)]
    run: CrawlRunView,
    attempts: Vec<AttemptView>,
}

/// One run and every attempt: started, ended, worker, outcome, reason, last URL.
#[utoipa::path(get, path = "/runs/{id}", tag = "runs", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = RunDetail), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<RunDetail>, ApiError> {
    let run = store::runs::get(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    let attempts = store::runs::attempts(&state.pool, id).await?;
    Ok(Json(RunDetail {
        run: run.into(),
        attempts: attempts
            .into_iter()
            .map(|attempt| AttemptView::from((id, attempt)))
            .collect(),
    }))
}

/// Queue a failed or cancelled run again, with a fresh attempt budget.
#[utoipa::path(post, path = "/runs/{id}/retry", tag = "runs", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 202, body = CrawlRunView), (status = 404, body = ErrorBody),
              (status = 409, description = "Not failed or cancelled, or its pair is active", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn retry(
    State(state): State<AppState>,
    Id(id): Id,
) -> Result<(StatusCode, Json<CrawlRunView>), ApiError> {
    match store::runs::retry(&state.pool, id, state.default_max_attempts).await? {
        None => Err(ApiError::not_found("run", id)),
        Some(Ok(run)) => {
            state.events.run_updated(&run).await;
            Ok((StatusCode::ACCEPTED, Json(run.into())))
        }
        Some(Err(refused)) => Err(ApiError::Conflict {
            message: refused.to_string(),
            field: None,
        }),
    }
}

/// Cancel a queued or running run (a running crawl stops within seconds); a
/// run that already ended is returned as it is.
#[utoipa::path(post, path = "/runs/{id}/cancel", tag = "runs", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = CrawlRunView), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn cancel(State(state): State<AppState>, Id(id): Id) -> Result<Json<CrawlRunView>, ApiError> {
    let run = store::runs::cancel(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    state.events.run_updated(&run).await;
    Ok(Json(run.into()))
}

/// The HTML of the page a failed attempt ended on, as the worker saw it
/// (capped at 2 MB). It is the site's HTML, not ours: served sandboxed, so
/// its scripts never run with the api's origin.
#[utoipa::path(get, path = "/runs/{id}/attempts/{attempt}/html", tag = "runs", security(("bearer" = [])),
    params(("id" = i64, Path), ("attempt" = i32, Path)),
    responses((status = 200, description = "The page's HTML", content_type = "text/html", body = String),
              (status = 404, description = "No such run or attempt, or nothing kept", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn evidence_html(
    State(state): State<AppState>,
    attempt: RunAttempt,
) -> Result<Response, ApiError> {
    let html = store::runs::evidence_html(&state.pool, attempt.run_id, attempt.attempt)
        .await?
        .ok_or_else(|| no_evidence(&attempt, "HTML"))?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, "sandbox"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        html,
    )
        .into_response())
}

/// The screenshot (PNG) of the page a failed browser attempt ended on.
#[utoipa::path(get, path = "/runs/{id}/attempts/{attempt}/screenshot", tag = "runs", security(("bearer" = [])),
    params(("id" = i64, Path), ("attempt" = i32, Path)),
    responses((status = 200, description = "A PNG", content_type = "image/png", body = Vec<u8>),
              (status = 404, description = "No such run or attempt, or nothing kept", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn evidence_screenshot(
    State(state): State<AppState>,
    attempt: RunAttempt,
) -> Result<Response, ApiError> {
    let png = store::runs::evidence_screenshot(&state.pool, attempt.run_id, attempt.attempt)
        .await?
        .ok_or_else(|| no_evidence(&attempt, "screenshot"))?;
    Ok((
        [
            (header::CONTENT_TYPE, "image/png"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        png,
    )
        .into_response())
}

fn no_evidence(attempt: &RunAttempt, what: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no {what} kept for attempt {} of run {}",
        attempt.attempt, attempt.run_id
    ))
}
