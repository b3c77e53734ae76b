//! A browser slot's page: a browser context of the worker's Chrome (its own
//! cookies, storage and cache, like an incognito profile, and its own
//! renderer processes) with one page in it, driven over DevTools. A context
//! serves one crawl after another, wiped in between (see [`BrowserSession::wipe`]):
//! a crawl in a new context costs a new renderer process, about three times
//! the CPU of a page in a warm one (BENCHMARKS.md).

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use url::Url;

use super::{
    blocking::Blocking,
    chrome::Chrome,
    devtools::{DevToolsError, Event, field},
    socks_relay::SocksRelay,
};
use crate::{domain::site::BrowserResources, net::target_guard::Refused, ops::metrics::metrics};

/// The events a page session listens to.
const PAGE_EVENTS: &[&str] = &[
    "Page.loadEventFired",
    // Only the main frame's commit of about:blank is looked at (see `wipe`).
    "Page.frameNavigated",
    "Network.responseReceived",
    "Inspector.targetCrashed",
];

/// The response a page's document came with (after any redirects).
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentResponse {
    pub url: String,
    pub status: u16,
    /// Its `Retry-After` header, when it has one.
    pub retry_after: Option<String>,
}

/// Why a page did not load.
#[derive(Debug)]
pub enum LoadError {
    /// Not loaded within the limit. `responsive`: the page still answers a
    /// trivial script (a slow server), or not (a renderer stuck in a script).
    Timeout { responsive: bool },
    /// Chrome could not load it (`net::ERR_...`): it shows its error page.
    Failed(String),
    /// The page's renderer crashed.
    Crashed,
    /// The browser did not take the command (it is gone, or the page is).
    Browser(DevToolsError),
}

/// How long a page gets to answer a trivial script after its load timed out.
const RESPONSIVE_PROBE: Duration = Duration::from_secs(3);

/// A browser context with its page, lent to one crawl.
pub struct BrowserSession {
    pub(super) chrome: Arc<Chrome>,
    pub(super) context_id: String,
    session_id: String,
    /// The page's id, which is also its main frame's.
    target_id: String,
    events: mpsc::UnboundedReceiver<Event>,
    /// DevTools commands sent since [`Self::take_commands`] last asked.
    commands: AtomicU32,
    /// The proxy the context leaves through (`None`: direct): a context is
    /// reused only by crawls that leave the same way.
    pub(super) proxy: Option<String>,
    /// Guards every connection of the context and gives a proxy its
    /// credentials; lives as long as the context.
    relay: Option<SocksRelay>,
    /// The latest document response of the page's main frame.
    document: Option<DocumentResponse>,
    /// The origins of every document the page showed since the last wipe:
    /// whose storage the wipe clears.
    origins: BTreeSet<String>,
    /// A frame of the page loaded a document: storage of another site may be
    /// in the context (partitioned under the page's), so it is not reused.
    framed: bool,
    /// The user agent and extra headers the page was last given.
    identity: Option<Value>,
    /// What the page downloads besides what reading it needs, as last set
    /// (`None` while being changed).
    resources: Option<BrowserResources>,
    /// A script restoring a kept session's local storage, removed after the
    /// first page so it never overwrites what the site writes later.
    restore_script: Option<String>,
}

