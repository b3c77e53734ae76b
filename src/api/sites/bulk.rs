//! POST /api/sites/enabled: enable or disable many sites at once, each
//! through the single-site update path, so each change is a version of its
//! site (reason `edited`, by the token's name).

use axum::{Extension, Json, extract::State};

use crate::{
    api::{
        ApiError, AppState,
        auth::TokenKey,
        bulk::{BulkEnableOutcome, BulkEnableRequest},
        error::ErrorBody,
        extract::ApiJson,
    },
    domain::site::{Site, VersionReason},
    store::{self, sites::Revision},
};

use super::versions;

/// Enable or disable several sites: by id, or all. A disabled site is not
/// queued for its keywords. With `dry_run` it only counts.
#[utoipa::path(post, path = "/sites/enabled", tag = "sites", security(("bearer" = [])), request_body = BulkEnableRequest,
    responses((status = 200, body = BulkEnableOutcome),
              (status = 422, description = "Neither or both of `ids` and `all`, or more than 500 ids; `field` names it", body = ErrorBody),
              (status = 400, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub async fn set_enabled(
    State(state): State<AppState>,
    token: Option<Extension<TokenKey>>,
    ApiJson(request): ApiJson<BulkEnableRequest>,
) -> Result<Json<BulkEnableOutcome>, ApiError> {
    let key = state.session_key.as_ref();
    let sites: Vec<(i64, Option<Site>)> = match request.targets()? {
        None => store::sites::list(&state.pool, key)
            .await?
            .into_iter()
            .map(|site| (site.id, Some(site)))
            .collect(),
        Some(ids) => {
            let mut sites = Vec::new();
            for id in ids {
                sites.push((id, store::sites::get(&state.pool, id, key).await?));
            }
            sites
        }
    };
    let mut outcome = request.outcome();
    let revision = Revision::new(VersionReason::Edited, versions::changed_by(token));
    for (id, site) in sites {
        let Some(site) = site else {
            outcome.missing(id);
            continue;
        };
        if !outcome.judge(id, site.spec.enabled) || request.dry_run {
            continue;
        }
        let mut spec = site.spec;
        spec.enabled = request.enabled;
        store::sites::update(&state.pool, id, &spec, key, &revision).await?;
    }
    Ok(Json(outcome))
}
