//! A tiny bundled shop website: what `crawlfleet --demo` crawls, and the
//! fixture site of the integration tests. Everything it lists is a pure
//! function of the keyword, so callers can state the expected results with
//! [`expected_products`] instead of hard-coding them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const PAGES: u32 = 3;
const PER_PAGE: u32 = 5;
const TOTAL: u32 = PAGES * PER_PAGE;
/// Long enough for timeout tests, short enough that a typo can't wedge a test run.
const MAX_SLOW_MS: u64 = 120_000;
/// XORed into API tokens so they look opaque: crawlers must pass them back, not compute them.
const TOKEN_KEY: u32 = 0xC0FFEE;

/// One product as the site lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Product {
    pub title: String,
    /// Relative on the site itself; absolute in [`expected_products`].
    pub url: String,
    pub price: String,
    pub image: String,
    /// The `/search` page (1..=3) that lists it.
    pub page: u32,
}

/// The products the site lists for `keyword`, in page order, with `url` and
/// `image` made absolute against `base_url` (as a crawler should report them).
pub fn expected_products(base_url: &str, keyword: &str) -> Vec<Product> {
    let base = base_url.trim_end_matches('/');
    (1..=TOTAL)
        .map(|n| {
            let p = product(keyword, n);
            Product {
                url: format!("{base}{}", p.url),
                image: format!("{base}{}", p.image),
                ..p
            }
        })
        .collect()
}

fn product(keyword: &str, n: u32) -> Product {
    // ASCII-only so urls need no percent-encoding.
    let slug: String = keyword
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    Product {
        title: format!("{keyword} product {n}"),
        url: format!("/product/{slug}-{n}"),
        price: price(n),
        image: format!("/img/{slug}-{n}.png"),
        page: (n - 1) / PER_PAGE + 1,
    }
}

fn price(n: u32) -> String {
    format!("${}.99", n * 7 % 100)
}

/// Products `first..=last` (1-based), clipped to what exists.
fn products(keyword: &str, first: u32, last: u32) -> Vec<Product> {
    (first.max(1)..=last.min(TOTAL))
        .map(|n| product(keyword, n))
        .collect()
}

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Must stay byte-identical to the template in `JS_SEARCH`.
fn item_html(p: &Product) -> String {
    format!(
        r#"<li class="product"><a class="title" href="{}">{}</a><span class="price">{}</span><img class="thumb" src="{}"></li>"#,
        p.url,
        esc(&p.title),
        p.price,
        p.image
    )
}

fn page_html(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n<body>\n{body}\n</body></html>\n"
    ))
}

fn search_html(keyword: &str, page: u32) -> Html<String> {
    let first = page.saturating_sub(1).saturating_mul(PER_PAGE) + 1;
    let items: String = products(keyword, first, first + PER_PAGE - 1)
        .iter()
        .map(item_html)
        .collect();
    let none = if items.is_empty() {
        "\n<p class=\"no-results\">No products found.</p>"
    } else {
        ""
    };
    let kw = esc(keyword);
    page_html(
        &format!("Search: {kw}"),
        &format!("<h1>Results for {kw}, page {page}</h1>\n<ul id=\"results\">{items}</ul>{none}"),
    )
}

// The script reads its parameters from the URL rather than having the server
// splice them in, so no keyword can ever break out of the <script>. Without JS
// the page must show zero items, even to a crawler that greps the raw source.
const JS_SEARCH: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Search (JavaScript)</title></head>
<body>
<h1>Results (rendered by JavaScript)</h1>
<ul id="results"></ul>
<script>
const p = new URLSearchParams(location.search);
const q = p.get('q') || '', page = p.get('page') || '1';
const delay = parseInt(p.get('delay_ms') || '400', 10);
const cls = 'product'; // spelled apart so the raw page never contains an item's markup
const esc = s => s.replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'})[c]);
setTimeout(async () => {
  try {
    const r = await fetch('/api/search?q=' + encodeURIComponent(q) + '&page=' + encodeURIComponent(page));
    const data = await r.json();
    const ul = document.getElementById('results');
    ul.innerHTML = data.items.map(i => `<li class="${cls}"><a class="title" href="${i.url}">${esc(i.title)}</a><span class="price">${i.price}</span><img class="thumb" src="${i.image}"></li>`).join('');
    if (data.items.length === 0) ul.insertAdjacentHTML('afterend', '<p class="no-results">No products found.</p>');
  } finally {
    document.body.insertAdjacentHTML('beforeend', '<div id="ready"></div>');
  }
}, isNaN(delay) ? 400 : delay);
</script>
</body></html>
"#;

