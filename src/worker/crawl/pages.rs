//! The pages of one crawl attempt, in every render mode: the next URL (by
//! the site's paging: `{page}`, `{offset}`, a next link, more of the same
//! document, or a JSON API's token), the fleet-wide rate limit before each
//! request, a refused page tried again once the site's pause is over, each
//! page stored as it comes, the end of paging at a page that repeats the
//! previous one, and an incremental crawl's stop where a newest-first feed
//! reaches what an earlier run already stored.

use std::{
    collections::HashSet,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use url::Url;

use super::{
    CrawlContext, OUTAGE_PATIENCE,
    bounds::{bound_page, bound_run},
    persist,
};
use crate::domain::{
    bounds::BoundsReport,
    failure::FailureKind,
    item::PageItem,
    page::{CrawledPage, FinalPage, PagesRead, PagingEnd},
    paging::repeats,
    robots::paced_rate,
    run::CrawlRun,
    saved_page::{KeptBody, KeptPages, SavedDetail, SavedPage},
    value::ValueReport,
};
use crate::worker::{
    error::CrawlError,
    limiter::{PaceKey, SitePace},
    proxy_health,
};
use crate::worker::{
    extract::{RawItems, typed_page},
    fetch::{Fetched, PageLimits, PageSource, read_failed},
};
use crate::{
    domain::site::{NextOnPage, SiteSpec},
    events::Event,
    ops::metrics::metrics,
    store::{
        self,
        runs::{Fence, FenceError, StoredPage},
    },
};

/// What a fetch is for: which write says the request is in flight, and the
/// page number its answer is judged by (a detail page is judged as a first
/// page: a 404 is an error, not the end of the results).
#[derive(Debug, Clone, Copy)]
pub(super) enum Call {
    ListPage(i32),
    DetailPage,
    /// A URL of a URL list: judged as a first page, and entered from any
    /// held state (a list run's URLs are each a call of their own).
    ListUrl,
}

impl Call {
    fn page(self) -> i32 {
        match self {
            Call::ListPage(page) => page,
            Call::DetailPage | Call::ListUrl => 1,
        }
    }
}

/// One crawl attempt's fixed facts.
pub struct Crawl<'a> {
    pub ctx: &'a CrawlContext,
    pub fence: &'a Fence,
    pub run: &'a CrawlRun,
    pub spec: &'a SiteSpec,
    pub keyword: &'a str,
    pub stuck_timeout: Duration,
    /// The Crawl-delay of the search's robots.txt (a site that respects it).
    pub crawl_delay: Option<Duration>,
    /// A failed detail page read apart from the crawl's page source kept
    /// its own evidence (the source's page is not the one that failed).
    pub detail_evidence_kept: AtomicBool,
    /// Whether list pages' bodies are still kept (saved pages with room).
    pub keeps_bodies: AtomicBool,
    /// The member of the site's proxy pool pages go out through (its one
    /// proxy is a pool of one); None: straight out.
    pub proxies: Option<proxy_health::ProxyChoice>,
}

