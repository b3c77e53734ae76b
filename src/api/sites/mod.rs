//! Sites: create, read, replace, delete, forget a kept session, try one on a
//! worker before saving it (`preview`), see the health of its proxies (`proxies`), learn its
//! selectors from example values on a worker (`learn`; both through a lane: `lane`), their
//! versions (`versions`: every change recorded, compared and restorable), and the repairs
//! workers proposed when their markup changed (`repairs`). A request body parses straight
//! into the domain's `SiteInput`, whose `parse` checks every rule.

mod bulk;
mod lane;
mod learn;
mod preview;
mod proxies;
mod repairs;
mod replay;
mod versions;
mod view;

use axum::{Extension, Json, extract::State, http::StatusCode};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    ApiError, AppState, Page,
    auth::TokenKey,
    error::ErrorBody,
    extract::{ApiJson, Id},
};
use crate::{
    domain::{
        FieldError,
        site::{MASK, SearchUrlTemplate, SiteInput, SiteSpec, VersionReason, restore_masked},
    },
    store::{
        self,
        sites::{DeleteOutcome, LoadError, Revision},
    },
};
use view::{SiteHealthView, SiteView};

/// Longest a scrape waits for the site health gauge.
const HEALTH_GAUGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl From<LoadError> for ApiError {
    fn from(e: LoadError) -> Self {
        ApiError::Internal(anyhow::Error::new(e).context("reading a site"))
    }
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(bulk::set_enabled))
        .routes(routes!(show, update, delete))
        .routes(routes!(forget_session))
        .routes(routes!(health))
        .routes(routes!(health_of_all))
        .routes(routes!(proxies::proxies))
        .routes(routes!(preview::preview))
        .routes(routes!(learn::learn))
        .routes(routes!(replay::replay))
        .merge(versions::router())
        .merge(repairs::router())
}

/// The rules a site must pass beyond its own: where it points must be a
/// target crawlfleet may reach (the SSRF guard), and a kept session, header
/// values and proxy credentials need the key that seals them.
async fn check_reachable(state: &AppState, spec: &SiteSpec) -> Result<(), ApiError> {
    // A name that does not resolve from here may resolve for the workers:
    // they judge every connection they open, so it is let through.
    let sample = spec.search_url.sample_url();
    if let Err(refused) = state.guard.check(&sample).await
        && !refused.may_pass_later()
    {
        return Err(FieldError::new("search_url", refused.to_string()).into());
    }
    if let Some(proxy) = &spec.identity.proxy
        && let Err(refused) = state.guard.addresses(proxy.host(), proxy.port()).await
        && !refused.may_pass_later()
    {
        return Err(FieldError::new("proxy", refused.to_string()).into());
    }
    for (i, member) in spec
        .identity
        .pool
        .iter()
        .flat_map(|p| p.members())
        .enumerate()
    {
        let proxy = &member.proxy;
        if let Err(refused) = state.guard.addresses(proxy.host(), proxy.port()).await
            && !refused.may_pass_later()
        {
            let field = format!("proxy_pool.members[{i}].url");
            return Err(FieldError::new(field, refused.to_string()).into());
        }
    }
    if state.session_key.is_none() {
        let needs_key = |field: &str, what: &str| {
            FieldError::new(
                field,
                format!(
                    "{what} SESSION_KEY set on the api and the workers (the key that seals them)"
                ),
            )
        };
        if spec.session.keep {
            return Err(needs_key("keep_session", "a kept session needs").into());
        }
        if !spec.identity.headers.is_empty() {
            return Err(needs_key(
                "headers",
                "header values are secrets kept sealed: they need",
            )
            .into());
        }
        if spec.identity.has_secrets() {
            let field = match spec.identity.pool {
                Some(_) => "proxy_pool",
                None => "proxy",
            };
            return Err(needs_key(
                field,
                "proxy credentials are secrets kept sealed: they need",
            )
            .into());
        }
    }
    Ok(())
}

/// Whether the input carries a secret in the masked form a response shows.
fn masks(input: &SiteInput) -> bool {
    input
        .headers
        .iter()
        .flatten()
        .any(|(_, value)| value == MASK)
        || input.proxy.as_deref().is_some_and(|p| p.contains(MASK))
        || input.proxy_pool.as_ref().is_some_and(|p| p.masks())
}