const INDEX: &str = r#"<h1>crawlfleet demo shop</h1>
<ul>
<li><a href="/search?q=rust&amp;page=1">/search</a> server-rendered results (pages 1-3, 5 products each)</li>
<li><a href="/js-search?q=rust&amp;page=1">/js-search</a> the same results, rendered by JavaScript after a delay</li>
<li><a href="/api/search?q=rust&amp;page=1">/api/search</a> the same results as JSON, with a next_token</li>
<li><a href="/static">/static</a> a fixed page of 5 products</li>
<li><a href="/slow?ms=2000&amp;q=rust">/slow</a> search results after a delay</li>
<li><a href="/product/rust-1">/product/{id}</a> a product page</li>
</ul>"#;

/// 1x1 transparent PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0b, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x60, 0x00, 0x02, 0x00,
    0x00, 0x05, 0x00, 0x01, 0xe9, 0xfa, 0xdc, 0xd8, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44,
    0xae, 0x42, 0x60, 0x82,
];

#[derive(Deserialize)]
struct Params {
    q: Option<String>,
    page: Option<u32>,
    page_size: Option<u32>,
    token: Option<String>,
    ms: Option<u64>,
}

#[derive(Default)]
struct Counters {
    hits: Mutex<HashMap<String, u64>>,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

/// Decrements on drop, so requests the client abandons mid-way (a crawler
/// timing out on /slow) stop counting as in flight.
struct InFlight(Arc<Counters>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn count(State(c): State<Arc<Counters>>, req: Request, next: Next) -> Response {
    *c.hits
        .lock()
        .unwrap()
        .entry(req.uri().path().to_owned())
        .or_default() += 1;
    let now = c.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    c.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let _guard = InFlight(c.clone());
    next.run(req).await
}

async fn search(Query(p): Query<Params>) -> Html<String> {
    search_html(p.q.as_deref().unwrap_or(""), p.page.unwrap_or(1).max(1))
}

async fn api_search(Query(p): Query<Params>) -> Response {
    let keyword = p.q.unwrap_or_default();
    // 0 would never advance; the cap keeps a single page bounded.
    let size = p.page_size.unwrap_or(PER_PAGE).clamp(1, 100);
    // The token carries an item offset, not a page, so it stays valid whatever page_size is sent with it.
    let offset = match p.token {
        Some(t) => match u32::from_str_radix(&t, 16).map(|v| v ^ TOKEN_KEY) {
            Ok(o) if o <= TOTAL => o,
            _ => {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"error": "invalid token"})),
                )
                    .into_response();
            }
        },
        None => p
            .page
            .unwrap_or(1)
            .max(1)
            .saturating_sub(1)
            .saturating_mul(size),
    };
    let end = offset.saturating_add(size).min(TOTAL);
    let items: Vec<_> = products(&keyword, offset + 1, end)
        .into_iter()
        .map(|p| json!({"title": p.title, "url": p.url, "price": p.price, "image": p.image}))
        .collect();
    let next_token = (end < TOTAL).then(|| format!("{:x}", end ^ TOKEN_KEY));
    Json(json!({"items": items, "next_token": next_token})).into_response()
}

async fn product_page(Path(id): Path<String>) -> Html<String> {
    let n = id.rsplit_once('-').and_then(|(_, n)| n.parse::<u32>().ok());
    let price = n
        .map(|n| format!("<span class=\"price\">{}</span>", price(n)))
        .unwrap_or_default();
    page_html(
        &format!("Product {}", esc(&id)),
        &format!("<h1>Product {}</h1>\n{price}", esc(&id)),
    )
}

async fn slow(State(s): State<AppState>, Query(p): Query<Params>) -> Html<String> {
    let ms = p.ms.unwrap_or(1000).min(MAX_SLOW_MS);
    // Returning early on shutdown lets stop() finish without waiting out the sleep.
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
        _ = s.shutdown.cancelled() => {}
    }
    search_html(p.q.as_deref().unwrap_or("slow"), p.page.unwrap_or(1).max(1))
}

/// Never answers (until the site stops): a hung server.
async fn hang(State(s): State<AppState>) -> Html<String> {
    s.shutdown.cancelled().await;
    page_html("hung", "")
}

/// A page whose script never ends: the renderer is busy forever.
const SPIN: &str = "<!doctype html><html><head><title>spin</title>\
<script>for (;;) {}</script></head><body><ul id=\"results\"></ul></body></html>";

