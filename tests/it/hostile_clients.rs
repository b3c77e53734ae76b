//! Clients that try to exhaust the api rather than break its rules: half-sent
//! heads, more connections than it serves, bodies it will refuse, heads too
//! big to read, and WebSocket floods. Each is bounded, and /health keeps
//! answering throughout.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_tungstenite::connect_async;

use crate::support::{Roles, TestApp};

/// Reads what the server sends on `stream` until it closes the connection or
/// `limit` passes; `None` when it was still open at the end.
pub(crate) async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&answer).into()),
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
        }
    }
}

pub(crate) async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .expect("api accepts")
}

/// The first line of an answer: `HTTP/1.1 413 Payload Too Large`.
pub(crate) fn status_line(answer: &str) -> &str {
    answer.lines().next().unwrap_or_default()
}

#[tokio::test]
async fn health_answers_while_every_slot_serves_and_half_sent_heads_are_closed() {
    let app = TestApp::spawn_with(Roles::default(), |c| {
        c.common.max_connections = 20;
        c.common.http_header_timeout_secs = 2;
        // One client may hold them all here: the server's cap is the subject
        // (client_limits.rs has the per-client ones).
        c.common.client_limits.max_connections_per_client = Some(100);
    })
    .await;
    // Every slot held by a request whose body never comes (a connection
    // that serves nothing holds no slot another needs: see client_limits.rs).
    let mut serving = Vec::new();
    for _ in 0..20 {
        let mut stream = connect(&app).await;
        stream
            .write_all(
                b"POST /api/sites HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                  Content-Length: 1000\r\n\r\n{",
            )
            .await
            .unwrap();
        serving.push(stream);
    }
    // Their heads are read within milliseconds; a loaded machine gets 1 s.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Past the cap, the probes are answered and nothing else is.
    let client = reqwest::Client::new();
    let health = client
        .get(format!("{}/health", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    let busy = client
        .get(format!("{}/api/sites", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: serde_json::Value = busy.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded", "{body}");
    drop(serving);
    // Half-sent heads are dropped after the 2 s header timeout. 10 s
    // leaves 8 s for a loaded machine to fire a timer; without a timeout the
    // connections would stay open for good and this would fail.
    let mut slow = Vec::new();
    for _ in 0..5 {
        let mut stream = connect(&app).await;
        stream
            .write_all(b"GET /api/sites HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(stream);
    }
    for stream in &mut slow {
        assert!(
            read_until_closed(stream, Duration::from_secs(10))
                .await
                .is_some(),
            "a half-sent head was still held open"
        );
    }
    // The slots are free again: the API answers as usual.
    let (status, _) = app.get("/api/sites").await;
    assert_eq!(status, StatusCode::OK);
    // An idle kept-alive connection is closed after the header timeout too
    // (2 s, under the idle timeout's 5 s; within the 10 s allowed, as above).
    let mut idle = connect(&app).await;
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut idle, Duration::from_secs(10))
        .await
        .expect("an idle connection is closed");
    assert!(status_line(&answer).contains("200"), "{answer}");
    app.stop().await;
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_refused_at_once_and_a_huge_head_is_431() {
    let app = TestApp::spawn().await;
    let mut stream = connect(&app).await;
    let started = Instant::now();
    stream
        .write_all(
            b"POST /api/sites HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 10737418240\r\n\r\n",
        )
        .await
        .unwrap();
    // Not one byte of the body is sent: the answer may not wait for it (it
    // used to wait for the 30 s request timeout and answer 408, empty).
    let answer = read_until_closed(&mut stream, Duration::from_secs(10))
        .await
        .expect("the server closes a connection whose body it will not read");
    assert!(status_line(&answer).contains("413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    // Said so, as the connection is closed after it: a client must not send
    // its next request on it.
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    // Far under the 30 s of the request timeout, even on a loaded machine.
    assert!(started.elapsed() < Duration::from_secs(10));

    let mut stream = connect(&app).await;
    let huge = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    // The server may close before reading it all: a failed write is fine.
    let _ = stream.write_all(huge.as_bytes()).await;
    let answer = read_until_closed(&mut stream, Duration::from_secs(10))
        .await
        .expect("the server closes a connection whose head it will not read");
    assert!(status_line(&answer).contains("431"), "{answer}");
    let (status, _) = app.get("/health").await;
    assert_eq!(status, StatusCode::OK);
    app.stop().await;
}

const WRITER: &str = "hostile-writer-token";
const READER: &str = "hostile-reader-token";

async fn ws_status(app: &TestApp, token: &str) -> Result<WsClient, u16> {
    let url = format!("{}/ws?token={token}", app.base.replace("http://", "ws://"));
    match connect_async(url).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(e) => panic!("unexpected WebSocket error: {e}"),
    }
}

type WsClient =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

#[tokio::test]
async fn websocket_clients_are_capped_in_all_and_per_token() {
    let app = TestApp::spawn_with(Roles::default(), |c| {
        c.api.auth_disabled = false;
        c.api.api_tokens = vec![WRITER.into()];
        c.api.api_read_tokens = vec![READER.into()];
        c.api.max_ws_clients = 5;
        c.api.max_ws_clients_per_token = 3;
    })
    .await;
    let mut readers = Vec::new();
    for _ in 0..3 {
        readers.push(
            ws_status(&app, READER)
                .await
                .expect("within the token's share"),
        );
    }
    assert_eq!(
        ws_status(&app, READER).await.err(),
        Some(503),
        "the token's share is full"
    );
    let _writers = [
        ws_status(&app, WRITER)
            .await
            .expect("another token has its own share"),
        ws_status(&app, WRITER)
            .await
            .expect("another token has its own share"),
    ];
    assert_eq!(
        ws_status(&app, WRITER).await.err(),
        Some(503),
        "every slot is taken"
    );
    let (status, _) = app.get("/health").await;
    assert_eq!(status, StatusCode::OK);
    // A client that leaves gives its slot back, as soon as the server reads
    // its close (milliseconds); 10 s leaves a loaded machine room.
    let mut leaving = readers.pop().unwrap();
    leaving.close(None).await.unwrap();
    drop(leaving);
    crate::support::eventually(Duration::from_secs(10), "a freed slot is taken", || async {
        ws_status(&app, READER).await.ok()
    })
    .await;
    app.stop().await;
}

/// The client the api takes a request for, as `/api/access` reports it.
async fn client_ip_seen(app: &TestApp, forwarded: &str) -> serde_json::Value {
    let answer: serde_json::Value = app
        .http
        .get(format!("{}/api/access", app.base))
        .header("x-forwarded-for", forwarded)
        .send()
        .await
        .expect("api answers")
        .json()
        .await
        .expect("a JSON body");
    answer["client_ip"].clone()
}

#[tokio::test]
async fn a_forged_x_forwarded_for_is_believed_only_from_a_trusted_proxy_and_only_its_own_hop() {
    // No trusted proxy: the header is anyone's to write, so it is ignored.
    let direct = TestApp::spawn().await;
    assert_eq!(client_ip_seen(&direct, "198.51.100.7").await, "127.0.0.1");
    direct.stop().await;

    // Behind a trusted proxy (loopback plays the load balancer): the hop it
    // appended counts, never the ones the client wrote before it.
    let behind = TestApp::spawn_with(Roles::default(), |c| {
        c.api.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    assert_eq!(
        client_ip_seen(&behind, "6.6.6.6, 198.51.100.7").await,
        "198.51.100.7"
    );
    assert_eq!(
        client_ip_seen(&behind, "198.51.100.7, 127.0.0.9").await,
        "198.51.100.7",
        "trusted hops are skipped"
    );
    behind.stop().await;
}
