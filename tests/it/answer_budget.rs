//! A paged listing's answer stops taking rows at `API_ANSWER_MAX_BYTES`,
//! says so (`cut_at_bytes`), and its cursor goes on from the last row sent:
//! following it lists every row once, in order, however large the rows.

use crawlfleet::domain::item::PageItem;
use serde_json::{Value, json};

use crate::support::{ON_DEMAND, Roles, TestApp, complete_with_one_page};

const BUDGET: usize = 20_000;
const ITEMS: usize = 30;

/// A completed run with `ITEMS` results of about 4 KB each.
async fn run_with_big_results(app: &TestApp) -> i64 {
    let pool = app.pool();
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let run = app.crawl(keyword).await[0];
    let items: Vec<PageItem> = (0..ITEMS)
        .map(|i| {
            let fields = json!({"title": format!("{i} {}", "x".repeat(4000))});
            PageItem {
                content_hash: crawlfleet::worker::content_hash(&fields),
                item_url: Some(format!("http://127.0.0.1/big/{i}")),
                fields,
            }
        })
        .collect();
    complete_with_one_page(pool, run, "http://127.0.0.1/big?page=1", &items).await;
    run
}

/// Every answer of `path` (with `limit` and the cursor), as raw bytes and JSON.
async fn follow(app: &TestApp, path: &str) -> Vec<(usize, Value)> {
    let mut answers = Vec::new();
    let mut cursor = String::new();
    loop {
        let body = app
            .http
            .get(format!("{}{path}&limit=100{cursor}", app.base))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let page: Value = serde_json::from_slice(&body).unwrap();
        let next = page["next_cursor"].as_str().map(str::to_owned);
        answers.push((body.len(), page));
        match next {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return answers,
        }
    }
}

#[tokio::test]
async fn a_listing_over_its_byte_budget_is_cut_and_its_cursor_lists_the_rest() {
    let app = TestApp::spawn_with(Roles::default(), |config| {
        config.api.api_answer_max_bytes = BUDGET;
    })
    .await;
    let run = run_with_big_results(&app).await;
    let answers = follow(&app, &format!("/api/results?run_id={run}")).await;
    assert!(answers.len() >= 5, "{} answers", answers.len());
    let mut titles = Vec::new();
    for (bytes, page) in &answers {
        let items = page["items"].as_array().unwrap();
        assert!(*bytes <= BUDGET + 100, "an answer of {bytes} bytes");
        if page.get("next_cursor").is_some() {
            assert_eq!(
                page["cut_at_bytes"],
                BUDGET,
                "{bytes} bytes, {} rows",
                items.len()
            );
            assert!(items.len() < 100);
        }
        titles.extend(items.iter().map(|r| {
            r["fields"]["title"].as_str().unwrap()[..2]
                .trim()
                .to_owned()
        }));
    }
    let expected: Vec<String> = (0..ITEMS).map(|i| i.to_string()).collect();
    assert_eq!(titles, expected, "every row once, in order");

    app.stop().await;
}

#[tokio::test]
async fn runs_are_listed_within_the_budget_too() {
    let app = TestApp::spawn_with(Roles::default(), |config| {
        config.api.api_answer_max_bytes = 3000;
    })
    .await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let queued = app.queue_crawls(site, "k", 12).await;
    let answers = follow(&app, &format!("/api/runs?site_id={site}")).await;
    assert!(
        answers.iter().any(|(_, page)| page["cut_at_bytes"] == 3000),
        "some answer was cut"
    );
    let ids: Vec<i64> = answers
        .iter()
        .flat_map(|(_, page)| page["items"].as_array().unwrap().clone())
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    let mut newest_first = queued;
    newest_first.reverse();
    assert_eq!(ids, newest_first, "every run once, newest first");
    app.stop().await;
}
