//! Headless Chrome for the worker's browser slots: one Chrome per worker,
//! driven over the DevTools pipe, and one browser context per crawl. A
//! context has its own cookies, storage and cache and its own renderer
//! processes, and is disposed when the crawl ends: a crawl never sees what
//! another left, and a page stuck in a script is ended by disposing its
//! context (Chrome kills its renderer) while the other slots go on.
//!
//! One Chrome instead of one per slot: a worker of 4 slots holds about half
//! the memory and starts no browser per crawl (BENCHMARKS.md). The browser
//! is replaced after [`PAGES_PER_BROWSER`] pages (a leaking browser cannot
//! grow without bound) and whenever it dies, its crawls failing as
//! `browser_crashed` and being retried.

mod chrome;
mod devtools;
pub mod launch;
pub mod processes;
mod session;
mod socks_relay;

use std::{
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use crate::{domain::site::ProxyUrl, net::target_guard::TargetGuard, ops::metrics::metrics};

use chrome::{Chrome, ChromePlaces, remove_profile};
use processes::{kill_chrome_under, kill_chrome_under_and_block, kill_chrome_under_and_wait};
pub use session::{BrowserSession, DocumentResponse, LoadError};
use socks_relay::{Egress, SocksRelay};

/// A Chrome is replaced (once its crawls are done) after this many pages.
const PAGES_PER_BROWSER: u32 = 1000;
/// How long disposing a context may take before the browser counts as hung.
const DISPOSE_LIMIT: Duration = Duration::from_secs(5);

/// The worker's browser.
pub struct BrowserPool {
    chrome_path: String,
    profile_root: PathBuf,
    slots: Arc<Semaphore>,
    /// The Chrome new crawls open their contexts in; launched when first
    /// needed, replaced when it died or served its pages.
    current: tokio::sync::Mutex<Option<Arc<Chrome>>>,
    /// Replaced Chromes still running crawls; closed once none holds them.
    retired: Mutex<Vec<Arc<Chrome>>>,
    next_profile: AtomicU64,
    /// Checks every connection of a browser that needs it (see `open`).
    guard: TargetGuard,
    /// Contexts being disposed after their lease was dropped, and browsers
    /// being closed; shutdown waits for them.
    closing: TaskTracker,
}

/// A browser context lent to one crawl; hand it back with
/// [`BrowserPool::give_back`].
pub struct BrowserLease {
    session: Option<BrowserSession>,
    closing: TaskTracker,
    _slot: OwnedSemaphorePermit,
}

impl BrowserLease {
    pub fn session(&mut self) -> &mut BrowserSession {
        self.session.as_mut().expect("held until given back")
    }
}

/// A lease dropped without being given back (its crawl was cancelled, taken
/// over or drained mid-page): its context is disposed at once, so its page
/// does not live on in the browser.
impl Drop for BrowserLease {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                self.closing.spawn_on(
                    async move {
                        if !session.dispose(DISPOSE_LIMIT).await {
                            session.chrome.kill_now();
                        }
                    },
                    &runtime,
                );
            }
            // No runtime to finish on: the browser goes with the process.
            Err(_) => session.chrome.kill_now(),
        }
    }
}

/// Last line of defence when the pool is dropped without `close_all` (a task
/// panicked, a runtime shut down): no browser and no folder outlives it. The
/// folder goes once the processes are gone, or a dying Chrome could write
/// into it again.
impl Drop for BrowserPool {
    fn drop(&mut self) {
        kill_chrome_under_and_block(&self.profile_root, Duration::from_secs(2));
        let _ = std::fs::remove_dir_all(&self.profile_root);
    }
}

impl BrowserPool {
    /// A pool of `size` slots; its Chrome (`chrome_path`) keeps its files
    /// under `profile_root`.
    pub fn new(
        chrome_path: String,
        profile_root: PathBuf,
        size: usize,
        guard: TargetGuard,
    ) -> Self {
        Self {
            chrome_path,
            profile_root,
            slots: Arc::new(Semaphore::new(size)),
            current: tokio::sync::Mutex::new(None),
            retired: Mutex::new(Vec::new()),
            next_profile: AtomicU64::new(1),
            guard,
            closing: TaskTracker::new(),
        }
    }

