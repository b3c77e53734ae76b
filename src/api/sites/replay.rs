//! `POST /api/sites/{id}/replay`: a site's extraction (a stored version, or
//! an edit not saved yet) over its saved pages, fetching nothing: per saved
//! run and page, the items it would store and how they differ from what the
//! run stored. Extraction is the worker's (the api never runs it): the
//! request goes to a worker through the http lane, as a preview does
//! (`queue::preview`), and the api waits for the answer.

use axum::{Json, extract::State};
use serde::Deserialize;
use utoipa::ToSchema;

use super::restore_stored_secrets;
use crate::{
    api::{
        ApiError, AppState,
        error::ErrorBody,
        extract::{ApiJson, Id},
    },
    domain::{
        FieldError,
        replay::{MAX_REPLAY_PAGES, ReplayOutcome, ReplayRequest, ReplaySource},
        site::SiteInput,
    },
    queue::{self, Job, Lane, preview},
    store::{self, sealing},
};
use apalis::prelude::TaskSink;

/// What to replay: `version` (a stored version of the site) or `spec` (a
/// site body as `PUT /api/sites/{id}` takes it, not saved), one of them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplayBody {
    version: Option<i32>,
    spec: Option<SiteInput>,
}

/// Replay a site's extraction over its saved pages (the list pages of its
/// last healthy runs, docs/saved-pages.md), fetching nothing: for each saved
/// run (newest first, at most 40 pages in all) and page, the items the
/// extraction would store and the diff against what the run stored (items
/// `added`, `removed`, and `changed` fields with `before` and `after`). A
/// worker of the http lane runs it, each page within the extraction budget.
#[utoipa::path(post, path = "/sites/{id}/replay", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    request_body = ReplayBody,
    responses((status = 200, body = ReplayOutcome), (status = 404, description = "No such site", body = ErrorBody),
              (status = 422, description = "Neither or both of `version` and `spec`, no such `version`, or a rule of the site broken (`spec.item_selector`...)", body = ErrorBody),
              (status = 503, description = "No worker answered within PREVIEW_TIMEOUT_SECS", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn replay(
    State(state): State<AppState>,
    Id(id): Id,
    ApiJson(body): ApiJson<ReplayBody>,
) -> Result<Json<ReplayOutcome>, ApiError> {
    if !store::sites::exists(&state.pool, id).await? {
        return Err(ApiError::not_found("site", id));
    }
    let source = match (body.version, body.spec) {
        (Some(version), None) => {
            let key = state.session_key.as_ref();
            if store::sites::versions::get(&state.pool, id, version, key)
                .await?
                .is_none()
            {
                let why = format!("site {id} has no version {version}");
                return Err(FieldError::new("version", why).into());
            }
            ReplaySource::Version(version)
        }
        (None, Some(mut site)) => {
            restore_stored_secrets(&state, id, &mut site)
                .await
                .map_err(of_the_spec)?;
            site.clone()
                .parse()
                .map_err(|e| of_the_spec(ApiError::Invalid(e)))?;
            // Nothing is fetched: the site's identity does not travel.
            site.headers = None;
            site.proxy = None;
            site.proxy_pool = None;
            ReplaySource::Site(Box::new(site))
        }
        _ => {
            let why = "give either `version` (a stored version) or `spec` (a site), one of them";
            return Err(FieldError::new("version", why).into());
        }
    };
    let replay_id: u64 = rand::random();
    let request = ReplayRequest {
        site_id: id,
        source,
        max_pages: MAX_REPLAY_PAGES,
        deadline: chrono::Utc::now() + state.preview_timeout,
    };
    let plain = serde_json::to_vec(&request).expect("a replay request serializes");
    let request = match &state.session_key {
        Some(key) => sealing::seal(key, &preview::sealed_to(replay_id), &plain).into_bytes(),
        None => plain,
    };
    let mut conn = state.redis.clone();
    let wait = state.preview_timeout;
    preview::leave_request(&mut conn, &state.queue_name, replay_id, &request, wait).await?;
    let lane = Lane::Http;
    let mut lane_queue = queue::storage(conn.clone(), &lane.queue_name(&state.queue_name), 1);
    lane_queue
        .push(Job::ReplayV1 { replay_id })
        .await
        .map_err(|e| anyhow::anyhow!("pushing a replay job: {e:?}"))?;
    let answer = preview::wait_for_answer(&mut conn, &state.queue_name, replay_id, wait).await?;
    let Some(answer) = answer else {
        preview::withdraw_request(&mut conn, &state.queue_name, replay_id).await?;
        return Err(ApiError::Overloaded(format!(
            "no worker answered the replay within {} s: are workers of the http lane running, and free?",
            wait.as_secs()
        )));
    };
    let outcome: ReplayOutcome = serde_json::from_slice(&answer)
        .map_err(|e| anyhow::anyhow!("reading a worker's replay answer: {e}"))?;
    Ok(Json(outcome))
}

/// An error about the site's fields, named as fields of `spec`.
fn of_the_spec(e: ApiError) -> ApiError {
    match e {
        ApiError::Invalid(mut e) => {
            e.field = format!("spec.{}", e.field);
            e.into()
        }
        other => other,
    }
}
