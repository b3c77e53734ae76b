//! What a crawl stores is bounded whatever a page holds: a field megabytes
//! long is cut, a page's items past the bound dropped, a run stops paging at
//! its bound, a page too large (as sent, or as its script grows it) fails as
//! `page_too_large`, a link that is not http(s) is dropped; each in http and
//! browser mode, and each visible in the run (degraded, with a reason) and
//! counted. In a browser, a page's own scripts cannot forge what is read.

use std::time::Duration;

use crawlfleet::{domain::bounds::Bound, ops::metrics::metrics};
use serde_json::{Value, json};

use crate::support::{Roles, TestApp};

// A 50,000-item page in a browser, in a debug build, on a loaded machine.
const LIMIT: Duration = Duration::from_secs(120);

const MODES: [&str; 2] = ["http", "browser"];

fn bites(bound: Bound) -> u64 {
    metrics()
        .bounds_applied
        .with_label_values(&[bound.as_str()])
        .get()
}

/// One site per render mode reading the fixture's `path_and_query`.
async fn sites_in_every_mode(app: &TestApp, name: &str, path_and_query: &str) -> Vec<i64> {
    let mut sites = Vec::new();
    for render in MODES {
        let extra = json!({"render": render});
        let site = app
            .one_page_site(&format!("{name}-{render}"), path_and_query, extra)
            .await;
        sites.push(site);
    }
    sites
}

fn reason(run: &Value) -> &str {
    run["health_reason"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_field_megabytes_long_is_cut_and_the_run_names_the_field() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let before = bites(Bound::FieldChars);
    let sites = sites_in_every_mode(
        &app,
        "huge-field",
        "/hostile/items?n=2&chars=2000000&q={keyword}",
    )
    .await;
    for (render, site) in MODES.iter().zip(sites) {
        let run = app.crawl_to_completion(render, site, LIMIT).await;
        assert_eq!(run["health"], "degraded", "{render}: {run}");
        assert_eq!(
            reason(&run),
            "2 field value(s) cut to 10000 characters (title: 2)",
            "{render}"
        );
        let results = app.results_of_run(run["id"].as_i64().unwrap()).await;
        assert_eq!(results.len(), 2, "{render}");
        let title = results[0]["fields"]["title"].as_str().unwrap();
        assert_eq!(title.chars().count(), 10_000, "{render}");
        assert!(title.starts_with("Item 1 xxx"), "{render}");
        assert_eq!(results[0]["fields"]["price"], "$1", "{render}");
    }
    assert!(bites(Bound::FieldChars) >= before + 4);
    app.stop().await;
}

#[tokio::test]
async fn fifty_thousand_items_on_a_page_keep_the_first_thousand_and_the_run_says_so() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let before = bites(Bound::PageItems);
    let sites = sites_in_every_mode(&app, "many", "/hostile/items?n=50000&q={keyword}").await;
    for (render, site) in MODES.iter().zip(sites) {
        let started = std::time::Instant::now();
        let run = app.crawl_to_completion(render, site, LIMIT).await;
        eprintln!("{render}: 50,000 items read in {:?}", started.elapsed());
        assert_eq!(run["items_found"], 1000, "{render}: {run}");
        assert_eq!(run["health"], "degraded", "{render}: {run}");
        assert_eq!(
            reason(&run),
            "1 page(s) with more than 1000 items: the items past it dropped",
            "{render}"
        );
        let (_, page) = app
            .get(&format!("/api/results?run_id={}&limit=1000", run["id"]))
            .await;
        let items = page["items"].as_array().unwrap();
        assert_eq!(items.len(), 1000);
        assert_eq!(items[999]["fields"]["title"], "Item 1000", "{render}");
    }
    assert!(bites(Bound::PageItems) >= before + 2);
    app.stop().await;
}

