//! How items are read from a results page: CSS selectors over HTML, or the
//! page's structured data (browser and http modes), or JSON pointers into an
//! API's answer (json mode).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::locator::{CssSelector, JsonPointer};
use super::structured::{SchemaType, StructuredPath};
use crate::domain::{
    FieldError, text,
    value::{DateInput, NumberInput, ValueInput, ValueKind, ValueRules},
};

/// Most fields an item may have.
pub const MAX_FIELDS: usize = 100;
/// Longest field name, attribute name or query parameter name.
pub(super) const MAX_NAME_CHARS: usize = 100;

/// How to read one field of an item. In HTML modes: the text, or the
/// attribute `attr`, of the element `selector` finds inside the item (the item
/// itself without a selector); `href`/`src` are made absolute; or the value
/// at `structured` in the page's structured data. In json mode: the value at
/// `pointer` inside the item. In any mode `link` makes the value an absolute
/// URL; then `rules` make it typed and clean.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<CssSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<JsonPointer>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub link: bool,
    /// Where the value is in the page's structured data (stored sites from
    /// before structured data have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<StructuredPath>,
    /// The value rules, stored beside the other keys as a client sends them.
    #[serde(flatten)]
    pub rules: ValueRules,
}

impl FieldSpec {
    /// Whether the field is a URL (made absolute; the first `href` or `link` is the item's URL).
    pub fn is_link(&self) -> bool {
        self.link
            || self
                .attr
                .as_deref()
                .is_some_and(|a| a.eq_ignore_ascii_case("href") || a.eq_ignore_ascii_case("src"))
    }

    /// Whether the field is the kind the item URL comes from: `href`, or `link`.
    pub fn is_item_url(&self) -> bool {
        self.link
            || self
                .attr
                .as_deref()
                .is_some_and(|a| a.eq_ignore_ascii_case("href"))
    }

    /// The item field a number rule puts the currency in, if any.
    pub fn currency_field(&self) -> Option<&str> {
        match &self.rules.kind {
            ValueKind::Number(number) => number.currency_field.as_deref(),
            ValueKind::Text | ValueKind::Date(_) => None,
        }
    }
}

/// A field as a client sends it (see [`FieldSpec`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldInput {
    /// CSS selector inside the item (browser, http).
    pub selector: Option<String>,
    /// Attribute to read instead of the text (browser, http).
    pub attr: Option<String>,
    /// JSON pointer inside the item (json).
    pub pointer: Option<String>,
    /// The value is a URL: made absolute against the page (after `regex`),
    /// and the first such field (or `href`) is the item's URL (structured
    /// fields: a list's first URL, an object's `url`).
    pub link: Option<bool>,
    /// Where the value is in the page's structured data (browser, http),
    /// instead of `selector`/`attr`: a dotted path of properties and list
    /// indexes, inside the item when the site has `structured_items`
    /// (`offers.price`, `brand.name`, `image.0`), else starting with the type
    /// whose first item on the page it reads (`Product.offers.price`). A list
    /// on the way is looked through (the first offer that has a price), and
    /// `a|b` tries `b` when `a` finds nothing (`offers.price|offers.lowPrice`).
    /// `og:title`, `product:price:amount` read the page's OpenGraph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<String>,
    /// `collapse` (every run of whitespace one space, the ends trimmed: an
    /// element's text always is) or `keep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whitespace: Option<String>,
    /// A regular expression (at most 500 characters, linear-time matching,
    /// bounded in what it compiles to); the value is its first capture
    /// group, else the whole match. No match: no value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Every value as a list (at most 100): each element `selector` finds,
    /// each match of `regex`. In a JSON API, a list's elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
    /// The value is a number, read as `locale` writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<NumberInput>,
    /// The value is a date (`2026-03-29`) or a time (RFC 3339 with the
    /// zone's offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<DateInput>,
    /// The value when the page has none (of the field's type; a list with
    /// `all`). A value that does not parse is null, not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub default: Option<serde_json::Value>,
    /// An item without a value here is left out (counted in the run's data health).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

