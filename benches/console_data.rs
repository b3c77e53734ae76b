//! How fast the data of each console page arrives with a production-sized
//! history: 100,000 runs (with their attempts) over 10 sites and 100
//! keywords, and 1,000,000 results. Each request is made 20 times against an
//! api process (the release binary under `cargo bench`); the median and the
//! slowest are printed. Needs Postgres and Redis.
//!
//!   cargo bench --bench console_data       (or scripts/bench)
//!
//! Exits non-zero if a page's slowest answer takes over TARGET.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

#[path = "common/history.rs"]
mod history;

use std::time::{Duration, Instant};

use history::{RESULTS, RUNS, a_production_history};
use support::{RoleProcess, TestApp};

const TRIES: usize = 20;
const TARGET: Duration = Duration::from_millis(300);

/// The median and the slowest of `TRIES` answers to `path`.
async fn time(http: &reqwest::Client, base: &str, path: &str) -> (Duration, Duration) {
    let mut took = Vec::new();
    for _ in 0..TRIES {
        let started = Instant::now();
        let response = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.bytes().await.unwrap();
        took.push(started.elapsed());
    }
    took.sort();
    (took[TRIES / 2], took[TRIES - 1])
}

#[tokio::main]
async fn main() {
    let app = TestApp::spawn().await;
    let writing = Instant::now();
    let history::History { sites, keywords } = a_production_history(&app).await;
    println!(
        "{RUNS} runs with their attempts and {RESULTS} results written in {:.1} s",
        writing.elapsed().as_secs_f64()
    );
    let (_, last) = app.get("/api/runs?limit=1").await;
    let run = last["items"][0]["id"].as_i64().unwrap();
    // Ten minutes into the results' half hour: a third of them first seen before.
    let (_, first) = app.get("/api/results?limit=1").await;
    let first_seen: chrono::DateTime<chrono::Utc> = first["items"][0]["first_seen_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let ten_minutes_in = (first_seen + chrono::TimeDelta::minutes(10))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let api = RoleProcess::spawn("api", &app.config, &[]);
    let base = format!("http://{}", api.listening_on("api listening").await);
    let http = reqwest::Client::new();
    let pages = [
        "/api/jobs/queue".to_owned(),
        "/api/jobs/history".to_owned(),
        "/api/sites/health".to_owned(),
        "/api/runs?error_kind=blocked&limit=100".to_owned(),
        "/api/runs?limit=100".to_owned(),
        "/api/runs?state=failed&limit=100".to_owned(),
        format!("/api/runs?site_id={}&limit=100", sites[3]),
        format!("/api/runs?keyword_id={}&limit=100", keywords[7]),
        format!("/api/runs/{run}"),
        "/api/results?limit=100".to_owned(),
        format!("/api/results?keyword_id={}&limit=100", keywords[0]),
        // A word of every item, of one in a thousand, of none.
        "/api/results?q=item&limit=100".to_owned(),
        "/api/results?q=777&limit=100".to_owned(),
        "/api/results?q=nowhere&limit=100".to_owned(),
        format!("/api/results?first_seen_after={ten_minutes_in}&limit=100"),
        format!("/api/results?first_seen_before={ten_minutes_in}&limit=100"),
        format!("/api/results?q=777&site_id={}&limit=100", sites[1]),
        "/api/access".to_owned(),
        format!("/api/sites/{}/health", sites[0]),
        "/api/sites".to_owned(),
        "/api/keywords".to_owned(),
    ];
    let mut slow = Vec::new();
    for page in &pages {
        let (median, slowest) = time(&http, &base, page).await;
        println!(
            "{page:<45} median {:>6.1} ms, slowest {:>6.1} ms",
            median.as_secs_f64() * 1e3,
            slowest.as_secs_f64() * 1e3
        );
        if slowest > TARGET {
            slow.push(page.clone());
        }
    }
    assert_eq!(api.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
    if !slow.is_empty() {
        eprintln!("over {TARGET:?}: {slow:?}");
        std::process::exit(1);
    }
}
