//! The console's URL lists: a list made in the form (a bad schedule named
//! beside its field), URLs pasted and uploaded with the refused and repeated
//! lines reported by number, the list's URLs and progress shown (a URL that
//! failed with its error), and a crawl queued from the list's page (a second
//! one while it is active answered with why not).

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

    // No worker here: the run queued from the list's page stays active.
    let list: i64 = sqlx::query_scalar("SELECT id FROM url_lists WHERE name = 'products'")
        .fetch_one(app.pool())
        .await
        .unwrap();
    browser.go(&format!("#/lists/{list}")).await;
    browser.click("#crawl-list").await;
    let title = browser.wait_for_text("h1", "list products").await;
    let run: i64 = sqlx::query_scalar("SELECT id FROM crawl_runs WHERE url_list_id = $1")
        .bind(list)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert!(title.contains(&format!("Run {run}")), "{title}");
    browser.go("#/lists").await;
    browser
        .wait_for_text("#url-lists", &format!("reading now: run {run}"))
        .await;
    // A URL the run could not read, as a worker records it.
    sqlx::query(
        "UPDATE url_list_entries SET failed_at = now(), last_error = 'HTTP 404'
         WHERE list_id = $1 AND url LIKE '%/p/2'",
    )
    .bind(list)
    .execute(app.pool())
    .await
    .unwrap();
    browser.go(&format!("#/lists/{list}")).await;
    let entries = browser.wait_for_text("#list-entries", "HTTP 404").await;
    assert!(entries.contains(&format!("{shop}/p/2")), "{entries}");
    browser.wait_for_text("#list-urls", "1 failed").await;
    browser.click("#crawl-list").await;
    browser
        .wait_for_text(".toast.bad", &format!("has an active run ({run})"))
        .await;
    browser.close().await;
    app.stop().await;
}
