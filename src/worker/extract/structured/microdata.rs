//! Microdata (`itemscope`, `itemtype`, `itemprop`) read as the HTML standard
//! and extruct read it, each item in JSON-LD's shape (`{"@type": "Product",
//! "name": ..., "offers": {"@type": "Offer", ...}}`) so that one path reads
//! either. An item's properties are the `itemprop` elements below it that
//! are not inside a nested item; an `itemprop` with `itemscope` is a nested
//! item; a repeated property is a list. Top-level items are those that are
//! not a property of another. `itemref` is not followed.
//!
//! The page is walked with a stack of our own (a page may nest elements
//! thousands deep), each element a step of the budget; items nest at most
//! [`MAX_NESTING`] deep (deeper ones are null).

use scraper::{ElementRef, Html};
use serde_json::{Map, Value};
use url::Url;

use crate::{
    domain::site::short_type_name,
    worker::extract::{absolute, budget::ExtractBudget, collapse_whitespace, html::text, js_trim},
};

/// Deepest nesting of items in items (an offer's seller's address is 3).
pub const MAX_NESTING: usize = 16;

/// Every top-level item of the page, in page order.
pub fn read(document: &Html, base: &Url, budget: &ExtractBudget) -> Vec<Value> {
    let mut items = Vec::new();
    // (element, whether an item encloses it)
    let mut stack = vec![(document.root_element(), false)];
    while let Some((element, enclosed)) = stack.pop() {
        if !budget.step() {
            break;
        }
        let attrs = element.value();
        let scope = attrs.attr("itemscope").is_some();
        if scope && (!enclosed || attrs.attr("itemprop").is_none()) {
            items.push(item(element, base, budget, 0));
        }
        let enclosed = enclosed || scope;
        stack.extend(
            element
                .children()
                .rev()
                .filter_map(ElementRef::wrap)
                .map(|child| (child, enclosed)),
        );
    }
    items
}

/// The item `element` (an `itemscope`) is, `depth` items deep.
fn item(element: ElementRef<'_>, base: &Url, budget: &ExtractBudget, depth: usize) -> Value {
    let mut out = Map::new();
    let types: Vec<Value> = element
        .value()
        .attr("itemtype")
        .unwrap_or_default()
        .split_ascii_whitespace()
        .map(|t| Value::String(short_type_name(t).to_owned()))
        .collect();
    match types.len() {
        0 => {}
        1 => {
            out.insert("@type".into(), types[0].clone());
        }
        _ => {
            out.insert("@type".into(), Value::Array(types));
        }
    }
    if let Some(id) = element.value().attr("itemid") {
        out.insert("@id".into(), Value::String(js_trim(id).to_owned()));
    }
    let mut stack: Vec<ElementRef<'_>> = element
        .children()
        .rev()
        .filter_map(ElementRef::wrap)
        .collect();
    while let Some(child) = stack.pop() {
        if !budget.step() {
            break;
        }
        let attrs = child.value();
        let scope = attrs.attr("itemscope").is_some();
        if let Some(names) = attrs.attr("itemprop") {
            let value = match scope {
                true if depth + 1 < MAX_NESTING => item(child, base, budget, depth + 1),
                true => Value::Null,
                false => property_value(child, base, budget),
            };
            for name in names.split_ascii_whitespace() {
                add(&mut out, name, value.clone());
            }
        }
        // A nested item's properties are its own.
        if !scope {
            stack.extend(child.children().rev().filter_map(ElementRef::wrap));
        }
    }
    Value::Object(out)
}

/// A repeated property becomes a list of its values, in page order.
fn add(item: &mut Map<String, Value>, name: &str, value: Value) {
    match item.get_mut(name) {
        None => {
            item.insert(name.to_owned(), value);
        }
        Some(Value::Array(list)) => list.push(value),
        Some(first) => {
            let first = first.take();
            item.insert(name.to_owned(), Value::Array(vec![first, value]));
        }
    }
}

