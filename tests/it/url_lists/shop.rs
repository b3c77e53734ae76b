//! The fixture shop URL-list runs read (one product a page, each request
//! counted), and the API calls those tests make.

use std::{
    collections::HashMap,
    fmt::Write as _,
    sync::{Arc, Mutex},
};

use axum::{
    Router,
    extract::{Path, State},
    http::StatusCode as AxumStatus,
    response::{Html, IntoResponse, Response},
    routing::get,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{create_list, stream_upload};
use crate::support::{RequestCounts, TestApp};

/// Product pages, one product each, at `/p/{n}`; `/gone/{n}` answers 404.
pub(super) struct ListShop {
    pub base: String,
    pub requests: RequestCounts,
    prices: Arc<Mutex<HashMap<u32, u32>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ListShop {
    pub async fn start() -> ListShop {
        let prices = Arc::new(Mutex::new(HashMap::new()));
        let requests = RequestCounts::default();
        let app = requests.count(
            Router::new()
                .route("/p/{n}", get(product))
                .route("/gone/{n}", get(gone))
                .route("/search", get(|| async { Html("<html></html>") }))
                .with_state(prices.clone()),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        ListShop {
            base,
            requests,
            prices,
            task,
        }
    }

    pub fn price(&self, n: u32, cents: u32) {
        self.prices.lock().unwrap().insert(n, cents);
    }

    /// A site reading one product a page, at `rate` requests a second.
    pub fn site_body(&self, name: &str, rate: f64) -> Value {
        json!({
            "name": name,
            "search_url": format!("{}/search?q={{keyword}}", self.base),
            "render": "http",
            "max_pages": 1,
            "max_requests_per_sec": rate,
            // A list run reads this many of its URLs at once.
            "max_concurrent_runs": 8,
            "item_selector": "div.product",
            "fields": {
                "title": {"selector": "h1"},
                "price": {"selector": ".price", "number": {"locale": "en-US"}},
            },
        })
    }

    pub fn reads_of(&self, n: u32) -> u32 {
        self.requests.on_path(&format!("/p/{n}"))
    }
}

impl Drop for ListShop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn product(
    State(prices): State<Arc<Mutex<HashMap<u32, u32>>>>,
    Path(n): Path<u32>,
) -> Html<String> {
    let cents = prices.lock().unwrap().get(&n).copied().unwrap_or(100 + n);
    Html(format!(
        r#"<!doctype html><html><body><div class="product"><h1>Product {n}</h1>
           <span class="price">${}.{:02}</span></div></body></html>"#,
        cents / 100,
        cents % 100
    ))
}

async fn gone(Path(_): Path<u32>) -> Response {
    (AxumStatus::NOT_FOUND, "gone").into_response()
}

/// A list on `site` holding `urls`, uploaded as plain text.
pub(super) async fn list_of(app: &TestApp, site: i64, name: &str, urls: &[String]) -> i64 {
    let list = create_list(app, site, name).await;
    let mut body = String::new();
    for url in urls {
        writeln!(body, "{url}").unwrap();
    }
    let (status, answer) = stream_upload(app, "PUT", list, "text/plain", body.as_bytes()).await;
    assert_eq!(status, 200, "{answer}");
    list
}

/// `POST /api/url-lists/{list}/crawl`, expected 202; the run's id.
pub(super) async fn crawl_list(app: &TestApp, list: i64) -> i64 {
    let (status, run) = app
        .post(&format!("/api/url-lists/{list}/crawl"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{run}");
    assert_eq!(run["url_list_id"], list, "{run}");
    assert_eq!(run["keyword_id"], Value::Null, "{run}");
    run["id"].as_i64().unwrap()
}

pub(super) async fn list_view(app: &TestApp, list: i64) -> Value {
    let (status, view) = app.get(&format!("/api/url-lists/{list}")).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    view
}

/// Every entry of `list` (url -> entry), through the API's pages.
pub(super) async fn entries(app: &TestApp, list: i64) -> HashMap<String, Value> {
    let (mut all, mut cursor) = (HashMap::new(), String::new());
    loop {
        let (status, page) = app
            .get(&format!("/api/url-lists/{list}/urls?limit=1000{cursor}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for entry in page["items"].as_array().unwrap() {
            all.insert(entry["url"].as_str().unwrap().to_owned(), entry.clone());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return all,
        }
    }
}
