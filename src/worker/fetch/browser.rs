//! A results page in headless Chrome: load it within the stuck timeout, tell
//! a slow server from a page stuck in a script, judge its status, wait for
//! the site's element and read the items (and the next link); or, paging in
//! place, show more of the same document and read what it added.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use url::Url;

use super::{
    Fetched, PageLimits,
    actions::run_actions,
    blocked_page,
    in_place::show_more,
    judge_status, kept,
    page_html::{LoadedHtml, too_large},
    parse_retry_after, read_failed,
};
use crate::{
    domain::{
        bounds::CrawlBounds,
        failure::FailureKind,
        paging::Paging,
        site::{Extraction, HtmlItems, SiteSpec},
    },
    net::target_guard::TargetGuard,
    ops::metrics::metrics,
    worker::{
        browser::{BrowserSession, DocumentResponse, LoadError},
        error::CrawlError,
        extract::{HtmlReading, PageReader, RawItems, off_runtime, read_rendered},
        session::KeptSession,
    },
};

/// Longest wait for a site's `wait_for` element before the page counts as empty.
const WAIT_FOR_LIMIT: Duration = Duration::from_secs(10);

/// The browser session a crawl reads its pages in.
pub struct BrowserPage<'a> {
    pub session: &'a mut BrowserSession,
    /// What one page may hold.
    pub bounds: CrawlBounds,
    /// Items the document showed when it was last read: paging in place
    /// reads past them.
    shown: usize,
    /// The keyword searched for (a page action may type it).
    keyword: String,
}

/// Makes a context the site's: its user agent and extra headers, what its
/// pages download (`browser_resources`), and the site's kept session when it
/// keeps one. The context is new or was wiped after its last crawl: nothing
/// of another crawl is in it.
pub async fn prepare_for_crawl(
    session: &mut BrowserSession,
    spec: &SiteSpec,
    kept: Option<&KeptSession>,
) -> anyhow::Result<()> {
    let user_agent = spec
        .identity
        .user_agent
        .clone()
        .unwrap_or_else(|| session.default_user_agent().to_owned());
    session
        .set_identity(&user_agent, &spec.identity.headers)
        .await?;
    session.set_resources(spec.browser_resources).await?;
    if let Some(kept) = kept {
        session.set_cookies(kept.cookies_for_chrome()).await?;
        if let Some(source) = kept.local_storage_script() {
            session.restore_before_first_page(source).await?;
        }
    }
    Ok(())
}

impl<'a> BrowserPage<'a> {
    /// Pages of a search for `keyword` read in `session`, each within `bounds`.
    pub fn new(session: &'a mut BrowserSession, bounds: CrawlBounds, keyword: &str) -> Self {
        BrowserPage {
            session,
            bounds,
            shown: 0,
            keyword: keyword.to_owned(),
        }
    }

    /// Loads and reads one page; the DevTools commands it took (with the
    /// crawl's set-up before its first page) go to
    /// `crawlfleet_browser_commands_per_page`.
    pub async fn fetch(
        &mut self,
        spec: &SiteSpec,
        url: &Url,
        page: i32,
        limits: PageLimits,
        guard: &TargetGuard,
    ) -> Result<Fetched, CrawlError> {
        let fetched = self.load_and_read(spec, url, page, limits, guard).await;
        metrics()
            .browser_commands_per_page
            .observe(self.session.take_commands().into());
        fetched
    }

    async fn load_and_read(
        &mut self,
        spec: &SiteSpec,
        url: &Url,
        page: i32,
        limits: PageLimits,
        guard: &TargetGuard,
    ) -> Result<Fetched, CrawlError> {
        let started = Instant::now();
        let stuck_timeout = limits.stuck_timeout;
        let Extraction::Html {
            items,
            fields,
            wait_for,
            blocked_selector,
        } = &spec.extraction
        else {
            return Err(CrawlError::failed(
                FailureKind::Misconfigured,
                "a browser page needs CSS extraction",
            ));
        };
        let item_selector = match items {
            HtmlItems::Selector(selector) => Some(selector.as_str()),
            HtmlItems::Structured(_) => None,
        };
        // Paging in place: page 1 is loaded, later pages are more of it.
        let skip = match (spec.paging.in_place(), item_selector) {
            (true, Some(item_selector)) if page > 1 => {
                let more = show_more(
                    self.session,
                    &spec.paging,
                    item_selector,
                    self.shown,
                    stuck_timeout,
                )
                .await?;
                tracing::debug!(%url, page, ?more, shown = self.shown, "asked for more items");
                self.shown
            }
            _ => {
                if let Some(judged) = self.load_page(url, page, guard, stuck_timeout).await? {
                    return Ok(judged);
                }
                // The site's page actions, on its first page, before it is read.
                if page == 1 && !spec.actions.is_empty() {
                    run_actions(self.session, &spec.actions, &self.keyword).await?;
                }
                0
            }
        };
        let reading = PageReader {
            awaited: match (wait_for, blocked_selector) {
                // Wait for the results, or for the page that says we are blocked.
                (Some(wait), Some(blocked)) => {
                    Some(format!("{}, {}", wait.as_str(), blocked.as_str()))
                }
                (Some(wait), None) => Some(wait.as_str().to_owned()),
                (None, _) => None,
            },
            blocked: blocked_selector.as_ref().map(|b| b.as_str()),
            wait_limit: WAIT_FOR_LIMIT.min(stuck_timeout),
            item_selector,
            fields,
            want_html: false,
            bounds: self.bounds,
            skip,
            next_link: match &spec.paging {
                Paging::NextLink { selector } => Some(selector.as_str()),
                _ => None,
            },
        };
        let html_reading = HtmlReading {
            items: items.clone(),
            fields: fields.clone(),
            blocked_selector: blocked_selector.clone(),
            list_structured: limits.list_structured,
            max_items: limits.page_items.saturating_add(1),
            // The browser's script reads it.
            next_link: None,
        };
        let reader = PageReader {
            // A kept list page is the DOM as rendered (saved pages).
            want_html: html_reading.needs_structured_data() || limits.keep_body,
            ..reading
        };
        self.read(reader, html_reading, url, guard, limits, started)
            .await
    }

