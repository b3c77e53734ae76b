//! A site's versions: list them, read one as the site it reads as, compare
//! two, and bring one back (a restore is a change like an edit: checked by
//! the same rules, recorded as a new version).

use axum::{Extension, Json, extract::State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{check_reachable, name_taken, view::SiteView};
use crate::{
    api::{
        ApiError, AppState, Page,
        auth::TokenKey,
        error::ErrorBody,
        extract::{ApiQuery, Id, SiteVersion},
        page_limit, parse_cursor,
    },
    domain::site::{Difference, VersionReason, differences},
    store::{
        self,
        sites::{
            Revision,
            versions::{self, Version},
        },
    },
};

/// Who made a change: the token's name, when the api has tokens.
pub(super) fn changed_by(token: Option<Extension<TokenKey>>) -> Option<String> {
    token.map(|Extension(key)| key.name())
}

/// A version of a site, as listed.
#[derive(Debug, Serialize, ToSchema)]
struct VersionView {
    version: i32,
    reason: VersionReason,
    /// For a restore: the version it brought back.
    #[serde(skip_serializing_if = "Option::is_none")]
    restored_from: Option<i32>,
    /// The token that made the change (`token:` and a prefix of its
    /// digest), when the api has tokens.
    changed_by: Option<String>,
    created_at: DateTime<Utc>,
}

impl From<&Version> for VersionView {
    fn from(v: &Version) -> Self {
        VersionView {
            version: v.version,
            reason: v.reason,
            restored_from: v.restored_from,
            changed_by: v.changed_by.clone(),
            created_at: v.created_at,
        }
    }
}

/// A version in a listing, with what it changed from the one before it.
#[derive(Debug, Serialize, ToSchema)]
struct ListedVersion {
    #[serde(flatten)]
    version: VersionView,
    /// Where it differs from the version before it (all of it for the
    /// first version listed of a site: it had none before).
    changes: Vec<DifferenceView>,
}

/// One place two versions differ.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = VersionChange)]
struct DifferenceView {
    /// The setting, by its stored name (`item_selector`,
    /// `fields.price.selector`).
    path: String,
    #[schema(value_type = Option<Object>)]
    before: Option<serde_json::Value>,
    #[schema(value_type = Option<Object>)]
    after: Option<serde_json::Value>,
}

impl From<Difference> for DifferenceView {
    fn from(d: Difference) -> Self {
        DifferenceView {
            path: d.path,
            before: d.before,
            after: d.after,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct VersionsQuery {
    /// Versions older than this one (the `next_cursor` of the page before).
    cursor: Option<String>,
    /// At most this many (default 100).
    limit: Option<i64>,
}

/// A site's versions, newest first: why each was made, by which token, and
/// what it changed.
#[utoipa::path(get, path = "/sites/{id}/versions", tag = "sites", security(("bearer" = [])),
    params(("id" = i64, Path), VersionsQuery),
    responses((status = 200, body = Page<ListedVersion>), (status = 404, body = ErrorBody),
              (status = 400, description = "A bad cursor or limit", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody)))]
async fn list_versions(
    State(state): State<AppState>,
    Id(id): Id,
    ApiQuery(query): ApiQuery<VersionsQuery>,
) -> Result<Json<Page<ListedVersion>>, ApiError> {
    let limit = page_limit(query.limit)?;
    let before: Option<i32> = parse_cursor(query.cursor.as_deref())?;
    if !store::sites::exists(&state.pool, id).await? {
        return Err(ApiError::not_found("site", id));
    }
    // One more than shown: the oldest shown is compared with the one before it.
    let mut found = versions::list(&state.pool, id, before, limit + 1).await?;
    let more = found.len() as i64 > limit;
    let empty = serde_json::json!({});
    let items = (0..found.len().min(limit as usize))
        .map(|i| {
            let older = found.get(i + 1).map_or(&empty, |v| &v.snapshot);
            ListedVersion {
                version: (&found[i]).into(),
                changes: differences(older, &found[i].snapshot)
                    .into_iter()
                    .map(DifferenceView::from)
                    .collect(),
            }
        })
        .collect::<Vec<_>>();
    found.truncate(limit as usize);
    Ok(Json(Page {
        next_cursor: more
            .then(|| found.last().map(|v| v.version.to_string()))
            .flatten(),
        items,
        cut_at_bytes: None,
    }))
}

/// One version, and the site as it reads it (today's header values and
/// proxy, which versions do not keep).
#[derive(Debug, Serialize, ToSchema)]
struct VersionDetail {
    #[serde(flatten)]
    version: VersionView,
    site: SiteView,
}

/// One version of a site.
#[utoipa::path(get, path = "/sites/{id}/versions/{version}", tag = "sites", security(("bearer" = [])),
    params(("id" = i64, Path), ("version" = i32, Path)),
    responses((status = 200, body = VersionDetail), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody)))]
