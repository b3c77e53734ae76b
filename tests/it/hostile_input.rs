//! Bodies an attacker would send: each is refused with a 422 naming the
//! offending field, nothing is stored, and the process keeps answering.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

/// Sets the value at `path` (dot-separated object keys) in `body`.
fn set(body: &mut Value, path: &str, value: Value) {
    let mut at = body;
    let mut keys = path.split('.').peekable();
    while let Some(key) = keys.next() {
        if keys.peek().is_none() {
            at[key] = value;
            return;
        }
        at = &mut at[key];
    }
}

async fn assert_refused(app: &TestApp, path: &str, body: Value, field: &str) {
    let (status, error) = app.post(path, body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {error}");
    assert_eq!(error["error"]["field"], field, "{error}");
}

#[tokio::test]
async fn a_selector_nested_thousands_deep_is_refused_and_the_process_lives_on() {
    let app = TestApp::spawn().await;
    // About 15 KB: the selector parser used to recurse once per level until
    // the stack overflowed, aborting api, scheduler and worker together.
    let deep = format!("{}a{}", ":is(".repeat(3000), ")".repeat(3000));
    for field in ["item_selector", "wait_for", "blocked_selector"] {
        let mut body = app.site_body("deep", "/search");
        set(&mut body, field, json!(deep));
        assert_refused(&app, "/api/sites", body, field).await;
    }
    let mut body = app.site_body("deep", "/search");
    set(&mut body, "fields.title.selector", json!(deep));
    assert_refused(&app, "/api/sites", body, "fields.title.selector").await;
    // A little nesting is what real selectors use.
    let mut fine = app.site_body("nested", "/search");
    set(
        &mut fine,
        "item_selector",
        json!("li:is(.a, :not(.b)):has(> a[href])"),
    );
    app.create_site(fine).await;
    let (status, _) = app.get("/health").await;
    assert_eq!(status, StatusCode::OK);
    app.stop().await;
}

#[tokio::test]
async fn nesting_hidden_behind_a_comment_or_past_the_bound_is_a_422_naming_the_field() {
    let app = TestApp::spawn().await;
    let nested = |depth: usize| format!("{}a{}", ":is(".repeat(depth), ")".repeat(depth));
    // A quote inside a comment once hid everything after it from the count.
    let hidden = format!("/*'*/{}", nested(198));
    for (field, selector) in [
        ("item_selector", hidden.clone()),
        ("blocked_selector", nested(5)),
        ("fields.title.selector", format!("/*\"*/{}", nested(11))),
    ] {
        let mut body = app.site_body("hidden", "/search");
        body["render"] = json!("http");
        set(&mut body, field, json!(selector));
        let (status, error) = app.post("/api/sites", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {error}");
        assert_eq!(error["error"]["field"], field, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("levels deep"), "{message}");
        // The preview checks the same rules before any worker sees it.
        let (status, error) = app
            .post(
                "/api/sites/preview",
                json!({"site": body, "keyword": "lamp"}),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
        assert!(
            error["error"]["field"].as_str().unwrap().ends_with(field),
            "{error}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn control_characters_in_any_text_field_are_a_422_naming_it() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    for bad in ["a\u{0}b", "tab\there", "esc\u{1b}", "del\u{7f}"] {
        for (path, field) in [
            ("name", "name"),
            ("search_url", "search_url"),
            ("item_selector", "item_selector"),
            ("fields.title.selector", "fields.title.selector"),
            ("fields.title.attr", "fields.title.attr"),
            ("wait_for", "wait_for"),
            ("blocked_selector", "blocked_selector"),
            ("user_agent", "user_agent"),
            ("headers.X-Extra", "headers.X-Extra"),
            ("proxy", "proxy"),
            ("render", "render"),
        ] {
            let mut body = app.site_body("shop-2", "/search");
            let value = match path {
                "search_url" => format!("{}/s?q={{keyword}}&x={bad}", app.site.base_url()),
                "proxy" => format!("http://u:{bad}@proxy.example:3128"),
                _ => format!("x{bad}"),
            };
            set(&mut body, path, json!(value));
            assert_refused(&app, "/api/sites", body, field).await;
        }
        // A field or header name with a control character, which would be
        // part of the field path: the path stops at the map.
        let mut body = app.site_body("shop-2", "/search");
        set(
            &mut body,
            &format!("fields.x{bad}"),
            json!({"selector": "a"}),
        );
        assert_refused(&app, "/api/sites", body, "fields").await;
        let mut body = app.site_body("shop-2", "/search");
        body["headers"] = json!({format!("X{bad}"): "v"});
        assert_refused(&app, "/api/sites", body, "headers").await;
        let json_site = |items: &str, title: &str| {
            json!({"name": "api", "render": "json",
                   "search_url": format!("{}/api/search?q={{keyword}}", app.site.base_url()),
                   "json": {"items": items}, "fields": {"title": {"pointer": title}}})
        };
        let pointer = format!("/items{bad}");
        assert_refused(&app, "/api/sites", json_site(&pointer, "/t"), "json.items").await;
        assert_refused(
            &app,
            "/api/sites",
            json_site("/items", &pointer),
            "fields.title.pointer",
        )
        .await;
        for (key, field) in [("keyword", "keyword"), ("schedule", "schedule")] {
            let mut keyword =
                json!({"keyword": "laptop", "site_ids": [site], "schedule": "0 0 * * * *"});
            let value = if key == "schedule" {
                format!("0 0 * * * *{bad}")
            } else {
                format!("lap{bad}top")
            };
            keyword[key] = json!(value);
            assert_refused(&app, "/api/keywords", keyword, field).await;
        }
    }
    // Nothing half-written: only the one good site, and no keyword.
    let (_, sites) = app.get("/api/sites").await;
    assert_eq!(sites["items"].as_array().unwrap().len(), 1, "{sites}");
    let (_, keywords) = app.get("/api/keywords").await;
    assert_eq!(keywords["items"], json!([]));
    app.stop().await;
}

#[tokio::test]
async fn oversized_texts_and_field_maps_are_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    for (path, value, field) in [
        ("name", json!("n".repeat(201)), "name"),
        (
            "item_selector",
            json!(format!("li{}", ".x".repeat(600))),
            "item_selector",
        ),
        (
            "search_url",
            json!(format!(
                "{}/s?q={{keyword}}&p={}",
                app.site.base_url(),
                "a".repeat(3000)
            )),
            "search_url",
        ),
        ("user_agent", json!("u".repeat(513)), "user_agent"),
        (
            "proxy",
            json!(format!("http://{}.example:1", "p".repeat(3000))),
            "proxy",
        ),
    ] {
        let mut body = app.site_body("big", "/search");
        set(&mut body, path, value);
        assert_refused(&app, "/api/sites", body, field).await;
    }
    let mut many = app.site_body("many", "/search");
    many["fields"] = (0..101)
        .map(|i| (format!("f{i}"), json!({"selector": "a"})))
        .collect::<serde_json::Map<_, _>>()
        .into();
    assert_refused(&app, "/api/sites", many, "fields").await;
    app.stop().await;
}

#[tokio::test]
async fn a_schedule_firing_more_often_than_the_minimum_interval_is_refused() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword =
        |schedule: &str| json!({"keyword": "laptop", "site_ids": [site], "schedule": schedule});
    for fast in ["* * * * * *", "*/10 * * * * *", "0,30 * * * * *"] {
        assert_refused(&app, "/api/keywords", keyword(fast), "schedule").await;
    }
    let (status, never) = app.post("/api/keywords", keyword("0 0 0 30 2 *")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{never}");
    assert_eq!(never["error"]["field"], "schedule");
    let message = never["error"]["message"].as_str().unwrap();
    assert!(message.contains("never fires"), "{message}");
    // Once a minute is the default minimum; an update is checked alike.
    let (status, created) = app.post("/api/keywords", keyword("0 * * * * *")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_i64().unwrap();
    let (status, error) = app
        .put(&format!("/api/keywords/{id}"), keyword("*/5 * * * * *"))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(error["error"]["field"], "schedule");
    app.stop().await;
}
