//! A remote browser for `BROWSER_BACKEND=devtools`: Debian Chromium, headless,
//! its DevTools on a loopback port (one it picks, or the one it had before a
//! restart), its profile in a folder
//! of its own; killed with its process group (and anything still running
//! under that folder) when dropped. [`Backend`] names which browser a test's
//! workers use, and [`on_each_backend!`](crate::support::on_each_backend)
//! runs a test once with each.

use std::{
    collections::HashSet,
    net::{Ipv4Addr, SocketAddr},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crawlfleet::{
    config::{BrowserBackend, Config, Secret},
    worker::browser::{
        launch::chrome_args,
        processes::{kill_chrome_under_and_block, pids_under},
    },
};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// The browser a test's workers open their contexts in.
#[derive(Debug, Clone)]
pub enum Backend {
    /// A Chrome each worker starts itself.
    Local,
    /// The remote browser at this `BROWSER_DEVTOOLS_URL`.
    DevTools(String),
    /// Chrome sessions of the WebDriver endpoint at this `BROWSER_WEBDRIVER_URL`.
    WebDriver(String),
}

impl Backend {
    /// Points `config`'s worker at this browser.
    pub fn apply(&self, config: &mut Config) {
        match self {
            Backend::Local => {
                config.worker.browser_backend = BrowserBackend::Local;
                config.worker.browser_devtools_url = None;
            }
            Backend::DevTools(url) => {
                config.worker.browser_backend = BrowserBackend::Devtools;
                config.worker.browser_devtools_url = Some(Secret(url.clone()));
            }
            Backend::WebDriver(url) => {
                config.worker.browser_backend = BrowserBackend::Webdriver;
                config.worker.browser_webdriver_url = Some(Secret(url.clone()));
            }
        }
    }
}

/// Declares the tests `<name>::local`, `<name>::devtools` and
/// `<name>::webdriver`, each running `async fn <name>(backend: Backend)` with
/// its backend (the second with a [`RemoteChrome`] of its own, the third with
/// a [`WebDriverEndpoint`](crate::support::WebDriverEndpoint), each ended
/// after the test). The benches share
/// this support module and use none of it.
#[allow(unused_macros)]
macro_rules! on_each_backend {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn local() {
                super::$name($crate::support::Backend::Local).await;
            }

            #[tokio::test]
            async fn devtools() {
                let remote = $crate::support::RemoteChrome::start().await;
                super::$name(remote.backend()).await;
                drop(remote);
            }

            #[tokio::test]
            async fn webdriver() {
                let endpoint = $crate::support::WebDriverEndpoint::start().await;
                super::$name(endpoint.backend()).await;
                drop(endpoint);
            }
        }
    };
}
pub(crate) use on_each_backend;

/// How long a starting Chromium gets to write the port it listens on (about
/// a second alone; several on a loaded machine).
const START_LIMIT: Duration = Duration::from_secs(30);

/// A headless Chromium listening for DevTools on 127.0.0.1.
pub struct RemoteChrome {
    child: Child,
    dir: PathBuf,
    port: u16,
    /// The browser's WebSocket path (`/devtools/browser/<id>`).
    path: String,
    /// Killed already: its pid and group may belong to another process now.
    killed: bool,
}

impl RemoteChrome {
    /// A Chromium on a port of its choosing.
    pub async fn start() -> RemoteChrome {
        Self::start_on(0).await
    }

