//! A shop of nine products paged every way sites page: by a "next" link, by
//! an item offset, by a "load more" button and by an endless scroll (both
//! fetching each batch from the shop, so the test counts them), and a search
//! that serves the same page whatever page is asked for. It counts every
//! request by path and query, so a test proves what was never read.

use std::collections::HashMap;

use axum::{Router, extract::Query, response::Html, routing::get};
use serde_json::{Value, json};

use super::RequestCounts;

/// Products in every listing.
pub const PRODUCTS: usize = 9;
/// Products a page (or a batch) shows.
pub const PER_PAGE: usize = 3;

/// The shop on a loopback port of its own; stops when dropped.
pub struct PagedShop {
    pub base: String,
    hits: RequestCounts,
    task: tokio::task::JoinHandle<()>,
}

impl PagedShop {
    pub async fn start() -> PagedShop {
        let hits = RequestCounts::default();
        let app = Router::new()
            .route("/next", get(next_link_page))
            .route("/offset", get(offset_page))
            .route("/repeat", get(repeating_page))
            .route("/cycle", get(cycling_page))
            .route("/more", get(load_more_page))
            .route("/scroll", get(endless_page))
            .route("/batch", get(batch))
            .with_state(());
        let app = hits.count(app);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        PagedShop { base, hits, task }
    }

    /// Requests whose path and query is `path_and_query` exactly.
    pub fn hits(&self, path_and_query: &str) -> u32 {
        self.hits.of(path_and_query)
    }

    /// Requests to `path`, whatever their query.
    pub fn hits_on(&self, path: &str) -> u32 {
        self.hits.on_path(path)
    }

    /// A site reading the shop's `search` (path and query, `{keyword}` in
    /// it) in `render` mode, with `extra` settings over it.
    pub fn site_body(&self, name: &str, search: &str, render: &str, extra: Value) -> Value {
        let mut body = json!({
            "name": name,
            "search_url": format!("{}{search}", self.base),
            "render": render,
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a"}, "link": {"selector": "a", "attr": "href"}},
        });
        for (key, value) in extra.as_object().expect("settings object") {
            body[key] = value.clone();
        }
        body
    }
}

impl Drop for PagedShop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Products `from..to` (of [`PRODUCTS`]) as list items.
fn products(from: usize, to: usize) -> String {
    (from..to.min(PRODUCTS))
        .map(|n| format!(r#"<li class="product"><a href="/p/{n}">Product {n}</a></li>"#))
        .collect()
}

fn page(body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><title>shop</title></head><body>{body}</body></html>"
    ))
}

fn number(query: &HashMap<String, String>, name: &str) -> usize {
    query.get(name).and_then(|n| n.parse().ok()).unwrap_or(1)
}

/// Page `p`, linking to page `p + 1` (relative) while there are more.
async fn next_link_page(Query(query): Query<HashMap<String, String>>) -> Html<String> {
    let p = number(&query, "p");
    let q = query.get("q").cloned().unwrap_or_default();
    let from = (p - 1) * PER_PAGE;
    let next = match from + PER_PAGE < PRODUCTS {
        true => format!(
            r#"<a class="next" href="next?q={q}&amp;p={}">Next</a>"#,
            p + 1
        ),
        false => String::new(),
    };
    page(&format!(
        r#"<ul>{}</ul><nav><a class="prev" href="/">Home</a>{next}</nav>"#,
        products(from, from + PER_PAGE)
    ))
}

/// The products from item `start` on.
async fn offset_page(Query(query): Query<HashMap<String, String>>) -> Html<String> {
    let start = query.get("start").and_then(|n| n.parse().ok()).unwrap_or(0);
    page(&format!("<ul>{}</ul>", products(start, start + PER_PAGE)))
}

/// Page 1 or 2, each linking to the other.
async fn cycling_page(Query(query): Query<HashMap<String, String>>) -> Html<String> {
    let p = number(&query, "p");
    let q = query.get("q").cloned().unwrap_or_default();
    let from = (p - 1) * PER_PAGE;
    page(&format!(
        r#"<ul>{}</ul><a class="next" href="/cycle?q={q}&amp;p={}">Next</a>"#,
        products(from, from + PER_PAGE),
        3 - p
    ))
}

/// The first page, whatever page is asked for.
async fn repeating_page() -> Html<String> {
    page(&format!("<ul>{}</ul>", products(0, PER_PAGE)))
}

/// The script that fetches batch after batch from the shop into the list.
const APPEND_BATCH_JS: &str = r#"
let batch = 1;
async function more() {
  const answer = await fetch('/batch?n=' + batch);
  const html = await answer.text();
  batch += 1;
  document.querySelector('ul').insertAdjacentHTML('beforeend', html);
  return batch * 3 < 9;
}
"#;

/// The first batch and a "Load more" button that fetches the next, gone
/// after the last.
async fn load_more_page() -> Html<String> {
    page(&format!(
        r#"<ul>{}</ul><button class="more">Load more</button>
<script>{APPEND_BATCH_JS}
document.querySelector('button.more').addEventListener('click', async (e) => {{
  const left = await more();
  if (!left) e.target.remove();
}});
</script>"#,
        products(0, PER_PAGE)
    ))
}

/// The first batch; reaching the end of the page fetches the next, until
/// there is no more.
async fn endless_page() -> Html<String> {
    page(&format!(
        r#"<div style="height: 3000px">top</div><ul>{}</ul><div id="end" style="height: 10px"></div>
<script>{APPEND_BATCH_JS}
let left = true, busy = false;
window.addEventListener('scroll', async () => {{
  if (!left || busy) return;
  if (window.innerHeight + window.scrollY < document.body.scrollHeight - 50) return;
  busy = true; left = await more(); busy = false;
}});
</script>"#,
        products(0, PER_PAGE)
    ))
}

/// Batch `n` (the first is on the page itself).
async fn batch(Query(query): Query<HashMap<String, String>>) -> Html<String> {
    let n = number(&query, "n");
    Html(products(n * PER_PAGE, (n + 1) * PER_PAGE))
}
