//! Every rule applied to what extraction reads, and every bad setting
//! refused naming its path.

use serde_json::{Value, json};
use url::Url;

use super::*;

fn rules(settings: Value) -> ValueRules {
    input(settings).parse("fields.f", false).unwrap()
}

fn input(settings: Value) -> ValueInput {
    let s = |key: &str| settings.get(key).cloned();
    ValueInput {
        whitespace: s("whitespace").map(|v| v.as_str().unwrap().to_owned()),
        regex: s("regex").map(|v| v.as_str().unwrap().to_owned()),
        all: s("all").map(|v| v.as_bool().unwrap()),
        number: s("number").map(|v| serde_json::from_value(v).unwrap()),
        date: s("date").map(|v| serde_json::from_value(v).unwrap()),
        default: s("default"),
        required: s("required").map(|v| v.as_bool().unwrap()),
    }
}

fn base() -> Url {
    Url::parse("http://shop.example/list/page?q=a").unwrap()
}

fn apply(rules: &ValueRules, raw: Value) -> Typed {
    let base = base();
    let ctx = ValueContext {
        base: &base,
        now: "2025-03-30T01:30:00Z".parse().unwrap(),
    };
    rules.apply(&raw, false, &ctx)
}

#[test]
fn prices_are_numbers_with_their_currency_apart() {
    for (locale, text, amount, code) in [
        ("ko-KR", "₩1,299,000", json!(1_299_000), "KRW"),
        ("de-DE", "1.299,00 €", json!(1299), "EUR"),
        ("en-US", "$1,299", json!(1299), "USD"),
        ("pl-PL", "1 299,00 zł", json!(1299), "PLN"),
    ] {
        let price = rules(json!({"number": {"locale": locale, "currency_field": "currency"}}));
        let typed = apply(&price, json!(text));
        assert_eq!(typed.value, amount, "{text}");
        assert_eq!(typed.currency, Some(json!(code)), "{text}");
        assert_eq!(typed.unparsed, 0);
    }
    let no_currency = rules(json!({"number": {"locale": "en-US"}}));
    assert_eq!(apply(&no_currency, json!("$5")).currency, None);
    let named_none = rules(json!({"number": {"currency_field": "c"}}));
    assert_eq!(apply(&named_none, json!("5")).currency, Some(Value::Null));
}

#[test]
fn a_value_that_does_not_parse_is_null_and_counted_not_defaulted() {
    let price = rules(json!({"number": {"locale": "de-DE"}, "default": 0}));
    let typed = apply(&price, json!("Preis auf Anfrage"));
    assert_eq!(typed.value, Value::Null);
    assert_eq!(typed.unparsed, 1);
    assert_eq!(
        typed.error.unwrap().to_string(),
        "\"Preis auf Anfrage\" is not a number"
    );
    let wrong_locale = apply(&price, json!("₩1,299,000"));
    assert_eq!(
        wrong_locale.error.unwrap().to_string(),
        "\"₩1,299,000\" is not a number as de-DE writes one (1.234,5)"
    );
    assert_eq!(
        apply(&price, Value::Null).value,
        json!(0),
        "missing: the default"
    );
    assert_eq!(
        apply(&price, json!("  ")).value,
        json!(0),
        "blank is missing"
    );
}

#[test]
fn a_pattern_takes_its_first_group_and_no_match_is_no_value() {
    let sku = rules(json!({"regex": r"SKU[:\s]*([A-Z0-9-]+)", "default": "none"}));
    assert_eq!(apply(&sku, json!("Lamp — SKU: AB-12")).value, "AB-12");
    let none = apply(&sku, json!("Lamp"));
    assert_eq!((none.value, none.unparsed), (json!("none"), 0));
    let reviews = rules(json!({"regex": r"([\d,]+) reviews", "number": {}}));
    assert_eq!(
        apply(&reviews, json!("4.5 stars, 1,203 reviews")).value,
        1203
    );
}

#[test]
fn all_values_make_a_list_and_each_bad_one_is_left_out_and_counted() {
    let tags = rules(json!({"all": true}));
    let typed = apply(&tags, json!([" red ", "", "blue"]));
    assert_eq!(
        typed.value,
        json!([" red ", "blue"]),
        "blank values are none"
    );
    assert_eq!(apply(&tags, Value::Null).value, json!([]));
    let sizes = rules(json!({"all": true, "number": {}}));
    let typed = apply(&sizes, json!(["38", "n/a", "40,5"]));
    assert_eq!(typed.value, json!([38, 40.5]));
    assert_eq!(typed.unparsed, 1);
    let matches = rules(json!({"all": true, "regex": r"#(\w+)"}));
    assert_eq!(
        apply(&matches, json!(["#a #b", "#c"])).value,
        json!(["a", "b", "c"])
    );
    let many: Vec<Value> = (0..500).map(|n| json!(n.to_string())).collect();
    let typed = apply(&tags, Value::Array(many));
    assert_eq!(typed.value.as_array().unwrap().len(), MAX_LIST_VALUES);
}

