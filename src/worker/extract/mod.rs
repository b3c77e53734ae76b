//! Reading items out of a page: in Chrome (one script call), from raw HTML
//! (scraper) or from a JSON API's answer. The first two follow the same rules,
//! so a site crawled in browser or http mode yields the same items. Raw HTML
//! and JSON are read off the async runtime, within a budget per page
//! (`reading`, `budget`, `select`); the fields' value rules are applied to
//! what every mode read the same way (`typing`).

mod browser;
mod budget;
mod html;
mod json;
pub mod learn;
mod reading;
mod select;
mod structured;
mod typing;

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use url::Url;

pub use browser::PageReader;
pub use html::{HtmlPage, extract_html};
pub use json::extract_json;
pub use reading::{
    HtmlRead, HtmlReading, ReadError, off_runtime, read_html, read_json, read_rendered,
};
pub use structured::StructuredListing;
pub use typing::{RawItems, TypedItem, typed_for_preview, typed_page};

use crate::domain::{
    item::PageItem,
    site::FieldSpec,
    value::{collapse_whitespace, js_trim},
};

/// Builds a stored item from its fields; the item's URL is its first `href`
/// (json: `link`) field, fields in name order.
pub(crate) fn page_item(
    fields: Map<String, Value>,
    specs: &BTreeMap<String, FieldSpec>,
) -> PageItem {
    let item_url = specs
        .iter()
        .filter(|(_, spec)| spec.is_item_url())
        .find_map(|(name, _)| fields.get(name).and_then(Value::as_str).map(str::to_owned));
    let fields = Value::Object(fields);
    PageItem {
        content_hash: content_hash(&fields),
        item_url,
        fields,
    }
}

/// SHA-256 of the fields' canonical JSON (keys sorted by serde_json's map).
pub fn content_hash(fields: &Value) -> String {
    hex::encode(Sha256::digest(fields.to_string().as_bytes()))
}

