//! The detail pages of a list page's items: which to read (the site's
//! `detail.read`, against what the store knows of each item), each fetched
//! like a list page (the site's pace, the SSRF guard, robots.txt, its
//! identity, the stuck timeout, refusals tried again), its fields merged into
//! the item. A list page is stored with its details, in one fenced write.
//! A detail page that fails fails the attempt (retried as its failure kind
//! says), its evidence naming its URL; one the guard or robots.txt refuses
//! is not read, and the item keeps the detail values it had.

use std::{collections::HashMap, sync::atomic::Ordering};

use chrono::Utc;
use serde_json::Value;
use url::Url;

use super::{
    OUTAGE_PATIENCE,
    pages::{Call, Crawl},
    persist,
};
use crate::{
    domain::{
        item::PageItem,
        saved_page::SavedDetail,
        site::{DetailSpec, RenderMode, SiteSpec},
        value::ValueReport,
    },
    ops::metrics::metrics,
    store::{
        self,
        runs::{Evidence, FenceError},
    },
    worker::{
        error::CrawlError,
        extract::{content_hash, typed_page},
        fetch::{Fetched, HttpClient, PageSource, read_failed},
        session::SessionCookies,
    },
};

/// The detail pages of one crawl attempt.
pub(super) struct DetailPages<'a> {
    detail: &'a DetailSpec,
    /// The site's spec reading a detail page: its fields inside the whole
    /// page, no paging, no actions, in the detail pages' render mode.
    spec: SiteSpec,
    /// An HTTP client of its own, when a browser site reads its detail
    /// pages over HTTP.
    own: Option<HttpClient>,
    /// What this attempt read, by item identity: an item listed twice is read once.
    read: HashMap<String, Value>,
    /// The bodies of the pages just read, while the crawl keeps bodies: the
    /// list page's crawl moves them to its saved pages.
    pub kept: Vec<SavedDetail>,
}

/// A list page's items with their details merged in.
pub(super) struct WithDetails {
    pub items: Vec<PageItem>,
    /// Identity keys of the items whose detail page was read for this page.
    pub read: Vec<String>,
}