/// Answers with the status code asked for, e.g. `/status/404`.
async fn status(Path(code): Path<u16>) -> Response {
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

/// Fails with 500 the first `fail` times it is asked for `key`, then serves
/// the search like `/search`: a site that recovers.
async fn flaky(State(s): State<AppState>, Query(p): Query<FlakyParams>) -> Response {
    let seen = {
        let mut counts = s.flaky.lock().expect("flaky lock");
        let n = counts.entry(p.key.clone()).or_insert(0);
        *n += 1;
        *n
    };
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
struct FlakyParams {
    key: String,
    fail: u32,
    q: Option<String>,
    page: Option<u32>,
}

#[derive(Clone)]
struct AppState {
    shutdown: CancellationToken,
    flaky: Arc<std::sync::Mutex<std::collections::HashMap<String, u32>>>,
}

fn router(counters: Arc<Counters>, shutdown: CancellationToken) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { page_html("crawlfleet demo shop", INDEX) }),
        )
        .route("/search", get(search))
        .route("/js-search", get(|| async { Html(JS_SEARCH) }))
        .route("/api/search", get(api_search))
        .route("/product/{id}", get(product_page))
        .route(
            "/img/{name}",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], PNG) }),
        )
        .route("/static", get(|| async { search_html("static", 1) }))
        .route("/slow", get(slow))
        .route("/hang", get(hang))
        .route("/spin", get(|| async { Html(SPIN) }))
        .route("/status/{code}", get(status))
        .route("/flaky", get(flaky))
        .with_state(AppState {
            shutdown,
            flaky: Default::default(),
        })
        .layer(middleware::from_fn_with_state(counters, count))
}

/// The running demo site. Dropping it stops the server in the background;
/// [`DemoSite::stop`] also waits for it.
pub struct DemoSite {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl DemoSite {
    /// Serves the site on 127.0.0.1:`port` (0 = any free port) until dropped/stopped.
    pub async fn start(port: u16) -> anyhow::Result<DemoSite> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("binding the demo site to 127.0.0.1:{port}"))?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let counters = Arc::new(Counters::default());
        let app = router(counters.clone(), shutdown.clone());
        let signal = shutdown.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { signal.cancelled().await });
            if let Err(e) = served.await {
                tracing::warn!(error = %e, "demo site server failed");
            }
        });
        tracing::info!(%addr, "demo site listening");
        Ok(DemoSite {
            addr,
            shutdown,
            task: Some(task),
            counters,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// e.g. "http://127.0.0.1:PORT"
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Number of requests received per path (e.g. "/search"), for tests that count what the site saw.
    /// The query string is not part of the path. A path ending in '/' (e.g. "/product/") sums every path under it.
    pub fn hits(&self, path: &str) -> u64 {
        let hits = self.counters.hits.lock().unwrap();
        if path.ends_with('/') && path.len() > 1 {
            hits.iter()
                .filter(|(p, _)| p.starts_with(path))
                .map(|(_, n)| n)
                .sum()
        } else {
            hits.get(path).copied().unwrap_or(0)
        }
    }

    /// Requests currently being served (in flight), for concurrency assertions.
    pub fn in_flight(&self) -> u64 {
        self.counters.in_flight.load(Ordering::SeqCst)
    }

    /// The most requests ever in flight at once.
    pub fn max_in_flight(&self) -> u64 {
        self.counters.max_in_flight.load(Ordering::SeqCst)
    }

    /// Stops serving and waits for the server task.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(mut task) = self.task.take() {
            // Graceful shutdown waits for open connections; a client that never
            // finishes sending its request must not hang the caller forever.
            if tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
            {
                tracing::warn!("demo site did not shut down within 5s; aborting it");
                task.abort();
            }
        }
    }
}