impl BrowserSession {
    /// Opens a page in a new context of `chrome`, leaving through
    /// `proxy_server` (or Chrome's own way out); `proxy` names that way for
    /// reuse.
    pub(super) async fn open(
        chrome: Arc<Chrome>,
        proxy: Option<String>,
        proxy_server: Option<String>,
        relay: Option<SocksRelay>,
    ) -> anyhow::Result<BrowserSession> {
        let devtools = &chrome.devtools;
        // Gone with the connection: a remote browser keeps a context past its
        // connection's end unless told otherwise (its page, renderer and a
        // slot of the endpoint's with it), and a worker that is killed, or
        // reconnects, never disposes it itself.
        let mut context = json!({"disposeOnDetach": true});
        if let Some(server) = &proxy_server {
            context["proxyServer"] = json!(server);
            context["proxyBypassList"] = json!(super::launch::PROXY_BYPASS);
        }
        let created = devtools
            .call(None, "Target.createBrowserContext", context)
            .await?;
        let context_id =
            field(&created, "browserContextId", "Target.createBrowserContext")?.to_owned();
        let opened = async {
            let target = devtools
                .call(
                    None,
                    "Target.createTarget",
                    json!({"url": "about:blank", "browserContextId": context_id}),
                )
                .await?;
            let target_id = field(&target, "targetId", "Target.createTarget")?.to_owned();
            let attached = devtools
                .call(
                    None,
                    "Target.attachToTarget",
                    json!({"targetId": target_id, "flatten": true}),
                )
                .await?;
            let session_id = field(&attached, "sessionId", "Target.attachToTarget")?.to_owned();
            anyhow::Ok((target_id, session_id))
        }
        .await;
        let (target_id, session_id) = match opened {
            Ok(ids) => ids,
            Err(e) => {
                let _ = devtools
                    .call(
                        None,
                        "Target.disposeBrowserContext",
                        json!({"browserContextId": context_id}),
                    )
                    .await;
                return Err(e);
            }
        };
        let events = devtools.subscribe(&session_id, PAGE_EVENTS);
        // Counted down when the session is dropped.
        metrics().browser_sessions_open.inc();
        let session = BrowserSession {
            chrome,
            context_id,
            session_id,
            target_id,
            events,
            // The three commands above.
            commands: AtomicU32::new(3),
            proxy,
            relay,
            document: None,
            origins: BTreeSet::new(),
            framed: false,
            identity: None,
            // A new page pauses nothing.
            resources: Some(BrowserResources::ALL_ALLOWED),
            restore_script: None,
        };
        let enabled = async {
            session.call("Page.enable", json!({})).await?;
            // Bodies are never asked for: Chrome need not keep them.
            session
                .call(
                    "Network.enable",
                    json!({"maxTotalBufferSize": 0, "maxResourceBufferSize": 0}),
                )
                .await?;
            anyhow::Ok(())
        }
        .await;
        match enabled {
            Ok(()) => Ok(session),
            Err(e) => {
                session.dispose(Duration::from_secs(5)).await;
                Err(e)
            }
        }
    }

    /// Runs a command on the page; counted (`crawlfleet_browser_commands_per_page`).
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, DevToolsError> {
        self.commands.fetch_add(1, Ordering::Relaxed);
        self.chrome
            .devtools
            .call(Some(&self.session_id), method, params)
            .await
    }

    /// Runs a command on the browser (cookies of the context); counted.
    async fn call_browser(&self, method: &str, params: Value) -> Result<Value, DevToolsError> {
        self.commands.fetch_add(1, Ordering::Relaxed);
        self.chrome.devtools.call(None, method, params).await
    }

    /// The commands sent since the last call, and starts counting again.
    pub fn take_commands(&self) -> u32 {
        self.commands.swap(0, Ordering::Relaxed)
    }

    /// The last connection the SSRF guard refused since the previous call.
    pub fn take_refused(&self) -> Option<Refused> {
        self.relay.as_ref().and_then(SocksRelay::take_refused)
    }

    /// Chrome's user agent as a site should see it.
    pub fn default_user_agent(&self) -> &str {
        &self.chrome.user_agent
    }

    /// The response the page's document came with, when one came.
    pub fn document(&self) -> Option<&DocumentResponse> {
        self.document.as_ref()
    }

