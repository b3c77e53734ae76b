//! Change tracking: the fixture's catalog (`/catalog`), whose prices change
//! and whose products come and go as a test says, crawled again and again.
//! Here what a crawl records and the API shows; `identity` how items are
//! recognised (URL, item_key, content) in every mode and with stop_on_seen;
//! `store` the store's rules driven by hand (a page seen twice, the diff);
//! `console` what the console shows of it.

mod console;
mod identity;
mod store;

use std::{collections::BTreeMap, time::Duration};

use crawlfleet_demo::site::catalog_product;
use futures::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::{connect_async, tungstenite::Message};

use crate::support::{ON_DEMAND, Roles, TestApp};

/// A plain-HTTP run is four pages of the fixture (under 1 ms each) after a
/// 100 ms dispatch tick; a browser run four page loads. Either is done in a
/// few seconds; a minute leaves a loaded machine plenty.
const LIMIT: Duration = Duration::from_secs(60);

/// A site reading the fixture's catalog in `render` mode, with `query` added
/// to its search URL and `extra` settings over these.
pub(crate) async fn catalog_site(
    app: &TestApp,
    name: &str,
    render: &str,
    query: &str,
    extra: Value,
) -> i64 {
    let mut body = json!({
        "name": name,
        "render": render,
        "search_url": format!("{}/catalog?q={{keyword}}&page={{page}}{query}", app.site.base_url()),
        "item_selector": "li.product",
        "fields": {
            "title": {"selector": ".title"},
            "link": {"selector": "a.title", "attr": "href"},
            "price": {"selector": ".price"},
            "sku": {"selector": ".sku"},
        },
        "max_pages": 10,
    });
    for (key, value) in extra.as_object().expect("settings") {
        body[key] = value.clone();
    }
    app.create_site(body).await
}

/// Crawls `keyword` now; its runs once they completed, one per site.
pub(crate) async fn crawl(app: &TestApp, keyword: i64) -> Vec<Value> {
    let mut runs = Vec::new();
    for run in app.crawl(keyword).await {
        runs.push(app.wait_until_completed(run, LIMIT).await);
    }
    runs
}

/// Items new, changed and removed by a run, as its view shows them.
fn counts(run: &Value) -> (i64, i64, i64) {
    let n = |name: &str| run[name].as_i64().unwrap();
    (n("items_new"), n("items_changed"), n("items_removed"))
}

/// Results by their product's title.
fn by_title(results: &[Value]) -> BTreeMap<String, Value> {
    results
        .iter()
        .map(|r| (r["fields"]["title"].as_str().unwrap().to_owned(), r.clone()))
        .collect()
}

pub(crate) fn title(keyword: &str, n: u32) -> String {
    catalog_product(keyword, n).0
}

/// The price the catalog starts product `n` with (the shop's rule).
pub(crate) fn first_price(n: u32) -> String {
    format!("${}.99", n * 7 % 100)
}

/// The completion's `run.updated` of the next run of `keyword`, read from
/// `/ws` (subscribed before the crawl is asked for).
async fn completion_event(app: &TestApp, keyword: i64) -> tokio::task::JoinHandle<Value> {
    let url = format!("{}/ws", app.base.replace("http://", "ws://"));
    let (mut ws, _) = connect_async(url).await.expect("websocket accepted");
    let subscribe = json!({"subscribe": {"keyword_id": keyword}}).to_string();
    ws.send(Message::Text(subscribe.into())).await.unwrap();
    loop {
        let Some(Ok(Message::Text(text))) = ws.next().await else {
            panic!("no answer to the subscription");
        };
        if serde_json::from_str::<Value>(&text).unwrap()["type"] == "subscribed" {
            break;
        }
    }
    tokio::spawn(async move {
        let read = async {
            while let Some(Ok(frame)) = ws.next().await {
                let Message::Text(text) = frame else { continue };
                let event: Value = serde_json::from_str(&text).unwrap();
                if event["type"] == "run.updated" && event["state"] == "completed" {
                    return event;
                }
            }
            panic!("the live feed ended before the run completed");
        };
        tokio::time::timeout(LIMIT, read)
            .await
            .expect("a completion event")
    })
}

