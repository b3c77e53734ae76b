//! `POST /api/sites/learn`: selectors from examples. The api checks the
//! page to load (a URL, or a search URL and keyword, loaded as a site would
//! load it) and the examples, then hands them to a worker through the
//! preview's lane (`lane`); the worker loads the page and learns from it.
//! The api never loads a page nor learns.

use std::collections::BTreeMap;

use axum::{Json, extract::State};
use serde::{Deserialize, Serialize};
use serde_json::json;
use url::Url;
use utoipa::ToSchema;

use super::{
    check_reachable,
    lane::{ask_worker, lane_for},
    restore_stored_secrets,
};
use crate::{
    api::{ApiError, AppState, error::ErrorBody, extract::ApiJson},
    domain::{
        FieldError,
        keyword::MAX_KEYWORD_CHARS,
        learn::{
            Examples, LaneRequest, LearnFailureKind, LearnOutcome, LearnRequest, check_examples,
        },
        site::{MAX_URL_CHARS, SiteInput},
        text,
    },
};

/// A page to learn selectors from, and per field a few of its values.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LearnBody {
    /// The page, as a plain http(s) URL. Give this or `search_url`.
    url: Option<String>,
    /// Or a site's search URL template (`{keyword}`; `{page}` is 1), with `keyword`.
    search_url: Option<String>,
    keyword: Option<String>,
    /// `browser` (default) or `http`.
    render: Option<String>,
    /// An element to wait for before the page is read (browser).
    wait_for: Option<String>,
    user_agent: Option<String>,
    /// Extra request headers, as a site takes them (`***` with `site_id`
    /// keeps the stored value).
    headers: Option<BTreeMap<String, String>>,
    proxy: Option<String>,
    /// The stored site this is for: masked secrets keep its stored values,
    /// and its fleet-wide pace is the one waited for.
    site_id: Option<i64>,
    /// Field name -> 1 to 3 of its values as the page shows them, the first
    /// of each field from one item, the second from another. None or empty:
    /// the page's main repeated structure is proposed.
    #[serde(default)]
    #[schema(value_type = Option<std::collections::HashMap<String, Vec<String>>>)]
    examples: Option<Examples>,
}

/// Selectors proposed for the page, best first.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LearnView {
    worker_id: String,
    /// Where the page ended (after redirects).
    final_url: Option<String>,
    proposals: Vec<ProposalView>,
    timings: LearnTimings,
    /// The page as the worker loaded it (its first MiB), to pick examples
    /// from; shown only in a frame that runs no script.
    page_html: Option<String>,
}

/// One proposal: selectors as a site takes them, and what they read.
#[derive(Debug, Serialize, ToSchema)]
struct ProposalView {
    /// The site's `item_selector`.
    item_selector: String,
    /// The site's `fields`: per field its `selector`, and `attr` or `link`
    /// where the value sits in an attribute.
    #[schema(value_type = Object)]
    fields: serde_json::Value,
    /// The first items these selectors read (at most 25), field -> value.
    #[schema(value_type = Vec<Object>)]
    items: Vec<serde_json::Value>,
    /// Items the selectors find on the page, and those with every field.
    items_found: usize,
    items_complete: usize,
    /// Examples the items give back, of those given.
    examples_reproduced: usize,
    examples_given: usize,
    /// 0..1.
    confidence: f64,
}

#[derive(Debug, Serialize, ToSchema)]
struct LearnTimings {
    /// Loading the page on the worker.
    load_ms: u64,
    /// Learning from it (within LEARN_BUDGET_MS).
    learn_ms: u64,
}

