//! Bearer tokens on every route the OpenAPI document lists and on `/ws`, and
//! tokens kept out of the log.

use std::time::Duration;

use crawlfleet::{api::AppState, queue};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::{
    connect_async,
    tungstenite::{self, client::IntoClientRequest, http::header},
};

use super::{ApiProcess, READER, WRITER, socket, subscribe, with_tokens, ws_url};
use crate::support::{Roles, TestApp, test_config};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

/// Every (method, path template, needs a token) of the served OpenAPI document.
async fn documented_routes(app: &TestApp) -> Vec<(Method, String, bool)> {
    let doc = app.get_as("/api/openapi.json", READER).await;
    let mut routes = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("a path item") {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            let guarded = operation["security"]
                .as_array()
                .is_some_and(|s| !s.is_empty());
            routes.push((
                method.to_uppercase().parse().unwrap(),
                path.clone(),
                guarded,
            ));
        }
    }
    routes
}

/// The status of a WebSocket handshake the server refused.
fn refused_with(outcome: Result<impl std::fmt::Debug, tungstenite::Error>) -> (u16, Value) {
    match outcome {
        Err(tungstenite::Error::Http(resp)) => {
            let body = resp.body().as_deref().unwrap_or_default();
            (
                resp.status().as_u16(),
                serde_json::from_slice(body).unwrap(),
            )
        }
        other => panic!("expected an HTTP refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn every_documented_route_needs_a_token_and_read_tokens_may_only_read() {
    let app = TestApp::spawn_with(Roles::default(), with_tokens).await;
    let routes = documented_routes(&app).await;
    let guarded: Vec<_> = routes.iter().filter(|r| r.2).collect();
    // The document is the list: new routes are checked without editing this test.
    for expected in [
        (Method::DELETE, "/api/sites/{id}/session"),
        (Method::POST, "/api/keywords/{id}/crawl"),
        (Method::GET, "/ws"),
    ] {
        assert!(
            guarded
                .iter()
                .any(|(m, p, _)| *m == expected.0 && p == expected.1),
            "{expected:?} in {routes:?}"
        );
    }
    let mut open: Vec<&str> = routes
        .iter()
        .filter(|r| !r.2)
        .map(|r| r.1.as_str())
        .collect();
    open.sort();
    assert_eq!(open, ["/health", "/ready"], "only these are open");

    for (method, path, _) in guarded {
        let path = path.replace("{id}", "1").replace("{attempt}", "1");
        let url = format!("{}{path}", app.base);
        let send = |token: Option<&str>| {
            let mut req = app.http.request(method.clone(), &url);
            if let Some(token) = token {
                req = req.bearer_auth(token);
            }
            if *method == Method::POST || *method == Method::PUT {
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
            assert_eq!(body["error"]["code"], "unauthorized", "{method} {path}");
        }
        let as_reader = send(Some(READER)).await.unwrap().status();
        if *method == Method::GET {
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
    for path in open {
        let resp = app
            .http
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path} stays open");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_websocket_needs_a_token_in_the_header_or_the_query() {
    let app = TestApp::spawn_with(Roles::default(), with_tokens).await;
    let ws = ws_url(&app.base);

    for refused in [ws.clone(), format!("{ws}?token=wrong")] {
        let (status, body) = refused_with(connect_async(&refused).await);
        assert_eq!(status, 401, "{refused}");
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    let with_header = |token: &str| {
        let mut request = ws.as_str().into_client_request().unwrap();
        request.headers_mut().insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        request
    };
    let (status, _) = refused_with(connect_async(with_header("wrong")).await);
    assert_eq!(status, 401, "a wrong bearer header");

    // Accepted both ways, and usable: a subscription is answered.
    let (mut by_header, resp) = connect_async(with_header(READER)).await.unwrap();
    assert_eq!(resp.status(), 101);
    subscribe(&mut by_header, json!({"run_id": 1})).await;
    let mut by_query = socket(&app.base, WRITER).await;
    subscribe(&mut by_query, json!({"site_id": 2})).await;
    app.stop().await;
}

#[tokio::test]
async fn the_api_refuses_to_start_without_tokens_unless_told_to() {
    let app = TestApp::spawn().await;
    let mut config = test_config(&app.db.url, &app.config.common.queue_name);
    config.api.auth_disabled = false;
    let redis = queue::connect(&config.common.redis_url).await.unwrap();
    let refused = AppState::from_config(
        &config.common,
        &config.api,
        app.pool().clone(),
        redis,
        Default::default(),
    );
    let message = format!("{:#}", refused.err().expect("refused"));
    assert!(
        message.contains("API_TOKENS") && message.contains("AUTH_DISABLED"),
        "{message}"
    );
    app.stop().await;
}

#[tokio::test]
async fn tokens_never_reach_the_log_even_at_debug_level() {
    let app = TestApp::spawn_with(Roles::default(), with_tokens).await;
    // Its own process, so the log holds only its lines, at every level.
    let api = ApiProcess::spawn(&app.config, &[("RUST_LOG", "debug".into())]).await;
    let wrong = "wrong-token-that-must-stay-secret";
    let http = reqwest::Client::new();
    let rest = |method: Method, token: &str| {
        http.request(method, format!("{}/api/sites", api.base))
            .bearer_auth(token)
            .json(&json!({}))
            .send()
    };
    assert_eq!(rest(Method::GET, WRITER).await.unwrap().status(), 200);
    assert_eq!(rest(Method::GET, wrong).await.unwrap().status(), 401);
    assert_eq!(rest(Method::POST, READER).await.unwrap().status(), 403);
    let ws = ws_url(&api.base);
    let (status, _) = refused_with(connect_async(format!("{ws}?token={wrong}")).await);
    assert_eq!(status, 401);
    let mut by_query = socket(&api.base, READER).await;
    subscribe(&mut by_query, json!({})).await;
    let mut by_header = ws.as_str().into_client_request().unwrap();
    by_header.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {WRITER}").parse().unwrap(),
    );
    let (mut by_header, _) = connect_async(by_header).await.unwrap();
    subscribe(&mut by_header, json!({})).await;
    drop((by_query, by_header));

    let log_path = api.process.log.clone();
    assert_eq!(api.process.terminate(Duration::from_secs(10)).await, 0);
    let log = std::fs::read_to_string(&log_path).unwrap();
    for secret in [WRITER, READER, wrong] {
        assert!(
            !log.contains(secret),
            "{secret} in the log {}",
            log_path.display()
        );
    }
    // The requests were logged, so the check above saw them: with their
    // path, and the query's token masked.
    for expected in [
        r#"path="/api/sites""#,
        r#"path="/ws""#,
        "token=***",
        "request without a valid token refused",
    ] {
        assert!(
            log.contains(expected),
            "{expected:?} not in the log {}",
            log_path.display()
        );
    }
    app.stop().await;
}
