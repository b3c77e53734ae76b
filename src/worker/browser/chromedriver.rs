//! The worker's own chromedriver, restarted if it dies. Chrome outlives a dead
//! chromedriver (re-parented), so a restart first kills the browsers it left.

use std::{path::PathBuf, process::Stdio, sync::Arc, time::Duration};

use anyhow::Context;
use tokio::{net::TcpStream, process::Command, sync::watch};
use tokio_util::sync::CancellationToken;

use super::processes::kill_chrome_under;

/// A running, supervised chromedriver.
pub struct ChromeDriver {
    url: String,
    /// Bumped on every restart: sessions opened before it are gone.
    generation: watch::Receiver<u64>,
    supervisor: tokio::task::JoinHandle<()>,
}

impl ChromeDriver {
    /// Starts chromedriver on a free loopback port and supervises it until
    /// `shutdown`. Orphaned browsers are found under `profile_root`.
    pub async fn start(
        binary: &str,
        profile_root: PathBuf,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Self> {
        let port = free_port().await?;
        let places = ChromePlaces::under(&profile_root).await?;
        let mut child = spawn(binary, port, &places).await?;
        let (generation_tx, generation) = watch::channel(0u64);
        let binary = binary.to_owned();
        let profile_root = Arc::new(profile_root);
        let supervisor = tokio::spawn(async move {
            loop {
                tokio::select! {
                    status = child.wait() => {
                        tracing::warn!(?status, "chromedriver exited; restarting it");
                        crate::ops::metrics::metrics().browser_restarts.with_label_values(&["chromedriver"]).inc();
                        let killed = kill_chrome_under(&profile_root);
                        if killed > 0 {
                            tracing::warn!(killed, "killed browsers orphaned by chromedriver");
                        }
                        child = loop {
                            if shutdown.is_cancelled() {
                                return;
                            }
                            match spawn(&binary, port, &places).await {
                                Ok(child) => break child,
                                Err(e) => {
                                    tracing::error!(error = ?e, "chromedriver restart failed; retrying");
                                    tokio::time::sleep(Duration::from_secs(1)).await;
                                }
                            }
                        };
                        generation_tx.send_modify(|g| *g += 1);
                    }
                    _ = shutdown.cancelled() => {
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                        return;
                    }
                }
            }
        });
        Ok(Self {
            url: format!("http://127.0.0.1:{port}"),
            generation,
            supervisor,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Changes on every restart of chromedriver.
    pub fn generation(&self) -> watch::Receiver<u64> {
        self.generation.clone()
    }

    /// Waits for the supervisor after shutdown was signalled.
    pub async fn stopped(self) {
        let _ = self.supervisor.await;
    }
}

async fn free_port() -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("finding a free port for chromedriver")?;
    Ok(listener.local_addr()?.port())
}

/// Where chromedriver and its browsers keep files besides their profiles:
/// under the profile root, so they are removed with it even when Chrome is
/// killed, and so every Chrome process names the root on its command line
/// (how `processes` tells them from any other process).
struct ChromePlaces {
    /// Chrome's own temporary folders (scoped_dir...).
    temp: PathBuf,
    /// Chrome's configuration home: its crash handlers' database goes there
    /// (`--database=<root>/config/chromium/Crash Reports`), not to ~/.config.
    config: PathBuf,
}

impl ChromePlaces {
    async fn under(profile_root: &std::path::Path) -> anyhow::Result<Self> {
        let places = Self {
            temp: profile_root.join("tmp"),
            config: profile_root.join("config"),
        };
        for dir in [&places.temp, &places.config] {
            tokio::fs::create_dir_all(dir)
                .await
                .with_context(|| format!("creating {}", dir.display()))?;
        }
        Ok(places)
    }
}

/// Starts chromedriver and waits until it accepts connections. Without
/// `--allowed-ips` it listens on loopback only (127.0.0.1 and ::1); with it,
/// on every interface.
async fn spawn(
    binary: &str,
    port: u16,
    places: &ChromePlaces,
) -> anyhow::Result<tokio::process::Child> {
    let mut command = Command::new(binary);
    command
        .env("TMPDIR", &places.temp)
        .env("XDG_CONFIG_HOME", &places.config)
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: a Ctrl-C in the terminal must reach only the
        // worker, which then drains, not kill every browser at once.
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: prctl in the forked child before exec; async-signal-safe. The
    // chromedriver dies with the worker even when the worker is SIGKILLed.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let mut child = command.spawn().with_context(|| {
        format!("starting {binary} (set CHROMEDRIVER_PATH or install chromium-driver)")
    })?;
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok(child);
        }
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("chromedriver exited at start: {status}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
    anyhow::bail!("chromedriver did not listen on port {port} within 5 s")
}