    /// Waits for a free slot and opens a context leaving through `proxy`.
    pub async fn lease(&self, proxy: Option<&ProxyUrl>) -> anyhow::Result<BrowserLease> {
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .context("browser pool closed")?;
        let chrome = self.chrome().await?;
        // The context goes through our relay when the guard must see its
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
        let session = BrowserSession::open(chrome, server, relay)
            .await
            .context("opening a browser context")?;
        Ok(BrowserLease {
            session: Some(session),
            closing: self.closing.clone(),
            _slot: slot,
        })
    }

    /// Ends a lease: its context is disposed (its page, cookies, storage,
    /// cache and renderers with it). `healthy: false` (the page hung or
    /// crashed) is counted; a browser that cannot even dispose a context is
    /// killed.
    pub async fn give_back(&self, mut lease: BrowserLease, healthy: bool) {
        let session = lease.session.take().expect("held until given back");
        if !healthy {
            metrics()
                .browser_restarts
                .with_label_values(&["session"])
                .inc();
        }
        if session.chrome.is_alive() && !session.dispose(DISPOSE_LIMIT).await {
            tracing::warn!("Chrome did not dispose a context; killing it");
            session.chrome.kill_and_clean().await;
        }
        drop(session);
        self.close_retired().await;
    }

    /// The Chrome to open a context in: the current one, or a new one when
    /// there is none yet, it died, or it served its pages.
    async fn chrome(&self) -> anyhow::Result<Arc<Chrome>> {
        let mut current = self.current.lock().await;
        if let Some(chrome) = current.as_ref() {
            if chrome.is_alive() && chrome.pages() < PAGES_PER_BROWSER {
                return Ok(chrome.clone());
            }
            let chrome = current.take().expect("checked above");
            if chrome.is_alive() {
                tracing::debug!(
                    pages = chrome.pages(),
                    "replacing a Chrome that served its pages"
                );
            } else {
                tracing::warn!("Chrome died; starting another");
                metrics()
                    .browser_restarts
                    .with_label_values(&["chrome"])
                    .inc();
            }
            self.retired.lock().expect("pool lock").push(chrome);
        }
        let chrome = Arc::new(self.launch().await?);
        *current = Some(chrome.clone());
        Ok(chrome)
    }

    async fn launch(&self) -> anyhow::Result<Chrome> {
        let n = self.next_profile.fetch_add(1, Ordering::Relaxed);
        let places = ChromePlaces::under(&self.profile_root).await?;
        // Chrome's own connections (it should open none) meet the guard too.
        let relay = match self.guard.is_open() {
            true => None,
            false => Some(SocksRelay::start(Egress::Direct, self.guard.clone()).await?),
        };
        let profile_dir = self.profile_root.join(format!("chrome-{n}"));
        match Chrome::launch(&self.chrome_path, &places, profile_dir.clone(), relay).await {
            Ok(chrome) => Ok(chrome),
            Err(e) => {
                kill_chrome_under(&profile_dir);
                remove_profile(&profile_dir).await;
                Err(e)
            }
        }
    }

    /// Closes the replaced Chromes that no crawl holds any more.
    async fn close_retired(&self) {
        let done: Vec<Arc<Chrome>> = {
            let mut retired = self.retired.lock().expect("pool lock");
            let (done, busy) = std::mem::take(&mut *retired)
                .into_iter()
                .partition(|chrome| Arc::strong_count(chrome) == 1);
            *retired = busy;
            done
        };
        for chrome in done {
            chrome.close().await;
        }
    }

    /// Closes the browser (shutdown; leases are given back first).
    pub async fn close_all(&self) {
        if let Some(chrome) = self.current.lock().await.take() {
            self.retired.lock().expect("pool lock").push(chrome);
        }
        self.closing.close();
        self.closing.wait().await;
        let all: Vec<_> = std::mem::take(&mut *self.retired.lock().expect("pool lock"));
        futures::future::join_all(all.iter().map(|chrome| chrome.close())).await;
        self.sweep().await;
    }

    /// Kills anything still running under the pool's profiles and removes
    /// them; the process does not exit while one of its browsers still runs.
    pub async fn sweep(&self) {
        if !kill_chrome_under_and_wait(&self.profile_root, Duration::from_secs(5)).await {
            tracing::warn!("browser processes still running after shutdown");
        }
        remove_profile(&self.profile_root).await;
    }
}
