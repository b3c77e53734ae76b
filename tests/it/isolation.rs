//! A pooled browser carries nothing from one crawl to the next: the crawls
//! of one worker slot share a Chrome, never its cookies, storage or cache.

use std::time::Duration;

use serde_json::json;

use crate::support::{Roles, TestApp};

// Three crawls of two small pages in one warm browser: seconds.
const LIMIT: Duration = Duration::from_secs(60);
const KEPT: [&str; 4] = ["cookie", "local", "session", "indexeddb"];

#[tokio::test]
async fn a_crawl_finds_nothing_an_earlier_crawl_in_the_same_browser_left() {
    let app = TestApp::spawn_with(Roles::fleet(), |c| c.worker.worker_concurrency = 1).await;
    let site = app
        .create_site(json!({
            "name": "leftovers",
            "search_url": format!("{}/leftovers?q={{keyword}}&page={{page}}", app.site.base_url()),
            "render": "browser",
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}},
            "wait_for": "#ready",
            "max_pages": 2,
        }))
        .await;
    for i in 0..3 {
        let run = app
            .crawl_to_completion(&format!("visit {i}"), site, LIMIT)
            .await;
        assert_eq!(run["pages_crawled"], 2, "{run}");
    }
    let reports = app.site.requests("/leftovers/found");
    assert_eq!(reports.len(), 6, "each page reported what it found");
    for (n, report) in reports.iter().enumerate() {
        let page = n % 2 + 1;
        for kept in KEPT {
            let found = report.param(kept).unwrap();
            if page == 1 {
                assert_eq!(
                    found,
                    "",
                    "crawl {}: {kept} left by an earlier crawl",
                    n / 2 + 1
                );
            } else {
                // Within a crawl the browser keeps what its first page left:
                // what the first pages above would have seen, were it not cleared.
                assert_eq!(found, "yes", "crawl {}, page 2: {kept}", n / 2 + 1);
            }
        }
    }
    assert_eq!(
        app.site.hits("/leftovers/cached.js"),
        3,
        "each crawl fetched the cacheable script itself, once"
    );
    app.stop().await;
}
