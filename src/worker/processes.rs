//! Finding and killing Chrome processes by their profile folder: the one handle
//! that survives chromedriver dying (BROWSER-NOTES.md).

use std::{fs, path::Path};

/// Kills (SIGKILL) every process whose `--user-data-dir=` is `profile` or a
/// folder under it; returns how many were signalled.
pub fn kill_chrome_under(profile: &Path) -> usize {
    chrome_under(profile)
        .into_iter()
        // SAFETY: kill(2) with a pid read from /proc; at worst it is already gone.
        .filter(|pid| unsafe { libc::kill(*pid, libc::SIGKILL) } == 0)
        .count()
}

/// Waits (up to `limit`) until no process runs under `profile`, killing any
/// that appear: a process's exit is not instant after SIGKILL.
pub async fn kill_chrome_under_and_wait(profile: &Path, limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        if kill_chrome_under(profile) == 0 && chrome_under(profile).is_empty() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Pids of the live processes whose `--user-data-dir=` is `profile` or under it.
fn chrome_under(profile: &Path) -> Vec<i32> {
    let exact = format!("--user-data-dir={}", profile.display());
    let under = format!("{exact}/");
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        // Zombies have an empty command line: they are dead, only not reaped.
        let matches = cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == exact.as_bytes() || arg.starts_with(under.as_bytes()));
        if matches {
            found.push(pid);
        }
    }
    found
}

/// Reaps zombie children that are not ours to wait for (Chrome helpers
/// re-parented to this subreaper). `keep` lists children whose owners wait for
/// them (chromedriver, under tokio's `Child`).
pub fn reap_orphans(keep: &[u32]) -> usize {
    let me = std::process::id();
    let mut reaped = 0;
    let Ok(entries) = fs::read_dir("/proc") else {
        return 0;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if keep.contains(&pid) {
            continue;
        }
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, ...
        let Some(rest) = stat.rsplit_once(") ").map(|(_, rest)| rest) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (Some(state), Some(ppid)) = (fields.next(), fields.next()) else {
            continue;
        };
        if state == "Z" && ppid.parse::<u32>() == Ok(me) {
            let mut status = 0;
            // SAFETY: waitpid on a zombie child of ours, non-blocking.
            if unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) } > 0 {
                reaped += 1;
            }
        }
    }
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
    let mut children = std::collections::HashMap::<i32, Vec<i32>>::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            children.entry(ppid).or_default().push(child);
        }
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
