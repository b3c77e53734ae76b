//! Sites read from the structured data their pages publish: a JSON-LD list
//! page and a microdata product page crawled without an item selector in
//! http and browser modes, fields beside a selector reading the page's
//! structured data, JSON-LD a script writes (a browser sees it), the
//! preview listing what a page publishes, and a 422 for each bad setting.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Roles, StructuredShop, TestApp, expected_list};

const LIMIT: Duration = Duration::from_secs(90);

fn worker_only() -> Roles {
    Roles {
        scheduler: false,
        worker: true,
    }
}

/// A one-page site on the shop at `path`, reading its Products' name,
/// price, currency, brand and URL from its structured data.
fn product_site(shop: &StructuredShop, name: &str, render: &str, path: &str) -> Value {
    json!({
        "name": name,
        "render": render,
        "search_url": format!("{}{path}?q={{keyword}}", shop.base_url()),
        "structured_items": "Product",
        "fields": {
            "name": {"structured": "name"},
            "price": {"structured": "offers.price|offers.lowPrice"},
            "currency": {"structured": "offers.priceCurrency"},
            "brand": {"structured": "brand.name|brand"},
            "url": {"structured": "url", "link": true},
        },
        "expect_items": true,
        "max_attempts": 1,
    })
}

/// The fields and item URLs of a run's results, in stored order.
fn stored(results: &[Value]) -> Vec<(Value, Value)> {
    results
        .iter()
        .map(|r| (r["fields"].clone(), r["item_url"].clone()))
        .collect()
}

async fn crawl(app: &TestApp, site: i64) -> Vec<Value> {
    let run = app
        .crawl_to_completion(&format!("lamp {site}"), site, LIMIT)
        .await;
    app.results_of_run(run["id"].as_i64().unwrap()).await
}

