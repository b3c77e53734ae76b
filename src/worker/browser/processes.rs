//! Finding, killing and reaping Chrome processes by the folder they run in:
//! the one handle that finds every process of a browser, its helpers that
//! outlive it included (docs/dependencies.md, "Chromium").
//!
//! Every Chrome process of a worker names a path under the worker's profile
//! root on its command line: the browser and its helpers by
//! `--user-data-dir=`, its crash handlers by `--database=` (Chrome runs with
//! `XDG_CONFIG_HOME` under the root, see `chrome.rs`). That is how they are
//! told from every other process, including other children of the same
//! process (the tests, `--process=all`).

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
    names_path_under_in(&cmdline, dir.as_os_str().as_encoded_bytes())
}

/// Whether a command line (as /proc shows it) names a path under `dir`. The
/// browser's arguments are NUL-separated; its helpers (zygotes, renderers,
/// GPU, utilities) rewrite theirs into one space-separated string.
fn names_path_under_in(cmdline: &[u8], dir: &[u8]) -> bool {
    cmdline
        .split(|b| *b == 0 || *b == b' ')
        .any(|arg| names_path_under(arg, dir))
}

/// Pids of the live processes running under `dir` (see [`runs_under`]).
fn chrome_under(dir: &Path) -> Vec<ProcEntry> {
    processes()
        .filter(|p| p.state != 'Z' && runs_under(p.pid, dir))
        .collect()
}

/// Pids of the live processes running under `dir`: a relay's accepted clients
/// (see `relay_peer`).
pub fn pids_under(dir: &Path) -> Vec<i32> {
    chrome_under(dir).into_iter().map(|p| p.pid).collect()
}

/// Chrome processes seen alive under a profile of this process, by pid and
/// start time: once dead, a zombie shows neither command line nor
/// environment, so it is recognised by what was seen of it while it lived.
static KNOWN: LazyLock<Mutex<HashMap<i32, u64>>> = LazyLock::new(Default::default);

/// The browser processes this process started and waits for itself: never
/// reaped as orphans, even though they run under the profile root.
static WAITED_FOR: LazyLock<Mutex<std::collections::HashSet<i32>>> =
    LazyLock::new(Default::default);

/// Marks `pid` as a child its starter waits for (see [`reap_orphans`]).
pub fn waited_for(pid: i32) {
    WAITED_FOR.lock().expect("waited-for lock").insert(pid);
}

/// `pid` was waited for: it may be reaped as anything else now.
pub fn no_longer_waited_for(pid: i32) {
    WAITED_FOR.lock().expect("waited-for lock").remove(&pid);
}

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

/// Kills what runs under `dir`; `true` once nothing does (a process's exit
/// is not instant after SIGKILL: call again until then).
fn killed_all_under(dir: &Path) -> bool {
    kill_chrome_under(dir) == 0 && chrome_under(dir).is_empty()
}

/// Waits (up to `limit`) until no process runs under `dir`, killing any that
/// appear.
pub async fn kill_chrome_under_and_wait(dir: &Path, limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    while !killed_all_under(dir) {
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    true
}

/// [`kill_chrome_under_and_wait`] where nothing can be awaited (a `Drop`):
/// blocks the thread for up to `limit`.
pub fn kill_chrome_under_and_block(dir: &Path, limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    while !killed_all_under(dir) {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// Learns the Chrome processes alive under `profile_root`, then reaps the
/// zombie children of this process that were seen alive as Chrome processes
/// (helpers and crash handlers re-parented to this subreaper). A child that
/// anything else waits for (a test's own processes) never ran under the
/// profile root, and the browser processes the worker started are waited for
/// by their starter ([`waited_for`]): neither is taken from its owner.
/// Returns how many were reaped.
pub fn reap_orphans(profile_root: &Path) -> usize {
    remember(&chrome_under(profile_root));
    let me = std::process::id() as i32;
    let waited_for = WAITED_FOR.lock().expect("waited-for lock").clone();
    let mut known = KNOWN.lock().expect("known processes lock");
    let mut still_there = HashMap::with_capacity(known.len());
    let mut reaped = 0;
    for p in processes() {
        if known.get(&p.pid) != Some(&p.start_time) {
            continue;
        }
        if p.state == 'Z' && p.ppid == me && !waited_for.contains(&p.pid) {
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

/// The Chrome browser process among `pid`'s descendants: the one that runs
/// a profile and is no helper of another (no `--type=`).
pub fn browser_of(pid: i32) -> Option<i32> {
    descendants(pid).into_iter().find(|pid| {
        fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
            let mut args = cmdline.split(|b| *b == 0 || *b == b' ');
            let mut profile = false;
            for arg in args.by_ref() {
                if arg.starts_with(b"--type=") {
                    return false;
                }
                profile |= arg.starts_with(b"--user-data-dir=");
            }
            profile
        })
    })
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

    #[test]
    fn helpers_are_found_by_their_one_space_separated_command_line() {
        let dir = b"/tmp/crawlfleet-w";
        let browser =
            b"/usr/lib/chromium/chromium\0--headless\0--user-data-dir=/tmp/crawlfleet-w/chrome-1\0";
        let renderer = b"/usr/lib/chromium/chromium --type=renderer --user-data-dir=/tmp/crawlfleet-w/chrome-1 --lang=en-US\0";
        let other = b"/usr/lib/chromium/chromium --type=renderer --user-data-dir=/tmp/crawlfleet-w2/chrome-1\0";
        assert!(names_path_under_in(browser, dir));
        assert!(names_path_under_in(renderer, dir));
        assert!(!names_path_under_in(other, dir));
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
