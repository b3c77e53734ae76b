//! Reads a site's items out of raw HTML (http mode) with the same rules as the
//! browser script: `textContent` with whitespace collapsed, attributes trimmed,
//! `href`/`src` resolved against the document's base URL. Every selector is
//! matched, and every value read, within the page's [`ExtractBudget`].

use std::collections::BTreeMap;

use scraper::{ElementRef, Html, Node, Selector};
use serde_json::{Map, Value};
use url::Url;

use super::{
    ReadError, absolute,
    budget::ExtractBudget,
    collapse_whitespace, js_trim,
    select::{select_in_document, select_within},
};
use crate::domain::{
    site::{CssSelector, FieldSpec},
    value::{MAX_LIST_VALUES, Whitespace},
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
        // A fixed selector, one look at each element: no budget needed.
        let base_selector = Selector::parse("base[href]").expect("a valid selector");
        let base = document
            .select(&base_selector)
            .next()
            .and_then(|b| b.value().attr("href"))
            .and_then(|href| url.join(js_trim(href)).ok())
            // HTML's "frozen base URL": a data: or javascript: base is ignored.
            .filter(|base| !matches!(base.scheme(), "data" | "javascript"))
            .unwrap_or_else(|| url.clone());
        Self { document, base }
    }

    pub(super) fn document(&self) -> &Html {
        &self.document
    }

    /// What the page's relative URLs resolve against.
    pub(super) fn base(&self) -> &Url {
        &self.base
    }

    /// Whether an element matching `selector` (the site's `field`) is on the page.
    pub fn contains(
        &self,
        selector: &CssSelector,
        field: &str,
        budget: &ExtractBudget,
    ) -> Result<bool, ReadError> {
        let compiled = compiled(selector, field)?;
        let found = select_in_document(&self.document, &compiled, budget)
            .next()
            .is_some();
        budget.check()?;
        Ok(found)
    }

    /// The href of the first element `selector` (the site's `field`) finds,
    /// made absolute against the page: where its "next" link goes. Only an
    /// http(s) link counts.
    pub fn first_link(
        &self,
        selector: &CssSelector,
        field: &str,
        budget: &ExtractBudget,
    ) -> Result<Option<Url>, ReadError> {
        let compiled = compiled(selector, field)?;
        let href = select_in_document(&self.document, &compiled, budget)
            .next()
            .and_then(|element| element.value().attr("href").map(str::to_owned));
        budget.check()?;
        Ok(href
            .and_then(|href| self.base.join(js_trim(&href)).ok())
            .filter(|link| matches!(link.scheme(), "http" | "https")))
    }
}

fn compiled(selector: &CssSelector, field: &str) -> Result<super::select::Selectors, ReadError> {
    selector
        .compile(field)
        .map_err(|e| ReadError::Misconfigured(format!("the site's {} {}", e.field, e.message)))
}

