//! What browser pages download (a site's `browser_resources`): the heavy
//! fixture page (images, a web font, a video, a tag manager, analytics, an
//! ad script and a social pixel, its items rendered by its own script) read
//! with its third parties' real host names, which a proxy takes to the
//! fixture. By default none of the images, media, fonts or trackers is
//! requested, and the items are those of the page as it loads whole; a site
//! allowing a kind gets it again. On every browser backend.

use std::{collections::BTreeMap, time::Duration};

use crawlfleet_demo::site::{HEAVY_ITEMS, Served, heavy_item};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    Backend, ON_DEMAND, Roles, TestApp, TestProxy, heavy_page_fields, on_each_backend,
};

const LIMIT: Duration = Duration::from_secs(90);

/// The heavy page as a site reading its items (and each item's image URL),
/// through `proxy`, with `browser_resources` when given.
fn heavy_site(app: &TestApp, name: &str, proxy: &TestProxy, resources: Option<Value>) -> Value {
    let mut body = json!({
        "name": name,
        "search_url": format!("{}/heavy?q={{keyword}}", app.site.base_url()),
        "item_selector": "li.product",
        "wait_for": "li.product",
        "fields": heavy_page_fields(),
        "render": "browser",
        "proxy": proxy.url("http", None),
    });
    if let Some(resources) = resources {
        body["browser_resources"] = resources;
    }
    body
}

/// Crawls the heavy page for `keyword` with a site of `resources`; the
/// items' fields and what the fixture served, by kind.
async fn crawl_heavy(
    app: &TestApp,
    proxy: &TestProxy,
    keyword: &str,
    resources: Option<Value>,
) -> (Vec<Value>, BTreeMap<String, Served>) {
    let site = app
        .create_site(heavy_site(app, keyword, proxy, resources))
        .await;
    let keyword_id = app.create_keyword(keyword, &[site], ON_DEMAND).await;
    app.site.take_heavy_served();
    let runs = app.crawl(keyword_id).await;
    let run = app.wait_until_completed(runs[0], LIMIT).await;
    // Whatever the page still loaded after it was read (its async scripts'
    // follow-ups) is in by the time its context was wiped: give it a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let results = app.results_of_run(run["id"].as_i64().unwrap()).await;
    let fields = results.iter().map(|r| r["fields"].clone()).collect();
    (fields, app.site.take_heavy_served())
}

/// The items the page shows for `keyword`, whatever it downloaded.
fn expected_items(app: &TestApp, keyword: &str) -> Vec<Value> {
    let base = app.site.base_url();
    (1..=HEAVY_ITEMS)
        .map(|n| {
            let [title, url, price, image] = heavy_item(keyword, n);
            json!({"title": title, "link": format!("{base}{url}"), "price": price,
                   "image": format!("{base}{image}")})
        })
        .collect()
}

fn requests(served: &BTreeMap<String, Served>, kind: &str) -> u64 {
    served.get(kind).map_or(0, |s| s.requests)
}

fn bytes(served: &BTreeMap<String, Served>) -> u64 {
    served.values().map(|s| s.bytes).sum()
}

on_each_backend!(a_heavy_page_is_read_without_images_media_fonts_or_trackers_unless_allowed);
async fn a_heavy_page_is_read_without_images_media_fonts_or_trackers_unless_allowed(
    backend: Backend,
) {
    let app = TestApp::spawn_on(&backend, Roles::fleet(), |_| {}).await;
    let proxy = TestProxy::mapping_to(app.site.addr()).await;

    let (items, lean) = crawl_heavy(&app, &proxy, "lean lamps", None).await;
    assert_eq!(items, expected_items(&app, "lean lamps"));
    for kind in ["document", "stylesheet", "script", "xhr"] {
        assert_eq!(requests(&lean, kind), 1, "{kind}: {lean:?}");
    }
    for kind in ["image", "font", "media", "tracker"] {
        assert_eq!(requests(&lean, kind), 0, "{kind} requested: {lean:?}");
    }

    let every_kind = json!({"allow": ["image", "media", "font", "tracker"]});
    let (items, whole) = crawl_heavy(&app, &proxy, "whole lamps", Some(every_kind)).await;
    assert_eq!(
        items,
        expected_items(&app, "whole lamps"),
        "the same items as the page loaded whole"
    );
    // Asked for: the banner, each item's image, the video's poster, the
    // font, the video, as many as Chrome sent before the page was read and
    // left (images are its last requests: up to 14).
    for kind in ["image", "font", "media"] {
        assert!(requests(&whole, kind) >= 1, "{kind}: {whole:?}");
    }
    // The tag manager and the ad script the page names, and the ad image
    // (the pixel and the analytics are asked for over https, which the
    // fixture does not serve: HSTS).
    assert!(requests(&whole, "tracker") >= 1, "{whole:?}");
    assert!(
        bytes(&whole) > 10 * bytes(&lean),
        "the lean page is a fraction of the whole: {} of {} bytes",
        bytes(&lean),
        bytes(&whole)
    );

    let images = json!({"allow": ["image"]});
    let (items, imaged) = crawl_heavy(&app, &proxy, "imaged lamps", Some(images)).await;
    assert_eq!(items, expected_items(&app, "imaged lamps"));
    assert!(requests(&imaged, "image") >= 1, "{imaged:?}");
    for kind in ["font", "media", "tracker"] {
        assert_eq!(requests(&imaged, kind), 0, "{kind} requested: {imaged:?}");
    }
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_resource_type_is_refused_naming_its_place() {
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;
    let mut body = app.site_body("typo", "/heavy");
    body["browser_resources"] = json!({"allow": ["image", "video"]});
    let (status, answer) = app.post("/api/sites", body.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["field"], "browser_resources.allow[1]");
    body["browser_resources"] = json!({"allow": ["font", "image"]});
    let (status, site) = app.post("/api/sites", body).await;
    assert_eq!(status, StatusCode::CREATED, "{site}");
    assert_eq!(
        site["browser_resources"],
        json!({"allow": ["image", "font"]}),
        "stored and shown in the kinds' order"
    );
    let (_, plain) = app
        .post("/api/sites", app.site_body("plain", "/heavy"))
        .await;
    assert_eq!(plain["browser_resources"], json!({"allow": []}));
    app.stop().await;
}
