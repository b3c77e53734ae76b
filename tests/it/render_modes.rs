//! The three render modes: the same search in Chrome and over plain HTTP gives
//! the same results; a JSON API paged by token is crawled to its end; and
//! http/json crawls have slots of their own, so they never wait for a browser.

use std::time::Duration;

use crawlfleet_demo::site::expected_products;
use serde_json::{Value, json};

use crate::support::{ON_DEMAND, Roles, TestApp};

// The slowest run here is 4 pages in Chrome after it starts: seconds; 90 s is
// over ten times that, for a loaded machine.
const LIMIT: Duration = Duration::from_secs(90);

/// The fields of a run's results, in stored order.
fn fields_of(results: &[Value]) -> Vec<(Value, Value, Value, Value)> {
    results
        .iter()
        .map(|r| {
            (
                r["fields"].clone(),
                r["item_url"].clone(),
                r["page"].clone(),
                r["position"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_same_search_in_browser_and_http_modes_yields_identical_results() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let mut sites = Vec::new();
    for render in ["browser", "http"] {
        let mut body = app.site_body(&format!("shop-{render}"), "/search");
        body["render"] = json!(render);
        body["fields"]["image"] = json!({"selector": "img.thumb", "attr": "src"});
        body["fields"]["whole"] = json!({});
        sites.push(app.create_site(body).await);
    }
    let keyword = app.create_keyword("Tea & <Cups>", &sites, ON_DEMAND).await;
    let runs = app.crawl(keyword).await;
    let mut results = Vec::new();
    for run in &runs {
        let run = app.wait_until_completed(*run, LIMIT).await;
        assert_eq!(
            run["pages_crawled"], 4,
            "3 pages of items and the empty 4th"
        );
        results.push(app.results_of_run(run["id"].as_i64().unwrap()).await);
    }
    let (browser, http) = (fields_of(&results[0]), fields_of(&results[1]));
    assert_eq!(browser.len(), 15);
    assert_eq!(browser, http, "browser and http modes read the same items");
    let expected = expected_products(&app.site.base_url(), "Tea & <Cups>");
    for (got, want) in results[1].iter().zip(&expected) {
        assert_eq!(got["fields"]["title"], want.title.as_str());
        assert_eq!(got["fields"]["link"], want.url.as_str());
        assert_eq!(got["fields"]["image"], want.image.as_str());
        assert_eq!(got["fields"]["price"], want.price.as_str());
    }
    // Neither mode fetched the images: over HTTP one request per page, and
    // Chrome loads no image unless the site allows it (browser_resources).
    assert_eq!(app.site.hits("/img/"), 0, "no image was downloaded");
    app.stop().await;
}

#[tokio::test]
async fn a_json_api_paged_by_token_is_crawled_to_the_end() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let site = app
        .create_site(json!({
            "name": "api",
            "render": "json",
            "search_url": format!("{}/api/search?q={{keyword}}&page_size=4", app.site.base_url()),
            "json": {"items": "/items", "next_token": "/next_token", "token_param": "token"},
            "fields": {
                "title": {"pointer": "/title"},
                "url": {"pointer": "/url", "link": true},
                "price": {"pointer": "/price"},
            },
        }))
        .await;
    let run = app.crawl_to_completion("lamp", site, LIMIT).await;
    // 15 items, 4 a page: 4 pages, the last without a token.
    assert_eq!(run["pages_crawled"], 4);
    assert_eq!(run["items_found"], 15);
    let results = app.results_of_run(run["id"].as_i64().unwrap()).await;
    let expected = expected_products(&app.site.base_url(), "lamp");
    let titles: Vec<&str> = results
        .iter()
        .map(|r| r["fields"]["title"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = expected.iter().map(|p| p.title.as_str()).collect();
    assert_eq!(titles, want, "every item once, in order");
    assert_eq!(results[0]["item_url"], expected[0].url.as_str());
    let pages: Vec<i64> = results
        .iter()
        .map(|r| r["page"].as_i64().unwrap())
        .collect();
    assert_eq!(pages.iter().filter(|p| **p == 4).count(), 3);

    let requests = app.site.requests("/api/search");
    assert_eq!(requests.len(), 4);
    assert_eq!(
        requests[0].param("token"),
        None,
        "the first page has no token"
    );
    for (request, previous) in requests[1..].iter().zip(&requests) {
        let token = request.param("token").expect("later pages send the token");
        assert_ne!(Some(token), previous.param("token"));
        assert_eq!(request.param("q").as_deref(), Some("lamp"));
        assert_eq!(request.param("page_size").as_deref(), Some("4"));
    }
    app.stop().await;
}

#[tokio::test]
async fn http_crawls_do_not_wait_for_a_busy_browser() {
    let app = TestApp::spawn_with(Roles::fleet(), |c| c.worker.worker_concurrency = 1).await;
    // The only browser slot is held by a page that takes 20 s.
    let slow = app
        .one_page_site(
            "slow-browser",
            "/slow?ms=20000&q={keyword}",
            json!({"render": "browser", "stuck_timeout_secs": 60}),
        )
        .await;
    let busy = app.crawl_in_flight("busy", slow, LIMIT).await;

    let cheap = app
        .one_page_site("cheap", "/search?q={keyword}", json!({"render": "http"}))
        .await;
    // One plain-HTTP page: under a second. The limit must stay below the busy
    // page's 20 s, so that a pass means the browser was still busy.
    let run = app
        .crawl_to_completion("quick", cheap, Duration::from_secs(10))
        .await;
    assert_eq!(run["items_found"], 5);
    let (_, browser_run) = app.get(&format!("/api/runs/{busy}")).await;
    assert_eq!(
        browser_run["state"], "url_call",
        "the http crawl finished while the browser was still busy"
    );
    app.stop().await;
}