    /// Loads `url` as a first page (its status judged, the site's page
    /// actions run, its `wait_for` awaited) and answers the DOM's HTML.
    pub(super) async fn page_html(
        &mut self,
        spec: &SiteSpec,
        url: &Url,
        stuck_timeout: Duration,
        guard: &TargetGuard,
    ) -> Result<LoadedHtml, CrawlError> {
        let Extraction::Html {
            wait_for,
            blocked_selector,
            ..
        } = &spec.extraction
        else {
            return Err(CrawlError::failed(
                FailureKind::Misconfigured,
                "a browser page needs CSS extraction",
            ));
        };
        if let Some(judged) = self.load_page(url, 1, guard, stuck_timeout).await? {
            return LoadedHtml::judged(judged, url);
        }
        if !spec.actions.is_empty() {
            run_actions(self.session, &spec.actions, &self.keyword).await?;
        }
        let no_fields = BTreeMap::new();
        let reader = PageReader {
            awaited: wait_for.as_ref().map(|w| w.as_str().to_owned()),
            blocked: blocked_selector.as_ref().map(|b| b.as_str()),
            wait_limit: WAIT_FOR_LIMIT.min(stuck_timeout),
            item_selector: None,
            fields: &no_fields,
            want_html: true,
            bounds: self.bounds,
            skip: 0,
            next_link: None,
        };
        let reading = match tokio::time::timeout(stuck_timeout, reader.read(self.session)).await {
            Ok(reading) => reading.map_err(|e| CrawlError::browser(format!("{e:#} at {url}")))?,
            Err(_) => {
                return Err(CrawlError::broken(
                    FailureKind::Stuck,
                    format!(
                        "stuck: the page stopped answering within {}s at {url}",
                        stuck_timeout.as_secs()
                    ),
                ));
            }
        };
        let landed = reading.url.as_deref().and_then(|u| Url::parse(u).ok());
        if let Some(landed) = &landed
            && landed.origin() != url.origin()
        {
            guard.check(landed).await?;
        }
        if reading.oversized(&self.bounds) {
            return Err(too_large(url, reading.page_bytes, &self.bounds));
        }
        if reading.blocked {
            let selector = blocked_selector.as_ref().map_or("", |b| b.as_str());
            return LoadedHtml::judged(blocked_page(selector, url), url);
        }
        Ok(LoadedHtml::Page {
            html: reading.html.unwrap_or_default(),
            url: landed.unwrap_or_else(|| url.clone()),
        })
    }

    /// Loads page `url` (number `page`) and judges its document: a refusal
    /// to reach it, a redirect to a private target, its HTTP status. `Some`
    /// when the status says the page is not to be read.
    async fn load_page(
        &mut self,
        url: &Url,
        page: i32,
        guard: &TargetGuard,
        stuck_timeout: Duration,
    ) -> Result<Option<Fetched>, CrawlError> {
        self.shown = 0;
        // A refusal left from the previous page (a late image) is not this page's.
        self.session.take_refused();
        let loaded = self.load(url, stuck_timeout).await;
        // The relay refused a connection: if it was the page itself (a
        // redirect to a private target), that is why the page is not there.
        if let Some(refused) = self.session.take_refused()
            && (loaded.is_err() || self.session.document().is_none())
        {
            return Err(CrawlError::refused(refused));
        }
        loaded?;
        self.session
            .page_loaded()
            .await
            .map_err(|e| CrawlError::browser(format!("{e:#}")))?;
        // A redirect may have led elsewhere: refuse a private target (the
        // relay refuses to connect to one when the guard is on; this also
        // covers a browser reached without it).
        if let Some(document) = self.session.document() {
            if let Ok(landed) = Url::parse(&document.url)
                && landed.origin() != url.origin()
            {
                guard.check(&landed).await?;
            }
            if let Some(judged) = judge_status(document.status, page, url)? {
                return Ok(Some(judged.with_retry_after(retry_after(document))));
            }
        }
        Ok(None)
    }

