//! Replay: a site's extraction (an edit not saved, or a stored version)
//! over its saved pages, on a worker, fetching nothing; per saved run and
//! page the items it would store and their diff against what was stored.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{DetailShop, ON_DEMAND, Roles, TestApp};

const LIMIT: Duration = Duration::from_secs(60);

/// The fixture shop's search over HTTP: 3 pages of 5 items and an empty 4th.
fn http_site(app: &TestApp) -> Value {
    let mut body = app.site_body("replayed", "/search");
    body["render"] = json!("http");
    body
}

/// A site crawled healthy twice: two saved runs of 4 pages.
async fn crawled_twice(app: &TestApp) -> (i64, Vec<i64>) {
    let site = app.create_site(http_site(app)).await;
    let keyword = app.create_keyword("tea", &[site], ON_DEMAND).await;
    (site, crawled_healthy(app, keyword, 2).await)
}

/// `keyword` crawled `times` times, one after the other, each run completed
/// healthy; their ids.
async fn crawled_healthy(app: &TestApp, keyword: i64, times: usize) -> Vec<i64> {
    let mut runs = Vec::new();
    for _ in 0..times {
        let run = app.crawl(keyword).await[0];
        let run = app.wait_until_completed(run, LIMIT).await;
        assert_eq!(run["health"], "healthy", "{run}");
        runs.push(run["id"].as_i64().unwrap());
    }
    runs
}

async fn replay(app: &TestApp, site: i64, body: Value) -> Value {
    let (status, replay) = app.post(&format!("/api/sites/{site}/replay"), body).await;
    assert_eq!(status, StatusCode::OK, "{replay}");
    assert_eq!(replay["error"], Value::Null, "{replay}");
    replay
}