impl FieldInput {
    /// The field's value rules (`name` is the field's), checked.
    fn rules(&mut self, name: &str, link: bool) -> Result<ValueRules, FieldError> {
        ValueInput {
            whitespace: self.whitespace.take(),
            regex: self.regex.take(),
            all: self.all.take(),
            number: self.number.take(),
            date: self.date.take(),
            default: self.default.take(),
            required: self.required.take(),
        }
        .parse(&format!("fields.{name}"), link)
    }
}

/// Where a JSON API keeps its items and its next-page token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonInput {
    /// JSON pointer to the array of items, e.g. `/data/items`.
    pub items: String,
    /// JSON pointer to the next page's token; none or null: the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
    /// Query parameter the token is sent back in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_param: Option<String>,
}

/// Paging of a JSON API by token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenPaging {
    pub next_token: JsonPointer,
    pub token_param: String,
}

/// Where a page's items are, in browser and http modes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HtmlItems {
    /// Each element the selector finds is an item.
    Selector(CssSelector),
    /// Each item of this type in the page's structured data is an item.
    Structured(SchemaType),
}

/// How items are read, by render mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extraction {
    /// Browser and http modes.
    Html {
        items: HtmlItems,
        fields: BTreeMap<String, FieldSpec>,
        /// Element to wait for before reading a page (browser).
        wait_for: Option<CssSelector>,
        /// Its presence means the site refused us (a captcha, a block page).
        blocked_selector: Option<CssSelector>,
    },
    Json {
        items: JsonPointer,
        fields: BTreeMap<String, FieldSpec>,
        paging: Option<TokenPaging>,
    },
}

impl Extraction {
    pub fn fields(&self) -> &BTreeMap<String, FieldSpec> {
        match self {
            Extraction::Html { fields, .. } | Extraction::Json { fields, .. } => fields,
        }
    }

    pub fn token_paging(&self) -> Option<&TokenPaging> {
        match self {
            Extraction::Json { paging, .. } => paging.as_ref(),
            Extraction::Html { .. } => None,
        }
    }

    /// The type of structured item a site's items are, if they are.
    pub fn structured_items(&self) -> Option<&SchemaType> {
        match self {
            Extraction::Html {
                items: HtmlItems::Structured(item_type),
                ..
            } => Some(item_type),
            _ => None,
        }
    }

    /// Whether reading a page needs its structured data: its items are
    /// structured items, or a field reads structured data.
    pub fn reads_structured_data(&self) -> bool {
        self.structured_items().is_some() || self.fields().values().any(|f| f.structured.is_some())
    }

    /// The fields an item has: the site's, and the currency fields their
    /// number rules fill, in name order.
    pub fn item_field_names(&self) -> Vec<String> {
        item_field_names(self.fields())
    }

    /// The selectors of HTML extraction, as a client writes them: item
    /// (none when items are structured data), wait_for, blocked_selector
    /// (none for JSON).
    pub fn selectors(&self) -> [Option<&str>; 3] {
        match self {
            Extraction::Html {
                items,
                wait_for,
                blocked_selector,
                ..
            } => [
                match items {
                    HtmlItems::Selector(selector) => Some(selector.as_str()),
                    HtmlItems::Structured(_) => None,
                },
                wait_for.as_ref().map(CssSelector::as_str),
                blocked_selector.as_ref().map(CssSelector::as_str),
            ],
            Extraction::Json { .. } => [None; 3],
        }
    }

    /// JSON extraction as a client writes it (none for HTML).
    pub fn json_input(&self) -> Option<JsonInput> {
        let Extraction::Json { items, paging, .. } = self else {
            return None;
        };
        Some(JsonInput {
            items: items.as_str().to_owned(),
            next_token: paging.as_ref().map(|p| p.next_token.as_str().to_owned()),
            token_param: paging.as_ref().map(|p| p.token_param.clone()),
        })
    }
}

/// The fields an item read by `fields` has, in name order.
pub fn item_field_names(fields: &BTreeMap<String, FieldSpec>) -> Vec<String> {
    let mut names: Vec<String> = fields.keys().cloned().collect();
    names.extend(
        fields
            .values()
            .filter_map(FieldSpec::currency_field)
            .map(str::to_owned),
    );
    names.sort();
    names
}

