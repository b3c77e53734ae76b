//! A WebDriver endpoint as the worker's browser (`BROWSER_BACKEND=webdriver`):
//! chromedriver on a loopback port standing in for a Selenium Grid. Killed
//! mid-crawl with every Chrome it started, the run is retried once it is
//! back and completes, nothing stored twice; its URL (a secret) reaches no
//! log. The tests every backend must pass run on it too (`on_each_backend!`).

use std::{collections::BTreeSet, time::Duration};

use serde_json::json;

use crate::support::{Backend, RoleProcess, Roles, TestApp, WebDriverEndpoint, browser_slots};

// A run here is a few pages of 1-1.5 s each, plus a retry's 2-3 s backoff
// and a session's start: about 10 s. 90 s is nine times that.
const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_webdriver_endpoint_killed_mid_crawl_is_reconnected_and_the_run_retried_to_completion() {
    let mut endpoint = WebDriverEndpoint::start().await;
    let port = endpoint.port();
    let app = TestApp::spawn_on(&endpoint.backend(), Roles::fleet(), |c| {
        c.worker.worker_concurrency = 1;
    })
    .await;
    // Page 1 is stored and page 2 is loading when the endpoint goes.
    let run = app
        .slow_crawl_on_its_second_page("slow-webdriver", LIMIT)
        .await;
    endpoint.kill();
    drop(endpoint);
    let endpoint = WebDriverEndpoint::start_on(port, "/").await;

    let done = app.wait_until_completed(run, LIMIT).await;
    assert_eq!(
        done["attempts"][0]["error_kind"], "browser_crashed",
        "{done}"
    );
    assert!(done["attempt"].as_i64().unwrap() >= 2, "{done}");
    assert_eq!(done["pages_crawled"], 3, "{done}");
    assert_eq!(done["items_found"], 15, "{done}");
    // Every item once: the page stored before the kill was replaced, not
    // stored again.
    let results = app.results_of_run(run).await;
    let links: BTreeSet<&str> = results
        .iter()
        .map(|r| r["fields"]["link"].as_str().unwrap())
        .collect();
    assert_eq!((results.len(), links.len()), (15, 15), "{results:?}");
    app.stop().await;
    drop(endpoint);
}

/// The endpoint's URL may hold what gives access to the grid (here a path
/// of its own, as a grid's `/wd/hub/` with a token): no line of a worker's
/// log at trace level shows it, while it names the endpoint's host and port.
#[tokio::test]
async fn the_webdriver_endpoints_url_never_reaches_a_workers_log_even_at_trace_level() {
    let _slots = browser_slots(1).await;
    let port = crate::support::free_port().expect("a free port");
    let endpoint = WebDriverEndpoint::start_on(port, "/webdriver-secret-4242/").await;
    let app = TestApp::spawn_on(
        &Backend::WebDriver(endpoint.url()),
        Roles::scheduler_only(),
        |_| {},
    )
    .await;
    let site = app
        .one_page_site(
            "traced-webdriver",
            "/static?q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    let worker = RoleProcess::spawn("worker", &app.config, &[("RUST_LOG", "trace".into())]);
    app.crawl_to_completion("lamp", site, LIMIT).await;
    let log_path = worker.log.clone();
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("TRACE"), "{}", log_path.display());
    assert!(
        log.contains(&format!("127.0.0.1:{port}")),
        "{}",
        log_path.display()
    );
    assert!(
        !log.contains("webdriver-secret-4242"),
        "the URL in the log {}",
        log_path.display()
    );
    app.stop().await;
    drop(endpoint);
}
