//! What the console shows of change tracking: a run's new, changed and
//! removed counts, the results that changed with their old values, and the
//! site editor's item key, its error beside it.

use serde_json::json;

use super::{catalog_site, crawl, first_price};
use crate::support::{ConsoleBrowser, ON_DEMAND, Roles, TestApp};

const TOKEN: &str = "changes-console-token";

#[tokio::test]
async fn the_console_shows_what_a_run_found_changed_and_edits_a_sites_item_key() {
    let app = TestApp::spawn_with_console(Roles::fleet(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![TOKEN.into()];
    })
    .await;
    let site = catalog_site(&app, "catalog", "http", "", json!({})).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    crawl(&app, keyword).await;
    app.site.reprice("lamp", 2, "$7.00");
    app.site.withdraw("lamp", 9);
    let run = crawl(&app, keyword).await.remove(0)["id"].as_i64().unwrap();

    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(TOKEN).await;
    browser.go(&format!("#/runs/{run}")).await;
    browser.wait_for_text("#run-changes", "0 / 1 / 1").await;

    // The run's changes: the new price, the old one struck through.
    browser.click("a[href$='change=changed']").await;
    browser.wait_for("#results tr .change-changed").await;
    let row = browser.wait_for_text("#results tr", "$7.00").await;
    let old = browser.find("#results .changed-field del").await;
    assert_eq!(old.text().await.unwrap(), first_price(2), "{row}");

    // An item key that is not one of the fields: the error beside it.
    browser.go(&format!("#/sites/{site}")).await;
    browser.wait_for_text("#site-title", "catalog").await;
    browser.type_into("#site-item_key", "nope").await;
    browser.click("#save-site").await;
    browser.wait_for("#site-item_key[aria-invalid=true]").await;
    browser
        .wait_for_text("[data-error-for=item_key]", "not one of the site's fields")
        .await;
    browser.type_into("#site-item_key", "sku").await;
    browser.click("#save-site").await;
    crate::support::eventually(
        std::time::Duration::from_secs(10),
        "the key is saved",
        || async {
            let (_, saved) = app.get(&format!("/api/sites/{site}")).await;
            (saved["item_key"] == "sku").then_some(())
        },
    )
    .await;
    browser.close().await;
    app.stop().await;
}
