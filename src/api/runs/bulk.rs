//! Retry or cancel many runs at once: the runs named by id, or every run a
//! listing's filters match. Each run goes through the single-run path
//! (`store::runs::retry` / `store::runs::cancel`, guarded by the run state
//! machine) and raises the same event; a run the state machine refuses is
//! reported as skipped, with why.

use axum::{Json, extract::State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    api::{ApiError, AppState, error::ErrorBody, extract::ApiJson},
    domain::{
        FieldError,
        failure::FailureKind,
        run::{CrawlRun, RunState, Transition},
    },
    store::{
        self,
        listing::MAX_LIMIT,
        runs::{RetryRefused, RunFilter},
    },
};

/// Most runs one request names by id.
pub const MAX_IDS: usize = 500;
/// Most runs one request acts on by filter; `more` tells there were others.
pub const MAX_MATCHED: usize = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BulkRunAction {
    /// Queue failed or cancelled runs again, each with a fresh attempt budget.
    Retry,
    /// Stop queued or running runs.
    Cancel,
}

/// The runs a bulk action takes: the same filters as the runs listing.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRunFilter {
    pub keyword_id: Option<i64>,
    pub url_list_id: Option<i64>,
    pub site_id: Option<i64>,
    pub state: Option<RunState>,
    pub error_kind: Option<FailureKind>,
    pub queued_after: Option<DateTime<Utc>>,
    pub queued_before: Option<DateTime<Utc>>,
}

/// Which runs, and what to do with them. Give `ids` or `filter`, not both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRunRequest {
    pub action: BulkRunAction,
    /// Runs by id (1 to 500).
    pub ids: Option<Vec<i64>>,
    /// Every run the filters match (an empty filter matches every run), newest first, at most 5000.
    pub filter: Option<BulkRunFilter>,
    /// Only count: nothing changes, the answer says what would.
    #[serde(default)]
    pub dry_run: bool,
}

/// A run the action left as it was, and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkippedRun {
    pub id: i64,
    /// `not_found`, `not_retryable` (not failed or cancelled), `pair_active`
    /// (another run of its keyword on its site is active), `already_ended`.
    pub reason: String,
    pub message: String,
}

/// What a bulk action did (or, with `dry_run`, would do).
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkRunOutcome {
    pub action: BulkRunAction,
    pub dry_run: bool,
    /// Runs named or matched.
    pub matched: usize,
    /// Runs retried or cancelled (with `dry_run`: that would be).
    pub done: usize,
    pub done_ids: Vec<i64>,
    pub skipped: Vec<SkippedRun>,
    /// More runs matched the filter than one request takes (5000): ask again.
    pub more: bool,
}