#[test]
fn a_required_field_without_a_value_marks_its_item_left_out() {
    let price = rules(json!({"number": {}, "required": true}));
    assert!(apply(&price, Value::Null).missing_required);
    assert!(
        apply(&price, json!("—")).missing_required,
        "a failed value is none"
    );
    assert!(!apply(&price, json!("5")).missing_required);
    let tags = rules(json!({"all": true, "required": true}));
    assert!(apply(&tags, json!([])).missing_required);
}

#[test]
fn whitespace_links_and_dates() {
    let collapse = rules(json!({"whitespace": "collapse"}));
    assert_eq!(apply(&collapse, json!(" a \n\t b ")).value, "a b");
    let keep = rules(json!({"whitespace": "keep"}));
    assert_eq!(apply(&keep, json!("a \n b")).value, "a \n b");
    let link = input(json!({"regex": r"go\('([^']+)'\)"}))
        .parse("fields.f", true)
        .unwrap();
    let base = base();
    let ctx = ValueContext {
        base: &base,
        now: chrono::Utc::now(),
    };
    assert_eq!(
        link.apply(&json!("javascript:go('../p/7')"), true, &ctx)
            .value,
        "http://shop.example/p/7"
    );
    let posted = rules(json!({"date": {"time_zone": "Europe/Berlin"}}));
    assert_eq!(
        apply(&posted, json!("3 hours ago")).value,
        "2025-03-29T23:00:00+01:00"
    );
    assert_eq!(apply(&posted, json!("someday")).unparsed, 1);
}

#[test]
fn a_json_apis_values_keep_their_type_or_are_read_from_text() {
    let price = rules(json!({"number": {}}));
    assert_eq!(apply(&price, json!(19.99)).value, json!(19.99));
    assert_eq!(apply(&price, json!("19,99 €")).value, json!(19.99));
    assert_eq!(apply(&price, json!(true)).unparsed, 1);
    let text = rules(json!({"default": "x"}));
    assert_eq!(apply(&text, json!({"a": 1})).value, json!({"a": 1}));
    let pattern = rules(json!({"regex": r"\d"}));
    assert_eq!(apply(&pattern, json!(1234)).value, "1");
    assert_eq!(apply(&pattern, json!({"a": 1})).unparsed, 1);
    let posted = rules(json!({"date": {}}));
    assert_eq!(apply(&posted, json!("2025-03-04")).value, "2025-03-04");
}

#[test]
fn rules_are_stored_in_the_shape_a_client_sends_and_read_back_equal() {
    let settings = json!({
        "whitespace": "collapse", "regex": r"(\d+)", "all": false,
        "number": {"locale": "ko-KR", "currency_field": "currency"},
        "default": 0,
    });
    let parsed = rules(settings);
    let stored = serde_json::to_value(&parsed).unwrap();
    assert_eq!(
        stored,
        json!({"whitespace": "collapse", "regex": r"(\d+)",
               "number": {"locale": "ko-KR", "currency_field": "currency"}, "default": 0})
    );
    assert_eq!(
        serde_json::from_value::<ValueRules>(stored).unwrap(),
        parsed
    );
    let none: ValueRules = serde_json::from_value(json!({})).unwrap();
    assert!(none.is_plain());
    assert_eq!(serde_json::to_value(&none).unwrap(), json!({}));
}

#[test]
fn each_bad_setting_is_refused_naming_its_path() {
    for (settings, path) in [
        (json!({"whitespace": "squash"}), "fields.f.whitespace"),
        (json!({"regex": "("}), "fields.f.regex"),
        (json!({"regex": r"\w{1000}{1000}"}), "fields.f.regex"),
        (
            json!({"number": {"locale": "xx-XX"}}),
            "fields.f.number.locale",
        ),
        (
            json!({"number": {"currency_field": ""}}),
            "fields.f.number.currency_field",
        ),
        (
            json!({"all": true, "number": {"currency_field": "c"}}),
            "fields.f.number.currency_field",
        ),
        (json!({"number": {}, "date": {}}), "fields.f.date"),
        (
            json!({"date": {"formats": ["%Q"]}}),
            "fields.f.date.formats[0]",
        ),
        (
            json!({"date": {"time_zone": "Mars/Base"}}),
            "fields.f.date.time_zone",
        ),
        (json!({"number": {}, "default": "zero"}), "fields.f.default"),
        (json!({"default": 5}), "fields.f.default"),
        (json!({"all": true, "default": "x"}), "fields.f.default"),
        (json!({"default": "a\u{0}b"}), "fields.f.default"),
        (json!({"default": "x".repeat(2000)}), "fields.f.default"),
        (
            json!({"default": "x", "required": true}),
            "fields.f.required",
        ),
    ] {
        let err = input(settings.clone())
            .parse("fields.f", false)
            .unwrap_err();
        assert_eq!(err.field, path, "{settings}: {}", err.message);
    }
    let err = input(json!({"number": {}}))
        .parse("fields.f", true)
        .unwrap_err();
    assert_eq!(err.field, "fields.f.link");
}
