//! The same loopback workload on each browser backend: the static demo page
//! crawled one page per crawl, one browser slot, by a worker whose browser is
//! its own Chrome (`local`), a Chromium over DevTools (`devtools`) or a
//! chromedriver session (`webdriver`), all on this machine. Needs what the
//! tests need (Postgres, Redis, chromium, chromedriver).
//!
//!   cargo bench --bench browser_backends
//!
//! Prints, per backend: pages per second (crawls asked through the API to
//! seen completed, one at a time), CPU seconds per page (this process, the
//! worker being in it, plus every process under it: Chrome, its renderers,
//! chromedriver, including those that exited and were waited for), and the
//! resident memory of those processes at the end of the run (RSS summed:
//! shared pages count once per process).

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;

use support::{Backend, RemoteChrome, Roles, TestApp, WebDriverEndpoint};

const WARM_UP: usize = 3;
const PAGES: usize = 30;

/// CPU seconds (own and of waited-for children) and resident bytes of a process.
fn usage_of(pid: i32) -> Option<(f64, u64, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    let ticks: f64 = after[11..15]
        .iter()
        .filter_map(|t| t.parse::<f64>().ok())
        .sum();
    let ppid = after[1].parse().ok()?;
    let rss_pages: u64 = after[21].parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let (hz, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK) as f64,
            libc::sysconf(libc::_SC_PAGESIZE) as u64,
        )
    };
    Some((ticks / hz, rss_pages * page, ppid))
}

/// CPU seconds and resident bytes of this process and all under it.
fn tree_usage() -> (f64, u64) {
    let me = std::process::id() as i32;
    let all: Vec<(i32, (f64, u64, i32))> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, usage_of(pid)?)))
        .collect();
    let mut tree = vec![me];
    let mut grown = true;
    while grown {
        grown = false;
        for (pid, (_, _, ppid)) in &all {
            if tree.contains(ppid) && !tree.contains(pid) {
                tree.push(*pid);
                grown = true;
            }
        }
    }
    all.iter()
        .filter(|(pid, _)| tree.contains(pid))
        .fold((0.0, 0), |(cpu, rss), (_, (c, r, _))| (cpu + c, rss + r))
}

async fn measure(name: &str, backend: &Backend) {
    let app = TestApp::spawn_on(backend, Roles::fleet(), |c| {
        c.worker.worker_concurrency = 1;
        c.scheduler.dispatch_interval_ms = 20;
    })
    .await;
    let site = app
        .one_page_site(
            &format!("bench-{name}"),
            "/static?q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    let mut start = (Instant::now(), 0.0);
    for i in 0..WARM_UP + PAGES {
        if i == WARM_UP {
            start = (Instant::now(), tree_usage().0);
        }
        let run = app
            .crawl_to_end(&format!("{name} {i}"), site, Duration::from_secs(60))
            .await;
        assert_eq!(run["state"], "completed", "{run}");
    }
    let (cpu, rss) = tree_usage();
    let (started, cpu_before) = start;
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "  {name:<10} {:>6.2} pages/s   {:>7.1} ms CPU/page   {:>6.0} MiB resident at the end",
        PAGES as f64 / elapsed,
        (cpu - cpu_before) / PAGES as f64 * 1e3,
        rss as f64 / (1024.0 * 1024.0),
    );
    app.stop().await;
}

#[tokio::main]
async fn main() {
    println!(
        "browser_backends: the static demo page, {PAGES} crawls of one page each, one slot, after {WARM_UP} to warm up"
    );
    measure("local", &Backend::Local).await;
    let remote = RemoteChrome::start().await;
    measure("devtools", &remote.backend()).await;
    drop(remote);
    let endpoint = WebDriverEndpoint::start().await;
    measure("webdriver", &endpoint.backend()).await;
    drop(endpoint);
}
