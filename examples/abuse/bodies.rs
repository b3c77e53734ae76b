//! Class 1: hostile site, keyword and URL list bodies to POST /api/sites, PUT
//! /api/sites/{id}, POST /api/keywords and /api/url-lists (and uploads of URLs),
//! and hostile learnings to POST /api/sites/learn. Each should get a 4xx with the
//! JSON error body, and a rule broken a 422 naming its field; none may get
//! a 5xx or take a process down (a selector nested thousands deep is how a
//! recursive parser overflows its stack). Whatever the API accepts is
//! reported and deleted at once, so nothing hostile is ever crawled. A
//! field's value rules (`transforms`) get the same, and what is accepted
//! but costly is previewed over hostile pages and must stay bounded.

mod learn;
mod rules;
mod shapes;
mod transforms;
mod url_lists;

pub(crate) use url_lists::{create_list, judge_upload};

use std::sync::atomic::{AtomicUsize, Ordering};

use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    Targets,
    client::{Api, Token},
    ledger::{Answer, Expect},
};

/// The control characters put in every text field in turn.
const CONTROL: [(char, &str); 4] = [
    ('\u{0}', "NUL"),
    ('\u{1}', "SOH"),
    ('\u{1b}', "ESC"),
    ('\u{7f}', "DEL"),
];

/// A change to a valid body that slips `c` into one field.
type Tweak = fn(&mut Value, char, &Targets);

/// Every text field of a site, with the field a refusal should name.
const SITE_TEXT_FIELDS: &[(&str, Tweak)] = &[
    ("name", |b, c, _| append(&mut b["name"], c)),
    ("search_url", |b, c, t| {
        b["search_url"] = json!(format!("{}/sea{c}rch?q={{keyword}}", t.fixture))
    }),
    ("item_selector", |b, c, _| {
        append(&mut b["item_selector"], c)
    }),
    ("fields", |b, c, _| {
        let title = b["fields"]["title"].take();
        let fields = b["fields"].as_object_mut().expect("fields");
        fields.remove("title");
        fields.insert(format!("ti{c}tle"), title);
    }),
    ("fields.title.selector", |b, c, _| {
        append(&mut b["fields"]["title"]["selector"], c)
    }),
    ("fields.link.attr", |b, c, _| {
        append(&mut b["fields"]["link"]["attr"], c)
    }),
    ("wait_for", |b, c, _| append(&mut b["wait_for"], c)),
    ("blocked_selector", |b, c, _| {
        append(&mut b["blocked_selector"], c)
    }),
    ("user_agent", |b, c, _| append(&mut b["user_agent"], c)),
    ("headers", |b, c, _| {
        b["headers"] = json!({ format!("X-A{c}b"): "v" })
    }),
    ("headers.Accept-Language", |b, c, _| {
        append(&mut b["headers"]["Accept-Language"], c)
    }),
    ("proxy", |b, c, t| {
        b["proxy"] = json!(format!("http://us{c}er:pw@127.0.0.1:{}", t.proxy_port))
    }),
];

fn append(value: &mut Value, c: char) {
    let text = value.as_str().unwrap_or_default();
    *value = json!(format!("{text}{c}x"));
}

/// Unique site names, so no body is refused only for a name taken.
static NAMES: AtomicUsize = AtomicUsize::new(0);

/// A valid site on the fixture, with every text field set.
pub fn valid_site(targets: &Targets) -> Value {
    json!({
        "name": format!("abuse-{}", NAMES.fetch_add(1, Ordering::Relaxed)),
        "search_url": format!("{}/search?q={{keyword}}", targets.fixture),
        "render": "browser",
        "item_selector": "li.product",
        "fields": {"title": {"selector": "a.title"}, "link": {"selector": "a.title", "attr": "href"}},
        "wait_for": "#results",
        "blocked_selector": ".captcha",
        "user_agent": "abuse/1.0",
        "headers": {"Accept-Language": "en"},
    })
}

/// A valid site in json mode, paged by token.
fn valid_json_site(targets: &Targets) -> Value {
    json!({
        "name": format!("abuse-{}", NAMES.fetch_add(1, Ordering::Relaxed)),
        "render": "json",
        "search_url": format!("{}/api/search?q={{keyword}}", targets.fixture),
        "json": {"items": "/items", "next_token": "/next_token", "token_param": "token"},
        "fields": {"title": {"pointer": "/title"}, "url": {"pointer": "/url", "link": true}},
    })
}

fn with(mut body: Value, tweak: impl FnOnce(&mut Value)) -> Value {
    tweak(&mut body);
    body
}

