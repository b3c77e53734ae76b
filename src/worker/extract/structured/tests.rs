//! Pages as shops publish their products: JSON-LD in a `@graph`, in lists,
//! with offers as an object or a list, an AggregateOffer, types as a name
//! or a list, references by `@id`; microdata; OpenGraph; and pages that
//! attack the reader (a 20 MB script, 10,000 items, deep nesting).

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use url::Url;

use super::{Lookup, StructuredData, json_ld::MAX_PAGE_VALUES};
use crate::{
    domain::site::{FieldSpec, SchemaType, StructuredPath},
    worker::extract::{
        HtmlPage,
        budget::{CancelFlag, ExtractBudget, Spent},
    },
};

fn page(body: &str) -> StructuredData {
    let url = Url::parse("http://shop.example/list?q=lamp").unwrap();
    StructuredData::read(&HtmlPage::parse(body, &url), &ExtractBudget::unlimited())
}

fn script(json: &Value) -> String {
    format!(r#"<script type="application/ld+json">{json}</script>"#)
}

fn field(path: &str, item_type: Option<&SchemaType>, link: bool) -> FieldSpec {
    FieldSpec {
        selector: None,
        attr: None,
        pointer: None,
        link,
        structured: Some(StructuredPath::parse(path, "f", item_type).unwrap()),
        rules: Default::default(),
    }
}

/// Each structured item of `item_type`, its fields read by `paths`.
fn items(data: &StructuredData, item_type: &str, paths: &[(&str, &str, bool)]) -> Vec<Value> {
    let item_type = SchemaType::parse(item_type, "t").unwrap();
    let fields: BTreeMap<String, FieldSpec> = paths
        .iter()
        .map(|(name, path, link)| (name.to_string(), field(path, Some(&item_type), *link)))
        .collect();
    let budget = ExtractBudget::unlimited();
    Lookup::new(data, &budget)
        .items(&item_type, &fields, usize::MAX, &budget)
        .into_iter()
        .map(Value::Object)
        .collect()
}

const PRICE: (&str, &str, bool) = ("price", "offers.price|offers.lowPrice", false);
const NAME: (&str, &str, bool) = ("name", "name", false);
const URL: (&str, &str, bool) = ("url", "url", true);

#[test]
fn products_in_a_graph_with_offers_as_object_list_or_aggregate_are_read_by_one_path() {
    let data = page(&script(&json!({
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebPage", "@id": "#page", "name": "Lamps"},
            {"@type": "Product", "name": "Desk lamp", "url": "/p/1",
             "offers": {"@type": "Offer", "price": 1299, "priceCurrency": "USD"}},
            {"@type": ["Product", "Thing"], "name": "  Floor\n lamp ", "url": "/p/2",
             "offers": [{"@type": "Offer", "priceCurrency": "USD"},
                        {"@type": "Offer", "price": "89.50"}]},
            {"@type": "http://schema.org/Product", "name": "Lamp set", "url": "https://cdn.example/p/3",
             "offers": {"@type": "AggregateOffer", "lowPrice": "10", "highPrice": "20"}}
        ]
    })));
    assert_eq!(
        items(&data, "Product", &[NAME, PRICE, URL]),
        [
            json!({"name": "Desk lamp", "price": 1299, "url": "http://shop.example/p/1"}),
            json!({"name": "Floor lamp", "price": "89.50", "url": "http://shop.example/p/2"}),
            json!({"name": "Lamp set", "price": "10", "url": "https://cdn.example/p/3"}),
        ]
    );
}

