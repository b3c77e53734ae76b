//! A replay on a worker: the site's extraction (a stored version, or the
//! unsaved site the api checked) run over its saved pages as a crawl reads
//! a page (the same reading, value rules and bounds, each page on a
//! blocking thread within the extraction budget), fetching nothing, and the
//! items compared with what each run stored; an item's detail values are
//! read again from the detail page its run saved. It takes a slot of the http
//! lane, so replays never crowd the api's threads nor more than the lane's
//! slots of the worker's.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use url::Url;

use super::{
    crawl::{CrawlContext, bounds::bound_page},
    extract::{
        HtmlRead, HtmlReading, RawItems, ReadError, content_hash, off_runtime, read_html,
        read_json, typed_page,
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
        site::{DetailSpec, Extraction, SiteSpec},
    },
    queue::preview,
    store::{
        self,
        saved_pages::{StoredDetail, StoredPage},
    },
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
    let details = match Details::of(ctx, site_id, spec, &pages).await {
        Ok(details) => details,
        Err(e) => {
            outcome.error = Some(format!("the saved detail pages could not be read: {e}"));
            return outcome;
        }
    };
    for page in pages {
        let time_left = (deadline - chrono::Utc::now()).to_std().unwrap_or_default();
        let replayed = replay_page(ctx, spec, &page, time_left, details.as_ref()).await;
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

/// A site's detail pages as a replay reads them: the spec reading one, and
/// the pages its saved runs read.
struct Details<'s> {
    detail: &'s DetailSpec,
    spec: SiteSpec,
    saved: HashMap<(i64, String), StoredDetail>,
}

impl<'s> Details<'s> {
    /// `None` for a site without detail pages.
    async fn of(
        ctx: &CrawlContext,
        site_id: i64,
        spec: &'s SiteSpec,
        pages: &[StoredPage],
    ) -> sqlx::Result<Option<Details<'s>>> {
        let (Some(detail), Some(detail_spec)) = (spec.detail.as_ref(), spec.detail_page_spec())
        else {
            return Ok(None);
        };
        let mut runs: Vec<i64> = pages.iter().map(|page| page.run_id).collect();
        runs.dedup();
        let saved = store::saved_pages::details_of_runs(&ctx.pool, site_id, &runs).await?;
        Ok(Some(Details {
            detail,
            spec: detail_spec,
            saved,
        }))
    }

    /// `items` of run `run_id`'s page with their detail values merged in:
    /// read again from the detail page the run saved, else those the run
    /// stored the item with (`stored`, matched by detail URL); and how many
    /// detail pages were read.
    async fn merged(
        &self,
        ctx: &CrawlContext,
        run_id: i64,
        items: Vec<PageItem>,
        stored: &[Value],
        time_left: Duration,
    ) -> Result<(Vec<PageItem>, usize), ReadError> {
        let mut read: HashMap<String, Value> = HashMap::new();
        let mut merged = Vec::with_capacity(items.len());
        for item in items {
            let url = self.detail.url_in(&item.fields).map(String::from);
            let saved = url
                .as_ref()
                .and_then(|url| self.saved.get(&(run_id, url.clone())));
            let values = match (&url, saved) {
                (Some(url), Some(page)) => {
                    if !read.contains_key(url) {
                        let values = self.read(ctx, page, time_left).await?;
                        read.insert(url.clone(), values);
                    }
                    read.get(url).cloned()
                }
                (Some(url), None) => stored
                    .iter()
                    .map(|stored| &stored["fields"])
                    .find(|fields| {
                        self.detail.url_in(fields).map(String::from).as_ref() == Some(url)
                    })
                    .cloned(),
                (None, _) => None,
            };
            let fields = self.detail.merge(&item.fields, values.as_ref());
            merged.push(PageItem {
                content_hash: content_hash(&fields),
                fields,
                item_url: item.item_url,
            });
        }
        Ok((merged, read.len()))
    }

    /// A saved detail page's values, read as the crawl read them.
    async fn read(
        &self,
        ctx: &CrawlContext,
        page: &StoredDetail,
        time_left: Duration,
    ) -> Result<Value, ReadError> {
        let items = items_of(ctx, &self.spec, &page.url, &page.body, time_left).await?;
        Ok(items
            .into_iter()
            .next()
            .map_or_else(|| Value::Object(Default::default()), |item| item.fields))
    }
}

/// One saved page read with `spec`, compared with what its run stored.
async fn replay_page(
    ctx: &CrawlContext,
    spec: &SiteSpec,
    page: &StoredPage,
    time_left: Duration,
    details: Option<&Details<'_>>,
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
        details_read: 0,
    };
    let items = match items_of(ctx, spec, &page.url, &page.body, time_left).await {
        Ok(items) => match details {
            Some(details) => details
                .merged(ctx, page.run_id, items, &stored, time_left)
                .await
                .map(|(items, read)| {
                    replayed.details_read = read;
                    items
                }),
            None => Ok(items),
        },
        Err(e) => Err(e),
    };
    match items {
        Ok(items) => {
            replayed.items = items
                .iter()
                .map(|item| json!({"fields": item.fields, "item_url": item.item_url}))
                .collect();
            let diff = diff(&stored, &replayed.items);
            (replayed.added, replayed.removed, replayed.changed) =
                (diff.added, diff.removed, diff.changed);
        }
        Err(e) => replayed.error = Some(e.to_string()),
    }
    replayed
}

/// The items a crawl with `spec` would store from the saved page at `url`
/// (its body `deflated`): read, typed by the value rules and cut by the
/// crawl bounds, as a crawl reads the page.
async fn items_of(
    ctx: &CrawlContext,
    spec: &SiteSpec,
    url: &str,
    deflated: &[u8],
    time_left: Duration,
) -> Result<Vec<PageItem>, ReadError> {
    let url = Url::parse(url).map_err(|e| ReadError::Unreadable(e.to_string()))?;
    let body = inflate(deflated, ctx.bounds.page_bytes)
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
