//! How items are recognised from one crawl to the next: by URL, else by the
//! site's item_key field, else by content; in a browser as over plain HTTP;
//! and in an incremental crawl.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{by_title, catalog_site, counts, crawl, first_price, title};
use crate::support::{ON_DEMAND, Roles, TestApp};

#[tokio::test]
async fn without_urls_items_are_identified_by_the_sites_item_key_else_by_their_content() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let no_links = "&links=false";
    let keyed = catalog_site(&app, "keyed", "http", no_links, json!({"item_key": "sku"})).await;
    let by_content = catalog_site(&app, "by-content", "http", no_links, json!({})).await;
    let keyword = app
        .create_keyword("chair", &[keyed, by_content], ON_DEMAND)
        .await;
    for run in crawl(&app, keyword).await {
        assert_eq!(counts(&run), (12, 0, 0), "{run}");
    }

    app.site.reprice("chair", 4, "$1.00");
    let runs = crawl(&app, keyword).await;
    let run_on = |site: i64| runs.iter().find(|r| r["site_id"] == site).unwrap();
    // By its SKU, product 4 is the same item with another price.
    assert_eq!(counts(run_on(keyed)), (0, 1, 0), "{}", run_on(keyed));
    let changed = app
        .results(&format!("site_id={keyed}&change=changed"))
        .await;
    assert_eq!(changed.len(), 1);
    assert_eq!(
        changed[0]["diff"],
        json!({"price": {"old": first_price(4), "new": "$1.00"}})
    );
    assert_eq!(changed[0]["item_url"], Value::Null);
    let item = changed[0]["item_id"].as_i64().unwrap();
    let (_, item) = app.get(&format!("/api/items/{item}")).await;
    assert_eq!(
        (&item["identified_by"], &item["item_key"]),
        (&json!("key"), &json!("key:SKU-4"))
    );
    // By its content, another price is another item: the old one is gone.
    assert_eq!(
        counts(run_on(by_content)),
        (1, 0, 1),
        "{}",
        run_on(by_content)
    );
    let removed = app
        .results(&format!("site_id={by_content}&change=removed"))
        .await;
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0]["fields"]["price"], first_price(4));

    // A key that is not one of the site's fields is refused, naming it.
    let mut body = app.site_body("bad-key", "/catalog");
    body["item_key"] = json!("sku");
    let (status, error) = app.post("/api/sites", body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(error["error"]["field"], "item_key");
    let (_, site) = app.get(&format!("/api/sites/{keyed}")).await;
    assert_eq!(site["item_key"], "sku");
    app.stop().await;
}

#[tokio::test]
async fn a_browser_crawl_tracks_changes_as_a_plain_http_crawl_does() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let site = catalog_site(&app, "in-chrome", "browser", "", json!({})).await;
    let keyword = app.create_keyword("sofa", &[site], ON_DEMAND).await;
    let first = crawl(&app, keyword).await.remove(0);
    assert_eq!(counts(&first), (12, 0, 0), "{first}");

    app.site.reprice("sofa", 1, "$5.00");
    app.site.withdraw("sofa", 12);
    let second = crawl(&app, keyword).await.remove(0);
    assert_eq!(counts(&second), (0, 1, 1), "{second}");
    let results = by_title(&app.results_of_run(second["id"].as_i64().unwrap()).await);
    assert_eq!(
        results[&title("sofa", 1)]["diff"],
        json!({"price": {"old": first_price(1), "new": "$5.00"}})
    );
    let removed = app
        .results(&format!("keyword_id={keyword}&change=removed"))
        .await;
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0]["fields"]["title"], title("sofa", 12));
    app.stop().await;
}

#[tokio::test]
async fn an_incremental_crawl_stores_a_changed_item_again_and_judges_no_removal_when_it_stops_early()
 {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let site = catalog_site(
        &app,
        "incremental",
        "http",
        "",
        json!({"stop_on_seen": true}),
    )
    .await;
    let keyword = app.create_keyword("rug", &[site], ON_DEMAND).await;
    let first = crawl(&app, keyword).await.remove(0);
    assert_eq!(first["pages_crawled"], 4);
    assert_eq!(counts(&first), (12, 0, 0));

    // Page 1 shows only stored items: the crawl stops there, so it can tell
    // product 2 changed but not that product 11 is gone.
    app.site.reprice("rug", 2, "$3.00");
    app.site.withdraw("rug", 11);
    let requests_before = app.site.requests("/catalog").len();
    let second = crawl(&app, keyword).await.remove(0);
    assert_eq!(app.site.requests("/catalog").len(), requests_before + 1);
    assert_eq!(second["paging_ended"], "seen_before");
    assert_eq!(counts(&second), (0, 1, 0), "{second}");
    let results = app.results_of_run(second["id"].as_i64().unwrap()).await;
    assert_eq!(results.len(), 1, "only the changed item is stored again");
    assert_eq!(results[0]["fields"]["title"], title("rug", 2));
    assert_eq!(results[0]["change"], "changed");
    let removed = app
        .results(&format!("keyword_id={keyword}&change=removed"))
        .await;
    assert_eq!(removed, Vec::<Value>::new());
    app.stop().await;
}
