//! Hostile value rules on a field: patterns that compile to huge programs
//! or match everywhere, absurd locales, formats and zones, defaults that do
//! not fit. Each is refused with a 422 naming its path. What is accepted
//! but costly is bounded: a preview of the costliest accepted pattern over
//! a page of 300 values of 10,000 characters ends over the page's budget
//! while the api answers, and a list field over hundreds of elements keeps
//! a list's bound.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use super::{post_site, preview_beside_health, valid_site, with};
use crate::{
    Targets,
    client::{Api, Token},
    ledger::Expect,
};

/// Most values a list field keeps (`domain::value::MAX_LIST_VALUES`).
const MAX_LIST_VALUES: usize = 100;
/// How long a preview whose page goes over its budget may take: the
/// budget (EXTRACT_BUDGET_MS, 2 s), one value's match past it, and the fetch.
const BOUNDED_PREVIEW: Duration = Duration::from_secs(30);

/// The title field of a valid site with `rules` over it.
fn titled(targets: &Targets, rules: Value) -> Value {
    with(valid_site(targets), |b| {
        let title = b["fields"]["title"].as_object_mut().expect("a title field");
        for (key, value) in rules.as_object().expect("rules") {
            title.insert(key.clone(), value.clone());
        }
    })
}

pub(super) async fn hostile_rules(api: &Api, targets: &Targets) {
    let deep_groups = format!("{}a{}", "(".repeat(1_000), ")".repeat(1_000));
    let refused: Vec<(&str, Value, &str)> = vec![
        (
            "a pattern compiling to a huge program",
            json!({"regex": r"\w{1000}{1000}"}),
            "fields.title.regex",
        ),
        (
            "counted Unicode classes",
            json!({"regex": r"(?:\p{L}{100}){100}"}),
            "fields.title.regex",
        ),
        (
            "a 100 KB pattern",
            json!({"regex": "a".repeat(100_000)}),
            "fields.title.regex",
        ),
        (
            "groups nested 1,000 deep",
            json!({"regex": deep_groups}),
            "fields.title.regex",
        ),
        (
            "a pattern matching everywhere",
            json!({"regex": "$|"}),
            "fields.title.regex",
        ),
        (
            "a pattern that is none",
            json!({"regex": "(?<"}),
            "fields.title.regex",
        ),
        (
            "a NUL in a pattern",
            json!({"regex": "a\u{0}"}),
            "fields.title.regex",
        ),
        (
            "an unknown locale",
            json!({"number": {"locale": "xx-XX"}}),
            "fields.title.number.locale",
        ),
        (
            "a path for a locale",
            json!({"number": {"locale": "../../etc/passwd"}}),
            "fields.title.number.locale",
        ),
        (
            "a 100 KB locale",
            json!({"number": {"locale": format!("en-{}", "US".repeat(50_000))}}),
            "fields.title.number.locale",
        ),
        (
            "an unknown format",
            json!({"date": {"formats": ["%Q"]}}),
            "fields.title.date.formats[0]",
        ),
        (
            "a format ending in %",
            json!({"date": {"formats": ["%Y", "%d.%m.%"]}}),
            "fields.title.date.formats[1]",
        ),
        (
            "a 100 KB format",
            json!({"date": {"formats": [format!("%Y{}", "x".repeat(100_000))]}}),
            "fields.title.date.formats[0]",
        ),
        (
            "10,000 formats",
            json!({"date": {"formats": vec!["%Y"; 10_000]}}),
            "fields.title.date.formats",
        ),
        (
            "a format naming no date",
            json!({"date": {"formats": ["posted"]}}),
            "fields.title.date.formats[0]",
        ),
        (
            "a zone on Mars",
            json!({"date": {"time_zone": "Mars/Olympus"}}),
            "fields.title.date.time_zone",
        ),
        (
            "a 100 KB zone",
            json!({"date": {"time_zone": "Z".repeat(100_000)}}),
            "fields.title.date.time_zone",
        ),
        (
            "a 100 KB default",
            json!({"default": "d".repeat(100_000)}),
            "fields.title.default",
        ),
        (
            "a default list of 1,000",
            json!({"all": true, "default": vec!["x"; 1_000]}),
            "fields.title.default",
        ),
        (
            "an object for a default",
            json!({"default": {"$where": "1"}}),
            "fields.title.default",
        ),
        (
            "a text default for a number",
            json!({"number": {}, "default": "zero"}),
            "fields.title.default",
        ),
        (
            "a currency field named as a field",
            json!({"number": {"currency_field": "link"}}),
            "fields.title.number.currency_field",
        ),
        (
            "a number and a date",
            json!({"number": {}, "date": {}}),
            "fields.title.date",
        ),
        (
            "an unknown whitespace",
            json!({"whitespace": "\u{1b}[31m"}),
            "fields.title.whitespace",
        ),
        (
            "an unknown number key",
            json!({"number": {"eval": "1"}}),
            "fields.title.number.eval",
        ),
    ];
    for (what, rules, field) in refused {
        let body = titled(targets, rules);
        post_site(
            api,
            &format!("value rules: {what}"),
            &body,
            Expect::invalid(field),
        )
        .await;
    }
    costly_pattern_is_bounded(api, targets).await;
    long_lists_are_bounded(api, targets).await;
}

