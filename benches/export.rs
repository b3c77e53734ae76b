//! What exporting a million results costs the api: rows per second, and how
//! far its resident memory grows while it streams them (it must stay within a
//! few MB: the export reads and writes a batch at a time). The api runs as its
//! own process (the release binary under `cargo bench`), its memory read from
//! /proc every 20 ms while the client reads the body and throws it away.
//! Needs Postgres and Redis.
//!
//!   cargo bench --bench export            (or scripts/bench)
//!
//! Prints the figures and exits non-zero if the api's memory grew by more
//! than MAX_GROWTH_MB in either format.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::{ON_DEMAND, RoleProcess, TestApp};

const ROWS: i64 = 1_000_000;
const MAX_GROWTH_MB: f64 = 16.0;

/// Resident memory of `pid`, in MB.
fn rss_mb(pid: i32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
        .expect("VmRSS in /proc/pid/status");
    kb / 1024.0
}

/// `ROWS` results of one run, written by Postgres itself (a bench of the
/// export, not of inserting).
async fn a_million_results(app: &TestApp) {
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let run = app.crawl(keyword).await[0];
    sqlx::query(
        r#"INSERT INTO crawl_results (run_id, keyword_id, site_id, page, position, page_url,
                                      item_url, fields, content_hash, item_key)
           SELECT $1, $2, $3, i / 1000 + 1, i % 1000 + 1, 'http://127.0.0.1/search?page=' || (i / 1000 + 1),
                  'http://127.0.0.1/item/' || i,
                  jsonb_build_object('title', 'Lamp "' || i || '", brass', 'price', i % 500),
                  md5(i::text), 'http://127.0.0.1/item/' || i
           FROM generate_series(0, $4 - 1) AS i"#,
    )
    .bind(run)
    .bind(keyword)
    .bind(site)
    .bind(ROWS)
    .execute(app.pool())
    .await
    .unwrap();
}

struct Figures {
    rows: usize,
    megabytes: f64,
    seconds: f64,
    rss_before: f64,
    rss_peak: f64,
}

async fn measure(api: &RoleProcess, base: &str, format: &str) -> Figures {
    let pid = api.pid();
    let rss_before = rss_mb(pid);
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let sampler = tokio::spawn(async move {
        let mut peak: f64 = 0.0;
        loop {
            peak = peak.max(rss_mb(pid));
            tokio::select! {
                _ = &mut stopped => return peak,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    });
    let started = Instant::now();
    let mut response = reqwest::get(format!("{base}/api/results/export?format={format}"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (mut bytes, mut lines) = (0usize, 0usize);
    while let Some(chunk) = response.chunk().await.expect("the whole body") {
        bytes += chunk.len();
        lines += chunk.iter().filter(|&&b| b == b'\n').count();
    }
    let seconds = started.elapsed().as_secs_f64();
    let _ = stop.send(());
    let rss_peak = sampler.await.unwrap();
    // The CSV has a header row; each JSON line is a row.
    let rows = if format == "csv" { lines - 1 } else { lines };
    Figures {
        rows,
        megabytes: bytes as f64 / 1e6,
        seconds,
        rss_before,
        rss_peak,
    }
}

#[tokio::main]
async fn main() {
    let app = TestApp::spawn().await;
    let inserting = Instant::now();
    a_million_results(&app).await;
    println!(
        "{ROWS} results written by Postgres in {:.1} s",
        inserting.elapsed().as_secs_f64()
    );
    let api = RoleProcess::spawn("api", &app.config, &[]);
    let base = format!("http://{}", api.listening_on("api listening").await);
    let mut growths = Vec::new();
    for format in ["csv", "ndjson"] {
        let f = measure(&api, &base, format).await;
        // Row count 1,000,000 in CSV here: the titles hold no line break.
        assert_eq!(f.rows as i64, ROWS, "{format}: every row exported");
        let growth = f.rss_peak - f.rss_before;
        println!(
            "{format:>6}: {} rows, {:.0} MB in {:.1} s ({:.0} rows/s); api RSS {:.1} MB before, \
             {:.1} MB at peak: +{growth:.1} MB",
            f.rows,
            f.megabytes,
            f.seconds,
            f.rows as f64 / f.seconds,
            f.rss_before,
            f.rss_peak,
        );
        growths.push((format, growth));
    }
    assert_eq!(api.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
    for (format, growth) in growths {
        if growth > MAX_GROWTH_MB {
            eprintln!("{format}: the api grew by {growth:.1} MB (> {MAX_GROWTH_MB} MB)");
            std::process::exit(1);
        }
    }
}
