//! The operator's console, driven in real headless Chromium against a fleet
//! in this process: sign in, a field error beside its field, "test this
//! site", a crawl followed live, what a failed attempt saw, the CSV download,
//! and a read token's console without write controls.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    ConsoleBrowser, ON_DEMAND, RoleProcess, Roles, StructuredShop, TestApp, free_port,
};

const WRITE_TOKEN: &str = "console-write-token";
const READ_TOKEN: &str = "console-read-token";

/// A crawl of one to three fixture pages ends within this on a loaded
/// 2-core machine (a few seconds when idle; Chrome starts cold).
const CRAWL_ENDS_WITHIN: Duration = Duration::from_secs(90);

async fn fleet_with_tokens(roles: Roles) -> TestApp {
    TestApp::spawn_with_console(roles, |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
        config.api.api_read_tokens = vec![READ_TOKEN.into()];
    })
    .await
}

/// What the page remembers across the test: gone if it reloads.
async fn mark_page(browser: &ConsoleBrowser) {
    browser
        .client
        .execute("window.crawlfleetTestMark = 'not reloaded'", vec![])
        .await
        .expect("marking the page");
}

async fn page_was_not_reloaded(browser: &ConsoleBrowser) -> bool {
    browser
        .client
        .execute(
            "return window.crawlfleetTestMark === 'not reloaded'",
            vec![],
        )
        .await
        .expect("reading the mark")
        == json!(true)
}

async fn attribute(browser: &ConsoleBrowser, css: &str, name: &str) -> Option<String> {
    browser
        .find(css)
        .await
        .attr(name)
        .await
        .expect("reading an attribute")
}