#[tokio::test]
async fn a_second_crawl_records_the_new_the_changed_with_its_diff_the_unchanged_and_the_removed() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let site = catalog_site(&app, "catalog", "http", "", json!({})).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;

    let first = crawl(&app, keyword).await.remove(0);
    assert_eq!(counts(&first), (12, 0, 0), "{first}");
    assert_eq!(
        first["paging_ended"], "last_page",
        "three pages, then an empty one"
    );
    let first_results = app.results_of_run(first["id"].as_i64().unwrap()).await;
    assert!(
        first_results
            .iter()
            .all(|r| r["change"] == "new" && r["item_id"].is_i64())
    );

    // Product 3 costs more, product 7 is gone, product 13 is new.
    app.site.reprice("lamp", 3, "$99.00");
    app.site.withdraw("lamp", 7);
    app.site.stock("lamp", 1);
    let event = completion_event(&app, keyword).await;
    let second = crawl(&app, keyword).await.remove(0);
    let second_id = second["id"].as_i64().unwrap();
    assert_eq!(counts(&second), (1, 1, 1), "{second}");

    let results = by_title(&app.results_of_run(second_id).await);
    assert_eq!(results.len(), 12);
    for (name, result) in &results {
        let expected = match name {
            n if *n == title("lamp", 13) => "new",
            n if *n == title("lamp", 3) => "changed",
            _ => "unchanged",
        };
        assert_eq!(result["change"], expected, "{result}");
    }
    let changed = &results[&title("lamp", 3)];
    let price_diff = json!({"price": {"old": first_price(3), "new": "$99.00"}});
    assert_eq!(changed["diff"], price_diff);
    assert_eq!(results[&title("lamp", 1)]["diff"], Value::Null);

    // The filters: what changed in the run, what is new, what is gone.
    let of_run = format!("run_id={second_id}");
    let changed_only = app.results(&format!("{of_run}&change=changed")).await;
    assert_eq!(changed_only.len(), 1);
    assert_eq!(changed_only[0]["diff"], price_diff);
    let new_only = app.results(&format!("{of_run}&change=new")).await;
    assert_eq!(new_only.len(), 1);
    assert_eq!(new_only[0]["fields"]["title"], title("lamp", 13));
    let removed = app
        .results(&format!("keyword_id={keyword}&change=removed"))
        .await;
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0]["change"], "removed");
    assert_eq!(
        removed[0]["run_id"], second_id,
        "the run that found it gone"
    );
    assert_eq!(removed[0]["fields"]["title"], title("lamp", 7));
    assert_eq!(
        removed[0]["fields"]["price"],
        first_price(7),
        "as last seen"
    );
    assert_eq!(removed[0]["page"], 2);

    // The changed item's history: both prices, newest first, with when.
    let item = changed["item_id"].as_i64().unwrap();
    let (status, history) = app.get(&format!("/api/items/{item}/history")).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let values = history["items"].as_array().unwrap();
    assert_eq!(values.len(), 2, "{history}");
    assert_eq!(values[0]["fields"]["price"], "$99.00");
    assert_eq!(values[0]["run_id"], second_id);
    assert_eq!(values[0]["diff"], price_diff);
    assert_eq!(values[1]["fields"]["price"], first_price(3));
    assert_eq!(values[1]["diff"], Value::Null, "its first value");
    assert!(values[0]["seen_at"].as_str() > values[1]["seen_at"].as_str());
    let (_, one) = app.get(&format!("/api/items/{item}/history?limit=1")).await;
    let cursor = one["next_cursor"].as_str().unwrap();
    let (_, older) = app
        .get(&format!(
            "/api/items/{item}/history?limit=1&cursor={cursor}"
        ))
        .await;
    assert_eq!(older["items"][0]["fields"]["price"], first_price(3));
    let gone = removed[0]["item_id"].as_i64().unwrap();
    let (_, gone) = app.get(&format!("/api/items/{gone}")).await;
    assert!(gone["removed_at"].is_string(), "{gone}");
    assert_eq!(gone["identified_by"], "url");

    // The completion's live event carries the counts and the diffs.
    let event = event.await.unwrap();
    assert_eq!(event["id"], second_id);
    assert_eq!(
        (
            &event["items_new"],
            &event["items_changed"],
            &event["items_removed"]
        ),
        (&json!(1), &json!(1), &json!(1))
    );
    let samples = event["changes"]["samples"].as_array().unwrap();
    let changed_sample = samples.iter().find(|s| s["change"] == "changed").unwrap();
    assert_eq!(changed_sample["diff"], price_diff);
    assert_eq!(samples.len(), 3, "{event}");

    // Nothing changed since: nothing new, changed or removed again.
    let third = crawl(&app, keyword).await.remove(0);
    assert_eq!(counts(&third), (0, 0, 0), "{third}");
    app.stop().await;
}

#[tokio::test]
async fn a_crawl_stopped_by_max_pages_removes_nothing() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let site = catalog_site(&app, "two-pages", "http", "", json!({"max_pages": 2})).await;
    let keyword = app.create_keyword("desk", &[site], ON_DEMAND).await;
    let first = crawl(&app, keyword).await.remove(0);
    assert_eq!(first["paging_ended"], "max_pages");
    assert_eq!(counts(&first), (10, 0, 0));

    // Product 2 goes; product 11 moves up to page 2. The run cannot tell a
    // product it did not see is gone: it did not read every page.
    app.site.withdraw("desk", 2);
    let second = crawl(&app, keyword).await.remove(0);
    assert_eq!(second["paging_ended"], "max_pages");
    assert_eq!(counts(&second), (1, 0, 0), "{second}");
    let removed = app
        .results(&format!("keyword_id={keyword}&change=removed"))
        .await;
    assert_eq!(removed, Vec::<Value>::new());
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_change_filter_is_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    for path in [
        "/api/results?change=gone",
        "/api/results/export?format=csv&change=unchanged",
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {body}");
        assert_eq!(body["error"]["field"], "change", "{body}");
    }
    let (status, body) = app.get("/api/items/12345").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = app.get("/api/items/12345/history").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    app.stop().await;
}