const NAME_TAKEN: &str = "sites_name_key";

fn name_taken() -> ApiError {
    ApiError::Conflict {
        message: "a site with this name already exists".into(),
        field: Some("name".into()),
    }
}

/// Create a site. Its items are the elements `item_selector` finds, or the
/// structured items (JSON-LD, microdata) of the type `structured_items`
/// names; each field reads markup (`selector`, `attr`), structured data
/// (`structured`) or, for a JSON API, a `pointer`.
#[utoipa::path(post, path = "/sites", tag = "sites", security(("bearer" = [])), request_body = SiteInput,
    responses((status = 201, body = SiteView), (status = 409, description = "Name taken", body = ErrorBody),
              (status = 422, description = "A rule broken; `field` names it (`item_selector`, `structured_items`, `fields.price.structured`)", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn create(
    State(state): State<AppState>,
    token: Option<Extension<TokenKey>>,
    ApiJson(input): ApiJson<SiteInput>,
) -> Result<(StatusCode, Json<SiteView>), ApiError> {
    let spec = input.parse()?;
    check_reachable(&state, &spec).await?;
    let revision = Revision::new(VersionReason::Created, versions::changed_by(token));
    let key = state.session_key.as_ref();
    match store::sites::create(&state.pool, &spec, key, &revision).await {
        Ok(site) => Ok((StatusCode::CREATED, Json(site.into()))),
        Err(e) if store::violates(&e, NAME_TAKEN) => Err(name_taken()),
        Err(e) => Err(e.into()),
    }
}

/// Every site.
#[utoipa::path(get, path = "/sites", tag = "sites", security(("bearer" = [])),
    responses((status = 200, body = Page<SiteView>), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn list(State(state): State<AppState>) -> Result<Json<Page<SiteView>>, ApiError> {
    let sites = store::sites::list(&state.pool, state.session_key.as_ref()).await?;
    Ok(Json(Page {
        items: sites.into_iter().map(SiteView::from).collect(),
        next_cursor: None,
        cut_at_bytes: None,
    }))
}

/// One site.
#[utoipa::path(get, path = "/sites/{id}", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = SiteView), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn show(State(state): State<AppState>, Id(id): Id) -> Result<Json<SiteView>, ApiError> {
    store::sites::get(&state.pool, id, state.session_key.as_ref())
        .await?
        .map(|site| Json(site.into()))
        .ok_or_else(|| ApiError::not_found("site", id))
}

/// Replace a site.
#[utoipa::path(put, path = "/sites/{id}", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    request_body = SiteInput,
    responses((status = 200, body = SiteView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 422, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn update(
    State(state): State<AppState>,
    Id(id): Id,
    token: Option<Extension<TokenKey>>,
    ApiJson(mut input): ApiJson<SiteInput>,
) -> Result<Json<SiteView>, ApiError> {
    restore_stored_secrets(&state, id, &mut input).await?;
    let spec = input.parse()?;
    check_reachable(&state, &spec).await?;
    let revision = Revision::new(VersionReason::Edited, versions::changed_by(token));
    let key = state.session_key.as_ref();
    match store::sites::update(&state.pool, id, &spec, key, &revision).await {
        Ok(Some(site)) => Ok(Json(site.into())),
        Ok(None) => Err(ApiError::not_found("site", id)),
        Err(e) if store::violates(&e, NAME_TAKEN) => Err(name_taken()),
        Err(e) => Err(e.into()),
    }
}

/// Secrets sent back in the masked form a response showed them in keep
/// stored site `id`'s values, while they would go where they went before
/// (`restore_masked`: the search URL's origin, the proxy); 404 when there is
/// no such site, 422 naming the field whose value must be sent again.
async fn restore_stored_secrets(
    state: &AppState,
    id: i64,
    input: &mut SiteInput,
) -> Result<(), ApiError> {
    if !store::sites::exists(&state.pool, id).await? {
        return Err(ApiError::not_found("site", id));
    }
    if !masks(input) {
        return Ok(());
    }
    // Where the headers would go: a search URL that does not parse is
    // refused as creating the site would refuse it.
    let search_url = SearchUrlTemplate::parse(&input.search_url)?;
    let stored = match store::sites::get(&state.pool, id, state.session_key.as_ref()).await {
        Ok(Some(site)) => site,
        Ok(None) => return Err(ApiError::not_found("site", id)),
        Err(LoadError::Secrets { source, .. }) => {
            return Err(ApiError::Conflict {
                message: format!("{source}; send the real header values and proxy"),
                field: Some("headers".into()),
            });
        }
        Err(e) => return Err(e.into()),
    };
    restore_masked(
        &mut input.headers,
        &mut input.proxy,
        &mut input.proxy_pool,
        &search_url,
        &stored.spec.identity,
        &stored.spec.search_url,
    )?;
    Ok(())
}

/// Delete a site with its runs and results (409 while it has active runs).
#[utoipa::path(delete, path = "/sites/{id}", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn delete(State(state): State<AppState>, Id(id): Id) -> Result<StatusCode, ApiError> {
    match store::sites::delete(&state.pool, id).await? {
        DeleteOutcome::Deleted => Ok(StatusCode::NO_CONTENT),
        DeleteOutcome::NotFound => Err(ApiError::not_found("site", id)),
        DeleteOutcome::HasActiveRuns(n) => Err(ApiError::Conflict {
            message: format!(
                "site {id} has {n} active run(s); cancel them or wait for them to end"
            ),
            field: None,
        }),
    }
}

/// How a site is doing: last success, success and blocked rates over 24 h,
/// and the items its last 20 completed runs found.
#[utoipa::path(get, path = "/sites/{id}/health", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 200, body = SiteHealthView), (status = 404, body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn health(
    State(state): State<AppState>,
    Id(id): Id,
) -> Result<Json<SiteHealthView>, ApiError> {
    store::sites::health(&state.pool, id)
        .await?
        .map(|health| Json(health.into()))
        .ok_or_else(|| ApiError::not_found("site", id))
}

/// Every site's health (as `/sites/{id}/health`), in id order: which sites
/// are failing or blocked now.
#[utoipa::path(get, path = "/sites/health", tag = "sites", security(("bearer" = [])),
    responses((status = 200, body = Vec<SiteHealthView>), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn health_of_all(
    State(state): State<AppState>,
) -> Result<Json<Vec<SiteHealthView>>, ApiError> {
    let all = store::sites::health_of_all(&state.pool).await?;
    Ok(Json(all.into_iter().map(SiteHealthView::from).collect()))
}

/// Forget a site's kept session: its next run starts as a new visitor.
#[utoipa::path(delete, path = "/sites/{id}/session", tag = "sites", security(("bearer" = [])), params(("id" = i64, Path)),
    responses((status = 204, description = "Forgotten"), (status = 404, description = "No such site, or it has no kept session", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn forget_session(State(state): State<AppState>, Id(id): Id) -> Result<StatusCode, ApiError> {
    if store::sessions::delete(&state.pool, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else if !store::sites::exists(&state.pool, id).await? {
        Err(ApiError::not_found("site", id))
    } else {
        Err(ApiError::NotFound(format!("site {id} has no kept session")))
    }
}

/// Sets `crawlfleet_site_health{site}` from every site's health, dropping
/// the sites deleted since the last scrape. Bounded: a slow database leaves
/// the previous values rather than holding the scrape.
pub(super) async fn refresh_health_gauge(pool: &sqlx::PgPool) {
    let all =
        match tokio::time::timeout(HEALTH_GAUGE_TIMEOUT, store::sites::health_of_all(pool)).await {
            Ok(Ok(all)) => all,
            failed => {
                tracing::warn!(?failed, "site health gauge not refreshed");
                return;
            }
        };
    let gauge = &crate::ops::metrics::metrics().site_health;
    gauge.reset();
    for site in all {
        if let Some(value) = site.status.gauge() {
            gauge
                .with_label_values(&[&site.site_id.to_string()])
                .set(value);
        }
    }
}
