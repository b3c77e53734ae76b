//! One Chrome process, driven over the DevTools pipe. A worker runs one for
//! all its browser slots (each crawl in a browser context of its own, see
//! `mod.rs`): one browser process, GPU process and network service instead of
//! one of each per slot.

use std::{
    os::fd::{FromRawFd, OwnedFd, RawFd},
    path::{Path, PathBuf},
    process::Stdio,
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use anyhow::Context;
use serde_json::json;
use tokio::{net::unix::pipe, process::Command, sync::watch};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::{
    ChromeLaunch, DevToolsUrl,
    confinement::{ChromeUser, passed_to_chrome},
    devtools::{DevTools, field},
    launch::{chrome_args, write_preferences},
    processes::{kill_chrome_under, kill_chrome_under_and_wait, no_longer_waited_for, waited_for},
    socks_relay::SocksRelay,
};

/// How long a starting Chrome gets to answer its first command (about a
/// second alone; several when a loaded machine starts many processes).
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long a polite `Browser.close` gets before the processes are killed.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// A running Chrome: one the worker started, or a connection to a remote one.
pub struct Chrome {
    pub devtools: DevTools,
    /// Chrome's user agent without "Headless": what a site sees when it sets
    /// none (many refuse headless browsers on sight).
    pub user_agent: String,
    /// Pages loaded, for recycling the browser (see `BrowserPool`).
    pages: AtomicU32,
    place: Place,
}

/// Where the browser runs.
enum Place {
    /// Started by the worker: its processes are the worker's to kill.
    Local {
        /// Its profile folder: the handle to find and kill all its processes.
        profile_dir: PathBuf,
        /// Turns `true` when the browser process exited.
        exited: watch::Receiver<bool>,
        /// Guards the connections Chrome opens outside any crawl's context
        /// (its own services, which it should not open at all); lives with it.
        _relay: Option<SocksRelay>,
    },
    /// A remote browser, not ours to kill: "closing" it drops the connection
    /// (the contexts it opened go with it).
    Remote,
    /// A Chrome of a WebDriver session: closing it deletes the session (the
    /// endpoint ends that Chrome).
    WebDriver {
        session: fantoccini::Client,
        /// Guards the connections that Chrome opens outside any crawl's
        /// context; lives with it.
        _relay: Option<SocksRelay>,
    },
}

/// Where Chrome keeps files besides its profile: under the worker's profile
/// root, so they go with it even when Chrome is killed, and so every Chrome
/// process names the root on its command line (how `processes` tells them
/// from any other process).
pub struct ChromePlaces {
    /// Chrome's own temporary folders.
    temp: PathBuf,
    /// Chrome's configuration home: its crash handlers' database goes there
    /// (`--database=<root>/config/chromium/Crash Reports`), not to ~/.config.
    config: PathBuf,
}

impl ChromePlaces {
    /// The places under `profile_root`, made and given to Chrome's `user`.
    pub async fn under(profile_root: &Path, user: Option<ChromeUser>) -> anyhow::Result<Self> {
        let places = Self {
            temp: profile_root.join("tmp"),
            config: profile_root.join("config"),
        };
        for dir in [&places.temp, &places.config] {
            tokio::fs::create_dir_all(dir)
                .await
                .with_context(|| format!("creating {}", dir.display()))?;
        }
        if let Some(user) = user {
            std::os::unix::fs::lchown(profile_root, Some(user.uid), Some(user.gid))
                .context("giving the profile root to Chrome's user")?;
            user.take_over(&places.temp)?;
            user.take_over(&places.config)?;
        }
        Ok(places)
    }
}

impl Chrome {
    /// Starts Chrome (as `launch` says, with its sandbox or not) with its
    /// profile in `profile_dir` and waits until it answers. Connections
    /// outside any context go through `relay` when given.
    pub async fn launch(
        launch: &ChromeLaunch,
        sandbox: bool,
        places: &ChromePlaces,
        profile_dir: PathBuf,
        relay: Option<SocksRelay>,
    ) -> anyhow::Result<Chrome> {
        let binary = launch.path.as_str();
        write_preferences(&profile_dir).await?;
        if let Some(user) = launch.user {
            user.take_over(&profile_dir)?;
        }
        let proxy_server = relay.as_ref().map(SocksRelay::proxy_server);
        let (commands_read, commands_write) = cloexec_pipe()?;
        let (answers_read, answers_write) = cloexec_pipe()?;
        let mut command = Command::new(binary);
        command
            .args(chrome_args(&profile_dir, proxy_server.as_deref(), sandbox))
            .arg("--remote-debugging-pipe")
            // None of the worker's variables (its secrets among them) but
            // those Chrome needs.
            .env_clear()
            .envs(passed_to_chrome())
            .env("HOME", &places.config)
            .env("TMPDIR", &places.temp)
            .env("XDG_CONFIG_HOME", &places.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C in the terminal must reach only
            // the worker, which then drains, not kill the browser at once.
            .process_group(0);
        let (child_reads, child_writes) = (
            std::os::fd::AsRawFd::as_raw_fd(&commands_read),
            std::os::fd::AsRawFd::as_raw_fd(&answers_write),
        );
        let user = launch.user;
        // SAFETY: only async-signal-safe calls between fork and exec. Chrome
        // becomes its own user first (which clears the parent-death signal,
        // so that comes after); it reads commands on fd 3 and writes to fd 4;
        // it dies with the worker even when the worker is SIGKILLed.
        unsafe {
            command.pre_exec(move || {
                if let Some(user) = user {
                    user.become_in_child()?;
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                place_fds(child_reads, child_writes)
            });
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {binary} (set CHROME_PATH or install chromium)"))?;
        // Chrome holds its ends now; with ours closed, it sees the end of the
        // pipe when the worker goes.
        drop((commands_read, answers_write));
        let devtools = DevTools::over(
            pipe::Sender::from_owned_fd(commands_write).context("the DevTools pipe")?,
            pipe::Receiver::from_owned_fd(answers_read).context("the DevTools pipe")?,
        );
        let (exited_tx, exited) = watch::channel(false);
        let pid = child.id().map(|pid| pid as i32);
        if let Some(pid) = pid {
            waited_for(pid);
        }
        tokio::spawn({
            let profile_dir = profile_dir.clone();
            async move {
                let status = child.wait().await;
                if let Some(pid) = pid {
                    no_longer_waited_for(pid);
                }
                let _ = exited_tx.send(true);
                // Its helpers outlive the browser process for a moment.
                kill_chrome_under(&profile_dir);
                tracing::debug!(?status, "Chrome exited");
            }
        });
        let user_agent = match user_agent_of(&devtools).await {
            Ok(user_agent) => user_agent,
            Err(e) => {
                kill_chrome_under(&profile_dir);
                return Err(e).context("starting Chrome");
            }
        };
        Ok(Chrome {
            devtools,
            user_agent,
            pages: AtomicU32::new(0),
            place: Place::Local {
                profile_dir,
                exited,
                _relay: relay,
            },
        })
    }

    /// Connects to the remote browser at `url` (its WebSocket, or read from
    /// its `/json/version`) and waits until it answers.
    pub async fn connect(url: &DevToolsUrl) -> anyhow::Result<Chrome> {
        let at = url.host_port();
        let socket_url = match url.is_websocket() {
            true => url.expose().to_string(),
            false => tokio::time::timeout(START_LIMIT, websocket_of(url))
                .await
                .with_context(|| format!("{at} did not answer within {START_LIMIT:?}"))??,
        };
        Self::over_websocket(&at, &socket_url, Place::Remote).await
    }

    /// Opens a Chrome session of the WebDriver endpoint at `url` (its own
    /// connections through `relay` when given) and connects to its DevTools.
    pub async fn webdriver(url: &DevToolsUrl, relay: Option<SocksRelay>) -> anyhow::Result<Chrome> {
        let at = url.host_port();
        let proxy_server = relay.as_ref().map(SocksRelay::proxy_server);
        let (session, socket_url) = tokio::time::timeout(
            START_LIMIT,
            super::webdriver::open_session(url, proxy_server.as_deref()),
        )
        .await
        .with_context(|| format!("{at} did not open a session within {START_LIMIT:?}"))??;
        let place = Place::WebDriver {
            session: session.clone(),
            _relay: relay,
        };
        match Self::over_websocket(&at, &socket_url, place).await {
            Ok(chrome) => Ok(chrome),
            Err(e) => {
                let _ = session.close().await;
                Err(e)
            }
        }
    }

    /// Connects to a browser's DevTools WebSocket (of the endpoint at `at`)
    /// and waits until it answers.
    async fn over_websocket(at: &str, socket_url: &str, place: Place) -> anyhow::Result<Chrome> {
        // A message is as large as what it carries (a page's HTML, up to
        // the page bound, escaped): bounded by what asks for it, as over the
        // pipe, not by the WebSocket's defaults (a 16 MiB frame), which
        // would end the connection every slot shares.
        let unbounded = WebSocketConfig::default()
            .max_message_size(None)
            .max_frame_size(None);
        let (socket, _) = tokio::time::timeout(
            START_LIMIT,
            tokio_tungstenite::connect_async_with_config(socket_url, Some(unbounded), true),
        )
        .await
        .with_context(|| format!("{at} did not answer within {START_LIMIT:?}"))?
        // The error may quote the URL (and its token): only where it failed.
        .map_err(|e| {
            anyhow::anyhow!("connecting to the remote browser at {at}: {}", kind_of(&e))
        })?;
        let devtools = DevTools::over_websocket(socket);
        let user_agent = match user_agent_of(&devtools).await {
            Ok(user_agent) => user_agent,
            Err(e) => {
                devtools.shut();
                return Err(e).with_context(|| format!("the remote browser at {at}"));
            }
        };
        Ok(Chrome {
            devtools,
            user_agent,
            pages: AtomicU32::new(0),
            place,
        })
    }

    /// Whether the browser is still there to take commands.
    pub fn is_alive(&self) -> bool {
        let exited = match &self.place {
            Place::Local { exited, .. } => *exited.borrow(),
            Place::Remote | Place::WebDriver { .. } => false,
        };
        !exited && !self.devtools.is_closed()
    }

    /// Counts a page loaded; returns how many it loaded so far.
    pub fn count_page(&self) -> u32 {
        self.pages.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn pages(&self) -> u32 {
        self.pages.load(Ordering::Relaxed)
    }

    /// Closes the browser: politely first, then by killing its processes,
    /// and removes its profile folder.
    pub async fn close(&self) {
        let Place::Local { exited, .. } = &self.place else {
            return self.let_go().await;
        };
        if self.is_alive() {
            let polite = tokio::time::timeout(
                CLOSE_LIMIT,
                self.devtools.call(None, "Browser.close", json!({})),
            )
            .await;
            if matches!(polite, Ok(Ok(_))) {
                let mut exited = exited.clone();
                let _ = tokio::time::timeout(CLOSE_LIMIT, exited.wait_for(|e| *e)).await;
            }
        }
        self.kill_and_clean().await;
    }

    /// Kills every process of the browser at once and removes its folder.
    /// A remote browser is let go instead (its connection dropped).
    pub async fn kill_and_clean(&self) {
        let Place::Local { profile_dir, .. } = &self.place else {
            return self.let_go().await;
        };
        if !kill_chrome_under_and_wait(profile_dir, CLOSE_LIMIT).await {
            tracing::warn!(dir = %profile_dir.display(), "Chrome processes still running");
        }
        remove_profile(profile_dir).await;
    }

    /// Kills the browser's processes now, without waiting (a lease dropped
    /// where nothing can wait).
    pub fn kill_now(&self) {
        match &self.place {
            Place::Local { profile_dir, .. } => {
                kill_chrome_under(profile_dir);
            }
            Place::Remote => self.devtools.shut(),
            Place::WebDriver { session, .. } => {
                self.devtools.shut();
                let session = session.clone();
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move { end_session(session).await });
                }
            }
        }
    }

    /// Lets a remote browser go: its connection dropped, and a WebDriver
    /// session deleted (its Chrome ended by the endpoint).
    async fn let_go(&self) {
        self.devtools.shut();
        if let Place::WebDriver { session, .. } = &self.place {
            end_session(session.clone()).await;
        }
    }
}

/// Deletes a WebDriver session, within [`CLOSE_LIMIT`] (an endpoint gone
/// ends its sessions itself, or times them out).
async fn end_session(session: fantoccini::Client) {
    if let Ok(Err(e)) = tokio::time::timeout(CLOSE_LIMIT, session.close()).await {
        tracing::debug!(error = %e, "could not delete a WebDriver session");
    }
}

/// The browser's user agent without "Headless" (what a site sees when it
/// sets none; many refuse headless browsers on sight), asked as the first
/// command of a connection: a browser answers it once it is ready, local or
/// remote.
async fn user_agent_of(devtools: &DevTools) -> anyhow::Result<String> {
    let version = tokio::time::timeout(
        START_LIMIT,
        devtools.call(None, "Browser.getVersion", json!({})),
    )
    .await
    .map_err(|_| anyhow::anyhow!("the browser did not answer within {START_LIMIT:?}"))??;
    Ok(field(&version, "userAgent", "Browser.getVersion")?.replace("HeadlessChrome", "Chrome"))
}

/// The WebSocket a remote browser's `/json/version` names.
pub(super) async fn websocket_of(url: &DevToolsUrl) -> anyhow::Result<String> {
    let at = url.host_port();
    let mut version = url.expose().clone();
    version.set_path("/json/version");
    // Straight to the endpoint, never through a proxy of the environment.
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("an HTTP client")?;
    let answer: serde_json::Value = client
        .get(version)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| anyhow::anyhow!("reading /json/version of {at}: {}", e.without_url()))?
        .json()
        .await
        .map_err(|e| anyhow::anyhow!("reading /json/version of {at}: {}", e.without_url()))?;
    let socket = answer["webSocketDebuggerUrl"]
        .as_str()
        .with_context(|| format!("/json/version of {at} names no webSocketDebuggerUrl"))?;
    let mut socket = url::Url::parse(socket)
        .with_context(|| format!("/json/version of {at} names no valid webSocketDebuggerUrl"))?;
    // The browser names itself as it sees itself; the worker reaches it at
    // the configured host, with the configured query (a token).
    let _ = socket.set_host(url.expose().host_str());
    let _ = socket.set_port(url.expose().port_or_known_default());
    if url.expose().scheme() == "https" {
        let _ = socket.set_scheme("wss");
    }
    if socket.query().is_none() {
        socket.set_query(url.expose().query());
    }
    Ok(socket.to_string())
}

/// What went wrong connecting, without the URL.
fn kind_of(error: &tokio_tungstenite::tungstenite::Error) -> String {
    use tokio_tungstenite::tungstenite::Error;
    match error {
        Error::Io(e) => e.to_string(),
        Error::Http(response) => format!("answered HTTP {}", response.status()),
        Error::Url(_) => "not a WebSocket URL".to_owned(),
        _ => "the WebSocket handshake failed".to_owned(),
    }
}

/// Removes a profile folder once Chrome no longer writes into it.
pub async fn remove_profile(dir: &Path) {
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

/// A pipe whose ends are closed on exec: only the ends placed at fds 3 and 4
/// reach Chrome.
fn cloexec_pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: pipe2 writes two fds into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating the DevTools pipe");
    }
    // SAFETY: both fds were just opened by pipe2 and are owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// In the forked child: makes `reads` fd 3 and `writes` fd 4, kept open
/// across exec. Both are first copied above the low fds, so placing one never
/// closes the other (either may already be 3 or 4).
fn place_fds(reads: RawFd, writes: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl and dup2 on fds this process holds; async-signal-safe.
    unsafe {
        let high_reads = libc::fcntl(reads, libc::F_DUPFD_CLOEXEC, 10);
        let high_writes = libc::fcntl(writes, libc::F_DUPFD_CLOEXEC, 10);
        if high_reads < 0
            || high_writes < 0
            || libc::dup2(high_reads, 3) < 0
            || libc::dup2(high_writes, 4) < 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
