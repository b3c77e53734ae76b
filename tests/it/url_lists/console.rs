//! The console's URL lists: a list made in the form (a bad schedule named
//! beside its field), URLs pasted and uploaded with the refused and repeated
//! lines reported by number, and the list's URLs and progress shown.

use serde_json::json;

use crate::support::{ConsoleBrowser, Roles, TestApp};

const WRITE_TOKEN: &str = "console-url-lists-token";

#[tokio::test]
async fn an_operator_makes_a_list_uploads_urls_and_sees_each_line_not_taken() {
    let app = TestApp::spawn_with_console(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
    })
    .await;
    let shop = app.site.base_url();
    app.one_page_site("shop", "/static?q={keyword}", json!({}))
        .await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;

    browser.go("#/lists/new").await;
    browser.type_into("#list-name", "products").await;
    browser.type_into("#list-schedule", "every morning").await;
    browser.click("#save-list").await;
    browser
        .wait_for_text("[data-error-for=schedule]", "6 fields")
        .await;
    browser.type_into("#list-schedule", "0 0 6 * * *").await;
    browser.type_into("#list-timezone", "Asia/Seoul").await;
    browser.click("#save-list").await;
    browser.wait_for("#list-upload").await;

    let pasted = format!("{shop}/p/1\nftp://files.test/x\n{shop}/p/2\n{shop}/p/1\n");
    browser.type_into("#list-upload", &pasted).await;
    browser.click("#replace-urls").await;
    let report = browser.wait_for_text("#upload-report", "2 added").await;
    assert!(
        report.contains("line 2") && report.contains("only http and https"),
        "{report}"
    );
    assert!(
        report.contains("1 duplicates") && report.contains("line 4"),
        "{report}"
    );
    let entries = browser
        .wait_for_text("#list-entries", &format!("{shop}/p/2"))
        .await;
    assert!(entries.contains(&format!("{shop}/p/1")), "{entries}");

    browser.go("#/lists").await;
    let row = browser.wait_for_text("#url-lists", "products").await;
    assert!(
        row.contains("0 of 2") && row.contains("Asia/Seoul"),
        "{row}"
    );
    browser.close().await;
    app.stop().await;
}
