//! The browser kept away from the worker's secrets: Chrome runs with its
//! sandbox as a user that cannot read the worker, with none of the worker's
//! environment, and the worker's relays serve that Chrome alone.
//!
//! The tests run as root (as CI does): the worker then starts Chrome as
//! `nobody`. The second test runs the worker itself as `nobody`, as the
//! containers run it (one user for both), where only the worker being
//! non-dumpable keeps Chrome out of its environment.

use std::{
    os::unix::process::CommandExt as _,
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::support::{RoleProcess, Roles, TEST_SESSION_KEY, TestApp, browser_slots, descendants};

const NOBODY: u32 = 65534;
// One page, Chrome's start included: seconds; 90 s is over ten times that.
const LIMIT: Duration = Duration::from_secs(90);

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn uid_of(pid: i32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        .and_then(|uid| uid.parse().ok())
        .expect("a Uid: line")
}

fn cmdline(pid: i32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
        .replace('\0', " ")
}

/// The browser process: a descendant that runs a profile and is no helper.
fn browser_among(pids: &[i32]) -> i32 {
    *pids
        .iter()
        .find(|pid| {
            let line = cmdline(**pid);
            line.contains("--user-data-dir=") && !line.contains("--type=")
        })
        .expect("the worker runs a Chrome")
}

/// Reads `/proc/<pid>/environ` as user `uid` would: `None` when refused.
fn environ_as(uid: u32, pid: i32) -> Option<String> {
    let output = unsafe {
        Command::new("cat")
            .arg(format!("/proc/{pid}/environ"))
            .stdin(Stdio::null())
            .pre_exec(move || {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(uid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
            .output()
            .unwrap()
    };
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Starts a worker on a closed guard (so Chrome goes through the relay, as in
/// production) and crawls one page in Chrome with it.
async fn crawl_with_worker(app: &TestApp, uid: Option<u32>) -> RoleProcess {
    let site = app
        .one_page_site(
            "confined",
            "/static?q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    let env = [
        ("ALLOW_PRIVATE_TARGETS", "false".to_owned()),
        ("ALLOWED_PRIVATE_TARGETS", app.site.addr().to_string()),
    ];
    let worker = RoleProcess::spawn_as("worker", &app.config, &env, uid);
    let run = app.crawl_to_completion("confined", site, LIMIT).await;
    assert_eq!(run["items_found"], 5, "{run}");
    worker
}

#[tokio::test]
async fn chrome_runs_sandboxed_as_its_own_user_without_the_workers_environment() {
    if !is_root() {
        eprintln!("skipped: only root can start Chrome as another user");
        return;
    }
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn_with(Roles::scheduler_only(), |_| {}).await;
    let worker = crawl_with_worker(&app, None).await;
    let chrome = descendants(worker.pid());
    let browser = browser_among(&chrome);

    // Its own user, for every process of it.
    for pid in &chrome {
        assert_eq!(uid_of(*pid), NOBODY, "{pid}: {}", cmdline(*pid));
    }
    // With its sandbox: no process without it, and the renderers in a user
    // namespace of their own.
    let renderers: Vec<i32> = chrome
        .iter()
        .copied()
        .filter(|pid| cmdline(*pid).contains("--type=renderer"))
        .collect();
    assert!(!renderers.is_empty(), "the crawl's page has a renderer");
    for pid in &chrome {
        assert!(!cmdline(*pid).contains("--no-sandbox"), "{}", cmdline(*pid));
    }
    let namespace = |pid: i32| std::fs::read_link(format!("/proc/{pid}/ns/user")).unwrap();
    for renderer in &renderers {
        assert_ne!(
            namespace(*renderer),
            namespace(browser),
            "a renderer runs in the browser's user namespace"
        );
    }
    // None of the worker's environment (read as root, who may).
    let worker_env = environ_as(0, worker.pid()).expect("root reads any environment");
    assert!(
        worker_env.contains(TEST_SESSION_KEY),
        "the control: the worker has it"
    );
    let browser_env = environ_as(0, browser).unwrap();
    for secret in ["SESSION_KEY", "DATABASE_URL", "REDIS_URL", "API_TOKENS"] {
        assert!(!browser_env.contains(secret), "Chrome was handed {secret}");
    }
    // And Chrome's user cannot read the worker's.
    assert_eq!(environ_as(NOBODY, worker.pid()), None);

    // The relay Chrome's own connections go through serves Chrome alone: this
    // process is refused before any SOCKS5 answer.
    let relay = cmdline(browser)
        .split_whitespace()
        .find_map(|arg| {
            arg.strip_prefix("--proxy-server=socks5://")
                .map(str::to_owned)
        })
        .expect("Chrome's own connections go through a relay");
    let mut stranger = TcpStream::connect(&relay).await.unwrap();
    stranger.write_all(&[5, 1, 0]).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stranger.read_to_end(&mut answer))
        .await
        .expect("the relay closes the connection");
    assert!(
        read.is_err() || answer.is_empty(),
        "a process other than Chrome was answered: {answer:?}"
    );
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

/// As in the containers: worker and Chrome of one user. The worker being
/// non-dumpable is what keeps its environment from Chrome's user; the
/// control, another process of that user, can be read.
#[tokio::test]
async fn a_browser_of_the_workers_own_user_cannot_read_the_workers_environment() {
    if !is_root() {
        eprintln!("skipped: the test starts the worker as another user");
        return;
    }
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn_with(Roles::scheduler_only(), |_| {}).await;
    let worker = crawl_with_worker(&app, Some(NOBODY)).await;
    assert_eq!(uid_of(worker.pid()), NOBODY);
    let chrome = descendants(worker.pid());
    let browser = browser_among(&chrome);
    assert_eq!(uid_of(browser), NOBODY, "Chrome runs as the worker");
    assert!(
        !cmdline(browser).contains("--no-sandbox"),
        "with its sandbox"
    );

    let mut control = unsafe {
        Command::new("sleep")
            .arg("30")
            .env("CONTROL_SECRET", "visible")
            .pre_exec(|| {
                if libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
            .spawn()
            .unwrap()
    };
    let control_env = environ_as(NOBODY, control.id() as i32);
    control.kill().unwrap();
    control.wait().unwrap();
    assert!(
        control_env.is_some_and(|env| env.contains("CONTROL_SECRET")),
        "a process of the same user is readable, so the check can tell"
    );
    assert_eq!(
        environ_as(NOBODY, worker.pid()),
        None,
        "Chrome's user read the worker's environment"
    );
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}
