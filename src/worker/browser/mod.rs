//! Headless Chrome sessions over WebDriver, reused across jobs and never more
//! than the worker's concurrency. Each session has its own profile folder: the
//! handle to kill its processes when it hangs, removed when it closes. A
//! session is opened for one way out (direct, or a site's proxy) and reused
//! only by crawls that leave the same way.

pub(super) mod cdp;
pub mod chromedriver;
pub mod launch;
pub mod processes;
mod socks_relay;

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use fantoccini::{Client, ClientBuilder, wd::TimeoutConfiguration};
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::task::TaskTracker;

use crate::{
    domain::site::ProxyUrl,
    net::target_guard::{Refused, TargetGuard},
    ops::metrics::metrics,
};

use cdp::cdp;
use launch::capabilities;
use processes::{kill_chrome_under, kill_chrome_under_and_wait};
use socks_relay::{Egress, SocksRelay};

/// A session is closed and replaced after this many pages, so a leaking page
/// cannot grow one browser without bound.
const PAGES_PER_SESSION: u32 = 200;

/// One Chrome under WebDriver.
pub struct BrowserSession {
    pub client: Client,
    profile_dir: PathBuf,
    pages: u32,
    /// The chromedriver generation the session was opened under.
    generation: u64,
    /// The proxy the session's Chrome leaves through (`None`: direct).
    proxy: Option<String>,
    /// Guards every connection Chrome opens and gives a proxy its
    /// credentials; lives as long as the session.
    relay: Option<SocksRelay>,
    /// Chrome's own user agent without "Headless": what a site sees when it
    /// sets none (many refuse headless browsers on sight).
    pub default_user_agent: String,
    /// A script restoring a kept session's local storage, removed after the
    /// first page so it never overwrites what the site writes later.
    pub restore_script: Option<String>,
}

impl BrowserSession {
    /// The last connection the SSRF guard refused since the previous call.
    pub fn take_refused(&self) -> Option<Refused> {
        self.relay.as_ref().and_then(SocksRelay::take_refused)
    }

    /// Counts a page against the session's recycling budget.
    pub fn count_page(&mut self) {
        self.pages += 1;
    }

    /// Sets the page-load timeout: a page that never finishes loading fails
    /// with a WebDriver timeout instead of blocking the session for 300 s.
    pub async fn set_page_load_timeout(&self, timeout: Duration) -> anyhow::Result<()> {
        self.client
            .update_timeouts(TimeoutConfiguration::new(
                Some(timeout),
                Some(timeout),
                None,
            ))
            .await
            .context("setting session timeouts")
    }

    /// Ends the session: politely first, then by killing its processes, and
    /// removes its profile folder.
    async fn close(self) {
        metrics().browser_sessions_open.dec();
        let polite = tokio::time::timeout(Duration::from_secs(5), self.client.close()).await;
        if !matches!(polite, Ok(Ok(()))) {
            kill_chrome_under(&self.profile_dir);
        }
        remove_profile(&self.profile_dir).await;
    }

    /// Kills the session's processes at once (a hung renderer or script loop).
    async fn kill(self) {
        metrics().browser_sessions_open.dec();
        metrics()
            .browser_restarts
            .with_label_values(&["session"])
            .inc();
        kill_chrome_under(&self.profile_dir);
        let _ = tokio::time::timeout(Duration::from_secs(2), self.client.close()).await;
        remove_profile(&self.profile_dir).await;
    }
}

/// Last line of defence when the pool is dropped without `close_all` (a task
/// panicked, a runtime shut down): no browser and no folder outlives it.
impl Drop for BrowserPool {
    fn drop(&mut self) {
        kill_chrome_under(&self.profile_root);
        let _ = std::fs::remove_dir_all(&self.profile_root);
    }
}