impl Crawl<'_> {
    fn site_label(&self) -> String {
        self.run.site_id.to_string()
    }

    /// What each page of this crawl may take; a list or detail page's body
    /// is kept while the crawl's saved pages have room.
    fn page_limits(&self, call: Call) -> PageLimits {
        PageLimits {
            stuck_timeout: self.stuck_timeout,
            extract_budget: self.ctx.extract_budget,
            page_items: self.ctx.bounds.page_items,
            list_structured: false,
            keep_body: matches!(call, Call::ListPage(_) | Call::DetailPage)
                && self.run.url_list_id.is_none()
                && self.keeps_bodies.load(Ordering::Relaxed),
        }
    }

    /// The site's fleet-wide pace, for every request of this crawl: its own
    /// rate, or its robots.txt Crawl-delay when that is stricter.
    pub fn pace(&self) -> SitePace {
        SitePace {
            limiter: self.ctx.limiter.clone(),
            key: PaceKey::Site(self.run.site_id),
            max_requests_per_sec: paced_rate(
                self.spec.politeness.max_requests_per_sec,
                self.crawl_delay,
            ),
        }
    }

    /// Crawls the run's pages: a keyword's search, or a URL list's URLs.
    pub async fn read(&self, source: &mut PageSource<'_>) -> Result<PagesRead, CrawlError> {
        match self.run.url_list_id {
            Some(list_id) => self.list_urls(source, list_id).await,
            None => self.pages(source).await,
        }
    }

    /// Crawls every page; returns the last page crawled and why paging
    /// ended there (only a crawl that reached the last page judges removals).
    pub async fn pages(&self, source: &mut PageSource<'_>) -> Result<PagesRead, CrawlError> {
        let first = self.spec.search_url.first_url(self.keyword).map_err(|e| {
            CrawlError::failed(
                FailureKind::Misconfigured,
                format!("search URL for {:?} is invalid: {e}", self.keyword),
            )
        })?;
        let mut url = first.clone();
        let mut last_token: Option<String> = None;
        // The content of the previous page's items: a page that repeats it ends paging.
        let mut previous: Vec<String> = Vec::new();
        // The pages read: a next link back to one of them is the end, not a loop.
        let mut read = HashSet::new();
        let newest_before = match self.spec.stop_on_seen {
            true => self.newest_stored_before().await?,
            false => None,
        };
        // What the bounds left out, what did not parse, and the items kept so far.
        let mut bounded = BoundsReport::new(self.ctx.bounds);
        let mut values = ValueReport::default();
        let mut kept = 0;
        let mut saved = KeptPages::default();
        let mut details = self.detail_pages();
        for page in 1..=self.spec.max_pages {
            self.ctx.guard.check(&url).await?;
            if let Some(stopped) = self.robots_stop(&url, page).await? {
                return Ok(PagesRead::stopped_before(stopped, page - 1)
                    .with_reports(bounded, values)
                    .with_kept(saved));
            }
            let (items, next_token, next_link, body) = match self
                .fetch_politely(source, &url, page)
                .await?
            {
                Fetched::Items {
                    items,
                    next_token,
                    next_link,
                    body,
                    ..
                } => (self.typed(items, &url).await?, next_token, next_link, body),
                Fetched::PastTheEnd => ((Vec::new(), ValueReport::default()), None, None, None),
                Fetched::Refused { .. } => unreachable!("refusals are retried by fetch_politely"),
            };
            read.insert(url.clone());
            let (items, page_values) = items;
            if repeats(&previous, &items) {
                // The repeat is not stored: the run ends on it, with no items.
                let last = FinalPage {
                    page,
                    url: url.to_string(),
                    item_key: self.spec.item_key.clone(),
                    stored_before: Vec::new(),
                    items: Vec::new(),
                    details_read: Vec::new(),
                };
                return Ok(PagesRead::ended_on(last, PagingEnd::RepeatedPage)
                    .with_reports(bounded, values)
                    .with_kept(saved));
            }
            previous = items.iter().map(|i| i.content_hash.clone()).collect();
            values.merge(page_values);
            let fields = self.spec.extraction.fields();
            let mut items = bound_page(items, fields, &self.ctx.bounds, &mut bounded);
            let run_full = bound_run(&mut items, kept, &self.ctx.bounds, &mut bounded);
            kept += items.len();
            let details_read = match &mut details {
                Some(details) => {
                    let with = self
                        .with_details(details, source, items, &mut values)
                        .await?;
                    items = with.items;
                    with.read
                }
                None => Vec::new(),
            };
            let stored_before = match self.spec.stop_on_seen {
                true => self.stored_before(&items).await?,
                false => Vec::new(),
            };
            // A page's detail pages are kept with it, or not at all.
            let detail_bodies = details.as_mut().map(|d| std::mem::take(&mut d.kept));
            if let Some(body) = body
                && self.keep_page(&mut saved, page, &url, body, &items)
            {
                for detail in detail_bodies.into_iter().flatten() {
                    self.keep_detail(&mut saved, detail);
                }
            }
            let crawled = CrawledPage {
                page,
                url: url.as_str(),
                items: &items,
                item_key: self.spec.item_key.as_deref(),
                stored_before: &stored_before,
                details_read: &details_read,
            };
            // A newest-first feed is read up to what an earlier run stored: a
            // page of nothing new, or the page where the newest item stored
            // before appears with only stored items after it (an item stored
            // before that recurs elsewhere, like an ad, does not stop it).
            let stored_from = |at: usize| items[at..].iter().all(|i| crawled.stored_before(i));
            let newest_at = newest_before.as_ref().and_then(|newest| {
                items
                    .iter()
                    .position(|item| crawled.identity(item).key == *newest)
            });
            let reached_stored =
                !items.is_empty() && (stored_from(0) || newest_at.is_some_and(stored_from));
            // Where paging ends, if it ends on this page.
            let (ends, next) = if run_full {
                (Some(PagingEnd::ItemCap), None)
            } else if items.is_empty() {
                (Some(PagingEnd::LastPage), None)
            } else if reached_stored {
                (Some(PagingEnd::SeenBefore), None)
            } else {
                // A token that does not move is the end, not a loop.
                let next_token = next_token.filter(|token| last_token.as_ref() != Some(token));
                let on_page = NextOnPage {
                    token: next_token.as_deref(),
                    link: next_link.as_deref(),
                };
                let next = self
                    .spec
                    .next_page_url(self.keyword, &first, page as u32, on_page);
                if next_token.is_some() {
                    last_token = next_token;
                }
                match next {
                    Ok(None) => (Some(PagingEnd::LastPage), None),
                    Ok(Some(next)) if !self.spec.paging.in_place() && read.contains(&next) => {
                        (Some(PagingEnd::RepeatedPage), None)
                    }
                    Ok(Some(_)) if page == self.spec.max_pages => (Some(PagingEnd::MaxPages), None),
                    Ok(Some(next)) => (None, Some(next)),
                    // The page is kept, then the attempt fails.
                    Err(e) => {
                        self.store(&crawled, reached_stored).await?;
                        return Err(CrawlError::failed(
                            FailureKind::Misconfigured,
                            format!("search URL for page {}: {e}", page + 1),
                        ));
                    }
                }
            };
            if let Some(end) = ends {
                // The completion stores it, in the transaction that ends the run.
                let last = FinalPage {
                    page,
                    url: url.to_string(),
                    item_key: self.spec.item_key.clone(),
                    stored_before,
                    items,
                    details_read,
                };
                return Ok(PagesRead::ended_on(last, end)
                    .with_reports(bounded, values)
                    .with_kept(saved));
            }
            self.store(&crawled, reached_stored).await?;
            url = next.expect("paging goes on to a next page");
        }
        // Only a crawl of no page at all (max_pages checked >= 1) gets here.
        Ok(PagesRead::new(self.spec.max_pages, PagingEnd::MaxPages).with_reports(bounded, values))
    }

    /// Keeps list page `page`'s body with the items stored from it, while
    /// the site's saved pages have room (past it, no more bodies are kept);
    /// says whether it was kept.
    fn keep_page(
        &self,
        saved: &mut KeptPages,
        page: i32,
        url: &Url,
        body: KeptBody,
        items: &[PageItem],
    ) -> bool {
        let bounds = &self.ctx.saved_pages;
        let page = SavedPage {
            page,
            url: url.to_string(),
            render: self.spec.render,
            body,
            items: items.to_vec(),
        };
        let kept = saved.keep(page, bounds);
        if !kept || !saved.has_room(bounds) {
            self.keeps_bodies.store(false, Ordering::Relaxed);
        }
        kept
    }

    /// Keeps a detail page's body, while the site's saved pages have room.
    fn keep_detail(&self, saved: &mut KeptPages, detail: SavedDetail) {
        let bounds = &self.ctx.saved_pages;
        if !saved.keep_detail(detail, bounds) || !saved.has_room(bounds) {
            self.keeps_bodies.store(false, Ordering::Relaxed);
        }
    }

    /// A page's items with their fields' value rules applied, within the
    /// page's extraction budget; what did not parse, counted.
    pub(super) async fn typed(
        &self,
        raw: RawItems,
        url: &Url,
    ) -> Result<(Vec<PageItem>, ValueReport), CrawlError> {
        typed_page(
            raw,
            self.spec.extraction.fields(),
            self.ctx.bounds.field_chars,
            (self.ctx.extract_budget, self.stuck_timeout),
        )
        .await
        .map_err(|e| read_failed(e, url))
    }

    /// Stores one page that paging goes on from (the last one is the
    /// completion's) and tells the live clients.
    async fn store(
        &self,
        crawled: &CrawledPage<'_>,
        reached_stored: bool,
    ) -> Result<(), CrawlError> {
        let StoredPage {
            run: stored,
            stored: count,
            ..
        } = persist("page results", OUTAGE_PATIENCE, || {
            store::runs::store_page(&self.ctx.pool, self.fence, crawled)
        })
        .await?;
        self.ctx
            .events
            .publish(&Event::ResultStored {
                run_id: stored.id,
                keyword_id: stored.keyword_id,
                url_list_id: stored.url_list_id,
                site_id: stored.site_id,
                page: crawled.page,
                count,
            })
            .await;
        self.ctx.events.run_updated(&stored).await;
        tracing::debug!(
            run_id = self.fence.run_id,
            page = crawled.page,
            count,
            details_read = crawled.details_read.len(),
            reached_stored,
            "page stored"
        );
        Ok(())
    }

    /// Identity keys of the page's items an earlier completed run stored.
    async fn stored_before(&self, items: &[PageItem]) -> Result<Vec<String>, CrawlError> {
        // Only a keyword's search is read incrementally.
        let Some(keyword_id) = self.run.keyword_id else {
            return Ok(Vec::new());
        };
        let item_key = self.spec.item_key.as_deref();
        let keys: Vec<String> = items.iter().map(|i| i.identity(item_key).key).collect();
        let stored = persist("incremental check", OUTAGE_PATIENCE, || async {
            store::results::stored_by_completed_runs(
                &self.ctx.pool,
                keyword_id,
                self.run.site_id,
                self.run.id,
                &keys,
            )
            .await
            .map_err(FenceError::from)
        })
        .await?;
        Ok(stored)
    }

    /// The newest item an earlier completed run stored, where a re-crawl of
    /// a newest-first feed can stop.
    async fn newest_stored_before(&self) -> Result<Option<String>, CrawlError> {
        let Some(keyword_id) = self.run.keyword_id else {
            return Ok(None);
        };
        let newest = persist("incremental check", OUTAGE_PATIENCE, || async {
            store::results::newest_stored_by_completed_run(
                &self.ctx.pool,
                keyword_id,
                self.run.site_id,
                self.run.id,
            )
            .await
            .map_err(FenceError::from)
        })
        .await?;
        Ok(newest)
    }

    /// Fetches list page `page` (see [`Crawl::fetch_paced`]).
    pub(super) async fn fetch_politely(
        &self,
        source: &mut PageSource<'_>,
        url: &Url,
        page: i32,
    ) -> Result<Fetched, CrawlError> {
        self.fetch_paced(source, self.spec, url, Call::ListPage(page))
            .await
    }

    /// Records that `call` is in flight at `url` and tells the live clients.
    async fn enter_call(&self, call: Call, url: &Url) -> Result<(), CrawlError> {
        let calling = persist("page start", OUTAGE_PATIENCE, || async {
            match call {
                Call::ListPage(_) => {
                    store::runs::enter_url_call(&self.ctx.pool, self.fence, url.as_str()).await
                }
                Call::DetailPage | Call::ListUrl => {
                    store::runs::enter_detail_call(&self.ctx.pool, self.fence, url.as_str()).await
                }
            }
        })
        .await?;
        self.ctx.events.run_updated(&calling).await;
        Ok(())
    }

    /// Fetches one page (a list page, or a detail page read as `spec`
    /// says) within the site's fleet-wide rate limit. A refusal pauses the
    /// site for the whole fleet and the page is tried again, up to the
    /// run's attempt budget, before the attempt fails.
    pub(super) async fn fetch_paced(
        &self,
        source: &mut PageSource<'_>,
        spec: &SiteSpec,
        url: &Url,
        call: Call,
    ) -> Result<Fetched, CrawlError> {
        let site_id = self.run.site_id;
        let site = self.site_label();
        let tries = self.run.max_attempts.max(1);
        // A browser's context leaves through the member it was opened with.
        let keep = matches!(source, PageSource::Browser(_));
        for attempt in 1..=tries {
            // The run is between pages (running/call_done) while it waits: its
            // heartbeat goes on and the watchdog does not take it for stuck.
            let proxy = match &self.proxies {
                Some(choice) => {
                    let proxy = choice.next(&self.ctx.pool, self.fence.run_id, keep).await?;
                    if let PageSource::Http(client) = &mut *source {
                        client.route_through(&proxy).await?;
                    }
                    Some(proxy)
                }
                None => None,
            };
            self.pace().wait().await?;
            // A list's URL is not entered: its store is its one write (the
            // run's row would otherwise serialize the URLs in flight twice).
            if !matches!(call, Call::ListUrl) {
                self.enter_call(call, url).await?;
            }
            let started = Instant::now();
            let fetched = source
                .fetch(
                    spec,
                    url,
                    call.page(),
                    self.page_limits(call),
                    &self.ctx.guard,
                )
                .await;
            metrics()
                .page_fetch_duration
                .with_label_values(&[&site])
                .observe(started.elapsed().as_secs_f64());
            metrics().pages_fetched.inc();
            if let Some(proxy) = &proxy {
                let backoff = self.ctx.proxy_first_backoff;
                proxy_health::record(&self.ctx.pool, site_id, proxy, &fetched, backoff).await;
            }
            // Through one member of a pool, a refusal is that member's ban:
            // it is retired for its back-off and the page tried again through
            // another (a site that refuses every member pauses itself: they
            // are all retired).
            let switches =
                proxy.is_some() && !keep && self.proxies.as_ref().is_some_and(|c| c.members() > 1);
            if switches
                && attempt < tries
                && fetched.is_err()
                && proxy_health::refusal_of(&fetched).is_some()
            {
                // A failed connection or a 403 through the member: the next
                // try goes through another rather than failing the attempt,
                // the run between pages meanwhile (counted as a refusal).
                if !matches!(call, Call::ListUrl) {
                    let waiting = persist("page refused", OUTAGE_PATIENCE, || {
                        store::runs::page_refused(&self.ctx.pool, self.fence)
                    })
                    .await?;
                    self.ctx.events.run_updated(&waiting).await;
                }
                continue;
            }
            let (refusal, reason, retry_after) = match fetched? {
                Fetched::Refused {
                    refusal,
                    reason,
                    retry_after,
                } => (refusal, reason, retry_after),
                other => return Ok(other),
            };
            metrics()
                .site_refusals
                .with_label_values(&[&site, &refusal.label()])
                .inc();
            if matches!(call, Call::ListUrl) {
                // A refusal is counted from a call, as any page's.
                self.enter_call(call, url).await?;
            }
            // The member is retired: the site is not paused for the fleet.
            let pause = match switches {
                true => None,
                false => self.ctx.limiter.refuse(site_id, retry_after).await.ok(),
            };
            let waiting = persist("page refused", OUTAGE_PATIENCE, || {
                store::runs::page_refused(&self.ctx.pool, self.fence)
            })
            .await?;
            self.ctx.events.run_updated(&waiting).await;
            tracing::info!(
                run_id = self.fence.run_id,
                site_id,
                %reason,
                ?retry_after,
                ?pause,
                try_number = attempt,
                "site refused the page; the fleet pauses it or retires the proxy"
            );
            if attempt == tries {
                return Err(CrawlError::failed(
                    FailureKind::Blocked,
                    format!("refused: {reason} ({tries} tries)"),
                ));
            }
        }
        unreachable!("the last try returns")
    }
}