/// Every page of the replay.
fn pages(replay: &Value) -> Vec<&Value> {
    replay["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|run| run["pages"].as_array().unwrap())
        .collect()
}

#[tokio::test]
async fn an_edited_spec_replayed_shows_the_fields_it_changes_and_the_same_spec_none() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let (site, runs) = crawled_twice(&app).await;
    let fetched_before = app.site.hits("/search");

    let same = replay(&app, site, json!({"spec": http_site(&app)})).await;
    let run_ids: Vec<&Value> = same["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["run_id"])
        .collect();
    assert_eq!(run_ids, [runs[1], runs[0]], "newest run first");
    assert_eq!(same["pages"], 8);
    assert_eq!(same["truncated"], false);
    assert_eq!(same["runs"][0]["site_version"], 1);
    for page in pages(&same) {
        assert_eq!(page["error"], Value::Null, "{page}");
        let expected = if page["page_no"] == 4 { 0 } else { 5 };
        assert_eq!(page["items"].as_array().unwrap().len(), expected, "{page}");
        assert_eq!(page["added"], json!([]), "{page}");
        assert_eq!(page["removed"], json!([]), "{page}");
        assert_eq!(page["changed"], json!([]), "{page}");
    }

    // The price read from another element: every item's price changes.
    let mut edited = http_site(&app);
    edited["fields"]["price"] = json!({"selector": "a.title"});
    let changed = replay(&app, site, json!({"spec": edited})).await;
    let first = &changed["runs"][0]["pages"][0];
    let items = first["items"].as_array().unwrap();
    assert_eq!(first["changed"].as_array().unwrap().len(), 5, "{first}");
    for (change, item) in first["changed"].as_array().unwrap().iter().zip(items) {
        assert_eq!(change["item"], item["item_url"]);
        let fields = change["fields"].as_object().unwrap();
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["price"], "{change}");
        assert!(
            fields["price"]["before"].as_str().unwrap().starts_with('$'),
            "{change}"
        );
        assert_eq!(
            fields["price"]["after"], item["fields"]["title"],
            "{change}"
        );
    }
    assert_eq!(first["added"], json!([]));
    assert_eq!(first["removed"], json!([]));

    // Items read by another selector: those stored are removed, the new added.
    let mut other = http_site(&app);
    other["item_selector"] = json!("h1");
    let elsewhere = replay(&app, site, json!({"spec": other})).await;
    let first = &elsewhere["runs"][0]["pages"][0];
    assert_eq!(first["removed"].as_array().unwrap().len(), 5, "{first}");
    assert_eq!(first["added"].as_array().unwrap().len(), 1, "{first}");

    assert_eq!(
        app.site.hits("/search"),
        fetched_before,
        "a replay fetches nothing"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_stored_version_is_replayed() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let (site, _) = crawled_twice(&app).await;
    let mut edited = http_site(&app);
    edited["fields"]["price"] = json!({"selector": "a.title"});
    let (status, body) = app.put(&format!("/api/sites/{site}"), edited).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Version 1 is what the runs crawled with: nothing differs.
    let first = replay(&app, site, json!({"version": 1})).await;
    for page in pages(&first) {
        assert_eq!(page["changed"], json!([]), "{page}");
    }
    // Version 2 reads the price elsewhere.
    let second = replay(&app, site, json!({"version": 2})).await;
    let page = &second["runs"][0]["pages"][0];
    assert_eq!(page["changed"].as_array().unwrap().len(), 5, "{page}");
    app.stop().await;
}

#[tokio::test]
async fn detail_pages_saved_with_their_run_are_read_again_and_the_others_keep_their_values() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let body = shop.site_body("replayed details", "http", json!("new_or_changed"));
    let site = app.create_site(body.clone()).await;
    let keyword = app.create_keyword("details", &[site], ON_DEMAND).await;
    // The first run reads every detail page; the second, nothing new, none.
    let runs = crawled_healthy(&app, keyword, 2).await;
    let read_before = shop.all_detail_requests();
    assert_eq!(read_before, 4, "each product's page read once");
    let details_read = |replay: &Value, run: i64| -> u64 {
        let run = replay["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == run)
            .unwrap_or_else(|| panic!("run {run} replayed: {replay}"));
        let pages = run["pages"].as_array().unwrap();
        pages
            .iter()
            .map(|p| p["details_read"].as_u64().unwrap())
            .sum()
    };

    let same = replay(&app, site, json!({"spec": body})).await;
    assert_eq!(details_read(&same, runs[0]), 4, "{same}");
    assert_eq!(details_read(&same, runs[1]), 0, "{same}");
    for page in pages(&same) {
        assert_eq!(page["error"], Value::Null, "{page}");
        assert_eq!(page["changed"], json!([]), "{page}");
        assert_eq!(page["added"], json!([]), "{page}");
        assert_eq!(page["removed"], json!([]), "{page}");
    }

    // The SKU read from another element of the detail page: the first run's
    // four items change in it alone; the second run's keep what was stored.
    let mut edited = body.clone();
    edited["detail"]["fields"]["sku"] = json!({"selector": ".weight"});
    let changed = replay(&app, site, json!({"spec": edited})).await;
    let changes_of = |run: i64| -> Vec<Value> {
        changed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["run_id"] == run)
            .flat_map(|r| r["pages"].as_array().unwrap())
            .flat_map(|p| p["changed"].as_array().unwrap().clone())
            .collect()
    };
    let first = changes_of(runs[0]);
    assert_eq!(first.len(), 4, "{changed}");
    for change in &first {
        let fields = change["fields"].as_object().unwrap();
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["sku"], "{change}");
        assert_ne!(fields["sku"]["before"], fields["sku"]["after"], "{change}");
        assert_ne!(fields["sku"]["after"], Value::Null, "{change}");
    }
    assert_eq!(changes_of(runs[1]), Vec::<Value>::new(), "{changed}");
    assert_eq!(
        shop.all_detail_requests(),
        read_before,
        "a replay fetches no detail page"
    );
    app.stop().await;
}

#[tokio::test]
async fn bad_replays_are_refused_naming_the_field() {
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;
    let site = app.create_site(http_site(&app)).await;
    let mut bad_selector = http_site(&app);
    bad_selector["item_selector"] = json!("li[");
    for (body, field) in [
        (json!({}), "version"),
        (json!({"version": 1, "spec": http_site(&app)}), "version"),
        (json!({"version": 99}), "version"),
        (json!({"spec": bad_selector}), "spec.item_selector"),
    ] {
        let (status, error) = app
            .post(&format!("/api/sites/{site}/replay"), body.clone())
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {error}");
        assert_eq!(error["error"]["field"], field, "{body}: {error}");
    }
    let (status, error) = app
        .post(
            &format!("/api/sites/{}/replay", site + 1),
            json!({"version": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    app.stop().await;
}

#[tokio::test]
async fn a_replay_needs_a_write_token() {
    let app = TestApp::spawn_without_browsers(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec!["replay-writer-token-0123456789".into()];
        config.api.api_read_tokens = vec!["replay-reader-token-0123456789".into()];
    })
    .await;
    let url = format!("{}/api/sites/1/replay", app.base);
    let anonymous = app
        .http
        .post(&url)
        .json(&json!({"version": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let reader = app
        .http
        .post(&url)
        .bearer_auth("replay-reader-token-0123456789")
        .json(&json!({"version": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(reader.status(), StatusCode::FORBIDDEN);
    app.stop().await;
}
