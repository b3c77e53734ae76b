//! What the console tells an operator as they go: a sign-in box that Esc
//! cannot dismiss into a blank page, no "Sign out" before signing in, a
//! paused keyword that says so (and asks before "Crawl now"), messages that
//! stack instead of covering each other, failure kinds in words, and after a
//! real crawl: a live row's attempt as "1 / 3", prices kept on one line and
//! items-per-run figures beside the sparkline.

use std::time::Duration;

use fantoccini::key::Key;
use serde_json::json;

use crate::support::{ConsoleBrowser, ON_DEMAND, Roles, TestApp};

const WRITE_TOKEN: &str = "console-feedback-token";

/// A crawl of the fixture shop ends within this on a loaded 2-core machine.
const CRAWL_ENDS_WITHIN: Duration = Duration::from_secs(90);

async fn fleet(roles: Roles) -> TestApp {
    TestApp::spawn_with_console(roles, |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
    })
    .await
}

#[tokio::test]
async fn esc_on_the_sign_in_box_leaves_it_usable_and_sign_out_waits_for_a_token() {
    let app = fleet(Roles::default()).await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser
        .client
        .goto(&format!("{}/", app.base))
        .await
        .unwrap();
    let field = browser.find("#token").await;
    assert!(!browser.is_shown("#sign-out").await, "no sign-out yet");
    assert!(!browser.is_shown("#live-status").await, "no feed yet");

    for _ in 0..2 {
        field
            .send_keys(&char::from(Key::Escape).to_string())
            .await
            .expect("pressing Esc");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            browser
                .script("return document.getElementById('sign-in').open")
                .await,
            json!(true),
            "the sign-in box stays"
        );
        assert!(browser.is_shown("#token").await, "its field is there");
    }
    browser.type_into("#token", WRITE_TOKEN).await;
    browser.click("#sign-in-form button[type=submit]").await;
    browser.wait_for("body[data-access=write]").await;
    assert!(browser.is_shown("#sign-out").await, "signed in: sign-out");
    browser.wait_for_text("#live-status", "live").await;

    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn a_paused_keyword_says_so_crawl_now_asks_first_and_messages_stack() {
    let app = fleet(Roles::default()).await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let paused = app.create_keyword("lamp", &[site], "0 0 8 * * *").await;

    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.go("#/keywords").await;
    let row = format!("#keywords tr[data-keyword='{paused}']");
    let next = browser
        .wait_for_text(&format!("{row} td.next-run"), ":")
        .await;
    assert!(!next.contains("paused"), "{next}");
    assert!(!browser.is_shown(&format!("{row} .badge.paused")).await);

    // Paused from the list: the row says so at once, no next run.
    browser
        .click(&format!("{row} input[type=checkbox]:not([data-pick])"))
        .await;
    browser
        .wait_for_text(&format!("{row} .badge.paused"), "paused")
        .await;
    let next = browser
        .wait_for_text(&format!("{row} td.next-run"), "paused")
        .await;
    assert_eq!(next, "paused: not on its schedule", "no next run shown");
    let (_, stored) = app.get(&format!("/api/keywords/{paused}")).await;
    assert_eq!(stored["enabled"], false);

    // Asked first: declined, nothing is queued, and it says why.
    browser.click(&format!("{row} button")).await;
    let question = browser.client.get_alert_text().await.expect("a question");
    assert!(question.contains("paused"), "{question}");
    browser.client.dismiss_alert().await.unwrap();
    browser
        .wait_for_text(".toast:last-of-type", "paused: nothing queued")
        .await;
    let (_, runs) = app.get(&format!("/api/runs?keyword_id={paused}")).await;
    assert_eq!(runs["items"], json!([]), "nothing queued");

    // Confirmed: queued once, the schedule still paused; then more
    // messages: each below the one before, never more than four.
    for _ in 0..5 {
        browser.click(&format!("{row} button")).await;
        browser.answer_the_question().await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    browser
        .wait_for_text(".toast:last-of-type", "schedule stays paused")
        .await;
    let (_, runs) = app.get(&format!("/api/runs?keyword_id={paused}")).await;
    assert_eq!(runs["items"].as_array().unwrap().len(), 1, "{runs}");
    let boxes = browser.script("return [...document.querySelectorAll('.toast')].map((t) => { const r = t.getBoundingClientRect(); return [r.top, r.bottom]; })",
    )
    .await;
    let boxes: Vec<(f64, f64)> = serde_json::from_value(boxes).unwrap();
    assert!(
        (2..=4).contains(&boxes.len()),
        "several, bounded: {boxes:?}"
    );
    for pair in boxes.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "one above the other: {boxes:?}");
    }

    // Failure kinds in words where they are offered.
    browser.go("#/runs").await;
    let kind = browser
        .wait_for_text(
            "#run-filters select[name=error_kind] option[value=page_too_large]",
            "page",
        )
        .await;
    assert_eq!(kind, "page too large");

    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn after_a_crawl_rows_prices_and_items_per_run_read_whole() {
    let app = fleet(Roles::fleet()).await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.wait_for("body[data-live=live]").await;

    // A run added by the live feed shows its attempt as loaded rows do.
    browser.go("#/runs").await;
    browser.wait_for("#run-filters select[name=state]").await;
    let run = app.crawl(keyword).await[0];
    let (_, stored) = app.get(&format!("/api/runs/{run}")).await;
    let budget = stored["max_attempts"].as_i64().unwrap();
    let live_attempt = browser
        .wait_for_text(&format!("#runs tr[data-run='{run}'] td.attempt"), "/")
        .await;
    assert!(
        live_attempt.ends_with(&format!("/ {budget}")),
        "{live_attempt}"
    );
    app.wait_until_completed(run, CRAWL_ENDS_WITHIN).await;

    // Prices never break across lines.
    browser.go(&format!("#/results?run_id={run}")).await;
    browser.wait_for("#results .value.number").await;
    let wrapping = browser.script("return [...document.querySelectorAll('#results .value.number')].map((v) => getComputedStyle(v).whiteSpace)",
    )
    .await;
    assert!(
        wrapping.as_array().unwrap().iter().all(|w| w == "nowrap"),
        "{wrapping}"
    );

    // Items per run: the line and its figures, on the list and the site.
    let (_, done) = app.get(&format!("/api/runs/{run}")).await;
    let items = done["items_found"].as_i64().unwrap();
    browser.go("#/sites").await;
    let figures = browser
        .wait_for_text(
            &format!("#sites tr[data-site='{site}'] .spark-figures"),
            "last",
        )
        .await;
    assert!(figures.ends_with(&format!("last {items}")), "{figures}");
    browser.go(&format!("#/sites/{site}")).await;
    let health = browser.wait_for_text("#site-health", "items per run").await;
    assert!(health.contains(&format!("max {items}")), "{health}");
    assert!(!health.contains("[object"), "{health}");

    browser.close().await;
    app.stop().await;
}
