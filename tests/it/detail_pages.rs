//! Detail pages: each product's own page read and its values merged into
//! the item (typed values too); re-runs that read only what the site's read
//! setting asks for, counted at the shop; a detail page that fails (500, a
//! hang) failing the attempt with its evidence, the retry storing nothing
//! twice; bad settings refused naming their field; the preview showing the
//! first detail pages; and a browser site waiting for a detail page's script.

use std::{collections::BTreeMap, time::Duration};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{DetailShop, Fault, ON_DEMAND, Roles, TestApp};

const LIMIT: Duration = Duration::from_secs(60);

/// A completed crawl of `keyword`'s sites now; the run.
async fn crawl(app: &TestApp, keyword: i64) -> Value {
    let run = app.crawl(keyword).await[0];
    app.wait_until_completed(run, LIMIT).await
}

/// A run's results by title.
async fn results(app: &TestApp, run: &Value) -> BTreeMap<String, Value> {
    app.results_of_run(run["id"].as_i64().unwrap())
        .await
        .into_iter()
        .map(|r| (r["fields"]["title"].as_str().unwrap().to_owned(), r))
        .collect()
}

/// A site on the shop in http mode and a keyword on it.
async fn http_site(app: &TestApp, shop: &DetailShop, read: Value, extra: Value) -> (i64, i64) {
    let name = format!("detail shop {}", shop.base);
    let mut body = shop.site_body(&name, "http", read);
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    let site = app.create_site(body).await;
    let keyword = app.create_keyword(&name, &[site], ON_DEMAND).await;
    (site, keyword)
}

#[tokio::test]
async fn a_run_reads_every_detail_page_once_and_each_item_holds_its_typed_detail_values() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let (_, keyword) = http_site(&app, &shop, json!("new_or_changed"), json!({})).await;
    let run = crawl(&app, keyword).await;

    let found = results(&app, &run).await;
    assert_eq!(found.len(), 4, "{found:?}");
    for n in 1..=4 {
        shop.assert_product(&found[&format!("Product {n}")]["fields"], n, 1000 * n);
        assert_eq!(shop.detail_requests(n), 1, "product {n}'s page read once");
    }
    assert_eq!(run["items_new"], 4);
    let (status, item) = app
        .get(&format!(
            "/api/items/{}",
            found["Product 2"]["item_id"].as_i64().unwrap()
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{item}");
    shop.assert_product(&item["fields"], 2, 2000);
    app.stop().await;
}

#[tokio::test]
async fn an_item_listed_twice_has_its_detail_page_read_once_in_a_run_that_reads_all() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    shop.list_twice(3);
    let (_, keyword) = http_site(&app, &shop, json!("all"), json!({})).await;
    let run = crawl(&app, keyword).await;
    assert_eq!(run["items_found"], 5, "{run}");
    assert_eq!(shop.detail_requests(3), 1, "read once for both listings");
    assert_eq!(shop.all_detail_requests(), 4);
    let listed = app.results_of_run(run["id"].as_i64().unwrap()).await;
    for result in listed
        .iter()
        .filter(|r| r["fields"]["title"] == "Product 3")
    {
        shop.assert_product(&result["fields"], 3, 3000);
    }
    app.stop().await;
}

#[tokio::test]
async fn a_rerun_reads_only_the_detail_pages_of_new_or_changed_items() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let (_, keyword) = http_site(&app, &shop, json!("new_or_changed"), json!({})).await;
    crawl(&app, keyword).await;
    assert_eq!(shop.all_detail_requests(), 4);

    let again = crawl(&app, keyword).await;
    assert_eq!(
        shop.all_detail_requests(),
        4,
        "nothing changed: no detail page read"
    );
    assert_eq!(
        (again["items_new"].clone(), again["items_changed"].clone()),
        (json!(0), json!(0)),
        "{again}"
    );
    let kept = results(&app, &again).await;
    for n in 1..=4 {
        shop.assert_product(&kept[&format!("Product {n}")]["fields"], n, 1000 * n);
    }

    shop.price(3, 2999);
    let moved = crawl(&app, keyword).await;
    assert_eq!(
        shop.detail_requests(3),
        2,
        "the changed product's page read again"
    );
    assert_eq!(shop.all_detail_requests(), 5, "and only that one");
    assert_eq!(moved["items_changed"], 1, "{moved}");
    let found = results(&app, &moved).await;
    shop.assert_product(&found["Product 3"]["fields"], 3, 2999);
    let diff = found["Product 3"]["diff"].as_object().unwrap();
    assert_eq!(
        diff.keys().collect::<Vec<_>>(),
        ["price"],
        "only the list price differs"
    );
    assert_eq!(diff["price"]["new"].as_f64(), Some(29.99));
    app.stop().await;
}

