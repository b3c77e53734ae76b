//! Paging as sites do it: a "next" link (over HTTP and in a browser), an
//! item offset, a "load more" button and an endless scroll; a search that
//! repeats its page stops instead of running to `max_pages`. The shop counts
//! its requests: no page (or batch) past the bound is ever asked for. Each
//! new setting refused with a 422 naming it.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{PagedShop, Roles, TestApp};

// Four pages in Chrome, each waiting at most 5 s for more items, on a
// loaded machine.
const LIMIT: Duration = Duration::from_secs(90);

/// The titles a run stored, in page order.
fn all_products() -> Vec<String> {
    (0..9).map(|n| format!("Product {n}")).collect()
}

/// A crawl of `body` for keyword `tea`, to completion.
async fn crawl(app: &TestApp, body: Value) -> Value {
    let site = app.create_site(body).await;
    app.crawl_to_completion("tea", site, LIMIT).await
}

#[tokio::test]
async fn a_next_link_is_followed_over_http_and_no_page_past_max_pages_is_fetched() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = PagedShop::start().await;
    let next_link = json!({"paging": {"form": "next_link", "selector": "nav a.next"}});
    let body = shop.site_body("next", "/next?q={keyword}", "http", next_link.clone());
    let run = crawl(&app, body).await;
    assert_eq!(app.titles_of_run(&run).await, all_products());
    assert_eq!(run["pages_crawled"], 3, "{run}");
    assert_eq!(run["paging_ended"], "last_page", "page 3 has no next link");
    assert_eq!(shop.hits("/next?q=tea&p=3"), 1);

    let mut bounded = next_link;
    bounded["max_pages"] = json!(2);
    let body = shop.site_body("next-2", "/next?q={keyword}&p=1", "http", bounded);
    let run = crawl(&app, body).await;
    assert_eq!(app.titles_of_run(&run).await, all_products()[..6]);
    assert_eq!(run["paging_ended"], "max_pages", "{run}");
    assert_eq!(shop.hits("/next?q=tea&p=2"), 2, "once per run");
    assert_eq!(
        shop.hits("/next?q=tea&p=3"),
        1,
        "only the unbounded run read it"
    );
    app.stop().await;
}

#[tokio::test]
async fn offset_paging_asks_for_each_pages_first_item_up_to_max_pages() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = PagedShop::start().await;
    let offset = json!({"paging": {"form": "offset", "page_size": 3}});
    let search = "/offset?q={keyword}&start={offset}";
    let run = crawl(
        &app,
        shop.site_body("offset", search, "http", offset.clone()),
    )
    .await;
    assert_eq!(app.titles_of_run(&run).await, all_products());
    assert_eq!(run["pages_crawled"], 4, "three pages and the empty fourth");
    for start in [0, 3, 6, 9] {
        assert_eq!(shop.hits(&format!("/offset?q=tea&start={start}")), 1);
    }
    let mut bounded = offset;
    bounded["max_pages"] = json!(2);
    let search = "/offset?q={keyword}&start={offset}&bounded";
    let run = crawl(&app, shop.site_body("offset-2", search, "http", bounded)).await;
    assert_eq!(app.titles_of_run(&run).await, all_products()[..6]);
    assert_eq!(run["paging_ended"], "max_pages", "{run}");
    assert_eq!(shop.hits("/offset?q=tea&start=6&bounded"), 0);
    app.stop().await;
}

#[tokio::test]
async fn a_search_that_repeats_its_page_or_links_back_stops_paging_without_reading_it_again() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = PagedShop::start().await;
    let body = shop.site_body(
        "repeat",
        "/repeat?q={keyword}&p={page}",
        "http",
        json!({"max_pages": 50}),
    );
    let run = crawl(&app, body).await;
    assert_eq!(run["paging_ended"], "repeated_page", "{run}");
    assert_eq!(run["pages_crawled"], 2, "{run}");
    assert_eq!(app.titles_of_run(&run).await, all_products()[..3]);
    assert_eq!(
        shop.hits("/repeat?q=tea&p=3"),
        0,
        "paging stopped at the repeat"
    );

    // A next link back to a page read already ends paging there.
    let next_link = json!({"paging": {"form": "next_link", "selector": "a.next"}, "max_pages": 50});
    let body = shop.site_body("cycle", "/cycle?q={keyword}&p=1", "http", next_link);
    let run = crawl(&app, body).await;
    assert_eq!(run["paging_ended"], "repeated_page", "{run}");
    assert_eq!(app.titles_of_run(&run).await, all_products()[..6]);
    assert_eq!(
        shop.hits("/cycle?q=tea&p=1"),
        1,
        "page 1 was not read again"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_browser_follows_next_links_clicks_load_more_and_scrolls_to_the_end() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let shop = PagedShop::start().await;
    let next_link = json!({"paging": {"form": "next_link", "selector": "nav a.next"}});
    let run = crawl(
        &app,
        shop.site_body("next", "/next?q={keyword}", "browser", next_link),
    )
    .await;
    assert_eq!(app.titles_of_run(&run).await, all_products());
    assert_eq!(run["paging_ended"], "last_page", "{run}");

    // The button fetches a batch per click, and is gone after the last.
    let load_more = json!({"paging": {"form": "load_more", "selector": "button.more"}});
    let run = crawl(
        &app,
        shop.site_body("more", "/more?q={keyword}", "browser", load_more.clone()),
    )
    .await;
    assert_eq!(app.titles_of_run(&run).await, all_products());
    assert_eq!(run["paging_ended"], "last_page", "{run}");
    assert_eq!(shop.hits_on("/batch"), 2, "two clicks: batches 1 and 2");

    let mut bounded = load_more;
    bounded["max_pages"] = json!(2);
    let run = crawl(
        &app,
        shop.site_body("more-2", "/more?q={keyword}", "browser", bounded),
    )
    .await;
    assert_eq!(app.titles_of_run(&run).await, all_products()[..6]);
    assert_eq!(run["paging_ended"], "max_pages", "{run}");
    assert_eq!(shop.hits("/batch?n=1"), 2, "once per run");
    assert_eq!(shop.hits("/batch?n=2"), 1, "never clicked past the bound");

    let scroll = json!({"paging": {"form": "infinite_scroll"}});
    let run = crawl(
        &app,
        shop.site_body("scroll", "/scroll?q={keyword}", "browser", scroll),
    )
    .await;
    assert_eq!(app.titles_of_run(&run).await, all_products());
    assert_eq!(run["paging_ended"], "last_page", "{run}");
    assert_eq!(
        run["pages_crawled"], 4,
        "three batches and the scroll that found none"
    );
    app.stop().await;
}

