//! How items are read from a results page: CSS selectors over HTML (browser
//! and http modes) or JSON pointers into an API's answer (json mode).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::locator::{CssSelector, JsonPointer};
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
/// itself without a selector); `href`/`src` are made absolute. In json mode:
/// the value at `pointer` inside the item. In any mode `link` makes it an
/// absolute URL; then `rules` make the value typed and clean.
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
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldInput {
    /// CSS selector inside the item (browser, http).
    pub selector: Option<String>,
    /// Attribute to read instead of the text (browser, http).
    pub attr: Option<String>,
    /// JSON pointer inside the item (json).
    pub pointer: Option<String>,
    /// The value is a URL: made absolute, and the first one is the item's URL.
    pub link: Option<bool>,
    /// `collapse` (an element's text is by default) or `keep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whitespace: Option<String>,
    /// A pattern; the value is its first capture group (else the whole match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Every value (every element the selector finds, every match), as a list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
    /// The value is a number, read as its locale writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<NumberInput>,
    /// The value is a date or time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<DateInput>,
    /// The value when the page has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// An item without a value here is left out.
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// How items are read, by render mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extraction {
    /// Browser and http modes.
    Html {
        item_selector: CssSelector,
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

    /// The fields an item has: the site's, and the currency fields their
    /// number rules fill, in name order.
    pub fn item_field_names(&self) -> Vec<String> {
        item_field_names(self.fields())
    }

    /// The selectors of HTML extraction, as a client writes them: item,
    /// wait_for, blocked_selector (none for JSON).
    pub fn selectors(&self) -> [Option<&str>; 3] {
        match self {
            Extraction::Html {
                item_selector,
                wait_for,
                blocked_selector,
                ..
            } => [
                Some(item_selector.as_str()),
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
        let item_selector = self
            .item_selector
            .ok_or_else(|| FieldError::new("item_selector", "is required"))?;
        let fields = parse_fields(self.fields, |name, mut input| {
            if input.pointer.is_some() {
                return Err(only_for_json(&format!("fields.{name}.pointer")));
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
            let link = input.link.unwrap_or(false);
            Ok(FieldSpec {
                selector,
                attr,
                pointer: None,
                link,
                rules: input.rules(name, link)?,
            })
        })?;
        let css = |value: Option<String>, field: &str| {
            value.map(|s| CssSelector::parse(&s, field)).transpose()
        };
        Ok(Extraction::Html {
            item_selector: CssSelector::parse(&item_selector, "item_selector")?,
            fields,
            wait_for: css(self.wait_for, "wait_for")?,
            blocked_selector: css(self.blocked_selector, "blocked_selector")?,
        })
    }

    /// JSON extraction (json mode).
    pub fn parse_json(self) -> Result<Extraction, FieldError> {
        for (value, field) in [
            (&self.item_selector, "item_selector"),
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

fn parse_fields(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn input(fields: serde_json::Value) -> ExtractionInput {
        ExtractionInput {
            item_selector: None,
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
}