#[test]
fn lists_of_scripts_and_an_item_list_give_their_products_each_once() {
    let product =
        |n: u32| json!({"@type": "Product", "@id": format!("#p{n}"), "name": format!("P{n}")});
    let body = [
        script(&json!([{"@type": "Organization", "name": "Shop"}, product(1)])),
        script(&json!({
            "@type": "ItemList",
            "itemListElement": [
                {"@type": "ListItem", "position": 1, "item": product(2)},
                {"@type": "ListItem", "position": 2, "item": product(3)}
            ]
        })),
        // The same product again, by the same @id: not a second item.
        script(&product(1)),
        // A product's related products are part of it.
        script(&json!({"@type": "Product", "name": "P4", "isSimilarTo": product(5)})),
    ]
    .concat();
    let names: Vec<Value> = items(&page(&body), "product", &[NAME])
        .into_iter()
        .map(|i| i["name"].clone())
        .collect();
    assert_eq!(names, ["P1", "P2", "P3", "P4"]);
}

#[test]
fn references_by_id_nested_types_and_values_are_followed() {
    let data = page(&script(&json!({
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "Product", "name": "Lamp",
             "brand": {"@type": "Brand", "name": "Acme"},
             "offers": {"@id": "#offer"},
             "image": [{"@type": "ImageObject", "url": "/i/1.jpg"}, "/i/2.jpg"],
             "weight": {"@value": "2.5", "@type": "xsd:decimal"},
             "aggregateRating": {"@type": "AggregateRating", "ratingValue": 4.5}},
            {"@id": "#offer", "@type": "Offer", "price": "9.99",
             "seller": {"@type": "Organization", "name": "Shop"}}
        ]
    })));
    let read = items(
        &data,
        "Product",
        &[
            ("brand", "brand.name|brand", false),
            ("price", "offers.price", false),
            ("seller", "offers.seller.name", false),
            ("image", "image", true),
            ("second", "image.1", true),
            ("weight", "weight", false),
            ("rating", "aggregateRating.ratingValue", false),
            ("missing", "offers.0.gtin|sku", false),
            ("offer", "offers.0.@type", false),
        ],
    );
    assert_eq!(
        read,
        [json!({
            "brand": "Acme", "price": "9.99", "seller": "Shop",
            "image": "http://shop.example/i/1.jpg", "second": "http://shop.example/i/2.jpg",
            "weight": "2.5", "rating": 4.5, "missing": null, "offer": "Offer"
        })]
    );
}

#[test]
fn microdata_is_read_when_the_page_has_no_json_ld_of_the_type() {
    let microdata = r#"<div itemscope itemtype="https://schema.org/Product">
        <span itemprop="name">Desk lamp</span><a itemprop="url" href="/p/1">x</a>
        <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
          <meta itemprop="price" content="12.00"></div></div>"#;
    let data = page(microdata);
    assert_eq!(
        items(&data, "Product", &[NAME, PRICE, URL]),
        [json!({"name": "Desk lamp", "price": "12.00", "url": "http://shop.example/p/1"})]
    );
    // Described both ways: JSON-LD's only, not each product twice.
    let both = format!(
        "{}{microdata}",
        script(&json!({"@type": "Product", "name": "From JSON-LD"}))
    );
    let names = items(&page(&both), "Product", &[NAME]);
    assert_eq!(names, [json!({"name": "From JSON-LD"})]);
}

#[test]
fn beside_a_selector_fields_read_the_pages_first_item_of_a_type_and_its_open_graph() {
    let body = format!(
        r#"<head><meta property="og:image" content="/og.jpg">
        <meta property="product:price:amount" content="7"></head>{}"#,
        script(&json!([
            {"@type": "BreadcrumbList", "itemListElement": [{"name": "Home"}, {"name": "Lamps"}]},
            {"@type": "Product", "offers": {"price": "5"}}
        ]))
    );
    let data = page(&body);
    let fields = BTreeMap::from([
        (
            "category".to_owned(),
            field("BreadcrumbList.itemListElement.1.name", None, false),
        ),
        (
            "price".to_owned(),
            field("Product.offers.price", None, false),
        ),
        (
            "og_price".to_owned(),
            field("product:price:amount", None, false),
        ),
        ("image".to_owned(), field("og:image", None, true)),
        (
            "none".to_owned(),
            field("Review.author|og:title", None, false),
        ),
    ]);
    let budget = ExtractBudget::unlimited();
    let read = Lookup::new(&data, &budget).fields(None, &fields, &budget);
    assert_eq!(
        Value::Object(read),
        json!({"category": "Lamps", "price": "5", "og_price": "7",
               "image": "http://shop.example/og.jpg", "none": null})
    );
}

