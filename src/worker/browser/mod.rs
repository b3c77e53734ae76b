//! Headless Chrome for the worker's browser slots: one Chrome per worker,
//! driven over the DevTools pipe, and a browser context per slot. A context
//! has its own cookies, storage and cache and its own renderer processes. It
//! serves crawl after crawl, wiped in between (a crawl never sees what
//! another left; a context whose pages loaded frames is not reused at all),
//! and a page stuck in a script is ended by disposing its context (Chrome
//! kills its renderer) while the other slots go on.
//!
//! One Chrome instead of one per slot: a worker of 4 slots holds about half
//! the memory (BENCHMARKS.md). The browser is replaced after
//! [`PAGES_PER_BROWSER`] pages (a leaking browser cannot grow without
//! bound) and whenever it dies, its crawls failing as `browser_crashed` and
//! being retried.
//!
//! The browser is either a Chrome the worker starts (`BROWSER_BACKEND=local`)
//! or a remote one spoken to over a WebSocket (`devtools`: Browserless,
//! `chrome --remote-debugging-port`). Contexts, pages, wiping and disposing
//! are the same code for both; a remote browser is never killed: where a
//! local one would be, its connection is dropped and the next lease
//! reconnects, waiting longer after each failed attempt ([`RECONNECT_FIRST`]
//! doubling to [`RECONNECT_MOST`]). Every remote context goes through a
//! relay of the worker, which serves only the endpoint's address.
//!
//! A third way to the browser (`webdriver`: Selenium Grid 4, chromedriver)
//! opens a WebDriver session for each browser and speaks DevTools to the
//! Chrome it started (`webdriver`): the same contexts and crawl code again;
//! letting that browser go deletes its session.

mod blocking;
mod chrome;
pub mod confinement;
mod devtools;
pub mod launch;
pub mod processes;
mod relay_peer;
mod session;
mod socks_relay;
mod trackers;
mod webdriver;

