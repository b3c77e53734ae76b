//! The site editor's detail pages as a form, in real headless Chromium
//! against the detail shop: an operator fills it (the URL field, field rows,
//! how the pages are fetched, which are read), sees each detail page's
//! values in the preview, saves the site and finds it filled again after a
//! reload; a detail setting the API refuses is shown beside its input.

use serde_json::{Value, json};

use std::time::Duration;

use crate::support::{ConsoleBrowser, DetailShop, Roles, TestApp, eventually};

const WRITE_TOKEN: &str = "console-detail-token";
/// A save reaches the store within this on a loaded 2-core machine.
const SAVED_WITHIN: Duration = Duration::from_secs(30);

/// The detail settings the form below is filled with, as the API stores them.
fn expected_detail() -> Value {
    json!({
        "url_field": "url",
        "fields": {
            "sku": {"selector": ".sku", "regex": r"SKU:\s*(\S+)"},
            "weight_kg": {"selector": ".weight", "number": {"locale": "de-DE"}},
            "stock": {"selector": ".in-stock"},
        },
        "wait_for": ".in-stock",
        "render": "browser",
        "read": {"every_hours": 12},
    })
}

async fn js(browser: &ConsoleBrowser, script: &str) -> Value {
    browser
        .client
        .execute(script, vec![])
        .await
        .unwrap_or_else(|e| panic!("running {script}: {e}"))
}

async fn choose(browser: &ConsoleBrowser, css: &str, value: &str) {
    browser
        .find(css)
        .await
        .select_by_value(value)
        .await
        .unwrap_or_else(|e| panic!("choosing {value} in {css}: {e}"));
}

/// Fills the `n`th (from 1) field row under `rows` (`#field-rows`).
async fn fill_row(browser: &ConsoleBrowser, rows: &str, n: usize, parts: &[(&str, &str)]) {
    for (part, text) in parts {
        let css = format!("{rows} [data-field-row]:nth-of-type({n}) .field-{part}");
        browser.type_into(&css, text).await;
    }
}

/// What the detail part of the form shows, read from its inputs.
async fn detail_form(browser: &ConsoleBrowser) -> Value {
    js(
        browser,
        r##"const value = (css) => document.querySelector(css).value;
           const shown = (css) => !document.querySelector(css).closest("[hidden]");
           return {
             on: document.querySelector("#site-detail-on").checked,
             url_field: value("#site-detail-url_field"),
             rows: [...document.querySelectorAll("#detail-field-rows [data-field-row]")].map((row) =>
               ["name", "selector", "rules"].map((part) => row.querySelector(`.field-${part}`).value)),
             render: value("#site-detail-render"),
             wait_for: value("#site-detail-wait_for"),
             wait_for_shown: shown("#site-detail-wait_for"),
             read: value("#site-detail-read"),
             hours: value("#site-detail-read-every_hours"),
             hours_shown: shown("#site-detail-read-every_hours"),
           };"##,
    )
    .await
}

