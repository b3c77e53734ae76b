//! A shop with detail pages: two list pages of two products each (a third
//! page is empty), each product linking to its own page with a SKU, a
//! weight written the German way and a stock line that shows only after a
//! script runs. A test moves a product's list price, or has a product page
//! answer 500 (a number of times) or hang. It counts each request.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    extract::{Path, Query, State},
    http::StatusCode,
    response::{Html, IntoResponse, Response},
    routing::get,
};
use serde_json::{Value, json};

use super::RequestCounts;

/// Products in the shop, two a list page.
pub const PRODUCTS: u32 = 4;

/// What a product page does instead of answering.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Answers 500 this many more times.
    Status500(u32),
    /// Never answers (within a test's time).
    Hang,
}

#[derive(Default)]
struct Shop {
    /// List prices in cents, by product.
    prices: HashMap<u32, u32>,
    faults: HashMap<u32, Fault>,
    /// A product listed a second time at the end of the first page (an ad).
    twice: Option<u32>,
}

/// The shop on a loopback port of its own; stops when dropped.
pub struct DetailShop {
    pub base: String,
    pub requests: RequestCounts,
    shop: Arc<Mutex<Shop>>,
    task: tokio::task::JoinHandle<()>,
}

impl DetailShop {
    pub async fn start() -> DetailShop {
        let shop = Arc::new(Mutex::new(Shop {
            prices: (1..=PRODUCTS).map(|n| (n, 1000 * n)).collect(),
            faults: HashMap::new(),
            twice: None,
        }));
        let requests = RequestCounts::default();
        let app = requests.count(
            Router::new()
                .route("/list", get(list))
                .route("/p/{n}", get(product))
                .with_state(shop.clone()),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        DetailShop {
            base,
            requests,
            shop,
            task,
        }
    }

    /// From now on product `n` is listed at `cents`.
    pub fn price(&self, n: u32, cents: u32) {
        self.shop.lock().unwrap().prices.insert(n, cents);
    }

    /// From now on product `n` is listed again at the end of the first page.
    pub fn list_twice(&self, n: u32) {
        self.shop.lock().unwrap().twice = Some(n);
    }

    /// From now on product `n`'s page does `fault` instead of answering.
    pub fn fault(&self, n: u32, fault: Fault) {
        self.shop.lock().unwrap().faults.insert(n, fault);
    }

    /// Requests for product `n`'s page so far.
    pub fn detail_requests(&self, n: u32) -> u32 {
        self.requests.on_path(&format!("/p/{n}"))
    }

    /// Requests for every product page so far.
    pub fn all_detail_requests(&self) -> u32 {
        (1..=PRODUCTS).map(|n| self.detail_requests(n)).sum()
    }

    /// A site reading the shop in `render` mode, its detail pages read as
    /// `read` says.
    pub fn site_body(&self, name: &str, render: &str, read: Value) -> Value {
        json!({
            "name": name,
            "search_url": format!("{}/list?q={{keyword}}&page={{page}}", self.base),
            "render": render,
            "item_selector": "li.product",
            "fields": {
                "title": {"selector": "a.title"},
                "url": {"selector": "a.title", "attr": "href"},
                "price": {"selector": ".price", "number": {"locale": "en-US"}},
            },
            "detail": {
                "url_field": "url",
                "fields": {
                    "sku": {"selector": ".sku", "regex": r"SKU:\s*(\S+)"},
                    "weight_kg": {"selector": ".weight", "number": {"locale": "de-DE"}},
                    "maker": {"structured": "Product.brand.name"},
                },
                "read": read,
            },
        })
    }

    /// Checks that `fields` are product `n`'s, listed at `cents`, with
    /// the values of its detail page (numbers compared as numbers).
    pub fn assert_product(&self, fields: &Value, n: u32, cents: u32) {
        let base = &self.base;
        assert_eq!(fields["title"], format!("Product {n}"), "{fields}");
        assert_eq!(fields["url"], format!("{base}/p/{n}"), "{fields}");
        assert_eq!(
            fields["price"].as_f64(),
            Some(f64::from(cents) / 100.0),
            "{fields}"
        );
        assert_eq!(fields["sku"], format!("SKU-{n}"), "{fields}");
        assert_eq!(
            fields["weight_kg"].as_f64(),
            Some(1000.5 * f64::from(n)),
            "{fields}"
        );
        assert_eq!(fields["maker"], format!("Maker {n}"), "{fields}");
    }
}

impl Drop for DetailShop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn list(
    State(shop): State<Arc<Mutex<Shop>>>,
    Query(query): Query<HashMap<String, String>>,
) -> Html<String> {
    let page: u32 = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
    let (prices, twice) = {
        let shop = shop.lock().unwrap();
        (shop.prices.clone(), shop.twice)
    };
    let again = twice.filter(|_| page == 1);
    let items: String = (1..=PRODUCTS)
        .filter(|n| (n - 1) / 2 + 1 == page)
        .chain(again)
        .map(|n| {
            let cents = prices[&n];
            format!(
                r#"<li class="product"><a class="title" href="/p/{n}">Product {n}</a>
                   <span class="price">${}.{:02}</span></li>"#,
                cents / 100,
                cents % 100
            )
        })
        .collect();
    Html(format!(
        "<!doctype html><html><body><ul>{items}</ul></body></html>"
    ))
}

async fn product(State(shop): State<Arc<Mutex<Shop>>>, Path(n): Path<u32>) -> Response {
    let fault = {
        let mut shop = shop.lock().unwrap();
        let fault = shop.faults.get(&n).copied();
        match fault {
            Some(Fault::Status500(1)) => {
                shop.faults.remove(&n);
            }
            Some(Fault::Status500(more)) => {
                shop.faults.insert(n, Fault::Status500(more - 1));
            }
            _ => {}
        }
        fault
    };
    match fault {
        Some(Fault::Status500(_)) => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "product page broke").into_response();
        }
        Some(Fault::Hang) => {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        None => {}
    }
    if n == 0 || n > PRODUCTS {
        return StatusCode::NOT_FOUND.into_response();
    }
    // The weight as Germans write it: 1.000,5 kg for product 1.
    let weight = format!(
        "{},{}",
        group(1000 * n + n / 2),
        if n % 2 == 1 { 5 } else { 0 }
    );
    let ld = json!({"@context": "https://schema.org", "@type": "Product", "name": format!("Product {n}"),
                   "brand": {"@type": "Brand", "name": format!("Maker {n}")}});
    Html(format!(
        r#"<!doctype html><html><head><script type="application/ld+json">{ld}</script></head>
           <body><h1>Product {n}</h1><p class="sku">SKU: SKU-{n}</p>
           <p class="weight">{weight} kg</p><div id="stock"></div>
           <script>setTimeout(() => {{ document.getElementById('stock').innerHTML = '<b class="in-stock">{n} left</b>'; }}, 300);</script>
           </body></html>"#
    ))
    .into_response()
}

/// `n` with a dot every three digits.
fn group(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('.');
        }
        out.push(c);
    }
    out
}