impl Drop for DemoSite {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Plain HTTP/1.0 GET: the server closes the connection, so read to EOF.
    async fn get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.unwrap();
        let split = buf
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("no header end")
            + 4;
        let status = String::from_utf8_lossy(&buf[9..12]).parse().unwrap();
        (status, buf[split..].to_vec())
    }

    async fn get_text(addr: SocketAddr, path: &str) -> String {
        let (status, body) = get(addr, path).await;
        assert_eq!(status, 200, "{path}");
        String::from_utf8(body).unwrap()
    }

    #[tokio::test]
    async fn search_pages_list_expected_products() {
        let site = DemoSite::start(0).await.unwrap();
        let expected = expected_products(&site.base_url(), "Rust Books");
        assert_eq!(expected.len(), 15);
        for page in 1..=3u32 {
            let html = get_text(site.addr(), &format!("/search?q=Rust%20Books&page={page}")).await;
            assert_eq!(html.matches(r#"<li class="product">"#).count(), 5);
            for p in expected.iter().filter(|p| p.page == page) {
                let rel = p.url.strip_prefix(&site.base_url()).unwrap();
                assert!(
                    html.contains(&format!(r#"href="{rel}">{}</a>"#, p.title)),
                    "{html}"
                );
                assert!(html.contains(&p.price));
            }
        }
        let html = get_text(site.addr(), "/search?q=Rust%20Books&page=4").await;
        assert!(
            html.contains(r#"<ul id="results"></ul>"#) && html.contains(r#"class="no-results""#)
        );
        assert!(
            get_text(site.addr(), "/search?q=x")
                .await
                .contains("/product/x-1")
        );
        assert_eq!(site.hits("/search"), 5);
        assert_eq!(site.in_flight(), 0);
        site.stop().await;
    }

    #[tokio::test]
    async fn escapes_keyword_and_serves_other_pages() {
        let site = DemoSite::start(0).await.unwrap();
        let html = get_text(site.addr(), "/search?q=%3Cb%3E%26x").await;
        assert!(
            html.contains(r#"href="/product/-b--x-1">&lt;b&gt;&amp;x product 1</a>"#),
            "{html}"
        );
        let js = get_text(site.addr(), "/js-search?q=rust").await;
        assert!(
            js.contains(r#"<ul id="results"></ul>"#) && !js.contains(r#"<li class="product">"#)
        );
        let stat = get_text(site.addr(), "/static").await;
        assert_eq!(stat.matches(r#"<li class="product">"#).count(), 5);
        assert!(
            get_text(site.addr(), "/product/rust-2")
                .await
                .contains("<h1>Product rust-2</h1>")
        );
        let (status, png) = get(site.addr(), "/img/rust-1.png").await;
        assert_eq!((status, &png[..8]), (200, &b"\x89PNG\r\n\x1a\n"[..]));
        assert!(get_text(site.addr(), "/").await.contains("/js-search"));
        assert_eq!(site.hits("/product/"), 1);
        site.stop().await;
    }

    async fn follow_tokens(site: &DemoSite, first: &str) -> (usize, Vec<String>) {
        let (mut requests, mut urls, mut path) = (0, Vec::new(), first.to_owned());
        loop {
            let v: serde_json::Value =
                serde_json::from_str(&get_text(site.addr(), &path).await).unwrap();
            requests += 1;
            urls.extend(
                v["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["url"].as_str().unwrap().to_owned()),
            );
            match v["next_token"].as_str() {
                Some(t) => path = format!("{}&token={t}", first.split("&page=").next().unwrap()),
                None => return (requests, urls),
            }
        }
    }

    #[tokio::test]
    async fn api_token_chain_covers_all_products() {
        let site = DemoSite::start(0).await.unwrap();
        let base = site.base_url();
        let want: Vec<String> = expected_products(&base, "rust")
            .into_iter()
            .map(|p| p.url.replacen(&base, "", 1))
            .collect();
        assert_eq!(
            follow_tokens(&site, "/api/search?q=rust&page=1").await,
            (3, want.clone())
        );
        assert_eq!(
            follow_tokens(&site, "/api/search?q=rust&page_size=4&page=1").await,
            (4, want.clone())
        );
        let v: serde_json::Value =
            serde_json::from_str(&get_text(site.addr(), "/api/search?q=rust&page=4").await)
                .unwrap();
        assert!(v["items"].as_array().unwrap().is_empty() && v["next_token"].is_null());
        assert_eq!(get(site.addr(), "/api/search?q=rust&token=zz").await.0, 400);
        site.stop().await;
    }

    #[tokio::test]
    async fn slow_counts_concurrency_and_stop_does_not_wait_it_out() {
        let site = DemoSite::start(0).await.unwrap();
        let addr = site.addr();
        let reqs: Vec<_> = (0..3)
            .map(|_| tokio::spawn(get_text(addr, "/slow?ms=300&q=rust")))
            .collect();
        for r in reqs {
            assert!(r.await.unwrap().contains("rust product 1"));
        }
        assert_eq!(
            (site.max_in_flight(), site.in_flight(), site.hits("/slow")),
            (3, 0, 3)
        );
        let hung = tokio::spawn(get(addr, "/slow?ms=999999"));
        while site.in_flight() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let t = std::time::Instant::now();
        site.stop().await;
        assert!(t.elapsed() < Duration::from_secs(2));
        let _ = hung.await;
    }
}
