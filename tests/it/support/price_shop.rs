//! A one-page shop written the way shops write values: prices as ko-KR,
//! de-DE and en-US write them, dates by a format and relative to now, tags
//! as a list of elements, links relative to the page, an item whose price
//! does not parse and an ad without a title. A test moves the lamp's price
//! between runs.

use std::sync::{
    Arc,
    atomic::{AtomicI64, Ordering},
};

use axum::{Router, extract::State, response::Html, routing::get};
use serde_json::{Value, json};

/// The shop on a loopback port of its own; stops when dropped.
pub struct PriceShop {
    pub base: String,
    lamp_won: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<()>,
}

impl PriceShop {
    /// The shop with the lamp at 1,299,000 won.
    pub async fn start() -> PriceShop {
        let lamp_won = Arc::new(AtomicI64::new(1_299_000));
        let app = Router::new()
            .route("/shop", get(page))
            .with_state(lamp_won.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        PriceShop {
            base,
            lamp_won,
            task,
        }
    }

    /// From now on the lamp costs `won`.
    pub fn price_lamp(&self, won: i64) {
        self.lamp_won.store(won, Ordering::SeqCst);
    }

    /// A site reading the shop in `render` mode with a rule on every field.
    pub fn site_body(&self, name: &str, render: &str) -> Value {
        json!({
            "name": name,
            "search_url": format!("{}/shop?q={{keyword}}", self.base),
            "render": render,
            "item_selector": "li.product",
            "fields": {
                "title": {"selector": "a.title", "required": true},
                "link": {"selector": "a.title", "attr": "href"},
                "price": {"selector": ".price", "number": {"locale": "ko-KR", "currency_field": "currency"}},
                "price_de": {"selector": ".de", "number": {"locale": "de-DE"}},
                "price_us": {"selector": ".us", "number": {"locale": "en-US"}},
                "posted": {"selector": "time", "date": {"formats": ["%Y.%m.%d %H:%M"], "time_zone": "Asia/Seoul"}},
                "seen": {"selector": ".ago", "date": {"time_zone": "Asia/Seoul"}},
                "tags": {"selector": ".tag", "all": true},
                "sku": {"selector": ".sku", "regex": r"SKU:\s*(\S+)"},
                "specs": {"selector": "a.more", "attr": "data-href", "link": true},
                "stock": {"selector": ".stock", "number": {}, "default": 0},
            },
        })
    }
}

impl Drop for PriceShop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `n` with a comma every three digits.
fn grouped(n: i64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

async fn page(State(lamp_won): State<Arc<AtomicI64>>) -> Html<String> {
    let won = grouped(lamp_won.load(Ordering::SeqCst));
    Html(format!(
        r#"<html><body><ul id="results">
<li class="product">
  <a class="title" href="/p/1">Lamp</a>
  <span class="price">₩{won}</span> <span class="de">1.299,00 €</span> <span class="us">$1,299</span>
  <time>2025.03.04 10:00</time> <span class="ago">2 days ago</span>
  <b class="tag">red</b><b class="tag"> big
     lamp </b>
  <span class="sku">SKU: LMP-1</span> <a class="more" data-href="../p/1/specs">specs</a>
</li>
<li class="product">
  <a class="title" href="/p/2">Desk</a>
  <span class="price">Call for price</span> <span class="de">89,90 €</span> <span class="us">$89.90</span>
  <time>2025.03.05 09:30</time> <span class="ago">yesterday</span>
  <span class="sku">SKU: DSK-2</span> <span class="stock">12 left</span>
</li>
<li class="product ad"><span class="price">₩990</span></li>
</ul></body></html>"#
    ))
}
