//! A replay on a worker: the site's extraction (a stored version, or the
//! unsaved site the api checked) run over its saved pages as a crawl reads
//! a page (the same reading, value rules and bounds, each page on a
//! blocking thread within the extraction budget), fetching nothing, and the
//! items compared with what each run stored. It takes a slot of the http
//! lane, so replays never crowd the api's threads nor more than the lane's
//! slots of the worker's.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use url::Url;

use super::{
    crawl::{CrawlContext, bounds::bound_page},
    extract::{
        HtmlRead, HtmlReading, RawItems, ReadError, off_runtime, read_html, read_json, typed_page,
    },
    fetch::kept::inflate,
    preview::open,
};
use crate::{
    domain::{
        bounds::BoundsReport,
        item::PageItem,
        paging::Paging,
        replay::{ReplayOutcome, ReplayRequest, ReplaySource, ReplayedPage, ReplayedRun, diff},
        site::{Extraction, SiteSpec},
    },
    queue::preview,
    store::{self, saved_pages::StoredPage},
};

/// Takes replay `replay_id`'s request, replays it, and answers; a request
/// already expired, withdrawn or taken is dropped.
pub async fn handle(replay_id: u64, ctx: &CrawlContext) {
    let mut conn = ctx.redis.clone();
    let request = match preview::take_request(&mut conn, &ctx.queue_name, replay_id).await {
        Ok(Some(request)) => request,
        Ok(None) => {
            tracing::info!(replay_id, "replay expired, withdrawn or taken; dropped");
            return;
        }
        Err(e) => {
            tracing::warn!(replay_id, error = ?e, "replay request not read");
            return;
        }
    };
    let request: ReplayRequest = match open(&request, replay_id, ctx) {
        Ok(request) => request,
        Err(why) => {
            tracing::warn!(replay_id, %why, "replay request not opened; dropped");
            return;
        }
    };
    if request.deadline < chrono::Utc::now() {
        tracing::info!(replay_id, "replay taken after its deadline; not run");
        return;
    }
    let outcome = replay(ctx, &request).await;
    let answer = serde_json::to_vec(&outcome).expect("a replay outcome serializes");
    if let Err(e) = preview::answer(&mut conn, &ctx.queue_name, replay_id, &answer).await {
        tracing::warn!(replay_id, error = ?e, "replay answer not delivered");
    }
}

async fn replay(ctx: &CrawlContext, request: &ReplayRequest) -> ReplayOutcome {
    match spec_of(ctx, request).await {
        Ok(spec) => {
            let (site, pages) = (request.site_id, request.max_pages);
            replay_spec(ctx, site, &spec, pages, request.deadline).await
        }
        Err(why) => ReplayOutcome {
            error: Some(why),
            ..ReplayOutcome::empty(ctx.worker_id.clone())
        },
    }
}

