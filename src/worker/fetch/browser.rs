//! A results page in headless Chrome: load with a page-load timeout, probe a
//! session that stops answering, wait for the site's element, read the items.

use std::time::Duration;

use anyhow::Context;
use fantoccini::{Locator, error::CmdError};
use serde_json::{Value, json};
use url::Url;

use super::{Fetched, blocked_page, judge_status, parse_retry_after};
use crate::domain::failure::FailureKind;
use crate::{
    domain::site::{Extraction, SiteSpec},
    net::target_guard::TargetGuard,
    worker::{
        browser::{
            BrowserSession,
            cdp::{cdp, take_responses},
        },
        crawl::{error::CrawlError, session::KeptSession},
        extract::{extract_in_browser, response_status},
    },
};

/// Longest wait for a site's `wait_for` element before the page counts as empty.
const WAIT_FOR_LIMIT: Duration = Duration::from_secs(10);
/// How often `wait_for` looks for its element.
const WAIT_FOR_POLL: Duration = Duration::from_millis(50);
/// How long a session gets to answer a trivial script after a page-load timeout.
const RESPONSIVE_PROBE: Duration = Duration::from_secs(3);
/// Beyond the page-load timeout, how long a silent browser gets before it is
/// considered hung and killed.
const HUNG_BROWSER_GRACE: Duration = Duration::from_secs(5);

/// The browser session a crawl reads its pages in.
pub struct BrowserPage<'a> {
    pub session: &'a mut BrowserSession,
}

/// Makes a pooled session the site's: cookies and local storage of earlier
/// crawls cleared (or the site's kept session put in), and its user agent and
/// extra headers set.
pub async fn prepare_for_crawl(
    session: &mut BrowserSession,
    spec: &SiteSpec,
    kept: Option<&KeptSession>,
) -> anyhow::Result<()> {
    let client = &session.client;
    // A crawl that failed on its first page left its restore script behind.
    if let Some(identifier) = session.restore_script.take() {
        cdp(
            client,
            "Page.removeScriptToEvaluateOnNewDocument",
            json!({ "identifier": identifier }),
        )
        .await?;
    }
    cdp(client, "Network.clearBrowserCookies", json!({})).await?;
    let origin = spec.search_url.sample_url().origin().ascii_serialization();
    cdp(
        client,
        "Storage.clearDataForOrigin",
        json!({"origin": origin, "storageTypes": "local_storage"}),
    )
    .await?;
    let user_agent = spec
        .identity
        .user_agent
        .clone()
        .unwrap_or_else(|| session.default_user_agent.clone());
    cdp(
        client,
        "Network.setUserAgentOverride",
        json!({ "userAgent": user_agent }),
    )
    .await?;
    cdp(
        client,
        "Network.setExtraHTTPHeaders",
        json!({ "headers": spec.identity.headers }),
    )
    .await?;
    if let Some(kept) = kept {
        kept.put_cookies_into(client).await?;
        if let Some(source) = kept.local_storage_script() {
            let added = cdp(
                client,
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": source }),
            )
            .await?;
            session.restore_script = added["identifier"].as_str().map(str::to_owned);
        }
    }
    Ok(())
}

