//! URL lists through the API: settings as JSON with errors naming the field,
//! URLs uploaded as streamed plain text (replaced or appended in one
//! transaction, every line not taken reported by number, the SSRF guard
//! applied), and bounds that write nothing when crossed; in the console, in
//! `console`.

mod console;
mod runs;
mod schedule;
mod shop;

use std::{fmt::Write as _, time::Duration};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::support::{ON_DEMAND, Roles, TestApp};

/// The api alone, with the SSRF guard on: loopback let through (the fixture
/// shop), every other private address refused.
async fn guarded_app() -> TestApp {
    TestApp::spawn_without_browsers(Roles::default(), |c| {
        c.common.allow_private_targets = false;
        c.common.allowed_private_targets = vec!["127.0.0.1".parse().unwrap()];
    })
    .await
}

async fn create_list(app: &TestApp, site: i64, name: &str) -> i64 {
    let (status, list) = app
        .post(
            "/api/url-lists",
            json!({"site_id": site, "name": name, "schedule": ON_DEMAND, "timezone": "Asia/Seoul"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{list}");
    list["id"].as_i64().unwrap()
}

/// Sends `body` to the api over a socket of its own, chunk by chunk with
/// chunked transfer encoding (no length declared up front, as a client
/// streaming a file sends it); the status and the JSON answer.
async fn stream_upload(
    app: &TestApp,
    method: &str,
    list: i64,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let addr = app.base.trim_start_matches("http://");
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let auth = app
        .token()
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} /api/url-lists/{list}/urls HTTP/1.1\r\nHost: {addr}\r\n{auth}\
         Content-Type: {content_type}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(64 * 1024) {
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(chunk);
        framed.extend_from_slice(b"\r\n");
        if socket.write_all(&framed).await.is_err() {
            break; // The api answered early (a bound) and closed.
        }
    }
    let _ = socket.write_all(b"0\r\n\r\n").await;
    read_answer(socket).await
}

/// The status and JSON body of the answer on `socket`, read to its close (an
/// answer given before the whole body was sent may end in a reset).
async fn read_answer(mut socket: TcpStream) -> (u16, Value) {
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n @ 1..) = socket.read(&mut buf).await {
        answer.extend_from_slice(&buf[..n]);
    }
    let answer = String::from_utf8_lossy(&answer);
    let status: u16 = answer[9..12].parse().unwrap();
    let json_start = answer.find("\r\n\r\n").unwrap() + 4;
    // The answer may itself be chunked: the JSON is from the first `{` to the last `}`.
    let text = &answer[json_start..];
    let json = &text[text.find('{').unwrap()..=text.rfind('}').unwrap()];
    (status, serde_json::from_str(json).unwrap())
}

async fn urls_in(app: &TestApp, list: i64) -> i64 {
    let (status, list) = app.get(&format!("/api/url-lists/{list}")).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["urls"].as_i64().unwrap()
}

fn lines_of(notes: &Value) -> Vec<u64> {
    notes["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["line"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_list_of_a_hundred_thousand_lines_streams_in_and_every_line_not_taken_is_named() {
    let app = guarded_app().await;
    let shop = app.site.base_url();
    let site = app
        .one_page_site("shop", "/static?q={keyword}", json!({}))
        .await;
    let list = create_list(&app, site, "products").await;

    // 99,990 products, then the lines that must be reported by number.
    let mut body = String::from("# refreshed nightly\n");
    for n in 0..99_990 {
        writeln!(body, "{shop}/product/{n}").unwrap();
    }
    let odd = [
        format!("{shop}/product/7"),                // 99,992: duplicate
        "ftp://files.test/a".to_owned(),            // 99,993: refused scheme
        "".to_owned(),                              // 99,994: blank
        "not a url".to_owned(),                     // 99,995: refused
        "http://10.0.0.1/admin".to_owned(),         // 99,996: refused by the guard
        format!("{shop}/product/8#reviews"),        // 99,997: duplicate (fragment dropped)
        "http://169.254.169.254/latest".to_owned(), // 99,998: refused by the guard
        "http://shop.test/unresolvable".to_owned(), // 99,999: taken (workers judge names)
    ];
    for line in &odd {
        writeln!(body, "{line}").unwrap();
    }
    let (status, report) = stream_upload(
        &app,
        "PUT",
        list,
        "text/plain; charset=utf-8",
        body.as_bytes(),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["added"], 99_991, "{report}");
    assert_eq!(report["total"], 99_991);
    assert_eq!(
        (report["kept"].as_i64(), report["removed"].as_i64()),
        (Some(0), Some(0))
    );
    assert_eq!(lines_of(&report["duplicates"]), [99_992, 99_997]);
    assert_eq!(
        lines_of(&report["refused"]),
        [99_993, 99_995, 99_996, 99_998],
        "{report}"
    );
    let guard_reason = report["refused"]["lines"][2]["reason"].as_str().unwrap();
    assert!(guard_reason.contains("10.0.0.0/8"), "{guard_reason}");
    assert_eq!(report["lines"], 99_999);

    let (_, shown) = app.get(&format!("/api/url-lists/{list}")).await;
    assert_eq!(
        (shown["urls"].as_i64(), shown["read_in_period"].as_i64()),
        (Some(99_991), Some(0))
    );
    assert_eq!(shown["timezone"], "Asia/Seoul");
    let (_, page) = app
        .get(&format!("/api/url-lists/{list}/urls?limit=2"))
        .await;
    let urls: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [format!("{shop}/product/0"), format!("{shop}/product/1")]
    );
    let cursor = page["next_cursor"].as_str().unwrap();
    let (_, next) = app
        .get(&format!(
            "/api/url-lists/{list}/urls?limit=1&cursor={cursor}"
        ))
        .await;
    assert_eq!(next["items"][0]["url"], format!("{shop}/product/2"));
    app.stop().await;
}

#[tokio::test]
async fn a_replacement_keeps_what_was_read_and_an_append_adds_after_the_last_line() {
    let app = guarded_app().await;
    let shop = app.site.base_url();
    let site = app
        .one_page_site("shop", "/static?q={keyword}", json!({}))
        .await;
    let list = create_list(&app, site, "watch").await;
    let urls = |ns: &[u32]| {
        ns.iter()
            .map(|n| format!("{shop}/p/{n}\n"))
            .collect::<String>()
    };
    let (status, _) =
        stream_upload(&app, "PUT", list, "text/plain", urls(&[1, 2, 3]).as_bytes()).await;
    assert_eq!(status, 200);
    sqlx::query(
        "UPDATE url_list_entries SET last_read_at = now() - interval '1 hour' WHERE url = $1",
    )
    .bind(format!("{shop}/p/2"))
    .execute(app.pool())
    .await
    .unwrap();

    let (_, replaced) =
        stream_upload(&app, "PUT", list, "text/plain", urls(&[2, 4]).as_bytes()).await;
    assert_eq!(
        [
            &replaced["added"],
            &replaced["kept"],
            &replaced["removed"],
            &replaced["total"]
        ],
        [1, 1, 2, 2],
        "{replaced}"
    );
    let (_, page) = app.get(&format!("/api/url-lists/{list}/urls")).await;
    let entries = page["items"].as_array().unwrap();
    assert_eq!(entries[0]["url"], format!("{shop}/p/2"));
    assert!(
        entries[0]["last_read_at"].is_string(),
        "kept its read time: {page}"
    );
    assert!(entries[1]["last_read_at"].is_null());

    let (_, appended) =
        stream_upload(&app, "POST", list, "text/plain", urls(&[4, 5]).as_bytes()).await;
    assert_eq!(
        [&appended["added"], &appended["kept"], &appended["total"]],
        [1, 1, 3],
        "{appended}"
    );
    let (_, page) = app.get(&format!("/api/url-lists/{list}/urls")).await;
    let order: Vec<(&str, i64)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["url"].as_str().unwrap(), e["line"].as_i64().unwrap()))
        .collect();
    let p = |n: u32| format!("{shop}/p/{n}");
    assert_eq!(
        order,
        [(p(2).as_str(), 1), (p(4).as_str(), 2), (p(5).as_str(), 4)]
    );
    app.stop().await;
}