#[tokio::test]
async fn read_all_rereads_every_detail_page_and_new_reads_none_for_a_changed_item() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let (_, all_kw) = http_site(&app, &shop, json!("all"), json!({})).await;
    crawl(&app, all_kw).await;
    crawl(&app, all_kw).await;
    assert_eq!(shop.all_detail_requests(), 8, "every page, every run");

    let shop = DetailShop::start().await;
    let (_, new_kw) = http_site(&app, &shop, json!("new"), json!({})).await;
    crawl(&app, new_kw).await;
    shop.price(1, 1);
    let run = crawl(&app, new_kw).await;
    assert_eq!(shop.all_detail_requests(), 4, "a changed item is not new");
    shop.assert_product(&results(&app, &run).await["Product 1"]["fields"], 1, 1);
    app.stop().await;
}

#[tokio::test]
async fn every_hours_rereads_a_detail_page_only_once_its_interval_has_passed() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let (site, keyword) = http_site(&app, &shop, json!({"every_hours": 6}), json!({})).await;
    crawl(&app, keyword).await;
    crawl(&app, keyword).await;
    assert_eq!(shop.all_detail_requests(), 4, "read less than 6 hours ago");

    // Product 2's page was read 7 hours ago, product 4's 5 hours ago.
    for (n, hours) in [(2, 7), (4, 5)] {
        sqlx::query(
            "UPDATE items SET detail_read_at = now() - make_interval(hours => $1)
             WHERE site_id = $2 AND item_url = $3",
        )
        .bind(hours)
        .bind(site)
        .bind(format!("{}/p/{n}", shop.base))
        .execute(app.pool())
        .await
        .unwrap();
    }
    crawl(&app, keyword).await;
    assert_eq!(shop.detail_requests(2), 2, "its 6 hours have passed");
    assert_eq!(shop.detail_requests(4), 1, "not yet");
    assert_eq!(shop.all_detail_requests(), 5);
    app.stop().await;
}

