//! A shop that publishes its products as structured data, on a loopback
//! port of its own: a list page in JSON-LD (a `@graph` with an ItemList,
//! offers as an object, a list and an AggregateOffer by reference, a
//! malformed script beside them), a product page in microdata with
//! OpenGraph, and a page whose JSON-LD a script adds after loading.

use axum::{Router, extract::Query, response::Html, routing::get};
use serde_json::{Value, json};

/// The list page's products as a site reading `name`, `offers.price|offers.lowPrice`,
/// `offers.priceCurrency`, `brand.name|brand` and the `url` link stores them.
pub fn expected_list(base: &str) -> Vec<Value> {
    vec![
        json!({"name": "Desk lamp", "price": 1299000, "currency": "KRW", "brand": "Acme",
               "url": format!("{base}/p/1")}),
        json!({"name": "Floor lamp", "price": "89.50", "currency": "USD", "brand": "Lumo",
               "url": format!("{base}/p/2")}),
        json!({"name": "Lamp set", "price": "10.00", "currency": "USD", "brand": null,
               "url": format!("{base}/p/3")}),
    ]
}

/// The shop; stops when dropped.
pub struct StructuredShop {
    base: String,
    task: tokio::task::JoinHandle<()>,
}

#[derive(serde::Deserialize)]
struct Search {
    #[serde(default)]
    q: String,
}

impl StructuredShop {
    pub async fn start() -> StructuredShop {
        let app = Router::new()
            .route("/list", get(list))
            .route("/product", get(product))
            .route("/rendered", get(rendered));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        StructuredShop { base, task }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }
}

impl Drop for StructuredShop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn script(json: &Value) -> String {
    format!(r#"<script type="application/ld+json">{json}</script>"#)
}

async fn list(Query(search): Query<Search>) -> Html<String> {
    let graph = json!({
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebSite", "@id": "#site", "name": "Lamp shop"},
            {"@type": "ItemList", "name": format!("Results for {}", search.q), "itemListElement": [
                {"@type": "ListItem", "position": 1, "item": {
                    "@type": "Product", "name": "Desk lamp", "url": "/p/1",
                    "brand": {"@type": "Brand", "name": "Acme"},
                    "offers": {"@type": "Offer", "price": 1299000, "priceCurrency": "KRW"}}},
                {"@type": "ListItem", "position": 2, "item": {
                    "@type": ["Product"], "name": "Floor lamp", "url": "/p/2", "brand": "Lumo",
                    "offers": [{"@type": "Offer", "priceCurrency": "USD"},
                               {"@type": "Offer", "price": "89.50", "priceCurrency": "USD"}]}},
                {"@type": "ListItem", "position": 3, "item": {
                    "@type": "http://schema.org/Product", "name": "Lamp set", "url": "/p/3",
                    "offers": {"@id": "#set-offer"}}}
            ]},
            {"@type": "AggregateOffer", "@id": "#set-offer", "lowPrice": "10.00",
             "highPrice": "30.00", "priceCurrency": "USD"}
        ]
    });
    Html(format!(
        r#"<!doctype html><html><head><title>Lamps</title>
        <meta property="og:type" content="website"><meta property="og:title" content="Lamp shop">
        {}
        <script type="application/ld+json">{{"@type": "Organization", "name": "broken</script>
        </head><body><h1>Lamps</h1><p>3 results</p></body></html>"#,
        script(&graph)
    ))
}

async fn product() -> Html<&'static str> {
    Html(
        r#"<!doctype html><html><head><title>Desk lamp</title>
        <meta property="og:type" content="product">
        <meta property="og:image" content="/img/desk-lamp.jpg">
        <meta property="product:price:amount" content="1299000">
        </head><body>
        <main class="product" itemscope itemtype="https://schema.org/Product">
          <h1 itemprop="name">Desk  lamp</h1>
          <a itemprop="url" href="/p/1">permalink</a>
          <div itemprop="brand" itemscope itemtype="https://schema.org/Brand"><span itemprop="name">Acme</span></div>
          <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
            <span itemprop="price" content="1299000">₩1,299,000</span>
            <meta itemprop="priceCurrency" content="KRW">
            <link itemprop="availability" href="https://schema.org/InStock">In stock
          </div>
          <p class="stock">Only 3 left</p>
        </main></body></html>"#,
    )
}

/// Its product is in JSON-LD a script writes: only a browser sees it.
async fn rendered() -> Html<&'static str> {
    Html(
        r#"<!doctype html><html><head><title>Rendered</title></head><body>
        <script>
          const data = document.createElement('script');
          data.type = 'application/ld+json';
          data.textContent = JSON.stringify({"@type": "Product", "name": "Rendered lamp",
            "offers": {"@type": "Offer", "price": 5}});
          document.head.appendChild(data);
        </script></body></html>"#,
    )
}