/// `value` resolved against `base` the way `new URL(value, base).href` does;
/// unchanged when it does not parse.
pub(crate) fn absolute(value: &str, base: &Url) -> String {
    base.join(value)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::site::CssSelector;
    use serde_json::json;

    #[test]
    fn the_item_url_is_the_first_href_field() {
        let mut specs = BTreeMap::new();
        specs.insert(
            "title".into(),
            FieldSpec {
                selector: None,
                attr: None,
                pointer: None,
                link: false,
                structured: None,
                rules: Default::default(),
            },
        );
        specs.insert(
            "link".into(),
            FieldSpec {
                selector: Some(CssSelector::parse("a", "x").unwrap()),
                attr: Some("href".into()),
                pointer: None,
                link: false,
                structured: None,
                rules: Default::default(),
            },
        );
        let Value::Object(map) = json!({"title": "A", "link": "http://s/p/1"}) else {
            unreachable!()
        };
        let item = page_item(map, &specs);
        assert_eq!(item.item_url.as_deref(), Some("http://s/p/1"));
        assert_eq!(item.content_hash.len(), 64);
    }

    #[test]
    fn equal_fields_hash_equal_whatever_the_key_order() {
        let a: Value = serde_json::from_str(r#"{"a":"1","b":"2"}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":"2","a":"1"}"#).unwrap();
        assert_eq!(content_hash(&a), content_hash(&b));
    }

    #[test]
    fn links_resolve_like_the_url_constructor() {
        let base = Url::parse("http://shop.example/search?q=a").unwrap();
        assert_eq!(absolute("/p/1", &base), "http://shop.example/p/1");
        assert_eq!(absolute("p/2", &base), "http://shop.example/p/2");
        assert_eq!(absolute("https://x.example/", &base), "https://x.example/");
        assert_eq!(absolute("http://[bad", &base), "http://[bad");
    }
}

/// Hostile pages met with the selectors and pointers a site may be given:
/// extraction yields items or none, never a panic (see tests/fuzz.rs for the
/// parsing side; `FUZZ_CASES` bounds both).
#[cfg(test)]
mod fuzz {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde_json::{Value, json};
    use url::Url;

    use super::{
        HtmlPage,
        budget::ExtractBudget,
        extract_html, extract_json,
        structured::{Lookup, StructuredData},
    };
    use crate::domain::site::{
        CssSelector, FieldSpec, JsonPointer, SchemaType, StructuredPath, TokenPaging,
    };

    fn cases() -> u32 {
        std::env::var("FUZZ_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(256)
    }

    /// Markup: tags nested deep, attributes, entities, broken syntax.
    fn html() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("<li class=\"product\">".to_owned()),
            Just("</li>".to_owned()),
            Just("<a class=title href=\"/p?x=1&amp;y\">".to_owned()),
            Just("<a href=\"javascript:alert(1)\">".to_owned()),
            Just("<base href=\"http://other.example/\">".to_owned()),
            Just("<div>".to_owned()),
            Just("</div>".to_owned()),
            Just("<![CDATA[".to_owned()),
            Just("<!--".to_owned()),
            Just("&#x0;&#xFFFF;&lt;".to_owned()),
            proptest::string::string_regex(".{0,20}").unwrap(),
        ];
        prop_oneof![
            proptest::collection::vec(piece, 0..60).prop_map(|p| p.concat()),
            // Deep enough to find a recursion. Not deeper: parsing and
            // matching cost time quadratic in depth (3000 levels: ~30 ms
            // parsing and ~50 ms for `:root *`, in release).
            (0usize..300).prop_map(|depth| format!(
                "{}<li class=product><a class=title href=x>t</a></li>{}",
                "<div>".repeat(depth),
                "</div>".repeat(depth)
            )),
        ]
    }

    fn selector() -> impl Strategy<Value = Option<CssSelector>> {
        prop_oneof![
            Just("li.product"),
            Just("a.title"),
            Just("li:is(.product, :not(.ad)) > a[href]"),
            Just(":root *"),
            Just("div div div div div div div div li"),
            Just("a[href^='/'], a[href$='1'], a[href*=x]"),
            Just("li:nth-child(2n+1)"),
            Just("*"),
        ]
        .prop_map(|s| CssSelector::parse(s, "f").ok())
    }

    fn spec(selector: Option<CssSelector>, attr: Option<&str>) -> FieldSpec {
        FieldSpec {
            selector,
            attr: attr.map(str::to_owned),
            pointer: None,
            link: false,
            structured: None,
            rules: Default::default(),
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::btree_map("[a-z~/0-9]{0,4}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A page of structured data: JSON-LD scripts of any JSON (or broken
    /// text), microdata scopes and properties in any nesting, OpenGraph tags.
    fn structured_page() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            json_value().prop_map(|v| format!(
                r#"<script type="application/ld+json">{v}</script>"#
            )),
            json_value().prop_map(|v| format!(
                r##"<script type="application/ld+json">{{"@type": "Product", "@id": "#p", "offers": {v}, "x": {{"@id": "#p"}}}}</script>"##
            )),
            proptest::string::string_regex(".{0,30}")
                .unwrap()
                .prop_map(|t| format!(r#"<script type="application/ld+json">{t}</script>"#)),
            Just(r#"<div itemscope itemtype="https://schema.org/Product">"#.to_owned()),
            Just(r#"<div itemprop="offers" itemscope itemtype="Offer">"#.to_owned()),
            Just(r#"<span itemprop="price name" content="1">"#.to_owned()),
            Just(r#"<a itemprop="url" href="javascript:x">"#.to_owned()),
            Just(r#"<meta property="og:title" content="t">"#.to_owned()),
            Just("</div>".to_owned()),
            Just("</span>".to_owned()),
            proptest::string::string_regex(".{0,20}").unwrap(),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|p| p.concat())
    }

    fn structured_path() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("name"),
            Just("offers.price|offers.lowPrice"),
            Just("offers.0.price"),
            Just("x.x.x.x.offers.@id"),
            Just("image.3"),
            Just("og:title"),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        #[test]
        fn any_page_reads_its_structured_data_without_panicking(
            page in structured_page(),
            path in structured_path(),
            link in any::<bool>(),
        ) {
            let url = Url::parse("http://shop.example/p?q=a").unwrap();
            let page = HtmlPage::parse(&page, &url);
            let budget = ExtractBudget::unlimited();
            let data = StructuredData::read(&page, &budget);
            let lookup = Lookup::new(&data, &budget);
            let item_type = SchemaType::parse("Product", "t").unwrap();
            let fields = BTreeMap::from([(
                "f".to_owned(),
                FieldSpec {
                    selector: None,
                    attr: None,
                    pointer: None,
                    link,
                    structured: StructuredPath::parse(path, "f", Some(&item_type)).ok(),
                    rules: Default::default(),
                },
            )]);
            let items = lookup.items(&item_type, &fields, usize::MAX, &budget);
            prop_assert!(items.iter().all(|i| i.contains_key("f")));
            let _ = data.listing(&budget);
            prop_assert_eq!(budget.spent(), None, "a small page");
        }

        #[test]
        fn any_page_and_any_accepted_selector_extract_without_panicking(
            page in html(),
            item in selector(),
            field in selector(),
            attr in prop_oneof![Just(None), Just(Some("href")), Just(Some("src")), Just(Some("data-x"))],
        ) {
            let url = Url::parse("http://shop.example/search?q=a").unwrap();
            let page = HtmlPage::parse(&page, &url);
            let item = item.unwrap_or_else(|| CssSelector::parse("li", "f").unwrap());
            let fields = BTreeMap::from([("title".to_owned(), spec(field, attr))]);
            let budget = ExtractBudget::unlimited();
            let _ = extract_html(&page, &item, &fields, &serde_json::Map::new(), usize::MAX, &budget);
            let _ = page.contains(&item, "f", &budget);
            prop_assert_eq!(budget.spent(), None, "an accepted selector over a small page");
        }

        #[test]
        fn any_answer_and_any_accepted_pointer_extract_without_panicking(
            answer in json_value(),
            items in "(/[a-z~0-9]{0,3}){0,4}",
            field in "(/[a-z~0-9]{0,3}){0,3}",
            link in any::<bool>(),
        ) {
            let (Ok(items), Ok(pointer)) = (JsonPointer::parse(&items, "i"), JsonPointer::parse(&field, "f")) else {
                return Ok(());
            };
            let url = Url::parse("http://api.example/s?q=a").unwrap();
            let fields = BTreeMap::from([(
                "title".to_owned(),
                FieldSpec { selector: None, attr: None, pointer: Some(pointer.clone()), link, structured: None, rules: Default::default() },
            )]);
            let paging = TokenPaging { next_token: pointer, token_param: "token".into() };
            let wrapped = json!({"items": [answer.clone()], "next": answer});
            let budget = ExtractBudget::unlimited();
            let _ = extract_json(&answer, &url, &items, &fields, Some(&paging), usize::MAX, &budget);
            let _ = extract_json(&wrapped, &url, &items, &fields, None, usize::MAX, &budget);
        }
    }
}