async fn remove_profile(dir: &Path) {
    // Chrome may still be writing for a moment after it exits, and another
    // removal of the same tree makes this one fail with NotFound midway: done
    // only once the folder is gone.
    for _ in 0..30 {
        if tokio::fs::remove_dir_all(dir).await.is_ok()
            || !tokio::fs::try_exists(dir).await.unwrap_or(true)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!(dir = %dir.display(), "could not remove a browser profile folder");
}

/// The worker's browsers.
pub struct BrowserPool {
    webdriver_url: String,
    chrome_path: Option<String>,
    profile_root: PathBuf,
    slots: Arc<Semaphore>,
    size: usize,
    idle: Mutex<Vec<BrowserSession>>,
    next_profile: AtomicU64,
    /// Bumped by the chromedriver supervisor on each restart: sessions of an
    /// older generation died with their chromedriver.
    generation: watch::Receiver<u64>,
    /// Checks every connection of a browser that needs it (see `open`).
    guard: TargetGuard,
    /// Sessions being killed after their lease was dropped; shutdown waits for them.
    kills: TaskTracker,
}

/// A session lent to one crawl; hand it back with [`BrowserPool::give_back`].
pub struct BrowserLease {
    session: Option<BrowserSession>,
    kills: TaskTracker,
    _slot: OwnedSemaphorePermit,
}

impl BrowserLease {
    pub fn session(&mut self) -> &mut BrowserSession {
        self.session.as_mut().expect("held until given back")
    }
}

/// A lease dropped without being given back (its crawl was cancelled, taken
/// over or drained mid-page): the session's browser is killed at once, so it
/// neither lives on nor lets the pool run more browsers than its slots.
impl Drop for BrowserLease {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                self.kills.spawn_on(session.kill(), &runtime);
            }
            // No runtime to finish on: kill what runs; the pool's sweep takes the folder.
            Err(_) => {
                kill_chrome_under(&session.profile_dir);
            }
        }
    }
}

impl BrowserPool {
    pub fn new(
        webdriver_url: String,
        chrome_path: Option<String>,
        profile_root: PathBuf,
        size: usize,
        generation: watch::Receiver<u64>,
        guard: TargetGuard,
    ) -> Self {
        Self {
            generation,
            guard,
            webdriver_url,
            chrome_path,
            profile_root,
            slots: Arc::new(Semaphore::new(size)),
            size,
            idle: Mutex::new(Vec::new()),
            next_profile: AtomicU64::new(1),
            kills: TaskTracker::new(),
        }
    }

    /// Waits for a free slot and lends an idle session leaving through
    /// `proxy`, or opens a new one (closing an idle one of another way out, so
    /// the worker never runs more browsers than its slots).
    pub async fn lease(&self, proxy: Option<&ProxyUrl>) -> anyhow::Result<BrowserLease> {
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .context("browser pool closed")?;
        let wanted = proxy.map(|p| p.expose().to_owned());
        let (matching, surplus) = {
            let mut idle = self.idle.lock().expect("pool lock");
            let matching = idle
                .iter()
                .rposition(|s| s.proxy == wanted)
                .map(|i| idle.remove(i));
            // Sessions held by others plus idle ones plus the one about to open.
            let leased = self.size - self.slots.available_permits();
            let surplus = if matching.is_none() && leased + idle.len() > self.size {
                Some(idle.remove(0))
            } else {
                None
            };
            (matching, surplus)
        };
        if let Some(surplus) = surplus {
            surplus.close().await;
        }
        let session = match matching {
            Some(session) if session.generation == self.current_generation() => session,
            Some(stale) => {
                stale.kill().await;
                self.open(proxy).await?
            }
            None => self.open(proxy).await?,
        };
        Ok(BrowserLease {
            session: Some(session),
            kills: self.kills.clone(),
            _slot: slot,
        })
    }

    /// Returns a session: kept for the next job when healthy, killed otherwise.
    pub async fn give_back(&self, mut lease: BrowserLease, healthy: bool) {
        let session = lease.session.take().expect("held until given back");
        if !healthy || session.generation != self.current_generation() {
            session.kill().await;
        } else if session.pages >= PAGES_PER_SESSION {
            session.close().await;
        } else {
            self.idle.lock().expect("pool lock").push(session);
        }
    }

