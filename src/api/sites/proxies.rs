//! A site's proxies and how each is doing, as the fleet recorded it: which
//! are retired and until when, their pages and refusals, their last error.
//! Every member is shown masked.

use axum::{Json, extract::State};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::super::{ApiError, AppState, error::ErrorBody, extract::Id};
use crate::{
    domain::site::metric_label,
    store::{self, proxy_health::ProxyHealth},
};

/// One member of a site's proxy pool and its health.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = ProxyMember)]
pub struct ProxyMemberView {
    /// The member, its user name and password masked (`***`).
    pub url: String,
    /// `host:port`, as the `crawlfleet_proxy_*` metrics label it.
    pub label: String,
    pub weight: u32,
    /// `active`, or `retired` (it drew refusals; it returns at `retired_until`).
    pub state: String,
    pub retired_until: Option<DateTime<Utc>>,
    /// Retirements in a row: each doubles the back-off; a page through it resets them.
    pub consecutive_retirements: i32,
    pub pages: i64,
    pub refusals: i64,
    /// The last refusal, credentials masked.
    pub last_error: Option<String>,
}

/// Every proxy of a site's pool (its `proxy` is a pool of one), in pool order,
/// with the health the fleet shares: retired members are skipped by every
/// worker until they return.
#[utoipa::path(get, path = "/sites/{id}/proxies", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = Vec<ProxyMemberView>), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn proxies(
    State(state): State<AppState>,
    Id(id): Id,
) -> Result<Json<Vec<ProxyMemberView>>, ApiError> {
    let site = store::sites::get(&state.pool, id, state.session_key.as_ref())
        .await?
        .ok_or_else(|| ApiError::not_found("site", id))?;
    let Some(pool) = site.spec.identity.egress() else {
        return Ok(Json(Vec::new()));
    };
    let health = store::proxy_health::for_site(&state.pool, id).await?;
    let now = Utc::now();
    let members = pool
        .members()
        .iter()
        .map(|member| {
            let address = member.proxy.address();
            let seen = health.iter().find(|h| h.proxy == address);
            let retired = seen.is_some_and(|h| h.is_retired(now));
            let seen = seen.cloned().unwrap_or(ProxyHealth {
                proxy: address,
                pages: 0,
                refusals: 0,
                consecutive: 0,
                retired_until: None,
                last_error: None,
            });
            ProxyMemberView {
                url: member.proxy.masked(),
                label: metric_label(&member.proxy),
                weight: member.weight,
                state: if retired { "retired" } else { "active" }.to_owned(),
                retired_until: seen.retired_until.filter(|_| retired),
                consecutive_retirements: seen.consecutive,
                pages: seen.pages,
                refusals: seen.refusals,
                last_error: seen.last_error,
            }
        })
        .collect();
    Ok(Json(members))
}
