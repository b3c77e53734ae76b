//! The shop itself: products that are a pure function of the keyword, as
//! server-rendered pages, as a page rendered by JavaScript, and as a JSON API
//! paged by token.

use axum::Json;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

const PAGES: u32 = 3;
pub(super) const PER_PAGE: u32 = 5;
const TOTAL: u32 = PAGES * PER_PAGE;
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

/// The keyword as it appears in URLs: ASCII only, so no percent-encoding.
pub(super) fn slug(keyword: &str) -> String {
    keyword
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

pub(super) fn product(keyword: &str, n: u32) -> Product {
    let slug = slug(keyword);
    Product {
        title: format!("{keyword} product {n}"),
        url: format!("/product/{slug}-{n}"),
        price: price(n),
        image: format!("/img/{slug}-{n}.png"),
        page: (n - 1) / PER_PAGE + 1,
    }
}

pub(super) fn price(n: u32) -> String {
    format!("${}.99", n * 7 % 100)
}

/// Products `first..=last` (1-based), clipped to what exists.
pub(super) fn products(keyword: &str, first: u32, last: u32) -> Vec<Product> {
    (first.max(1)..=last.min(TOTAL))
        .map(|n| product(keyword, n))
        .collect()
}

pub(super) fn esc(s: &str) -> String {
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
pub(super) fn item_html(p: &Product) -> String {
    format!(
        r#"<li class="product"><a class="title" href="{}">{}</a><span class="price">{}</span><img class="thumb" src="{}"></li>"#,
        p.url,
        esc(&p.title),
        p.price,
        p.image
    )
}

pub(super) fn page_html(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n<body>\n{body}\n</body></html>\n"
    ))
}

pub(super) fn search_html(keyword: &str, page: u32) -> Html<String> {
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
pub(super) const JS_SEARCH: &str = r#"<!doctype html>
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

pub(super) const INDEX: &str = r#"<h1>crawlfleet demo shop</h1>
<ul>
<li><a href="/search?q=rust&amp;page=1">/search</a> server-rendered results (pages 1-3, 5 products each)</li>
<li><a href="/js-search?q=rust&amp;page=1">/js-search</a> the same results, rendered by JavaScript after a delay</li>
<li><a href="/api/search?q=rust&amp;page=1">/api/search</a> the same results as JSON, with a next_token</li>
<li><a href="/static">/static</a> a fixed page of 5 products</li>
<li><a href="/slow?ms=2000&amp;q=rust">/slow</a> search results after a delay</li>
<li><a href="/product/rust-1">/product/{id}</a> a product page</li>
</ul>"#;

/// 1x1 transparent PNG.
pub(super) const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0b, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x60, 0x00, 0x02, 0x00,
    0x00, 0x05, 0x00, 0x01, 0xe9, 0xfa, 0xdc, 0xd8, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44,
    0xae, 0x42, 0x60, 0x82,
];

#[derive(Deserialize)]
pub(super) struct Params {
    pub(super) q: Option<String>,
    pub(super) page: Option<u32>,
    pub(super) page_size: Option<u32>,
    pub(super) token: Option<String>,
    pub(super) ms: Option<u64>,
    /// `/members`: the member cookie is `<tag>-m<n>` instead of `m<n>`, a
    /// value a test can look for (in a log, say) without false hits.
    pub(super) tag: Option<String>,
}

pub(super) async fn search(Query(p): Query<Params>) -> Html<String> {
    search_html(p.q.as_deref().unwrap_or(""), p.page.unwrap_or(1).max(1))
}

pub(super) async fn api_search(Query(p): Query<Params>) -> Response {
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

pub(super) async fn product_page(Path(id): Path<String>) -> Html<String> {
    let n = id.rsplit_once('-').and_then(|(_, n)| n.parse::<u32>().ok());
    let price = n
        .map(|n| format!("<span class=\"price\">{}</span>", price(n)))
        .unwrap_or_default();
    page_html(
        &format!("Product {}", esc(&id)),
        &format!("<h1>Product {}</h1>\n{price}", esc(&id)),
    )
}
