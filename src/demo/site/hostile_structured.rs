//! Pages that attack a crawler reading structured data (`/hostile/structured`):
//! a product name megabytes long, thousands of products, a page too large,
//! product links that are scripts, JSON-LD nested past any parser's stack
//! beside microdata nested thousands deep, and scripts that are not JSON.
//! Each publishes its products as JSON-LD `Product`s on page 1 and nothing
//! on later pages.

use axum::extract::Query;
use axum::response::Html;
use serde::Deserialize;
use serde_json::{Value, json};

use super::shop::page_html;

/// Sizes the tests ask for, bounded so a typo cannot exhaust the machine.
const MAX_ITEMS: usize = 200_000;
const MAX_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Deserialize)]
pub(super) struct Attack {
    /// `huge-field`, `many-items`, `padded`, `bad-links`, `deep` or `malformed`.
    kind: String,
    page: Option<u32>,
    /// Products on the page.
    n: Option<usize>,
    /// Characters of filler in each product's name.
    chars: Option<usize>,
    /// Bytes the page is padded to (in a JSON-LD string).
    bytes: Option<usize>,
}

fn product(name: &str, url: &str) -> Value {
    json!({"@type": "Product", "name": name, "url": url,
           "offers": {"@type": "Offer", "price": "1.00"}})
}

fn script(json: &str) -> String {
    format!("<script type=\"application/ld+json\">{json}</script>\n")
}

/// The three products every attack but the sized ones hides among its own.
fn true_products() -> String {
    let products: Vec<Value> = (1..=3)
        .map(|i| product(&format!("True item {i}"), &format!("/product/{i}")))
        .collect();
    script(&Value::Array(products).to_string())
}

/// `/hostile/structured?kind=`: the attack `kind` names.
pub(super) async fn structured(Query(a): Query<Attack>) -> Html<String> {
    if a.page.unwrap_or(1) > 1 {
        return page_html("structured", "");
    }
    let n = a.n.unwrap_or(3).min(MAX_ITEMS);
    let body = match a.kind.as_str() {
        "huge-field" => {
            let filler = "x".repeat(a.chars.unwrap_or(0).min(MAX_BYTES));
            let products: Vec<Value> = (1..=n)
                .map(|i| product(&format!("Item {i} {filler}"), &format!("/product/{i}")))
                .collect();
            script(&Value::Array(products).to_string())
        }
        "many-items" => {
            let products: Vec<Value> = (1..=n)
                .map(|i| product(&format!("Item {i}"), &format!("/product/{i}")))
                .collect();
            script(&json!({"@graph": products}).to_string())
        }
        "padded" => {
            let padding = "p".repeat(a.bytes.unwrap_or(0).min(MAX_BYTES));
            format!(
                "{}{}",
                true_products(),
                script(&json!({"@type": "WebPage", "description": padding}).to_string())
            )
        }
        "bad-links" => {
            let products = json!([
                product("Script link", "javascript:alert(document.cookie)"),
                product("Data link", "data:text/html,<b>x</b>"),
                product("File link", "file:///etc/passwd"),
                {"@type": "Product", "name": "Object link", "url": {"@id": "javascript:alert(1)"}},
                product("Good link", "/product/4"),
            ]);
            script(&products.to_string())
        }
        "deep" => {
            let json = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
            let microdata = format!(
                "{}x{}",
                "<div itemprop=\"isRelatedTo\" itemscope itemtype=\"https://schema.org/Product\">"
                    .repeat(2_000),
                "</div>".repeat(2_000)
            );
            format!("{}{}{microdata}", script(&json), true_products())
        }
        "malformed" => [
            script("{\"@type\": \"Product\", \"name\": "),
            script("<p>not JSON</p>"),
            script("{\"@type\": \"Product\", \"offers\": {\"price\": 1e999999}}"),
            script(&"{\"a\":".repeat(50_000)),
            true_products(),
        ]
        .concat(),
        _ => String::new(),
    };
    page_html("structured", &body)
}
