//! URL lists: a site crawled from URLs a client uploads, on a schedule of
//! the list's own. Settings are JSON; the URLs are uploaded as plain text
//! (`upload`).

mod upload;

use axum::{Json, extract::State, http::StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page,
    error::ErrorBody,
    extract::{ApiJson, ApiQuery, Id},
    keywords::next_fire_times,
    page_limit,
};
use crate::{
    api::{runs::CrawlRunView, view::view},
    domain::{FieldError, run::Trigger, url_list::UrlListInput},
    store::{
        self,
        runs::ListQueued,
        url_lists::{Entry, UrlList, WriteError},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show, update, delete))
        .routes(routes!(upload::replace, upload::append, entries))
        .routes(routes!(crawl))
}

/// Queue a run of the list now: it reads every URL of the list once (its
/// period starts now), within its site's pace.
#[utoipa::path(post, path = "/url-lists/{id}/crawl", tag = "url-lists", security(("bearer" = [])),
    params(("id" = i64, Path)),
    responses((status = 202, body = CrawlRunView), (status = 404, body = ErrorBody), (status = 409, description = "The list's run is still active", body = ErrorBody), (status = 422, description = "The list's site is disabled", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn crawl(
    State(state): State<AppState>,
    Id(id): Id,
) -> Result<(StatusCode, Json<CrawlRunView>), ApiError> {
    let queued = store::runs::queue_for_list(
        &state.pool,
        id,
        Trigger::Manual,
        Utc::now(),
        state.default_max_attempts,
    )
    .await?
    .ok_or_else(|| ApiError::not_found("URL list", id))?;
    match queued {
        ListQueued::Queued(run) => {
            state.events.run_updated(&run).await;
            Ok((StatusCode::ACCEPTED, Json(run.into())))
        }
        ListQueued::AlreadyActive(run) => Err(ApiError::Conflict {
            message: format!("URL list {id} has an active run ({})", run.id),
            field: None,
        }),
        ListQueued::SiteDisabled => {
            Err(FieldError::new("site_id", "the list's site is disabled").into())
        }
    }
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::UnknownSite(_) => FieldError::new("site_id", e.to_string()).into(),
            WriteError::NameTaken(_) => ApiError::Conflict {
                message: e.to_string(),
                field: Some("name".into()),
            },
            WriteError::Database(e) => e.into(),
        }
    }
}

