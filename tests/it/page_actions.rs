//! Page actions: a browser accepts a cookie banner before the listing
//! shows, types the keyword into a search form, picks a sort order and
//! submits it; a step whose element never appears fails the attempt as
//! `action_failed`, naming the step, with the page kept as evidence; the
//! preview runs the actions too. Bad steps, and actions on an http site, are
//! a 422 naming the field.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{ActionShop, Roles, TestApp};

// A page in Chrome and a few steps of a few seconds each, on a loaded machine.
const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_browser_dismisses_the_banner_and_types_the_search_before_reading_the_page() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let shop = ActionShop::start().await;
    let accept = json!([
        {"action": "dismiss", "selector": "#newsletter .close"},
        {"action": "dismiss", "selector": "#cookies .accept"},
        {"action": "wait_for", "selector": "li.product"},
    ]);
    let site = app
        .create_site(shop.site_body("banner", "/banner", accept))
        .await;
    let run = app.crawl_to_completion("tea", site, LIMIT).await;
    assert_eq!(
        app.titles_of_run(&run).await,
        ["Product 0", "Product 1", "Product 2"]
    );
    assert_eq!(shop.hits("/listing"), 1, "the banner was accepted once");

    let search = json!([
        {"action": "type", "selector": "input[name=q]", "text": "green {keyword}"},
        {"action": "select", "selector": "select[name=sort]", "value": "Newest first"},
        {"action": "press", "key": "Enter"},
        {"action": "wait_for", "selector": "li.product", "timeout_ms": 10000},
    ]);
    let site = app
        .create_site(shop.site_body("search", "/find", search))
        .await;
    let run = app.crawl_to_completion("tea", site, LIMIT).await;
    assert_eq!(
        app.titles_of_run(&run).await,
        [
            "green tea 0 by new",
            "green tea 1 by new",
            "green tea 2 by new"
        ]
    );
    assert_eq!(shop.hits("/results?q=green+tea&sort=new"), 1);
    let (status, stored) = app.get(&format!("/api/sites/{site}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stored["actions"][0]["text"], "green {keyword}", "{stored}");
    assert_eq!(stored["actions"][3]["timeout_ms"], 10000, "{stored}");
    app.stop().await;
}

#[tokio::test]
async fn a_step_that_fails_fails_the_attempt_naming_it_and_keeps_the_page() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let shop = ActionShop::start().await;
    let steps = json!([
        {"action": "dismiss", "selector": "#cookies .accept"},
        {"action": "wait_for", "selector": "#never", "timeout_ms": 500},
        {"action": "click", "selector": "li.product a"},
    ]);
    let mut body = shop.site_body("failing", "/banner", steps);
    body["max_attempts"] = json!(1);
    let site = app.create_site(body).await;
    let run = app.crawl_to_end("tea", site, LIMIT).await;
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(run["error_kind"], "action_failed", "{run}");
    let error = run["error"].as_str().unwrap_or_default();
    assert!(error.contains("actions[1] (wait_for #never)"), "{error}");
    let id = run["id"].as_i64().unwrap();
    let attempt = &run["attempts"][0];
    assert_eq!(
        attempt["html_url"],
        format!("/api/runs/{id}/attempts/1/html")
    );
    assert!(attempt["screenshot_url"].is_string(), "{attempt}");
    app.stop().await;
}

#[tokio::test]
async fn the_preview_runs_the_actions_before_reading_the_page() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let shop = ActionShop::start().await;
    let accept = json!([
        {"action": "dismiss", "selector": "#cookies .accept"},
        {"action": "wait_for", "selector": "li.product"},
    ]);
    let body = shop.site_body("preview", "/banner", accept);
    let (status, preview) = app
        .post(
            "/api/sites/preview",
            json!({"site": body, "keyword": "tea"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(
        preview["items"].as_array().map(Vec::len),
        Some(3),
        "{preview}"
    );
    app.stop().await;
}

#[tokio::test]
async fn bad_steps_and_actions_on_an_http_site_are_a_422_naming_the_field() {
    let app = TestApp::spawn().await;
    let shop = ActionShop::start().await;
    let wait = json!({"action": "wait", "ms": 10});
    let cases = [
        (
            json!([wait, wait, {"action": "click", "selector": "a["}]),
            "actions[2].selector",
        ),
        (json!([{"action": "click"}]), "actions[0].selector"),
        (
            json!([{"action": "hover", "selector": "a"}]),
            "actions[0].action",
        ),
        (
            json!([{"action": "type", "selector": "input"}]),
            "actions[0].text",
        ),
        (json!([{"action": "press", "key": "F13"}]), "actions[0].key"),
        (json!([{"action": "wait", "ms": 600000}]), "actions[0].ms"),
        (
            json!([{"action": "dismiss", "selector": "a", "timeout_ms": -5}]),
            "actions[0].timeout_ms",
        ),
        (
            json!([{"action": "wait", "ms": 5, "selector": "a"}]),
            "actions[0].selector",
        ),
        (
            json!([{"action": "click", "selector": "a", "button": "right"}]),
            "actions[0]",
        ),
        (Value::Array(vec![wait.clone(); 21]), "actions"),
    ];
    for (actions, field) in cases {
        let body = shop.site_body("bad", "/find", actions.clone());
        let (status, answer) = app.post("/api/sites", body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{actions}: {answer}"
        );
        let named = answer["error"]["field"].as_str().unwrap_or_default();
        assert!(named.starts_with(field), "{actions}: {answer}");
    }
    let mut http = shop.site_body("http", "/find", json!([wait]));
    http["render"] = json!("http");
    let (status, answer) = app.post("/api/sites", http).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["field"], "actions", "{answer}");
    app.stop().await;
}
