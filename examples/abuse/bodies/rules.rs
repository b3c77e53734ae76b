//! Bodies that read well but break a rule of the domain: schedules firing
//! more often than once a minute (or huge, or odd), JSON pointers that
//! are no pointers, paging that does not fit its site, page actions out of
//! their bounds, and detail pages that follow nothing or read too much.

use serde_json::{Value, json};

use super::{Tweak, post_keyword, post_site, valid_json_site, valid_site, with};
use crate::{Targets, client::Api, ledger::Expect};

pub(super) async fn schedules(api: &Api, site: i64) {
    // Each fires more often than every 60 s, somewhere.
    let sub_minute = [
        "* * * * * *",
        "*/1 * * * * *",
        "*/30 * * * * *",
        "0,30 * * * * *",
        "0,1 * * * * *",
        "*/59 * * * * *",
        "0-59 * * * * *",
        "0/15 * * * * *",
        "* 0 0 * * *",
        "*/5 0 12 * * MON",
    ];
    for schedule in sub_minute {
        let body = json!({"keyword": "k", "site_ids": [site], "schedule": schedule});
        post_keyword(
            api,
            &format!("schedule {schedule:?}"),
            &body,
            Expect::invalid("schedule"),
        )
        .await;
    }
    let odd = [
        (
            "a 100 KB list of seconds",
            format!("{}0 * * * * *", "0,".repeat(50_000)),
            Expect::invalid("schedule"),
        ),
        (
            "100,000 fields",
            "0 ".repeat(100_000),
            Expect::invalid("schedule"),
        ),
        (
            "a 100 KB day list",
            format!("0 0 0 {}1 * *", "1,".repeat(50_000)),
            Expect::invalid("schedule"),
        ),
        (
            "seconds out of range",
            "60 * * * * *".to_owned(),
            Expect::invalid("schedule"),
        ),
        (
            "seven fields",
            "0 0 0 1 1 * 2099".to_owned(),
            Expect::invalid("schedule"),
        ),
        (
            "never fires (30 February)",
            "0 0 0 30 2 *".to_owned(),
            Expect::NotServerError,
        ),
        (
            "last day of the month",
            "0 0 0 L * *".to_owned(),
            Expect::NotServerError,
        ),
    ];
    for (what, schedule, expect) in odd {
        let body = json!({"keyword": "k", "site_ids": [site], "schedule": schedule});
        post_keyword(api, &format!("schedule: {what}"), &body, expect).await;
    }
}

pub(super) async fn json_pointers(api: &Api, targets: &Targets) {
    let cases: [(&str, &str, Tweak); 9] = [
        ("json.items", "no leading slash", |b, _, _| {
            b["json"]["items"] = json!("items")
        }),
        ("json.items", "a bad ~ escape", |b, _, _| {
            b["json"]["items"] = json!("/a~2b")
        }),
        ("json.items", "a lone ~", |b, _, _| {
            b["json"]["items"] = json!("/~")
        }),
        ("json.items", "a NUL", |b, _, _| {
            b["json"]["items"] = json!("/it\u{0}ems")
        }),
        ("json.next_token", "no leading slash", |b, _, _| {
            b["json"]["next_token"] = json!("next")
        }),
        ("json.token_param", "empty", |b, _, _| {
            b["json"]["token_param"] = json!("")
        }),
        ("fields.title.pointer", "no leading slash", |b, _, _| {
            b["fields"]["title"]["pointer"] = json!("title")
        }),
        ("fields.title", "a selector in json mode", |b, _, _| {
            b["fields"]["title"] = json!({"selector": "a"})
        }),
        ("json", "next_token without token_param", |b, _, _| {
            b["json"] = json!({"items": "/items", "next_token": "/next_token"})
        }),
    ];
    for (field, what, tweak) in cases {
        let body = with(valid_json_site(targets), |b| tweak(b, ' ', targets));
        post_site(
            api,
            &format!("json site, {field}: {what}"),
            &body,
            Expect::invalid(field),
        )
        .await;
    }
    // Valid, if odd: the answer only has to be no 5xx. A query parameter's
    // name may hold anything; it is percent-encoded when sent.
    let body = with(valid_json_site(targets), |b| {
        b["json"]["token_param"] = json!("a&b=c#d")
    });
    post_site(
        api,
        "json site, json.token_param: &, = and #",
        &body,
        Expect::NotServerError,
    )
    .await;
    let odd: [(&str, Value); 3] = [
        ("the whole document as items", json!("")),
        ("50,000 segments", json!("/a".repeat(50_000))),
        (
            "10,000 escapes",
            json!(format!("/{}", "~1~0".repeat(10_000))),
        ),
    ];
    for (what, items) in odd {
        let body = with(valid_json_site(targets), |b| {
            b["json"]["items"] = items.clone()
        });
        post_site(
            api,
            &format!("json site, items: {what}"),
            &body,
            Expect::NotServerError,
        )
        .await;
    }
}

