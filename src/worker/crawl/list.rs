//! A URL list's run: each URL its period has not read yet, in line order,
//! fetched and read as a page of a crawl is (the site's pace, the SSRF
//! guard, robots.txt, identity, render mode, extraction, typed values,
//! detail pages), several at once over plain HTTP (the site's concurrency)
//! and never faster than the site's rate. Each page is stored
//! with its entry marked read in one fenced transaction, so a retried or
//! rescued run reads on after the last URL stored; a URL that cannot be
//! read is recorded on its entry and the run goes on.

use std::{collections::VecDeque, sync::Mutex};

use futures::future::try_join_all;
use url::Url;

use super::{
    OUTAGE_PATIENCE,
    bounds::{bound_page, bound_run},
    pages::{Call, Crawl},
    persist,
};
use crate::{
    domain::{
        bounds::BoundsReport,
        item::PageItem,
        page::{CrawledPage, PagesRead, PagingEnd},
        value::ValueReport,
    },
    events::Event,
    store::{
        self,
        runs::{FenceError, PendingEntry, StoredPage},
    },
    worker::{
        error::CrawlError,
        fetch::{Fetched, HttpClient, PageSource},
        session::SessionCookies,
    },
};

/// Entries read from Postgres at a time.
const ENTRIES_BATCH: i64 = 500;
/// Most URLs of one run in flight at once, whatever the site allows.
const MAX_LANES: usize = 16;

/// What the lanes of a list run share: what the bounds left out, the values
/// that did not parse, the items kept so far, and whether the run is full.
struct Tally {
    bounded: BoundsReport,
    values: ValueReport,
    kept: usize,
    full_at: Option<i32>,
}

