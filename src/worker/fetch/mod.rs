//! Fetching one results page in the site's render mode: in Chrome, or over
//! plain HTTP (HTML or a JSON API). Every mode answers the same way, so the
//! crawl around it (states, limits, retries, storage) is the same for all.

mod actions;
mod browser;
mod http;
mod in_place;
pub mod kept;
mod page_html;
mod robots;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use url::Url;

pub use browser::{BrowserPage, prepare_for_crawl};
pub use http::{HttpClient, first_way_out};
pub use page_html::LoadedHtml;
pub use robots::fetch_robots;

use super::{
    error::CrawlError,
    extract::{
        HtmlRead, HtmlReading, RawItems, ReadError, StructuredListing, off_runtime, read_html,
        read_json,
    },
};
use crate::{
    domain::{
        failure::FailureKind,
        paging::Paging,
        saved_page::KeptBody,
        site::{Extraction, SiteSpec},
    },
    net::target_guard::TargetGuard,
};

/// What fetching one page gave.
#[derive(Debug)]
pub enum Fetched {
    /// The page's items as read (their value rules not applied yet) and,
    /// for JSON APIs paged by token, the next token.
    Items {
        items: RawItems,
        next_token: Option<String>,
        /// The page's structured data, when it was asked for (the preview).
        structured: Option<StructuredListing>,
        /// Where the page's next link goes (`next_link` paging).
        next_link: Option<Box<Url>>,
        /// The page's body, deflated, when it was asked for (saved pages;
        /// http and json modes).
        body: Option<KeptBody>,
    },
    /// A later page answered 404/410: the results ended before `max_pages`.
    PastTheEnd,
    /// The site refused us (429, 503, a block page): the site slows down
    /// fleet-wide and the page is tried again.
    Refused {
        refusal: Refusal,
        /// What a person reads: the refusal and where.
        reason: String,
        retry_after: Option<Duration>,
    },
}

/// How a site refused a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// An HTTP status that asks us to come back later (429, 503).
    Status(u16),
    /// A page showing the site's blocked selector.
    BlockedPage,
}

impl Refusal {
    /// The `reason` label of `crawlfleet_site_refusals_total`.
    pub fn label(self) -> String {
        match self {
            Refusal::Status(status) => status.to_string(),
            Refusal::BlockedPage => "blocked".to_owned(),
        }
    }
}

impl Fetched {
    /// A refusal carries the server's Retry-After.
    fn with_retry_after(self, retry_after: Option<Duration>) -> Fetched {
        match self {
            Fetched::Refused {
                refusal, reason, ..
            } => Fetched::Refused {
                refusal,
                reason,
                retry_after,
            },
            other => other,
        }
    }
}

/// `Retry-After` as seconds or as an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// What an HTTP status says about a page, before it is read: `None` to read it.
fn judge_status(status: u16, page: i32, url: &Url) -> Result<Option<Fetched>, CrawlError> {
    match status {
        404 | 410 if page > 1 => Ok(Some(Fetched::PastTheEnd)),
        429 | 503 => Ok(Some(Fetched::Refused {
            refusal: Refusal::Status(status),
            reason: format!("HTTP {status} at {url}"),
            retry_after: None,
        })),
        408 | 500..=599 => Err(CrawlError::failed(
            FailureKind::SiteError,
            format!("HTTP {status} at {url}"),
        )),
        400..=499 => Err(CrawlError::failed(
            FailureKind::HttpStatus,
            format!("HTTP {status} at {url}: the site refused the search page"),
        )),
        _ => Ok(None),
    }
}

/// What one page may take.
#[derive(Debug, Clone, Copy)]
pub struct PageLimits {
    /// The site's stuck timeout: fetching the page and reading it end within it.
    pub stuck_timeout: Duration,
    /// The time reading a page in http and json modes may use (`EXTRACT_BUDGET_MS`).
    pub extract_budget: Duration,
    /// Items a page may keep (`PAGE_MAX_ITEMS`): reading stops one past it,
    /// so the bounds still see that the page had more.
    pub page_items: usize,
    /// Whether the page's structured data is listed too (a preview's pages).
    pub list_structured: bool,
    /// Whether the page's body is kept, deflated (a crawl's list pages
    /// while its saved pages have room).
    pub keep_body: bool,
}

