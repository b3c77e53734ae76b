//! The fleet under test: api, scheduler and one worker as real processes of
//! the crawlfleet binary, each logging to its own file, with a supervisor
//! that starts again any process that exits during the run, as ECS or
//! compose would, and counts it: a process that exits under hostile input
//! has crashed.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use crawlfleet::worker::browser::processes::descendants;
use tokio::{
    process::{Child, Command},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

use crate::throwaway::{crawlfleet_binary, remove_profiles_of};

/// The roles, one process each.
pub const ROLES: [&str; 3] = ["api", "scheduler", "worker"];
/// A role that keeps dying is not started again after this many restarts:
/// the run has its answer, and a crash loop must not outlive it.
const MAX_RESTARTS_PER_ROLE: usize = 5;
/// Proxies from the environment would take crawls off loopback: unset.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];
/// Log lines shown with each restart.
const LAST_LINES: usize = 8;

/// A process that exited during the run.
pub struct Restart {
    pub role: &'static str,
    pub status: String,
    pub log: PathBuf,
    pub last_lines: Vec<String>,
}

struct Running {
    role: &'static str,
    /// Kept: a child that has been waited for no longer tells its pid.
    pid: u32,
    child: Child,
    log: PathBuf,
    /// Exited too often: left down.
    given_up: bool,
}

struct State {
    running: Vec<Running>,
    restarts: Vec<Restart>,
    spawned: usize,
}

pub struct Fleet {
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
    supervisor: JoinHandle<()>,
}

impl Fleet {
    /// Starts one process per role with `env`, and the supervisor.
    pub fn start(env: Vec<(String, String)>, log_dir: &Path) -> anyhow::Result<Fleet> {
        let env = Arc::new(env);
        let mut state = State {
            running: Vec::new(),
            restarts: Vec::new(),
            spawned: 0,
        };
        for role in ROLES {
            let running = spawn(role, &env, log_dir, &mut state.spawned)?;
            state.running.push(running);
        }
        let state = Arc::new(Mutex::new(state));
        let stop = CancellationToken::new();
        let supervisor = tokio::spawn(supervise(
            env.clone(),
            log_dir.to_owned(),
            state.clone(),
            stop.clone(),
        ));
        Ok(Fleet {
            state,
            stop,
            supervisor,
        })
    }

    /// The pid of `role`'s process now running, if any.
    pub fn pid_of(&self, role: &str) -> Option<u32> {
        let state = self.state.lock().expect("fleet lock");
        state
            .running
            .iter()
            .find(|p| p.role == role && !p.given_up)
            .map(|p| p.pid)
    }

    /// Stops the supervisor, then every process (SIGTERM, then SIGKILL after
    /// 15 s) and whatever Chrome a worker left; returns the restarts.
    pub async fn stop(self) -> Vec<Restart> {
        self.stop.cancel();
        let _ = self.supervisor.await;
        let (mut running, restarts) = {
            let mut state = self.state.lock().expect("fleet lock");
            (
                std::mem::take(&mut state.running),
                std::mem::take(&mut state.restarts),
            )
        };
        // What the processes started (Chrome and its helpers), by pid and name,
        // so that a pid taken by something else meanwhile is left alone.
        let mut left_behind = Vec::new();
        for process in &running {
            if process.child.id().is_some() {
                let pids = descendants(process.pid as i32);
                left_behind.extend(pids.into_iter().map(|pid| (pid, comm(pid))));
                // SAFETY: kill(2) on a child of ours that has not been reaped.
                unsafe { libc::kill(process.pid as i32, libc::SIGTERM) };
            }
        }
        for process in &mut running {
            if tokio::time::timeout(Duration::from_secs(15), process.child.wait())
                .await
                .is_err()
            {
                let _ = process.child.start_kill();
                let _ = process.child.wait().await;
            }
            remove_profiles_of(process.pid);
        }
        for (pid, name) in left_behind {
            if !name.is_empty() && comm(pid) == name {
                // SAFETY: kill(2) on a process our fleet started, still under its name.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        restarts
    }
}

/// A process's name, empty when it is gone.
fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn spawn(
    role: &'static str,
    env: &[(String, String)],
    log_dir: &Path,
    spawned: &mut usize,
) -> anyhow::Result<Running> {
    *spawned += 1;
    let log = log_dir.join(format!("{role}-{spawned}.log"));
    let file = std::fs::File::create(&log)?;
    let mut command = Command::new(crawlfleet_binary());
    for var in PROXY_VARS {
        command.env_remove(var);
    }
    let child = command
        .arg(format!("--process={role}"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting crawlfleet --process={role}"))?;
    let pid = child.id().context("a child just started has a pid")?;
    Ok(Running {
        role,
        pid,
        child,
        log,
        given_up: false,
    })
}

/// Every 250 ms until stopped: a process that has exited is recorded and
/// started again (at most [`MAX_RESTARTS_PER_ROLE`] times per role).
async fn supervise(
    env: Arc<Vec<(String, String)>>,
    log_dir: PathBuf,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
        let mut state = state.lock().expect("fleet lock");
        let State {
            running,
            restarts,
            spawned,
        } = &mut *state;
        for process in running.iter_mut().filter(|p| !p.given_up) {
            let Ok(Some(status)) = process.child.try_wait() else {
                continue;
            };
            restarts.push(Restart {
                role: process.role,
                status: status.to_string(),
                log: process.log.clone(),
                last_lines: last_lines(&process.log, LAST_LINES),
            });
            remove_profiles_of(process.pid);
            let so_far = restarts.iter().filter(|r| r.role == process.role).count();
            if so_far > MAX_RESTARTS_PER_ROLE {
                eprintln!("abuse: {} exited {so_far} times; left down", process.role);
                process.given_up = true;
                continue;
            }
            match spawn(process.role, &env, &log_dir, spawned) {
                Ok(new) => *process = new,
                Err(e) => eprintln!("abuse: could not restart {}: {e:#}", process.role),
            }
        }
    }
}

/// The last `n` lines of a log file.
pub fn last_lines(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.chars().take(300).collect())
        .collect()
}
