//! The api's `/metrics`: never on the API's port (for anyone, token or
//! not), served on its own port (API_METRICS_PORT, loopback by default),
//! and scraping it reads Postgres at most once per API_METRICS_REFRESH_SECS
//! however many scrapers come.

use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, stream};
use reqwest::StatusCode;
use serde_json::Value;

use super::{ApiProcess, READER, Scrape, WRITER, with_tokens};
use crate::support::{Roles, TestApp, eventually};

const REFRESHES: &str = "crawlfleet_metrics_gauge_refreshes_total";
const REFRESH: Duration = Duration::from_secs(3);

#[derive(Parser)]
struct ApiSettings {
    #[command(flatten)]
    api: crawlfleet::config::ApiConfig,
}

#[test]
fn by_default_the_metrics_port_listens_on_loopback_apart_from_the_api() {
    let settings = ApiSettings::parse_from(["crawlfleet"]);
    assert_eq!(settings.api.api_metrics_host, "127.0.0.1");
    assert_ne!(settings.api.api_metrics_port, settings.api.api_port);
    assert!(settings.api.api_metrics_refresh_secs >= 1);
}

#[tokio::test]
async fn metrics_are_not_served_on_the_api_port_and_scrapes_share_one_database_read() {
    let app = TestApp::spawn_with(Roles::default(), with_tokens).await;
    // A process of its own: its metrics registry is its alone.
    let secs = REFRESH.as_secs().to_string();
    let api = ApiProcess::spawn(&app.config, &[("API_METRICS_REFRESH_SECS", secs)]).await;

    // The API's port: nothing for anyone, whatever the token.
    for token in [None, Some(READER), Some(WRITER)] {
        let mut req = app.http.get(format!("{}/metrics", api.base));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{token:?}");
        let body: Value = resp.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("API_METRICS_PORT"), "{body}");
        assert!(!message.contains("crawlfleet_"), "{body}");
    }
    // The metrics port: loopback, with /health beside /metrics.
    let metrics_url = format!("{}/metrics", api.metrics_base);
    assert!(api.metrics_base.starts_with("http://127.0.0.1:"));
    let health = app
        .http
        .get(format!("{}/health", api.metrics_base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);

    let queued = |scrape: &Scrape| scrape.value("crawlfleet_queue_runs", &[("state", "queued")]);
    let first = Scrape::of(&metrics_url).await;
    let read_at = Instant::now();
    assert_eq!(
        first.value(REFRESHES, &[]),
        Some(1.0),
        "the first scrape reads"
    );
    assert_eq!(queued(&first), Some(0.0));
    // A run queued now shows at the next read, not before.
    let site = app
        .one_page_site(
            "cached",
            "/search?q={keyword}",
            serde_json::json!({"render": "http"}),
        )
        .await;
    app.crawl_once("lamp", site).await;

    // 200 scrapes, 20 at a time: one read per period at most.
    let scrapes: Vec<Scrape> = stream::iter(0..200)
        .map(|_| Scrape::of(&metrics_url))
        .buffer_unordered(20)
        .collect()
        .await;
    let elapsed = read_at.elapsed();
    let reads = scrapes
        .iter()
        .filter_map(|s| s.value(REFRESHES, &[]))
        .fold(0.0, f64::max);
    let periods = (elapsed.as_secs_f64() / REFRESH.as_secs_f64()).floor();
    assert!(
        reads <= 1.0 + periods,
        "{reads} database reads for 201 scrapes in {elapsed:?} ({REFRESH:?} a read)"
    );
    if elapsed < REFRESH {
        assert!(
            scrapes.iter().all(|s| queued(s) == Some(0.0)),
            "within the period every scrape gets the values read first"
        );
    }
    // After the period the next scrape reads again, and sees the run.
    let scrape = eventually(REFRESH * 5, "the gauges read again", || async {
        let scrape = Scrape::of(&metrics_url).await;
        (queued(&scrape) == Some(1.0)).then_some(scrape)
    })
    .await;
    assert!(scrape.value(REFRESHES, &[]).unwrap() >= 2.0);
    drop(api);
    app.stop().await;
}
