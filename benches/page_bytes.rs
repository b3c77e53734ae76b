//! Bytes per page and pages per second in browser mode, on the demo's heavy
//! page (`/heavy`: images, a web font, a video, a tag manager, an ad script
//! and a social pixel, its items rendered by its own script), read two
//! ways: as Chrome loads it whole (`browser_resources` allowing every kind:
//! what browser mode did before it blocked anything) and as a site reads
//! it by default (no images, media, fonts nor trackers).
//!
//! The third parties keep their real host names; a proxy on 127.0.0.1
//! takes every name to the demo site (as the tests do), so every site reads
//! through that proxy and the SSRF guard is off (a guarded relay would look
//! the names up). Figures per mode:
//!
//! - bytes/page and requests/page: what the demo site served the page's
//!   requests (bodies, without headers), from its own tally by kind;
//! - fetch+extract ms/page: the worker's `crawlfleet_page_fetch_duration_seconds`
//!   (load, wait for the items, read them);
//! - pages/s: one-page crawls queued at once on a worker of two browser
//!   slots, from the first queued to the last completed (the API, scheduler
//!   and storage included).
//!
//! Needs what the tests need (Postgres, Redis, chromium).
//!
//!   cargo bench --bench page_bytes
//!
//! Prints the figures and exits non-zero if the default is not at least 10x
//! fewer bytes per page than the page loaded whole.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use crawlfleet::ops::metrics::metrics;
use crawlfleet_demo::site::Served;
use serde_json::{Value, json};

use support::{Roles, TestApp, TestProxy, heavy_page_fields};

const WARM_UP: usize = 3;
/// Crawls of one page measured one at a time (bytes, fetch time).
const PAGES: usize = 20;
/// Crawls queued at once for pages/s.
const BURST: usize = 30;
const SLOTS: usize = 2;
const ROUNDS: usize = 2;
const REQUIRED_SAVING: f64 = 10.0;

struct Figures {
    bytes_per_page: f64,
    requests_per_page: f64,
    by_kind: BTreeMap<String, Served>,
    mean_fetch: Duration,
    pages_per_sec: f64,
}

async fn measure(app: &TestApp, proxy: &TestProxy, mode: &str, resources: Value) -> Figures {
    let slug = mode.replace(' ', "-");
    let site = app
        .one_page_site(
            &format!("heavy-{slug}"),
            "/heavy?q={keyword}",
            json!({
                "wait_for": "li.product",
                "fields": heavy_page_fields(),
                "proxy": proxy.url("http", None),
                "browser_resources": resources,
            }),
        )
        .await;
    let histogram = metrics()
        .page_fetch_duration
        .with_label_values(&[&site.to_string()]);
    for i in 0..WARM_UP {
        app.crawl_to_completion(&format!("warm {mode} {i}"), site, Duration::from_secs(60))
            .await;
    }
    // What the warm-up's pages still loaded after they were read.
    tokio::time::sleep(Duration::from_secs(1)).await;
    app.site.take_heavy_served();
    let (sum_before, count_before) = (histogram.get_sample_sum(), histogram.get_sample_count());
    for i in 0..PAGES {
        app.crawl_to_completion(&format!("{mode} {i}"), site, Duration::from_secs(60))
            .await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let by_kind = app.site.take_heavy_served();
    let pages = histogram.get_sample_count() - count_before;
    assert_eq!(pages, PAGES as u64, "one page per crawl");
    let mean_fetch =
        Duration::from_secs_f64((histogram.get_sample_sum() - sum_before) / pages as f64);
    let started = Instant::now();
    let runs = app
        .queue_crawls(site, &format!("burst {mode} "), BURST)
        .await;
    for run in runs {
        let run = app
            .wait_for_run(
                run,
                &["completed", "failed", "cancelled"],
                Duration::from_secs(300),
            )
            .await;
        assert_eq!(run["state"], "completed", "{run}");
    }
    let pages_per_sec = BURST as f64 / started.elapsed().as_secs_f64();
    Figures {
        bytes_per_page: by_kind.values().map(|s| s.bytes).sum::<u64>() as f64 / PAGES as f64,
        requests_per_page: by_kind.values().map(|s| s.requests).sum::<u64>() as f64 / PAGES as f64,
        by_kind,
        mean_fetch,
        pages_per_sec,
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let app = TestApp::spawn_with(Roles::fleet(), |c| {
        c.worker.worker_concurrency = SLOTS;
        c.scheduler.dispatch_interval_ms = 20;
        c.common.allow_private_targets = true;
    })
    .await;
    let proxy = TestProxy::mapping_to(app.site.addr()).await;
    let every_kind = json!({"allow": ["image", "media", "font", "tracker"]});
    let none = json!({"allow": []});
    // Rounds interleaved, the first mode alternating: a machine that grows
    // busier weighs on both.
    let mut rounds = Vec::new();
    for round in 0..ROUNDS {
        let whole_first = round % 2 == 0;
        let (whole, lean) = if whole_first {
            let whole = measure(&app, &proxy, &format!("whole {round}"), every_kind.clone()).await;
            (
                whole,
                measure(&app, &proxy, &format!("default {round}"), none.clone()).await,
            )
        } else {
            let lean = measure(&app, &proxy, &format!("default {round}"), none.clone()).await;
            (
                measure(&app, &proxy, &format!("whole {round}"), every_kind.clone()).await,
                lean,
            )
        };
        rounds.push((whole, lean));
    }
    app.stop().await;
    println!(
        "page_bytes: the demo's heavy page, {PAGES} one-page crawls one at a time after {WARM_UP} \
         to warm up, then {BURST} queued at once on {SLOTS} browser slots; {ROUNDS} rounds"
    );
    for (round, (whole, lean)) in rounds.iter().enumerate() {
        println!("  round {round}");
        for (mode, figures) in [
            ("whole (every kind allowed: before)", whole),
            ("default (no images, media, fonts, trackers)", lean),
        ] {
            println!(
                "    {mode:<44} {:>9.0} bytes/page {:>5.1} requests/page   fetch+extract {:>7.1} ms/page   {:>5.2} pages/s",
                figures.bytes_per_page,
                figures.requests_per_page,
                figures.mean_fetch.as_secs_f64() * 1e3,
                figures.pages_per_sec,
            );
            let kinds: Vec<String> = figures
                .by_kind
                .iter()
                .map(|(kind, s)| {
                    format!(
                        "{kind} {:.1} req {:.0} B",
                        s.requests as f64 / PAGES as f64,
                        s.bytes as f64 / PAGES as f64
                    )
                })
                .collect();
            println!("        per page: {}", kinds.join(", "));
        }
    }
    let (whole, lean) = &rounds[0];
    let saving = whole.bytes_per_page / lean.bytes_per_page;
    println!(
        "  the default downloads {saving:.1}x fewer bytes per page (required: {REQUIRED_SAVING}x)"
    );
    if saving >= REQUIRED_SAVING {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
