//! A heavy results page, as shop pages are: a stylesheet with a web font,
//! a banner, a video, a product image per item, a tag manager, analytics,
//! an ad script that loads an ad image, and a social pixel, about 2 MB in
//! all, of which the page's items need only the document, its stylesheet,
//! its own script and that script's JSON. The items render from the site's
//! own script (`/heavy/app.js` fetches `/heavy/items.json`): `li.product`
//! with `a.title`, `.price` and an `img` whose `src` is the item's image.
//!
//! The third parties are at their real host names (`www.googletagmanager.com`,
//! `www.google-analytics.com`, `securepubads.g.doubleclick.net`,
//! `tpc.googlesyndication.com`, `connect.facebook.net`), over plain http: a
//! test reaches them through a proxy that takes every name to this server
//! (which serves them by path); anywhere else they do not resolve.
//! `connect.facebook.net` and `www.google-analytics.com` are on Chrome's HSTS
//! preload list: Chrome asks for them over https, which this server does not
//! serve, so even allowed those two requests fail (the tag manager, the ad
//! script and its ad image are what a page allowing trackers gets).
//!
//! Every answer is tallied by what it is (document, stylesheet, script, xhr,
//! image, font, media, tracker): requests and body bytes, read with
//! [`super::DemoSite::take_heavy_served`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::AppState;

/// Items a heavy page lists.
pub const HEAVY_ITEMS: u32 = 12;

/// Requests and body bytes served of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    pub requests: u64,
    pub bytes: u64,
}

/// What the heavy page's requests were served, by kind.
#[derive(Default)]
pub(super) struct Tally(Mutex<BTreeMap<&'static str, Served>>);

impl Tally {
    fn add(&self, kind: &'static str, bytes: usize) {
        let mut tally = self.0.lock().unwrap();
        let served = tally.entry(kind).or_default();
        served.requests += 1;
        served.bytes += bytes as u64;
    }

    pub(super) fn take(&self) -> BTreeMap<String, Served> {
        std::mem::take(&mut *self.0.lock().unwrap())
            .into_iter()
            .map(|(kind, served)| (kind.to_owned(), served))
            .collect()
    }
}

/// Body sizes, about those of a real shop page's parts.
const STYLESHEET_BYTES: usize = 16 * 1024;
const APP_SCRIPT_BYTES: usize = 48 * 1024;
const PRODUCT_IMAGE_BYTES: usize = 24 * 1024;
const BANNER_BYTES: usize = 120 * 1024;
const POSTER_BYTES: usize = 60 * 1024;
const FONT_BYTES: usize = 90 * 1024;
const VIDEO_BYTES: usize = 900 * 1024;
const TAG_MANAGER_BYTES: usize = 150 * 1024;
const ANALYTICS_BYTES: usize = 50 * 1024;
const AD_SCRIPT_BYTES: usize = 100 * 1024;
const AD_IMAGE_BYTES: usize = 40 * 1024;
const PIXEL_SCRIPT_BYTES: usize = 80 * 1024;

#[derive(Debug, Deserialize)]
pub(super) struct Search {
    q: Option<String>,
}

/// The item `n` of a search for `keyword`, as the page shows it: title,
/// URL (relative to the site), price and image (relative).
pub fn heavy_item(keyword: &str, n: u32) -> [String; 4] {
    let slug: String = keyword
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_lowercase(),
            false => '-',
        })
        .collect();
    [
        format!("{keyword} heavy {n}"),
        format!("/product/{slug}-h{n}"),
        format!("${n}.49"),
        format!("/heavy/img/{slug}-{n}.jpg"),
    ]
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `/heavy?q=`: the page; its items come from its script.
pub(super) async fn page(State(state): State<AppState>, Query(s): Query<Search>) -> Response {
    let keyword = escape(&s.q.unwrap_or_default());
    let html = format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Heavy shop: {keyword}</title>
<link rel="stylesheet" href="/heavy/style.css">
<script async src="http://www.googletagmanager.com/gtag/js?id=G-CRAWLFLEET"></script>
<script async src="http://securepubads.g.doubleclick.net/tag/js/gpt.js"></script>
<script async src="http://connect.facebook.net/en_US/fbevents.js"></script>
</head>
<body>
<header><img class="banner" src="/heavy/img/banner.jpg" alt="Spring sale"></header>
<video src="/heavy/video.mp4" poster="/heavy/img/poster.jpg" autoplay muted playsinline preload="auto"></video>
<h1>Results for {keyword}</h1>
<ul id="results"></ul>
<div id="ad-slot"></div>
<script src="/heavy/app.js"></script>
</body></html>
"#
    );
    state.heavy.add("document", html.len());
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// `/heavy/items.json?q=`: what the page's script renders.
pub(super) async fn items(State(state): State<AppState>, Query(s): Query<Search>) -> Response {
    let keyword = s.q.unwrap_or_default();
    let items: Vec<serde_json::Value> = (1..=HEAVY_ITEMS)
        .map(|n| {
            let [title, url, price, image] = heavy_item(&keyword, n);
            serde_json::json!({"title": title, "url": url, "price": price, "image": image})
        })
        .collect();
    let body = serde_json::to_string(&items).expect("JSON");
    state.heavy.add("xhr", body.len());
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The page's own script: the items from `/heavy/items.json`, then a
/// comment as long as a shop's bundle.
const APP_SCRIPT: &str = r#"(async () => {
  const q = new URLSearchParams(location.search).get('q') || '';
  const answer = await fetch('/heavy/items.json?q=' + encodeURIComponent(q));
  const items = await answer.json();
  const list = document.getElementById('results');
  for (const item of items) {
    const li = document.createElement('li');
    li.className = 'product';
    const img = document.createElement('img');
    img.src = item.image;
    img.alt = item.title;
    const a = document.createElement('a');
    a.className = 'title';
    a.href = item.url;
    a.textContent = item.title;
    const price = document.createElement('span');
    price.className = 'price';
    price.textContent = item.price;
    li.append(img, a, price);
    list.appendChild(li);
  }
})();
"#;