/// Retry or cancel several runs: by id, or all a filter matches. With
/// `dry_run` it only counts, so a console can ask "retry 37 failed runs?".
#[utoipa::path(post, path = "/runs/bulk", tag = "runs", security(("bearer" = [])), request_body = BulkRunRequest,
    responses((status = 200, body = BulkRunOutcome),
              (status = 422, description = "Neither or both of `ids` and `filter`, or more than 500 ids; `field` names it", body = ErrorBody),
              (status = 400, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub async fn bulk(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<BulkRunRequest>,
) -> Result<Json<BulkRunOutcome>, ApiError> {
    let (runs, missing, more) = match (request.ids, request.filter) {
        (Some(ids), None) => {
            let (runs, missing) = named(&state, ids).await?;
            (runs, missing, false)
        }
        (None, Some(filter)) => {
            let (runs, more) = matching(&state, filter).await?;
            (runs, Vec::new(), more)
        }
        (Some(_), Some(_)) => {
            return Err(FieldError::new("filter", "give ids or filter, not both").into());
        }
        (None, None) => return Err(FieldError::new("ids", "give ids or filter").into()),
    };
    let mut outcome = BulkRunOutcome {
        action: request.action,
        dry_run: request.dry_run,
        matched: runs.len() + missing.len(),
        done: 0,
        done_ids: Vec::new(),
        skipped: missing
            .into_iter()
            .map(|id| skipped(id, "not_found", format!("run {id} does not exist")))
            .collect(),
        more,
    };
    for run in runs {
        let judged = match request.action {
            BulkRunAction::Retry => retry_one(&state, &run, request.dry_run).await?,
            BulkRunAction::Cancel => cancel_one(&state, &run, request.dry_run).await?,
        };
        match judged {
            Ok(()) => outcome.done_ids.push(run.id),
            Err(skip) => outcome.skipped.push(skip),
        }
    }
    outcome.done = outcome.done_ids.len();
    outcome.skipped.sort_by_key(|s| s.id);
    Ok(Json(outcome))
}

fn skipped(id: i64, reason: &str, message: String) -> SkippedRun {
    SkippedRun {
        id,
        reason: reason.into(),
        message,
    }
}

/// The runs named, in the order given (each once), and the ids of none.
async fn named(state: &AppState, ids: Vec<i64>) -> Result<(Vec<CrawlRun>, Vec<i64>), ApiError> {
    if ids.is_empty() {
        return Err(FieldError::new("ids", "name at least one run").into());
    }
    if ids.len() > MAX_IDS {
        return Err(FieldError::new(
            "ids",
            format!("at most {MAX_IDS} runs at once, not {}", ids.len()),
        )
        .into());
    }
    let mut seen = std::collections::HashSet::new();
    let (mut runs, mut missing) = (Vec::new(), Vec::new());
    for id in ids.into_iter().filter(|id| seen.insert(*id)) {
        match store::runs::get(&state.pool, id).await? {
            Some(run) => runs.push(run),
            None => missing.push(id),
        }
    }
    Ok((runs, missing))
}

/// Every run the filter matches, newest first, up to [`MAX_MATCHED`]; and
/// whether there were more.
async fn matching(
    state: &AppState,
    filter: BulkRunFilter,
) -> Result<(Vec<CrawlRun>, bool), ApiError> {
    let mut listing = RunFilter {
        keyword_id: filter.keyword_id,
        url_list_id: filter.url_list_id,
        site_id: filter.site_id,
        state: filter.state,
        error_kind: filter.error_kind,
        queued_after: filter.queued_after,
        queued_before: filter.queued_before,
        before: None,
        limit: MAX_LIMIT,
    };
    let mut runs: Vec<CrawlRun> = Vec::new();
    loop {
        let page = store::runs::list(&state.pool, &listing).await?;
        let full = page.len() as i64 == MAX_LIMIT;
        listing.before = page.last().map(|r| r.id);
        runs.extend(page);
        if runs.len() > MAX_MATCHED {
            runs.truncate(MAX_MATCHED);
            return Ok((runs, true));
        }
        if !full {
            return Ok((runs, false));
        }
    }
}

async fn retry_one(
    state: &AppState,
    run: &CrawlRun,
    dry_run: bool,
) -> Result<Result<(), SkippedRun>, ApiError> {
    // The budget does not decide whether a run may be retried, only its state.
    if Transition::retry(run.state, run.attempt, run.max_attempts).is_none() {
        return Ok(Err(not_retryable(run.id, run.state.as_str())));
    }
    if dry_run {
        return Ok(Ok(()));
    }
    match store::runs::retry(&state.pool, run.id, state.default_max_attempts).await? {
        None => Ok(Err(skipped(
            run.id,
            "not_found",
            format!("run {} does not exist", run.id),
        ))),
        Some(Ok(retried)) => {
            state.events.run_updated(&retried).await;
            Ok(Ok(()))
        }
        Some(Err(refused @ RetryRefused::PairActive)) => {
            Ok(Err(skipped(run.id, "pair_active", refused.to_string())))
        }
        Some(Err(RetryRefused::NotEnded(now))) => Ok(Err(not_retryable(run.id, now))),
    }
}

fn not_retryable(id: i64, state: &str) -> SkippedRun {
    skipped(
        id,
        "not_retryable",
        format!("only a failed or cancelled run can be retried; this one is {state}"),
    )
}

async fn cancel_one(
    state: &AppState,
    run: &CrawlRun,
    dry_run: bool,
) -> Result<Result<(), SkippedRun>, ApiError> {
    if !Transition::cancel(run.attempt).from.contains(&run.state) {
        return Ok(Err(already_ended(run.id, run.state)));
    }
    if dry_run {
        return Ok(Ok(()));
    }
    match store::runs::cancel(&state.pool, run.id).await? {
        None => Ok(Err(skipped(
            run.id,
            "not_found",
            format!("run {} does not exist", run.id),
        ))),
        Some(cancelled) if cancelled.state == RunState::Cancelled => {
            state.events.run_updated(&cancelled).await;
            Ok(Ok(()))
        }
        // It ended on its own meanwhile.
        Some(ended) => Ok(Err(already_ended(run.id, ended.state))),
    }
}

fn already_ended(id: i64, state: RunState) -> SkippedRun {
    skipped(
        id,
        "already_ended",
        format!("only a queued or running run can be cancelled; this one is {state}"),
    )
}
