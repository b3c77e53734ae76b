//! A shop a person has to use before it shows anything: its listing loads
//! only once the cookie banner is accepted, and its search is a form to type
//! the keyword into, pick a sort order and submit. It counts every request
//! by path and query.

use std::collections::HashMap;

use axum::{Router, extract::Query, response::Html, routing::get};
use serde_json::{Value, json};

use super::RequestCounts;

/// The shop on a loopback port of its own; stops when dropped.
pub struct ActionShop {
    pub base: String,
    hits: RequestCounts,
    task: tokio::task::JoinHandle<()>,
}

impl ActionShop {
    pub async fn start() -> ActionShop {
        let hits = RequestCounts::default();
        let app = Router::new()
            .route("/banner", get(behind_banner))
            .route("/listing", get(listing))
            .route("/find", get(search_form))
            .route("/results", get(results));
        let app = hits.count(app);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        ActionShop { base, hits, task }
    }

    /// Requests whose path and query is `path_and_query` exactly.
    pub fn hits(&self, path_and_query: &str) -> u32 {
        self.hits.of(path_and_query)
    }

    /// A browser site on the shop's `page` (path, no query) with `actions`.
    pub fn site_body(&self, name: &str, page: &str, actions: Value) -> Value {
        json!({
            "name": name,
            "search_url": format!("{}{page}?k={{keyword}}", self.base),
            "render": "browser",
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a"}},
            "actions": actions,
        })
    }
}

impl Drop for ActionShop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn page(body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><title>shop</title></head><body>{body}</body></html>"
    ))
}

/// An empty list under a cookie banner; accepting it loads the listing.
async fn behind_banner() -> Html<String> {
    page(
        r#"<div id="cookies"><p>We use cookies.</p><button class="accept">Accept</button></div>
<ul></ul>
<script>
document.querySelector('#cookies .accept').addEventListener('click', async () => {
  document.querySelector('#cookies').remove();
  const answer = await fetch('/listing');
  document.querySelector('ul').innerHTML = await answer.text();
});
</script>"#,
    )
}

async fn listing() -> Html<String> {
    Html(
        (0..3)
            .map(|n| format!(r#"<li class="product"><a href="/p/{n}">Product {n}</a></li>"#))
            .collect(),
    )
}

/// A search box and a sort order, submitted to `/results`.
async fn search_form() -> Html<String> {
    page(
        r#"<form action="/results" method="get">
<input name="q" type="search" autocomplete="off">
<select name="sort"><option value="relevance">Best match</option><option value="new">Newest first</option></select>
</form>"#,
    )
}

/// Three results for `q`, in `sort` order.
async fn results(Query(query): Query<HashMap<String, String>>) -> Html<String> {
    let q = query.get("q").cloned().unwrap_or_default();
    let sort = query.get("sort").cloned().unwrap_or_default();
    let items: String = (0..3)
        .map(|n| {
            let q = html_escape(&q);
            format!(r#"<li class="product"><a href="/p/{n}">{q} {n} by {sort}</a></li>"#)
        })
        .collect();
    page(&format!("<ul>{items}</ul>"))
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
