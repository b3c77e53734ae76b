//! `POST /api/sites/preview`: "test this site" before saving it. The api
//! checks the site as creating it would, then hands it to a worker through
//! the lane a crawl of it would take (`queue::preview`), and waits for what
//! the worker read; it never fetches the site itself.

use std::{collections::BTreeMap, time::Instant};

use axum::{Json, extract::State};
use serde::{Deserialize, Serialize};
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
        learn::LaneRequest,
        preview::{
            MAX_PREVIEW_PAGES, PreviewItem, PreviewOutcome, PreviewPage, PreviewRefusal,
            PreviewRequest,
        },
        site::SiteInput,
        text,
    },
};

/// A site to try, as `POST /api/sites` takes it, with a keyword.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PreviewBody {
    site: SiteInput,
    keyword: String,
    /// 1 (default) or 2.
    pages: Option<u8>,
    /// The stored site this is an edit of: masked secrets keep its stored
    /// values, and its fleet-wide pace is the one the preview waits for.
    site_id: Option<i64>,
}

/// What a worker read.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PreviewView {
    render: &'static str,
    worker_id: String,
    /// Where the last page fetched ended (after redirects).
    final_url: Option<String>,
    pages: Vec<PreviewPageView>,
    items: Vec<PreviewItemView>,
    /// Every field of the site: how many items had it empty or missing.
    empty_fields: BTreeMap<String, usize>,
    /// The last page as the browser showed it (browser mode): a base64 PNG.
    screenshot_png: Option<String>,
    /// What stopped the preview early: `blocked` (the site refused: 429, 503
    /// or its blocked selector; not tried again), or the failure kind an
    /// attempt would have failed with (`target_refused`, `stuck`, ...).
    refusal: Option<PreviewRefusalView>,
    /// The detail pages of the first items (at most 3), when the site has
    /// them: each page's values, also merged into its item's `fields`.
    details: Vec<PreviewDetailView>,
    timings: PreviewTimings,
}

#[derive(Debug, Serialize, ToSchema)]
struct PreviewDetailView {
    url: String,
    /// The item it is the detail page of (its index in `items`).
    item: usize,
    /// The detail fields as a crawl merges them: typed by their value rules.
    fields: serde_json::Value,
    /// The detail fields as the page held them (only with rules).
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<serde_json::Value>,
    /// Each detail field whose value did not parse, and why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    errors: BTreeMap<String, String>,
    took_ms: u64,
}

#[derive(Debug, Serialize, ToSchema)]
struct PreviewPageView {
    page: u8,
    /// The URL asked for.
    url: String,
    final_url: Option<String>,
    items: usize,
    took_ms: u64,
    /// What the page publishes as structured data (browser and http modes),
    /// whatever the site reads: a site can be set up from it without a
    /// selector (`structured_items`, and `structured` paths in its fields).
    structured: Option<StructuredView>,
}

/// A page's structured data: JSON-LD, microdata and OpenGraph.
#[derive(Debug, Serialize, ToSchema)]
struct StructuredView {
    /// Each schema.org type on the page and how many items it would give
    /// as `structured_items` (JSON-LD's when the page has the type there,
    /// else microdata's; the products of an ItemList counted too).
    types: BTreeMap<String, usize>,
    /// The page's top-level items in page order (JSON-LD, then microdata,
    /// then OpenGraph), at most 50, long texts and large items cut (`…`).
    items: Vec<StructuredItemView>,
    /// JSON-LD scripts that are not JSON even read leniently: skipped.
    skipped_scripts: usize,
}

#[derive(Debug, Serialize, ToSchema)]
struct StructuredItemView {
    /// `json-ld`, `microdata` or `opengraph`.
    source: String,
    /// Its types by name, e.g. `["Product"]`; OpenGraph's is its `og:type`.
    types: Vec<String>,
    /// Its properties as a field's `structured` path reads them (microdata
    /// in JSON-LD's shape, OpenGraph by property name such as `og:title`).
    properties: serde_json::Value,
}

