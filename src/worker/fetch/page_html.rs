//! A page's HTML, loaded as a crawl loads its first page (the site's render
//! mode and identity, the guard on every connection, its status judged, its
//! `wait_for` awaited and page actions run in a browser) but not read with
//! selectors: selectors are learned from it (`worker::learn`).

use std::time::Duration;

use url::Url;

use super::{Fetched, PageSource, judge_status};
use crate::{
    domain::{
        bounds::{Bound, CrawlBounds},
        failure::FailureKind,
        site::SiteSpec,
    },
    net::target_guard::TargetGuard,
    ops::metrics::metrics,
    worker::error::CrawlError,
};

/// What loading a page for its HTML gave.
#[derive(Debug)]
pub enum LoadedHtml {
    /// The page's HTML (the DOM as the browser shows it, in browser mode),
    /// and where it ended.
    Page { html: String, url: Url },
    /// The site refused us (429, 503, its blocked page).
    Refused {
        reason: String,
        retry_after: Option<Duration>,
    },
}

impl LoadedHtml {
    /// A page judged not to be read, as this answer.
    pub(super) fn judged(fetched: Fetched, url: &Url) -> Result<LoadedHtml, CrawlError> {
        match fetched {
            Fetched::Refused {
                reason,
                retry_after,
                ..
            } => Ok(LoadedHtml::Refused {
                reason,
                retry_after,
            }),
            Fetched::PastTheEnd | Fetched::Items { .. } => Err(CrawlError::failed(
                FailureKind::HttpStatus,
                format!("no page at {url}"),
            )),
        }
    }
}

impl PageSource<'_> {
    /// Loads `url` within `stuck_timeout` and answers its HTML.
    pub async fn page_html(
        &mut self,
        spec: &SiteSpec,
        url: &Url,
        stuck_timeout: Duration,
        guard: &TargetGuard,
    ) -> Result<LoadedHtml, CrawlError> {
        match self {
            PageSource::Browser(browser) => {
                let loaded = browser.page_html(spec, url, stuck_timeout, guard).await;
                metrics()
                    .browser_commands_per_page
                    .observe(browser.session.take_commands().into());
                loaded
            }
            PageSource::Http(client) => {
                let answer = client
                    .get(url, "text/html,application/xhtml+xml,*/*;q=0.8")
                    .await?;
                client.last_url = Some(Box::new(answer.url.clone()));
                if let Some(judged) = judge_status(answer.status, 1, url)? {
                    return LoadedHtml::judged(judged.with_retry_after(answer.retry_after), url);
                }
                Ok(LoadedHtml::Page {
                    html: answer.text(),
                    url: answer.url.clone(),
                })
            }
        }
    }
}

/// A page over the bound of one page's HTML, as the attempt's failure.
pub(super) fn too_large(url: &Url, bytes: u64, bounds: &CrawlBounds) -> CrawlError {
    metrics().count_bound(Bound::PageBytes, 1);
    CrawlError::failed(
        FailureKind::PageTooLarge,
        format!(
            "the page at {url} holds {bytes} bytes of HTML, more than the {} a page may have",
            bounds.page_bytes
        ),
    )
}