/// Create a URL list on a site (its URLs are uploaded to `/url-lists/{id}/urls`).
#[utoipa::path(post, path = "/url-lists", tag = "url-lists", security(("bearer" = [])), request_body = UrlListInput,
    responses((status = 201, body = UrlListView), (status = 409, description = "The site has a list of this name", body = ErrorBody), (status = 422, description = "Bad cron, unknown site...", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn create(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<UrlListInput>,
) -> Result<(StatusCode, Json<UrlListView>), ApiError> {
    let spec = input.parse(state.min_schedule_interval)?;
    let list = store::url_lists::create(&state.pool, &spec).await?;
    Ok((StatusCode::CREATED, Json(list.into())))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// Only the lists of this site.
    site_id: Option<i64>,
}

/// Every URL list, or a site's, with how far each has read its current period.
#[utoipa::path(get, path = "/url-lists", tag = "url-lists", security(("bearer" = [])), params(ListQuery),
    responses((status = 200, body = Page<UrlListView>), (status = 401, description = "No valid token", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Page<UrlListView>>, ApiError> {
    let lists = store::url_lists::list(&state.pool, query.site_id).await?;
    Ok(Json(Page {
        items: lists.into_iter().map(UrlListView::from).collect(),
        next_cursor: None,
        cut_at_bytes: None,
    }))
}

/// One URL list.
#[utoipa::path(get, path = "/url-lists/{id}", tag = "url-lists", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = UrlListView), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody)))]
async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<UrlListView>, ApiError> {
    store::url_lists::get(&state.pool, id)
        .await?
        .map(|list| Json(list.into()))
        .ok_or_else(|| ApiError::not_found("URL list", id))
}

/// Replace a URL list's settings; its URLs stay.
#[utoipa::path(put, path = "/url-lists/{id}", tag = "url-lists", security(("bearer" = [])), params(("id" = i64, Path)),
    request_body = UrlListInput,
    responses((status = 200, body = UrlListView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn update(
    State(state): State<AppState>,
    Id(id): Id,
    ApiJson(input): ApiJson<UrlListInput>,
) -> Result<Json<UrlListView>, ApiError> {
    let spec = input.parse(state.min_schedule_interval)?;
    store::url_lists::update(&state.pool, id, &spec)
        .await?
        .map(|list| Json(list.into()))
        .ok_or_else(|| ApiError::not_found("URL list", id))
}

/// Delete a URL list with its URLs.
#[utoipa::path(delete, path = "/url-lists/{id}", tag = "url-lists", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn delete(State(state): State<AppState>, Id(id): Id) -> Result<StatusCode, ApiError> {
    if store::url_lists::delete(&state.pool, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("URL list", id))
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
struct EntriesQuery {
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// URLs per page (1 to 1000, 100 by default).
    limit: Option<i64>,
}

/// A URL list's URLs in their order, page by page, each with when it was last read.
#[utoipa::path(get, path = "/url-lists/{id}/urls", tag = "url-lists", security(("bearer" = [])),
    params(("id" = i64, Path), EntriesQuery),
    responses((status = 200, body = Page<UrlEntryView>), (status = 404, body = ErrorBody), (status = 400, description = "Bad cursor or limit", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody)))]
async fn entries(
    State(state): State<AppState>,
    Id(id): Id,
    ApiQuery(query): ApiQuery<EntriesQuery>,
) -> Result<Json<Page<UrlEntryView>>, ApiError> {
    let limit = page_limit(query.limit)?;
    let after: i32 = super::parse_cursor(query.cursor.as_deref())?.unwrap_or(0);
    if !store::url_lists::exists(&state.pool, id).await? {
        return Err(ApiError::not_found("URL list", id));
    }
    let rows = store::url_lists::entries(&state.pool, id, after, limit).await?;
    let next_cursor = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|e| e.line.to_string()))
        .flatten();
    Ok(Json(Page {
        items: rows.into_iter().map(UrlEntryView::from).collect(),
        next_cursor,
        cut_at_bytes: None,
    }))
}

view! {
    /// A stored URL list, as the API shows it (its next fire times count from now).
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = UrlList)]
    pub struct UrlListView from (from: UrlList) {
        let (next_fire_times, next_fire_times_local) = next_fire_times(
            from.id,
            from.enabled,
            &from.schedule,
            &from.timezone,
            from.jitter_secs,
        );
    } {
        id: i64 = from.id,
        site_id: i64 = from.site_id,
        name: String = from.name,
        schedule: String = from.schedule,
        timezone: String = from.timezone,
        jitter_secs: i32 = from.jitter_secs,
        enabled: bool = from.enabled,
        /// URLs in the list.
        urls: i64 = from.urls,
        /// URLs read since the period began (`period_started_at`).
        read_in_period: i64 = from.read_in_period,
        /// URLs whose page could not be read since the period began.
        failed_in_period: i64 = from.failed_in_period,
        /// When the current period began: the nominal time of the latest
        /// fire, or of the latest manual crawl when later; null before either.
        period_started_at: Option<DateTime<Utc>> = from.period_started_at,
        /// The list's run still active (queued or crawling), if any.
        active_run_id: Option<i64> = from.active_run_id,
        /// The next 5 fires (UTC, jitter included); empty while disabled.
        next_fire_times: Vec<DateTime<Utc>> = next_fire_times,
        /// The same times on the list's clocks.
        next_fire_times_local: Vec<String> = next_fire_times_local,
        created_at: DateTime<Utc> = from.created_at,
        updated_at: DateTime<Utc> = from.updated_at,
    }
}

view! {
    /// One URL of a list.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = UrlEntry)]
    pub struct UrlEntryView from (from: Entry) {} {
        url: String = from.url,
        /// Where the URL stands in the list (its line in the upload that placed it).
        line: i32 = from.line,
        added_at: DateTime<Utc> = from.added_at,
        last_read_at: Option<DateTime<Utc>> = from.last_read_at,
        /// When a run last could not read the URL's page (null once one did).
        failed_at: Option<DateTime<Utc>> = from.failed_at,
        /// Why it could not.
        last_error: Option<String> = from.last_error,
    }
}
