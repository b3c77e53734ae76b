//! The tools that ship beside the fleet as programs of their own (the
//! workspace's crates/, see docs/architecture.md): `crawlfleet simulate`
//! runs `crawlfleet-simulate`, and `--demo` runs `crawlfleet-demo`, the demo
//! shop, as a child process. Each is looked for next to this executable, then
//! on PATH, as git and cargo find their subcommands; the worker image ships
//! neither, and says which is missing and how to build it.

use std::{
    ffi::OsString,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{ExitCode, Stdio},
    time::Duration,
};

use anyhow::Context as _;
use tokio::{
    io::{AsyncBufReadExt as _, BufReader},
    process::{Child, ChildStdout},
};

use crate::ops::exit::{Stop, StopKind};

/// The fleet simulator (crates/simulate).
pub const SIMULATE: &str = "crawlfleet-simulate";
/// The demo shop (crates/demo).
pub const DEMO: &str = "crawlfleet-demo";
/// The first word of the line `crawlfleet-demo` writes on stdout once it
/// serves (crates/demo/src/serve.rs).
const DEMO_READY: &str = "ready";
/// How long the demo shop gets to stop after SIGTERM before it is killed.
const DEMO_STOPS_WITHIN: Duration = Duration::from_secs(10);

/// A tool found neither next to this executable nor on PATH.
#[derive(Debug, thiserror::Error)]
#[error(
    "{tool} is missing: it is neither next to this executable (in {}) nor on PATH; \
     build it with `cargo build --workspace` (or `cargo build -p {tool}`)",
    beside.display()
)]
pub struct Missing {
    pub tool: &'static str,
    pub beside: PathBuf,
}

/// Where `tool` is: next to this executable, else the first on PATH.
pub fn find(tool: &'static str) -> Result<PathBuf, Missing> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_owned))
        .unwrap_or_default();
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::iter::once(beside.clone())
        .chain(std::env::split_paths(&path))
        .map(|dir| dir.join(tool))
        .find(|candidate| candidate.is_file())
        .ok_or(Missing { tool, beside })
}

/// `crawlfleet simulate ARGS`: this process becomes `crawlfleet-simulate
/// ARGS` (exec), so the output and the exit code are the simulator's. Its
/// name stays `simulate`, as clap's usage lines have always said.
pub fn simulate(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let program = match find(SIMULATE) {
        Ok(program) => program,
        Err(missing) => return Stop::new(StopKind::Config, missing).report(),
    };
    let error = std::process::Command::new(&program)
        .arg0("simulate")
        .args(args)
        .exec();
    Stop::new(
        StopKind::Failed,
        anyhow::Error::new(error).context(format!("running {}", program.display())),
    )
    .report()
}

/// `crawlfleet-demo` running as this process's child: started with this
/// process's own arguments and environment (the same configuration), in a
/// process group of its own (a Ctrl-C reaches the fleet alone, which drains
/// its crawls of the shop before it ends the shop), and ended by its PID.
pub struct DemoShop {
    child: Child,
    /// Held open: the shop writes nothing more, but a closed pipe would fail it.
    _stdout: BufReader<ChildStdout>,
}

impl DemoShop {
    /// Where `crawlfleet-demo` is; missing, the fleet stops before it
    /// connects anything (exit code 2).
    pub fn program() -> Result<PathBuf, Stop> {
        find(DEMO).map_err(|missing| {
            Stop::new(
                StopKind::Config,
                anyhow::Error::new(missing).context("--demo runs the demo shop"),
            )
        })
    }

    /// Starts `program` and waits until it serves the shop, registered. If
    /// it stops first (its reason is on stderr, above), the fleet stops with
    /// its exit code's kind (a taken DEMO_PORT: `port_taken`, 5).
    pub async fn start(program: &Path) -> Result<DemoShop, Stop> {
        let mut child = tokio::process::Command::new(program)
            .args(std::env::args_os().skip(1))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the demo: running {}", program.display()))
            .map_err(|e| Stop::new(StopKind::Failed, e))?;
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut line = String::new();
        let read = stdout.read_line(&mut line).await;
        match line.trim_end().split_once(' ') {
            Some((DEMO_READY, url)) => {
                tracing::info!(url, pid = child.id(), "demo shop ready ({DEMO})");
                Ok(DemoShop {
                    child,
                    _stdout: stdout,
                })
            }
            _ => {
                let ended = child.wait().await;
                let (kind, how) = match (&read, ended) {
                    (Ok(_), Ok(status)) => (
                        status
                            .code()
                            .and_then(kind_of_exit_code)
                            .unwrap_or(StopKind::Failed),
                        status.to_string(),
                    ),
                    (Err(e), _) => (StopKind::Failed, format!("unreadable: {e}")),
                    (_, Err(e)) => (StopKind::Failed, format!("not awaited: {e}")),
                };
                Err(Stop::new(
                    kind,
                    anyhow::anyhow!(
                        "starting the demo: {DEMO} stopped before it served the shop ({how}; its reason is above)"
                    ),
                ))
            }
        }
    }

    /// Ends the shop: SIGTERM to its PID, then SIGKILL if it has not
    /// stopped within [`DEMO_STOPS_WITHIN`].
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) on our own child, not yet reaped (it has an id).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
        match tokio::time::timeout(DEMO_STOPS_WITHIN, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(ended) => tracing::warn!(?ended, "the demo shop ended badly"),
            Err(_) => {
                tracing::warn!(
                    "the demo shop did not stop within {DEMO_STOPS_WITHIN:?}; killing it"
                );
                let _ = self.child.kill().await;
            }
        }
    }
}

/// The kind of stop a crawlfleet program's exit code reports.
fn kind_of_exit_code(code: i32) -> Option<StopKind> {
    StopKind::ALL
        .iter()
        .copied()
        .find(|kind| i32::from(kind.exit_code()) == code)
}
