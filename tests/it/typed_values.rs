//! Typed, clean values: a shop's prices, dates, lists, captures and links
//! stored as numbers, dates, lists and absolute URLs in http and browser
//! modes; a value that does not parse counted in the run's data health; a
//! price change as one field diff with both numbers; list fields in the CSV
//! export; the preview showing each field raw and typed (in the console
//! too, whose editor keeps a field's rules when it saves); and each bad
//! setting refused with a 422 naming its path.

use std::{collections::BTreeMap, time::Duration};

use chrono::{Days, Utc};
use serde_json::{Value, json};

use crate::support::{ConsoleBrowser, ON_DEMAND, PriceShop, Roles, TestApp};

const LIMIT: Duration = Duration::from_secs(60);

/// The date `days` days before today in Seoul, read before and after a
/// crawl (a crawl across midnight may see either).
fn seoul_days_ago(days: u64) -> String {
    let today = Utc::now()
        .with_timezone(&chrono_tz::Asia::Seoul)
        .date_naive();
    today
        .checked_sub_days(Days::new(days))
        .unwrap()
        .format("%Y-%m-%d")
        .to_string()
}

/// A completed run of a new keyword on `site`, and its results by title.
async fn crawl(app: &TestApp, keyword: &str, site: i64) -> (Value, BTreeMap<String, Value>) {
    let run = app.crawl_to_completion(keyword, site, LIMIT).await;
    let results = by_title(app.results_of_run(run["id"].as_i64().unwrap()).await);
    (run, results)
}

fn by_title(results: Vec<Value>) -> BTreeMap<String, Value> {
    results
        .into_iter()
        .map(|r| (r["fields"]["title"].as_str().unwrap().to_owned(), r))
        .collect()
}

/// What the shop's lamp and desk are once typed, their relative dates aside.
fn expected(base: &str) -> (Value, Value) {
    let lamp = json!({
        "title": "Lamp", "link": format!("{base}/p/1"),
        "price": 1_299_000, "currency": "KRW", "price_de": 1299, "price_us": 1299,
        "posted": "2025-03-04T10:00:00+09:00",
        "tags": ["red", "big lamp"], "sku": "LMP-1",
        "specs": format!("{base}/p/1/specs"), "stock": 0,
    });
    let desk = json!({
        "title": "Desk", "link": format!("{base}/p/2"),
        "price": null, "currency": null, "price_de": 89.9, "price_us": 89.9,
        "posted": "2025-03-05T09:30:00+09:00",
        "tags": [], "sku": "DSK-2", "specs": null, "stock": 12,
    });
    (lamp, desk)
}

/// `fields` without `seen` (relative to today), checked apart.
fn checked_seen(mut fields: Value, days: u64, before: &str) -> Value {
    let seen = fields["seen"].take();
    let after = seoul_days_ago(days);
    assert!(
        seen == before || seen == after.as_str(),
        "seen {seen} is {days} day(s) before today in Seoul"
    );
    fields.as_object_mut().unwrap().remove("seen");
    fields
}

