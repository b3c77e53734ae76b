//! URL lists: hostile settings (a 422 naming the field), and hostile uploads:
//! bytes that are not text, NUL and escape characters inside URLs, lines a
//! megabyte long, more URLs than a list holds, and bodies that are not plain
//! text. A line that is not a URL must be reported refused by its number and
//! never stored; a bound crossed writes nothing. (An upload over its bytes is
//! tried in tests/it/url_lists, over a socket that sees the 413 come before
//! the body is sent.)

use reqwest::Method;
use serde_json::json;

use super::{created_id, delete};
use crate::{
    client::{Api, Token},
    ledger::{Answer, Expect},
};

const ON_DEMAND: &str = "0 0 0 1 1 *";

pub(super) async fn hostile_lists(api: &Api, site: i64) {
    let settings = [
        ("a NUL in the name", json!({"name": "a\u{0}b"}), "name"),
        (
            "a 900 KB name",
            json!({"name": "n".repeat(900_000)}),
            "name",
        ),
        (
            "a sub-minute schedule",
            json!({"schedule": "* * * * * *"}),
            "schedule",
        ),
        (
            "a zone that is none",
            json!({"timezone": "../../etc/passwd"}),
            "timezone",
        ),
        (
            "jitter past an hour",
            json!({"jitter_secs": i64::MAX}),
            "jitter_secs",
        ),
        (
            "a site that is none",
            json!({"site_id": i64::MAX}),
            "site_id",
        ),
        (
            "a site id of the wrong type",
            json!({"site_id": "1; DROP TABLE sites"}),
            "site_id",
        ),
        (
            "an unknown field",
            json!({"urls": ["http://a.test/"]}),
            "urls",
        ),
    ];
    for (what, change, field) in settings {
        let mut body = json!({"site_id": site, "name": "hostile", "schedule": ON_DEMAND});
        for (key, value) in change.as_object().expect("an object") {
            body[key] = value.clone();
        }
        let answer = api
            .json(
                Method::POST,
                "/api/url-lists",
                Token::Write,
                &body,
                &format!("URL list: {what}"),
                Expect::invalid(field),
            )
            .await;
        if let Some(id) = created_id(answer.as_ref()) {
            delete(api, &format!("/api/url-lists/{id}")).await;
        }
    }

    let Some(list) = create_list(api, site, "uploads").await else {
        return;
    };
    let path = format!("/api/url-lists/{list}/urls");
    let lines_not_urls: [(&str, Vec<u8>); 5] = [
        (
            "bytes that are not UTF-8",
            b"\xff\xfe\xfd\n\xc3\x28\n".to_vec(),
        ),
        (
            "NUL and ESC inside URLs",
            b"http://a.test/\x00x\nhttp://a.test/\x1b[31m\n".to_vec(),
        ),
        (
            "a line of a megabyte",
            format!("http://a.test/{}\n", "x".repeat(1 << 20)).into_bytes(),
        ),
        (
            "schemes that are not the web",
            b"javascript:alert(1)\nfile:///etc/passwd\ndata:text/html,x\n".to_vec(),
        ),
        (
            "a CR smuggled into a host",
            b"http://a.test\rHost: b.test/\n".to_vec(),
        ),
    ];
    for (what, body) in lines_not_urls {
        let lines = body
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        let answer = api
            .bytes(
                Method::PUT,
                &path,
                Token::Write,
                Some("text/plain"),
                body,
                &format!("upload: {what}"),
                Expect::Status(&[200]),
            )
            .await;
        judge_upload(api, &format!("upload: {what}"), answer, lines);
    }
    let too_many: String = (0..100_001)
        .map(|n| format!("http://a.test/{n}\n"))
        .collect();
    api.bytes(
        Method::PUT,
        &path,
        Token::Write,
        Some("text/plain"),
        too_many.into_bytes(),
        "upload: 100,001 URLs",
        Expect::invalid("body"),
    )
    .await;
    for content_type in [
        Some("application/json"),
        Some("text/html"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        api.bytes(
            Method::PUT,
            &path,
            Token::Write,
            content_type,
            b"http://a.test/\n".to_vec(),
            &format!("upload as {content_type:?}"),
            Expect::Status(&[415]),
        )
        .await;
    }
    api.bytes(
        Method::PUT,
        &path,
        Token::Read,
        Some("text/plain"),
        b"http://a.test/\n".to_vec(),
        "upload with a read token",
        Expect::Status(&[403]),
    )
    .await;
    delete(api, &format!("/api/url-lists/{list}")).await;
}

/// Creates a URL list on `site` fired on no schedule (a 201 is due); its id.
pub(crate) async fn create_list(api: &Api, site: i64, name: &str) -> Option<i64> {
    let body = json!({"site_id": site, "name": name, "schedule": ON_DEMAND});
    let answer = api
        .json(
            Method::POST,
            "/api/url-lists",
            Token::Write,
            &body,
            "set-up URL list",
            Expect::Status(&[201]),
        )
        .await;
    created_id(answer.as_ref())
}

/// An upload of nothing but lines that are not URLs the fleet may crawl must
/// leave the list empty and say why for each line (refused, or a duplicate of
/// one refused): any URL stored is a hostile line accepted.
pub(crate) fn judge_upload(api: &Api, what: &str, answer: Option<Answer>, lines: usize) {
    let Some(report) = answer.and_then(|a| a.json()) else {
        return;
    };
    let count = |kind: &str| report[kind]["count"].as_u64().unwrap_or(0);
    if report["total"] != json!(0) || count("refused") + count("duplicates") != lines as u64 {
        let shown: String = report.to_string().chars().take(300).collect();
        api.ledger
            .accepted(what, format!("stored {} URL(s): {shown}", report["total"]));
    }
}