/// Learn a site's selectors from examples: a worker loads the page as a
/// crawl would (its lane, the SSRF guard, robots.txt, the fleet-wide pace,
/// the identity and render mode given) and proposes item and field
/// selectors that give back every example, ranked, each with the items it
/// reads. Without examples it proposes the page's main repeated structure.
/// Nothing is stored.
#[utoipa::path(post, path = "/sites/learn", tag = "sites", security(("bearer" = [])), request_body = LearnBody,
    responses((status = 200, body = LearnView), (status = 404, description = "No such site_id", body = ErrorBody),
              (status = 422, description = "A rule broken, the page not loaded (`url`/`search_url`), the examples not found in repeated items or over the learning budget (`examples`, `examples.<field>[i]`)", body = ErrorBody),
              (status = 503, description = "No worker answered within PREVIEW_TIMEOUT_SECS", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn learn(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<LearnBody>,
) -> Result<Json<LearnView>, ApiError> {
    let examples = body.examples.clone().unwrap_or_default();
    check_examples(&examples)?;
    if !matches!(body.render.as_deref(), None | Some("browser" | "http")) {
        return Err(FieldError::new("render", "browser (default) or http").into());
    }
    let (page, url_field) = page_of(&body)?;
    let mut site = site_of(&body, &page)?;
    if let Some(id) = body.site_id {
        restore_stored_secrets(&state, id, &mut site)
            .await
            .map_err(|e| named(e, url_field))?;
    }
    let spec = site
        .clone()
        .parse()
        .map_err(|e| named(e.into(), url_field))?;
    check_reachable(&state, &spec)
        .await
        .map_err(|e| named(e, url_field))?;
    let request = LaneRequest::Learn(LearnRequest {
        site,
        site_id: body.site_id,
        url: page.url,
        keyword: page.keyword,
        examples,
        deadline: chrono::Utc::now() + state.preview_timeout,
    });
    let answer = ask_worker(&state, lane_for(spec.render), &request, "the learning").await?;
    let outcome: LearnOutcome = serde_json::from_slice(&answer)
        .map_err(|e| anyhow::anyhow!("reading a worker's learning answer: {e}"))?;
    if let Some(failure) = outcome.failure {
        let field = match failure.kind {
            LearnFailureKind::Page => url_field.to_owned(),
            LearnFailureKind::Examples | LearnFailureKind::Budget => {
                failure.field.unwrap_or_else(|| "examples".to_owned())
            }
        };
        return Err(FieldError::new(field, failure.message).into());
    }
    Ok(Json(LearnView {
        worker_id: outcome.worker_id,
        final_url: outcome.final_url,
        proposals: outcome
            .proposals
            .into_iter()
            .map(|p| ProposalView {
                item_selector: p.item_selector,
                fields: p.fields,
                items: p.items,
                items_found: p.items_found,
                items_complete: p.items_complete,
                examples_reproduced: p.examples_reproduced,
                examples_given: p.examples_given,
                confidence: p.confidence,
            })
            .collect(),
        timings: LearnTimings {
            load_ms: outcome.load_ms,
            learn_ms: outcome.learn_ms,
        },
        page_html: outcome.page_html,
    }))
}

/// The page asked for: a URL (fragment dropped), or a search for a keyword.
struct Page {
    url: Option<String>,
    keyword: String,
    /// The search URL template the page is loaded as.
    template: String,
}

/// The page of `body`, and the field that names it.
fn page_of(body: &LearnBody) -> Result<(Page, &'static str), ApiError> {
    match (&body.url, &body.search_url) {
        (Some(url), None) => {
            text::non_empty(url, "url", MAX_URL_CHARS)?;
            let mut parsed = Url::parse(url.trim())
                .map_err(|e| FieldError::new("url", format!("is not a valid URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(
                    FieldError::new("url", "must be an http or https URL with a host").into(),
                );
            }
            if body.keyword.is_some() {
                return Err(FieldError::new("keyword", "goes with search_url, not url").into());
            }
            parsed.set_fragment(None);
            // A site's search URL needs its keyword: kept in the fragment,
            // which is never sent; the worker loads `url` itself.
            let template = format!("{parsed}#{{keyword}}");
            let page = Page {
                url: Some(parsed.to_string()),
                keyword: "learn".to_owned(),
                template,
            };
            Ok((page, "url"))
        }
        (None, Some(search_url)) => {
            let keyword = body.keyword.as_deref().unwrap_or_default();
            let keyword = text::non_empty(keyword, "keyword", MAX_KEYWORD_CHARS)?.to_owned();
            let page = Page {
                url: None,
                keyword,
                template: search_url.clone(),
            };
            Ok((page, "search_url"))
        }
        _ => Err(FieldError::new("url", "give either url or search_url (with keyword)").into()),
    }
}

/// The page as a site that loads it: its render mode and identity; the
/// extraction is a placeholder the worker does not use.
fn site_of(body: &LearnBody, page: &Page) -> Result<SiteInput, ApiError> {
    let site = json!({
        "name": "learning",
        "search_url": page.template,
        "render": body.render.as_deref().unwrap_or("browser"),
        "item_selector": "body",
        "fields": {"page": {"selector": "title"}},
        "wait_for": body.wait_for,
        "user_agent": body.user_agent,
        "headers": body.headers,
        "proxy": body.proxy,
    });
    serde_json::from_value(site)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("building the page's site: {e}")))
}

/// An error about the site loading the page, named as the client sent it.
fn named(e: ApiError, url_field: &str) -> ApiError {
    match e {
        ApiError::Invalid(mut e) if e.field == "search_url" => {
            e.field = url_field.to_owned();
            e.into()
        }
        other => other,
    }
}
