//! Bodies of odd sizes and shapes: thousands of fields, huge strings, bodies
//! over the limit, out-of-range numbers, deep JSON, bytes that are not
//! UTF-8, and every content type but JSON.

use reqwest::Method;
use serde_json::{Value, json};

use super::{Tweak, created_id, delete, post_keyword, post_site, valid_site, with};
use crate::{
    Targets,
    client::{Api, Token},
    ledger::Expect,
};

pub(super) async fn sizes_and_shapes(api: &Api, targets: &Targets) {
    let site = valid_site(targets);
    let many_fields: serde_json::Map<String, Value> = (0..5_000)
        .map(|i| (format!("f{i}"), json!({"selector": "a"})))
        .collect();
    let body = with(valid_site(targets), |b| {
        b["fields"] = Value::Object(many_fields)
    });
    post_site(api, "5,000 fields", &body, Expect::invalid("fields")).await;
    let body = with(valid_site(targets), |b| {
        b["fields"] = json!({ "k".repeat(10_000): {"selector": "a"} })
    });
    post_site(api, "a 10 KB field name", &body, Expect::invalid("fields")).await;

    let huge = "h".repeat(900_000);
    let huge_strings: [(&str, Tweak); 5] = [
        ("name", |b, _, _| b["name"] = json!("n".repeat(900_000))),
        ("search_url", |b, _, t| {
            b["search_url"] = json!(format!(
                "{}/search?q={{keyword}}&x={}",
                t.fixture,
                "u".repeat(900_000)
            ))
        }),
        ("item_selector", |b, _, _| {
            b["item_selector"] = json!("a".repeat(900_000))
        }),
        ("user_agent", |b, _, _| {
            b["user_agent"] = json!("u".repeat(900_000))
        }),
        ("headers", |b, _, _| {
            b["headers"] = json!({"X-Big": "v".repeat(900_000)})
        }),
    ];
    for (field, tweak) in huge_strings {
        let body = with(valid_site(targets), |b| tweak(b, ' ', targets));
        post_site(
            api,
            &format!("a 900 KB {field}"),
            &body,
            Expect::invalid(field),
        )
        .await;
    }
    let body = json!({"keyword": huge, "site_ids": [1], "schedule": "0 0 0 1 1 *"});
    post_keyword(api, "a 900 KB keyword", &body, Expect::invalid("keyword")).await;
    let body = with(site.clone(), |b| {
        b["name"] = json!("n".repeat(2 * 1024 * 1024))
    });
    post_site(api, "a 2 MiB body", &body, Expect::Status(&[413])).await;

    let numbers: [(&str, Value); 4] = [
        ("max_pages", json!(1e20)),
        ("max_pages", json!(-1)),
        ("stuck_timeout_secs", json!(i64::MAX)),
        ("max_requests_per_sec", json!(1e308)),
    ];
    for (field, value) in numbers {
        let body = with(valid_site(targets), |b| b[field] = value.clone());
        post_site(
            api,
            &format!("{field} = {value}"),
            &body,
            Expect::invalid(field),
        )
        .await;
    }
    let body = json!({"keyword": "k", "site_ids": [i64::MAX, -1, 0], "schedule": "0 0 0 1 1 *"});
    post_keyword(
        api,
        "unknown and negative site ids",
        &body,
        Expect::invalid("site_ids"),
    )
    .await;
    let body =
        json!({"keyword": "k", "site_ids": [1], "schedule": "0 0 0 1 1 *", "priority": 1e12});
    post_keyword(api, "priority 1e12", &body, Expect::invalid("priority")).await;

    let site_json = site.to_string();
    let deep_array = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_object = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let deep_inside = site_json.replacen("\"a.title\"", &deep_array, 1);
    let raw: Vec<(&str, &str, Vec<u8>)> = vec![
        (
            "/api/sites",
            "10,000 nested arrays",
            deep_array.clone().into_bytes(),
        ),
        (
            "/api/sites",
            "10,000 nested objects",
            deep_object.into_bytes(),
        ),
        (
            "/api/sites",
            "10,000 nested arrays as a selector",
            deep_inside.into_bytes(),
        ),
        (
            "/api/keywords",
            "10,000 nested arrays",
            deep_array.into_bytes(),
        ),
        (
            "/api/sites",
            "invalid UTF-8 in name",
            invalid_utf8(&site_json),
        ),
        (
            "/api/sites",
            "a lone surrogate in name",
            site_json.replacen("abuse-", "\\ud800", 1).into_bytes(),
        ),
        (
            "/api/sites",
            "a duplicate key",
            site_json
                .replacen('{', "{\"name\":\"dup\",", 1)
                .into_bytes(),
        ),
        (
            "/api/sites",
            "an unknown key",
            site_json.replacen('{', "{\"evil\":1,", 1).into_bytes(),
        ),
        (
            "/api/sites",
            "trailing garbage",
            format!("{site_json} trailing").into_bytes(),
        ),
        ("/api/sites", "an empty body", Vec::new()),
        ("/api/sites", "null", b"null".to_vec()),
        ("/api/sites", "an array", b"[]".to_vec()),
        ("/api/keywords", "a string", b"\"laptop\"".to_vec()),
    ];
    for (path, what, bytes) in raw {
        let answer = api
            .bytes(
                Method::POST,
                path,
                Token::Write,
                Some("application/json"),
                bytes,
                what,
                Expect::Status(&[400, 422]),
            )
            .await;
        if let Some(id) = created_id(answer.as_ref()) {
            delete(api, &format!("{path}/{id}")).await;
        }
    }
}

/// A body whose name holds bytes that are not UTF-8.
fn invalid_utf8(site_json: &str) -> Vec<u8> {
    let (before, after) = site_json.split_once("abuse-").expect("a name");
    [before.as_bytes(), b"\xff\xfe\xc0\xaf", after.as_bytes()].concat()
}

pub(super) async fn content_types(api: &Api, targets: &Targets) {
    let types = [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/xml"),
        Some("application/jsonbogus"),
    ];
    for content_type in types {
        let body = valid_site(targets).to_string().into_bytes();
        let what = format!(
            "a valid site as {}",
            content_type.unwrap_or("no content type")
        );
        let answer = api
            .bytes(
                Method::POST,
                "/api/sites",
                Token::Write,
                content_type,
                body,
                &what,
                Expect::Status(&[415]),
            )
            .await;
        if let Some(id) = created_id(answer.as_ref()) {
            delete(api, &format!("/api/sites/{id}")).await;
        }
    }
}
