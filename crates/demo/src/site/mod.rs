//! A tiny bundled shop website: what `crawlfleet --demo` crawls, and the
//! fixture site of the integration tests. Everything it lists is a pure
//! function of the keyword, so callers can state the expected results with
//! [`expected_products`] instead of hard-coding them. It keeps a bounded log
//! of the requests it received, for tests that check what a crawler sent, and
//! serves the robots.txt a test sets (none by default).

mod catalog;
mod feed;
mod heavy;
mod hostile;
mod hostile_structured;
mod leftovers;
mod members;
mod robots;
mod shop;
mod trouble;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::{self, Next};
use axum::response::{Html, Response};
use axum::routing::get;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use catalog::{CATALOG_SIZE, catalog_product};
pub use feed::{INITIAL_POSTS, expected_posts};
pub use heavy::{HEAVY_ITEMS, Served, heavy_item};
pub use members::member_cookie;
pub use robots::RobotsTxt;
pub use shop::{Product, expected_products};

use shop::{INDEX, JS_SEARCH, PNG, page_html, search_html};

/// Requests the log keeps (the oldest go first): bounded in a long demo run.
const LOG_CAPACITY: usize = 10_000;

/// One request the site received.
#[derive(Debug, Clone)]
pub struct Hit {
    pub at: Instant,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    /// Where the request came from (a proxy's outbound socket, say).
    pub peer: Option<SocketAddr>,
}

impl Hit {
    /// A query parameter's value (percent-decoded).
    pub fn param(&self, name: &str) -> Option<String> {
        url::form_urlencoded::parse(self.query.as_deref()?.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Default)]
struct Counters {
    hits: Mutex<HashMap<String, u64>>,
    log: Mutex<VecDeque<Hit>>,
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
    {
        let mut log = c.log.lock().unwrap();
        if log.len() == LOG_CAPACITY {
            log.pop_front();
        }
        log.push_back(Hit {
            at: Instant::now(),
            path: req.uri().path().to_owned(),
            query: req.uri().query().map(str::to_owned),
            headers: req.headers().clone(),
            peer: req
                .extensions()
                .get::<axum::extract::ConnectInfo<SocketAddr>>()
                .map(|info| info.0),
        });
    }
    let now = c.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    c.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let _guard = InFlight(c.clone());
    next.run(req).await
}

#[derive(Clone, Default)]
struct AppState {
    shutdown: CancellationToken,
    flaky: Arc<Mutex<HashMap<String, u32>>>,
    limited: Arc<Mutex<HashMap<String, u32>>>,
    /// Posts published per keyword (feed).
    feed: Arc<Mutex<HashMap<String, u32>>>,
    /// Member cookies handed out.
    members: Arc<AtomicU64>,
    /// What /robots.txt answers.
    robots: Arc<Mutex<RobotsTxt>>,
    /// What changed in each keyword's catalog.
    catalogs: Arc<Mutex<HashMap<String, catalog::Catalog>>>,
    /// What the heavy page's requests were served.
    heavy: heavy::Shared,
}

fn router(counters: Arc<Counters>, state: AppState) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { page_html("crawlfleet demo shop", INDEX) }),
        )
        .route("/search", get(shop::search))
        .route("/js-search", get(|| async { Html(JS_SEARCH) }))
        .route("/api/search", get(shop::api_search))
        .route("/product/{id}", get(shop::product_page))
        .route(
            "/img/{name}",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], PNG) }),
        )
        .route("/static", get(|| async { search_html("static", 1) }))
        .route("/feed", get(feed::feed))
        .route("/catalog", get(catalog::catalog))
        .route("/members", get(members::members))
        .route("/members/visits", get(members::visits))
        .route("/leftovers", get(leftovers::page))
        .route("/leftovers/cached.js", get(leftovers::cached_script))
        .route("/leftovers/found", get(leftovers::found))
        .route("/leftovers/framed", get(leftovers::framed))
        .route("/slow", get(trouble::slow))
        .route("/hang", get(trouble::hang))
        .route("/spin", get(|| async { Html(trouble::SPIN) }))
        .route("/status/{code}", get(trouble::status))
        .route("/flaky", get(trouble::flaky))
        .route("/limited", get(trouble::limited))
        .route("/redirect", get(trouble::redirect))
        .route("/embed", get(trouble::embed))
        .route("/deep", get(trouble::deep))
        .route("/robots.txt", get(robots::robots_txt))
        .route("/heavy", get(heavy::page))
        .route("/heavy/items.json", get(heavy::items))
        .route("/heavy/style.css", get(heavy::stylesheet))
        .route("/heavy/app.js", get(heavy::app_script))
        .route("/heavy/img/{name}", get(heavy::image))
        .route("/heavy/font.woff2", get(heavy::font))
        .route("/heavy/video.mp4", get(heavy::video))
        // The heavy page's third parties, by path whatever host named them.
        .route("/gtag/js", get(heavy::tag_manager))
        .route("/analytics.js", get(heavy::analytics))
        .route("/collect", get(heavy::collect))
        .route("/tag/js/gpt.js", get(heavy::ad_script))
        .route("/simgad/{name}", get(heavy::ad_image))
        .route("/en_US/fbevents.js", get(heavy::pixel_script))
        .route("/hostile/items", get(hostile::items))
        .route("/hostile/padded", get(hostile::padded))
        .route("/hostile/grows", get(hostile::grows))
        .route("/hostile/bad-links", get(hostile::bad_links))
        .route("/hostile/formula-base", get(hostile::formula_base))
        .route("/hostile/forger", get(hostile::forger))
        .route("/hostile/structured", get(hostile_structured::structured))
        .with_state(state)
        .layer(middleware::from_fn_with_state(counters, count))
}