#[tokio::test]
async fn the_console_is_served_from_the_binary_under_a_strict_policy_and_tells_a_token_its_access()
{
    let app = TestApp::spawn_with(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
        config.api.api_read_tokens = vec![READ_TOKEN.into()];
    })
    .await;
    // The page and its files need no token: they hold nothing.
    let page = app.http.get(format!("{}/", app.base)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let header = |name: &str| page.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("content-type"), "text/html; charset=utf-8");
    let policy = header("content-security-policy");
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(header("x-content-type-options"), "nosniff");
    let etag = header("etag");
    assert!(page.text().await.unwrap().contains("/console/js/main.js"));

    let again = app
        .http
        .get(format!("{}/", app.base))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(
        again.status(),
        StatusCode::NOT_MODIFIED,
        "unchanged: not sent again"
    );

    let script = app
        .http
        .get(format!("{}/console/js/main.js", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
    assert!(
        script.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let missing = app
        .http
        .get(format!("{}/console/js/../../Cargo.toml", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    for (token, access) in [(WRITE_TOKEN, "write"), (READ_TOKEN, "read")] {
        let answer = app.get_as("/api/access", token).await;
        assert_eq!(answer, json!({"access": access, "client_ip": "127.0.0.1"}));
    }
    let (status, _) = app.get("/api/access").await;
    assert_eq!(status, StatusCode::OK);
    let refused = app
        .http
        .get(format!("{}/api/access", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    app.stop().await;
}

#[tokio::test]
async fn an_operator_sets_a_site_up_from_the_structured_data_its_preview_lists() {
    let shop = StructuredShop::start().await;
    let app = fleet_with_tokens(Roles {
        scheduler: false,
        worker: true,
    })
    .await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.go("#/sites/new").await;
    browser.type_into("#site-name", "lamp shop").await;
    let search_url = format!("{}/list?q={{keyword}}", shop.base_url());
    browser.type_into("#site-search_url", &search_url).await;
    // A first guess at a selector; the preview shows what the page publishes.
    browser.type_into("#site-item_selector", "li.product").await;
    browser.type_into("#field-rows .field-selector", "a").await;
    browser.type_into("#preview-keyword", "lamp").await;
    browser.click("#preview-run").await;
    browser.wait_for_text("#preview-summary", "items").await;
    browser
        .wait_for_text(".preview-structured .structured-types", "Product")
        .await;
    let rows = browser
        .client
        .execute(
            "return [...document.querySelectorAll('.structured-types tbody tr')]
               .map((row) => [...row.cells].map((cell) => cell.textContent))",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        rows.as_array().unwrap().contains(&json!(["Product", "3"])),
        "{rows}"
    );
    assert!(
        browser
            .is_shown(".preview-structured details.structured-item")
            .await,
        "the items are listed"
    );

    // Set up from it, without a selector, and saved.
    browser.type_into("#site-item_selector", "").await;
    browser.type_into("#site-structured_items", "Product").await;
    browser.type_into("#field-rows .field-selector", "").await;
    browser
        .type_into("#field-rows .field-structured", "name")
        .await;
    browser.click("#save-site").await;
    browser.wait_for_text("#site-title", "lamp shop").await;
    let (_, sites) = app.get("/api/sites").await;
    let site = &sites["items"][0];
    assert_eq!(site["structured_items"], "Product", "{site}");
    assert_eq!(site["fields"]["title"], json!({"structured": "name"}));

    // Saved again from the form it fills (with the title): nothing is lost,
    // and its pages download their images from now on.
    browser.click("#site-browser_resources-image").await;
    browser.click("#save-site").await;
    // The newest toast: the creation's may still be shown above it.
    browser
        .wait_for_text(".toast:last-of-type", "Site saved")
        .await;
    let (_, again) = app.get(&format!("/api/sites/{}", site["id"])).await;
    assert_eq!(again["structured_items"], "Product", "{again}");
    assert_eq!(again["fields"], site["fields"]);
    assert_eq!(site["browser_resources"], json!({"allow": []}));
    assert_eq!(again["browser_resources"], json!({"allow": ["image"]}));
    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn an_operator_fixes_a_site_with_its_preview_saves_it_and_watches_its_crawl() {
    let app = fleet_with_tokens(Roles::fleet()).await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    mark_page(&browser).await;

    // A broken selector: the API's error shows beside the field.
    browser.go("#/sites/new").await;
    browser.type_into("#site-name", "fixture shop").await;
    let search_url = format!("{}/search?q={{keyword}}&page={{page}}", app.site.base_url());
    browser.type_into("#site-search_url", &search_url).await;
    browser
        .type_into("#site-item_selector", "li.product[")
        .await;
    browser
        .type_into("#field-rows .field-selector", "a.title")
        .await;
    browser.click("#save-site").await;
    // The message is written in the same step that marks the field.
    browser
        .wait_for("#site-item_selector[aria-invalid=true]")
        .await;
    let error = browser
        .find("[data-error-for=item_selector]")
        .await
        .text()
        .await
        .unwrap();
    assert!(!error.is_empty(), "the field's error is shown beside it");
    let (_, sites) = app.get("/api/sites").await;
    assert_eq!(sites["items"], json!([]), "nothing was saved");

    // A next link's selector on a site paged by {page}: refused beside it.
    browser.type_into("#site-item_selector", "li.product").await;
    browser
        .type_into("#site-paging-selector", "nav a.next")
        .await;
    browser.click("#save-site").await;
    browser
        .wait_for("#site-paging-selector[aria-invalid=true]")
        .await;
    browser.type_into("#site-paging-selector", "").await;

    // A page action without its element: the error names the step.
    browser
        .type_into("#site-actions", r#"[{"action": "click"}]"#)
        .await;
    browser.click("#save-site").await;
    let error = browser
        .wait_for_text("[data-error-for=actions]", "actions[0].selector")
        .await;
    assert!(error.contains("selector"), "{error}");
    browser.type_into("#site-actions", "").await;

    // Fixed, then tried on a worker before saving: items and a screenshot.
    browser.type_into("#site-item_selector", "li.product").await;
    browser.type_into("#site-max_pages", "2").await;
    browser.type_into("#preview-keyword", "lamp").await;
    browser.click("#preview-run").await;
    let summary = browser.wait_for_text("#preview-summary", "items").await;
    assert!(!summary.starts_with("0 items"), "{summary}");
    assert!(
        browser.is_shown("#preview-items tbody tr").await,
        "the items are listed"
    );
    let screenshot = attribute(&browser, "#preview-screenshot", "src")
        .await
        .unwrap_or_default();
    assert!(
        screenshot.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "a PNG screenshot is shown"
    );
    // Shown at its own size on demand, the panel scrolling.
    browser.click("#preview-screenshot-size").await;
    let class = attribute(&browser, "#preview-screenshot", "class").await;
    assert_eq!(
        class.as_deref(),
        Some("full"),
        "the screenshot at full size"
    );
    let (_, sites) = app.get("/api/sites").await;
    assert_eq!(sites["items"], json!([]), "a preview saves nothing");
    // The form changed: the result no longer says what the form finds.
    browser.type_into("#site-max_pages", "2").await;
    browser.wait_for_text("#preview-stale", "test again").await;
    assert!(
        !browser.is_shown("#preview-summary").await,
        "a stale preview is taken down"
    );

    // Saved: the editor moves to the stored site.
    browser.click("#save-site").await;
    browser.wait_for_text("#site-title", "fixture shop").await;
    let (_, sites) = app.get("/api/sites").await;
    let site_id = sites["items"][0]["id"]
        .as_i64()
        .expect("the site was saved");
    assert_eq!(sites["items"][0]["item_selector"], "li.product");
    let keyword_id = app.create_keyword("lamp", &[site_id], ON_DEMAND).await;

    // The runs page is open when the crawl is asked for: the run appears,
    // and its state changes, from the live feed alone.
    browser.go("#/runs").await;
    browser.wait_for("#run-filters select[name=state]").await;
    browser
        .client
        .execute(
            r##"window.crawlfleetStatesSeen = [];
               new MutationObserver(() => {
                 for (const row of document.querySelectorAll("#runs tr[data-state]")) {
                   const seen = window.crawlfleetStatesSeen;
                   if (seen[seen.length - 1] !== row.dataset.state) seen.push(row.dataset.state);
                 }
               }).observe(document.getElementById("runs"), {childList: true, subtree: true, attributes: true});"##,
            vec![],
        )
        .await
        .expect("watching the runs table");
    let (status, queued) = app
        .post(&format!("/api/keywords/{keyword_id}/crawl"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let run_id = queued["queued"][0]["id"].as_i64().unwrap();
    app.wait_until_completed(run_id, CRAWL_ENDS_WITHIN).await;
    browser
        .wait_for(&format!(
            "#runs tr[data-run='{run_id}'][data-state=completed]"
        ))
        .await;
    let seen = browser
        .client
        .execute("return window.crawlfleetStatesSeen", vec![])
        .await
        .unwrap();
    assert_eq!(seen[0], "queued", "the run appeared as queued: {seen}");
    assert_eq!(
        seen.as_array().unwrap().last().unwrap(),
        "completed",
        "{seen}"
    );
    assert!(page_was_not_reloaded(&browser).await);

    // The results page's CSV is /api/results, row for row.
    browser.go("#/results").await;
    browser.wait_for("#results tr").await;
    browser.click("#download-csv").await;
    let csv_path = browser.downloads.join("results.csv");
    crate::support::eventually(Duration::from_secs(30), "the CSV is downloaded", || {
        let csv_path = csv_path.clone();
        async move { csv_path.exists().then_some(()) }
    })
    .await;
    let (_, listed) = app.get("/api/results?limit=500").await;
    let listed = listed["items"].as_array().unwrap().clone();
    assert!(!listed.is_empty());
    let mut csv = csv::Reader::from_path(&csv_path).expect("a CSV");
    let header: Vec<String> = csv.headers().unwrap().iter().map(str::to_owned).collect();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), listed.len(), "one row per result");
    for (row, result) in rows.iter().zip(&listed) {
        assert_eq!(row[column("id")], result["id"].to_string());
        let fields: Value = serde_json::from_str(&row[column("fields")]).unwrap();
        assert_eq!(fields, result["fields"]);
    }
    assert!(page_was_not_reloaded(&browser).await);

    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn a_failed_run_shows_the_screenshot_and_html_of_the_page_it_failed_on() {
    let app = fleet_with_tokens(Roles::fleet()).await;
    // The fixture's hanging page never finishes loading: stuck after 5 s.
    let site = app
        .one_page_site(
            "hanging",
            "/hang?q={keyword}",
            json!({"stuck_timeout_secs": 5, "max_attempts": 1}),
        )
        .await;
    let run = app.crawl_to_end("lamp", site, CRAWL_ENDS_WITHIN).await;
    assert_eq!(run["state"], "failed", "{run}");
    let run_id = run["id"].as_i64().unwrap();

    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.go(&format!("#/runs/{run_id}")).await;
    browser.wait_for_text("#run-state", "failed").await;
    let reason = browser.wait_for_text(".attempt-reason", "stuck").await;
    assert!(reason.contains("did not load"), "{reason}");
    let picture = attribute(&browser, ".evidence img", "src")
        .await
        .unwrap_or_default();
    assert!(
        picture.starts_with("blob:"),
        "the screenshot is shown: {picture}"
    );
    let loaded = browser
        .client
        .execute(
            "const img = document.querySelector('.evidence img'); return img.complete && img.naturalWidth > 0",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        loaded,
        json!(true),
        "the screenshot is a picture the browser can show"
    );
    browser.click(".evidence-html button").await;
    browser.wait_for_text(".html-source", "<html").await;
    // What the worker kept of the page, as the API serves it...
    let (status, kept) = app
        .get(&format!("/api/runs/{run_id}/attempts/1/html"))
        .await;
    assert_eq!(status, 200, "{kept}");
    let kept = kept.as_str().expect("HTML, not JSON").to_owned();
    assert!(
        kept.starts_with("<html") && kept.ends_with("</html>"),
        "the whole document was kept: {kept}"
    );
    // ...is what the console shows, to the character: as source, and in the
    // frame that renders it.
    let shown = browser
        .client
        .execute(
            "return [document.querySelector('.html-source').textContent, \
                     document.querySelector('.evidence-html iframe').srcdoc]",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        shown,
        json!([kept, kept]),
        "the console shows the kept HTML, whole"
    );
    assert!(
        browser.is_shown("#run-retry").await,
        "a failed run can be retried"
    );

    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn a_read_token_sees_everything_and_no_write_control() {
    let app = fleet_with_tokens(Roles::default()).await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    // No worker and no scheduler: the run stays queued (cancellable).
    let run = app.crawl(keyword).await[0];

    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(READ_TOKEN).await;
    assert_eq!(
        attribute(&browser, "body", "data-access").await.as_deref(),
        Some("read")
    );
    browser.wait_for_text("#access", "read-only").await;

    browser.go("#/sites").await;
    browser.wait_for_text("#sites", "shop").await;
    assert!(!browser.is_shown("#new-site").await, "no new-site button");

    browser.go(&format!("#/sites/{site}")).await;
    browser.wait_for_text("#site-title", "shop").await;
    for control in ["#save-site", "#delete-site", "#preview-run", "#add-field"] {
        assert!(!browser.is_shown(control).await, "{control} is hidden");
    }
    let disabled = browser
        .client
        .execute("return [...document.querySelectorAll('#site-form input')].every((i) => i.matches(':disabled'))", vec![])
        .await
        .unwrap();
    assert_eq!(disabled, json!(true), "the form cannot be edited");

    browser.go(&format!("#/runs/{run}")).await;
    browser.wait_for_text("#run-state", "queued").await;
    assert!(!browser.is_shown("#run-cancel").await, "no cancel button");

    browser.go("#/keywords").await;
    browser.wait_for_text("#keywords", "lamp").await;
    assert!(
        !browser.is_shown("#keywords button").await,
        "no crawl-now button"
    );
    assert!(
        !browser.is_shown("#new-keyword").await,
        "no new-keyword button"
    );

    browser.go(&format!("#/keywords/{keyword}")).await;
    browser.wait_for("#keyword-form input[name=keyword]").await;
    assert!(!browser.is_shown("#save-keyword").await);

    // Hidden, and refused all the same.
    let refused = app
        .http
        .post(format!("{}/api/runs/{run}/cancel", app.base))
        .bearer_auth(READ_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);

    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn the_overview_reconnects_after_an_api_restart_and_goes_on_updating_without_a_reload() {
    let app = TestApp::spawn_with_console(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
    })
    .await;
    // The console's api is a process of its own, restarted on its port.
    let port = free_port().expect("a free port");
    let env = [("API_PORT", port.to_string())];
    let api = RoleProcess::spawn("api", &app.config, &env);
    let base = format!("http://{}", api.listening_on("api listening").await);

    let browser = ConsoleBrowser::open(&base).await;
    browser.sign_in(WRITE_TOKEN).await;
    mark_page(&browser).await;
    browser.wait_for("body[data-live=live]").await;
    browser.wait_for_text("#count-queued .value", "0").await;

    api.kill().await;
    browser.wait_for("body[data-live=reconnecting]").await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    app.crawl(keyword).await;

    let api = RoleProcess::spawn("api", &app.config, &env);
    api.listening_on("api listening").await;
    // Reconnects within its back-off (at most 15 s), then the next
    // queue.stats (every 5 s) shows the run queued meanwhile.
    browser.wait_for("body[data-live=live]").await;
    browser.wait_for_text("#count-queued .value", "1").await;
    assert!(page_was_not_reloaded(&browser).await);

    browser.close().await;
    assert_eq!(api.terminate(Duration::from_secs(15)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn an_operator_sees_what_each_version_changed_and_brings_one_back() {
    let app = fleet_with_tokens(Roles::default()).await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let mut edited = app.site_body("shop", "/search");
    edited["item_selector"] = json!("div.card");
    let (status, body) = app.put(&format!("/api/sites/{site}"), edited).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.go(&format!("#/sites/{site}")).await;
    let listed = browser
        .wait_for_text("#site-versions-list", "Version 2")
        .await;
    assert!(
        listed.contains("item_selector: li.product → div.card"),
        "{listed}"
    );
    assert!(listed.contains("(current)"), "{listed}");

    browser.click("[data-restore='1']").await;
    browser
        .client
        .accept_alert()
        .await
        .expect("the restore asks first");
    let listed = browser
        .wait_for_text("#site-versions-list", "restored version 1")
        .await;
    assert!(listed.contains("Version 3"), "{listed}");
    // The form shows the version brought back.
    let shown = browser
        .find("#site-item_selector")
        .await
        .prop("value")
        .await
        .unwrap();
    assert_eq!(shown.as_deref(), Some("li.product"));
    let (_, stored) = app.get(&format!("/api/sites/{site}")).await;
    assert_eq!(stored["item_selector"], "li.product", "{stored}");

    browser.close().await;
    app.stop().await;
}
