//! Acting on many rows from the console, in a real headless Chromium:
//! failed runs selected and retried after a confirmation that counts them
//! (then queued again), every run that matches cancelled, sites disabled
//! together; the pages that lead on (a run to its site and keyword, a site
//! to its failed runs); each page clean under axe-core.

use serde_json::json;

use crate::support::{ConsoleBrowser, Roles, TestApp, dispatch_and_claim};
use crawlfleet::{
    domain::failure::{Failure, FailureKind},
    store,
};

const WRITE_TOKEN: &str = "console-bulk-token";

/// Fails run `id` for good, as a worker would on a 404.
async fn fail(app: &TestApp, id: i64) {
    let fence = dispatch_and_claim(app.pool(), id, 1, "w")
        .await
        .expect("claimed")
        .fence;
    store::runs::fail_attempt(
        app.pool(),
        &fence,
        &Failure::new(FailureKind::HttpStatus, "HTTP 404 from the shop"),
    )
    .await
    .unwrap();
}

async fn state_of(app: &TestApp, id: i64) -> String {
    let (_, run) = app.get(&format!("/api/runs/{id}")).await;
    run["state"].as_str().unwrap().to_owned()
}

async fn no_violations(browser: &ConsoleBrowser, page: &str) {
    let found = browser.accessibility_violations().await;
    assert!(found.is_empty(), "{page}: {found:?}");
}

#[tokio::test]
async fn failed_runs_selected_in_the_console_are_retried_after_a_counted_confirmation() {
    // No worker: a retried run stays queued for the test to see.
    let app = TestApp::spawn_with_console(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
    })
    .await;
    let site = app
        .one_page_site("gone shop", "/static?q={keyword}", json!({}))
        .await;
    let runs = app.queue_crawls(site, "lamp", 3).await;
    fail(&app, runs[0]).await;
    fail(&app, runs[1]).await;

    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;

    // A run leads to its site and its keyword; the site to its failures.
    browser.go(&format!("#/runs/{}", runs[0])).await;
    let site_link = browser.find("#run-site").await;
    assert_eq!(
        site_link.attr("href").await.unwrap().as_deref(),
        Some(format!("#/sites/{site}").as_str())
    );
    let keyword = browser.find("#run-subject").await;
    assert!(
        keyword
            .attr("href")
            .await
            .unwrap()
            .unwrap()
            .starts_with("#/keywords/")
    );
    no_violations(&browser, "a failed run").await;
    browser.click("#run-site").await;
    browser
        .wait_for_text("#site-last-error", "HTTP 404 from the shop")
        .await;
    for run in &runs[..2] {
        let link = browser
            .find(&format!("#site-failures li[data-run='{run}'] a"))
            .await;
        assert_eq!(
            link.attr("href").await.unwrap().as_deref(),
            Some(format!("#/runs/{run}").as_str())
        );
    }
    no_violations(&browser, "a failing site").await;

    // The failed runs, selected one by one, retried once confirmed.
    browser.go("#/runs?state=failed").await;
    for run in &runs[..2] {
        browser
            .click(&format!("input[data-pick=runs-bulk][data-id='{run}']"))
            .await;
    }
    browser
        .wait_for_text("#runs-bulk-count", "2 runs selected")
        .await;
    no_violations(&browser, "runs with a selection").await;
    browser.click("#runs-bulk-retry").await;
    browser
        .wait_for_text("#bulk-confirm-question", "Retry 2 runs?")
        .await;
    no_violations(&browser, "the confirmation").await;
    browser.click("#bulk-confirm").await;
    browser.wait_for_text("#toasts", "Retried 2 runs").await;
    for run in &runs[..2] {
        assert_eq!(state_of(&app, *run).await, "queued");
    }
    browser.wait_for_text("#view", "No run matches.").await;

    // Every run that matches, counted by the API, cancelled; the
    // confirmation can also be declined.
    browser.go("#/runs").await;
    browser.wait_for("#runs tr[data-run]").await;
    browser.click("#runs-bulk-all-matching").await;
    browser
        .wait_for_text("#runs-bulk-count", "3 runs selected")
        .await;
    browser.click("#runs-bulk-cancel").await;
    browser
        .wait_for_text("#bulk-confirm-question", "Cancel 3 runs?")
        .await;
    browser.click("#bulk-dismiss").await;
    assert_eq!(state_of(&app, runs[2]).await, "queued", "declined");
    browser.click("#runs-bulk-cancel").await;
    browser
        .wait_for_text("#bulk-confirm-question", "Cancel 3 runs?")
        .await;
    browser.click("#bulk-confirm").await;
    browser.wait_for_text("#toasts", "Cancelled 3 runs").await;
    for run in &runs {
        assert_eq!(state_of(&app, *run).await, "cancelled");
    }

    // Sites and keywords: selected, disabled.
    browser.go("#/sites").await;
    browser
        .click(&format!("input[data-pick=sites-bulk][data-id='{site}']"))
        .await;
    browser.click("#sites-bulk-disable").await;
    browser
        .wait_for_text("#bulk-confirm-question", "Disable 1 site?")
        .await;
    browser.click("#bulk-confirm").await;
    browser.wait_for_text("#toasts", "Disabled 1 site").await;
    let (_, stored) = app.get(&format!("/api/sites/{site}")).await;
    assert_eq!(stored["enabled"], false);
    browser.wait_for_text("#sites", "disabled").await;
    no_violations(&browser, "sites").await;

    browser.go("#/keywords").await;
    browser.click("#keywords-bulk-all-matching").await;
    browser
        .wait_for_text("#keywords-bulk-count", "3 keywords selected")
        .await;
    browser.click("#keywords-bulk-disable").await;
    browser.click("#bulk-confirm").await;
    browser
        .wait_for_text("#toasts", "Disabled 3 keywords")
        .await;
    browser.wait_for_text("#keywords", "paused").await;
    no_violations(&browser, "keywords").await;

    // On a phone, the bar and the rows' boxes fit.
    browser.client.set_window_size(390, 844).await.unwrap();
    for page in ["#/runs", "#/sites", "#/keywords"] {
        browser.go(page).await;
        browser.wait_for("input[data-pick]").await;
        browser.assert_fits_a_phone(page).await;
    }
    browser.close().await;
    app.stop().await;
}