const STYLESHEET: &str = "@font-face { font-family: HeavySans; src: url(/heavy/font.woff2) format(\"woff2\"); }\n\
body { font-family: HeavySans, sans-serif; }\n\
.banner { width: 100%; }\n.product img { width: 120px; height: 120px; }\n";

/// Tag manager: loads analytics, which sends a hit.
const TAG_MANAGER: &str = r#"(() => {
  window.dataLayer = window.dataLayer || [];
  const s = document.createElement('script');
  s.async = true;
  s.src = 'http://www.google-analytics.com/analytics.js';
  document.head.appendChild(s);
})();
"#;
const ANALYTICS: &str = r#"(() => {
  new Image().src = 'http://www.google-analytics.com/collect?v=1&t=pageview&dl=' + encodeURIComponent(location.href);
})();
"#;
/// Ad script: fills the ad slot with an ad image.
const AD_SCRIPT: &str = r#"(() => {
  const show = () => {
    const slot = document.getElementById('ad-slot');
    if (!slot) return setTimeout(show, 10);
    const img = document.createElement('img');
    img.src = 'http://tpc.googlesyndication.com/simgad/4242.jpg';
    slot.appendChild(img);
  };
  show();
})();
"#;
const PIXEL_SCRIPT: &str = "window.fbq = function () {};\n";

/// `text` followed by a comment making it `bytes` long.
fn padded(text: &str, bytes: usize) -> String {
    let fill = bytes.saturating_sub(text.len() + 6);
    format!("{text}/*{}*/\n", "x".repeat(fill))
}

fn answer(
    state: &AppState,
    kind: &'static str,
    content_type: &'static str,
    body: impl Into<Vec<u8>>,
) -> Response {
    let body = body.into();
    state.heavy.add(kind, body.len());
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Bytes that start as a `kind` file does, `bytes` long.
fn filler(magic: &[u8], bytes: usize) -> Vec<u8> {
    let mut body = magic.to_vec();
    body.resize(bytes.max(magic.len()), 0x5a);
    body
}

const JPEG: &[u8] = &[0xff, 0xd8, 0xff, 0xe0];

pub(super) async fn stylesheet(State(state): State<AppState>) -> Response {
    answer(
        &state,
        "stylesheet",
        "text/css",
        padded(STYLESHEET, STYLESHEET_BYTES),
    )
}

pub(super) async fn app_script(State(state): State<AppState>) -> Response {
    answer(
        &state,
        "script",
        "text/javascript",
        padded(APP_SCRIPT, APP_SCRIPT_BYTES),
    )
}

/// `/heavy/img/{name}`: the banner, the poster, or a product's image.
pub(super) async fn image(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    let bytes = match name.as_str() {
        "banner.jpg" => BANNER_BYTES,
        "poster.jpg" => POSTER_BYTES,
        _ => PRODUCT_IMAGE_BYTES,
    };
    answer(&state, "image", "image/jpeg", filler(JPEG, bytes))
}

pub(super) async fn font(State(state): State<AppState>) -> Response {
    answer(&state, "font", "font/woff2", filler(b"wOF2", FONT_BYTES))
}

pub(super) async fn video(State(state): State<AppState>) -> Response {
    answer(
        &state,
        "media",
        "video/mp4",
        filler(b"\0\0\0\x18ftypmp42", VIDEO_BYTES),
    )
}

/// The third parties, by path (whatever host named them).
pub(super) async fn tag_manager(State(state): State<AppState>) -> Response {
    answer(
        &state,
        "tracker",
        "text/javascript",
        padded(TAG_MANAGER, TAG_MANAGER_BYTES),
    )
}

pub(super) async fn analytics(State(state): State<AppState>) -> Response {
    answer(
        &state,
        "tracker",
        "text/javascript",
        padded(ANALYTICS, ANALYTICS_BYTES),
    )
}

pub(super) async fn collect(State(state): State<AppState>) -> Response {
    answer(&state, "tracker", "image/gif", filler(b"GIF89a", 43))
}

pub(super) async fn ad_script(State(state): State<AppState>) -> Response {
    answer(
        &state,
        "tracker",
        "text/javascript",
        padded(AD_SCRIPT, AD_SCRIPT_BYTES),
    )
}

pub(super) async fn ad_image(State(state): State<AppState>) -> Response {
    answer(
        &state,
        "tracker",
        "image/jpeg",
        filler(JPEG, AD_IMAGE_BYTES),
    )
}

pub(super) async fn pixel_script(State(state): State<AppState>) -> Response {
    answer(
        &state,
        "tracker",
        "text/javascript",
        padded(PIXEL_SCRIPT, PIXEL_SCRIPT_BYTES),
    )
}

/// The tally's home in the site's state.
pub(super) type Shared = Arc<Tally>;