/// Where a crawl's pages come from.
pub enum PageSource<'a> {
    Browser(BrowserPage<'a>),
    Http(HttpClient),
}

impl PageSource<'_> {
    /// Where the last page fetched ended: the browser's address, or the URL
    /// the last HTTP answer came from.
    pub async fn last_url(&self) -> Option<Url> {
        match self {
            // Bounded: a hung renderer does not hold the answer up.
            PageSource::Browser(browser) => {
                tokio::time::timeout(Duration::from_secs(3), browser.session.url())
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
            PageSource::Http(client) => client.last_url.as_deref().cloned(),
        }
    }

    /// Fetches page number `page` at `url` and reads its items.
    pub async fn fetch(
        &mut self,
        spec: &SiteSpec,
        url: &Url,
        page: i32,
        limits: PageLimits,
        guard: &TargetGuard,
    ) -> Result<Fetched, CrawlError> {
        match (self, &spec.extraction) {
            (PageSource::Browser(browser), Extraction::Html { .. }) => {
                let fetched = browser.fetch(spec, url, page, limits, guard).await?;
                expect_items(spec, page, url, fetched)
            }
            (
                PageSource::Http(client),
                Extraction::Html {
                    items,
                    fields,
                    blocked_selector,
                    ..
                },
            ) => {
                let started = Instant::now();
                let answer = client
                    .get(url, "text/html,application/xhtml+xml,*/*;q=0.8")
                    .await?;
                client.last_url = Some(Box::new(answer.url.clone()));
                if let Some(judged) =
                    client.keep_if_failed(&answer, judge_status(answer.status, page, url))?
                {
                    return Ok(judged.with_retry_after(answer.retry_after));
                }
                let answer = Arc::new(answer);
                let page_answer = answer.clone();
                let reading = HtmlReading {
                    items: items.clone(),
                    fields: fields.clone(),
                    blocked_selector: blocked_selector.clone(),
                    list_structured: limits.list_structured,
                    max_items: limits.page_items.saturating_add(1),
                    next_link: match &spec.paging {
                        Paging::NextLink { selector } => Some(selector.clone()),
                        _ => None,
                    },
                };
                let read = off_runtime(
                    limits.extract_budget,
                    limits.stuck_timeout.saturating_sub(started.elapsed()),
                    move |budget| {
                        let read =
                            read_html(&page_answer.text(), &page_answer.url, &reading, budget)?;
                        let body = limits.keep_body.then(|| kept::deflate(&page_answer.body));
                        Ok((read, body))
                    },
                )
                .await
                .map_err(|e| read_failed(e, url));
                let (read, body) = client.keep_if_failed(&answer, read)?;
                let fetched = match read {
                    HtmlRead::Blocked => {
                        let blocked = blocked_selector.as_ref().map_or("", |b| b.as_str());
                        return Ok(blocked_page(blocked, url));
                    }
                    HtmlRead::Items {
                        items,
                        structured,
                        next_link,
                    } => Fetched::Items {
                        items,
                        next_token: None,
                        structured,
                        next_link,
                        body,
                    },
                };
                client.keep_if_failed(&answer, expect_items(spec, page, url, fetched))
            }
            (
                PageSource::Http(client),
                Extraction::Json {
                    items,
                    fields,
                    paging,
                },
            ) => {
                let started = Instant::now();
                let answer = client.get(url, "application/json").await?;
                client.last_url = Some(Box::new(answer.url.clone()));
                if let Some(judged) =
                    client.keep_if_failed(&answer, judge_status(answer.status, page, url))?
                {
                    return Ok(judged.with_retry_after(answer.retry_after));
                }
                let answer = Arc::new(answer);
                let (page_answer, items, fields, paging) = (
                    answer.clone(),
                    items.clone(),
                    fields.clone(),
                    paging.clone(),
                );
                let read = off_runtime(
                    limits.extract_budget,
                    limits.stuck_timeout.saturating_sub(started.elapsed()),
                    move |budget| {
                        let read = read_json(
                            &page_answer.body,
                            &page_answer.url,
                            &items,
                            &fields,
                            paging.as_ref(),
                            limits.page_items.saturating_add(1),
                            budget,
                        )?;
                        let body = limits.keep_body.then(|| kept::deflate(&page_answer.body));
                        Ok((read, body))
                    },
                )
                .await
                .map_err(|e| read_failed(e, url));
                let (read, body) = client.keep_if_failed(&answer, read)?;
                let fetched = Fetched::Items {
                    items: read.items,
                    next_token: read.next_token,
                    structured: None,
                    next_link: None,
                    body,
                };
                client.keep_if_failed(&answer, expect_items(spec, page, url, fetched))
            }
            (PageSource::Browser(_), Extraction::Json { .. }) => Err(CrawlError::failed(
                FailureKind::Misconfigured,
                "a JSON API is read over HTTP, not in a browser",
            )),
        }
    }
}

