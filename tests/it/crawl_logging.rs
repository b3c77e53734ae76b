//! A fleet process's log keeps every crawl's lines, start to completion,
//! whatever `RUST_LOG` narrows or widens: with `info,crawlfleet=debug` the
//! log used to stop after the first "crawl started" (the `log` records of
//! HTTP crates, asked about and dropped, silenced the line after each) while
//! the runs kept completing.

use std::time::Duration;

use serde_json::json;

use crate::support::{RoleProcess, Roles, TestApp};

/// Crawls three keywords of a two-page http site through a `--process=all` process
/// logging with `rust_log`, and checks its log has each run's start,
/// pages and completion.
async fn every_crawl_is_logged_to_its_end(rust_log: &str) {
    // The api in this process only to create things; the crawls are the
    // process's own (its scheduler dispatches, its worker crawls).
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;
    // Two pages: the first is stored (and logged at debug) on its own, the
    // second with the completion.
    let mut body = app.site_body("search-http", "/search");
    body["render"] = json!("http");
    body["max_pages"] = json!(2);
    let site = app.create_site(body).await;
    let fleet = RoleProcess::spawn("all", &app.config, &[("RUST_LOG", rust_log.to_owned())]);
    fleet.listening_on("api listening").await;
    let runs = app.queue_crawls(site, "lamp ", 3).await;
    for run in &runs {
        // A one-page http crawl takes well under a second; 60 s is room for
        // a loaded machine and the process's start.
        app.wait_until_completed(*run, Duration::from_secs(60))
            .await;
    }
    for run in &runs {
        for line in ["crawl started", "crawl completed"] {
            let needle = format!("run_id={run}");
            // The completion is written before the run is read as completed
            // through the api; the file may lag a moment behind.
            let found = crate::support::eventually(
                Duration::from_secs(10),
                &format!("{line:?} of run {run} in {}", fleet.log.display()),
                || {
                    let log = fleet.log.clone();
                    let needle = needle.clone();
                    async move {
                        std::fs::read_to_string(&log)
                            .unwrap_or_default()
                            .lines()
                            .find(|l| l.contains(line) && l.contains(&needle))
                            .map(str::to_owned)
                    }
                },
            )
            .await;
            assert!(found.contains(&needle));
        }
    }
    let log = std::fs::read_to_string(&fleet.log).unwrap();
    if rust_log.contains("crawlfleet=debug") {
        let pages = log.lines().filter(|l| l.contains("page stored")).count();
        assert!(
            pages >= runs.len(),
            "each run's page is logged at debug: {pages}"
        );
    }
    assert_eq!(fleet.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn with_crawlfleet_at_debug_every_crawl_is_logged_to_its_end() {
    every_crawl_is_logged_to_its_end("info,crawlfleet=debug").await;
}

#[tokio::test]
async fn with_sqlx_at_warn_every_crawl_is_logged_to_its_end() {
    every_crawl_is_logged_to_its_end("info,sqlx=warn").await;
}