#[tokio::test]
async fn an_upload_past_a_bound_or_broken_off_writes_nothing() {
    let app = guarded_app().await;
    let shop = app.site.base_url();
    let site = app
        .one_page_site("shop", "/static?q={keyword}", json!({}))
        .await;
    let list = create_list(&app, site, "bounded").await;
    let (status, _) = stream_upload(
        &app,
        "PUT",
        list,
        "text/plain",
        format!("{shop}/kept\n").as_bytes(),
    )
    .await;
    assert_eq!(status, 200);

    // One URL more than a list holds.
    let too_many: String = (0..100_001).map(|n| format!("{shop}/{n}\n")).collect();
    let (status, error) = stream_upload(&app, "PUT", list, "text/plain", too_many.as_bytes()).await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["error"]["field"], "body");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 100001"),
        "{error}"
    );

    // More bytes than an upload may have, streamed, then declared.
    let huge = format!("# {}\n", "x".repeat(17 * 1024 * 1024));
    let (status, error) = stream_upload(&app, "PUT", list, "text/plain", huge.as_bytes()).await;
    assert_eq!(status, 413, "{error}");
    let addr = app.base.trim_start_matches("http://");
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT /api/url-lists/{list}/urls HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        huge.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let (status, error) = read_answer(socket).await;
    assert_eq!(status, 413, "refused before the body is sent: {error}");
    // Over the JSON routes' bound and within an upload's: taken.
    let big: String = (0..20_000)
        .map(|n| format!("{shop}/a-longer-path-of-a-product/{n}\n"))
        .collect();
    assert!(big.len() > 1024 * 1024);
    let (status, report) = stream_upload(&app, "POST", list, "text/plain", big.as_bytes()).await;
    assert_eq!(
        (status, report["added"].as_i64()),
        (200, Some(20_000)),
        "{report}"
    );

    // JSON is not an upload.
    let (status, error) = stream_upload(&app, "PUT", list, "application/json", b"[]").await;
    assert_eq!(status, 415, "{error}");

    // A client that goes away mid-body: the half it sent is not written.
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let half = format!("{shop}/half-1\n{shop}/half-2\n");
    let head = format!(
        "PUT /api/url-lists/{list}/urls HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain\r\n\
         Content-Length: 100000\r\n\r\n{half}"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    drop(socket);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        urls_in(&app, list).await,
        20_001,
        "nothing of the broken-off upload"
    );
    app.stop().await;
}