/// Replays `spec` over site `site_id`'s saved pages (at most `max_pages`,
/// the newest runs' first), until `deadline`.
pub(super) async fn replay_spec(
    ctx: &CrawlContext,
    site_id: i64,
    spec: &SiteSpec,
    max_pages: usize,
    deadline: chrono::DateTime<chrono::Utc>,
) -> ReplayOutcome {
    let started = Instant::now();
    let mut outcome = ReplayOutcome::empty(ctx.worker_id.clone());
    let limit = max_pages as i64 + 1;
    let mut pages = match store::saved_pages::of_site(&ctx.pool, site_id, limit).await {
        Ok(pages) => pages,
        Err(e) => {
            outcome.error = Some(format!("the saved pages could not be read: {e}"));
            return outcome;
        }
    };
    outcome.truncated = pages.len() > max_pages;
    pages.truncate(max_pages);
    outcome.pages = pages.len();
    // A list page cannot show what an item's detail page added.
    let detail_fields: Vec<&str> = spec
        .detail
        .as_ref()
        .map(|detail| detail.fields.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for page in pages {
        let time_left = (deadline - chrono::Utc::now()).to_std().unwrap_or_default();
        let replayed = replay_page(ctx, spec, &page, time_left, &detail_fields).await;
        match outcome.runs.last_mut() {
            Some(run) if run.run_id == page.run_id => run.pages.push(replayed),
            _ => outcome.runs.push(ReplayedRun {
                run_id: page.run_id,
                site_version: page.site_version,
                pages: vec![replayed],
            }),
        }
    }
    outcome.replay_ms = started.elapsed().as_millis() as u64;
    outcome
}

/// The spec replayed: the stored version, or the site the api checked.
async fn spec_of(ctx: &CrawlContext, request: &ReplayRequest) -> Result<SiteSpec, String> {
    match &request.source {
        ReplaySource::Version(version) => {
            let found = store::sites::versions::get(
                &ctx.pool,
                request.site_id,
                *version,
                ctx.session_key.as_ref(),
            )
            .await
            .map_err(|e| format!("version {version} could not be read: {e}"))?;
            let (_, site) = found.ok_or_else(|| format!("no version {version}"))?;
            Ok(site.spec)
        }
        // The api checked the same rules: only a version skew fails here.
        ReplaySource::Site(site) => (**site)
            .clone()
            .parse()
            .map_err(|e| format!("the site does not parse here: {e}")),
    }
}

/// One saved page read with `spec`, compared with what its run stored.
async fn replay_page(
    ctx: &CrawlContext,
    spec: &SiteSpec,
    page: &StoredPage,
    time_left: Duration,
    detail_fields: &[&str],
) -> ReplayedPage {
    let stored: Vec<Value> = page.items.as_array().cloned().unwrap_or_default();
    let mut replayed = ReplayedPage {
        page_no: page.page_no,
        url: page.url.clone(),
        items: Vec::new(),
        error: None,
        added: Vec::new(),
        removed: Vec::new(),
        changed: Vec::new(),
    };
    match items_of(ctx, spec, page, time_left).await {
        Ok(items) => {
            replayed.items = items
                .iter()
                .map(|item| json!({"fields": item.fields, "item_url": item.item_url}))
                .collect();
            let diff = diff(&stored, &replayed.items, detail_fields);
            (replayed.added, replayed.removed, replayed.changed) =
                (diff.added, diff.removed, diff.changed);
        }
        Err(e) => replayed.error = Some(e.to_string()),
    }
    replayed
}

/// The items a crawl with `spec` would store from the saved page: read,
/// typed by the value rules and cut by the crawl bounds, as a crawl's list
/// page (its detail pages are not read).
async fn items_of(
    ctx: &CrawlContext,
    spec: &SiteSpec,
    page: &StoredPage,
    time_left: Duration,
) -> Result<Vec<PageItem>, ReadError> {
    let url = Url::parse(&page.url).map_err(|e| ReadError::Unreadable(e.to_string()))?;
    let body = inflate(&page.body, ctx.bounds.page_bytes)
        .map_err(|e| ReadError::Unreadable(e.to_string()))?;
    let max_items = ctx.bounds.page_items.saturating_add(1);
    let extraction = spec.extraction.clone();
    let next_link = match &spec.paging {
        Paging::NextLink { selector } => Some(selector.clone()),
        _ => None,
    };
    let read_url = url.clone();
    let raw: RawItems = off_runtime(
        ctx.extract_budget,
        time_left,
        move |budget| match &extraction {
            Extraction::Html {
                items,
                fields,
                blocked_selector,
                ..
            } => {
                let reading = HtmlReading {
                    items: items.clone(),
                    fields: fields.clone(),
                    blocked_selector: blocked_selector.clone(),
                    list_structured: false,
                    max_items,
                    next_link,
                };
                let html = String::from_utf8_lossy(&body);
                match read_html(&html, &read_url, &reading, budget)? {
                    HtmlRead::Items { items, .. } => Ok(items),
                    HtmlRead::Blocked => Err(ReadError::Unreadable(
                        "the saved page shows the site's blocked selector".to_owned(),
                    )),
                }
            }
            Extraction::Json {
                items,
                fields,
                paging,
            } => read_json(
                &body,
                &read_url,
                items,
                fields,
                paging.as_ref(),
                max_items,
                budget,
            )
            .map(|page| page.items),
        },
    )
    .await?;
    let fields = spec.extraction.fields();
    let (items, _) = typed_page(
        raw,
        fields,
        ctx.bounds.field_chars,
        (ctx.extract_budget, time_left),
    )
    .await?;
    let mut report = BoundsReport::new(ctx.bounds);
    Ok(bound_page(items, fields, &ctx.bounds, &mut report))
}
