//! Reads a site's items out of raw HTML (http mode) with the same rules as the
//! browser script: `textContent` with whitespace collapsed, attributes trimmed,
//! `href`/`src` resolved against the document's base URL.

use std::collections::BTreeMap;

use scraper::{ElementRef, Html, Selector};
use serde_json::{Map, Value};
use url::Url;

use super::{absolute, collapse_whitespace, js_trim, page_item};
use crate::{
    domain::page::PageItem,
    domain::site::{CssSelector, FieldSpec},
};

/// A parsed HTML page.
pub struct HtmlPage {
    document: Html,
    base: Url,
}

impl HtmlPage {
    /// Parses `html` served at `url`; a `<base href>` moves the base, as in a browser.
    pub fn parse(html: &str, url: &Url) -> Self {
        let document = Html::parse_document(html);
        let base_selector = Selector::parse("base[href]").expect("a valid selector");
        let base = document
            .select(&base_selector)
            .next()
            .and_then(|b| b.value().attr("href"))
            .and_then(|href| url.join(js_trim(href)).ok())
            .unwrap_or_else(|| url.clone());
        Self { document, base }
    }

    /// Whether an element matching `selector` is on the page.
    pub fn contains(&self, selector: &CssSelector) -> bool {
        self.document.select(&selector.compile()).next().is_some()
    }
}

/// One item per element matching `item_selector`, each field read as the
/// browser script reads it.
pub fn extract_html(
    page: &HtmlPage,
    item_selector: &CssSelector,
    fields: &BTreeMap<String, FieldSpec>,
) -> Vec<PageItem> {
    let compiled: Vec<(&String, Option<Selector>, &FieldSpec)> = fields
        .iter()
        .map(|(name, spec)| (name, spec.selector.as_ref().map(CssSelector::compile), spec))
        .collect();
    page.document
        .select(&item_selector.compile())
        .map(|item| {
            let values: Map<String, Value> = compiled
                .iter()
                .map(|(name, selector, spec)| {
                    let element = match selector {
                        Some(selector) => item.select(selector).next(),
                        None => Some(item),
                    };
                    let value = element
                        .and_then(|el| read(el, spec, &page.base))
                        .map_or(Value::Null, Value::String);
                    ((*name).clone(), value)
                })
                .collect();
            page_item(values, fields)
        })
        .collect()
}

fn read(element: ElementRef<'_>, spec: &FieldSpec, base: &Url) -> Option<String> {
    match &spec.attr {
        // HTML attribute names are case-insensitive (the parser lowercases them).
        Some(attr) => {
            let value = js_trim(element.value().attr(&attr.to_ascii_lowercase())?);
            Some(if spec.is_link() {
                absolute(value, base)
            } else {
                value.to_owned()
            })
        }
        None => Some(collapse_whitespace(&element.text().collect::<String>())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(selector: Option<&str>, attr: Option<&str>) -> FieldSpec {
        FieldSpec {
            selector: selector.map(|s| CssSelector::parse(s, "x").unwrap()),
            attr: attr.map(str::to_owned),
            pointer: None,
            link: false,
        }
    }

    #[test]
    fn fields_are_text_or_attributes_and_links_are_absolute() {
        let html = r#"<html><head><base href="/shop/"></head><body><ul>
            <li class="p"><a class="t" HREF=" item/1 ">  Red
              shoes&nbsp;&amp; co </a><span>$1</span></li>
            <li class="p"><a class="t" href="https://x.example/2">Blue</a></li>
            </ul></body></html>"#;
        let page = HtmlPage::parse(html, &Url::parse("http://s.example/search?q=a").unwrap());
        let fields = BTreeMap::from([
            ("title".to_owned(), field(Some("a.t"), None)),
            ("link".to_owned(), field(Some("a.t"), Some("HREF"))),
            ("price".to_owned(), field(Some("span"), None)),
        ]);
        let items = extract_html(&page, &CssSelector::parse("li.p", "x").unwrap(), &fields);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].fields["title"], "Red shoes & co");
        assert_eq!(items[0].fields["link"], "http://s.example/shop/item/1");
        assert_eq!(
            items[0].item_url.as_deref(),
            Some("http://s.example/shop/item/1")
        );
        assert_eq!(items[1].fields["price"], Value::Null);
        assert!(page.contains(&CssSelector::parse("ul li", "x").unwrap()));
        assert!(!page.contains(&CssSelector::parse("#captcha", "x").unwrap()));
    }
}
