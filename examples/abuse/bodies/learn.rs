//! Hostile learnings (`POST /api/sites/learn`): examples out of their bounds
//! or with control characters, the page at the trap or in no URL at all.
//! Each is refused at the api with a 422 naming its field; none reaches a
//! worker, and the trap sees no connection.

use reqwest::Method;
use serde_json::{Value, json};

use super::CONTROL;
use crate::{
    Targets,
    client::{Api, Token},
    ledger::Expect,
};

pub(super) async fn hostile_learnings(api: &Api, targets: &Targets) {
    let page = format!("{}/search?q=lamp", targets.fixture);
    let learning = |examples: Value| json!({"url": page, "render": "http", "examples": examples});
    let many_fields: serde_json::Map<String, Value> =
        (0..13).map(|n| (format!("f{n}"), json!(["v"]))).collect();
    let mut cases = vec![
        (
            "an example of 301 characters".to_owned(),
            learning(json!({"title": ["Lamp", "x".repeat(301)]})),
            "examples.title[1]".to_owned(),
        ),
        (
            "a 100 KB example".to_owned(),
            learning(json!({"title": ["x".repeat(100_000)]})),
            "examples.title[0]".to_owned(),
        ),
        (
            "four examples of a field".to_owned(),
            learning(json!({"title": ["a", "b", "c", "d"]})),
            "examples.title".to_owned(),
        ),
        (
            "a field without examples".to_owned(),
            learning(json!({"title": []})),
            "examples.title".to_owned(),
        ),
        (
            "13 fields".to_owned(),
            learning(Value::Object(many_fields)),
            "examples".to_owned(),
        ),
        (
            "a field name of 65 characters".to_owned(),
            learning(json!({"n".repeat(65): ["v"]})),
            format!("examples.{}", "n".repeat(65)),
        ),
        (
            "the page at the trap".to_owned(),
            json!({"url": format!("http://127.0.0.1:{}/", targets.trap_port), "render": "http"}),
            "url".to_owned(),
        ),
        (
            "the page at a file URL".to_owned(),
            json!({"url": "file:///etc/passwd"}),
            "url".to_owned(),
        ),
        (
            "neither url nor search_url".to_owned(),
            json!({"examples": {"title": ["Lamp"]}}),
            "url".to_owned(),
        ),
    ];
    for (c, name) in CONTROL {
        cases.push((
            format!("{name} in an example"),
            learning(json!({"title": [format!("La{c}mp")]})),
            "examples.title[0]".to_owned(),
        ));
    }
    for (what, body, field) in cases {
        api.json(
            Method::POST,
            "/api/sites/learn",
            Token::Write,
            &body,
            &format!("learning: {what}"),
            Expect::invalid(&field),
        )
        .await;
    }
}