impl Crawl<'_> {
    /// How many of the list's URLs are read at once: the site's concurrency
    /// (`max_concurrent_runs`), over plain HTTP only, and one where a read
    /// carries state from URL to URL (a browser page, a kept session,
    /// detail pages read once a run). The site's rate holds for them all.
    fn list_lanes(&self, source: &PageSource<'_>) -> usize {
        let shared = matches!(source, PageSource::Browser(_))
            || self.spec.session.keep
            || self.spec.detail.is_some();
        match shared {
            true => 1,
            false => (self.spec.politeness.max_concurrent_runs.max(1) as usize).min(MAX_LANES),
        }
    }

    /// Reads list `list_id`'s URLs not read in the run's period, batch by
    /// batch in line order, up to [`Crawl::list_lanes`] at once; returns
    /// what the run read (nothing left for the completion to store).
    pub(super) async fn list_urls(
        &self,
        source: &mut PageSource<'_>,
        list_id: i64,
    ) -> Result<PagesRead, CrawlError> {
        let period_start = self.run.period_start.unwrap_or(self.run.queued_at);
        let lanes = self.list_lanes(source);
        let mut more = Vec::with_capacity(lanes - 1);
        for _ in 1..lanes {
            let client = HttpClient::new(
                &self.spec.identity,
                self.ctx.guard.clone(),
                self.stuck_timeout,
                SessionCookies::empty(),
                self.pace(),
            )
            .await?
            .with_max_page_bytes(self.ctx.bounds.page_bytes);
            more.push(PageSource::Http(client));
        }
        let tally = Mutex::new(Tally {
            bounded: BoundsReport::new(self.ctx.bounds),
            values: ValueReport::default(),
            kept: 0,
            full_at: None,
        });
        let details = tokio::sync::Mutex::new(self.detail_pages());
        let mut last_line = 0;
        loop {
            let (pool, after) = (&self.ctx.pool, last_line);
            let batch = persist("list entries", OUTAGE_PATIENCE, || async move {
                store::runs::pending_entries(pool, list_id, period_start, after, ENTRIES_BATCH)
                    .await
                    .map_err(FenceError::from)
            })
            .await?;
            let Some(last) = batch.last() else {
                let tally = tally.into_inner().expect("no lane panicked");
                return Ok(PagesRead::new(last_line, PagingEnd::LastPage)
                    .with_reports(tally.bounded, tally.values));
            };
            last_line = last.line;
            let queue = Mutex::new(VecDeque::from(batch));
            let sources = std::iter::once(&mut *source).chain(more.iter_mut());
            try_join_all(
                sources.map(|source| self.lane(source, list_id, &queue, &tally, &details)),
            )
            .await?;
            let tally = tally.lock().expect("no lane panicked");
            if let Some(line) = tally.full_at {
                let tally = Tally {
                    bounded: tally.bounded.clone(),
                    values: tally.values.clone(),
                    ..*tally
                };
                return Ok(PagesRead::new(line, PagingEnd::ItemCap)
                    .with_reports(tally.bounded, tally.values));
            }
        }
    }

    /// One lane of a list run: takes the batch's next URL until none is
    /// left (or the run is full), reads it with its own page source, and
    /// stores it, or records it failed.
    async fn lane(
        &self,
        source: &mut PageSource<'_>,
        list_id: i64,
        queue: &Mutex<VecDeque<PendingEntry>>,
        tally: &Mutex<Tally>,
        details: &tokio::sync::Mutex<Option<super::details::DetailPages<'_>>>,
    ) -> Result<(), CrawlError> {
        loop {
            if tally.lock().expect("no lane panicked").full_at.is_some() {
                return Ok(());
            }
            let Some(entry) = queue.lock().expect("no lane panicked").pop_front() else {
                return Ok(());
            };
            let mut values = ValueReport::default();
            // Detail pages are read in one lane only (`list_lanes`): their
            // lock is never waited for by another.
            let read = match self.spec.detail {
                Some(_) => {
                    let mut details = details.lock().await;
                    self.read_url(source, &entry, &mut values, details.as_mut())
                        .await
                }
                None => self.read_url(source, &entry, &mut values, None).await,
            };
            let (items, details_read) = match read {
                Ok(read) => read,
                // A browser gone takes every URL after it: the attempt fails.
                Err(CrawlError::Attempt {
                    failure,
                    broken_session: false,
                }) => {
                    self.url_failed(list_id, &entry, &failure.to_string())
                        .await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let items = {
                let mut tally = tally.lock().expect("no lane panicked");
                let tally = &mut *tally;
                tally.values.merge(values);
                let fields = self.spec.extraction.fields();
                let mut items = bound_page(items, fields, &self.ctx.bounds, &mut tally.bounded);
                if bound_run(&mut items, tally.kept, &self.ctx.bounds, &mut tally.bounded) {
                    tally.full_at.get_or_insert(entry.line);
                }
                tally.kept += items.len();
                items
            };
            self.store_entry(list_id, &entry, &items, &details_read)
                .await?;
        }
    }

    /// The items of one URL's page, typed, with their detail pages merged.
    /// A page of one item without a URL of its own is the URL's item: it is
    /// identified by the URL within the list.
    async fn read_url(
        &self,
        source: &mut PageSource<'_>,
        entry: &PendingEntry,
        values: &mut ValueReport,
        details: Option<&mut super::details::DetailPages<'_>>,
    ) -> Result<(Vec<PageItem>, Vec<String>), CrawlError> {
        let url = Url::parse(&entry.url).map_err(|e| {
            CrawlError::failed(
                crate::domain::failure::FailureKind::Misconfigured,
                format!("{}: {e}", entry.url),
            )
        })?;
        self.ctx.guard.check(&url).await?;
        // Asked as a first page: a disallowed URL fails, the run goes on.
        self.robots_stop(&url, 1).await?;
        let (mut items, page_values) = match self
            .fetch_paced(source, self.spec, &url, Call::ListUrl)
            .await?
        {
            Fetched::Items { items, .. } => self.typed(items, &url).await?,
            Fetched::PastTheEnd => (Vec::new(), ValueReport::default()),
            Fetched::Refused { .. } => unreachable!("refusals are retried by fetch_paced"),
        };
        values.merge(page_values);
        if let [item] = items.as_mut_slice()
            && item.item_url.is_none()
        {
            item.item_url = Some(entry.url.clone());
        }
        match details {
            Some(details) => {
                let with = self.with_details(details, source, items, values).await?;
                Ok((with.items, with.read))
            }
            None => Ok((items, Vec::new())),
        }
    }

    /// Stores one URL's page and marks its entry read (one fenced
    /// transaction), and tells the live clients.
    async fn store_entry(
        &self,
        list_id: i64,
        entry: &PendingEntry,
        items: &[PageItem],
        details_read: &[String],
    ) -> Result<(), CrawlError> {
        let crawled = CrawledPage {
            page: entry.line,
            url: &entry.url,
            items,
            item_key: self.spec.item_key.as_deref(),
            stored_before: &[],
            details_read,
        };
        let StoredPage {
            run: stored,
            stored: count,
            ..
        } = persist("list page", OUTAGE_PATIENCE, || {
            store::runs::store_list_page(&self.ctx.pool, self.fence, &crawled, list_id)
        })
        .await?;
        self.ctx
            .events
            .publish_all(&[
                Event::ResultStored {
                    run_id: stored.id,
                    keyword_id: None,
                    url_list_id: Some(list_id),
                    site_id: stored.site_id,
                    page: entry.line,
                    count,
                },
                Event::run_updated(&stored),
            ])
            .await;
        Ok(())
    }

    /// Records a URL that could not be read on its entry; the run goes on.
    async fn url_failed(
        &self,
        list_id: i64,
        entry: &PendingEntry,
        error: &str,
    ) -> Result<(), CrawlError> {
        tracing::info!(run_id = self.fence.run_id, url = %entry.url, %error, "a URL of the list failed");
        let run = persist("list URL failed", OUTAGE_PATIENCE, || {
            store::runs::list_url_failed(&self.ctx.pool, self.fence, list_id, &entry.url, error)
        })
        .await?;
        self.ctx.events.run_updated(&run).await;
        Ok(())
    }
}