pub async fn run(api: &Api, targets: &Targets) -> anyhow::Result<()> {
    // The site every PUT replaces, and every keyword names.
    let target = valid_site(targets);
    let answer = api
        .json(
            Method::POST,
            "/api/sites",
            Token::Write,
            &target,
            "set-up site",
            Expect::Status(&[201]),
        )
        .await;
    let id = created_id(answer.as_ref())
        .ok_or_else(|| anyhow::anyhow!("the set-up site was not created"))?;

    control_characters(api, targets, id, &target).await;
    selectors(api, targets, id, &target).await;
    shapes::sizes_and_shapes(api, targets).await;
    shapes::content_types(api, targets).await;
    rules::schedules(api, id).await;
    rules::json_pointers(api, targets).await;
    rules::paging(api, targets).await;
    rules::page_actions(api, targets).await;
    rules::detail_pages(api, targets).await;
    transforms::hostile_rules(api, targets).await;
    learn::hostile_learnings(api, targets).await;
    url_lists::hostile_lists(api, id).await;
    Ok(())
}

fn created_id(answer: Option<&Answer>) -> Option<i64> {
    answer.filter(|a| a.status == 201)?.json()?["id"].as_i64()
}

/// POSTs a site; one the API accepts is deleted at once.
async fn post_site(api: &Api, what: &str, body: &Value, expect: Expect) {
    let answer = api
        .json(Method::POST, "/api/sites", Token::Write, body, what, expect)
        .await;
    if let Some(id) = created_id(answer.as_ref()) {
        delete(api, &format!("/api/sites/{id}")).await;
    }
}

/// POSTs a keyword; one the API accepts is deleted at once, before the
/// scheduler (which re-reads keywords every second) fires it.
async fn post_keyword(api: &Api, what: &str, body: &Value, expect: Expect) {
    let answer = api
        .json(
            Method::POST,
            "/api/keywords",
            Token::Write,
            body,
            what,
            expect,
        )
        .await;
    if let Some(id) = created_id(answer.as_ref()) {
        delete(api, &format!("/api/keywords/{id}")).await;
    }
}

async fn delete(api: &Api, path: &str) {
    api.call(
        "clean-up of what was accepted",
        api.request(Method::DELETE, path, Token::Write),
        Expect::Status(&[204]),
    )
    .await;
}

async fn control_characters(api: &Api, targets: &Targets, id: i64, target: &Value) {
    let put_path = format!("/api/sites/{id}");
    for (field, tweak) in SITE_TEXT_FIELDS {
        for (c, name) in CONTROL {
            let what = format!("{name} in {field}");
            let body = with(valid_site(targets), |b| tweak(b, c, targets));
            post_site(api, &what, &body, Expect::invalid(field)).await;
            let body = with(target.clone(), |b| tweak(b, c, targets));
            api.json(
                Method::PUT,
                &put_path,
                Token::Write,
                &body,
                &what,
                Expect::invalid(field),
            )
            .await;
        }
    }
    for (c, name) in CONTROL {
        let body =
            json!({"keyword": format!("lap{c}top"), "site_ids": [id], "schedule": "0 0 0 1 1 *"});
        post_keyword(
            api,
            &format!("{name} in keyword"),
            &body,
            Expect::invalid("keyword"),
        )
        .await;
        let body =
            json!({"keyword": "laptop", "site_ids": [id], "schedule": format!("0 0{c} 0 1 1 *")});
        post_keyword(
            api,
            &format!("{name} in schedule"),
            &body,
            Expect::invalid("schedule"),
        )
        .await;
        let body = json!({"keyword": "laptop", "site_ids": [id], "schedule": "0 0 0 1 1 *",
                          "timezone": format!("Asia/{c}Seoul")});
        post_keyword(
            api,
            &format!("{name} in timezone"),
            &body,
            Expect::invalid("timezone"),
        )
        .await;
    }
    for jitter in [json!(-1), json!(3601), json!(i64::MAX), json!(u64::MAX)] {
        let body = json!({"keyword": "laptop", "site_ids": [id], "schedule": "0 0 0 1 1 *",
                          "jitter_secs": jitter});
        post_keyword(
            api,
            &format!("jitter_secs {jitter}"),
            &body,
            Expect::invalid("jitter_secs"),
        )
        .await;
    }
}

/// `:is(` nested `depth` deep around `a`.
fn nested_is(depth: usize) -> String {
    format!("{}a{}", ":is(".repeat(depth), ")".repeat(depth))
}

