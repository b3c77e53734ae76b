//! The console at a glance, for everyone and on a phone: the overview's
//! verdict (no worker, a failing site with its reason and run, a healthy
//! fleet), every page (a failed run's and a webhook endpoint's too) without a WCAG A/AA violation
//! under axe-core, in light and in the system's dark mode, and every page
//! at 390x844 without sideways scrolling, tables as cards.

use std::time::Duration;

use serde_json::json;

use crate::support::{ConsoleBrowser, ON_DEMAND, Roles, TestApp};

const WRITE_TOKEN: &str = "console-glance-token";

/// A one-page crawl ends within this on a loaded 2-core machine.
const CRAWL_ENDS_WITHIN: Duration = Duration::from_secs(90);

async fn fleet(roles: Roles) -> TestApp {
    TestApp::spawn_with_console(roles, |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
    })
    .await
}

#[tokio::test]
async fn the_verdict_says_no_worker_is_alive() {
    let app = fleet(Roles::default()).await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.wait_for("#verdict[data-verdict=bad]").await;
    let line = browser
        .wait_for_text("#verdict-line", "No worker alive")
        .await;
    assert!(line.contains("Needs attention"), "{line}");
    // The counts beside it, every one a number.
    for card in ["queued", "running", "url-call", "completed", "failed"] {
        browser
            .wait_for_text(&format!("#count-{card} .value"), "0")
            .await;
    }
    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn the_verdict_is_healthy_then_names_a_failing_site_its_reason_and_its_run() {
    let app = fleet(Roles::fleet()).await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.wait_for("#verdict[data-verdict=ok]").await;
    browser.wait_for_text("#verdict-line", "Healthy").await;

    let gone = app
        .one_page_site("gone shop", "/status/404?q={keyword}", json!({}))
        .await;
    let run = app.crawl_to_end("lamp", gone, CRAWL_ENDS_WITHIN).await;
    assert_eq!(run["state"], "failed", "{run}");
    let run_id = run["id"].as_i64().unwrap();

    // The overview reads site health again at most every 15 s.
    browser.go("#/runs").await;
    browser.go("#/").await;
    browser.wait_for("#verdict[data-verdict=bad]").await;
    let line = browser.wait_for_text("#verdict-line", "gone shop").await;
    assert!(
        line.contains("is failing") && line.contains("HTTP 404"),
        "{line}"
    );
    let link = browser
        .find("#verdict-problems li[data-problem=site-failing] a")
        .await;
    assert_eq!(
        link.attr("href").await.unwrap().as_deref(),
        Some(format!("#/runs/{run_id}").as_str())
    );
    // The failed count is coloured (the next queue.stats, within 5 s).
    browser.wait_for("#count-failed.tone-bad").await;
    let found = browser.accessibility_violations().await;
    assert!(found.is_empty(), "the overview in trouble: {found:?}");

    // The failed run with what it saw (a screenshot, the page in a frame).
    browser.go(&format!("#/runs/{run_id}")).await;
    browser.wait_for("#attempts .evidence-html iframe").await;
    browser.wait_for("#attempts .evidence-screenshot img").await;
    let found = browser.accessibility_violations().await;
    assert!(found.is_empty(), "a failed run: {found:?}");

    browser.close().await;
    app.stop().await;
}

/// A fleet with a site, a keyword and a queued run (no worker: it stays
/// queued), and every page of the console about them.
async fn fleet_with_every_page() -> (TestApp, i64, Vec<String>) {
    let app = fleet(Roles::default()).await;
    let site = app
        .create_site(app.site_body("a shop with a rather long name", "/search"))
        .await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let run = app.crawl(keyword).await[0];
    // No scheduler: nothing is sent to it.
    let (status, webhook) = app
        .post(
            "/api/webhooks",
            json!({"url": "http://127.0.0.1:9/hooks/a-rather-long-path-of-the-receiver", "events": ["run.failed"]}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{webhook}");
    let webhook = webhook["id"].as_i64().unwrap();
    let pages = vec![
        "#/".to_owned(),
        "#/runs".to_owned(),
        format!("#/runs/{run}"),
        "#/sites".to_owned(),
        format!("#/sites/{site}"),
        "#/sites/new".to_owned(),
        "#/keywords".to_owned(),
        format!("#/keywords/{keyword}"),
        "#/keywords/new".to_owned(),
        "#/lists".to_owned(),
        "#/lists/new".to_owned(),
        "#/results".to_owned(),
        "#/webhooks".to_owned(),
        format!("#/webhooks/{webhook}"),
        format!("#/webhooks/{webhook}/edit"),
        "#/webhooks/new".to_owned(),
    ];
    (app, run, pages)
}

/// Goes to `page` and gives its data time to arrive (a few hundred ms when idle).
async fn open_page(browser: &ConsoleBrowser, page: &str) {
    browser.go(page).await;
    browser.wait_for("#view h1").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

#[tokio::test]
async fn every_page_has_no_wcag_a_or_aa_violation() {
    let (app, _, pages) = fleet_with_every_page().await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.client.set_window_size(1440, 900).await.unwrap();
    browser
        .client
        .goto(&format!("{}/", app.base))
        .await
        .unwrap();
    browser.wait_for("#token").await;
    let mut found = Vec::new();
    for violation in browser.accessibility_violations().await {
        found.push(format!("sign-in: {violation}"));
    }
    browser.sign_in(WRITE_TOKEN).await;
    for page in &pages {
        open_page(&browser, page).await;
        for violation in browser.accessibility_violations().await {
            found.push(format!("{page}: {violation}"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn in_the_systems_dark_mode_every_page_is_dark_and_still_passes_axe() {
    let (app, _, pages) = fleet_with_every_page().await;
    let browser = ConsoleBrowser::open_dark(&app.base).await;
    browser.client.set_window_size(1440, 900).await.unwrap();
    browser.sign_in(WRITE_TOKEN).await;
    let dark = browser.script("return [matchMedia('(prefers-color-scheme: dark)').matches, getComputedStyle(document.documentElement).backgroundColor]",
    )
    .await;
    assert_eq!(
        dark,
        json!([true, "rgb(13, 17, 23)"]),
        "the console follows the system"
    );
    let mut found = Vec::new();
    for page in &pages {
        open_page(&browser, page).await;
        for violation in browser.accessibility_violations().await {
            found.push(format!("{page}: {violation}"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn every_page_fits_a_phone_and_its_tables_become_cards() {
    let (app, run, pages) = fleet_with_every_page().await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.sign_in(WRITE_TOKEN).await;

    for page in &pages {
        open_page(&browser, page).await;
        browser.assert_fits_a_phone(page).await;
    }

    browser.go("#/runs").await;
    browser
        .wait_for(&format!("#runs tr[data-run='{run}']"))
        .await;
    let card = browser
        .script(
            "const row = document.querySelector('#runs tr'); \
         return [getComputedStyle(row).display, row.querySelector('td:not(.pick)').dataset.label]",
        )
        .await;
    assert_eq!(
        card,
        json!(["block", "run"]),
        "a row is a card, its cells named"
    );

    browser.close().await;
    app.stop().await;
}
