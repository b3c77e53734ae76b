//! "Test this site" on a worker: page 1 (and 2) of a site the api has not
//! necessarily stored, fetched as a crawl fetches them (this lane's slot, the
//! guard on every connection, the fleet-wide pace, the site's identity, a
//! pooled browser) and read with its selectors; nothing is stored. A refusal
//! is reported, not waited out (an operator is looking at the screen), and
//! paces the fleet as a crawl's refusal does.

use std::time::{Duration, Instant};

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Map, Value};
use url::Url;

use super::{
    crawl::{CrawlContext, bounds::bound_page, screenshot},
    error::CrawlError,
    extract::{RawItems, StructuredListing, TypedItem, page_item, typed_for_preview},
    fetch::{
        BrowserPage, Fetched, HttpClient, PageLimits, PageSource, first_way_out, prepare_for_crawl,
        read_failed,
    },
    learning,
    limiter::{PaceKey, SitePace},
    session::SessionCookies,
};
use crate::{
    domain::{
        bounds::{BoundsReport, CrawlBounds, cut_to_chars},
        failure::FailureKind,
        learn::LaneRequest,
        preview::{
            PreviewDetail, PreviewItem, PreviewOutcome, PreviewPage, PreviewRefusal,
            PreviewRequest, StructuredFound, StructuredItem,
        },
        robots::paced_rate,
        site::{Extraction, NextOnPage, PREVIEW_DETAIL_PAGES, RenderMode, SiteSpec},
    },
    queue::preview,
    store::sealing::{self, Sealed},
};

/// Takes preview `preview_id`'s request (a preview, or a learning), does it,
/// and answers; a request already expired, withdrawn or taken is dropped.
pub async fn handle(preview_id: u64, ctx: &CrawlContext) {
    let mut conn = ctx.redis.clone();
    let request = match preview::take_request(&mut conn, &ctx.queue_name, preview_id).await {
        Ok(Some(request)) => request,
        Ok(None) => {
            tracing::info!(preview_id, "preview expired, withdrawn or taken; dropped");
            return;
        }
        Err(e) => {
            tracing::warn!(preview_id, error = ?e, "preview request not read");
            return;
        }
    };
    let request: LaneRequest = match open(&request, preview_id, ctx) {
        Ok(request) => request,
        Err(why) => {
            tracing::warn!(preview_id, %why, "preview request not opened; dropped");
            return;
        }
    };
    let (site, deadline) = match &request {
        LaneRequest::Preview(preview) => (&preview.site, preview.deadline),
        LaneRequest::Learn(learn) => (&learn.site, learn.deadline),
    };
    if deadline < chrono::Utc::now() {
        tracing::info!(preview_id, "preview taken after its deadline; not crawled");
        return;
    }
    let spec = match site.clone().parse() {
        Ok(spec) => spec,
        Err(e) => {
            // The api checked the same rules: only a version skew gets here.
            tracing::warn!(preview_id, error = %e, "preview site does not parse here; dropped");
            return;
        }
    };
    let answer = match &request {
        LaneRequest::Preview(preview) => {
            let outcome = crawl(ctx, preview, &spec).await;
            serde_json::to_vec(&outcome).expect("a preview outcome serializes")
        }
        LaneRequest::Learn(learn) => {
            let outcome = learning::learn(ctx, learn, &spec).await;
            serde_json::to_vec(&outcome).expect("a learning outcome serializes")
        }
    };
    if let Err(e) = preview::answer(&mut conn, &ctx.queue_name, preview_id, &answer).await {
        tracing::warn!(preview_id, error = ?e, "preview answer not delivered");
    }
}