/// The parts of a site input that describe extraction.
pub struct ExtractionInput {
    pub item_selector: Option<String>,
    pub structured_items: Option<String>,
    pub fields: BTreeMap<String, FieldInput>,
    pub wait_for: Option<String>,
    pub blocked_selector: Option<String>,
    pub json: Option<JsonInput>,
}

fn only_for_json(field: &str) -> FieldError {
    FieldError::new(field, "is only for render \"json\"")
}

fn not_for_json(field: &str) -> FieldError {
    FieldError::new(field, "is not used with render \"json\"")
}

impl ExtractionInput {
    /// HTML extraction (browser and http modes).
    pub fn parse_html(self) -> Result<Extraction, FieldError> {
        if self.json.is_some() {
            return Err(only_for_json("json"));
        }
        let items = match (self.item_selector, self.structured_items) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "structured_items",
                    "is instead of item_selector: items are elements the selector finds, \
                     or the page's structured items of a type, not both",
                ));
            }
            (Some(selector), None) => {
                HtmlItems::Selector(CssSelector::parse(&selector, "item_selector")?)
            }
            (None, Some(item_type)) => {
                HtmlItems::Structured(SchemaType::parse(&item_type, "structured_items")?)
            }
            (None, None) => {
                return Err(FieldError::new(
                    "item_selector",
                    "is required, unless structured_items names the schema.org type the \
                     site's items are (e.g. \"Product\")",
                ));
            }
        };
        let item_type = match &items {
            HtmlItems::Structured(item_type) => Some(item_type),
            HtmlItems::Selector(_) => None,
        };
        let fields = parse_fields(self.fields, |name, input| {
            parse_html_field(name, input, item_type)
        })?;
        let css = |value: Option<String>, field: &str| {
            value.map(|s| CssSelector::parse(&s, field)).transpose()
        };
        Ok(Extraction::Html {
            items,
            fields,
            wait_for: css(self.wait_for, "wait_for")?,
            blocked_selector: css(self.blocked_selector, "blocked_selector")?,
        })
    }

    /// JSON extraction (json mode).
    pub fn parse_json(self) -> Result<Extraction, FieldError> {
        for (value, field) in [
            (&self.item_selector, "item_selector"),
            (&self.structured_items, "structured_items"),
            (&self.wait_for, "wait_for"),
            (&self.blocked_selector, "blocked_selector"),
        ] {
            if value.is_some() {
                return Err(not_for_json(field));
            }
        }
        let json = self
            .json
            .ok_or_else(|| FieldError::new("json", "is required with render \"json\""))?;
        let fields = parse_fields(self.fields, |name, mut input| {
            if input.structured.is_some() {
                return Err(not_for_json(&format!("fields.{name}.structured")));
            }
            if input.selector.is_some() || input.attr.is_some() {
                return Err(not_for_json(&format!(
                    "fields.{name}.{}",
                    if input.selector.is_some() {
                        "selector"
                    } else {
                        "attr"
                    }
                )));
            }
            let field = format!("fields.{name}.pointer");
            let pointer = input
                .pointer
                .take()
                .ok_or_else(|| FieldError::new(&field, "is required with render \"json\""))?;
            let link = input.link.unwrap_or(false);
            Ok(FieldSpec {
                selector: None,
                attr: None,
                pointer: Some(JsonPointer::parse(&pointer, &field)?),
                link,
                structured: None,
                rules: input.rules(name, link)?,
            })
        })?;
        let paging = match (json.next_token, json.token_param) {
            (None, None) => None,
            (Some(next_token), Some(token_param)) => {
                let param = text::non_empty(&token_param, "json.token_param", MAX_NAME_CHARS)?;
                Some(TokenPaging {
                    next_token: JsonPointer::parse(&next_token, "json.next_token")?,
                    token_param: param.to_owned(),
                })
            }
            (Some(_), None) => {
                return Err(FieldError::new(
                    "json.token_param",
                    "is required with json.next_token: the query parameter the token goes back in",
                ));
            }
            (None, Some(_)) => {
                return Err(FieldError::new(
                    "json.next_token",
                    "is required with json.token_param",
                ));
            }
        };
        Ok(Extraction::Json {
            items: JsonPointer::parse(&json.items, "json.items")?,
            fields,
            paging,
        })
    }
}