/// One item per element matching `item_selector` (the first `max_items`),
/// each field read as the browser script reads it: the first element its
/// selector finds, or (`all`) a list of the first [`MAX_LIST_VALUES`] and
/// one more, so the bounds see there were more; a structured field's value
/// is the page's, in `structured` (read once for the page).
pub fn extract_html(
    page: &HtmlPage,
    item_selector: &CssSelector,
    fields: &BTreeMap<String, FieldSpec>,
    structured: &Map<String, Value>,
    max_items: usize,
    budget: &ExtractBudget,
) -> Result<Vec<Map<String, Value>>, ReadError> {
    let field_selectors = fields
        .iter()
        .filter(|(_, spec)| spec.structured.is_none())
        .map(|(name, spec)| {
            let selector = spec
                .selector
                .as_ref()
                .map(|s| compiled(s, &format!("fields.{name}.selector")))
                .transpose()?;
            Ok((name, selector, spec))
        })
        .collect::<Result<Vec<_>, ReadError>>()?;
    let items_at = compiled(item_selector, "item_selector")?;
    let mut items = Vec::new();
    for item in select_in_document(&page.document, &items_at, budget).take(max_items) {
        let mut values = Map::new();
        for (name, selector, spec) in &field_selectors {
            let value = match (selector, spec.rules.all) {
                (Some(selector), true) => Value::Array(
                    select_within(item, selector, budget)
                        .take(MAX_LIST_VALUES + 1)
                        .filter_map(|el| read(el, spec, &page.base, budget))
                        .map(Value::String)
                        .collect(),
                ),
                (None, true) => Value::Array(
                    read(item, spec, &page.base, budget)
                        .map(Value::String)
                        .into_iter()
                        .collect(),
                ),
                (selector, false) => {
                    let element = match selector {
                        Some(selector) => select_within(item, selector, budget).next(),
                        None => Some(item),
                    };
                    element
                        .and_then(|el| read(el, spec, &page.base, budget))
                        .map_or(Value::Null, Value::String)
                }
            };
            values.insert((*name).clone(), value);
        }
        values.extend(
            structured
                .iter()
                .map(|(name, value)| (name.clone(), value.clone())),
        );
        budget.check()?;
        items.push(values);
    }
    budget.check()?;
    Ok(items)
}

/// One element's value: its attribute (trimmed) or its text (whitespace
/// collapsed unless the field keeps it), a link made absolute unless a
/// pattern is to pick it out of the text first.
fn read(
    element: ElementRef<'_>,
    spec: &FieldSpec,
    base: &Url,
    budget: &ExtractBudget,
) -> Option<String> {
    let value = match &spec.attr {
        // HTML attribute names are case-insensitive (the parser lowercases them).
        Some(attr) => {
            let value = js_trim(element.value().attr(&attr.to_ascii_lowercase())?);
            budget.charge_bytes(value.len());
            value.to_owned()
        }
        None => match spec.rules.whitespace {
            Some(Whitespace::Keep) => js_trim(&text(element, budget)).to_owned(),
            _ => collapse_whitespace(&text(element, budget)),
        },
    };
    Some(match spec.is_link() && spec.rules.regex.is_none() {
        true => absolute(&value, base),
        false => value,
    })
}

