//! OpenGraph: the `<meta property="og:..." content="...">` tags that describe
//! a page as one object (its title, image, and for shops
//! `product:price:amount`). As extruct does, only the prefixes of ogp.me and
//! those sites use beside it are read; the first value of a property wins
//! (a page's main image is its first `og:image`).

use scraper::{Html, Selector};
use serde_json::{Map, Value};

use crate::{domain::site::OPEN_GRAPH_PREFIXES, worker::extract::budget::ExtractBudget};

/// The page's OpenGraph properties by their full names (`og:title`).
pub fn read(document: &Html, budget: &ExtractBudget) -> Map<String, Value> {
    // A fixed selector, one look at each element.
    let metas = Selector::parse("meta[property][content]").expect("a valid selector");
    let mut properties = Map::new();
    for meta in document.select(&metas) {
        let attrs = meta.value();
        let (Some(name), Some(content)) = (attrs.attr("property"), attrs.attr("content")) else {
            continue;
        };
        if !budget.charge_bytes(name.len() + content.len()) {
            break;
        }
        let name = name.trim();
        let known = name.split_once(':').is_some_and(|(prefix, rest)| {
            !rest.is_empty() && OPEN_GRAPH_PREFIXES.contains(&prefix)
        });
        if known && !properties.contains_key(name) {
            properties.insert(name.to_owned(), Value::String(content.trim().to_owned()));
        }
    }
    properties
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_prefixes_are_read_and_the_first_value_wins() {
        let html = r#"<html prefix="og: https://ogp.me/ns#"><head>
            <meta property="og:type" content="product">
            <meta property="og:title" content=" Desk lamp ">
            <meta property="og:image" content="https://shop.example/1.jpg">
            <meta property="og:image" content="https://shop.example/2.jpg">
            <meta property="product:price:amount" content="1299.00">
            <meta property="twitter:card" content="summary">
            <meta name="description" content="not OpenGraph">
            <meta property="og:" content="no name">
            </head></html>"#;
        let read = read(&Html::parse_document(html), &ExtractBudget::unlimited());
        assert_eq!(
            Value::Object(read),
            json!({
                "og:type": "product",
                "og:title": "Desk lamp",
                "og:image": "https://shop.example/1.jpg",
                "product:price:amount": "1299.00"
            })
        );
    }
}