/// A page that could not be read, as the attempt's failure.
pub(crate) fn read_failed(e: ReadError, url: &Url) -> CrawlError {
    let kind = match &e {
        ReadError::OverBudget(_) => FailureKind::ExtractionOverBudget,
        ReadError::Misconfigured(_) => FailureKind::Misconfigured,
        ReadError::Unreadable(_) => FailureKind::UnreadablePage,
        ReadError::Stuck => FailureKind::Stuck,
        ReadError::Panicked(_) => FailureKind::Internal,
    };
    match e {
        ReadError::Stuck => CrawlError::failed(kind, format!("stuck: {e} at {url}")),
        ReadError::Unreadable(message) => CrawlError::failed(kind, message),
        e => CrawlError::failed(kind, format!("{e} at {url}")),
    }
}

/// A first page without items fails the attempt on a site that expects
/// items (`expect_items`): its selectors (or structured data) no longer
/// find anything.
fn expect_items(
    spec: &SiteSpec,
    page: i32,
    url: &Url,
    fetched: Fetched,
) -> Result<Fetched, CrawlError> {
    match &fetched {
        Fetched::Items { items, .. } if spec.expect_items && page == 1 && items.is_empty() => {
            let found_nothing = match spec.extraction.structured_items() {
                Some(item_type) => format!("its structured data holds no {}", item_type.as_str()),
                None => "the site's selectors found nothing".to_owned(),
            };
            Err(CrawlError::failed(
                FailureKind::NoItems,
                format!("no items on the first page at {url}: {found_nothing}"),
            ))
        }
        _ => Ok(fetched),
    }
}

fn blocked_page(selector: &str, url: &Url) -> Fetched {
    Fetched::Refused {
        refusal: Refusal::BlockedPage,
        reason: format!("blocked page ({selector}) at {url}"),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_judged_into_refusals_and_typed_failures() {
        let url = Url::parse("http://127.0.0.1/search").unwrap();
        let kind = |status| match judge_status(status, 1, &url) {
            Err(CrawlError::Attempt { failure, .. }) => Some(failure.kind),
            _ => None,
        };
        assert_eq!(kind(404), Some(FailureKind::HttpStatus));
        assert_eq!(kind(500), Some(FailureKind::SiteError));
        assert_eq!(kind(408), Some(FailureKind::SiteError));
        assert!(matches!(
            judge_status(429, 1, &url),
            Ok(Some(Fetched::Refused { refusal, .. })) if refusal.label() == "429"
        ));
        assert!(matches!(
            judge_status(404, 2, &url),
            Ok(Some(Fetched::PastTheEnd))
        ));
        assert!(matches!(judge_status(200, 1, &url), Ok(None)));
        assert_eq!(Refusal::BlockedPage.label(), "blocked");
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        let later = (chrono::Utc::now() + chrono::TimeDelta::seconds(90)).to_rfc2822();
        let wait = parse_retry_after(&later).unwrap();
        assert!((85..=90).contains(&wait.as_secs()), "{wait:?}");
        assert_eq!(parse_retry_after("soon"), None);
    }
}