#[tokio::test]
async fn a_run_stops_paging_at_its_item_bound() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |config| {
        config.worker.bounds.run_max_items = 12;
    })
    .await;
    let mut body = app.site_body("paged", "/search");
    body["render"] = json!("http");
    let site = app.create_site(body).await;
    let run = app.crawl_to_completion("lamp", site, LIMIT).await;
    assert_eq!(run["items_found"], 12, "{run}");
    assert_eq!(run["pages_crawled"], 3, "5 + 5 + 2 of 5: {run}");
    assert_eq!(run["paging_ended"], "item_cap", "{run}");
    assert_eq!(run["items_removed"], 0, "no removals judged: {run}");
    assert_eq!(
        reason(&run),
        "the run reached 12 items: 3 item(s) past it dropped and paging stopped"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_page_over_the_size_bound_fails_as_page_too_large_in_every_mode() {
    let app = TestApp::spawn_with(Roles::fleet(), |config| {
        config.worker.bounds.page_max_bytes = 1024 * 1024;
    })
    .await;
    let before = bites(Bound::PageBytes);
    let mut sites =
        sites_in_every_mode(&app, "padded", "/hostile/padded?bytes=2000000&q={keyword}").await;
    // Small as sent: only a browser sees what its script makes of it.
    let grows = app
        .one_page_site(
            "grows",
            "/hostile/grows?bytes=2000000&q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    sites.push(grows);
    for (what, site) in ["http", "browser", "grown in a browser"].iter().zip(sites) {
        let run = app.crawl_to_end(what, site, LIMIT).await;
        assert_eq!(run["state"], "failed", "{what}: {run}");
        assert_eq!(run["error_kind"], "page_too_large", "{what}: {run}");
        assert_eq!(run["attempt"], 1, "not worth another attempt: {run}");
        let error = run["error"].as_str().unwrap();
        assert!(error.contains("1048576"), "{what}: {error}");
    }
    assert!(bites(Bound::PageBytes) >= before + 3);
    // Under the bound, the same pages are read.
    let fine = sites_in_every_mode(&app, "fits", "/hostile/padded?bytes=500000&q={keyword}").await;
    for (render, site) in MODES.iter().zip(fine) {
        let run = app.crawl_to_completion(render, site, LIMIT).await;
        assert_eq!(run["items_found"], 3, "{render}: {run}");
        assert_eq!(run["health"], "healthy", "{render}: {run}");
    }
    app.stop().await;
}

#[tokio::test]
async fn links_that_are_not_http_are_dropped_and_counted_by_field_in_every_mode() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let before = bites(Bound::UrlScheme);
    let good = format!("{}/product/4", app.site.base_url());
    let sites = sites_in_every_mode(&app, "bad-links", "/hostile/bad-links?q={keyword}").await;
    for (render, site) in MODES.iter().zip(sites) {
        let run = app.crawl_to_completion(render, site, LIMIT).await;
        assert_eq!(run["health"], "degraded", "{render}: {run}");
        assert_eq!(
            reason(&run),
            "3 URL(s) dropped, not http(s) or longer than 10000 characters (link: 3)",
            "{render}"
        );
        let results = app.results_of_run(run["id"].as_i64().unwrap()).await;
        let read: Vec<(Value, Value, Value)> = results
            .iter()
            .map(|r| {
                (
                    r["fields"]["title"].clone(),
                    r["fields"]["link"].clone(),
                    r["item_url"].clone(),
                )
            })
            .collect();
        assert_eq!(
            read,
            [
                (json!("Script link"), Value::Null, Value::Null),
                (json!("Data link"), Value::Null, Value::Null),
                (json!("File link"), Value::Null, Value::Null),
                (json!("Good link"), json!(good), json!(good)),
            ],
            "{render}"
        );
    }
    // A data: base moves nothing, in Chrome as in http mode (HTML's frozen
    // base URL): the formula links resolve against the page, to http URLs of
    // the shop, so no cell of an export begins with a formula. Both modes
    // read the same URLs.
    let mut read_by_mode = Vec::new();
    for render in ["http", "browser"] {
        let formula = app
            .one_page_site(
                &format!("formula {render}"),
                "/hostile/formula-base?q={keyword}",
                json!({"render": render}),
            )
            .await;
        let run = app.crawl_to_completion("lamp", formula, LIMIT).await;
        assert_eq!(reason(&run), "", "{render}: {run}");
        let urls: Vec<String> = app
            .results_of_run(run["id"].as_i64().unwrap())
            .await
            .iter()
            .map(|r| r["item_url"].as_str().expect("an item URL").to_owned())
            .collect();
        assert_eq!(urls.len(), 2, "{render}");
        for url in &urls {
            assert!(
                url.starts_with(&format!("{}/hostile/", app.site.base_url())),
                "{render}: {url} is not the shop's"
            );
        }
        read_by_mode.push(urls);
    }
    assert_eq!(
        read_by_mode[0], read_by_mode[1],
        "http and browser modes differ"
    );
    // Three links in each mode (the formula links resolve against the page).
    assert!(bites(Bound::UrlScheme) >= before + 6);
    app.stop().await;
}

#[tokio::test]
async fn a_page_that_forges_its_own_javascript_still_yields_its_true_items_in_a_browser() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let site = app
        .one_page_site(
            "forger",
            "/hostile/forger?q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    let run = app.crawl_to_completion("lamp", site, LIMIT).await;
    assert_eq!(run["health"], "healthy", "{run}");
    let results = app.results_of_run(run["id"].as_i64().unwrap()).await;
    let base = app.site.base_url();
    let read: Vec<(Value, Value)> = results
        .iter()
        .map(|r| (r["fields"]["title"].clone(), r["item_url"].clone()))
        .collect();
    let truth: Vec<(Value, Value)> = (1..=3)
        .map(|i| {
            (
                json!(format!("True item {i}")),
                json!(format!("{base}/product/{i}")),
            )
        })
        .collect();
    assert_eq!(read, truth);
    app.stop().await;
}