/// The page kept as evidence of `run`'s attempt `attempt`: its URL and HTML.
async fn evidence(app: &TestApp, run: i64, attempt: i32) -> (Option<String>, Option<String>) {
    sqlx::query_as("SELECT page_url, html FROM attempt_evidence WHERE run_id = $1 AND attempt = $2")
        .bind(run)
        .bind(attempt)
        .fetch_one(app.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_detail_page_answering_500_fails_the_attempt_with_its_evidence_and_the_retry_stores_nothing_twice()
 {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let (_, keyword) = http_site(
        &app,
        &shop,
        json!("new_or_changed"),
        json!({"max_attempts": 2}),
    )
    .await;
    // Product 3 is on the second list page: the first is stored before it fails.
    shop.fault(3, Fault::Status500(1));
    let run = crawl(&app, keyword).await;
    let id = run["id"].as_i64().unwrap();

    assert_eq!(run["attempt"], 2, "{run}");
    let first = &run["attempts"][0];
    assert_eq!(first["outcome"], "failed", "{first}");
    assert_eq!(first["error_kind"], "site_error", "{first}");
    let detail_url = format!("{}/p/3", shop.base);
    assert!(
        first["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("detail page {detail_url}")),
        "{first}"
    );
    let (page_url, html) = evidence(&app, id, 1).await;
    assert_eq!(page_url.as_deref(), Some(detail_url.as_str()));
    assert_eq!(html.as_deref(), Some("product page broke"));

    let found = results(&app, &run).await;
    assert_eq!(found.len(), 4, "each item stored once: {found:?}");
    let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM crawl_results WHERE run_id = $1")
        .bind(id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(count, 4);
    for n in 1..=4 {
        shop.assert_product(&found[&format!("Product {n}")]["fields"], n, 1000 * n);
    }
    assert_eq!(
        [1, 2, 3, 4].map(|n| shop.detail_requests(n)),
        [1, 1, 2, 1],
        "the retry does not read again what the first attempt stored"
    );
    assert_eq!(run["items_new"], 4, "{run}");
    app.stop().await;
}

#[tokio::test]
async fn a_detail_page_that_hangs_is_abandoned_as_stuck_and_its_url_kept() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let (_, keyword) = http_site(
        &app,
        &shop,
        json!("all"),
        json!({"max_attempts": 1, "stuck_timeout_secs": 2}),
    )
    .await;
    shop.fault(2, Fault::Hang);
    let run = app.crawl(keyword).await[0];
    let ended = app.wait_for_run(run, &["failed"], LIMIT).await;
    let first = &ended["attempts"][0];
    assert!(
        ["stuck", "network"].contains(&first["error_kind"].as_str().unwrap()),
        "{first}"
    );
    let detail_url = format!("{}/p/2", shop.base);
    assert!(
        first["reason"].as_str().unwrap().contains(&detail_url),
        "{first}"
    );
    let (page_url, _) = evidence(&app, run, 1).await;
    assert_eq!(page_url.as_deref(), Some(detail_url.as_str()));
    assert_eq!(shop.detail_requests(3), 0, "the crawl went no further");
    app.stop().await;
}

#[tokio::test]
async fn bad_detail_settings_are_refused_naming_the_field() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    for (detail, field) in [
        (json!({"url_field": "link"}), "detail.url_field"),
        (json!({"url_field": "title"}), "detail.url_field"),
        (
            json!({"fields": {"sku": {"selector": "p[["}}}),
            "detail.fields.sku.selector",
        ),
        (
            json!({"fields": {"price": {"selector": "b"}}}),
            "detail.fields.price",
        ),
        (
            json!({"read": {"every_hours": 0}}),
            "detail.read.every_hours",
        ),
        (json!({"read": "sometimes"}), "detail.read"),
        (json!({"render": "browser"}), "detail.render"),
    ] {
        let mut body = shop.site_body("bad", "http", json!("all"));
        for (key, value) in detail.as_object().unwrap() {
            body["detail"][key] = value.clone();
        }
        let (status, error) = app.post("/api/sites", body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{detail}: {error}"
        );
        assert_eq!(error["error"]["field"], field, "{detail}: {error}");
    }
    let (status, sites) = app.get("/api/sites").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        sites["items"].as_array().map(Vec::len),
        Some(0),
        "nothing half-written: {sites}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_site_shows_its_detail_settings_as_they_were_sent() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let site = app
        .create_site(shop.site_body("shown", "http", json!({"every_hours": 12})))
        .await;
    let (status, shown) = app.get(&format!("/api/sites/{site}")).await;
    assert_eq!(status, StatusCode::OK);
    let detail = &shown["detail"];
    assert_eq!(detail["url_field"], "url");
    assert_eq!(detail["read"], json!({"every_hours": 12}));
    assert_eq!(detail["render"], "http");
    assert_eq!(detail["fields"]["weight_kg"]["number"]["locale"], "de-DE");
    // What is shown is accepted back as it is.
    let mut body = shop.site_body("shown", "http", json!("all"));
    body["detail"] = detail.clone();
    let (status, again) = app.put(&format!("/api/sites/{site}"), body).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["detail"], *detail);
    app.stop().await;
}

#[tokio::test]
async fn the_preview_shows_the_first_three_detail_pages_merged_into_their_items_and_stores_nothing()
{
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let site = shop.site_body("previewed", "http", json!("all"));
    let (status, preview) = app
        .post(
            "/api/sites/preview",
            json!({"site": site, "keyword": "all", "pages": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview["refusal"], Value::Null, "{preview}");
    let items = preview["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{preview}");
    let details = preview["details"].as_array().unwrap();
    assert_eq!(details.len(), 3, "at most three detail pages: {preview}");
    for (at, detail) in details.iter().enumerate() {
        let n = at as u32 + 1;
        assert_eq!(detail["item"], at);
        assert_eq!(detail["url"], format!("{}/p/{n}", shop.base));
        assert_eq!(detail["fields"]["sku"], format!("SKU-{n}"), "{detail}");
        assert_eq!(
            detail["raw"]["weight_kg"],
            format!("{}", ["1.000,5 kg", "2.001,0 kg", "3.001,5 kg"][at]),
            "{detail}"
        );
        shop.assert_product(&items[at]["fields"], n, 1000 * n);
    }
    assert_eq!(
        items[3]["fields"].get("sku"),
        None,
        "the fourth item's page is not read"
    );
    assert_eq!(shop.all_detail_requests(), 3);
    assert_eq!(shop.detail_requests(4), 0);
    let (runs, items_stored): (i64, i64) =
        sqlx::query_as("SELECT (SELECT count(*) FROM crawl_runs), (SELECT count(*) FROM items)")
            .fetch_one(app.pool())
            .await
            .unwrap();
    assert_eq!((runs, items_stored), (0, 0), "a preview stores nothing");
    app.stop().await;
}

#[tokio::test]
async fn a_browser_site_waits_for_a_detail_pages_script_and_may_read_its_detail_pages_over_http() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let mut in_browser = shop.site_body("detail in browser", "browser", json!("all"));
    in_browser["detail"]["wait_for"] = json!(".in-stock");
    in_browser["detail"]["fields"]["stock"] =
        json!({"selector": ".in-stock", "regex": r"(\d+) left", "number": {}});
    let mut over_http = in_browser.clone();
    over_http["name"] = json!("detail over http");
    over_http["detail"]["render"] = json!("http");
    let in_browser = app.create_site(in_browser).await;
    let over_http = app.create_site(over_http).await;

    let run = app.crawl_to_completion("browser", in_browser, LIMIT).await;
    let found = results(&app, &run).await;
    assert_eq!(found.len(), 4, "{found:?}");
    for n in 1..=4 {
        let fields = &found[&format!("Product {n}")]["fields"];
        shop.assert_product(fields, n, 1000 * n);
        assert_eq!(
            fields["stock"].as_f64(),
            Some(f64::from(n)),
            "the script ran: {fields}"
        );
    }
    assert_eq!(shop.all_detail_requests(), 4);

    let run = app.crawl_to_completion("http", over_http, LIMIT).await;
    let found = results(&app, &run).await;
    for n in 1..=4 {
        let fields = &found[&format!("Product {n}")]["fields"];
        shop.assert_product(fields, n, 1000 * n);
        assert_eq!(
            fields["stock"],
            Value::Null,
            "no script runs over HTTP: {fields}"
        );
    }
    assert_eq!(shop.all_detail_requests(), 8);
    app.stop().await;
}

#[tokio::test]
async fn a_browser_site_whose_detail_page_over_http_fails_keeps_that_page_not_the_browsers() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let shop = DetailShop::start().await;
    let mut body = shop.site_body("http details fail", "browser", json!("all"));
    body["detail"]["render"] = json!("http");
    body["max_attempts"] = json!(1);
    let site = app.create_site(body).await;
    shop.fault(2, Fault::Status500(5));
    let run = app.crawl_to_end("broken", site, LIMIT).await;
    assert_eq!(run["state"], "failed", "{run}");
    let detail_url = format!("{}/p/2", shop.base);
    let (page_url, html) = evidence(&app, run["id"].as_i64().unwrap(), 1).await;
    assert_eq!(page_url.as_deref(), Some(detail_url.as_str()));
    assert_eq!(html.as_deref(), Some("product page broke"));
    app.stop().await;
}
