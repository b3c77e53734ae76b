//! "Learn from examples" in the site editor, in real headless Chromium:
//! example values per field, ranked proposals with their items, and "Use
//! this" filling the form's selectors, which only saving keeps.

use serde_json::json;

use crate::{
    learn::{PRODUCTS, shop},
    support::{ConsoleBrowser, Roles, TestApp},
};

const WRITE_TOKEN: &str = "console-learn-token";

/// A fleet with a worker (no scheduler: learning needs none), a signed-in
/// console on a new site named `name` searching the shop; the shop's task.
async fn new_site_editor(name: &str) -> (TestApp, ConsoleBrowser, tokio::task::JoinHandle<()>) {
    let (base, fixture) = shop().await;
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
    browser.type_into("#site-name", name).await;
    let search_url = format!("{base}/shop?q={{keyword}}");
    browser.type_into("#site-search_url", &search_url).await;
    (app, browser, fixture)
}

#[tokio::test]
async fn an_operator_learns_a_sites_selectors_from_examples_and_saves_them() {
    let (app, browser, fixture) = new_site_editor("learned shop").await;

    let row =
        |n: usize, part: &str| format!("#learn-examples [data-learn-row]:nth-child({n}) {part}");
    browser
        .type_into(&row(1, ".learn-values"), "Brass Desk Lamp\nLinen Armchair")
        .await;
    browser.click("#learn-add-field").await;
    browser.type_into(&row(2, ".learn-name"), "price").await;
    browser
        .type_into(&row(2, ".learn-values"), "$49.00\n$310.00")
        .await;
    browser.type_into("#learn-keyword", "lamp").await;
    browser.click("#learn-run").await;
    browser.wait_for_text("#learn-summary", "proposal").await;
    let first = browser
        .wait_for_text("[data-proposal='0'] h3", "li.product")
        .await;
    assert!(first.contains("confidence"), "{first}");
    let cells = browser
        .client
        .execute(
            "return [...document.querySelectorAll(\"[data-proposal='0'] .learn-items tbody tr\")]
               .map((row) => [...row.cells].map((cell) => cell.textContent))",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        cells.as_array().unwrap().len(),
        PRODUCTS.len(),
        "every product listed: {cells}"
    );
    assert!(
        cells[0]
            .as_array()
            .unwrap()
            .contains(&json!("Brass Desk Lamp")),
        "{cells}"
    );

    // "Use this" fills the form; nothing is saved until the form is.
    browser.click("[data-proposal='0'] .learn-use").await;
    let filled = browser
        .client
        .execute(
            "return [document.querySelector('#site-item_selector').value,
                     [...document.querySelectorAll('#field-rows .field-name')].map((el) => el.value)]",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(filled[0], "li.product", "{filled}");
    assert_eq!(filled[1], json!(["price", "title"]), "{filled}");
    let (_, sites) = app.get("/api/sites").await;
    assert_eq!(sites["items"], json!([]), "not saved by itself");
    browser.click("#save-site").await;
    browser.wait_for_text("#site-title", "learned shop").await;
    let (_, sites) = app.get("/api/sites").await;
    let site = &sites["items"][0];
    assert_eq!(site["item_selector"], "li.product", "{site}");
    assert!(site["fields"]["price"]["selector"].is_string(), "{site}");
    browser.close().await;
    app.stop().await;
    fixture.abort();
}

#[tokio::test]
async fn an_operator_picks_examples_from_the_page_and_sees_their_proposal() {
    let (app, browser, fixture) = new_site_editor("picked shop").await;
    browser.type_into("#learn-keyword", "lamp").await;
    // No example yet: the page comes back with its repeated structure.
    browser.click("#learn-run").await;
    browser.wait_for("#learn-page-frame").await;
    let pick = |css: &str, nth: usize| {
        format!(
            "const doc = document.querySelector('#learn-page-frame').contentDocument;
             const found = doc && doc.querySelectorAll('{css}')[{nth}];
             if (!found) return false;
             found.click();
             return true;"
        )
    };
    let row =
        |n: usize, part: &str| format!("#learn-examples [data-learn-row]:nth-child({n}) {part}");
    // The frame's document is there once it has loaded.
    let mut picked = false;
    for _ in 0..100 {
        browser.click(&row(1, ".learn-values")).await;
        let answer = browser
            .client
            .execute(&pick("a.title", 0), vec![])
            .await
            .unwrap();
        if answer == json!(true) {
            picked = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(picked, "the page's first title could be clicked");
    browser
        .client
        .execute(&pick("a.title", 2), vec![])
        .await
        .unwrap();
    let values = browser
        .client
        .execute(
            &format!(
                "return document.querySelector('{}').value",
                row(1, ".learn-values")
            ),
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        values,
        json!("Brass Desk Lamp\nLinen Armchair"),
        "picked in order"
    );
    // A second field: its row chosen, its values picked.
    browser.click("#learn-add-field").await;
    browser.type_into(&row(2, ".learn-name"), "price").await;
    browser.click(&row(2, ".learn-values")).await;
    for nth in [0, 2] {
        let clicked = browser
            .client
            .execute(&pick(".price", nth), vec![])
            .await
            .unwrap();
        assert_eq!(clicked, json!(true));
    }
    let values = browser
        .client
        .execute(
            &format!(
                "return document.querySelector('{}').value",
                row(2, ".learn-values")
            ),
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        values,
        json!("$49.00\n$310.00"),
        "the price row got the prices"
    );

    browser.click("#learn-run").await;
    let first = browser
        .wait_for_text("[data-proposal='0'] h3", "li.product")
        .await;
    assert!(first.contains("confidence"), "{first}");
    let summary = browser
        .wait_for_text("[data-proposal='0']", "4 of 4 examples")
        .await;
    assert!(
        summary.contains(&format!("{} items", PRODUCTS.len())),
        "{summary}"
    );
    browser.close().await;
    app.stop().await;
    fixture.abort();
}
