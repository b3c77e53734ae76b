//! Pages that misbehave the ways real sites do: slow, hung, a script that
//! never ends, any status code, a server that recovers, one that rate-limits
//! with 429 and Retry-After, redirects, a page that pulls in an image
//! from anywhere, and one nested very deep.

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::AppState;
use super::shop::{Params, esc, page_html, search_html};

/// Long enough for timeout tests, short enough that a typo can't wedge a test run.
const MAX_SLOW_MS: u64 = 120_000;

pub(super) async fn slow(State(s): State<AppState>, Query(p): Query<Params>) -> Html<String> {
    let ms = p.ms.unwrap_or(1000).min(MAX_SLOW_MS);
    // Returning early on shutdown lets stop() finish without waiting out the sleep.
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
        _ = s.shutdown.cancelled() => {}
    }
    search_html(p.q.as_deref().unwrap_or("slow"), p.page.unwrap_or(1).max(1))
}

/// Never answers (until the site stops): a hung server.
pub(super) async fn hang(State(s): State<AppState>) -> Html<String> {
    s.shutdown.cancelled().await;
    page_html("hung", "")
}

/// A page whose script never ends: the renderer is busy forever.
pub(super) const SPIN: &str = "<!doctype html><html><head><title>spin</title>\
<script>for (;;) {}</script></head><body><ul id=\"results\"></ul></body></html>";

/// Most levels `/deep` nests.
const MAX_DEPTH: usize = 5000;

/// A page of `depth` elements (60 by default), each inside the one before,
/// a link at the bottom: where a selector's cost grows fastest with its
/// nesting.
pub(super) async fn deep(Query(p): Query<DeepParams>) -> Html<String> {
    let depth = p.depth.unwrap_or(60).min(MAX_DEPTH);
    page_html(
        "deep",
        &format!(
            "{}<a class=\"title\" href=\"/product/1\">bottom</a>{}",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        ),
    )
}

#[derive(Deserialize)]
pub(super) struct DeepParams {
    depth: Option<usize>,
}

/// Answers with the status code asked for, e.g. `/status/404`.
pub(super) async fn status(Path(code): Path<u16>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    let title = format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    (
        status,
        page_html(&title, &format!("<h1>{}</h1>", esc(&title))),
    )
        .into_response()
}

/// Counts one more request for `key`; returns how many there have been.
fn count_request(counts: &Mutex<HashMap<String, u32>>, key: &str) -> u32 {
    let mut counts = counts.lock().expect("request counts lock");
    let n = counts.entry(key.to_owned()).or_insert(0);
    *n += 1;
    *n
}

/// Fails with 500 the first `fail` times it is asked for `key`, then serves
/// the search like `/search`: a site that recovers.
pub(super) async fn flaky(State(s): State<AppState>, Query(p): Query<FlakyParams>) -> Response {
    let seen = count_request(&s.flaky, &p.key);
    if seen <= p.fail {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            page_html("500", "<h1>try again</h1>"),
        )
            .into_response();
    }
    search_html(
        p.q.as_deref().unwrap_or("flaky"),
        p.page.unwrap_or(1).max(1),
    )
    .into_response()
}

#[derive(Deserialize)]
pub(super) struct FlakyParams {
    key: String,
    fail: u32,
    q: Option<String>,
    page: Option<u32>,
}

/// Answers 429 Too Many Requests (or `status`, e.g. 503) with `Retry-After: retry_after` seconds the
/// first `fail` times it is asked for `key` (with `captcha=true`: a 200 page
/// showing a captcha instead), then serves the search like `/search`: a site
/// that rate-limits.
pub(super) async fn limited(State(s): State<AppState>, Query(p): Query<LimitedParams>) -> Response {
    let seen = count_request(&s.limited, &p.key);
    if seen <= p.fail && p.captcha {
        return page_html("check", "<div class=\"captcha\">Are you a robot?</div>").into_response();
    }
    if seen <= p.fail {
        return (
            StatusCode::from_u16(p.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS),
            [(header::RETRY_AFTER, p.retry_after.to_string())],
            page_html("429", "<h1>slow down</h1>"),
        )
            .into_response();
    }
    search_html(
        p.q.as_deref().unwrap_or("limited"),
        p.page.unwrap_or(1).max(1),
    )
    .into_response()
}

#[derive(Deserialize)]
pub(super) struct LimitedParams {
    key: String,
    fail: u32,
    #[serde(default)]
    retry_after: u64,
    /// The refusal's status: 429 (default) or 503.
    #[serde(default = "too_many_requests")]
    status: u16,
    #[serde(default)]
    captcha: bool,
    q: Option<String>,
    page: Option<u32>,
}

fn too_many_requests() -> u16 {
    StatusCode::TOO_MANY_REQUESTS.as_u16()
}

/// `302 Found` to `to`, wherever that is: how a site leads a crawler elsewhere.
pub(super) async fn redirect(Query(p): Query<RedirectParams>) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, p.to)]).into_response()
}

#[derive(Deserialize)]
pub(super) struct RedirectParams {
    to: String,
}

/// Search results that also load an image from `src`, wherever that is: how
/// a page makes a browser connect to a third host.
pub(super) async fn embed(Query(p): Query<EmbedParams>) -> Html<String> {
    let Html(page) = search_html(p.q.as_deref().unwrap_or(""), 1);
    let image = format!("<img src=\"{}\" alt=\"\">\n</body>", esc(&p.src));
    Html(page.replacen("</body>", &image, 1))
}

#[derive(Deserialize)]
pub(super) struct EmbedParams {
    src: String,
    q: Option<String>,
}
