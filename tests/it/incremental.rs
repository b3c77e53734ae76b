//! Incremental crawls: a daily re-crawl of a newest-first feed stops at the
//! first page an earlier run already stored, and results keep when each item
//! was first and last seen.

use std::time::Duration;

use crawlfleet_demo::site::{INITIAL_POSTS, expected_posts};
use serde_json::{Value, json};

use crate::support::{ON_DEMAND, Roles, TestApp};

// A run is up to five plain-HTTP pages (under 1 ms each, README) after a
// 100 ms dispatch tick and a 300 ms worker poll: under a second; 60 s leaves
// a loaded machine far more than it needs.
const LIMIT: Duration = Duration::from_secs(60);

async fn crawl_keyword(app: &TestApp, keyword: i64) -> Value {
    let runs = app.crawl(keyword).await;
    assert_eq!(runs.len(), 1);
    app.wait_until_completed(runs[0], LIMIT).await
}

fn at(value: &Value) -> chrono::DateTime<chrono::Utc> {
    value.as_str().unwrap().parse().unwrap()
}

fn titles(results: &[Value]) -> Vec<String> {
    results
        .iter()
        .map(|r| r["fields"]["title"].as_str().unwrap().to_owned())
        .collect()
}

/// The feed pages (`page` parameters) requested since the first `skip` requests.
fn pages_requested(app: &TestApp, skip: usize) -> Vec<String> {
    app.site.requests("/feed")[skip..]
        .iter()
        .map(|h| h.param("page").unwrap())
        .collect()
}

fn newest_titles(base: &str, newest: u32, count: u32) -> Vec<String> {
    expected_posts(base, "news", newest, count)
        .into_iter()
        .map(|p| p.title)
        .collect()
}

/// The keyword "news" on an incremental site reading the demo feed (with
/// `extra` query parameters).
async fn incremental_feed(app: &TestApp, name: &str, extra: &str) -> i64 {
    let base = app.site.base_url();
    let site = app
        .create_site(json!({
            "name": name, "render": "http", "stop_on_seen": true,
            "search_url": format!("{base}/feed?q={{keyword}}&page={{page}}{extra}"),
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}, "link": {"selector": "a.title", "attr": "href"}},
        }))
        .await;
    app.create_keyword("news", &[site], ON_DEMAND).await
}

#[tokio::test]
async fn a_second_run_fetches_only_the_new_first_page() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let base = app.site.base_url();
    let keyword = incremental_feed(&app, "feed", "").await;

    // The first run reads the whole feed: 3 pages and the empty 4th.
    let first = crawl_keyword(&app, keyword).await;
    assert_eq!(first["pages_crawled"], 4);
    assert_eq!(first["items_found"], INITIAL_POSTS);
    assert_eq!(pages_requested(&app, 0), ["1", "2", "3", "4"]);

    // Three new posts on top: page 1 shows them, then the newest post the
    // first run stored and one more stored post. The re-crawl stops there.
    app.site.publish("news", 3);
    let second = crawl_keyword(&app, keyword).await;
    assert_eq!(pages_requested(&app, 4), ["1"]);
    assert_eq!(second["pages_crawled"], 1);
    assert_eq!(
        second["items_found"], 3,
        "only the new posts are its results"
    );
    let second_results = app.results_of_run(second["id"].as_i64().unwrap()).await;
    assert_eq!(
        titles(&second_results),
        newest_titles(&base, INITIAL_POSTS + 3, 3)
    );
    for result in &second_results {
        assert_eq!(
            at(&result["first_seen_at"]),
            at(&result["last_seen_at"]),
            "new: seen once"
        );
    }

    // The two stored posts it saw again keep their first sighting and show
    // the new one; the posts it did not reach keep their old one.
    let first_results = app.results_of_run(first["id"].as_i64().unwrap()).await;
    let (seen_again, not_reached): (Vec<&Value>, Vec<&Value>) = first_results
        .iter()
        .partition(|r| r["page"] == 1 && r["position"].as_i64() <= Some(2));
    assert_eq!((seen_again.len(), not_reached.len()), (2, 13));
    for result in seen_again {
        assert!(
            at(&result["last_seen_at"]) > at(&result["first_seen_at"]),
            "{result}"
        );
        assert_eq!(at(&result["first_seen_at"]), at(&result["fetched_at"]));
    }
    for result in not_reached {
        assert_eq!(
            at(&result["last_seen_at"]),
            at(&result["first_seen_at"]),
            "{result}"
        );
    }

    // A whole page of new posts: only page 2 can tell where the new end.
    app.site.publish("news", 5);
    let third = crawl_keyword(&app, keyword).await;
    assert_eq!(pages_requested(&app, 5), ["1", "2"]);
    assert_eq!(third["items_found"], 5);
    let third_results = app.results_of_run(third["id"].as_i64().unwrap()).await;
    assert_eq!(
        titles(&third_results),
        newest_titles(&base, INITIAL_POSTS + 8, 5)
    );

    // Nothing new: page 1 alone, nothing stored.
    let fourth = crawl_keyword(&app, keyword).await;
    assert_eq!(pages_requested(&app, 7), ["1"]);
    assert_eq!(fourth["items_found"], 0);
    app.stop().await;
}

#[tokio::test]
async fn an_item_stored_before_that_recurs_on_every_page_does_not_stop_the_crawl() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    // Every page ends with the same sponsored post (an ad): stored by the
    // first run, it must not be taken for the end of what is new.
    let keyword = incremental_feed(&app, "feed-with-ads", "&ad=true").await;
    crawl_keyword(&app, keyword).await;
    let first_pages = app.site.requests("/feed").len();
    app.site.publish("news", 5);
    let second = crawl_keyword(&app, keyword).await;
    assert_eq!(pages_requested(&app, first_pages), ["1", "2"]);
    assert_eq!(second["items_found"], 5, "{second}");
    app.stop().await;
}

#[tokio::test]
async fn without_stop_on_seen_every_run_reads_the_whole_feed() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let site = app
        .one_page_site(
            "full-feed",
            "/feed?q={keyword}&page={page}",
            json!({"render": "http"}),
        )
        .await;
    let keyword = app.create_keyword("daily", &[site], ON_DEMAND).await;
    crawl_keyword(&app, keyword).await;
    app.site.publish("daily", 5);
    let second = crawl_keyword(&app, keyword).await;
    assert_eq!(
        second["pages_crawled"], 5,
        "20 posts: 4 pages and the empty 5th"
    );
    assert_eq!(second["items_found"], 20);
    app.stop().await;
}
