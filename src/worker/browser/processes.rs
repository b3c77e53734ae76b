//! Finding, killing and reaping Chrome processes by the folder they run in:
//! the one handle that survives chromedriver dying (BROWSER-NOTES.md).
//!
//! Every Chrome process of a worker names a path under the worker's profile
//! root on its command line: the browsers by `--user-data-dir=`, their crash
//! handlers by `--database=` (chromedriver runs with `XDG_CONFIG_HOME` under
//! the root, see `chromedriver.rs`). That is how they are told from every
//! other process, including other children of the same process (the tests,
//! `--process=all`).

use std::{
    collections::HashMap,
    fs,
    path::Path,
    sync::{LazyLock, Mutex},
};

/// One process as /proc shows it.
struct ProcEntry {
    pid: i32,
    state: char,
    ppid: i32,
    /// Clock ticks after boot: with the pid, it names one process for good
    /// (a pid is reused, a (pid, start time) pair is not).
    start_time: u64,
}

/// The processes of this machine, as far as /proc can be read.
fn processes() -> impl Iterator<Item = ProcEntry> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = fs::read_to_string(entry.path().join("stat")).ok()?;
            // Fields after the parenthesised command name: state, ppid, ...;
            // the start time is field 22 of the whole line (20th after the name).
            let rest = stat.rsplit_once(") ")?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            Some(ProcEntry {
                pid,
                state: fields.first()?.chars().next()?,
                ppid: fields.get(1)?.parse().ok()?,
                start_time: fields.get(19)?.parse().ok()?,
            })
        })
}

/// Whether `arg` is a `--flag=value` whose value is `dir` or a path under it.
fn names_path_under(arg: &[u8], dir: &[u8]) -> bool {
    let Some(eq) = arg.iter().position(|b| *b == b'=') else {
        return false;
    };
    let value = &arg[eq + 1..];
    value == dir || (value.starts_with(dir) && value.get(dir.len()) == Some(&b'/'))
}

/// Whether the live process `pid` names a path under `dir` on its command
/// line. Zombies have an empty command line: they are dead, only not reaped.
fn runs_under(pid: i32, dir: &Path) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let dir = dir.as_os_str().as_encoded_bytes();
    cmdline
        .split(|b| *b == 0)
        .any(|arg| names_path_under(arg, dir))
}

/// Pids of the live processes running under `dir` (see [`runs_under`]).
fn chrome_under(dir: &Path) -> Vec<ProcEntry> {
    processes()
        .filter(|p| p.state != 'Z' && runs_under(p.pid, dir))
        .collect()
}

/// Chrome processes seen alive under a profile of this process, by pid and
/// start time: once dead, a zombie shows neither command line nor
/// environment, so it is recognised by what was seen of it while it lived.
static KNOWN: LazyLock<Mutex<HashMap<i32, u64>>> = LazyLock::new(Default::default);

fn remember(found: &[ProcEntry]) {
    let mut known = KNOWN.lock().expect("known processes lock");
    for p in found {
        known.insert(p.pid, p.start_time);
    }
}

/// Kills (SIGKILL) every process running under `dir` (a session's profile,
/// or the whole profile root); returns how many were signalled.
pub fn kill_chrome_under(dir: &Path) -> usize {
    let found = chrome_under(dir);
    // Remembered before the kill: their zombies are ours to reap.
    remember(&found);
    found
        .iter()
        // SAFETY: kill(2) with a pid read from /proc; at worst it is already gone.
        .filter(|p| unsafe { libc::kill(p.pid, libc::SIGKILL) } == 0)
        .count()
}

/// Waits (up to `limit`) until no process runs under `dir`, killing any that
/// appear: a process's exit is not instant after SIGKILL.
pub async fn kill_chrome_under_and_wait(dir: &Path, limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        if kill_chrome_under(dir) == 0 && chrome_under(dir).is_empty() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Learns the Chrome processes alive under `profile_root`, then reaps the
/// zombie children of this process that were seen alive as Chrome processes
/// (helpers and crash handlers re-parented to this subreaper). A child that
/// anything else waits for (chromedriver under tokio, a test's own
/// processes) never ran under the profile root, so it is never taken from
/// its owner. Returns how many were reaped.
pub fn reap_orphans(profile_root: &Path) -> usize {
    remember(&chrome_under(profile_root));
    let me = std::process::id() as i32;
    let mut known = KNOWN.lock().expect("known processes lock");
    let mut still_there = HashMap::with_capacity(known.len());
    let mut reaped = 0;
    for p in processes() {
        if known.get(&p.pid) != Some(&p.start_time) {
            continue;
        }
        if p.state == 'Z' && p.ppid == me {
            let mut status = 0;
            // SAFETY: waitpid on a zombie child of ours that was a Chrome
            // process (same pid and start time), non-blocking.
            if unsafe { libc::waitpid(p.pid, &mut status, libc::WNOHANG) } > 0 {
                reaped += 1;
                continue;
            }
        }
        still_there.insert(p.pid, p.start_time);
    }
    // Forget what is gone: its pid may come back as someone else's process.
    *known = still_there;
    reaped
}

/// Makes this process the reaper of its orphaned descendants, so Chrome's
/// helpers whose parent died are re-parented here (and reaped) instead of
/// piling up as zombies under PID 1 of a container without an init.
pub fn become_subreaper() -> bool {
    // SAFETY: prctl with a constant option and argument.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
}

/// Pids of every descendant of `pid` (children, their children...), read from
/// /proc: what a process killed with SIGKILL leaves running.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut children = HashMap::<i32, Vec<i32>>::new();
    for p in processes() {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let (mut found, mut todo) = (Vec::new(), vec![pid]);
    while let Some(parent) = todo.pop() {
        for &child in children.get(&parent).into_iter().flatten() {
            found.push(child);
            todo.push(child);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_under_the_folder_is_named_only_by_a_flag_value() {
        let dir = b"/tmp/crawlfleet-w";
        assert!(names_path_under(b"--user-data-dir=/tmp/crawlfleet-w", dir));
        assert!(names_path_under(
            b"--database=/tmp/crawlfleet-w/config/chromium/Crash Reports",
            dir
        ));
        assert!(!names_path_under(
            b"--user-data-dir=/tmp/crawlfleet-w2",
            dir
        ));
        assert!(!names_path_under(b"/tmp/crawlfleet-w", dir), "not a flag");
        assert!(!names_path_under(b"--port=9515", dir));
    }

    /// The reaper takes only what it saw alive as a Chrome process: a child
    /// that exited and that someone else waits for stays theirs.
    #[test]
    fn a_child_that_never_ran_under_the_profile_is_left_to_its_owner() {
        let root = std::env::temp_dir().join(format!("crawlfleet-reaper-{}", std::process::id()));
        let mut other = std::process::Command::new("true").spawn().unwrap();
        // Wait until it is a zombie child of this process.
        for _ in 0..200 {
            let zombie = processes().any(|p| p.pid == other.id() as i32 && p.state == 'Z');
            if zombie {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        reap_orphans(&root);
        let status = other.wait().expect("still ours to wait for");
        assert!(status.success());
    }
}
