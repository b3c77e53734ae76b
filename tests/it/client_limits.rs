//! No client can starve the api: what one client address holds is capped
//! (connections, requests in flight), idle kept-alive connections are
//! closed, and connection slots are kept for requests with a valid token. A
//! hostile client with many idle, slow or busy connections on the same
//! address as an operator still leaves the operator's requests answered.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    hostile_clients::{connect, read_until_closed, status_line},
    support::{Roles, TestApp},
};

const WRITER: &str = "limits-writer-token";

/// An api with tokens on, `tune` applied.
async fn api_with_tokens(tune: impl FnOnce(&mut crawlfleet::config::Config)) -> TestApp {
    TestApp::spawn_with(Roles::default(), |c| {
        c.api.auth_disabled = false;
        c.api.api_tokens = vec![WRITER.into()];
        tune(c);
    })
    .await
}

/// Reads one whole response (head and Content-Length body) from `stream`.
async fn read_response(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    let complete = |bytes: &[u8]| {
        let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
            return false;
        };
        let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        bytes.len() >= end + 4 + length
    };
    while !complete(&bytes) {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("an answer within 10 s")
            .expect("readable");
        assert!(n > 0, "closed before the answer was whole: {bytes:?}");
        bytes.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A kept-alive connection that asked for /health once and then idles.
async fn idle_after_health(app: &TestApp) -> TcpStream {
    let mut stream = connect(app).await;
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_response(&mut stream).await;
    assert!(status_line(&answer).contains("200"), "{answer}");
    stream
}

/// A connection that sent half a request head and stalls.
async fn half_head(app: &TestApp) -> TcpStream {
    let mut stream = connect(app).await;
    stream
        .write_all(b"GET /api/sites HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    stream
}

/// A connection whose request (with the token) is in flight for as long as
/// the test wants: its body never comes.
async fn busy(app: &TestApp, forwarded_for: Option<&str>) -> TcpStream {
    let mut stream = connect(app).await;
    let forwarded = forwarded_for
        .map(|ip| format!("X-Forwarded-For: {ip}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST /api/sites HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n{forwarded}\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Whether the server closed `stream` (it waits 200 ms for a close to show).
async fn is_closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
        Err(_) => false,
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) => panic!("the server sent something unasked"),
    }
}

/// One request on a new connection, as it is sent: its whole answer.
async fn raw_get(app: &TestApp, path: &str, token: Option<&str>) -> String {
    let mut stream = connect(app).await;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    read_response(&mut stream).await
}

/// `crawlfleet_http_client_refusals_total{limit}` as the api shows it (the
/// registry is the test binary's: other tests count there too).
async fn refusals(app: &TestApp, limit: &str) -> u64 {
    let text = app
        .http
        .get(format!("{}/metrics", app.metrics_base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = format!("crawlfleet_http_client_refusals_total{{limit=\"{limit}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn idle_and_slow_connections_past_a_clients_cap_cannot_starve_its_authorised_request() {
    let app = api_with_tokens(|c| {
        c.common.client_limits.max_connections_per_client = Some(4);
        // Neither timeout closes anything here: the cap does.
        c.common.http_header_timeout_secs = 60;
        c.common.client_limits.http_idle_timeout_secs = 60;
    })
    .await;
    // (Read first: reading it later would be a connection of the client's.)
    let before = refusals(&app, "connections").await;
    // 12 idle kept-alive connections, then 6 half-sent heads, all from the
    // test's one address: 4.5 times its cap.
    let mut held = Vec::new();
    for _ in 0..12 {
        held.push(idle_after_health(&app).await);
    }
    for _ in 0..6 {
        held.push(half_head(&app).await);
    }
    // Each one past the cap took the place of the client's connection that
    // had served nothing the longest: the 4 newest are left.
    let mut open = Vec::new();
    for (i, stream) in held.iter_mut().enumerate() {
        if !is_closed(stream).await {
            open.push(i);
        }
    }
    assert_eq!(open, vec![14, 15, 16, 17], "the client keeps its 4 newest");
    // The operator on the same address: answered (its connection takes the
    // place of an idle one), and a request without a token is refused for
    // its token, not for want of a connection.
    let (status, body) = app.get("/api/sites").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer = raw_get(&app, "/api/sites", None).await;
    assert!(status_line(&answer).contains("401"), "{answer}");

    // Now every one of the client's 4 connections serves a request.
    let busy_ones = [
        busy(&app, None).await,
        busy(&app, None).await,
        busy(&app, None).await,
        busy(&app, None).await,
    ];
    // Their heads are read within milliseconds; a loaded machine gets 1 s.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Without a token: 429, said so in JSON, with Retry-After, and closed.
    let answer = raw_get(&app, "/api/sites", None).await;
    assert!(status_line(&answer).contains("429"), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("retry-after: 1"), "{answer}");
    assert!(lower.contains("connection: close"), "{answer}");
    assert!(answer.contains("\"too_many_connections\""), "{answer}");
    // With the token: served on a slot kept for tokens.
    let answer = raw_get(&app, "/api/sites", Some(WRITER)).await;
    assert!(status_line(&answer).contains("200"), "{answer}");
    assert!(refusals(&app, "connections").await > before);
    drop(busy_ones);
    app.stop().await;
}

#[tokio::test]
async fn requests_in_flight_are_capped_per_forwarded_client_with_and_without_a_token_apart() {
    let app = api_with_tokens(|c| {
        // Loopback plays the load balancer: X-Forwarded-For names the client.
        c.api.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
        c.common.client_limits.max_requests_per_client = 2;
    })
    .await;
    let a = "198.51.100.7";
    let _in_flight = [busy(&app, Some(a)).await, busy(&app, Some(a)).await];
    let get_as = |client: &'static str, token: bool| {
        let request = app
            .http
            .get(format!("{}/api/sites", app.base))
            .header("x-forwarded-for", client);
        let request = if token {
            request.bearer_auth(WRITER)
        } else {
            request
        };
        async move { request.send().await.expect("api answers") }
    };
    // Client A's third request with the token waits for no one: 429.
    let refused = crate::support::eventually(
        Duration::from_secs(10),
        "A's third request refused",
        || async {
            let response = get_as(a, true).await;
            (response.status() == StatusCode::TOO_MANY_REQUESTS).then_some(response)
        },
    )
    .await;
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_requests", "{body}");
    // Another client behind the same balancer is served.
    assert_eq!(get_as("198.51.100.8", true).await.status(), StatusCode::OK);
    // A's requests without a token have a share of their own (and are
    // refused for want of a token).
    assert_eq!(get_as(a, false).await.status(), StatusCode::UNAUTHORIZED);
    assert!(refusals(&app, "requests").await >= 1);
    app.stop().await;
}

#[tokio::test]
async fn clients_without_a_token_cannot_take_the_slots_kept_for_tokens() {
    let app = api_with_tokens(|c| {
        c.common.max_connections = 12;
        c.common.client_limits.reserved_connections = Some(4);
        // One address may hold them all here: the server's slots are the subject.
        c.common.client_limits.max_connections_per_client = Some(100);
        c.common.http_header_timeout_secs = 60;
    })
    .await;
    // Every open slot serves a request (whose body never comes).
    let mut serving = Vec::new();
    for _ in 0..8 {
        serving.push(busy(&app, None).await);
    }
    // Their heads are read within milliseconds; a loaded machine gets 1 s.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Four more connections, without a token or even a whole head: they get
    // the reserved slots, which they cannot keep from a token.
    let mut slow = Vec::new();
    for _ in 0..4 {
        slow.push(half_head(&app).await);
    }
    let answer = raw_get(&app, "/api/sites", Some(WRITER)).await;
    assert!(status_line(&answer).contains("200"), "{answer}");
    // Without a token: 503, and the connection closed (it keeps no slot).
    let answer = raw_get(&app, "/api/sites", None).await;
    assert!(status_line(&answer).contains("503"), "{answer}");
    assert!(answer.contains("\"overloaded\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    // The probes still answer.
    let answer = raw_get(&app, "/health", None).await;
    assert!(status_line(&answer).contains("200"), "{answer}");
    drop((serving, slow));
    app.stop().await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout_but_a_head_in_progress_is_not() {
    let app = api_with_tokens(|c| {
        c.common.http_header_timeout_secs = 10;
        c.common.client_limits.http_idle_timeout_secs = 1;
    })
    .await;
    let mut idle = idle_after_health(&app).await;
    let since = Instant::now();
    // Closed after 1 s idle; timers never fire early, and 8 s (under the
    // 10 s head timeout) leaves a loaded machine room.
    assert!(
        read_until_closed(&mut idle, Duration::from_secs(8))
            .await
            .is_some(),
        "an idle kept-alive connection stays open"
    );
    assert!(since.elapsed() >= Duration::from_secs(1));
    // A new connection that sends nothing is idle too.
    let mut silent = connect(&app).await;
    assert!(
        read_until_closed(&mut silent, Duration::from_secs(8))
            .await
            .is_some()
    );
    // A head on its way is the head timeout's to judge, not the idle one's.
    let mut slow = half_head(&app).await;
    assert!(
        read_until_closed(&mut slow, Duration::from_secs(3))
            .await
            .is_none(),
        "a head in progress was cut by the idle timeout"
    );
    app.stop().await;

    // The balancer's connections are its own to close.
    let behind = api_with_tokens(|c| {
        c.api.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
        c.common.http_header_timeout_secs = 10;
        c.common.client_limits.http_idle_timeout_secs = 1;
    })
    .await;
    let mut balancer = idle_after_health(&behind).await;
    assert!(
        read_until_closed(&mut balancer, Duration::from_secs(3))
            .await
            .is_none(),
        "a trusted proxy's idle connection was closed"
    );
    behind.stop().await;
}