/// A property's value by its element, as the HTML standard says (and,
/// as schema.org's examples use it, a `content` attribute on any element).
fn property_value(element: ElementRef<'_>, base: &Url, budget: &ExtractBudget) -> Value {
    let attrs = element.value();
    let url = |attr: &str| {
        let value = js_trim(
            attrs
                .attr(attr)
                .or(attrs.attr("content"))
                .unwrap_or_default(),
        );
        budget.charge_bytes(value.len());
        Value::String(if value.is_empty() {
            String::new()
        } else {
            absolute(value, base)
        })
    };
    let attribute = |attr: &str| {
        let value = attrs.attr(attr).unwrap_or_default();
        budget.charge_bytes(value.len());
        Value::String(js_trim(value).to_owned())
    };
    match attrs.name() {
        "meta" => attribute("content"),
        "audio" | "embed" | "iframe" | "img" | "source" | "track" | "video" => url("src"),
        "a" | "area" | "link" => url("href"),
        "object" => url("data"),
        "data" | "meter" => attribute("value"),
        "time" if attrs.attr("datetime").is_some() => attribute("datetime"),
        _ if attrs.attr("content").is_some() => attribute("content"),
        _ => Value::String(collapse_whitespace(&text(element, budget))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(html: &str) -> Vec<Value> {
        let base = Url::parse("http://shop.example/p/").unwrap();
        read(
            &Html::parse_document(html),
            &base,
            &ExtractBudget::unlimited(),
        )
    }

    #[test]
    fn nested_items_are_property_values_in_json_ld_shape() {
        let found = items(
            r#"<div itemscope itemtype="https://schema.org/Product">
              <h1 itemprop="name"> Desk
                lamp </h1>
              <img itemprop="image" src="lamp.jpg">
              <a itemprop="url" href="/p/1">link</a>
              <meta itemprop="sku" content="L-1">
              <div itemprop="brand" itemscope itemtype="http://schema.org/Brand">
                <span itemprop="name">Acme</span>
              </div>
              <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
                <span itemprop="price" content="1299.00">$1,299</span>
                <time itemprop="priceValidUntil" datetime="2030-01-01">soon</time>
                <link itemprop="availability" href="https://schema.org/InStock">
              </div>
              <span itemprop="color">red</span><span itemprop="color">blue</span>
            </div>"#,
        );
        assert_eq!(
            found,
            [json!({
                "@type": "Product",
                "name": "Desk lamp",
                "image": "http://shop.example/p/lamp.jpg",
                "url": "http://shop.example/p/1",
                "sku": "L-1",
                "brand": {"@type": "Brand", "name": "Acme"},
                "offers": {
                    "@type": "Offer",
                    "price": "1299.00",
                    "priceValidUntil": "2030-01-01",
                    "availability": "https://schema.org/InStock"
                },
                "color": ["red", "blue"]
            })]
        );
    }

    #[test]
    fn items_that_are_no_property_are_top_level_each() {
        let found = items(
            r#"<ul itemscope itemtype="https://schema.org/ItemList">
              <li itemscope itemtype="https://schema.org/Product"><span itemprop="name">A</span></li>
              <li itemscope itemtype="https://schema.org/Product"><span itemprop="name">B</span></li>
            </ul>
            <p itemprop="name">an orphan property</p>"#,
        );
        let types: Vec<&Value> = found.iter().map(|i| &i["@type"]).collect();
        assert_eq!(types, ["ItemList", "Product", "Product"]);
        assert_eq!(found[0], json!({"@type": "ItemList"}), "not its properties");
        assert_eq!(found[2]["name"], "B");
    }

    #[test]
    fn items_nested_past_the_bound_are_null_and_deep_pages_do_not_overflow() {
        let nested = format!(
            "{}x{}",
            r#"<div itemprop="p" itemscope itemtype="T">"#.repeat(MAX_NESTING + 4),
            "</div>".repeat(MAX_NESTING + 4)
        );
        let found = items(&nested);
        let mut depth = 0;
        let mut at = &found[0];
        while let Some(next) = at.get("p") {
            depth += 1;
            at = next;
        }
        assert_eq!(depth, MAX_NESTING);
        assert_eq!(*at, Value::Null);

        let deep = format!(
            "{}<span itemscope itemtype=T><b itemprop=n>deep</b></span>{}",
            "<div>".repeat(20_000),
            "</div>".repeat(20_000)
        );
        assert_eq!(items(&deep).len(), 1);
    }
}