async fn show_version(
    State(state): State<AppState>,
    path: SiteVersion,
) -> Result<Json<VersionDetail>, ApiError> {
    let (version, site) = found_version(&state, &path).await?;
    Ok(Json(VersionDetail {
        version: (&version).into(),
        site: site.into(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DiffQuery {
    /// The version to compare with (default: the site's current one).
    to: Option<i32>,
}

/// Where two versions differ.
#[derive(Debug, Serialize, ToSchema)]
struct VersionDiff {
    from: i32,
    to: i32,
    changes: Vec<DifferenceView>,
}

/// What changed from one version of a site to another (by default, to the
/// version the site is at).
#[utoipa::path(get, path = "/sites/{id}/versions/{version}/diff", tag = "sites", security(("bearer" = [])),
    params(("id" = i64, Path), ("version" = i32, Path), DiffQuery),
    responses((status = 200, body = VersionDiff), (status = 404, description = "No such site, or no such version (either side)", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody)))]
async fn diff_versions(
    State(state): State<AppState>,
    path: SiteVersion,
    ApiQuery(query): ApiQuery<DiffQuery>,
) -> Result<Json<VersionDiff>, ApiError> {
    let (from, site) = found_version(&state, &path).await?;
    let to = query.to.unwrap_or(current_version(&state, site.id).await?);
    let other = SiteVersion {
        site_id: path.site_id,
        version: to,
    };
    let (to_version, _) = found_version(&state, &other).await?;
    Ok(Json(VersionDiff {
        from: from.version,
        to,
        changes: differences(&from.snapshot, &to_version.snapshot)
            .into_iter()
            .map(DifferenceView::from)
            .collect(),
    }))
}

/// Bring an earlier version back: its spec, checked by today's rules (a
/// search URL the guard now refuses is refused), becomes the site's next
/// version (`restored`); header values and the proxy stay today's. The
/// version the site is at already changes nothing.
#[utoipa::path(post, path = "/sites/{id}/versions/{version}/restore", tag = "sites", security(("bearer" = [])),
    params(("id" = i64, Path), ("version" = i32, Path)),
    responses((status = 200, body = SiteView), (status = 404, body = ErrorBody), (status = 409, description = "Its name is another site's now", body = ErrorBody),
              (status = 422, description = "Today's rules refuse it; `field` names the setting", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn restore_version(
    State(state): State<AppState>,
    path: SiteVersion,
    token: Option<Extension<TokenKey>>,
) -> Result<Json<SiteView>, ApiError> {
    let (version, site) = found_version(&state, &path).await?;
    check_reachable(&state, &site.spec).await?;
    let revision = Revision {
        reason: VersionReason::Restored,
        restored_from: Some(version.version),
        changed_by: changed_by(token),
    };
    let key = state.session_key.as_ref();
    match store::sites::update(&state.pool, site.id, &site.spec, key, &revision).await {
        Ok(Some(site)) => Ok(Json(site.into())),
        Ok(None) => Err(ApiError::not_found("site", path.site_id)),
        Err(e) if store::violates(&e, super::NAME_TAKEN) => Err(name_taken()),
        Err(e) => Err(e.into()),
    }
}

/// The version `path` names, or a 404 naming the site or the version.
async fn found_version(
    state: &AppState,
    path: &SiteVersion,
) -> Result<(Version, crate::domain::site::Site), ApiError> {
    let key = state.session_key.as_ref();
    match versions::get(&state.pool, path.site_id, path.version, key).await? {
        Some(found) => Ok(found),
        None if store::sites::exists(&state.pool, path.site_id).await? => Err(ApiError::NotFound(
            format!("site {} has no version {}", path.site_id, path.version),
        )),
        None => Err(ApiError::not_found("site", path.site_id)),
    }
}

async fn current_version(state: &AppState, id: i64) -> Result<i32, ApiError> {
    store::sites::get(&state.pool, id, state.session_key.as_ref())
        .await?
        .map(|site| site.version)
        .ok_or_else(|| ApiError::not_found("site", id))
}

pub(super) fn router() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new()
        .routes(routes!(list_versions))
        .routes(routes!(show_version))
        .routes(routes!(diff_versions))
        .routes(routes!(restore_version))
}