pub(super) async fn paging(api: &Api, targets: &Targets) {
    let search = |query: &str| format!("{}/search?q={{keyword}}{query}", targets.fixture);
    let cases: [(&str, &str, Value, String); 10] = [
        (
            "paging.form",
            "an unknown form",
            json!({"form": "fold"}),
            search(""),
        ),
        (
            "paging.form",
            "a NUL in the form",
            json!({"form": "next\u{0}link"}),
            search(""),
        ),
        (
            "paging.form",
            "a 100 KB form",
            json!({"form": "f".repeat(100_000)}),
            search(""),
        ),
        (
            "paging.selector",
            "next link without a selector",
            json!({"form": "next_link"}),
            search(""),
        ),
        (
            "paging.selector",
            "a selector nested 10,000 deep",
            json!({"form": "next_link", "selector": format!("{}a{}", ":is(".repeat(10_000), ")".repeat(10_000))}),
            search(""),
        ),
        (
            "paging.page_size",
            "offset page size of 2^53",
            json!({"form": "offset", "page_size": 9007199254740992u64}),
            search("&start={offset}"),
        ),
        (
            "paging.page_size",
            "a negative page size",
            json!({"form": "offset", "page_size": -1}),
            search("&start={offset}"),
        ),
        (
            "paging.page_size",
            "a page size on a next link",
            json!({"form": "next_link", "selector": "a", "page_size": 3}),
            search(""),
        ),
        (
            "search_url",
            "{offset} with numbered paging",
            json!({}),
            search("&start={offset}"),
        ),
        (
            "search_url",
            "{page} with a next link",
            json!({"form": "next_link", "selector": "a"}),
            search("&p={page}"),
        ),
    ];
    for (field, what, paging, search_url) in cases {
        let body = with(valid_site(targets), |b| {
            b["paging"] = paging.clone();
            b["search_url"] = json!(search_url);
        });
        post_site(
            api,
            &format!("paging, {field}: {what}"),
            &body,
            Expect::invalid(field),
        )
        .await;
    }
    let body = with(valid_json_site(targets), |b| {
        b["paging"] = json!({"form": "infinite_scroll"})
    });
    post_site(
        api,
        "json site, paging.form: scrolling an API",
        &body,
        Expect::invalid("paging.form"),
    )
    .await;
}

pub(super) async fn page_actions(api: &Api, targets: &Targets) {
    let wait = json!({"action": "wait", "ms": 1});
    let deep = format!("{}a{}", ":is(".repeat(10_000), ")".repeat(10_000));
    let cases: [(&str, &str, Value); 9] = [
        (
            "actions",
            "10,000 steps",
            Value::Array(vec![wait.clone(); 10_000]),
        ),
        (
            "actions[2].selector",
            "a broken selector in the third step",
            json!([wait, wait, {"action": "click", "selector": "a["}]),
        ),
        (
            "actions[0].selector",
            "a selector nested 10,000 deep",
            json!([{"action": "click", "selector": deep}]),
        ),
        (
            "actions[0].action",
            "a NUL in the action",
            json!([{"action": "cli\u{0}ck", "selector": "a"}]),
        ),
        (
            "actions[0].text",
            "100 KB of text to type",
            json!([{"action": "type", "selector": "input", "text": "x".repeat(100_000)}]),
        ),
        (
            "actions[0].key",
            "a key chord",
            json!([{"action": "press", "key": "Control+Alt+Delete"}]),
        ),
        (
            "actions[0].ms",
            "a wait of 2^63 ms",
            json!([{"action": "wait", "ms": i64::MAX}]),
        ),
        (
            "actions[0].timeout_ms",
            "a negative bound",
            json!([{"action": "dismiss", "selector": "a", "timeout_ms": -1}]),
        ),
        (
            "actions[0].ms",
            "a wait of 2^64 ms",
            json!([{"action": "wait", "ms": 18446744073709551615u64}]),
        ),
    ];
    for (field, what, actions) in cases {
        let body = with(valid_site(targets), |b| {
            b["render"] = json!("browser");
            b["actions"] = actions.clone();
        });
        post_site(
            api,
            &format!("page actions, {field}: {what}"),
            &body,
            Expect::invalid(field),
        )
        .await;
    }
    let body = with(valid_site(targets), |b| {
        b["render"] = json!("http");
        b["actions"] = json!([{"action": "wait", "ms": 1}]);
    });
    post_site(
        api,
        "page actions on an http site",
        &body,
        Expect::invalid("actions"),
    )
    .await;
}

/// Detail pages that break a rule: each refused naming its part.
pub(super) async fn detail_pages(api: &Api, targets: &Targets) {
    let deep = format!("{}a{}", ":is(".repeat(10_000), ")".repeat(10_000));
    let sku = json!({"sku": {"selector": ".sku"}});
    let many: serde_json::Map<String, Value> = (0..1000)
        .map(|n| (format!("f{n}"), json!({"selector": "b"})))
        .collect();
    let cases: [(&str, &str, Value); 9] = [
        (
            "detail.url_field",
            "a URL field the list does not have",
            json!({"url_field": "nope", "fields": sku}),
        ),
        (
            "detail.url_field",
            "a URL field that is no URL",
            json!({"url_field": "title", "fields": sku}),
        ),
        (
            "detail.url_field",
            "a NUL in the URL field",
            json!({"url_field": "li\u{0}nk", "fields": sku}),
        ),
        (
            "detail.fields",
            "1,000 detail fields",
            json!({"url_field": "link", "fields": many}),
        ),
        (
            "detail.fields.sku.selector",
            "a selector nested 10,000 deep",
            json!({"url_field": "link", "fields": {"sku": {"selector": deep}}}),
        ),
        (
            "detail.fields.title",
            "a detail field taking a list field's name",
            json!({"url_field": "link", "fields": {"title": {"selector": "h1"}}}),
        ),
        (
            "detail.read.every_hours",
            "every 2^63 hours",
            json!({"url_field": "link", "fields": sku, "read": {"every_hours": i64::MAX}}),
        ),
        (
            "detail.read",
            "a read setting of no known kind",
            json!({"url_field": "link", "fields": sku, "read": ["all"]}),
        ),
        (
            "detail.render",
            "detail pages as a JSON API",
            json!({"url_field": "link", "fields": sku, "render": "json"}),
        ),
    ];
    for (field, what, detail) in cases {
        let body = with(valid_site(targets), |b| b["detail"] = detail.clone());
        post_site(
            api,
            &format!("detail pages, {field}: {what}"),
            &body,
            Expect::invalid(field),
        )
        .await;
    }
}
