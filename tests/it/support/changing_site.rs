//! A one-page shop a test restyles between runs, the way real sites change
//! under a crawler: its markup moves, a field disappears, or it starts
//! refusing requests for a while.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU32, Ordering},
};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::{Html, IntoResponse, Response},
    routing::get,
};
use serde_json::{Value, json};

/// What the shop's search page looks like now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// `n` products, each with a title, a link and a price.
    Products(usize),
    /// `n` products without their price.
    WithoutPrices(usize),
    /// The products in new markup: the site's selectors find nothing.
    Restyled,
    /// The `n` products of `Products(n)`, the same values, after a redesign:
    /// cards with generated class names inside new wrappers, the price in a
    /// tag of its own.
    Redesigned(usize),
}

#[derive(Clone)]
struct Shop {
    look: Arc<Mutex<Look>>,
    refusals_left: Arc<AtomicU32>,
}

/// The shop on a loopback port of its own; stops when dropped.
pub struct ChangingSite {
    base: String,
    shop: Shop,
    task: tokio::task::JoinHandle<()>,
}

impl ChangingSite {
    pub async fn start(look: Look) -> ChangingSite {
        let shop = Shop {
            look: Arc::new(Mutex::new(look)),
            refusals_left: Arc::new(AtomicU32::new(0)),
        };
        let app = Router::new()
            .route("/shop", get(search))
            .with_state(shop.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        ChangingSite { base, shop, task }
    }

    /// From now on the page looks like `look`.
    pub fn show(&self, look: Look) {
        *self.shop.look.lock().unwrap() = look;
    }

    /// The next `n` requests get 429 (Retry-After: 1 s).
    pub fn refuse_next(&self, n: u32) {
        self.shop.refusals_left.store(n, Ordering::SeqCst);
    }

    /// A site body crawling the shop in http mode, with `extra` over it.
    pub fn site_body(&self, name: &str, extra: Value) -> Value {
        let mut body = json!({
            "name": name,
            "search_url": format!("{}/shop?q={{keyword}}", self.base),
            "render": "http",
            "item_selector": "li.product",
            "fields": {
                "title": {"selector": "a.title"},
                "link": {"selector": "a.title", "attr": "href"},
                "price": {"selector": ".price"},
            },
        });
        for (key, value) in extra.as_object().expect("settings object") {
            body[key] = value.clone();
        }
        body
    }
}

impl Drop for ChangingSite {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn search(State(shop): State<Shop>) -> Response {
    let refused = shop
        .refusals_left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if refused {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            "slow down",
        )
            .into_response();
    }
    let look = *shop.look.lock().unwrap();
    let items: String = match look {
        Look::Products(n) => (1..=n)
            .map(|i| {
                format!(
                    r#"<li class="product"><a class="title" href="/p/{i}">Lamp {i}</a><span class="price">{}.00</span></li>"#,
                    10 + i
                )
            })
            .collect(),
        Look::WithoutPrices(n) => (1..=n)
            .map(|i| format!(r#"<li class="product"><a class="title" href="/p/{i}">Lamp {i}</a></li>"#))
            .collect(),
        Look::Restyled => (1..=3)
            .map(|i| format!(r#"<div class="card"><h3><a href="/p/{i}">Lamp {i}</a></h3><b>{}.00</b></div>"#, 10 + i))
            .collect(),
        Look::Redesigned(n) => {
            let cards: String = (1..=n)
                .map(|i| {
                    format!(
                        r#"<article class="Card_x9f2"><div class="Body_q1"><h3><a class="Link_z7" href="/p/{i}">Lamp {i}</a></h3><p class="Price_k2">{}.00</p></div></article>"#,
                        10 + i
                    )
                })
                .collect();
            format!(r#"<main><section class="Grid_a1">{cards}</section></main>"#)
        }
    };
    Html(format!("<html><body><ul>{items}</ul></body></html>")).into_response()
}