pub(super) fn parse_fields(
    inputs: BTreeMap<String, FieldInput>,
    parse: impl Fn(&str, FieldInput) -> Result<FieldSpec, FieldError>,
) -> Result<BTreeMap<String, FieldSpec>, FieldError> {
    if inputs.is_empty() {
        return Err(FieldError::new("fields", "must name at least one field"));
    }
    if inputs.len() > MAX_FIELDS {
        return Err(FieldError::new(
            "fields",
            format!("at most {MAX_FIELDS} fields"),
        ));
    }
    let mut fields = BTreeMap::new();
    for (name, input) in inputs {
        // The name is checked before it is part of any field path.
        text::non_empty(&name, "fields", MAX_NAME_CHARS)
            .map_err(|e| FieldError::new("fields", format!("a field name {}", e.message)))?;
        let spec = parse(&name, input)?;
        fields.insert(name, spec);
    }
    // A currency field is a field of the item too: it may not take the
    // name of another.
    let mut currencies = std::collections::BTreeSet::new();
    for (name, spec) in &fields {
        if let Some(currency) = spec.currency_field()
            && (fields.contains_key(currency) || !currencies.insert(currency))
        {
            return Err(FieldError::new(
                format!("fields.{name}.number.currency_field"),
                format!("{currency:?} is already a field of the item"),
            ));
        }
    }
    Ok(fields)
}