    /// Reads the page the session shows with `reader` (the items past those
    /// read already, the next link), completed by `html_reading` off the runtime.
    async fn read(
        &mut self,
        reader: PageReader<'_>,
        html_reading: HtmlReading,
        url: &Url,
        guard: &TargetGuard,
        limits: PageLimits,
        started: Instant,
    ) -> Result<Fetched, CrawlError> {
        let stuck_timeout = limits.stuck_timeout;
        // The script answers within its wait; a page that does not answer
        // within the stuck timeout is stuck in a script of its own.
        let reading = match tokio::time::timeout(stuck_timeout, reader.read(self.session)).await {
            Ok(reading) => reading.map_err(|e| CrawlError::browser(format!("{e:#} at {url}")))?,
            Err(_) => {
                return Err(CrawlError::broken(
                    FailureKind::Stuck,
                    format!(
                        "stuck: the page stopped answering within {}s at {url}",
                        stuck_timeout.as_secs()
                    ),
                ));
            }
        };
        if let Some(landed) = reading.url.as_deref().and_then(|u| Url::parse(u).ok())
            && landed.origin() != url.origin()
        {
            guard.check(&landed).await?;
        }
        if reading.oversized(&self.bounds) {
            return Err(too_large(url, reading.page_bytes, &self.bounds));
        }
        if !reading.appeared {
            tracing::info!(%url, "wait_for element never appeared; page counts as empty");
        }
        if let Some(blocked) = &html_reading.blocked_selector
            && reading.blocked
        {
            return Ok(blocked_page(blocked.as_str(), url));
        }
        self.shown = reading.shown;
        // Only an http(s) link is followed (and the guard checks it first).
        let next_link = reading
            .next
            .as_deref()
            .and_then(|href| Url::parse(href).ok())
            .filter(|link| matches!(link.scheme(), "http" | "https"))
            .map(Box::new);
        let landed = reading
            .url
            .as_deref()
            .and_then(|u| Url::parse(u).ok())
            .unwrap_or_else(|| url.clone());
        // The page's structured data is parsed off the runtime within the
        // page's budget, as a page read over HTTP is.
        let (html, items) = (reading.html, reading.items);
        let base = reading.base.unwrap_or_else(|| landed.clone());
        let keep_body = limits.keep_body;
        let read = off_runtime(
            limits.extract_budget,
            stuck_timeout.saturating_sub(started.elapsed()),
            move |budget| {
                let structured = html
                    .as_deref()
                    .filter(|_| html_reading.needs_structured_data());
                let read = read_rendered(structured, &landed, &html_reading, items, budget)?;
                let body = (html.as_deref())
                    .filter(|_| keep_body)
                    .map(|html| kept::deflate(html.as_bytes()));
                Ok((read, body))
            },
        )
        .await;
        let ((items, structured), body) = read.map_err(|e| read_failed(e, url))?;
        Ok(Fetched::Items {
            items: RawItems { items, base },
            next_token: None,
            structured,
            next_link,
            body,
        })
    }

    /// Loads `url` within the stuck timeout. A slow server leaves the page
    /// usable; a renderer stuck in a script does not even answer a probe, and
    /// the session is ended (its context disposed, which kills the renderer).
    async fn load(&mut self, url: &Url, stuck_timeout: Duration) -> Result<(), CrawlError> {
        match self.session.navigate(url, stuck_timeout).await {
            Ok(()) => Ok(()),
            Err(LoadError::Timeout { responsive }) => {
                let reason = format!(
                    "stuck: page did not load within {}s at {url}",
                    stuck_timeout.as_secs()
                );
                Err(match responsive {
                    true => CrawlError::failed(FailureKind::Stuck, reason),
                    false => CrawlError::broken(FailureKind::Stuck, reason),
                })
            }
            Err(LoadError::Failed(error)) => Err(CrawlError::failed(
                FailureKind::Network,
                format!("{error} at {url}"),
            )),
            Err(LoadError::Crashed) => Err(CrawlError::browser(format!(
                "the page's renderer crashed at {url}"
            ))),
            Err(LoadError::Browser(e)) => Err(CrawlError::browser(format!("loading {url}: {e}"))),
        }
    }
}

/// The Retry-After the site sent with the page's own document.
fn retry_after(document: &DocumentResponse) -> Option<Duration> {
    document.retry_after.as_deref().and_then(parse_retry_after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_as_seconds_or_a_date_and_absent_without_the_header() {
        let document = |retry_after: Option<&str>| DocumentResponse {
            url: "http://s.example/search?q=a".to_owned(),
            status: 429,
            retry_after: retry_after.map(str::to_owned),
        };
        assert_eq!(
            retry_after(&document(Some("7"))),
            Some(Duration::from_secs(7))
        );
        let soon = (chrono::Utc::now() + chrono::Duration::seconds(120)).to_rfc2822();
        let wait = retry_after(&document(Some(&soon))).unwrap();
        assert!(wait > Duration::from_secs(100) && wait <= Duration::from_secs(120));
        assert_eq!(retry_after(&document(None)), None);
        assert_eq!(retry_after(&document(Some("soon"))), None);
    }
}
