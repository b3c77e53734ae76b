//! A site's repairs: what workers proposed when its runs went bad (each
//! with its evidence), and a person's decision. Accepting one makes it the
//! site's next version (`repaired`) and queues the failing run's keyword
//! again; rejecting keeps it, decided. The repairs themselves are made on
//! workers, never here.

use std::collections::BTreeMap;

use axum::{Extension, Json, extract::State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{check_reachable, versions::changed_by, view::FieldView};
use crate::{
    api::{
        ApiError, AppState,
        auth::TokenKey,
        error::ErrorBody,
        extract::{ApiQuery, Id, SiteRepair},
        page_limit,
    },
    domain::{
        repair::{RepairEvidence, RepairState, repaired},
        site::CssSelector,
    },
    store::{
        self,
        repairs::{Applied, Decision, Repair},
    },
};

/// A repair of a site, as shown.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Repair)]
struct RepairView {
    id: i64,
    site_id: i64,
    /// The site version the failing run read.
    base_version: i32,
    /// The run that went bad.
    run_id: Option<i64>,
    state: RepairState,
    /// The proposal: the item selector, and each field as the site would
    /// read it.
    item_selector: Option<String>,
    fields: Option<BTreeMap<String, FieldView>>,
    /// The good run's items and the proposal's, the field changes, and how
    /// each verification went.
    evidence: Option<RepairEvidence>,
    /// Why there is no proposal, or why it was rolled back.
    verdict: Option<String>,
    /// The version it became, once accepted or applied.
    applied_version: Option<i32>,
    decided_by: Option<String>,
    worker_id: Option<String>,
    started_at: DateTime<Utc>,
    proposed_at: Option<DateTime<Utc>>,
    decided_at: Option<DateTime<Utc>>,
}

impl From<Repair> for RepairView {
    fn from(r: Repair) -> Self {
        RepairView {
            id: r.id,
            site_id: r.site_id,
            base_version: r.base_version,
            run_id: r.run_id,
            state: r.state,
            item_selector: r.item_selector,
            fields: r
                .fields
                .map(|f| f.0.iter().map(|(n, f)| (n.clone(), f.into())).collect()),
            evidence: r.evidence.map(|e| e.0),
            verdict: r.verdict,
            applied_version: r.applied_version,
            decided_by: r.decided_by,
            worker_id: r.worker_id,
            started_at: r.started_at,
            proposed_at: r.proposed_at,
            decided_at: r.decided_at,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RepairsQuery {
    /// Only the repair made after this run went bad.
    run_id: Option<i64>,
    /// At most this many (default 100).
    limit: Option<i64>,
}

/// A site's repairs, newest first (one per site version whose runs went
/// bad), each with its proposal and evidence, or why none was found.
#[utoipa::path(get, path = "/sites/{id}/repairs", tag = "sites", security(("bearer" = [])),
    params(("id" = i64, Path), RepairsQuery),
    responses((status = 200, body = Vec<RepairView>), (status = 404, body = ErrorBody),
              (status = 400, description = "A bad limit", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody)))]
async fn list_repairs(
    State(state): State<AppState>,
    Id(id): Id,
    ApiQuery(query): ApiQuery<RepairsQuery>,
) -> Result<Json<Vec<RepairView>>, ApiError> {
    let limit = page_limit(query.limit)?;
    if !store::sites::exists(&state.pool, id).await? {
        return Err(ApiError::not_found("site", id));
    }
    let repairs = store::repairs::list(&state.pool, id, query.run_id, limit).await?;
    Ok(Json(repairs.into_iter().map(RepairView::from).collect()))
}

/// What accepting a repair did.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RepairAccepted)]
struct AcceptedView {
    /// The site's version now (`repaired`).
    version: i32,
    /// The run queued to crawl the failing run's keyword again (none when a
    /// run of it is active already, or the site is disabled).
    run_id: Option<i64>,
}

/// Accept a proposed repair: the site, read with its selectors, becomes
/// the next version (`repaired`, by this token) and the failing run's
/// keyword is queued again on the site.
#[utoipa::path(post, path = "/sites/{id}/repairs/{repair_id}/accept", tag = "sites", security(("bearer" = [])),
    params(("id" = i64, Path), ("repair_id" = i64, Path)),
    responses((status = 200, body = AcceptedView), (status = 404, body = ErrorBody),
              (status = 409, description = "Decided already, or the site changed since the failing run", body = ErrorBody),
              (status = 422, description = "Today's rules refuse the repaired site", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn accept_repair(
    State(state): State<AppState>,
    path: SiteRepair,
    token: Option<Extension<TokenKey>>,
) -> Result<Json<AcceptedView>, ApiError> {
    let repair = found(&state, &path).await?;
    open(repair.state)?;
    let key = state.session_key.as_ref();
    let site = store::sites::get(&state.pool, path.site_id, key)
        .await?
        .ok_or_else(|| ApiError::not_found("site", path.site_id))?;
    let selector = repair.item_selector.as_deref().unwrap_or_default();
    let proposed = CssSelector::parse(selector, "item_selector")
        .ok()
        .zip(repair.fields.as_ref())
        .and_then(|(item, fields)| repaired(&site.spec, &item, &fields.0))
        .ok_or_else(|| ApiError::Conflict {
            message: "the proposal no longer fits the site (it reads items another way now)".into(),
            field: Some("repair_id".into()),
        })?;
    check_reachable(&state, &proposed).await?;
    let decision = Decision {
        decided_by: changed_by(token),
        state: RepairState::Accepted,
        max_attempts: state.default_max_attempts,
    };
    match store::repairs::apply(&state.pool, key, path.repair_id, &proposed, &decision).await? {
        Applied::Done { version, run_id } => Ok(Json(AcceptedView { version, run_id })),
        other => Err(not_applied(other, &path)),
    }
}

/// Reject a proposed repair: it is kept, with its evidence, and not applied.
#[utoipa::path(post, path = "/sites/{id}/repairs/{repair_id}/reject", tag = "sites", security(("bearer" = [])),
    params(("id" = i64, Path), ("repair_id" = i64, Path)),
    responses((status = 200, body = RepairView), (status = 404, body = ErrorBody),
              (status = 409, description = "Decided already", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn reject_repair(
    State(state): State<AppState>,
    path: SiteRepair,
    token: Option<Extension<TokenKey>>,
) -> Result<Json<RepairView>, ApiError> {
    open(found(&state, &path).await?.state)?;
    let by = changed_by(token);
    match store::repairs::reject(&state.pool, path.repair_id, by.as_deref()).await? {
        Applied::Done { .. } => Ok(Json(found(&state, &path).await?.into())),
        other => Err(not_applied(other, &path)),
    }
}

/// The repair `path` names, or a 404 naming the site or the repair.
async fn found(state: &AppState, path: &SiteRepair) -> Result<Repair, ApiError> {
    match store::repairs::get(&state.pool, path.site_id, path.repair_id).await? {
        Some(repair) => Ok(repair),
        None if store::sites::exists(&state.pool, path.site_id).await? => Err(ApiError::NotFound(
            format!("site {} has no repair {}", path.site_id, path.repair_id),
        )),
        None => Err(ApiError::not_found("site", path.site_id)),
    }
}

/// A 409 unless the repair waits for a decision.
fn open(state: RepairState) -> Result<(), ApiError> {
    match state.is_open() {
        true => Ok(()),
        false => Err(decided(state)),
    }
}

fn decided(state: RepairState) -> ApiError {
    ApiError::Conflict {
        message: format!("the repair is {state}, not proposed: it cannot be decided again"),
        field: Some("repair_id".into()),
    }
}

fn not_applied(outcome: Applied, path: &SiteRepair) -> ApiError {
    match outcome {
        Applied::NotOpen(state) => decided(state),
        Applied::SiteMoved { now } => ApiError::Conflict {
            message: format!(
                "the site changed since the failing run (it is at version {now}): \
                 the repair is of an older version"
            ),
            field: Some("repair_id".into()),
        },
        Applied::Gone | Applied::Done { .. } => ApiError::not_found("site", path.site_id),
    }
}

pub(super) fn router() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new()
        .routes(routes!(list_repairs))
        .routes(routes!(accept_repair))
        .routes(routes!(reject_repair))
}