/// The running demo site. Dropping it stops the server in the background;
/// [`DemoSite::stop`] also waits for it.
pub struct DemoSite {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
    state: AppState,
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
        let state = AppState {
            shutdown: shutdown.clone(),
            ..AppState::default()
        };
        let app = router(counters.clone(), state.clone());
        let signal = shutdown.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
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
            state,
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

    /// The requests received for `path` (query string not included), oldest
    /// first, from the last 10,000 of all paths.
    pub fn requests(&self, path: &str) -> Vec<Hit> {
        let log = self.counters.log.lock().unwrap();
        log.iter().filter(|h| h.path == path).cloned().collect()
    }

    /// Publishes `n` new posts at the top of `keyword`'s feed.
    pub fn publish(&self, keyword: &str, n: u32) {
        let mut feed = self.state.feed.lock().unwrap();
        let total = feed::published(&feed, keyword) + n;
        feed.insert(keyword.to_owned(), total);
    }

    /// What /robots.txt answers from now on (none by default: 404).
    pub fn serve_robots(&self, robots: RobotsTxt) {
        *self.state.robots.lock().unwrap() = robots;
    }

    /// Gives product `n` of `keyword`'s catalog a new price.
    pub fn reprice(&self, keyword: &str, n: u32, price: &str) {
        self.change_catalog(keyword, |c| c.reprice(n, price));
    }

    /// Takes product `n` out of `keyword`'s catalog (the later ones move up).
    pub fn withdraw(&self, keyword: &str, n: u32) {
        self.change_catalog(keyword, |c| c.withdraw(n));
    }

    /// Adds `count` products at the end of `keyword`'s catalog.
    pub fn stock(&self, keyword: &str, count: u32) {
        self.change_catalog(keyword, |c| c.stock(count));
    }

    fn change_catalog(&self, keyword: &str, change: impl FnOnce(&mut catalog::Catalog)) {
        let mut catalogs = self.state.catalogs.lock().unwrap();
        change(catalogs.entry(keyword.to_owned()).or_default());
    }

    /// What the heavy page's requests (`/heavy` and everything it loads,
    /// its third parties too) were served since the last call, by kind:
    /// document, stylesheet, script, xhr, image, font, media, tracker.
    pub fn take_heavy_served(&self) -> std::collections::BTreeMap<String, Served> {
        self.state.heavy.take()
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
