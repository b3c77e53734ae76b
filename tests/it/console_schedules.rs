//! The console's keyword editor and list with a keyword's own clocks: the
//! zone and jitter set in the form, a bad zone named beside its field, the
//! next runs shown on the keyword's clocks, and a toggle that keeps them.

use std::time::Duration;

use serde_json::Value;

use crate::support::{ConsoleBrowser, Roles, TestApp, eventually};

const WRITE_TOKEN: &str = "console-schedules-token";

async fn keyword_named(app: &TestApp, name: &str) -> Value {
    let (_, list) = app.get("/api/keywords").await;
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["keyword"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn an_operator_schedules_a_keyword_on_seoul_clocks_and_sees_its_runs_there() {
    let app = TestApp::spawn_with_console(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
    })
    .await;
    app.create_site(app.site_body("shop", "/search")).await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;

    browser.go("#/keywords/new").await;
    browser.type_into("#keyword-keyword", "lamp").await;
    browser.click("#keyword-form input[name=site_ids]").await;
    browser.type_into("#keyword-schedule", "0 0 6 * * *").await;
    browser.type_into("#keyword-timezone", "Seoul").await;
    browser.click("#save-keyword").await;
    browser
        .wait_for_text("[data-error-for=timezone]", "IANA time zone")
        .await;
    assert!(keyword_named(&app, "lamp").await.is_null(), "nothing saved");

    browser.type_into("#keyword-timezone", "Asia/Seoul").await;
    browser.type_into("#keyword-jitter_secs", "600").await;
    browser.click("#save-keyword").await;
    // 06:00 in Seoul, plus the keyword's share of 10 minutes.
    let fires = browser.wait_for_text("#next-fire-times", "+09:00").await;
    assert!(fires.contains(" 06:0"), "{fires}");
    assert!(fires.contains(" 21:0") && fires.contains("UTC"), "{fires}");
    let saved = keyword_named(&app, "lamp").await;
    assert_eq!(
        (saved["timezone"].as_str(), saved["jitter_secs"].as_i64()),
        (Some("Asia/Seoul"), Some(600))
    );

    // The list shows the zone; disabling there keeps zone and jitter.
    browser.go("#/keywords").await;
    browser.wait_for_text("#keywords", "Asia/Seoul").await;
    browser
        .click("#keywords input[type=checkbox]:not([data-pick])")
        .await;
    let disabled = eventually(
        Duration::from_secs(10),
        "disabled from the list",
        || async {
            let keyword = keyword_named(&app, "lamp").await;
            (keyword["enabled"] == false).then_some(keyword)
        },
    )
    .await;
    assert_eq!(
        (
            disabled["timezone"].as_str(),
            disabled["jitter_secs"].as_i64()
        ),
        (Some("Asia/Seoul"), Some(600))
    );
    browser.close().await;
    app.stop().await;
}
