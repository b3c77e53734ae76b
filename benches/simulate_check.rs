//! The simulator against reality: a local fleet of N real worker processes
//! (the scheduler dispatching, in-process with the api) drains a burst of
//! http crawls of the demo shop's slow pages; the bench measures the drain
//! time and each run's time per page, hands those page times to
//! `crawlfleet simulate` (N fixed tasks of the workers' slots, no start-up,
//! no EC2 host) and prints predicted against measured. Goal: within 15 %.
//! Needs what the tests need (Postgres, Redis; no Chrome is started: a
//! worker starts its browser for its first browser crawl).
//!
//!   cargo bench --bench simulate_check            (or scripts/bench)
//!
//! Prints figures; exits non-zero only if the fleet fails to drain the burst.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use clap::Parser as _;
use serde_json::{Value, json};
use support::{RoleProcess, Roles, TestApp, count_states};

/// Keywords queued at once; each runs on every site below.
const KEYWORDS: usize = 100;
/// The demo shop's /slow page delays (ms): three sites, so the page times
/// have a spread (150, 400 and 900 ms a page, 3 pages a run).
const SITE_DELAYS_MS: [u32; 3] = [150, 400, 900];
const PAGES_PER_RUN: u32 = 3;
/// HTTP slots of each worker process (HTTP_CONCURRENCY).
const SLOTS_PER_WORKER: u32 = 4;
/// Local fleets tried: worker processes.
const FLEETS: [u32; 2] = [2, 4];
const GOAL: f64 = 0.15;

struct Measured {
    runs: usize,
    drain_secs: f64,
    page_secs: Vec<f64>,
    busy_secs: f64,
}

async fn drain_burst(workers: u32) -> Measured {
    let app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |c| {
        c.worker.http_concurrency = SLOTS_PER_WORKER as usize;
        c.worker.worker_concurrency = 1;
    })
    .await;
    let mut sites = Vec::new();
    for ms in SITE_DELAYS_MS {
        let mut body = app.site_body(&format!("slow-{ms}"), "/slow");
        body["search_url"] = json!(format!(
            "{}/slow?ms={ms}&q={{keyword}}&page={{page}}",
            app.site.base_url()
        ));
        body["render"] = json!("http");
        body["max_pages"] = json!(PAGES_PER_RUN);
        body["max_concurrent_runs"] = json!(1000);
        sites.push(app.create_site(body).await);
    }
    let mut keywords = Vec::new();
    for i in 0..KEYWORDS {
        keywords.push(
            app.create_keyword(&format!("burst {i}"), &sites, support::ON_DEMAND)
                .await,
        );
    }
    let fleet: Vec<RoleProcess> = (0..workers)
        .map(|_| RoleProcess::worker(&app.config))
        .collect();
    for worker in &fleet {
        worker.listening_on("health and metrics listening").await;
    }
    // Each worker registers its slots when ready; give the last one a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let started = Instant::now();
    let queued = futures::future::join_all(keywords.iter().map(|kw| app.crawl(*kw))).await;
    let runs: usize = queued.iter().map(Vec::len).sum();
    assert_eq!(runs, KEYWORDS * SITE_DELAYS_MS.len());
    loop {
        let states = count_states(app.pool()).await;
        let ended = states.get("completed").copied().unwrap_or(0)
            + states.get("failed").copied().unwrap_or(0);
        if ended as usize == runs {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the burst did not drain in 10 minutes: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM crawl_runs WHERE state <> 'completed'")
            .fetch_one(app.pool())
            .await
            .unwrap();
    assert_eq!(failed, 0, "every run completes");
    let drain_secs: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM max(finished_at) - min(queued_at))::float8 FROM crawl_runs",
    )
    .fetch_one(app.pool())
    .await
    .unwrap();
    let per_run: Vec<(f64, i32)> = sqlx::query_as(
        "SELECT extract(epoch FROM finished_at - started_at)::float8, pages_crawled
         FROM crawl_runs ORDER BY id",
    )
    .fetch_all(app.pool())
    .await
    .unwrap();
    for worker in fleet {
        worker.terminate(Duration::from_secs(30)).await;
    }
    app.stop().await;
    assert!(
        per_run
            .iter()
            .all(|(_, pages)| *pages == PAGES_PER_RUN as i32)
    );
    Measured {
        runs,
        drain_secs,
        // A run's time per page, its own overhead included.
        page_secs: per_run
            .iter()
            .map(|(secs, pages)| secs / f64::from(*pages))
            .collect(),
        busy_secs: per_run.iter().map(|(secs, _)| secs).sum(),
    }
}

/// `crawlfleet simulate` on the measured page times; its predicted drain.
fn predict(workers: u32, measured: &Measured) -> (f64, Vec<String>) {
    let dir = std::env::temp_dir().join("crawlfleet-simulate-check");
    std::fs::create_dir_all(&dir).unwrap();
    let samples = dir.join(format!("page-secs-{workers}-workers.txt"));
    let text: String = measured
        .page_secs
        .iter()
        .map(|s| format!("{s}\n"))
        .collect();
    std::fs::write(&samples, text).unwrap();
    let args: Vec<String> = [
        "simulate",
        "--infra",
        concat!(env!("CARGO_MANIFEST_DIR"), "/infra"),
        "--burst",
        &measured.runs.to_string(),
        "--fixed-tasks",
        &workers.to_string(),
        "--slots-per-task",
        &SLOTS_PER_WORKER.to_string(),
        "--startup-secs",
        "0",
        "--base-workers",
        "0",
        "--pages-per-run",
        &PAGES_PER_RUN.to_string(),
        "--run-overhead-secs",
        "0",
        "--page-secs-samples",
        samples.to_str().unwrap(),
        "--json",
    ]
    .map(String::from)
    .to_vec();
    // What `crawlfleet simulate` would print (crates/simulate), called in this process.
    let report = crawlfleet_simulate::report(&crawlfleet_simulate::Args::parse_from(&args))
        .expect("the simulator reports");
    let row: Value = serde_json::from_str(&report).expect("one JSON row");
    (row["drain_secs"].as_f64().unwrap(), args)
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    println!(
        "simulate_check: {KEYWORDS} keywords x {} sites queued at once, http crawls of /slow \
         ({SITE_DELAYS_MS:?} ms a page, {PAGES_PER_RUN} pages), {SLOTS_PER_WORKER} slots a worker",
        SITE_DELAYS_MS.len()
    );
    let mut worst: f64 = 0.0;
    for workers in FLEETS {
        let measured = runtime.block_on(drain_burst(workers));
        let (predicted, args) = predict(workers, &measured);
        let error = (predicted - measured.drain_secs) / measured.drain_secs;
        worst = worst.max(error.abs());
        let slots = f64::from(workers * SLOTS_PER_WORKER);
        let mean_page = measured.page_secs.iter().sum::<f64>() / measured.page_secs.len() as f64;
        println!(
            "{workers} workers ({slots} slots), {} runs: measured drain {:.2} s, predicted {:.2} s, \
             error {:+.1} %; mean page {:.3} s (its run's overhead included); slots busy {:.1} % of the drain",
            measured.runs,
            measured.drain_secs,
            predicted,
            error * 100.0,
            mean_page,
            100.0 * measured.busy_secs / (slots * measured.drain_secs),
        );
        println!("  crawlfleet {}", args.join(" "));
    }
    println!(
        "worst error {:.1} % (goal: within {:.0} %)",
        worst * 100.0,
        GOAL * 100.0
    );
}