    /// Loads `url` and waits for its load event, within `limit`.
    pub async fn navigate(&mut self, url: &Url, limit: Duration) -> Result<(), LoadError> {
        self.chrome.count_page();
        self.chrome
            .devtools
            .set_page_host(&self.session_id, url.host_str());
        // What came after the last page's load (frames a script added) still
        // counts for the wipe; its document response is not this page's.
        self.note_pending();
        self.document = None;
        let deadline = tokio::time::Instant::now() + limit;
        let navigated = tokio::time::timeout_at(
            deadline,
            self.call("Page.navigate", json!({"url": url.as_str()})),
        )
        .await;
        match navigated {
            Err(_) => return Err(self.timed_out().await),
            Ok(Err(e)) => return Err(LoadError::Browser(e)),
            Ok(Ok(answer)) => {
                if let Some(error) = answer["errorText"].as_str().filter(|e| !e.is_empty()) {
                    return Err(LoadError::Failed(error.to_owned()));
                }
            }
        }
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Err(_) => return Err(self.timed_out().await),
                Ok(None) => {
                    return Err(LoadError::Browser(DevToolsError::Closed(
                        "Page.navigate".to_owned(),
                    )));
                }
                Ok(Some(event)) => match event.method.as_str() {
                    "Page.loadEventFired" => return Ok(()),
                    "Inspector.targetCrashed" => return Err(LoadError::Crashed),
                    _ => self.note(&event),
                },
            }
        }
    }

    /// Keeps what the events received so far say (see [`Self::note`]).
    fn note_pending(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            self.note(&event);
        }
    }

    /// Keeps what an event says about the page's documents: the main frame's
    /// response and origin, and whether a frame loaded one.
    fn note(&mut self, event: &Event) {
        let params = &event.params;
        if event.method != "Network.responseReceived" || params["type"] != "Document" {
            return;
        }
        if params["frameId"] != self.target_id.as_str() {
            self.framed = true;
            return;
        }
        let response = &params["response"];
        if let Ok(url) = Url::parse(response["url"].as_str().unwrap_or_default()) {
            self.origins.insert(url.origin().ascii_serialization());
        }
        self.document = Some(DocumentResponse {
            url: response["url"].as_str().unwrap_or_default().to_owned(),
            status: response["status"].as_u64().unwrap_or(0) as u16,
            retry_after: response["headers"].as_object().and_then(|headers| {
                headers
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
                    .and_then(|(_, value)| value.as_str())
                    .map(str::to_owned)
            }),
        });
    }

    /// A load that ran out of time: stopped, and the page asked whether it
    /// still answers.
    async fn timed_out(&self) -> LoadError {
        let probe = tokio::time::timeout(RESPONSIVE_PROBE, async {
            self.call("Page.stopLoading", json!({})).await?;
            self.call("Runtime.evaluate", json!({"expression": "1"}))
                .await
        })
        .await;
        LoadError::Timeout {
            responsive: matches!(probe, Ok(Ok(_))),
        }
    }

    /// Runs `expression` in the page's own JavaScript (awaiting it when it
    /// is a promise) and returns its value as JSON. What the page's scripts
    /// changed (`URL`, `Array.from`, prototypes) is what it runs with: only
    /// for what the page may decide anyway (its local storage); every reading
    /// of the page goes through [`Self::evaluate_isolated`].
    pub async fn evaluate(&self, expression: &str) -> anyhow::Result<Value> {
        self.run_script(json!({"expression": expression})).await
    }

    /// Runs `expression` in a world of its own in the page's main frame
    /// (`Page.createIsolatedWorld`): it sees the page's DOM, but with
    /// JavaScript builtins and DOM prototypes of its own, which no script
    /// of the page can reach, so the page cannot forge what it reads. A new
    /// world per call: one created for an earlier document is gone with it,
    /// and a context id kept across documents could name another context.
    pub async fn evaluate_isolated(&self, expression: &str) -> anyhow::Result<Value> {
        let world = self
            .call(
                "Page.createIsolatedWorld",
                json!({"frameId": self.target_id, "worldName": "crawlfleet"}),
            )
            .await?;
        let context = world["executionContextId"]
            .as_i64()
            .with_context(|| format!("Page.createIsolatedWorld answered {world}"))?;
        self.run_script(json!({"expression": expression, "contextId": context}))
            .await
    }

    /// `Runtime.evaluate` with `params`, awaited and returned by value.
    async fn run_script(&self, mut params: Value) -> anyhow::Result<Value> {
        params["awaitPromise"] = json!(true);
        params["returnByValue"] = json!(true);
        let answer = self.call("Runtime.evaluate", params).await?;
        if let Some(exception) = answer.get("exceptionDetails") {
            let text = exception["exception"]["description"]
                .as_str()
                .or_else(|| exception["text"].as_str())
                .unwrap_or("an exception");
            anyhow::bail!("the page's script failed: {text}");
        }
        Ok(answer["result"]["value"].clone())
    }

    /// Where the page is now (read where the page's scripts cannot forge it).
    pub async fn url(&self) -> anyhow::Result<Url> {
        let url = self.evaluate_isolated("document.URL").await?;
        Url::parse(url.as_str().unwrap_or_default()).context("the page's URL")
    }

    /// The page's HTML as it is now, its first `max_chars` UTF-16 units at
    /// most (a huge page is cut in the browser, not sent whole).
    pub async fn html(&self, max_chars: usize) -> anyhow::Result<String> {
        let html = self
            .evaluate_isolated(&format!(
                "(() => {{ const html = document.documentElement ? document.documentElement.outerHTML : ''; \
                 if (html.length <= {max_chars}) return html; \
                 const cut = html.slice(0, {max_chars}); const last = cut.charCodeAt(cut.length - 1); \
                 return last >= 0xD800 && last <= 0xDBFF ? cut.slice(0, -1) : cut; }})()"
            ))
            .await?;
        Ok(html.as_str().unwrap_or_default().to_owned())
    }

    /// The page as it shows, in PNG.
    pub async fn screenshot(&self) -> anyhow::Result<Vec<u8>> {
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await?;
        let data = shot["data"].as_str().context("a screenshot without data")?;
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .context("decoding the screenshot")
    }

    /// Every cookie of the context (each domain, http-only included), as
    /// `Network.Cookie` objects.
    pub async fn cookies(&self) -> anyhow::Result<Vec<Value>> {
        let all = self
            .call_browser(
                "Storage.getCookies",
                json!({"browserContextId": self.context_id}),
            )
            .await?;
        Ok(all["cookies"].as_array().cloned().unwrap_or_default())
    }

    /// Puts cookies (`Network.CookieParam` objects) into the context.
    pub async fn set_cookies(&self, cookies: Vec<Value>) -> anyhow::Result<()> {
        self.call_browser(
            "Storage.setCookies",
            json!({"cookies": cookies, "browserContextId": self.context_id}),
        )
        .await?;
        Ok(())
    }

    /// The user agent and extra headers every request of the page carries
    /// (sent only when they differ from the last crawl's).
    pub async fn set_identity(
        &mut self,
        user_agent: &str,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let identity = json!({"userAgent": user_agent, "headers": headers});
        if self.identity.as_ref() == Some(&identity) {
            return Ok(());
        }
        // Unknown while the commands are on their way.
        self.identity = None;
        self.call(
            "Network.setUserAgentOverride",
            json!({"userAgent": user_agent}),
        )
        .await?;
        self.call("Network.setExtraHTTPHeaders", json!({"headers": headers}))
            .await?;
        self.identity = Some(identity);
        Ok(())
    }

    /// What the page's requests leave out from now on: its requests of the
    /// kinds `resources` does not allow fail before they leave Chrome (see
    /// `blocking`). Sent only when it differs from the last crawl's.
    pub async fn set_resources(&mut self, resources: BrowserResources) -> anyhow::Result<()> {
        if self.resources == Some(resources) {
            return Ok(());
        }
        self.resources = None;
        let devtools = &self.chrome.devtools;
        match Blocking::of(resources) {
            Some(blocking) => {
                let enable = blocking.fetch_enable();
                devtools.set_blocking(&self.session_id, Some(blocking));
                self.call("Fetch.enable", enable).await?;
            }
            None => {
                self.call("Fetch.disable", json!({})).await?;
                devtools.set_blocking(&self.session_id, None);
            }
        }
        self.resources = Some(resources);
        Ok(())
    }

    /// Runs `source` in every new document before its own scripts, until the
    /// first page is loaded (see [`Self::page_loaded`]).
    pub async fn restore_before_first_page(&mut self, source: String) -> anyhow::Result<()> {
        let added = self
            .call(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": source}),
            )
            .await?;
        self.restore_script = added["identifier"].as_str().map(str::to_owned);
        Ok(())
    }

    /// After the first page: the kept local storage is in, and the site's
    /// own writes must stay.
    pub async fn page_loaded(&mut self) -> anyhow::Result<()> {
        if let Some(identifier) = self.restore_script.take() {
            self.call(
                "Page.removeScriptToEvaluateOnNewDocument",
                json!({"identifier": identifier}),
            )
            .await?;
        }
        Ok(())
    }

    /// Readies the context for another crawl; `Ok(false)` when it cannot
    /// serve one: a frame of another site loaded, whose storage is
    /// partitioned under the page's, where clearing origins does not reach.
    ///
    /// The page first leaves for about:blank, which ends whatever it still
    /// ran (timers, sockets, workers), so nothing writes after the clearing
    /// and nothing spends CPU until the next crawl. Then go the context's
    /// cookies and HTTP cache, every storage (local, session, IndexedDB,
    /// cache storage, service workers...) of every origin the page showed,
    /// and a kept session's restore script. (Freezing the page instead,
    /// Page.setWebLifecycleState, left it hidden for good once thawed, every
    /// later document too, its timers throttled to one a second: a page of
    /// the shop's search took a second in a reused context.)
    pub(super) async fn wipe(&mut self) -> anyhow::Result<bool> {
        self.leave_for_blank().await?;
        if self.framed {
            return Ok(false);
        }
        if let Some(identifier) = self.restore_script.take() {
            self.call(
                "Page.removeScriptToEvaluateOnNewDocument",
                json!({"identifier": identifier}),
            )
            .await?;
        }
        self.call("Network.clearBrowserCookies", json!({})).await?;
        self.call("Network.clearBrowserCache", json!({})).await?;
        for origin in std::mem::take(&mut self.origins) {
            self.call(
                "Storage.clearDataForOrigin",
                json!({"origin": origin, "storageTypes": "all"}),
            )
            .await?;
            // Session storage lives with the page, not the origin's storage.
            self.call(
                "DOMStorage.clear",
                json!({"storageId": {"securityOrigin": origin, "isLocalStorage": false}}),
            )
            .await?;
        }
        self.document = None;
        Ok(true)
    }

    /// Shows about:blank and waits for its load event, noting what the
    /// crawl's page did until then. Its load is told from one of the
    /// crawl's page by the commit before it, so no load event is left for
    /// the next crawl's first page to mistake for its own.
    ///
    /// The page navigates itself (an error page too): Chrome then keeps its
    /// renderer process for the next crawl, where Page.navigate would start
    /// a new one (measured over CDP, a 3-page crawl and its wipe: 0.49 CPU
    /// seconds of Chrome this way, 0.66 with Page.navigate, 0.41 without
    /// leaving the page).
    async fn leave_for_blank(&mut self) -> anyhow::Result<()> {
        self.note_pending();
        let answer = self
            .call(
                "Runtime.evaluate",
                json!({"expression": "window.location.href = 'about:blank'"}),
            )
            .await?;
        if let Some(exception) = answer.get("exceptionDetails") {
            anyhow::bail!("the page would not leave for about:blank: {exception}");
        }
        let mut committed = false;
        loop {
            let event = self
                .events
                .recv()
                .await
                .context("the page closed while leaving for about:blank")?;
            match event.method.as_str() {
                "Page.frameNavigated"
                    if event.params["frame"]["id"] == self.target_id.as_str()
                        && event.params["frame"]["url"] == "about:blank" =>
                {
                    committed = true
                }
                "Page.loadEventFired" if committed => return Ok(()),
                "Inspector.targetCrashed" => anyhow::bail!("the page crashed"),
                _ => self.note(&event),
            }
        }
    }

    /// Closes the context: Chrome ends its page and kills its renderer
    /// processes, even one stuck in a script. `false` when the browser did
    /// not do it within `limit`.
    pub(super) async fn dispose(&self, limit: Duration) -> bool {
        self.chrome.devtools.unsubscribe(&self.session_id);
        let disposed = tokio::time::timeout(
            limit,
            self.chrome.devtools.call(
                None,
                "Target.disposeBrowserContext",
                json!({"browserContextId": self.context_id}),
            ),
        )
        .await;
        matches!(disposed, Ok(Ok(_)))
    }
}

impl Drop for BrowserSession {
    fn drop(&mut self) {
        metrics().browser_sessions_open.dec();
    }
}