#[test]
fn the_listing_shows_top_level_items_and_what_each_type_would_give() {
    let body = format!(
        r#"<head><meta property="og:type" content="product"><meta property="og:title" content="T"></head>
        {}{}<script type="application/ld+json">{{oops</script>
        <div itemscope itemtype="http://schema.org/Organization"><span itemprop="name">Shop</span></div>"#,
        script(&json!({"@graph": [
            {"@type": "ItemList", "itemListElement": [
                {"@type": "ListItem", "item": {"@type": "Product", "name": "A", "description": "x".repeat(1000)}},
                {"@type": "ListItem", "item": {"@type": "Product", "name": "B"}}]},
            {"@type": "WebSite"}
        ]})),
        script(&json!({"@type": "Product", "name": "C", "isRelatedTo": {"@type": "Product"}})),
    );
    let listing = page(&body).listing(&ExtractBudget::unlimited());
    let sources: Vec<(&str, Vec<String>)> = listing
        .items
        .iter()
        .map(|i| (i.source, i.types.clone()))
        .collect();
    assert_eq!(
        sources,
        [
            ("json-ld", vec!["ItemList".to_owned()]),
            ("json-ld", vec!["WebSite".to_owned()]),
            ("json-ld", vec!["Product".to_owned()]),
            ("microdata", vec!["Organization".to_owned()]),
            ("opengraph", vec!["product".to_owned()]),
        ]
    );
    assert_eq!(
        listing.types,
        BTreeMap::from([
            ("ItemList".to_owned(), 1),
            ("ListItem".to_owned(), 2),
            ("Organization".to_owned(), 1),
            ("Product".to_owned(), 3),
            ("WebSite".to_owned(), 1),
        ])
    );
    assert_eq!(listing.skipped_scripts, 1);
    let description = listing.items[0].properties["itemListElement"][0]["item"]["description"]
        .as_str()
        .unwrap();
    assert_eq!(
        description.chars().count(),
        super::listing::MAX_TEXT_CHARS + 1,
        "cut, with …"
    );
    assert_eq!(listing.items[4].properties["og:title"], "T");
}

#[test]
fn a_listing_of_a_page_of_many_large_items_stays_small() {
    let many: Vec<Value> = (0..10_000)
        .map(|n| json!({"@type": "Product", "name": n, "tags": vec!["t".repeat(50); 20]}))
        .collect();
    let listing = page(&script(&json!(many))).listing(&ExtractBudget::unlimited());
    assert_eq!(listing.items.len(), super::listing::MAX_LISTED);
    assert_eq!(listing.types["Product"], 10_000);
    let size = serde_json::to_string(
        &listing
            .items
            .iter()
            .map(|i| &i.properties)
            .collect::<Vec<_>>(),
    )
    .unwrap()
    .len();
    assert!(size < 512 * 1024, "{size} bytes");
}

/// A page whose JSON-LD is `bytes` long: products in a list.
fn large_page(bytes: usize) -> String {
    let product = json!({"@type": "Product", "name": "Lamp", "sku": "L-1",
        "offers": {"@type": "Offer", "price": "12.00", "priceCurrency": "USD"}})
    .to_string();
    let count = bytes / (product.len() + 1);
    format!(
        "<html><body>{}</body></html>",
        script(&serde_json::from_str(&format!("[{}]", vec![product; count].join(","))).unwrap())
    )
}

#[test]
fn a_one_megabyte_script_is_read_well_within_a_pages_budget() {
    let body = large_page(1024 * 1024);
    let url = Url::parse("http://shop.example/").unwrap();
    let started = Instant::now();
    let html = HtmlPage::parse(&body, &url);
    let parsed = started.elapsed();
    let budget = ExtractBudget::unlimited();
    let data = StructuredData::read(&html, &budget);
    let read = items(&data, "Product", &[NAME, PRICE]);
    let took = started.elapsed();
    assert!(read.len() > 9_000, "{}", read.len());
    assert_eq!(read[0], json!({"name": "Lamp", "price": "12.00"}));
    eprintln!("1 MiB of JSON-LD: page parsed in {parsed:?}, read in {took:?} in all");
    // Debug builds are ~10x slower than release; the bound is for a loaded machine.
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_twenty_megabyte_script_ends_within_the_budget_or_its_value_bound() {
    let body = large_page(20 * 1024 * 1024);
    let url = Url::parse("http://shop.example/").unwrap();
    let html = HtmlPage::parse(&body, &url);
    // Within the values a page may hold it is skipped whole...
    let data = StructuredData::read(&html, &ExtractBudget::unlimited());
    assert_eq!(data.skipped_scripts, 1, "over {MAX_PAGE_VALUES} values");
    assert!(data.json_ld.is_empty());
    // ...and a short budget ends it sooner.
    let budget = ExtractBudget::new(Duration::from_millis(20), CancelFlag::default());
    let started = Instant::now();
    StructuredData::read(&html, &budget);
    assert_eq!(budget.spent(), Some(Spent::Time));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn deep_nesting_is_skipped_or_bounded_never_a_stack_overflow() {
    let deep_json = format!(
        "{}\"x\"{}",
        r#"{"@type": "Product", "a": "#.repeat(5_000),
        "}".repeat(5_000)
    );
    let data = page(&format!(
        r#"<script type="application/ld+json">{deep_json}</script>"#
    ));
    assert_eq!(data.skipped_scripts, 1);
    // Nested as deep as JSON-LD may be: every path and walk stays bounded.
    let nested = format!(
        "{}{{}}{}",
        r#"{"@type": "Product", "a": "#.repeat(100),
        "}".repeat(100)
    );
    let data = page(&format!(
        r#"<script type="application/ld+json">{nested}</script>"#
    ));
    let deep_path = ["a"; crate::domain::site::MAX_PATH_STEPS].join(".");
    let read = items(&data, "Product", &[("deep", &deep_path, false)]);
    assert_eq!(read.len(), 1, "the outermost product only");
    assert_eq!(read[0]["deep"]["@type"], "Product");
    data.listing(&ExtractBudget::unlimited());
}

#[test]
fn malformed_and_odd_values_are_skipped_not_a_crash() {
    let body = [
        r#"<script type="application/ld+json">{"@type": 7, "name": "not a type"}</script>"#,
        r#"<script type="application/ld+json">{"@type": ["Product", null, {}], "name": "odd"}</script>"#,
        r#"<script type="application/ld+json">"just a string"</script>"#,
        r#"<script type="application/ld+json">[1, null, true]</script>"#,
        r##"<script type="application/ld+json">{"@type": "Product", "offers": {"@id": "#nowhere"}, "url": 5}</script>"##,
        r#"<script type="application/ld+json">{"@graph": {"@type": "Product", "name": "graph object"}}</script>"#,
    ]
    .concat();
    let data = page(&body);
    assert_eq!(data.skipped_scripts, 0);
    let read = items(&data, "Product", &[NAME, PRICE, URL]);
    assert_eq!(
        read,
        [
            json!({"name": "odd", "price": null, "url": null}),
            json!({"name": null, "price": null, "url": null}),
            json!({"name": "graph object", "price": null, "url": null}),
        ]
    );
    data.listing(&ExtractBudget::unlimited());
}