use std::{
    net::IpAddr,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use crate::{domain::site::ProxyUrl, net::target_guard::TargetGuard, ops::metrics::metrics};

pub use crate::config::{DevToolsUrl, RemoteBrowserSettings, RemoteProtocol, SandboxMode};
use chrome::{Chrome, ChromePlaces, remove_profile};
use confinement::ChromeUser;
use processes::{kill_chrome_under, kill_chrome_under_and_block, kill_chrome_under_and_wait};
use relay_peer::ChromePeers;
pub use session::{BrowserSession, DocumentResponse, LoadError};
use socks_relay::{Egress, SocksRelay};

/// How the worker starts Chrome: the binary, the user it runs as and its
/// sandbox (see `confinement`).
#[derive(Debug, Clone)]
pub struct ChromeLaunch {
    pub path: String,
    pub user: Option<ChromeUser>,
    pub sandbox: SandboxMode,
}

/// A Chrome is replaced (once its crawls are done) after this many pages.
const PAGES_PER_BROWSER: u32 = 1000;
/// The wait before reconnecting to a remote browser after a failed attempt,
/// doubled after each one up to [`RECONNECT_MOST`].
const RECONNECT_FIRST: Duration = Duration::from_millis(500);
const RECONNECT_MOST: Duration = Duration::from_secs(30);

/// Which browser the pool's contexts are opened in.
enum Backend {
    Local(ChromeLaunch),
    Remote {
        protocol: RemoteProtocol,
        url: DevToolsUrl,
        /// Failed connection attempts in a row, and when the last one ended.
        failures: Mutex<(u32, Option<std::time::Instant>)>,
    },
}
/// How long disposing a context may take before the browser counts as hung.
const DISPOSE_LIMIT: Duration = Duration::from_secs(5);

/// The worker's browser.
pub struct BrowserPool {
    backend: Backend,
    /// Where the relays listen (loopback for the local Chrome).
    relay_bind: IpAddr,
    /// Set once a Chrome could not start with its sandbox (`SandboxMode::Auto`):
    /// the ones after it start without.
    sandbox_unavailable: AtomicBool,
    profile_root: PathBuf,
    /// Whom the relays serve: this pool's Chromes.
    peers: Arc<ChromePeers>,
    slots: Arc<Semaphore>,
    /// The Chrome new crawls open their contexts in; launched when first
    /// needed, replaced when it died or served its pages.
    current: tokio::sync::Mutex<Option<Arc<Chrome>>>,
    /// Replaced Chromes still running crawls; closed once none holds them.
    retired: Mutex<Vec<Arc<Chrome>>>,
    /// Wiped contexts waiting for their next crawl.
    idle: Mutex<Vec<BrowserSession>>,
    size: usize,
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
                            // A remote browser's connection is dropped instead.
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
    /// A pool of `size` slots; its Chrome (started as `launch` says) keeps
    /// its files under `profile_root`.
    pub fn new(
        launch: ChromeLaunch,
        profile_root: PathBuf,
        size: usize,
        guard: TargetGuard,
    ) -> Self {
        Self::with_backend(Backend::Local(launch), profile_root, size, guard)
    }

    /// A pool of `size` slots (the worker's, already within the endpoint's
    /// own limit) in the remote browser `remote` names; refuses when its address cannot be
    /// resolved or no relay can listen where it says.
    pub fn remote(
        remote: RemoteBrowserSettings,
        profile_root: PathBuf,
        size: usize,
        guard: TargetGuard,
    ) -> anyhow::Result<Self> {
        let at = remote.url.host_port();
        let setting = remote.protocol.url_setting();
        let host = remote.url.expose().host_str().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = remote.url.expose().port_or_known_default().unwrap_or(80);
        let addresses: Vec<IpAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
            .with_context(|| format!("resolving {setting}'s host {at}"))?
            .map(|a| a.ip())
            .collect();
        if addresses.is_empty() {
            anyhow::bail!("{setting}'s host {at} resolves to no address");
        }
        std::net::TcpListener::bind((remote.relay_bind, 0)).with_context(|| {
            format!(
                "BROWSER_RELAY_BIND: no relay can listen on {}",
                remote.relay_bind
            )
        })?;
        tracing::info!(endpoint = %at, protocol = ?remote.protocol, relay_bind = %remote.relay_bind, "browser slots in a remote browser");
        let mut pool = Self::with_backend(
            Backend::Remote {
                protocol: remote.protocol,
                url: remote.url,
                failures: Mutex::new((0, None)),
            },
            profile_root,
            size,
            guard,
        );
        pool.relay_bind = remote.relay_bind;
        pool.peers = Arc::new(ChromePeers::remote(addresses));
        Ok(pool)
    }

    fn with_backend(
        backend: Backend,
        profile_root: PathBuf,
        size: usize,
        guard: TargetGuard,
    ) -> Self {
        Self {
            backend,
            relay_bind: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            sandbox_unavailable: AtomicBool::new(false),
            peers: Arc::new(ChromePeers::under(&profile_root)),
            profile_root,
            slots: Arc::new(Semaphore::new(size)),
            current: tokio::sync::Mutex::new(None),
            retired: Mutex::new(Vec::new()),
            idle: Mutex::new(Vec::new()),
            size,
            next_profile: AtomicU64::new(1),
            guard,
            closing: TaskTracker::new(),
        }
    }

    /// Waits for a free slot and lends a wiped context leaving through
    /// `proxy`, or opens a new one (disposing an idle one of another way out,
    /// so the browser never holds more contexts than the worker has slots).
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
            // Contexts held by others plus idle ones plus the one about to open.
            let leased = self.size - self.slots.available_permits();
            let surplus = match matching.is_none() && leased + idle.len() > self.size {
                true => Some(idle.remove(0)),
                false => None,
            };
            (matching, surplus)
        };
        if let Some(surplus) = surplus {
            self.dispose(surplus).await;
        }
        if let Some(session) = matching {
            let current = self.current.lock().await.clone();
            let is_current = current.is_some_and(|c| Arc::ptr_eq(&c, &session.chrome));
            let fresh = session.chrome.is_alive() && session.chrome.pages() < PAGES_PER_BROWSER;
            if is_current && fresh {
                return Ok(self.lent(session, slot));
            }
            self.dispose(session).await;
        }
        let session = self.open(proxy).await?;
        Ok(self.lent(session, slot))
    }

    fn lent(&self, session: BrowserSession, slot: OwnedSemaphorePermit) -> BrowserLease {
        BrowserLease {
            session: Some(session),
            closing: self.closing.clone(),
            _slot: slot,
        }
    }

    /// A new context of the current Chrome.
    async fn open(&self, proxy: Option<&ProxyUrl>) -> anyhow::Result<BrowserSession> {
        let chrome = self.chrome().await?;
        // The context goes through our relay when the guard must see its
        // connections or a proxy needs credentials; else straight out. A
        // remote browser's always do: its own way out is not the worker's.
        let needs_relay = !self.guard.is_open()
            || proxy.is_some_and(|p| p.credentials().is_some())
            || matches!(self.backend, Backend::Remote { .. });
        let relay = match needs_relay {
            true => {
                let egress = proxy.map_or(Egress::Direct, |p| Egress::Proxy(p.clone()));
                Some(
                    SocksRelay::start(
                        self.relay_bind,
                        egress,
                        self.guard.clone(),
                        self.peers.clone(),
                    )
                    .await?,
                )
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
        BrowserSession::open(chrome, proxy.map(|p| p.expose().to_owned()), server, relay)
            .await
            .context("opening a browser context")
    }

    /// Ends a lease: a healthy context is wiped and kept for the next crawl;
    /// one whose page hung or crashed (`healthy: false`), loaded frames, or
    /// belongs to a replaced Chrome is disposed (its page, cookies, storage,
    /// cache and renderers with it). A browser that cannot even dispose a
    /// context is killed.
    pub async fn give_back(&self, mut lease: BrowserLease, healthy: bool) {
        let mut session = lease.session.take().expect("held until given back");
        if !healthy {
            metrics()
                .browser_restarts
                .with_label_values(&["session"])
                .inc();
        }
        let current = self.current.lock().await.clone();
        let keep = healthy
            && session.chrome.is_alive()
            && current.is_some_and(|c| Arc::ptr_eq(&c, &session.chrome));
        if keep {
            match tokio::time::timeout(DISPOSE_LIMIT, session.wipe()).await {
                Ok(Ok(true)) => {
                    self.idle.lock().expect("pool lock").push(session);
                    return;
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "could not wipe a browser context; disposing it")
                }
                Err(_) => tracing::warn!(
                    "a browser context was not wiped within {DISPOSE_LIMIT:?}; disposing it"
                ),
            }
        }
        self.dispose(session).await;
        self.close_retired();
    }

    /// Disposes a context; a browser that cannot do it is killed (a remote
    /// one let go: its connection dropped).
    async fn dispose(&self, session: BrowserSession) {
        if session.chrome.is_alive() && !session.dispose(DISPOSE_LIMIT).await {
            tracing::warn!(
                "Chrome did not dispose a context; killing it (or dropping a remote one)"
            );
            session.chrome.kill_and_clean().await;
        }
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
            // Its idle contexts go with it, or it would never be let go.
            self.idle
                .lock()
                .expect("pool lock")
                .retain(|idle| !Arc::ptr_eq(&idle.chrome, &chrome));
            self.retired.lock().expect("pool lock").push(chrome);
        }
        let chrome = Arc::new(match &self.backend {
            Backend::Local(_) => self.launch().await?,
            Backend::Remote {
                protocol,
                url,
                failures,
            } => {
                let chrome = self.connect(*protocol, url, failures).await?;
                self.resolve_peers(url).await;
                chrome
            }
        });
        *current = Some(chrome.clone());
        Ok(chrome)
    }

    /// Connects to the remote browser, first waiting out the back-off of
    /// the attempts that failed before.
    async fn connect(
        &self,
        protocol: RemoteProtocol,
        url: &DevToolsUrl,
        failures: &Mutex<(u32, Option<std::time::Instant>)>,
    ) -> anyhow::Result<Chrome> {
        let (failed, last) = *failures.lock().expect("pool lock");
        if let (Some(last), true) = (last, failed > 0) {
            let wait = RECONNECT_FIRST
                .saturating_mul(1 << (failed - 1).min(16))
                .min(RECONNECT_MOST);
            tokio::time::sleep_until((last + wait).into()).await;
        }
        let connected = match protocol {
            RemoteProtocol::DevTools => Chrome::connect(url).await,
            RemoteProtocol::WebDriver => match self.own_relay().await {
                Ok(relay) => Chrome::webdriver(url, relay).await,
                Err(e) => Err(e),
            },
        };
        let mut failures = failures.lock().expect("pool lock");
        match &connected {
            Ok(_) => *failures = (0, None),
            Err(e) => {
                *failures = (
                    failures.0.saturating_add(1),
                    Some(std::time::Instant::now()),
                );
                tracing::warn!(
                    error = format!("{e:#}"),
                    attempts = failures.0,
                    "could not reach the remote browser"
                );
            }
        }
        connected
    }

    /// Resolves the remote browser's host again, for the relays to serve it
    /// where it is now (a container restarted elsewhere); kept as it was
    /// when the name does not resolve.
    async fn resolve_peers(&self, url: &DevToolsUrl) {
        let host = url.expose().host_str().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = url.expose().port_or_known_default().unwrap_or(80);
        match tokio::net::lookup_host((host, port)).await {
            Ok(found) => {
                let addresses: Vec<IpAddr> = found.map(|a| a.ip()).collect();
                if !addresses.is_empty() {
                    self.peers.moved_to(addresses);
                }
            }
            Err(e) => tracing::warn!(
                endpoint = %url.host_port(),
                error = %e,
                "could not resolve the remote browser's host again; its relays serve the addresses known"
            ),
        }
    }

    /// Starts a Chrome: with its sandbox unless the setting or an earlier
    /// failure says otherwise (`SandboxMode::Auto` tries once, then goes on
    /// without and says why).
    async fn launch(&self) -> anyhow::Result<Chrome> {
        let Backend::Local(launch) = &self.backend else {
            unreachable!("only a local browser is launched")
        };
        let sandbox = match launch.sandbox {
            SandboxMode::Off => false,
            SandboxMode::Required => true,
            SandboxMode::Auto => !self.sandbox_unavailable.load(Ordering::Relaxed),
        };
        match self.launch_once(launch, sandbox).await {
            Err(e) if sandbox && launch.sandbox == SandboxMode::Auto => {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "Chrome could not start with its sandbox (no user namespaces here?); \
                     it runs without it, under its own environment{}",
                    match launch.user {
                        Some(user) => format!(" as uid {}", user.uid),
                        None => String::new(),
                    }
                );
                self.sandbox_unavailable.store(true, Ordering::Relaxed);
                self.launch_once(launch, false).await
            }
            launched => launched,
        }
    }

    async fn launch_once(&self, launch: &ChromeLaunch, sandbox: bool) -> anyhow::Result<Chrome> {
        let n = self.next_profile.fetch_add(1, Ordering::Relaxed);
        let places = ChromePlaces::under(&self.profile_root, launch.user).await?;
        let relay = self.own_relay().await?;
        let profile_dir = self.profile_root.join(format!("chrome-{n}"));
        match Chrome::launch(launch, sandbox, &places, profile_dir.clone(), relay).await {
            Ok(chrome) => Ok(chrome),
            Err(e) => {
                kill_chrome_under(&profile_dir);
                remove_profile(&profile_dir).await;
                Err(e)
            }
        }
    }

    /// The relay a browser's own connections (it should open none) go
    /// through, to meet the guard too: none while the guard lets all through.
    async fn own_relay(&self) -> anyhow::Result<Option<SocksRelay>> {
        Ok(match self.guard.is_open() {
            true => None,
            false => Some(
                SocksRelay::start(
                    self.relay_bind,
                    Egress::Direct,
                    self.guard.clone(),
                    self.peers.clone(),
                )
                .await?,
            ),
        })
    }

    /// Closes, in the background, the replaced Chromes that no crawl holds
    /// any more.
    fn close_retired(&self) {
        let done: Vec<Arc<Chrome>> = {
            let mut retired = self.retired.lock().expect("pool lock");
            let (done, busy) = std::mem::take(&mut *retired)
                .into_iter()
                .partition(|chrome| Arc::strong_count(chrome) == 1);
            *retired = busy;
            done
        };
        for chrome in done {
            self.closing.spawn(async move { chrome.close().await });
        }
    }

    /// Closes the browser (shutdown; leases are given back first).
    pub async fn close_all(&self) {
        let idle: Vec<_> = std::mem::take(&mut *self.idle.lock().expect("pool lock"));
        drop(idle);
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
