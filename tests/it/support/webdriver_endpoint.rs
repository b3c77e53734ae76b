//! A WebDriver endpoint for `BROWSER_BACKEND=webdriver`: chromedriver on a
//! loopback port, standing in for a Selenium Grid. Every Chrome it starts
//! keeps its profile under a folder of its own (its `TMPDIR`), which is how
//! they are killed with it, at once (as a grid going away) or when dropped.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crawlfleet::worker::browser::processes::kill_chrome_under_and_block;

use super::Backend;

/// How long a starting chromedriver gets to listen (a fraction of a second
/// alone; several on a loaded machine).
const START_LIMIT: Duration = Duration::from_secs(30);

/// A chromedriver listening on 127.0.0.1.
pub struct WebDriverEndpoint {
    child: Child,
    dir: PathBuf,
    port: u16,
    /// The path its commands go under (`/` or, like a grid's `/wd/hub/`, one
    /// of its own).
    base: String,
    killed: bool,
}

impl WebDriverEndpoint {
    pub async fn start() -> WebDriverEndpoint {
        let port = super::free_port().expect("a free port");
        Self::start_on(port, "/").await
    }

    /// A chromedriver on `port`, its commands under `base` (`/…/`).
    pub async fn start_on(port: u16, base: &str) -> WebDriverEndpoint {
        let dir = std::env::temp_dir().join(format!("cf-webdriver-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = std::env::var("CHROMEDRIVER_PATH").unwrap_or_else(|_| "chromedriver".into());
        let mut command = Command::new(path);
        command
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .arg(format!("--url-base={base}"))
            .env("TMPDIR", &dir)
            .env("HOME", &dir)
            .env("XDG_CONFIG_HOME", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
            .spawn()
            .expect("chromedriver starts (install chromium-driver)");
        let mut endpoint = WebDriverEndpoint {
            child,
            dir,
            port,
            base: base.to_owned(),
            killed: false,
        };
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if started.elapsed() > START_LIMIT || !matches!(endpoint.child.try_wait(), Ok(None)) {
                endpoint.kill();
                panic!("chromedriver did not listen within {START_LIMIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        endpoint
    }

    /// `BROWSER_WEBDRIVER_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.base)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// This endpoint as a test's backend.
    pub fn backend(&self) -> Backend {
        Backend::WebDriver(self.url())
    }

    /// Kills chromedriver and every Chrome it started, at once.
    pub fn kill(&mut self) {
        if std::mem::replace(&mut self.killed, true) {
            return;
        }
        let pid = self.child.id() as i32;
        // SAFETY: kill(2) on the process group this test started.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        kill_chrome_under_and_block(&self.dir, Duration::from_secs(5));
    }
}

impl Drop for WebDriverEndpoint {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