    /// A Chromium on `port` (0: one it picks).
    pub async fn start_on(port: u16) -> RemoteChrome {
        let dir = std::env::temp_dir().join(format!("cf-remote-chrome-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let profile = dir.join("profile");
        // The worker's own flags keep Chromium from connecting anywhere of
        // its own accord; the DevTools port only on loopback.
        let mut command = Command::new("/usr/bin/chromium");
        command
            .args(chrome_args(&profile, None, false))
            .arg(format!("--remote-debugging-port={port}"))
            .arg("--remote-debugging-address=127.0.0.1")
            .env("HOME", &dir)
            .env("XDG_CONFIG_HOME", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command.spawn().expect("/usr/bin/chromium starts");
        let mut chrome = RemoteChrome {
            child,
            dir,
            port: 0,
            path: String::new(),
            killed: false,
        };
        // Chromium says where it listens on stderr (DevToolsActivePort is
        // written only for a port it picked itself).
        let stderr = chrome.dir.join("stderr.log");
        let started = Instant::now();
        loop {
            let written = std::fs::read_to_string(&stderr).unwrap_or_default();
            // A whole line only: it may be read while being written.
            let listening = written
                .split_inclusive('\n')
                .filter(|line| line.ends_with('\n'))
                .find_map(|line| line.strip_prefix("DevTools listening on ws://127.0.0.1:"));
            if let Some((port, path)) = listening.and_then(|rest| rest.split_once('/')) {
                chrome.port = port.parse().expect("a port Chromium listens on");
                chrome.path = format!("/{}", path.trim());
                break;
            }
            if started.elapsed() > START_LIMIT || !matches!(chrome.child.try_wait(), Ok(None)) {
                let said: Vec<&str> = written.lines().filter(|l| !l.contains("dbus")).collect();
                panic!("Chromium did not listen within {START_LIMIT:?}: {said:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        chrome
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The browser's WebSocket: what `BROWSER_DEVTOOLS_URL` may name.
    pub fn websocket_url(&self) -> String {
        format!("ws://127.0.0.1:{}{}", self.port, self.path)
    }

    /// Where `/json/version` names the WebSocket: the other form of
    /// `BROWSER_DEVTOOLS_URL`, which outlives a restart on the same port.
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// This browser as a test's backend (named by its WebSocket).
    pub fn backend(&self) -> Backend {
        Backend::DevTools(self.websocket_url())
    }

    /// The browser contexts open in it (every connection's), asked over a
    /// DevTools connection of the test's own.
    pub async fn contexts(&self) -> usize {
        let answer = self.call("Target.getBrowserContexts").await;
        answer["browserContextIds"]
            .as_array()
            .expect("a list of contexts")
            .len()
    }

    /// One browser command over a connection of its own.
    async fn call(&self, method: &str) -> Value {
        let (mut socket, _) = tokio_tungstenite::connect_async(self.websocket_url())
            .await
            .expect("the browser's WebSocket answers");
        let command = json!({"id": 1, "method": method, "params": {}});
        socket
            .send(Message::text(command.to_string()))
            .await
            .unwrap();
        while let Some(message) = socket.next().await {
            if let Message::Text(text) = message.expect("a message") {
                let message: Value = serde_json::from_str(&text).unwrap();
                if message["id"] == 1 {
                    let _ = socket.close(None).await;
                    return message["result"].clone();
                }
            }
        }
        panic!("the browser closed the connection before answering {method}");
    }

    /// Where the browser's open connections lead, besides its own DevTools
    /// port: with every context behind a relay of the worker, the relays.
    pub fn connected_to(&self) -> Vec<SocketAddr> {
        let inodes: HashSet<String> = pids_under(&self.dir)
            .into_iter()
            .flat_map(|pid| {
                std::fs::read_dir(format!("/proc/{pid}/fd"))
                    .into_iter()
                    .flatten()
            })
            .flatten()
            .filter_map(|fd| {
                let target = std::fs::read_link(fd.path()).ok()?;
                let target = target.to_str()?;
                Some(
                    target
                        .strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .to_owned(),
                )
            })
            .collect();
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let mut leads: Vec<SocketAddr> = table
            .lines()
            .skip(1)
            .filter_map(|line| {
                let columns: Vec<&str> = line.split_whitespace().collect();
                // local, remote, state (01: established), ..., inode.
                let (own, remote) = (ipv4_of(columns[1])?, ipv4_of(columns[2])?);
                let established = columns[3] == "01";
                (established && own.port() != self.port && inodes.contains(columns[9]))
                    .then_some(remote)
            })
            .collect();
        leads.sort();
        leads.dedup();
        leads
    }

    /// Kills the browser now, every process of it (as a crash or an OOM
    /// kill would).
    pub fn kill(&mut self) {
        if std::mem::replace(&mut self.killed, true) {
            return;
        }
        let pid = self.child.id() as i32;
        let group = group_of(pid);
        // SAFETY: kill(2) on the process group this test started (Chromium's
        // helpers stay in it) and on the browser itself.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        // Helpers re-parented to this process (a worker in it is a subreaper)
        // are reaped here; anything that left the group dies by its folder.
        kill_chrome_under_and_block(&self.dir, Duration::from_secs(5));
        for pid in group {
            // SAFETY: waitpid on a pid that may be a child of this process.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        }
    }
}

/// An address as /proc/net/tcp writes it (`0100007F:1F90`).
fn ipv4_of(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let ip = u32::from_str_radix(ip, 16).ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddr::from((Ipv4Addr::from(ip.to_ne_bytes()), port)))
}

/// The pids in the process group `group`.
fn group_of(group: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // pid (comm) state ppid pgrp ...: comm may hold spaces.
                    let after = &stat[stat.rfind(')')? + 2..];
                    after.split_whitespace().nth(2)?.parse::<i32>().ok()
                })
                == Some(group)
        })
        .collect()
}

impl Drop for RemoteChrome {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