impl BrowserPage<'_> {
    pub async fn fetch(
        &mut self,
        extraction: &Extraction,
        url: &Url,
        page: i32,
        stuck_timeout: Duration,
        guard: &TargetGuard,
    ) -> Result<Fetched, CrawlError> {
        let Extraction::Html {
            item_selector,
            fields,
            wait_for,
            blocked_selector,
        } = extraction
        else {
            return Err(CrawlError::failed(
                FailureKind::Misconfigured,
                "a browser page needs CSS extraction",
            ));
        };
        // A refusal left from the previous page (a late image) is not this page's.
        self.session.take_refused();
        let loaded = self.load(url, stuck_timeout).await;
        // The relay refused a connection: if it was the page itself (a
        // redirect to a private target), that is why the page is not there.
        if let Some(refused) = self.session.take_refused()
            && (loaded.is_err() || self.shows_error_page().await)
        {
            return Err(CrawlError::refused(refused));
        }
        loaded?;
        // Read after every page, which also keeps chromedriver's log short.
        let responses = take_responses(&self.session.client)
            .await
            .map_err(|e| CrawlError::browser(format!("{e:#} at {url}")))?;
        if let Some(identifier) = self.session.restore_script.take() {
            // The kept local storage is in; the site's own writes must stay.
            cdp(
                &self.session.client,
                "Page.removeScriptToEvaluateOnNewDocument",
                json!({ "identifier": identifier }),
            )
            .await
            .map_err(|e| CrawlError::browser(format!("{e:#}")))?;
        }
        let client = &self.session.client;
        // A redirect may have led elsewhere: refuse to read a private target
        // (the relay refuses to connect to one when the guard is on; this
        // also covers a browser reached without it).
        let landed = client.current_url().await.ok();
        if let Some(landed) = &landed
            && landed.origin() != url.origin()
        {
            guard.check(landed).await?;
        }
        let status = response_status(client)
            .await
            .map_err(|e| CrawlError::browser(format!("{e:#} at {url}")))?;
        if let Some(status) = status
            && let Some(judged) = judge_status(status, page, url)?
        {
            let document = landed.as_ref().unwrap_or(url);
            return Ok(judged.with_retry_after(document_retry_after(&responses, document)));
        }
        // Wait for the results, or for the page that says we are blocked.
        let awaited = match (wait_for, blocked_selector) {
            (Some(wait), Some(blocked)) => Some(format!("{}, {}", wait.as_str(), blocked.as_str())),
            (Some(wait), None) => Some(wait.as_str().to_owned()),
            (None, _) => None,
        };
        if let Some(awaited) = awaited {
            let appeared = client
                .wait()
                .at_most(WAIT_FOR_LIMIT.min(stuck_timeout))
                .every(WAIT_FOR_POLL)
                .for_element(Locator::Css(&awaited))
                .await;
            if let Err(e) = appeared {
                if !is_timeout_or_missing(&e) {
                    return Err(CrawlError::browser(format!(
                        "waiting for {awaited} at {url}: {e}"
                    )));
                }
                tracing::info!(%url, "wait_for element never appeared; page counts as empty");
            }
        }
        if let Some(blocked) = blocked_selector {
            let found = client
                .execute(
                    "return document.querySelector(arguments[0]) !== null",
                    vec![json!(blocked.as_str())],
                )
                .await
                .context("looking for the blocked selector")
                .map_err(|e| CrawlError::browser(format!("{e:#} at {url}")))?;
            if found.as_bool() == Some(true) {
                return Ok(blocked_page(blocked.as_str(), url));
            }
        }
        let items = extract_in_browser(client, item_selector.as_str(), fields)
            .await
            .map_err(|e| CrawlError::browser(format!("extracting at {url}: {e:#}")))?;
        Ok(Fetched::Items {
            items,
            next_token: None,
        })
    }

    /// Whether Chrome shows its own error page instead of the site's.
    async fn shows_error_page(&self) -> bool {
        let href = self
            .session
            .client
            .execute("return document.URL", vec![])
            .await;
        matches!(href, Ok(serde_json::Value::String(href)) if href.starts_with("chrome-error:"))
    }

    /// Loads `url`. The page-load timeout ends a slow load; a bound beyond it
    /// catches a session that stopped answering at all (hung renderer, script
    /// loop): that session is killed by its profile folder and replaced.
    async fn load(&mut self, url: &Url, stuck_timeout: Duration) -> Result<(), CrawlError> {
        let session = &mut *self.session;
        session.count_page();
        let load = tokio::time::timeout(
            stuck_timeout + HUNG_BROWSER_GRACE,
            session.client.goto(url.as_str()),
        )
        .await;
        match load {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if is_timeout(&e) => {
                let reason = format!(
                    "stuck: page did not load within {}s at {url}",
                    stuck_timeout.as_secs()
                );
                // A slow server leaves the session usable; a renderer stuck in a
                // script does not answer even this, and the session is replaced.
                let probe = tokio::time::timeout(
                    RESPONSIVE_PROBE,
                    session.client.execute("return 1", vec![]),
                )
                .await;
                Err(if matches!(probe, Ok(Ok(_))) {
                    CrawlError::failed(FailureKind::Stuck, reason)
                } else {
                    CrawlError::broken(FailureKind::Stuck, reason)
                })
            }
            Ok(Err(e)) => Err(CrawlError::browser(format!("loading {url}: {e}"))),
            Err(_) => Err(CrawlError::broken(
                FailureKind::Stuck,
                format!("stuck: browser stopped answering at {url}"),
            )),
        }
    }
}

/// The Retry-After of the page's own response (the last document response
/// for its URL), among the responses of the performance log.
fn document_retry_after(responses: &[Value], document: &Url) -> Option<Duration> {
    let response = responses
        .iter()
        .rev()
        .filter(|r| r["type"] == "Document")
        .map(|r| &r["response"])
        .find(|r| r["url"].as_str() == Some(document.as_str()))?;
    let headers = response["headers"].as_object()?;
    headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, value)| value.as_str())
        .and_then(parse_retry_after)
}

fn is_timeout(e: &CmdError) -> bool {
    matches!(e, CmdError::Standard(wd) if wd.error == fantoccini::error::ErrorStatus::Timeout)
}

fn is_timeout_or_missing(e: &CmdError) -> bool {
    is_timeout(e)
        || matches!(e, CmdError::WaitTimeout)
        || matches!(e, CmdError::Standard(wd) if wd.error == fantoccini::error::ErrorStatus::NoSuchElement)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_comes_from_the_pages_own_document_response() {
        let page = Url::parse("http://s.example/search?q=a").unwrap();
        let response = |kind: &str, url: &str, headers: Value| {
            json!({
                "type": kind,
                "response": {"url": url, "status": 429, "headers": headers},
            })
        };
        let responses = [
            response("Document", page.as_str(), json!({"Retry-After": "60"})),
            response("Image", page.as_str(), json!({"Retry-After": "1"})),
            response(
                "Document",
                "http://s.example/frame",
                json!({"Retry-After": "2"}),
            ),
            response("Document", page.as_str(), json!({"retry-after": "7"})),
        ];
        assert_eq!(
            document_retry_after(&responses, &page),
            Some(Duration::from_secs(7)),
            "the latest load of the page itself, header name in any case"
        );
        let elsewhere = Url::parse("http://s.example/other").unwrap();
        assert_eq!(document_retry_after(&responses, &elsewhere), None);
        assert_eq!(document_retry_after(&responses[1..2], &page), None);
    }
}
