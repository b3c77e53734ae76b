use axum::{Json, extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page,
    error::ErrorBody,
    extract::{ApiJson, Id},
    runs::QueueOutcomeView,
};
use crate::{
    api::{
        bulk::{BulkEnableOutcome, BulkEnableRequest},
        view::view,
    },
    domain::{FieldError, keyword::KeywordInput, run::Trigger, schedule::KeywordSchedule},
    store::{
        self,
        keywords::{Keyword, WriteError},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(set_enabled))
        .routes(routes!(show, update, delete))
        .routes(routes!(crawl))
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

/// Create a keyword on some sites.
#[utoipa::path(post, path = "/keywords", tag = "keywords", security(("bearer" = [])), request_body = KeywordInput,
    responses((status = 201, body = KeywordView), (status = 422, description = "Bad cron, unknown site ids...", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn create(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<KeywordInput>,
) -> Result<(StatusCode, Json<KeywordView>), ApiError> {
    let spec = input.parse(state.min_schedule_interval)?;
    let keyword = store::keywords::create(&state.pool, &spec).await?;
    Ok((StatusCode::CREATED, Json(keyword.into())))
}

/// Every keyword.
#[utoipa::path(get, path = "/keywords", tag = "keywords", security(("bearer" = [])),
    responses((status = 200, body = Page<KeywordView>), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn list(State(state): State<AppState>) -> Result<Json<Page<KeywordView>>, ApiError> {
    let keywords = store::keywords::list(&state.pool).await?;
    Ok(Json(Page {
        items: keywords.into_iter().map(KeywordView::from).collect(),
        next_cursor: None,
        cut_at_bytes: None,
    }))
}

/// One keyword.
#[utoipa::path(get, path = "/keywords/{id}", tag = "keywords", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = KeywordView), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<KeywordView>, ApiError> {
    store::keywords::get(&state.pool, id)
        .await?
        .map(|keyword| Json(keyword.into()))
        .ok_or_else(|| ApiError::not_found("keyword", id))
}

/// Replace a keyword (schedule changes apply without a restart).
#[utoipa::path(put, path = "/keywords/{id}", tag = "keywords", security(("bearer" = [])), params(("id" = i64, Path)),
    request_body = KeywordInput,
    responses((status = 200, body = KeywordView), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn update(
    State(state): State<AppState>,
    Id(id): Id,
    ApiJson(input): ApiJson<KeywordInput>,
) -> Result<Json<KeywordView>, ApiError> {
    let spec = input.parse(state.min_schedule_interval)?;
    store::keywords::update(&state.pool, id, &spec)
        .await?
        .map(|keyword| Json(keyword.into()))
        .ok_or_else(|| ApiError::not_found("keyword", id))
}

/// Delete a keyword with its runs and results.
#[utoipa::path(delete, path = "/keywords/{id}", tag = "keywords", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn delete(State(state): State<AppState>, Id(id): Id) -> Result<StatusCode, ApiError> {
    if store::keywords::delete(&state.pool, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("keyword", id))
    }
}

/// Queue a run of the keyword on each of its sites, now; sites with an
/// active run are reported under `already_active` instead of queued twice.
#[utoipa::path(post, path = "/keywords/{id}/crawl", tag = "keywords", security(("bearer" = [])),
    params(("id" = i64, Path)),
    responses((status = 202, body = QueueOutcomeView), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn crawl(
    State(state): State<AppState>,
    Id(id): Id,
) -> Result<(StatusCode, Json<QueueOutcomeView>), ApiError> {
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
    Ok((StatusCode::ACCEPTED, Json(outcome.into())))
}

view! {
    /// A stored keyword, as the API shows it (its next fire times count from now).
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = Keyword)]
    pub struct KeywordView from (from: Keyword) {
        let (next_fire_times, next_fire_times_local) = next_fire_times(
            from.id,
            from.enabled,
            &from.schedule,
            &from.timezone,
            from.jitter_secs,
        );
    } {
        id: i64 = from.id,
        keyword: String = from.keyword,
        site_ids: Vec<i64> = from.site_ids,
        /// 6-field cron expression, seconds first, read on the clocks of `timezone`.
        schedule: String = from.schedule,
        /// IANA time zone of the schedule.
        #[schema(example = "Asia/Seoul")]
        timezone: String = from.timezone,
        /// Each fire is delayed by this keyword's own share of this window, the
        /// same every time (derived from its id).
        jitter_secs: i32 = from.jitter_secs,
        enabled: bool = from.enabled,
        priority: i32 = from.priority,
        created_at: DateTime<Utc> = from.created_at,
        updated_at: DateTime<Utc> = from.updated_at,
        /// The next 5 times the keyword fires (UTC, jitter included), from now;
        /// empty while the keyword is disabled.
        next_fire_times: Vec<DateTime<Utc>> = next_fire_times,
        /// The same times on the keyword's clocks: RFC 3339 with the zone's
        /// offset then (`2026-11-26T06:00:00+09:00`).
        next_fire_times_local: Vec<String> = next_fire_times_local,
    }
}

/// Fire times a keyword shows ahead.
const FIRE_TIMES_SHOWN: usize = 5;

/// The next fires of a stored schedule (of a keyword or a URL list, whose id
/// picks its jitter) from now, in UTC and on the schedule's clocks; none
/// while it is disabled.
pub(super) fn next_fire_times(
    id: i64,
    enabled: bool,
    schedule: &str,
    timezone: &str,
    jitter_secs: i32,
) -> (Vec<DateTime<Utc>>, Vec<String>) {
    let schedule =
        enabled.then(|| KeywordSchedule::parse(schedule, timezone, jitter_secs.into()).ok());
    match schedule.flatten() {
        Some(schedule) => schedule
            .next_fires(id, Utc::now(), FIRE_TIMES_SHOWN)
            .into_iter()
            .map(|fire| (fire.at, schedule.zone().local_rfc3339(fire.at)))
            .unzip(),
        None => (Vec::new(), Vec::new()),
    }
}

/// Enable or disable several keywords: by id, or all. A disabled keyword is
/// not queued by its schedule. With `dry_run` it only counts.
#[utoipa::path(post, path = "/keywords/enabled", tag = "keywords", security(("bearer" = [])), request_body = BulkEnableRequest,
    responses((status = 200, body = BulkEnableOutcome),
              (status = 422, description = "Neither or both of `ids` and `all`, or more than 500 ids; `field` names it", body = ErrorBody),
              (status = 400, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn set_enabled(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<BulkEnableRequest>,
) -> Result<Json<BulkEnableOutcome>, ApiError> {
    let keywords: Vec<(i64, Option<bool>)> = match request.targets()? {
        None => store::keywords::list(&state.pool)
            .await?
            .into_iter()
            .map(|k| (k.id, Some(k.enabled)))
            .collect(),
        Some(ids) => {
            let mut found = Vec::new();
            for id in ids {
                let keyword = store::keywords::get(&state.pool, id).await?;
                found.push((id, keyword.map(|k| k.enabled)));
            }
            found
        }
    };
    let mut outcome = request.outcome();
    for (id, enabled) in keywords {
        let Some(enabled) = enabled else {
            outcome.missing(id);
            continue;
        };
        if outcome.judge(id, enabled) && !request.dry_run {
            store::keywords::set_enabled(&state.pool, id, request.enabled).await?;
        }
    }
    Ok(Json(outcome))
}
