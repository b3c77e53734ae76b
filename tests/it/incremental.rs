//! Incremental crawls: a daily re-crawl of a newest-first feed stops at the
//! first page an earlier run already stored, and results keep when each item
//! was first and last seen.

use std::time::Duration;

use crawlfleet::demo_site::{INITIAL_POSTS, expected_posts};
use serde_json::{Value, json};

use crate::helpers::{Roles, TestApp};

const LIMIT: Duration = Duration::from_secs(60);

async fn crawl_keyword(app: &TestApp, keyword: i64) -> Value {
    let runs = app.crawl(keyword).await;
    assert_eq!(runs.len(), 1);
    let run = app
        .wait_for_run(runs[0], &["completed", "failed"], LIMIT)
        .await;
    assert_eq!(run["state"], "completed", "{run}");
    run
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

#[tokio::test]
async fn a_second_run_fetches_only_the_new_first_page() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let base = app.site.base_url();
    let site = app
        .create_site(json!({
            "name": "feed", "render": "http", "stop_on_seen": true,
            "search_url": format!("{base}/feed?q={{keyword}}&page={{page}}"),
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}, "link": {"selector": "a.title", "attr": "href"}},
        }))
        .await;
    let keyword = app.create_keyword("news", &[site], "0 0 0 1 1 *").await;

    // The first run reads the whole feed: 3 pages and the empty 4th.
    let first = crawl_keyword(&app, keyword).await;
    assert_eq!(first["pages_crawled"], 4);
    assert_eq!(first["items_found"], INITIAL_POSTS);
    assert_eq!(app.site.requests("/feed").len(), 4);

    // Five new posts on top; the re-crawl reads page 1 (all new) and page 2
    // (all stored before) and stops there, pages 3 and 4 untouched.
    app.site.publish("news", 5);
    let second = crawl_keyword(&app, keyword).await;
    let requested: Vec<String> = app.site.requests("/feed")[4..]
        .iter()
        .map(|h| h.param("page").unwrap())
        .collect();
    assert_eq!(requested, ["1", "2"]);
    assert_eq!(second["pages_crawled"], 2);
    assert_eq!(
        second["items_found"], 5,
        "only the new posts are its results"
    );
    let second_results = app.results_of_run(second["id"].as_i64().unwrap()).await;
    let newest: Vec<String> = expected_posts(&base, "news", INITIAL_POSTS + 5, 5)
        .into_iter()
        .map(|p| p.title)
        .collect();
    assert_eq!(titles(&second_results), newest);
    for result in &second_results {
        assert_eq!(
            at(&result["first_seen_at"]),
            at(&result["last_seen_at"]),
            "new: seen once"
        );
    }

    // The posts the second run saw again on page 2 keep their first sighting
    // and show the new one; the posts it did not reach keep their old one.
    let first_results = app.results_of_run(first["id"].as_i64().unwrap()).await;
    let seen_again: Vec<&Value> = first_results.iter().filter(|r| r["page"] == 1).collect();
    let not_reached: Vec<&Value> = first_results.iter().filter(|r| r["page"] == 3).collect();
    assert_eq!((seen_again.len(), not_reached.len()), (5, 5));
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

    // Nothing new: the third run stops at page 1.
    let third = crawl_keyword(&app, keyword).await;
    assert_eq!(third["pages_crawled"], 1);
    assert_eq!(third["items_found"], 0);
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
    let keyword = app.create_keyword("daily", &[site], "0 0 0 1 1 *").await;
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
