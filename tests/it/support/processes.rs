//! crawlfleet as real OS processes (the binary this build made), the browser
//! slots their Chrome instances share with in-process workers, and what a
//! worker leaves behind when it is killed.

use std::{path::PathBuf, process::Stdio, time::Duration};

use crawlfleet::config::{BrowserBackend, Config};
use tokio::sync::{Semaphore, SemaphorePermit};
use uuid::Uuid;

use super::{TEST_SESSION_KEY, eventually};

/// Browser tests running at once (2 cores: more only adds latency and flakes).
static BROWSER_SLOTS: Semaphore = Semaphore::const_new(2);

/// A crawlfleet process (the real binary), killed on drop if still running.
pub struct RoleProcess {
    pub child: tokio::process::Child,
    pub log: PathBuf,
    /// The pid, still known after the process was reaped.
    pub pid_at_start: i32,
}

impl RoleProcess {
    /// The role `process` (`api`, `scheduler`, `worker`) on `config`'s
    /// stores and settings, `extra_env` over them; its log in a file of its own.
    pub fn spawn(process: &str, config: &Config, extra_env: &[(&str, String)]) -> RoleProcess {
        Self::spawn_as(process, config, extra_env, None)
    }

    /// [`RoleProcess::spawn`], as user `uid` (and its group of the same
    /// number) when given: the tests run as root, the containers do not.
    pub fn spawn_as(
        process: &str,
        config: &Config,
        extra_env: &[(&str, String)],
        uid: Option<u32>,
    ) -> RoleProcess {
        let dir = std::env::temp_dir().join("cf-test-logs");
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join(format!("{process}-{}.log", Uuid::new_v4().simple()));
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
        cmd.arg(format!("--process={process}"))
            .env("DATABASE_URL", &config.common.database_url)
            .env("REDIS_URL", &config.common.redis_url)
            .env("QUEUE_NAME", &config.common.queue_name)
            .env("API_HOST", "127.0.0.1")
            .env("API_PORT", "0")
            .env("API_METRICS_PORT", "0")
            .env(
                "API_METRICS_REFRESH_SECS",
                config.api.api_metrics_refresh_secs.to_string(),
            )
            .env(
                "SCHEDULER_PORT",
                config.scheduler.scheduler_port.to_string(),
            )
            .env("METRICS_PORT", config.worker.metrics_port.to_string())
            .env("AUTH_DISABLED", config.api.auth_disabled.to_string())
            .env("API_TOKENS", config.api.api_tokens.join(","))
            .env("API_READ_TOKENS", config.api.api_read_tokens.join(","))
            .env(
                "WORKER_CONCURRENCY",
                config.worker.worker_concurrency.to_string(),
            )
            .env(
                "HTTP_CONCURRENCY",
                config.worker.http_concurrency.to_string(),
            )
            .env(
                "ALLOW_PRIVATE_TARGETS",
                config.common.allow_private_targets.to_string(),
            )
            .env("SESSION_KEY", TEST_SESSION_KEY)
            .env(
                "DISPATCH_INTERVAL_MS",
                config.scheduler.dispatch_interval_ms.to_string(),
            )
            .env(
                "DISPATCH_CLAIM_TIMEOUT_SECS",
                config.scheduler.dispatch_claim_timeout_secs.to_string(),
            )
            .env(
                "SCHEDULE_SYNC_INTERVAL_MS",
                config.scheduler.schedule_sync_interval_ms.to_string(),
            )
            .env(
                "HEARTBEAT_INTERVAL_SECS",
                config.worker.heartbeat_interval_secs.to_string(),
            )
            .env(
                "HEARTBEAT_TIMEOUT_SECS",
                config.scheduler.heartbeat_timeout_secs.to_string(),
            )
            .env(
                "WATCHDOG_INTERVAL_SECS",
                config.scheduler.watchdog_interval_secs.to_string(),
            )
            .env(
                "DRAIN_TIMEOUT_SECS",
                config.worker.drain_timeout_secs.to_string(),
            )
            .env(
                "BROWSER_BACKEND",
                match config.worker.browser_backend {
                    BrowserBackend::Local => "local",
                    BrowserBackend::Devtools => "devtools",
                    BrowserBackend::Webdriver => "webdriver",
                },
            )
            .env("BROWSER_RELAY_BIND", &config.worker.browser_relay_bind)
            .env("LOG_FORMAT", "pretty")
            // Plain text: tests read the log.
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .kill_on_drop(true);
        if let Some(url) = &config.worker.browser_devtools_url {
            cmd.env("BROWSER_DEVTOOLS_URL", &url.0);
        }
        if let Some(slots) = config.worker.browser_devtools_slots {
            cmd.env("BROWSER_DEVTOOLS_SLOTS", slots.to_string());
        }
        if let Some(url) = &config.worker.browser_webdriver_url {
            cmd.env("BROWSER_WEBDRIVER_URL", &url.0);
        }
        if let Some(slots) = config.worker.browser_webdriver_slots {
            cmd.env("BROWSER_WEBDRIVER_SLOTS", slots.to_string());
        }
        for (key, value) in extra_env {
            cmd.env(key, value);
        }
        if let Some(uid) = uid {
            // SAFETY: plain system calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setgid(uid) != 0
                        || libc::setuid(uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().expect("crawlfleet binary starts");
        RoleProcess {
            pid_at_start: child.id().expect("just started") as i32,
            child,
            log,
        }
    }

    /// A worker process on `config`, nothing changed.
    pub fn worker(config: &Config) -> RoleProcess {
        Self::spawn("worker", config, &[])
    }

    pub fn pid(&self) -> i32 {
        self.child.id().expect("running") as i32
    }

    /// The first line of the log containing `needle`, waiting up to `limit`.
    pub async fn log_line(&self, needle: &str, limit: Duration) -> String {
        let log = self.log.clone();
        eventually(limit, &format!("{needle:?} in {}", log.display()), || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .lines()
                    .find(|line| line.contains(needle))
                    .map(str::to_owned)
            }
        })
        .await
    }