#[derive(Debug, Serialize, ToSchema)]
struct PreviewItemView {
    /// The fields as a crawl stores them: typed by their value rules.
    fields: serde_json::Value,
    item_url: Option<String>,
    page: u8,
    /// The fields as the page held them, before the value rules (only for
    /// a site with rules; each text cut to the field bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<serde_json::Value>,
    /// Each field whose value did not parse, and why (a crawl stores null
    /// and counts it in the run's data health).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    errors: BTreeMap<String, String>,
    /// The required field without a value for which a crawl leaves the item
    /// out (not counted in `pages[].items` nor `empty_fields`).
    #[serde(skip_serializing_if = "Option::is_none")]
    left_out_by: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
struct PreviewRefusalView {
    kind: String,
    message: String,
}

#[derive(Debug, Serialize, ToSchema)]
struct PreviewTimings {
    /// From the request until a worker had crawled it, less the crawl: the
    /// wait for a free slot of the lane, and the way through Redis.
    waited_ms: u64,
    /// The crawl on the worker.
    crawl_ms: u64,
    total_ms: u64,
}

/// Test a site before saving it: a worker crawls page 1 (or 1 and 2) for
/// `keyword` as the fleet would (its lane, the SSRF guard, the fleet-wide
/// pace, the site's identity) and stores nothing. The site is checked as
/// `POST /api/sites` checks it; errors name its fields as `site.<field>`.
/// Each HTML page also lists the structured data it publishes (JSON-LD,
/// microdata, OpenGraph), so a site can be set up from it.
#[utoipa::path(post, path = "/sites/preview", tag = "sites", security(("bearer" = [])), request_body = PreviewBody,
    responses((status = 200, body = PreviewView), (status = 404, description = "No such site_id", body = ErrorBody),
              (status = 422, description = "A rule broken; `field` names it (`site.item_selector`, `site.fields.price.structured`, `keyword`, `pages`)", body = ErrorBody),
              (status = 503, description = "No worker answered within PREVIEW_TIMEOUT_SECS", body = ErrorBody),
              (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn preview(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<PreviewBody>,
) -> Result<Json<PreviewView>, ApiError> {
    let started = Instant::now();
    let pages = body.pages.unwrap_or(1);
    if !(1..=MAX_PREVIEW_PAGES).contains(&pages) {
        return Err(FieldError::new("pages", format!("1 to {MAX_PREVIEW_PAGES}")).into());
    }
    let keyword = text::non_empty(&body.keyword, "keyword", MAX_KEYWORD_CHARS)?.to_owned();
    let mut site = body.site;
    if let Some(id) = body.site_id {
        restore_stored_secrets(&state, id, &mut site)
            .await
            .map_err(site_field)?;
    }
    let spec = site.clone().parse().map_err(of_the_site)?;
    check_reachable(&state, &spec).await.map_err(site_field)?;
    let render = spec.render.as_str();
    let lane = lane_for(spec.render);
    let request = LaneRequest::Preview(PreviewRequest {
        site,
        site_id: body.site_id,
        keyword,
        pages,
        deadline: chrono::Utc::now() + state.preview_timeout,
    });
    let answer = ask_worker(&state, lane, &request, "the preview").await?;
    let outcome: PreviewOutcome = serde_json::from_slice(&answer)
        .map_err(|e| anyhow::anyhow!("reading a worker's preview answer: {e}"))?;
    let total_ms = started.elapsed().as_millis() as u64;
    Ok(Json(PreviewView::new(render, outcome, total_ms)))
}

/// A rule of the site broken: named as a field of `site`.
pub(super) fn of_the_site(mut e: FieldError) -> ApiError {
    e.field = format!("site.{}", e.field);
    e.into()
}

/// An error about the site's fields, named as fields of `site`.
pub(super) fn site_field(e: ApiError) -> ApiError {
    match e {
        ApiError::Invalid(e) => of_the_site(e),
        other => other,
    }
}

impl PreviewView {
    fn new(render: &'static str, outcome: PreviewOutcome, total_ms: u64) -> Self {
        PreviewView {
            render,
            worker_id: outcome.worker_id,
            final_url: outcome.final_url,
            pages: outcome
                .pages
                .into_iter()
                .map(PreviewPageView::from)
                .collect(),
            items: outcome
                .items
                .into_iter()
                .map(PreviewItemView::from)
                .collect(),
            empty_fields: outcome.empty_fields,
            screenshot_png: outcome.screenshot_png,
            refusal: outcome.refusal.map(PreviewRefusalView::from),
            details: outcome
                .details
                .into_iter()
                .map(|detail| PreviewDetailView {
                    url: detail.url,
                    item: detail.item,
                    fields: detail.fields,
                    raw: detail.raw,
                    errors: detail.errors,
                    took_ms: detail.took_ms,
                })
                .collect(),
            timings: PreviewTimings {
                waited_ms: total_ms.saturating_sub(outcome.crawl_ms),
                crawl_ms: outcome.crawl_ms,
                total_ms,
            },
        }
    }
}

impl From<PreviewPage> for PreviewPageView {
    fn from(page: PreviewPage) -> Self {
        PreviewPageView {
            page: page.page,
            url: page.url,
            final_url: page.final_url,
            items: page.items,
            took_ms: page.took_ms,
            structured: page.structured.map(|found| StructuredView {
                types: found.types,
                items: found
                    .items
                    .into_iter()
                    .map(|item| StructuredItemView {
                        source: item.source,
                        types: item.types,
                        properties: item.properties,
                    })
                    .collect(),
                skipped_scripts: found.skipped_scripts,
            }),
        }
    }
}

impl From<PreviewItem> for PreviewItemView {
    fn from(item: PreviewItem) -> Self {
        PreviewItemView {
            fields: item.fields,
            item_url: item.item_url,
            page: item.page,
            raw: item.raw,
            errors: item.errors,
            left_out_by: item.left_out_by,
        }
    }
}

impl From<PreviewRefusal> for PreviewRefusalView {
    fn from(refusal: PreviewRefusal) -> Self {
        PreviewRefusalView {
            kind: refusal.kind,
            message: refusal.message,
        }
    }
}