/// One field of HTML extraction: CSS (`selector`, `attr`) or structured
/// data (`structured`), never both; only structured data when the site's
/// items are structured items of `item_type`; either with `link` and its
/// value rules.
pub(super) fn parse_html_field(
    name: &str,
    mut input: FieldInput,
    item_type: Option<&SchemaType>,
) -> Result<FieldSpec, FieldError> {
    if input.pointer.is_some() {
        return Err(only_for_json(&format!("fields.{name}.pointer")));
    }
    let markup = [("selector", &input.selector), ("attr", &input.attr)]
        .into_iter()
        .find_map(|(key, value)| value.as_ref().map(|_| key));
    let link = input.link.unwrap_or(false);
    let Some(path) = input.structured.take() else {
        if item_type.is_some() {
            return Err(FieldError::new(
                format!("fields.{name}.structured"),
                "is required: the site's items are structured data, read by a path inside \
                 the item (e.g. \"offers.price\"); for CSS selectors use an item_selector",
            ));
        }
        let attr = input
            .attr
            .take()
            .map(|a| {
                text::non_empty(&a, &format!("fields.{name}.attr"), MAX_NAME_CHARS)
                    .map(str::to_owned)
            })
            .transpose()?;
        let selector = input
            .selector
            .take()
            .map(|s| CssSelector::parse(&s, &format!("fields.{name}.selector")))
            .transpose()?;
        return Ok(FieldSpec {
            selector,
            attr,
            pointer: None,
            link,
            structured: None,
            rules: input.rules(name, link)?,
        });
    };
    if let Some(key) = markup {
        return Err(FieldError::new(
            format!("fields.{name}.{key}"),
            "reads markup and structured reads structured data: a field has one or the other",
        ));
    }
    let structured = StructuredPath::parse(&path, &format!("fields.{name}.structured"), item_type)?;
    Ok(FieldSpec {
        selector: None,
        attr: None,
        pointer: None,
        link,
        structured: Some(structured),
        rules: input.rules(name, link)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(fields: serde_json::Value) -> ExtractionInput {
        ExtractionInput {
            item_selector: None,
            structured_items: None,
            fields: serde_json::from_value(fields).unwrap(),
            wait_for: None,
            blocked_selector: None,
            json: None,
        }
    }

    #[test]
    fn json_fields_need_pointers_and_html_fields_may_not_have_them() {
        let mut json = input(serde_json::json!({"title": {"selector": "a"}}));
        json.json = Some(JsonInput {
            items: "/items".into(),
            next_token: None,
            token_param: None,
        });
        assert_eq!(
            json.parse_json().unwrap_err().field,
            "fields.title.selector"
        );
        let mut html = input(serde_json::json!({"title": {"pointer": "/t"}}));
        html.item_selector = Some("li".into());
        assert_eq!(html.parse_html().unwrap_err().field, "fields.title.pointer");
    }

    #[test]
    fn a_token_pointer_needs_its_query_parameter() {
        let mut json = input(serde_json::json!({"title": {"pointer": "/title"}}));
        json.json = Some(JsonInput {
            items: "/items".into(),
            next_token: Some("/next".into()),
            token_param: None,
        });
        assert_eq!(json.parse_json().unwrap_err().field, "json.token_param");
    }

    #[test]
    fn items_are_found_by_a_selector_or_are_structured_items_never_both_nor_neither() {
        let mut both = input(serde_json::json!({"price": {"structured": "offers.price"}}));
        both.item_selector = Some("li".into());
        both.structured_items = Some("Product".into());
        assert_eq!(both.parse_html().unwrap_err().field, "structured_items");
        let neither = input(serde_json::json!({"title": {"selector": "a"}}));
        let err = neither.parse_html().unwrap_err();
        assert_eq!(err.field, "item_selector");
        assert!(err.message.contains("structured_items"), "{}", err.message);

        let mut structured = input(serde_json::json!({
            "price": {"structured": "offers.price|offers.lowPrice"},
            "url": {"structured": "url", "link": true}
        }));
        structured.structured_items = Some("Product".into());
        let extraction = structured.parse_html().unwrap();
        assert_eq!(extraction.structured_items().unwrap().as_str(), "Product");
        assert!(extraction.fields()["url"].is_item_url());
        assert_eq!(extraction.selectors()[0], None);
        assert!(extraction.reads_structured_data());
    }

    #[test]
    fn a_structured_items_site_reads_every_field_from_structured_data() {
        for (fields, at) in [
            (
                serde_json::json!({"t": {"selector": "a"}}),
                "fields.t.structured",
            ),
            (serde_json::json!({"t": {}}), "fields.t.structured"),
            (
                serde_json::json!({"t": {"structured": "name", "attr": "href"}}),
                "fields.t.attr",
            ),
            (
                serde_json::json!({"t": {"structured": "Product.name"}}),
                "fields.t.structured",
            ),
            (
                serde_json::json!({"t": {"structured": "a..b"}}),
                "fields.t.structured",
            ),
            (
                serde_json::json!({"t": {"pointer": "/a"}}),
                "fields.t.pointer",
            ),
        ] {
            let mut site = input(fields.clone());
            site.structured_items = Some("Product".into());
            assert_eq!(site.parse_html().unwrap_err().field, at, "{fields}");
        }
        let mut bad_type = input(serde_json::json!({"t": {"structured": "name"}}));
        bad_type.structured_items = Some("schema.org/Product".into());
        assert_eq!(bad_type.parse_html().unwrap_err().field, "structured_items");
    }

    #[test]
    fn beside_a_selector_a_field_reads_the_pages_structured_data_by_type() {
        let mut site = input(serde_json::json!({
            "title": {"selector": "a"},
            "price": {"structured": "Product.offers.price"},
            "image": {"structured": "og:image", "link": true}
        }));
        site.item_selector = Some("li".into());
        let extraction = site.parse_html().unwrap();
        assert!(extraction.reads_structured_data());
        assert!(extraction.structured_items().is_none());
        for (fields, at) in [
            (
                serde_json::json!({"p": {"structured": "offers.price"}}),
                "fields.p.structured",
            ),
            (
                serde_json::json!({"p": {"structured": "Product.name", "selector": "a"}}),
                "fields.p.selector",
            ),
            (
                serde_json::json!({"p": {"selector": "a", "number": {}, "link": true}}),
                "fields.p.link",
            ),
        ] {
            let mut site = input(fields.clone());
            site.item_selector = Some("li".into());
            assert_eq!(site.parse_html().unwrap_err().field, at, "{fields}");
        }
        let mut json = input(serde_json::json!({"p": {"structured": "Product.name"}}));
        json.json = Some(JsonInput {
            items: "/items".into(),
            next_token: None,
            token_param: None,
        });
        assert_eq!(json.parse_json().unwrap_err().field, "fields.p.structured");
        let mut json = input(serde_json::json!({"p": {"pointer": "/p"}}));
        json.structured_items = Some("Product".into());
        json.json = Some(JsonInput {
            items: "/items".into(),
            next_token: None,
            token_param: None,
        });
        assert_eq!(json.parse_json().unwrap_err().field, "structured_items");
    }
}