#[tokio::test]
async fn an_operator_sets_detail_pages_up_in_the_form_previews_saves_and_finds_them_again() {
    let shop = DetailShop::start().await;
    let app = TestApp::spawn_with_console(
        Roles {
            scheduler: false,
            worker: true,
        },
        |config| {
            config.api.auth_disabled = false;
            config.api.api_tokens = vec![WRITE_TOKEN.into()];
        },
    )
    .await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.go("#/sites/new").await;

    // The list: a title and the product page's URL.
    browser.type_into("#site-name", "detail shop").await;
    let search_url = format!("{}/list?q={{keyword}}&page={{page}}", shop.base);
    browser.type_into("#site-search_url", &search_url).await;
    browser.type_into("#site-item_selector", "li.product").await;
    fill_row(&browser, "#field-rows", 1, &[("selector", "a.title")]).await;
    browser.click("#add-field").await;
    let url_row = [("name", "url"), ("selector", "a.title"), ("attr", "href")];
    fill_row(&browser, "#field-rows", 2, &url_row).await;
    assert!(
        !browser.is_shown("#detail-settings").await,
        "off: no detail settings shown"
    );

    // Detail pages on: the URL field offers the list's fields and starts
    // at the one read as a URL.
    browser.click("#site-detail-on").await;
    let offered = js(
        &browser,
        "return [...document.querySelectorAll('#site-detail-url_field option')].map((o) => o.value)",
    )
    .await;
    assert_eq!(offered, json!(["", "title", "url"]));
    assert_eq!(detail_form(&browser).await["url_field"], "url");
    let rows = "#detail-field-rows";
    let sku = [
        ("name", "sku"),
        ("selector", ".sku"),
        ("rules", r#"{"regex": "SKU:\\s*(\\S+)"}"#),
    ];
    fill_row(&browser, rows, 1, &sku).await;
    browser.click("#add-detail-field").await;
    let weight = [
        ("name", "weight_kg"),
        ("selector", ".weight"),
        ("rules", r#"{"number": {"locale": "de-DE"}}"#),
    ];
    fill_row(&browser, rows, 2, &weight).await;
    browser.click("#add-detail-field").await;
    fill_row(
        &browser,
        rows,
        3,
        &[("name", "stock"), ("selector", ".in-stock")],
    )
    .await;

    // Fetched over http there is nothing to wait for; in the browser, the
    // stock line its script writes.
    choose(&browser, "#site-detail-render", "http").await;
    assert_eq!(detail_form(&browser).await["wait_for_shown"], false);
    choose(&browser, "#site-detail-render", "browser").await;
    assert_eq!(detail_form(&browser).await["wait_for_shown"], true);
    browser
        .type_into("#site-detail-wait_for", ".in-stock")
        .await;
    assert_eq!(detail_form(&browser).await["hours_shown"], false);
    choose(&browser, "#site-detail-read", "every_hours").await;
    assert_eq!(detail_form(&browser).await["hours_shown"], true);
    browser
        .type_into("#site-detail-read-every_hours", "12")
        .await;

    // The preview reads the first items' detail pages and shows each one's values.
    browser.type_into("#preview-keyword", "lamp").await;
    browser.click("#preview-run").await;
    browser.wait_for_text("#preview-summary", "items").await;
    browser
        .wait_for_text("#preview-details", "Detail pages")
        .await;
    let read = js(
        &browser,
        r##"const table = document.querySelector("#preview-details table");
           return {
             head: [...table.tHead.rows[0].cells].map((c) => c.textContent),
             rows: [...table.tBodies[0].rows].map((row) => [...row.cells].map((c) => c.textContent)),
           };"##,
    )
    .await;
    assert_eq!(
        read["head"],
        json!(["item", "sku", "stock", "weight_kg", "detail URL", "ms"]),
        "{read}"
    );
    let first = &read["rows"][0];
    assert_eq!(first[0], "Product 1", "{read}");
    // Typed, with what the page held beneath it.
    assert_eq!(first[1], "SKU-1SKU: SKU-1", "{read}");
    assert_eq!(first[2], "1 left", "{read}");
    assert_eq!(first[3], "1000.51.000,5 kg", "{read}");
    assert_eq!(first[4], format!("{}/p/1", shop.base), "{read}");
    // Page 1 lists two products: both pages read.
    assert_eq!(read["rows"].as_array().unwrap().len(), 2, "{read}");
    let (_, sites) = app.get("/api/sites").await;
    assert_eq!(sites["items"], json!([]), "a preview saves nothing");

    // Saved: the site holds the detail settings as the API takes them.
    browser.click("#save-site").await;
    browser.wait_for_text("#site-title", "detail shop").await;
    let (_, sites) = app.get("/api/sites").await;
    let id = sites["items"][0]["id"]
        .as_i64()
        .expect("the site was saved");
    let (_, site) = app.get(&format!("/api/sites/{id}")).await;
    assert_eq!(site["detail"], expected_detail(), "{site}");

    // Reloaded: the form shows them again.
    browser.client.refresh().await.expect("reloading");
    browser.wait_for_text("#site-title", "detail shop").await;
    browser.wait_for("#site-detail-on:checked").await;
    let filled = detail_form(&browser).await;
    assert_eq!(
        filled,
        json!({
            "on": true, "url_field": "url",
            "rows": [
                ["sku", ".sku", r#"{"regex":"SKU:\\s*(\\S+)"}"#],
                ["stock", ".in-stock", ""],
                ["weight_kg", ".weight", r#"{"number":{"locale":"de-DE"}}"#],
            ],
            "render": "browser", "wait_for": ".in-stock", "wait_for_shown": true,
            "read": "every_hours", "hours": "12", "hours_shown": true,
        })
    );

    // A detail field's selector that does not parse: refused beside it.
    fill_row(&browser, rows, 1, &[("selector", "p.sku[")]).await;
    browser.click("#save-site").await;
    browser
        .wait_for(&format!(
            "{rows} [data-field-row]:nth-of-type(1) .field-selector[aria-invalid=true]"
        ))
        .await;
    let error = browser
        .find(&format!(
            "{rows} [data-field-row]:nth-of-type(1) .field-error"
        ))
        .await
        .text()
        .await
        .unwrap();
    assert!(!error.is_empty(), "the row's error is shown beside it");
    let invalid = js(
        &browser,
        "return document.querySelectorAll('#site-form [aria-invalid]').length",
    )
    .await;
    assert_eq!(invalid, 1, "only that input is marked");
    fill_row(&browser, rows, 1, &[("selector", ".sku")]).await;

    // A URL field the list does not read as a URL: refused beside the select.
    choose(&browser, "#site-detail-url_field", "title").await;
    browser.click("#save-site").await;
    browser
        .wait_for("#site-detail-url_field[aria-invalid=true]")
        .await;
    let error = browser
        .wait_for_text("[data-error-for='detail.url_field']", "title")
        .await;
    assert!(error.contains("URL"), "{error}");
    let (_, site) = app.get(&format!("/api/sites/{id}")).await;
    assert_eq!(
        site["detail"],
        expected_detail(),
        "nothing refused was saved"
    );

    // Put back and saved from the filled form: the same settings.
    choose(&browser, "#site-detail-url_field", "url").await;
    browser.click("#save-site").await;
    browser
        .wait_for_text(".toast:last-of-type", "Site saved")
        .await;
    let (_, site) = app.get(&format!("/api/sites/{id}")).await;
    assert_eq!(site["detail"], expected_detail(), "{site}");

    // Off: the site no longer reads detail pages.
    browser.click("#site-detail-on").await;
    browser.click("#save-site").await;
    eventually(
        SAVED_WITHIN,
        "the site is saved without detail pages",
        || async {
            let (_, site) = app.get(&format!("/api/sites/{id}")).await;
            site.get("detail").is_none().then_some(())
        },
    )
    .await;

    browser.close().await;
    app.stop().await;
}
