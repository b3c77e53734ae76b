//! How long one results page takes in each render mode, read from the
//! worker's own `crawlfleet_page_fetch_duration_seconds` (load and extract,
//! the same code path production runs): the static demo page crawled over
//! plain HTTP against the same page in headless Chrome, one crawl at a time.
//! As in production, the SSRF guard is on (the demo site's 127.0.0.1 let
//! through), so Chrome's connections go through the worker's relay; Chrome
//! with the guard off (no relay) is measured too, to show what the relay costs.
//! Needs what the tests need (Postgres, Redis, chromium).
//!
//!   cargo bench --bench render_modes            (or scripts/bench)
//!
//! Prints the figures and exits non-zero if http mode is not at least 10x
//! faster per page than browser mode.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use crawlfleet::ops::metrics::metrics;
use serde_json::json;

use support::{Roles, TestApp};

const WARM_UP: usize = 3;
const PAGES: usize = 40;
const REQUIRED_SPEEDUP: f64 = 10.0;

/// Mean fetch time per page of `site` over its crawls after the warm-up.
struct Figures {
    mean_fetch: Duration,
    mean_crawl: Duration,
}

async fn measure(app: &TestApp, render: &str) -> Figures {
    let site = app
        .one_page_site(
            &format!("bench-{render}"),
            "/static?q={keyword}",
            json!({"render": render}),
        )
        .await;
    let histogram = metrics()
        .page_fetch_duration
        .with_label_values(&[&site.to_string()]);
    for i in 0..WARM_UP {
        let run = app
            .crawl_to_end(&format!("warm {render} {i}"), site, Duration::from_secs(60))
            .await;
        assert_eq!(run["state"], "completed", "{run}");
    }
    let (sum_before, count_before) = (histogram.get_sample_sum(), histogram.get_sample_count());
    let started = Instant::now();
    for i in 0..PAGES {
        let run = app
            .crawl_to_end(&format!("{render} {i}"), site, Duration::from_secs(60))
            .await;
        assert_eq!(run["state"], "completed", "{run}");
    }
    let elapsed = started.elapsed();
    let pages = histogram.get_sample_count() - count_before;
    assert_eq!(pages, PAGES as u64, "one page per crawl");
    Figures {
        mean_fetch: Duration::from_secs_f64(
            (histogram.get_sample_sum() - sum_before) / pages as f64,
        ),
        mean_crawl: elapsed / PAGES as u32,
    }
}

/// A scheduler and a one-slot worker per lane, the guard on or off.
async fn fleet(guarded: bool) -> TestApp {
    TestApp::spawn_with(
        Roles {
            scheduler: true,
            worker: true,
        },
        |c| {
            c.worker.worker_concurrency = 1;
            c.worker.http_concurrency = 1;
            c.scheduler.dispatch_interval_ms = 20;
            c.common.allow_private_targets = !guarded;
            if guarded {
                c.common.allowed_private_targets = vec!["127.0.0.1".parse().expect("an address")];
            }
        },
    )
    .await
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let app = fleet(true).await;
    let browser = measure(&app, "browser").await;
    let http = measure(&app, "http").await;
    app.stop().await;
    let app = fleet(false).await;
    let unguarded = measure(&app, "browser").await;
    app.stop().await;
    let speedup = browser.mean_fetch.as_secs_f64() / http.mean_fetch.as_secs_f64();
    println!(
        "render_modes: the static demo page, {PAGES} crawls of one page each, after {WARM_UP} to warm up"
    );
    for (mode, figures) in [
        ("browser", &browser),
        ("http", &http),
        ("browser, guard off (no relay)", &unguarded),
    ] {
        println!(
            "  {mode:<30} fetch+extract {:>8.2} ms/page   whole crawl (asked through the API to seen completed) {:>8.2} ms",
            figures.mean_fetch.as_secs_f64() * 1e3,
            figures.mean_crawl.as_secs_f64() * 1e3
        );
    }
    println!("  http is {speedup:.1}x faster per page (required: {REQUIRED_SPEEDUP}x)");
    if speedup >= REQUIRED_SPEEDUP {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