    fn current_generation(&self) -> u64 {
        *self.generation.borrow()
    }

    async fn open(&self, proxy: Option<&ProxyUrl>) -> anyhow::Result<BrowserSession> {
        let generation = self.current_generation();
        let n = self.next_profile.fetch_add(1, Ordering::Relaxed);
        let profile_dir = self.profile_root.join(format!("session-{n}"));
        tokio::fs::create_dir_all(&profile_dir)
            .await
            .with_context(|| format!("creating {}", profile_dir.display()))?;
        // Chrome goes through our relay when the guard must see its
        // connections or a proxy needs credentials; else straight out.
        let needs_relay = !self.guard.is_open() || proxy.is_some_and(|p| p.credentials().is_some());
        let relay = match needs_relay {
            true => {
                let egress = proxy.map_or(Egress::Direct, |p| Egress::Proxy(p.clone()));
                Some(SocksRelay::start(egress, self.guard.clone()).await?)
            }
            false => None,
        };
        let server = match (&relay, proxy) {
            (Some(relay), _) => Some(relay.proxy_server()),
            // Chrome's socks5 already lets the proxy resolve names.
            (None, Some(proxy)) => Some(format!(
                "{}://{}:{}",
                proxy.scheme().trim_end_matches('h'),
                proxy.host(),
                proxy.port()
            )),
            (None, None) => None,
        };
        let capabilities =
            capabilities(&profile_dir, server.as_deref(), self.chrome_path.as_deref());
        let connect = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.webdriver_url)
            .await;
        match connect {
            Ok(client) => {
                // Counted down by `close` or `kill`.
                metrics().browser_sessions_open.inc();
                let session = BrowserSession {
                    client,
                    profile_dir,
                    pages: 0,
                    generation,
                    proxy: proxy.map(|p| p.expose().to_owned()),
                    relay,
                    default_user_agent: String::new(),
                    restore_script: None,
                };
                match prepare_new(session).await {
                    Ok(session) => Ok(session),
                    Err((session, e)) => {
                        session.kill().await;
                        Err(e)
                    }
                }
            }
            Err(e) => {
                kill_chrome_under(&profile_dir);
                remove_profile(&profile_dir).await;
                Err(anyhow::anyhow!("opening a Chrome session: {e}"))
            }
        }
    }

    /// Closes every idle session (shutdown; leased ones are given back first).
    pub async fn close_all(&self) {
        let sessions: Vec<_> = std::mem::take(&mut *self.idle.lock().expect("pool lock"));
        futures::future::join_all(sessions.into_iter().map(BrowserSession::close)).await;
        self.sweep().await;
    }

    /// Kills anything still running under the pool's profiles and removes
    /// them; the process does not exit while one of its browsers still runs.
    pub async fn sweep(&self) {
        // A dropped lease's kill removes its folder too: let it finish first.
        self.kills.close();
        self.kills.wait().await;
        if !kill_chrome_under_and_wait(&self.profile_root, Duration::from_secs(5)).await {
            tracing::warn!("browser processes still running after shutdown");
        }
        remove_profile(&self.profile_root).await;
    }
}

/// Turns on what every crawl uses (network events for headers and cookies)
/// and learns the browser's user agent.
async fn prepare_new(
    mut session: BrowserSession,
) -> Result<BrowserSession, (BrowserSession, anyhow::Error)> {
    let prepared = async {
        cdp(&session.client, "Network.enable", serde_json::json!({})).await?;
        let agent = session
            .client
            .execute("return navigator.userAgent", vec![])
            .await
            .context("reading the user agent")?;
        anyhow::Ok(
            agent
                .as_str()
                .unwrap_or_default()
                .replace("HeadlessChrome", "Chrome"),
        )
    }
    .await;
    match prepared {
        Ok(agent) => {
            session.default_user_agent = agent;
            Ok(session)
        }
        Err(e) => Err((session, e)),
    }
}