/// The element's `textContent`: every node below it is a step, every byte
/// of text a value read.
pub(super) fn text(element: ElementRef<'_>, budget: &ExtractBudget) -> String {
    let mut text = String::new();
    for node in element.descendants() {
        if let Node::Text(piece) = node.value() {
            if !budget.charge_bytes(piece.len()) {
                break;
            }
            text.push_str(piece);
        } else if !budget.step() {
            break;
        }
    }
    text
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
            structured: None,
            rules: Default::default(),
        }
    }

    /// Every item `item_selector` finds on `page`, with no bound and no budget.
    fn read_all(
        page: &HtmlPage,
        item_selector: &str,
        fields: &BTreeMap<String, FieldSpec>,
    ) -> Vec<Map<String, Value>> {
        let item = CssSelector::parse(item_selector, "x").unwrap();
        extract_html(
            page,
            &item,
            fields,
            &Map::new(),
            usize::MAX,
            &ExtractBudget::unlimited(),
        )
        .unwrap()
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
        let items = read_all(&page, "li.p", &fields);
        assert_eq!(page.base().as_str(), "http://s.example/shop/");
        let items: Vec<_> = items
            .into_iter()
            .map(|item| super::super::page_item(item, &fields))
            .collect();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].fields["title"], "Red shoes & co");
        assert_eq!(items[0].fields["link"], "http://s.example/shop/item/1");
        assert_eq!(
            items[0].item_url.as_deref(),
            Some("http://s.example/shop/item/1")
        );
        assert_eq!(items[1].fields["price"], Value::Null);
        let contains = |s| {
            page.contains(
                &CssSelector::parse(s, "x").unwrap(),
                "x",
                &ExtractBudget::unlimited(),
            )
        };
        assert!(contains("ul li").unwrap());
        assert!(!contains("#captcha").unwrap());
    }

    /// As in Chrome: a data: or javascript: `<base>` moves nothing, so
    /// relative links resolve against the page's own URL.
    #[test]
    fn a_base_of_data_or_javascript_is_ignored_as_browsers_do() {
        let url = Url::parse("http://s.example/search?q=a").unwrap();
        for base in ["data:,x", "javascript:void(0)"] {
            let html = format!(r#"<base href="{base}"><li><a href="/p/1">t</a></li>"#);
            let page = HtmlPage::parse(&html, &url);
            let fields = BTreeMap::from([("link".to_owned(), field(Some("a"), Some("href")))]);
            let items = read_all(&page, "li", &fields);
            assert_eq!(items[0]["link"], "http://s.example/p/1", "{base}");
        }
    }

    #[test]
    fn list_fields_read_every_element_and_kept_whitespace_is_only_trimmed() {
        use crate::domain::value::ValueInput;

        let html = r#"<li><b class="tag">red</b><b class="tag"> big
            lamp </b><p class="d"> one
            two </p><span data-go="go('../p/7')">x</span></li>"#;
        let page = HtmlPage::parse(html, &Url::parse("http://s.example/a/list").unwrap());
        let with = |selector, attr: Option<&str>, rules: ValueInput| FieldSpec {
            selector: Some(CssSelector::parse(selector, "x").unwrap()),
            attr: attr.map(str::to_owned),
            link: attr.is_some(),
            rules: rules.parse("fields.x", attr.is_some()).unwrap(),
            ..FieldSpec::default()
        };
        let fields = BTreeMap::from([
            (
                "tags".to_owned(),
                with(
                    ".tag",
                    None,
                    ValueInput {
                        all: Some(true),
                        ..ValueInput::default()
                    },
                ),
            ),
            (
                "text".to_owned(),
                with(
                    ".d",
                    None,
                    ValueInput {
                        whitespace: Some("keep".into()),
                        ..ValueInput::default()
                    },
                ),
            ),
            (
                "go".to_owned(),
                with(
                    "span",
                    Some("data-go"),
                    ValueInput {
                        regex: Some(r"'(.+)'".into()),
                        ..ValueInput::default()
                    },
                ),
            ),
            (
                "none".to_owned(),
                with(
                    "i",
                    None,
                    ValueInput {
                        all: Some(true),
                        ..ValueInput::default()
                    },
                ),
            ),
        ]);
        let read = read_all(&page, "li", &fields);
        let item = &read[0];
        assert_eq!(item["tags"], serde_json::json!(["red", "big lamp"]));
        assert_eq!(item["text"], "one\n            two");
        assert_eq!(
            item["go"], "go('../p/7')",
            "a pattern's link is made absolute after it"
        );
        assert_eq!(item["none"], serde_json::json!([]));
    }

    #[test]
    fn a_worst_case_item_selector_over_a_deep_page_is_over_budget_within_it() {
        use std::time::{Duration, Instant};

        use crate::worker::extract::budget::{CancelFlag, Spent};
        use crate::worker::extract::select::tests::{nested_page, worst_case};

        let url = Url::parse("http://s.example/").unwrap();
        let page = HtmlPage::parse(&nested_page(200), &url);
        // The deepest the api accepts: minutes over this page, unbounded.
        let item = CssSelector::parse(&worst_case(4), "item_selector").unwrap();
        let fields = BTreeMap::from([("title".to_owned(), field(None, None))]);
        let limit = Duration::from_millis(300);
        let budget = ExtractBudget::new(limit, CancelFlag::default());
        let started = Instant::now();
        let read = extract_html(&page, &item, &fields, &Map::new(), usize::MAX, &budget);
        let took = started.elapsed();
        match read {
            Err(ReadError::OverBudget(over)) => {
                assert_eq!(over.spent, Spent::Time);
                assert!(
                    over.to_string().contains("over its budget of 300 ms"),
                    "{over}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Unbounded it runs for minutes; the margin is for a loaded machine.
        assert!(took < Duration::from_millis(1500), "took {took:?}");
    }
}