/// The costliest pattern found that the bounds still accept (a big program
/// whose groups are resolved over a long match), over 300 titles of 10,000
/// characters (3 MB, under the fleet's PAGE_MAX_BYTES): the preview ends over
/// the page's budget, the api answering meanwhile.
async fn costly_pattern_is_bounded(api: &Api, targets: &Targets) {
    let site = with(
        titled(targets, json!({"regex": r"((?:[a-z]|é){1,368})+$"})),
        |b| {
            b["render"] = json!("http");
            b["search_url"] = json!(format!(
                "{}/hostile/items?n=300&chars=10000&q={{keyword}}",
                targets.fixture
            ));
            b["wait_for"] = Value::Null;
        },
    );
    let what = "preview: the costliest accepted pattern over 300 values of 10,000 characters";
    let body = json!({"site": site, "keyword": "lamp"});
    let started = Instant::now();
    let answer = preview_beside_health(api, &body, what).await;
    let took = started.elapsed();
    let Some(answer) = answer.as_ref().and_then(|a| a.json()) else {
        return;
    };
    let kind = answer["refusal"]["kind"].as_str().unwrap_or("none");
    println!("  the costly-pattern preview ended in {took:?} with refusal kind {kind}");
    if kind != "extraction_over_budget" && answer["items"].as_array().is_none_or(|i| i.len() < 300)
    {
        api.ledger
            .unexpected(what, format!("neither over budget nor read whole: {kind}"));
    }
    if took > BOUNDED_PREVIEW {
        api.ledger
            .let_through(what, format!("took {took:?}, past {BOUNDED_PREVIEW:?}"));
    }
}

/// A list field over every item of a page of 300 (not thousands: the fleet
/// here logs every token its HTML parser reads): one list of at most a
/// list's bound of values.
async fn long_lists_are_bounded(api: &Api, targets: &Targets) {
    let site = with(valid_site(targets), |b| {
        b["render"] = json!("http");
        b["search_url"] = json!(format!(
            "{}/hostile/items?n=300&q={{keyword}}",
            targets.fixture
        ));
        b["item_selector"] = json!("#results");
        b["fields"] = json!({"titles": {"selector": "a.title", "all": true}});
        b["wait_for"] = Value::Null;
    });
    let what = "preview: a list field over 300 elements";
    let answer = api
        .json(
            Method::POST,
            "/api/sites/preview",
            Token::Write,
            &json!({"site": site, "keyword": "lamp"}),
            what,
            Expect::Status(&[200]),
        )
        .await;
    let Some(answer) = answer.as_ref().and_then(|a| a.json()) else {
        return;
    };
    let kept = answer["items"][0]["fields"]["titles"]
        .as_array()
        .map(Vec::len);
    match kept {
        Some(n) if n <= MAX_LIST_VALUES => println!("  a list over 300 elements kept {n}"),
        other => api.ledger.let_through(
            what,
            format!("kept {other:?} values, past {MAX_LIST_VALUES}"),
        ),
    }
}