impl<'c> Crawl<'c> {
    /// The crawl's detail pages, when its site has them.
    pub(super) fn detail_pages(&self) -> Option<DetailPages<'c>> {
        Some(DetailPages {
            detail: self.spec.detail.as_ref()?,
            spec: self.spec.detail_page_spec()?,
            own: None,
            read: HashMap::new(),
            kept: Vec::new(),
        })
    }

    /// Reads the detail pages of `items` the site's read setting asks for
    /// and merges every item's detail values in: those just read, else
    /// those it kept from its last read. What did not parse is added to `values`.
    pub(super) async fn with_details(
        &self,
        details: &mut DetailPages<'_>,
        source: &mut PageSource<'_>,
        items: Vec<PageItem>,
        values: &mut ValueReport,
    ) -> Result<WithDetails, CrawlError> {
        let item_key = self.spec.item_key.as_deref();
        let keys: Vec<String> = items.iter().map(|i| i.identity(item_key).key).collect();
        let (pool, run) = (&self.ctx.pool, self.run);
        let known = persist("detail check", OUTAGE_PATIENCE, || async {
            store::items::known_details(pool, (run.keyword_id, run.url_list_id), run.site_id, &keys)
                .await
                .map_err(FenceError::from)
        })
        .await?;
        let now = Utc::now();
        let detail = details.detail;
        let mut read = Vec::new();
        let mut merged = Vec::with_capacity(items.len());
        for (item, key) in items.into_iter().zip(keys) {
            let known = known.get(&key);
            let kept = || known.map(|k| k.fields.clone());
            let values_of_item = if let Some(values) = details.read.get(&key) {
                Some(values.clone())
            } else {
                match detail.url_in(&item.fields) {
                    Some(url) if detail.wants(known, &item.fields, now) => {
                        match self.read_detail(details, source, &url, values).await? {
                            Some(page) => {
                                details.read.insert(key.clone(), page.clone());
                                read.push(key.clone());
                                Some(page)
                            }
                            None => kept(),
                        }
                    }
                    _ => kept(),
                }
            };
            let fields = detail.merge(&item.fields, values_of_item.as_ref());
            merged.push(PageItem {
                content_hash: content_hash(&fields),
                fields,
                item_url: item.item_url,
            });
        }
        Ok(WithDetails {
            items: merged,
            read,
        })
    }

    /// Reads one detail page's values; `None` when the guard or robots.txt
    /// does not let it be read.
    async fn read_detail(
        &self,
        details: &mut DetailPages<'_>,
        source: &mut PageSource<'_>,
        url: &Url,
        values: &mut ValueReport,
    ) -> Result<Option<Value>, CrawlError> {
        let ctx = self.ctx;
        if let Err(refused) = ctx.guard.check(url).await {
            tracing::warn!(run_id = self.fence.run_id, %url, %refused, "detail page not read: target refused");
            return Ok(None);
        }
        if let Some(why) = ctx.robots.disallows(self.spec, url, &ctx.guard).await {
            metrics()
                .robots_disallowed
                .with_label_values(&[&self.run.site_id.to_string()])
                .inc();
            tracing::info!(run_id = self.fence.run_id, %url, %why, "detail page not read: robots.txt");
            return Ok(None);
        }
        if details.own.is_none() && needs_own_client(&details.spec, source) {
            details.own = Some(
                HttpClient::new(
                    &self.spec.identity,
                    ctx.guard.clone(),
                    self.stuck_timeout,
                    SessionCookies::empty(),
                    self.pace(),
                )
                .await?
                .with_max_page_bytes(ctx.bounds.page_bytes),
            );
        }
        let fetched = match details.own.take() {
            Some(client) => {
                let mut own = PageSource::Http(client);
                let fetched = self
                    .fetch_paced(&mut own, &details.spec, url, Call::DetailPage)
                    .await;
                let PageSource::Http(mut client) = own else {
                    unreachable!("the own source is HTTP")
                };
                if fetched.is_err() {
                    // The attempt's own evidence is the browser's page: this
                    // one is kept here, and the browser's is not taken.
                    let answer = client.failed_answer.take();
                    self.keep_detail_evidence(url, answer.map(|a| a.1)).await;
                    self.detail_evidence_kept.store(true, Ordering::Relaxed);
                }
                details.own = Some(client);
                fetched
            }
            None => {
                let fetched = self
                    .fetch_paced(source, &details.spec, url, Call::DetailPage)
                    .await;
                // A request that got no answer (a hang) leaves no page for
                // the crawl to keep: its URL is kept here.
                if fetched.is_err()
                    && let PageSource::Http(client) = source
                    && client.failed_answer.is_none()
                {
                    self.keep_detail_evidence(url, None).await;
                }
                fetched
            }
        };
        let raw = match fetched.map_err(|e| e.of_detail_page(url))? {
            Fetched::Items { items, body, .. } => {
                if let Some(body) = body {
                    details.kept.push(SavedDetail {
                        url: url.to_string(),
                        render: details.spec.render,
                        body,
                    });
                }
                items
            }
            // A detail page is judged as a first page: never past the end.
            Fetched::PastTheEnd => return Ok(Some(Value::Object(Default::default()))),
            Fetched::Refused { .. } => unreachable!("refusals are retried by fetch_paced"),
        };
        let (typed, report) = typed_page(
            raw,
            &details.detail.fields,
            ctx.bounds.field_chars,
            (ctx.extract_budget, self.stuck_timeout),
        )
        .await
        .map_err(|e| read_failed(e, url).of_detail_page(url))?;
        values.merge(report);
        Ok(Some(typed.into_iter().next().map_or_else(
            || Value::Object(Default::default()),
            |item| item.fields,
        )))
    }

    /// Keeps a failed detail page's URL and, when it answered, its HTML.
    async fn keep_detail_evidence(&self, url: &Url, html: Option<String>) {
        let evidence = Evidence {
            page_url: Some(url.to_string()),
            html,
            screenshot: None,
        };
        if let Err(e) =
            store::runs::keep_evidence(&self.ctx.pool, self.fence, &evidence.capped()).await
        {
            tracing::warn!(run_id = self.fence.run_id, error = ?e, "the failed detail page was not kept");
        }
    }
}

/// Whether detail pages read as `spec` need an HTTP client of their own:
/// a browser site's pages read over HTTP.
fn needs_own_client(spec: &SiteSpec, source: &PageSource<'_>) -> bool {
    matches!(
        (spec.render, source),
        (RenderMode::Http, PageSource::Browser(_))
    )
}