#[tokio::test]
async fn each_bad_paging_setting_is_a_422_naming_its_field() {
    let app = TestApp::spawn().await;
    let shop = PagedShop::start().await;
    let cases = [
        (
            "http",
            "/s?q={keyword}",
            json!({"form": "pages"}),
            "paging.form",
        ),
        (
            "http",
            "/s?q={keyword}",
            json!({"form": "load_more", "selector": "b"}),
            "paging.form",
        ),
        (
            "json",
            "/s?q={keyword}",
            json!({"form": "next_link", "selector": "a"}),
            "paging.form",
        ),
        (
            "http",
            "/s?q={keyword}",
            json!({"form": "next_link"}),
            "paging.selector",
        ),
        (
            "browser",
            "/s?q={keyword}",
            json!({"form": "load_more", "selector": "a["}),
            "paging.selector",
        ),
        (
            "http",
            "/s?q={keyword}",
            json!({"form": "numbered", "selector": "a"}),
            "paging.selector",
        ),
        (
            "http",
            "/s?q={keyword}&o={offset}",
            json!({"form": "offset"}),
            "paging.page_size",
        ),
        (
            "http",
            "/s?q={keyword}&o={offset}",
            json!({"form": "offset", "page_size": 5000}),
            "paging.page_size",
        ),
        (
            "http",
            "/s?q={keyword}",
            json!({"form": "offset", "page_size": 10}),
            "search_url",
        ),
        ("http", "/s?q={keyword}&o={offset}", json!({}), "search_url"),
        (
            "http",
            "/s?q={keyword}&p={page}",
            json!({"form": "next_link", "selector": "a"}),
            "search_url",
        ),
        (
            "http",
            "/s?q={keyword}",
            json!({"form": "next_link", "selector": "a", "depth": 2}),
            "paging",
        ),
    ];
    for (render, search, paging, field) in cases {
        let mut body = shop.site_body("bad", search, render, json!({"paging": paging}));
        if render == "json" {
            body["item_selector"] = Value::Null;
            body["json"] = json!({"items": "/items"});
            body["fields"] = json!({"title": {"pointer": "/title"}});
        }
        let (status, answer) = app.post("/api/sites", body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{paging}: {answer}"
        );
        let named = answer["error"]["field"].as_str().unwrap_or_default();
        assert!(named.starts_with(field), "{paging}: {answer}");
    }
    app.stop().await;
}

#[tokio::test]
async fn the_preview_follows_the_sites_paging_to_page_2_and_no_further() {
    let worker_only = Roles {
        scheduler: false,
        worker: true,
    };
    let app = TestApp::spawn_without_browsers(worker_only, |_| {}).await;
    let shop = PagedShop::start().await;
    let next_link = json!({"paging": {"form": "next_link", "selector": "nav a.next"}});
    let site = shop.site_body("next", "/next?q={keyword}", "http", next_link);
    let (status, answer) = app
        .post(
            "/api/sites/preview",
            json!({"site": site, "keyword": "tea", "pages": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let pages = answer["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 2, "{answer}");
    let second = pages[1]["url"].as_str().unwrap();
    assert!(second.ends_with("/next?q=tea&p=2"), "{answer}");
    assert_eq!(answer["items"].as_array().unwrap().len(), 6, "{answer}");
    assert_eq!(
        shop.hits("/next?q=tea&p=3"),
        0,
        "a preview reads two pages at most"
    );
    app.stop().await;
}
