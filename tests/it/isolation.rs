//! A pooled browser carries nothing from one crawl to the next: the crawls
//! of one worker slot share a Chrome, never its cookies, storage or cache.

use std::time::Duration;

use serde_json::json;

use crate::support::{Backend, Roles, TestApp, on_each_backend};

// Three crawls of two small pages in one warm browser: seconds.
const LIMIT: Duration = Duration::from_secs(60);
const KEPT: [&str; 4] = ["cookie", "local", "session", "indexeddb"];

on_each_backend!(a_crawl_finds_nothing_an_earlier_crawl_in_the_same_browser_left);
async fn a_crawl_finds_nothing_an_earlier_crawl_in_the_same_browser_left(backend: Backend) {
    let app = TestApp::spawn_on(&backend, Roles::fleet(), |c| {
        c.worker.worker_concurrency = 1
    })
    .await;
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
        // A page of a reused context as visible as in a new one: a hidden
        // page's timers run once a second.
        assert_eq!(report.param("visibility").unwrap(), "visible", "report {n}");
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

/// A page with a frame of another site: Chrome keeps that site's storage
/// apart (under the page's site), where wiping origins would not reach, so
/// the context is not wiped for reuse but disposed: the next crawl's frame
/// finds nothing either.
#[tokio::test]
async fn a_crawl_whose_page_framed_another_site_leaves_that_site_nothing_either() {
    let app = TestApp::spawn_with(Roles::fleet(), |c| c.worker.worker_concurrency = 1).await;
    // Another site on the same server: localhost is not 127.0.0.1's site.
    let other_site = format!("http://localhost:{}", app.site.addr().port());
    let site = app
        .create_site(json!({
            "name": "framed leftovers",
            "search_url": format!(
                "{}/leftovers?q={{keyword}}&page={{page}}&frame={other_site}",
                app.site.base_url()
            ),
            "render": "browser",
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}},
            "wait_for": "#ready",
            "max_pages": 1,
        }))
        .await;
    for i in 0..2 {
        app.crawl_to_completion(&format!("framed {i}"), site, LIMIT)
            .await;
        // The frame reports on its own, shortly after the page's load.
        crate::support::eventually(LIMIT, "the frame reported", || async {
            let framed = app
                .site
                .requests("/leftovers/found")
                .into_iter()
                .filter(|r| r.param("frame").as_deref() == Some("1"))
                .count();
            (framed > i).then_some(())
        })
        .await;
    }
    let reports = app.site.requests("/leftovers/found");
    let framed: Vec<_> = reports
        .iter()
        .filter(|r| r.param("frame").as_deref() == Some("1"))
        .collect();
    let pages: Vec<_> = reports
        .iter()
        .filter(|r| r.param("frame").is_none())
        .collect();
    assert_eq!((framed.len(), pages.len()), (2, 2), "{reports:?}");
    for kept in KEPT {
        assert_eq!(
            framed[1].param(kept).unwrap(),
            "",
            "the second crawl's frame found {kept} of the first"
        );
        assert_eq!(
            pages[1].param(kept).unwrap(),
            "",
            "the second crawl's page found {kept} of the first"
        );
    }
    app.stop().await;
}