#[tokio::test]
async fn an_http_crawl_stores_numbers_dates_lists_and_absolute_urls_and_counts_what_did_not_parse()
{
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = PriceShop::start().await;
    let site = app.create_site(shop.site_body("typed shop", "http")).await;
    let (two_days, one_day) = (seoul_days_ago(2), seoul_days_ago(1));
    let (run, results) = crawl(&app, "lamp", site).await;

    assert_eq!(
        results.keys().collect::<Vec<_>>(),
        ["Desk", "Lamp"],
        "the ad has no title, which is required: left out"
    );
    let (lamp, desk) = expected(&shop.base);
    assert_eq!(
        checked_seen(results["Lamp"]["fields"].clone(), 2, &two_days),
        lamp
    );
    assert_eq!(
        checked_seen(results["Desk"]["fields"].clone(), 1, &one_day),
        desk
    );
    assert!(
        results["Lamp"]["fields"]["price"].is_u64(),
        "a number, not text"
    );

    assert_eq!(run["items_found"], 2);
    assert_eq!(run["health"], "degraded", "{run}");
    assert_eq!(
        run["health_reason"],
        "price: 1 value(s) did not parse (first: \"Call for price\" is not a number); \
         title: 1 item(s) left out, required and without a value"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_price_that_moves_from_1299000_to_1199000_is_one_field_diff_with_both_numbers() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = PriceShop::start().await;
    let site = app
        .create_site(shop.site_body("moving price", "http"))
        .await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let first = app.crawl(keyword).await[0];
    app.wait_until_completed(first, LIMIT).await;

    shop.price_lamp(1_199_000);
    let second = app.crawl(keyword).await[0];
    let run = app.wait_until_completed(second, LIMIT).await;
    assert_eq!(
        (&run["items_new"], &run["items_changed"]),
        (&json!(0), &json!(1)),
        "{run}"
    );
    let changed = app
        .results(&format!("run_id={second}&change=changed"))
        .await;
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["fields"]["title"], "Lamp");
    assert_eq!(
        changed[0]["diff"],
        json!({"price": {"old": 1_299_000, "new": 1_199_000}}),
        "the currency and every other field unchanged"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_csv_export_of_a_site_writes_each_field_in_a_column_and_a_list_one_value_a_line() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = PriceShop::start().await;
    let site = app
        .create_site(shop.site_body("exported shop", "http"))
        .await;
    crawl(&app, "lamp", site).await;

    let csv = app
        .http
        .get(format!(
            "{}/api/results/export?format=csv&site_id={site}",
            app.base
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let cell = |row: &csv::StringRecord, name: &str| {
        let at = header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("{name} in {header:?}"));
        row[at].to_owned()
    };
    let lamp = rows
        .iter()
        .find(|row| cell(row, "fields.title") == "Lamp")
        .expect("the lamp's row");
    assert_eq!(cell(lamp, "fields.tags"), "red\nbig lamp");
    assert_eq!(cell(lamp, "fields.price"), "1299000");
    assert_eq!(cell(lamp, "fields.currency"), "KRW");
    assert_eq!(cell(lamp, "fields.posted"), "2025-03-04T10:00:00+09:00");
    let desk = rows
        .iter()
        .find(|row| cell(row, "fields.title") == "Desk")
        .expect("the desk's row");
    assert_eq!(
        cell(desk, "fields.price"),
        "",
        "a value that did not parse is empty"
    );
    assert_eq!(cell(desk, "fields.price_de"), "89.9");
    assert_eq!(cell(desk, "fields.tags"), "");
    app.stop().await;
}

#[tokio::test]
async fn a_preview_shows_each_field_raw_and_typed_with_what_did_not_parse() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = PriceShop::start().await;
    let body = json!({"site": shop.site_body("previewed shop", "http"), "keyword": "lamp"});
    let (status, answer) = app.post("/api/sites/preview", body).await;
    assert_eq!(status, 200, "{answer}");
    let items = answer["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "the ad is shown, marked left out: {answer}");
    assert_eq!(items[0]["raw"]["price"], "₩1,299,000");
    assert_eq!(items[0]["fields"]["price"], 1_299_000);
    assert_eq!(items[0]["raw"]["tags"], json!(["red", "big lamp"]));
    assert_eq!(items[1]["raw"]["price"], "Call for price");
    assert_eq!(items[1]["fields"]["price"], Value::Null);
    assert_eq!(
        items[1]["errors"],
        json!({"price": "\"Call for price\" is not a number"})
    );
    assert_eq!(items[2]["left_out_by"], "title");
    assert_eq!(answer["pages"][0]["items"], 2, "a crawl would keep two");
    assert_eq!(answer["empty_fields"]["price"], 1);
    app.stop().await;
}

#[tokio::test]
async fn each_bad_value_setting_is_refused_with_a_422_naming_its_path() {
    let app = TestApp::spawn().await;
    let shop = PriceShop::start().await;
    let bad: [(Value, &str); 14] = [
        (
            json!({"number": {"locale": "xx-XX"}}),
            "fields.price.number.locale",
        ),
        (
            json!({"number": {"locale": "../../etc/passwd"}}),
            "fields.price.number.locale",
        ),
        (json!({"regex": "("}), "fields.price.regex"),
        (json!({"regex": r"\w{1000}{1000}"}), "fields.price.regex"),
        (json!({"regex": "a".repeat(501)}), "fields.price.regex"),
        (
            json!({"date": {"formats": ["%Q"]}}),
            "fields.price.date.formats[0]",
        ),
        (
            json!({"date": {"time_zone": "Mars/Olympus"}}),
            "fields.price.date.time_zone",
        ),
        (json!({"whitespace": "squash"}), "fields.price.whitespace"),
        (
            json!({"number": {}, "default": "zero"}),
            "fields.price.default",
        ),
        (
            json!({"default": 0, "required": true, "number": {}}),
            "fields.price.required",
        ),
        (
            json!({"number": {"currency_field": "title"}}),
            "fields.price.number.currency_field",
        ),
        (json!({"number": {}, "date": {}}), "fields.price.date"),
        (json!({"number": {}, "link": true}), "fields.price.link"),
        (
            json!({"number": {"decimals": 2}}),
            "fields.price.number.decimals",
        ),
    ];
    for (settings, path) in bad {
        let mut body = shop.site_body("bad settings", "http");
        let price = body["fields"]["price"].as_object_mut().unwrap();
        price.remove("number");
        for (key, value) in settings.as_object().unwrap() {
            price.insert(key.clone(), value.clone());
        }
        let (status, answer) = app.post("/api/sites", body).await;
        assert_eq!(status, 422, "{settings}: {answer}");
        assert_eq!(answer["error"]["field"], path, "{settings}: {answer}");
    }
    let (status, site) = app.post("/api/sites", shop.site_body("good", "http")).await;
    assert_eq!(status, 201, "{site}");
    assert_eq!(
        site["fields"]["price"],
        json!({"selector": ".price", "number": {"locale": "ko-KR", "currency_field": "currency"}}),
        "the rules shown as they were sent"
    );
    assert_eq!(site["fields"]["seen"]["date"]["time_zone"], "Asia/Seoul");
    app.stop().await;
}

#[tokio::test]
async fn a_browser_crawl_types_the_same_values_as_an_http_crawl() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let shop = PriceShop::start().await;
    let http = app
        .create_site(shop.site_body("shop over http", "http"))
        .await;
    let browser = app
        .create_site(shop.site_body("shop in chrome", "browser"))
        .await;
    let (_, over_http) = crawl(&app, "lamp", http).await;
    let (run, in_chrome) = crawl(&app, "lamp", browser).await;
    let fields = |results: &BTreeMap<String, Value>| -> BTreeMap<String, Value> {
        results
            .iter()
            .map(|(title, r)| (title.clone(), r["fields"].clone()))
            .collect()
    };
    assert_eq!(fields(&in_chrome), fields(&over_http));
    let (lamp, _) = expected(&shop.base);
    let mut typed = in_chrome["Lamp"]["fields"].clone();
    typed.as_object_mut().unwrap().remove("seen");
    assert_eq!(typed, lamp);
    assert_eq!(run["health"], "degraded", "{run}");
    assert!(
        run["health_reason"]
            .as_str()
            .unwrap()
            .starts_with("price: 1 value(s) did not parse"),
        "{run}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_console_previews_fields_raw_and_typed_and_saving_keeps_their_rules() {
    let app = TestApp::spawn_with_console(Roles::fleet(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec!["typed-values-writer".into()];
    })
    .await;
    let shop = PriceShop::start().await;
    let token = app.token().expect("a write token").to_owned();
    let body = shop.site_body("console shop", "http");
    let (status, created) = app.post("/api/sites", body).await;
    assert_eq!(status, 201, "{created}");
    let site = created["id"].as_i64().unwrap();
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(&token).await;
    browser.go(&format!("#/sites/{site}")).await;
    browser.wait_for_text("#site-title", "console shop").await;

    browser.type_into("#preview-keyword", "lamp").await;
    browser.click("#preview-run").await;
    browser.wait_for_text("#preview-summary", "items").await;
    let table = browser.wait_for_text("#preview-items", "1299000").await;
    assert!(
        table.contains("₩1,299,000"),
        "the raw value beside the typed one: {table}"
    );
    assert!(
        table.contains("\"Call for price\" is not a number"),
        "{table}"
    );
    assert!(table.contains("left out: no title"), "{table}");

    browser.click("#save-site").await;
    let saved = crate::support::eventually(LIMIT, "the site saved again", || async {
        let (_, saved) = app.get(&format!("/api/sites/{site}")).await;
        (saved["updated_at"] != created["updated_at"]).then_some(saved)
    })
    .await;
    assert_eq!(saved["fields"], created["fields"], "every rule kept");
    browser.close().await;
    app.stop().await;
}