#[tokio::test]
async fn list_settings_are_checked_naming_the_field() {
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;
    let site = app
        .one_page_site("shop", "/static?q={keyword}", json!({}))
        .await;
    let list = create_list(&app, site, "daily").await;
    let body = |changes: Value| {
        let mut body = json!({"site_id": site, "name": "other", "schedule": "0 0 6 * * *"});
        for (key, value) in changes.as_object().unwrap() {
            body[key] = value.clone();
        }
        body
    };
    for (changes, field, status) in [
        (
            json!({"schedule": "every day"}),
            "schedule",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"timezone": "Mars/Olympus"}),
            "timezone",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"jitter_secs": 99_999}),
            "jitter_secs",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"site_id": 999}),
            "site_id",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"name": "  "}),
            "name",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"name": "a\u{0}b"}),
            "name",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (json!({"name": "daily"}), "name", StatusCode::CONFLICT),
        (
            json!({"urls": []}),
            "urls",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let (got, error) = app.post("/api/url-lists", body(changes.clone())).await;
        assert_eq!(
            (got, error["error"]["field"].as_str()),
            (status, Some(field)),
            "{changes}: {error}"
        );
    }
    let (status, renamed) = app
        .put(
            &format!("/api/url-lists/{list}"),
            body(json!({"enabled": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(
        (
            renamed["name"].as_str(),
            renamed["next_fire_times"].as_array().map(Vec::len)
        ),
        (Some("other"), Some(0))
    );
    let (status, _) = app.get("/api/url-lists/999").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, listed) = app.get(&format!("/api/url-lists?site_id={site}")).await;
    assert_eq!(
        (status, listed["items"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(1))
    );

    // Deleting the site deletes its lists.
    let (status, _) = app.delete(&format!("/api/sites/{site}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app.get(&format!("/api/url-lists/{list}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.stop().await;
}