/// The request as the api left it (a preview's, or a replay's under its
/// id): sealed when this fleet has a key.
pub(super) fn open<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    preview_id: u64,
    ctx: &CrawlContext,
) -> Result<T, String> {
    let plain = match &ctx.session_key {
        Some(key) => {
            let sealed = Sealed::from_bytes(bytes).ok_or("too short to be sealed")?;
            sealing::open(&sealed, key, &preview::sealed_to(preview_id))
                .map_err(|e| e.to_string())?
        }
        None => bytes.to_vec(),
    };
    serde_json::from_slice(&plain).map_err(|e| e.to_string())
}

pub(super) async fn crawl(
    ctx: &CrawlContext,
    request: &PreviewRequest,
    spec: &SiteSpec,
) -> PreviewOutcome {
    let started = Instant::now();
    let mut read = Read::default();
    // Each page within its share of the time the api still waits: an answer
    // after that would be read by nobody.
    let time_left = (request.deadline - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    let stuck_timeout = spec
        .stuck_timeout_secs
        .map(|s| Duration::from_secs(s as u64))
        .unwrap_or(ctx.default_stuck_timeout)
        .min((time_left / u32::from(request.pages)).max(Duration::from_secs(1)));
    let first = spec.search_url.first_url(&request.keyword).ok();
    let pace = pace_for(ctx, spec, request.site_id, first.as_ref()).await;
    let screenshot_png = match spec.render {
        RenderMode::Browser => match ctx
            .browsers
            .lease(first_way_out(&spec.identity).as_ref())
            .await
        {
            Ok(mut lease) => {
                let session = lease.session();
                let result = match prepare_for_crawl(session, spec, None).await {
                    Ok(()) => {
                        let mut source = PageSource::Browser(BrowserPage::new(
                            &mut *session,
                            ctx.bounds,
                            &request.keyword,
                        ));
                        read.pages_and_details(
                            ctx,
                            request,
                            spec,
                            &pace,
                            &mut source,
                            stuck_timeout,
                        )
                        .await
                    }
                    Err(e) => Err(CrawlError::browser(format!("preparing the browser: {e:#}"))),
                };
                read.stopped_by(result);
                let png = screenshot(lease.session())
                    .await
                    .map(|png| STANDARD.encode(png));
                let healthy = read
                    .refusal
                    .as_ref()
                    .is_none_or(|r| r.kind != "browser_crashed");
                ctx.browsers.give_back(lease, healthy).await;
                png
            }
            Err(e) => {
                read.stopped_by(Err(CrawlError::browser(format!("no browser: {e:#}"))));
                None
            }
        },
        RenderMode::Http | RenderMode::Json => {
            let client = HttpClient::new(
                &spec.identity,
                ctx.guard.clone(),
                stuck_timeout,
                SessionCookies::empty(),
                pace.clone(),
            )
            .await
            .map(|client| client.with_max_page_bytes(ctx.bounds.page_bytes));
            let result = match client {
                Ok(client) => {
                    let mut source = PageSource::Http(client);
                    read.pages_and_details(ctx, request, spec, &pace, &mut source, stuck_timeout)
                        .await
                }
                Err(e) => Err(e),
            };
            read.stopped_by(result);
            None
        }
    };
    PreviewOutcome {
        worker_id: ctx.worker_id.clone(),
        final_url: read.pages.last().and_then(|p| p.final_url.clone()),
        empty_fields: PreviewOutcome::count_empty(spec.extraction.fields().keys(), &read.items),
        pages: read.pages,
        items: read.items,
        screenshot_png,
        refusal: read.refusal,
        crawl_ms: started.elapsed().as_millis() as u64,
        details: read.details,
    }
}

/// The pace a preview or a learning of `spec` waits for: the stored site's
/// fleet-wide pace, else its search URL's host's, slowed to robots.txt's
/// Crawl-delay for the page `first` when stricter.
pub(super) async fn pace_for(
    ctx: &CrawlContext,
    spec: &SiteSpec,
    site_id: Option<i64>,
    first: Option<&Url>,
) -> SitePace {
    let crawl_delay = match first {
        Some(first) => ctx.robots.crawl_delay(spec, first, &ctx.guard).await,
        None => None,
    };
    SitePace {
        limiter: ctx.limiter.clone(),
        key: match site_id {
            Some(id) => PaceKey::Site(id),
            None => PaceKey::Host(
                spec.search_url
                    .sample_url()
                    .host_str()
                    .unwrap_or("")
                    .to_owned(),
            ),
        },
        max_requests_per_sec: paced_rate(spec.politeness.max_requests_per_sec, crawl_delay),
    }
}

/// What the preview read, page by page, and what stopped it.
#[derive(Default)]
struct Read {
    pages: Vec<PreviewPage>,
    items: Vec<PreviewItem>,
    refusal: Option<PreviewRefusal>,
    details: Vec<PreviewDetail>,
}

impl Read {
    /// The pages asked for, then the first items' detail pages when the
    /// site has them and nothing stopped the pages.
    async fn pages_and_details(
        &mut self,
        ctx: &CrawlContext,
        request: &PreviewRequest,
        spec: &SiteSpec,
        pace: &SitePace,
        source: &mut PageSource<'_>,
        stuck_timeout: Duration,
    ) -> Result<(), CrawlError> {
        self.pages(ctx, request, spec, pace, source, stuck_timeout)
            .await?;
        if self.refusal.is_some() {
            return Ok(());
        }
        self.details(ctx, spec, pace, source, stuck_timeout).await
    }

    /// Reads the detail pages of the first items a crawl keeps (at most
    /// [`PREVIEW_DETAIL_PAGES`]) as a crawl does, each once: their values
    /// shown apart and merged into their items.
    async fn details(
        &mut self,
        ctx: &CrawlContext,
        spec: &SiteSpec,
        pace: &SitePace,
        source: &mut PageSource<'_>,
        stuck_timeout: Duration,
    ) -> Result<(), CrawlError> {
        let (Some(detail), Some(detail_spec)) = (&spec.detail, spec.detail_page_spec()) else {
            return Ok(());
        };
        let wanted: Vec<(usize, Url)> = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, item)| item.left_out_by.is_none())
            .filter_map(|(at, item)| detail.url_in(&item.fields).map(|url| (at, url)))
            .take(PREVIEW_DETAIL_PAGES)
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        // A browser site reading its detail pages over HTTP.
        let mut own = match (detail.render, &*source) {
            (RenderMode::Http, PageSource::Browser(_)) => Some(PageSource::Http(
                HttpClient::new(
                    &spec.identity,
                    ctx.guard.clone(),
                    stuck_timeout,
                    SessionCookies::empty(),
                    pace.clone(),
                )
                .await?
                .with_max_page_bytes(ctx.bounds.page_bytes),
            )),
            _ => None,
        };
        let limits = PageLimits {
            stuck_timeout,
            extract_budget: ctx.extract_budget,
            keep_body: false,
            page_items: ctx.bounds.page_items,
            list_structured: false,
        };
        for (at, url) in wanted {
            ctx.guard.check(&url).await?;
            if let Some(why) = ctx.robots.disallows(spec, &url, &ctx.guard).await {
                return Err(CrawlError::failed(FailureKind::RobotsDisallowed, why));
            }
            pace.wait().await?;
            let started = Instant::now();
            let reading = match &mut own {
                Some(own) => own,
                None => &mut *source,
            };
            let fetched = reading
                .fetch(&detail_spec, &url, 1, limits, &ctx.guard)
                .await
                .map_err(|e| e.of_detail_page(&url))?;
            let raw = match fetched {
                Fetched::Items { items, .. } => items,
                Fetched::PastTheEnd => RawItems {
                    items: Vec::new(),
                    base: url.clone(),
                },
                Fetched::Refused {
                    reason,
                    retry_after,
                    ..
                } => {
                    if let Err(e) = ctx.limiter.refuse(pace.key.clone(), retry_after).await {
                        tracing::warn!(error = %e, "a preview's refusal did not pause the site");
                    }
                    self.refusal = Some(PreviewRefusal {
                        kind: "blocked".to_owned(),
                        message: reason,
                    });
                    return Ok(());
                }
            };
            let typed = typed_for_preview(
                raw,
                &detail.fields,
                ctx.bounds.field_chars,
                (ctx.extract_budget, stuck_timeout),
            )
            .await
            .map_err(|e| read_failed(e, &url).of_detail_page(&url))?;
            let (fields, raw, errors) = match typed.into_iter().next() {
                Some(item) => (
                    Value::Object(item.fields),
                    item.raw.map(|raw| cut_raw(raw, ctx.bounds.field_chars)),
                    item.errors,
                ),
                None => (Value::Object(Map::new()), None, Default::default()),
            };
            let shown = &mut self.items[at];
            shown.fields = detail.merge(&shown.fields, Some(&fields));
            self.details.push(PreviewDetail {
                url: url.to_string(),
                item: at,
                fields,
                raw,
                errors,
                took_ms: started.elapsed().as_millis() as u64,
            });
        }
        Ok(())
    }

    /// Fetches the pages asked for, as a crawl would (the guard, robots.txt,
    /// the pace), but each once: a refusal ends the preview.
    async fn pages(
        &mut self,
        ctx: &CrawlContext,
        request: &PreviewRequest,
        spec: &SiteSpec,
        pace: &SitePace,
        source: &mut PageSource<'_>,
        stuck_timeout: Duration,
    ) -> Result<(), CrawlError> {
        let first = spec
            .search_url
            .first_url(&request.keyword)
            .map_err(|e| misconfigured(format!("the search URL for {:?}: {e}", request.keyword)))?;
        let mut url = first.clone();
        for page in 1..=request.pages {
            let limits = PageLimits {
                stuck_timeout,
                extract_budget: ctx.extract_budget,
                keep_body: false,
                page_items: ctx.bounds.page_items,
                list_structured: !matches!(spec.extraction, Extraction::Json { .. }),
            };
            ctx.guard.check(&url).await?;
            if let Some(why) = ctx.robots.disallows(spec, &url, &ctx.guard).await {
                return Err(CrawlError::failed(FailureKind::RobotsDisallowed, why));
            }
            pace.wait().await?;
            let started = Instant::now();
            let fetched = source
                .fetch(spec, &url, i32::from(page), limits, &ctx.guard)
                .await;
            let final_url = source.last_url().await.map(String::from);
            let took_ms = started.elapsed().as_millis() as u64;
            let (typed, next_token, next_link, structured) = match fetched? {
                Fetched::Items {
                    items,
                    next_token,
                    structured,
                    next_link,
                    ..
                } => {
                    let fields = spec.extraction.fields();
                    let limits = (ctx.extract_budget, stuck_timeout);
                    let typed = typed_for_preview(items, fields, ctx.bounds.field_chars, limits)
                        .await
                        .map_err(|e| read_failed(e, &url))?;
                    (typed, next_token, next_link, structured.map(found))
                }
                Fetched::PastTheEnd => (Vec::new(), None, None, None),
                Fetched::Refused {
                    reason,
                    retry_after,
                    ..
                } => {
                    // Not waited out, but the fleet slows down for the site
                    // as it would after a crawl's refusal.
                    if let Err(e) = ctx.limiter.refuse(pace.key.clone(), retry_after).await {
                        tracing::warn!(error = %e, "a preview's refusal did not pause the site");
                    }
                    self.page(page, &url, final_url, 0, took_ms, None);
                    self.refusal = Some(PreviewRefusal {
                        kind: "blocked".to_owned(),
                        message: reason,
                    });
                    return Ok(());
                }
            };
            let kept = self.typed_items(typed, spec, &ctx.bounds, page);
            self.page(page, &url, final_url, kept, took_ms, structured);
            let found_none = kept == 0;
            if found_none || page == request.pages {
                return Ok(());
            }
            let next = spec
                .next_page_url(
                    &request.keyword,
                    &first,
                    u32::from(page),
                    NextOnPage {
                        token: next_token.as_deref(),
                        link: next_link.as_deref(),
                    },
                )
                .map_err(|e| misconfigured(format!("the search URL for page {}: {e}", page + 1)))?;
            match next {
                Some(next) => url = next,
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// The page's items as a crawl would store them (within the bounds),
    /// each with its fields as read, in page order with those a crawl
    /// leaves out; how many a crawl keeps.
    fn typed_items(
        &mut self,
        typed: Vec<TypedItem>,
        spec: &SiteSpec,
        bounds: &CrawlBounds,
        page: u8,
    ) -> usize {
        let fields = spec.extraction.fields();
        let kept: Vec<_> = typed
            .iter()
            .filter(|t| t.left_out_by.is_none())
            .map(|t| page_item(t.fields.clone(), fields))
            .collect();
        let mut bounded = BoundsReport::new(*bounds);
        let mut kept = bound_page(kept, fields, bounds, &mut bounded).into_iter();
        let count = kept.len();
        for item in typed {
            let raw = item.raw.map(|raw| cut_raw(raw, bounds.field_chars));
            let shown = match item.left_out_by {
                None => match kept.next() {
                    Some(stored) => PreviewItem {
                        fields: stored.fields,
                        item_url: stored.item_url,
                        page,
                        raw,
                        errors: item.errors,
                        left_out_by: None,
                    },
                    // Past the page's bound: a crawl stores none of the rest.
                    None => break,
                },
                Some(field) => PreviewItem {
                    fields: Value::Object(item.fields),
                    item_url: None,
                    page,
                    raw,
                    errors: item.errors,
                    left_out_by: Some(field),
                },
            };
            self.items.push(shown);
        }
        count
    }

    fn page(
        &mut self,
        page: u8,
        url: &Url,
        final_url: Option<String>,
        items: usize,
        took_ms: u64,
        structured: Option<StructuredFound>,
    ) {
        self.pages.push(PreviewPage {
            page,
            url: url.to_string(),
            final_url,
            items,
            took_ms,
            structured,
        });
    }

    /// Records what ended the pages early, if anything did.
    fn stopped_by(&mut self, result: Result<(), CrawlError>) {
        let refusal = match result {
            Ok(()) => return,
            Err(CrawlError::Attempt { failure, .. }) => PreviewRefusal {
                kind: failure.kind.as_str().to_owned(),
                message: failure.message,
            },
            Err(other) => PreviewRefusal {
                kind: "internal".to_owned(),
                message: other.to_string(),
            },
        };
        self.refusal = Some(refusal);
    }
}

/// Fields as read, each text cut to `max` characters: a page may hold far
/// more than a crawl stores, and the answer travels through Redis.
pub(super) fn cut_raw(raw: Map<String, Value>, max: usize) -> Value {
    fn cut(value: Value, max: usize) -> Value {
        match value {
            Value::String(text) => match cut_to_chars(&text, max) {
                Some(kept) => Value::String(kept.to_owned()),
                None => Value::String(text),
            },
            Value::Array(list) => Value::Array(list.into_iter().map(|v| cut(v, max)).collect()),
            other => other,
        }
    }
    Value::Object(raw.into_iter().map(|(k, v)| (k, cut(v, max))).collect())
}

/// A page's structured data as the preview answers it.
fn found(listing: StructuredListing) -> StructuredFound {
    StructuredFound {
        types: listing.types,
        items: listing
            .items
            .into_iter()
            .map(|item| StructuredItem {
                source: item.source.to_owned(),
                types: item.types,
                properties: item.properties,
            })
            .collect(),
        skipped_scripts: listing.skipped_scripts,
    }
}

fn misconfigured(message: String) -> CrawlError {
    CrawlError::failed(FailureKind::Misconfigured, message)
}