async fn selectors(api: &Api, targets: &Targets, id: i64, target: &Value) {
    // About 15 KB: 2,500 levels.
    let deep = nested_is(2_500);
    let body = with(valid_site(targets), |b| b["item_selector"] = json!(deep));
    post_site(
        api,
        "item_selector nested 2,500 :is( deep",
        &body,
        Expect::invalid("item_selector"),
    )
    .await;
    let body = with(target.clone(), |b| b["item_selector"] = json!(deep));
    api.json(
        Method::PUT,
        &format!("/api/sites/{id}"),
        Token::Write,
        &body,
        "item_selector nested 2,500 :is( deep",
        Expect::invalid("item_selector"),
    )
    .await;
    let body = with(valid_site(targets), |b| {
        b["fields"]["title"]["selector"] = json!(deep)
    });
    post_site(
        api,
        "field selector nested 2,500 :is( deep",
        &body,
        Expect::invalid("fields.title.selector"),
    )
    .await;

    costly_selectors(api, targets).await;

    let long: [(&str, &str, String); 5] = [
        (
            "item_selector",
            "200 KB compound selector",
            format!("li{}", ".c".repeat(100_000)),
        ),
        (
            "item_selector",
            "100 KB selector list",
            format!("{}a", "a,".repeat(50_000)),
        ),
        (
            "item_selector",
            "500 KB attribute value",
            format!("[x=\"{}\"]", "a".repeat(500_000)),
        ),
        (
            "wait_for",
            "200 KB selector",
            format!("#r{}", ".c".repeat(100_000)),
        ),
        (
            "blocked_selector",
            "200 KB selector",
            format!("#b{}", ".c".repeat(100_000)),
        ),
    ];
    for (field, what, selector) in long {
        let body = with(valid_site(targets), |b| b[field] = json!(selector));
        post_site(
            api,
            &format!("{field}: {what}"),
            &body,
            Expect::invalid(field),
        )
        .await;
    }
}

/// `:is(` nested `depth` deep with a descendant combinator at each level: its
/// matching costs time exponential in the depth.
/// Posts a preview that costs a worker its whole budget and, half a second in,
/// asks `/health`, which must still answer 200 (the extraction runs off the
/// runtime); the preview's answer.
async fn preview_beside_health(api: &Api, body: &Value, what: &str) -> Option<Answer> {
    // Waited for past the bound a preview must keep (the api's own preview
    // timeout, 30 s), so a slow preview is judged slow, not dropped.
    let preview = api.call(
        what,
        api.request(Method::POST, "/api/sites/preview", Token::Write)
            .json(body)
            .timeout(std::time::Duration::from_secs(45)),
        Expect::Status(&[200]),
    );
    let health = async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        api.call(
            "/health while that preview runs",
            api.request(Method::GET, "/health", Token::None),
            Expect::Status(&[200]),
        )
        .await
    };
    let (answer, _) = tokio::join!(preview, health);
    answer
}

fn worst_case(depth: usize) -> String {
    let mut selector = ".zz *".to_owned();
    for _ in 1..depth {
        selector = format!(":is({selector}) *");
    }
    format!(":is({selector})")
}

/// Selectors whose matching would stall a worker: past the nesting bound
/// (or hiding nesting behind a comment) they are refused; at the bound, a
/// preview over a page nested 200 deep ends over budget while the api
/// answers.
async fn costly_selectors(api: &Api, targets: &Targets) {
    let hidden = format!("/*'*/{}", nested_is(198));
    for (what, selector) in [
        ("item_selector: a comment hiding 198 levels of :is(", hidden),
        ("item_selector: worst case 5 levels deep", worst_case(5)),
    ] {
        let body = with(valid_site(targets), |b| {
            b["item_selector"] = json!(selector)
        });
        post_site(api, what, &body, Expect::invalid("item_selector")).await;
    }
    let site = with(valid_site(targets), |b| {
        b["render"] = json!("http");
        b["search_url"] = json!(format!("{}/deep?depth=200&q={{keyword}}", targets.fixture));
        b["item_selector"] = json!(worst_case(4));
        b["wait_for"] = Value::Null;
    });
    let body = json!({"site": site, "keyword": "lamp"});
    let answer = preview_beside_health(
        api,
        &body,
        "preview with the worst selector accepted, over a deep page",
    )
    .await;
    if let Some(kind) = answer
        .as_ref()
        .and_then(Answer::json)
        .map(|a| a["refusal"]["kind"].clone())
    {
        println!("  the worst-case preview ended with refusal kind {kind}");
    }
}