#[tokio::test]
async fn a_json_ld_list_and_a_microdata_page_are_crawled_into_typed_items_without_a_selector_in_both_modes()
 {
    let shop = StructuredShop::start().await;
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let base = shop.base_url();
    for render in ["http", "browser"] {
        let list = app
            .create_site(product_site(
                &shop,
                &format!("list-{render}"),
                render,
                "/list",
            ))
            .await;
        let results = crawl(&app, list).await;
        let want: Vec<(Value, Value)> = expected_list(base)
            .into_iter()
            .map(|fields| {
                let url = fields["url"].clone();
                (fields, url)
            })
            .collect();
        assert_eq!(stored(&results), want, "{render}");
        assert!(
            results[0]["fields"]["price"].is_number(),
            "a JSON-LD number stays a number ({render})"
        );

        let page = app
            .create_site(product_site(
                &shop,
                &format!("page-{render}"),
                render,
                "/product",
            ))
            .await;
        let results = crawl(&app, page).await;
        assert_eq!(
            stored(&results),
            [(
                json!({"name": "Desk lamp", "price": "1299000", "currency": "KRW", "brand": "Acme",
                       "url": format!("{base}/p/1")}),
                json!(format!("{base}/p/1")),
            )],
            "the microdata product ({render})"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn fields_beside_a_selector_read_the_pages_structured_data_in_both_modes() {
    let shop = StructuredShop::start().await;
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let mut read = Vec::new();
    for render in ["http", "browser"] {
        let site = app
            .create_site(json!({
                "name": format!("detail-{render}"),
                "render": render,
                "search_url": format!("{}/product?q={{keyword}}", shop.base_url()),
                "item_selector": "main.product",
                "fields": {
                    "stock": {"selector": ".stock"},
                    "price": {"structured": "Product.offers.price"},
                    "availability": {"structured": "Offer.availability"},
                    "og_price": {"structured": "product:price:amount"},
                    "image": {"structured": "og:image", "link": true},
                    "rating": {"structured": "AggregateRating.ratingValue"},
                },
            }))
            .await;
        read.push(stored(&crawl(&app, site).await));
    }
    assert_eq!(
        read[0],
        [(
            json!({"stock": "Only 3 left", "price": "1299000",
                   "availability": "https://schema.org/InStock", "og_price": "1299000",
                   "image": format!("{}/img/desk-lamp.jpg", shop.base_url()), "rating": null}),
            json!(format!("{}/img/desk-lamp.jpg", shop.base_url())),
        )]
    );
    assert_eq!(read[0], read[1], "http and browser modes read the same");
    app.stop().await;
}

#[tokio::test]
async fn in_browser_mode_the_structured_data_a_script_writes_is_read() {
    let shop = StructuredShop::start().await;
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let mut found = Vec::new();
    for render in ["browser", "http"] {
        let mut body = product_site(&shop, &format!("rendered-{render}"), render, "/rendered");
        body["expect_items"] = json!(false);
        let site = app.create_site(body).await;
        found.push(stored(&crawl(&app, site).await));
    }
    assert_eq!(
        found[0],
        [(
            json!({"name": "Rendered lamp", "price": 5, "currency": null, "brand": null, "url": null}),
            Value::Null
        )],
        "the rendered page's product"
    );
    assert_eq!(found[1], [], "not in the HTML the server sent");
    app.stop().await;
}

#[tokio::test]
async fn the_preview_lists_the_structured_data_of_each_page_in_both_modes() {
    let shop = StructuredShop::start().await;
    let app = TestApp::spawn_with(worker_only(), |_| {}).await;
    for render in ["http", "browser"] {
        // A site still being set up: its selector finds nothing yet.
        let site = json!({
            "name": "lamps", "render": render,
            "search_url": format!("{}/list?q={{keyword}}", shop.base_url()),
            "item_selector": "li.product", "fields": {"title": {"selector": "a"}},
        });
        let (status, answer) = app
            .post(
                "/api/sites/preview",
                json!({"site": site, "keyword": "lamp"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let structured = &answer["pages"][0]["structured"];
        assert_eq!(
            structured["types"],
            json!({"AggregateOffer": 1, "Brand": 1, "ItemList": 1, "ListItem": 3,
                   "Offer": 3, "Product": 3, "WebSite": 1}),
            "{render}: {structured}"
        );
        assert_eq!(structured["skipped_scripts"], 1, "the broken script");
        let items = structured["items"].as_array().unwrap();
        let kinds: Vec<(&str, &Value)> = items
            .iter()
            .map(|i| (i["source"].as_str().unwrap(), &i["types"]))
            .collect();
        assert_eq!(
            kinds,
            [
                ("json-ld", &json!(["WebSite"])),
                ("json-ld", &json!(["ItemList"])),
                ("json-ld", &json!(["AggregateOffer"])),
                ("opengraph", &json!(["website"])),
            ],
            "{render}"
        );
        let first = &items[1]["properties"]["itemListElement"][0]["item"];
        assert_eq!(first["offers"]["price"], 1299000, "{render}: {first}");
        assert_eq!(items[3]["properties"]["og:title"], "Lamp shop");
        assert_eq!(
            items[1]["properties"]["name"], "Results for lamp",
            "the page searched for the keyword"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn each_bad_structured_setting_is_a_422_naming_its_field() {
    let app = TestApp::spawn_without_browsers(worker_only(), |_| {}).await;
    let base = json!({
        "name": "s", "search_url": "http://127.0.0.1:9/s?q={keyword}", "render": "http",
        "structured_items": "Product", "fields": {"name": {"structured": "name"}},
    });
    let bad = [
        (
            json!({"structured_items": "schema.org/Product"}),
            "structured_items",
        ),
        (json!({"structured_items": ""}), "structured_items"),
        (json!({"item_selector": "li"}), "structured_items"),
        (json!({"structured_items": null}), "item_selector"),
        (
            json!({"fields": {"name": {"structured": "offers..price"}}}),
            "fields.name.structured",
        ),
        (
            json!({"fields": {"name": {"structured": "Product.name"}}}),
            "fields.name.structured",
        ),
        (
            json!({"fields": {"name": {"structured": "a|b|c|d|e"}}}),
            "fields.name.structured",
        ),
        (
            json!({"fields": {"name": {"structured": "image.10000"}}}),
            "fields.name.structured",
        ),
        (
            json!({"fields": {"name": {"structured": "og:title.x"}}}),
            "fields.name.structured",
        ),
        (
            json!({"fields": {"name": {"selector": "h1"}}}),
            "fields.name.structured",
        ),
        (
            json!({"fields": {"name": {"structured": "name", "attr": "href"}}}),
            "fields.name.attr",
        ),
        (
            json!({"structured_items": null, "item_selector": "li",
                   "fields": {"name": {"structured": "offers.price"}}}),
            "fields.name.structured",
        ),
        (
            json!({"structured_items": null, "item_selector": "li",
                   "fields": {"name": {"selector": "a", "link": true, "number": {}}}}),
            "fields.name.link",
        ),
        (
            json!({"render": "json", "json": {"items": "/items"}}),
            "structured_items",
        ),
        (
            json!({"render": "json", "structured_items": null, "json": {"items": "/items"},
                   "fields": {"name": {"structured": "name"}}}),
            "fields.name.structured",
        ),
        (
            json!({"fields": {"name": {"structured": 5}}}),
            "fields.name.structured",
        ),
    ];
    for (change, field) in bad {
        let mut site = base.clone();
        for (key, value) in change.as_object().unwrap() {
            site[key] = value.clone();
        }
        let (status, answer) = app.post("/api/sites", site.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{site}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{site}: {answer}");
        let (status, answer) = app
            .post("/api/sites/preview", json!({"site": site, "keyword": "k"}))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(
            answer["error"]["field"],
            format!("site.{field}"),
            "{answer}"
        );
    }
    let (status, created) = app.post("/api/sites", base).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["structured_items"], "Product");
    assert_eq!(created["item_selector"], Value::Null);
    assert_eq!(created["fields"]["name"], json!({"structured": "name"}));
    app.stop().await;
}
