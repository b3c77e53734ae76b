//! The live API: bearer tokens, WebSocket events across processes, queue
//! stats, and Prometheus metrics that move as a crawl runs.

use std::time::{Duration, Instant};

use crawlfleet::{
    api::AppState,
    events::{Event, EventPublisher},
    queue,
};
use futures::{SinkExt, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::{connect_async, tungstenite::Message};

use crate::helpers::{RoleProcess, Roles, TestApp, browser_slots, test_config};

const WRITER: &str = "writer-secret-token";
const READER: &str = "reader-secret-token";

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn socket(app: &TestApp, token: &str) -> Socket {
    let url = format!("{}/ws?token={token}", app.base.replace("http://", "ws://"));
    connect_async(url).await.expect("websocket accepted").0
}

/// The next JSON text frame (pings are answered by the client library).
async fn next_json(ws: &mut Socket, limit: Duration) -> Option<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match tokio::time::timeout(left, ws.next()).await.ok()?? {
            Ok(Message::Text(text)) => return Some(serde_json::from_str(&text).unwrap()),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

async fn subscribe(ws: &mut Socket, filter: Value) {
    ws.send(Message::Text(
        json!({"subscribe": filter}).to_string().into(),
    ))
    .await
    .unwrap();
    loop {
        let frame = next_json(ws, Duration::from_secs(10))
            .await
            .expect("subscription confirmed");
        if frame["type"] == "subscribed" {
            assert_eq!(frame["filter"], filter);
            return;
        }
    }
}

fn with_tokens(c: &mut crawlfleet::config::Config) {
    c.auth_disabled = false;
    c.api_tokens = vec![WRITER.into()];
    c.api_read_tokens = vec![READER.into()];
}

#[tokio::test]
async fn every_api_route_needs_a_token_and_read_tokens_may_only_read() {
    let app = TestApp::spawn_with(Roles::default(), with_tokens).await;
    let routes = [
        (Method::GET, "/api/sites"),
        (Method::POST, "/api/sites"),
        (Method::GET, "/api/sites/1"),
        (Method::PUT, "/api/sites/1"),
        (Method::DELETE, "/api/sites/1"),
        (Method::GET, "/api/keywords"),
        (Method::POST, "/api/keywords"),
        (Method::GET, "/api/keywords/1"),
        (Method::PUT, "/api/keywords/1"),
        (Method::DELETE, "/api/keywords/1"),
        (Method::POST, "/api/keywords/1/crawl"),
        (Method::GET, "/api/runs"),
        (Method::GET, "/api/runs/1"),
        (Method::POST, "/api/runs/1/cancel"),
        (Method::POST, "/api/runs/1/retry"),
        (Method::GET, "/api/results"),
        (Method::GET, "/api/jobs/queue"),
        (Method::GET, "/api/openapi.json"),
    ];
    for (method, path) in routes {
        let url = format!("{}{path}", app.base);
        let send = |token: Option<&str>| {
            let mut req = app.http.request(method.clone(), &url);
            if let Some(token) = token {
                req = req.bearer_auth(token);
            }
            if method != Method::GET && method != Method::DELETE {
                req = req.json(&json!({}));
            }
            req.send()
        };
        for token in [None, Some("wrong-token")] {
            let resp = send(token).await.unwrap();
            assert_eq!(
                resp.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {token:?}"
            );
            assert_eq!(resp.headers()["www-authenticate"], "Bearer");
            let body: Value = resp.json().await.unwrap();
            assert_eq!(body["error"]["code"], "unauthorized");
        }
        let as_reader = send(Some(READER)).await.unwrap().status();
        if method == Method::GET {
            assert!(
                !matches!(as_reader.as_u16(), 401 | 403),
                "{method} {path}: {as_reader}"
            );
        } else {
            assert_eq!(
                as_reader,
                StatusCode::FORBIDDEN,
                "{method} {path} with a read token"
            );
        }
        let as_writer = send(Some(WRITER)).await.unwrap().status();
        assert!(
            !matches!(as_writer.as_u16(), 401 | 403),
            "{method} {path}: {as_writer}"
        );
    }
    for open in ["/health", "/ready", "/metrics"] {
        let resp = app
            .http
            .get(format!("{}{open}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{open} stays open");
    }
    let ws = format!("{}/ws", app.base.replace("http://", "ws://"));
    assert!(
        connect_async(&ws).await.is_err(),
        "a websocket without a token is refused"
    );
    assert!(connect_async(format!("{ws}?token=wrong")).await.is_err());
    socket(&app, READER).await;
    app.stop().await;
}

#[tokio::test]
async fn the_api_refuses_to_start_without_tokens_unless_told_to() {
    let app = TestApp::spawn().await;
    let mut config = test_config(&app.db.url, &app.config.queue_name);
    config.auth_disabled = false;
    let redis = queue::connect(&config.redis_url).await.unwrap();
    let refused = AppState::from_config(&config, app.pool().clone(), redis, Default::default());
    let message = format!("{:#}", refused.err().expect("refused"));
    assert!(
        message.contains("API_TOKENS") && message.contains("AUTH_DISABLED"),
        "{message}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_crawl_on_a_worker_process_streams_its_states_in_order_to_subscribers() {
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn_with(Roles::scheduler_only(), with_tokens).await;
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let worker = RoleProcess::spawn(
        "worker",
        &app.config,
        &[("METRICS_PORT", metrics_port.to_string())],
    );
    let headers = |req: reqwest::RequestBuilder| req.bearer_auth(WRITER);
    let mut body = app.site_body("shop", "/search");
    body["max_pages"] = json!(5);
    let site: Value = headers(app.http.post(format!("{}/api/sites", app.base)).json(&body))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let keyword_body =
        |k: &str| json!({"keyword": k, "site_ids": [site["id"]], "schedule": "0 0 0 1 1 *"});
    let mut ids = Vec::new();
    for k in ["watched", "ignored"] {
        let kw: Value = headers(
            app.http
                .post(format!("{}/api/keywords", app.base))
                .json(&keyword_body(k)),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        ids.push(kw["id"].as_i64().unwrap());
    }
    let mut watching = socket(&app, READER).await;
    subscribe(&mut watching, json!({"keyword_id": ids[0]})).await;
    let mut elsewhere = socket(&app, READER).await;
    subscribe(&mut elsewhere, json!({"keyword_id": ids[1]})).await;

    headers(
        app.http
            .post(format!("{}/api/keywords/{}/crawl", app.base, ids[0])),
    )
    .send()
    .await
    .unwrap()
    .error_for_status()
    .unwrap();
    let (mut states, mut stored) = (Vec::new(), 0);
    while states.last().map(String::as_str) != Some("completed") {
        let event = next_json(&mut watching, Duration::from_secs(60))
            .await
            .expect("events until completion");
        match event["type"].as_str().unwrap() {
            "run.updated" => {
                assert_eq!(event["keyword_id"], ids[0]);
                states.push(event["state"].as_str().unwrap().to_owned());
            }
            "result.stored" => stored += event["count"].as_u64().unwrap(),
            "queue.stats" => {}
            other => panic!("unexpected event {other}: {event}"),
        }
    }
    let mut expected = vec!["queued", "running"];
    for _ in 0..4 {
        expected.extend(["url_call", "call_done"]);
    }
    expected.push("completed");
    assert_eq!(states, expected, "states arrive in order");
    assert_eq!(stored, 15);
    // The other subscriber saw nothing of it.
    while let Some(event) = next_json(&mut elsewhere, Duration::from_millis(500)).await {
        assert_eq!(event["type"], "queue.stats", "filtered out: {event}");
    }

    // The worker process's own /metrics moved with the crawl.
    let text = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let value = |name: &str, labels: &[(&str, &str)]| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                prometheus_parse::Value::Histogram(ref buckets) => {
                    buckets.last().map(|b| b.count).unwrap_or(0.0)
                }
                _ => f64::NAN,
            })
    };
    let site_id = site["id"].to_string();
    assert_eq!(
        value(
            "crawlfleet_runs_finished_total",
            &[("state", "completed"), ("site", &site_id)]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            "crawlfleet_page_fetch_duration_seconds",
            &[("site", &site_id)]
        ),
        Some(4.0)
    );
    assert_eq!(value("crawlfleet_browser_sessions_open", &[]), Some(1.0));
    // And the api's.
    let text = reqwest::get(format!("{}/metrics", app.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    // (Checked on the text; the live tests parse it.)
    assert!(
        text.lines()
            .any(|l| l.starts_with("crawlfleet_http_requests_total{")
                && l.contains(r#"route="/api/keywords/:id/crawl""#)
                && l.contains(r#"status="202""#)),
        "{text}"
    );
    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.metric == "crawlfleet_dispatched_total")
    );
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn two_hundred_clients_all_receive_an_event() {
    let app = TestApp::spawn().await;
    let mut clients = Vec::new();
    for _ in 0..200 {
        let mut ws = socket(&app, "unused").await;
        subscribe(&mut ws, json!({"run_id": 42})).await;
        clients.push(ws);
    }
    let redis = queue::connect(&app.config.redis_url).await.unwrap();
    let publisher = EventPublisher::new(redis, &app.config.queue_name);
    let event = Event::RunUpdated {
        id: 42,
        keyword_id: 1,
        keyword: None,
        site_id: 1,
        site: None,
        state: "running".into(),
        attempt: 1,
        pages: 0,
        items: 0,
        error: None,
    };
    publisher.publish(&event).await;
    let received = futures::future::join_all(clients.iter_mut().map(|ws| async move {
        loop {
            let frame = next_json(ws, Duration::from_secs(20)).await?;
            if frame["type"] == "run.updated" {
                return Some(frame);
            }
        }
    }))
    .await;
    let got = received
        .iter()
        .filter(|f| f.as_ref().is_some_and(|f| f["id"] == 42))
        .count();
    assert_eq!(got, 200);
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_never_reads_does_not_hold_up_others_and_is_told_or_dropped() {
    let app = TestApp::spawn_with(Roles::default(), |c| c.ws_send_timeout_secs = 2).await;
    let mut stuck = socket(&app, "unused").await;
    subscribe(&mut stuck, json!({})).await;
    let mut readers = Vec::new();
    for _ in 0..3 {
        let mut ws = socket(&app, "unused").await;
        subscribe(&mut ws, json!({})).await;
        readers.push(ws);
    }
    let redis = queue::connect(&app.config.redis_url).await.unwrap();
    let publisher = EventPublisher::new(redis, &app.config.queue_name);
    let padding = "x".repeat(8 * 1024);
    let total = 3000;
    // Every reader reads on its own task, as real clients would.
    let readers_done: Vec<_> = readers
        .into_iter()
        .map(|mut ws| {
            tokio::spawn(async move {
                let mut seen = 0;
                while seen < total {
                    match next_json(&mut ws, Duration::from_secs(30)).await {
                        Some(frame) if frame["type"] == "run.updated" => seen += 1,
                        Some(frame) if frame["type"] == "lagged" => {
                            seen += frame["missed"].as_u64().unwrap() as usize
                        }
                        Some(_) => {}
                        None => break,
                    }
                }
                seen
            })
        })
        .collect();
    let started = Instant::now();
    for id in 0..total {
        let event = Event::RunUpdated {
            id: id as i64,
            keyword_id: 1,
            keyword: None,
            site_id: 1,
            site: None,
            state: "running".into(),
            attempt: 1,
            pages: 0,
            items: 0,
            error: Some(padding.clone()),
        };
        publisher.publish(&event).await;
    }
    let counts: Vec<usize> = futures::future::join_all(readers_done)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    eprintln!(
        "{total} events of 8 KB to 3 readers and 1 stuck client in {:?}",
        started.elapsed()
    );
    assert!(
        counts.iter().all(|n| *n >= total),
        "readers were held up: {counts:?}"
    );

    // The stuck client, reading at last, finds it was told it lagged, or was dropped.
    let mut lagged_or_dropped = false;
    let mut frames = 0;
    while let Some(frame) = next_json(&mut stuck, Duration::from_secs(5)).await {
        frames += 1;
        if frame["type"] == "lagged" {
            lagged_or_dropped = true;
            break;
        }
    }
    if !lagged_or_dropped {
        lagged_or_dropped = frames < total;
    }
    assert!(
        lagged_or_dropped,
        "the stuck client got all {frames} frames: nothing was bounded"
    );
    app.stop().await;
}

#[tokio::test]
async fn queue_stats_report_the_backlog_by_rest_and_websocket() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    for k in ["a", "b", "c"] {
        let kw = app.create_keyword(k, &[site], "0 0 0 1 1 *").await;
        app.crawl(kw).await;
    }
    let (status, report) = app.get("/api/jobs/queue").await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["queued"], 3);
    assert_eq!(report["backlog"], 3);
    assert_eq!(report["running"], 0);
    assert_eq!(report["workers"], json!([]));
    assert!(report["oldest_queued_age_secs"].as_i64().unwrap() >= 0);

    let mut ws = socket(&app, "unused").await;
    let stats = loop {
        let frame = next_json(&mut ws, Duration::from_secs(15))
            .await
            .expect("queue.stats within 15 s");
        if frame["type"] == "queue.stats" {
            break frame;
        }
    };
    assert_eq!(stats["queued"], 3);

    // Shutting the server down sends a close frame ("going away").
    let closed = tokio::spawn(async move {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => {}
                _ => return None,
            }
        }
    });
    app.stop().await;
    let code = tokio::time::timeout(Duration::from_secs(10), closed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, Some(1001));
}