    /// The address the process logged with `message` (`api listening`,
    /// `api metrics listening`, `health and metrics listening`): ports are picked by the process itself
    /// (port 0), so none can be taken by another test in between.
    pub async fn listening_on(&self, message: &str) -> std::net::SocketAddr {
        // A process logs this within a second of starting (it connects to
        // Postgres and Redis first): 30 s is ample on a loaded machine.
        let line = self.log_line(message, Duration::from_secs(30)).await;
        line.split_whitespace()
            .find_map(|word| word.strip_prefix("addr="))
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no addr= in {line:?}"))
    }

    /// Sends `signal` (SIGSTOP, SIGCONT...) to the process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0);
    }

    /// Sends SIGTERM and waits for the exit code.
    ///
    /// Callers allow a worker 30 s: an idle one exits in a second or two, and
    /// even a crawl in flight is bounded by the 10 s drain of
    /// [`test_config`](super::test_config) plus the browsers' bounded close.
    /// An api or scheduler stops within 2 s (the api's grace for WebSocket
    /// close frames); callers allow 10-15 s.
    pub async fn terminate(mut self, limit: Duration) -> i32 {
        self.signal(libc::SIGTERM);
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "process did not stop within {limit:?}; log {}",
                    self.log.display()
                )
            })
            .unwrap();
        status.code().unwrap_or(-1)
    }

    /// SIGKILL and reap.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

/// A test that fails midway still stops its processes the clean way, so a
/// worker drains and closes its browsers instead of leaving them running.
impl Drop for RoleProcess {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        let pid = self.pid_at_start;
        // SAFETY: kill(2) on our own child (SIGCONT first: it may be frozen).
        unsafe {
            libc::kill(pid, libc::SIGCONT);
            libc::kill(pid, libc::SIGTERM);
        }
        for _ in 0..150 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.start_kill();
    }
}

/// Browser slots for tests that start worker processes (a [`TestApp`] with an
/// in-process worker takes one of its own).
///
/// [`TestApp`]: super::TestApp
pub async fn browser_slots(n: u32) -> SemaphorePermit<'static> {
    BROWSER_SLOTS
        .acquire_many(n.min(2))
        .await
        .expect("slots never close")
}

/// The processes a worker started, and theirs, by pid.
pub use crawlfleet::worker::browser::processes::descendants;

/// Kills what a SIGKILLed worker left: its browser and its profile folders.
pub fn clean_up_after_killed_worker(left: &[i32], worker_pid: i32) {
    for &pid in left {
        // SAFETY: kill(2); the process may already be gone.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let marker = format!("-{worker_pid}-");
    for entry in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("crawlfleet-") && name.contains(&marker) {
            crawlfleet::worker::browser::processes::kill_chrome_under(&entry.path());
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Browser processes and profile folders that a worker process (by pid) left.
pub fn leftovers_of_worker(worker_pid: i32) -> (Vec<i32>, Vec<PathBuf>) {
    let marker = format!("-{worker_pid}-");
    let root = std::env::temp_dir().join("crawlfleet-");
    let needle = format!("--user-data-dir={}", root.display());
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        // Chrome's helpers show their arguments as one space-separated string.
        if cmdline
            .split(['\0', ' '])
            .any(|arg| arg.starts_with(&needle) && arg.contains(&marker))
        {
            pids.push(pid);
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("crawlfleet-") && name.contains(&marker)
        })
        .collect();
    // What is inside says who left it (a Chrome profile, Chrome's temp...).
    let mut inside = Vec::new();
    let mut todo = dirs.clone();
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(entry.path());
            }
            inside.push(entry.path());
        }
    }
    inside.sort();
    dirs.extend(inside.into_iter().take(40));
    (pids, dirs)
}

/// The pid of the Chrome a worker process started (its browser process).
pub use crawlfleet::worker::browser::processes::browser_of as chrome_of;
