//! Typed, clean values: what a field's rules make of the text a page holds.
//! Each value read goes, as in Scrapy's item loaders (`MapCompose` then
//! `TakeFirst`), through the field's steps in order: whitespace collapsed
//! (`whitespace`), the part a pattern captures (`regex`), then its type:
//! text, a URL made absolute against the page (`link`), a number read as its
//! locale writes it (`number`, the currency kept apart in a field of its
//! own), or a date (`date`, in the site's time zone). The first value is the
//! field's, or every one as a list (`all`); a field with none takes its
//! `default`, and an item without a `required` field is not kept.
//!
//! A value that does not parse is `null` (in a list: left out) and counted
//! ([`ValueReport`]), never an error of the page: the run completes,
//! degraded, naming the field.

mod currency;
mod date;
mod input;
mod locale;
mod number;
mod pattern;
mod relative;
mod report;
mod text;

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

pub use date::{DateInput, DateRule};
pub use input::{NumberInput, ValueInput};
pub use locale::NumberLocale;
pub use number::read_number;
pub use pattern::{MAX_PATTERN_CHARS, Pattern};
pub use report::{FieldTally, ValueReport};
pub use text::{Whitespace, collapse_whitespace, is_js_space, js_trim};

/// Most values a list field keeps.
pub const MAX_LIST_VALUES: usize = 100;
/// Longest text of a value shown in a failure (the health reason, the preview).
const SAMPLE_CHARS: usize = 60;

/// How a field's number is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumberRule {
    /// The page's locale; none: the separators are guessed.
    pub locale: Option<NumberLocale>,
    /// The item field the currency (an ISO 4217 code, or null) goes into.
    pub currency_field: Option<String>,
}

/// What a field's values are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ValueKind {
    /// Text (a URL when the field is a link).
    #[default]
    Text,
    Number(NumberRule),
    Date(DateRule),
}

/// A field's value rules, as they passed every check. The default is none
/// at all: the value is kept as extraction read it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "input::StoredRules", into = "input::StoredRules")]
pub struct ValueRules {
    pub whitespace: Option<Whitespace>,
    pub regex: Option<Pattern>,
    /// Every value, as a list (at most [`MAX_LIST_VALUES`]).
    pub all: bool,
    pub kind: ValueKind,
    /// The value of a field that has none (of the kind: a number for a
    /// number, a list with `all`).
    pub default: Option<Value>,
    /// An item without a value here is left out of the results.
    pub required: bool,
}

/// What a value is read against.
#[derive(Debug, Clone, Copy)]
pub struct ValueContext<'a> {
    /// The page's base URL (its `<base href>`, else its address): links
    /// are made absolute against it.
    pub base: &'a Url,
    /// When the page was read: "3 hours ago" is 3 hours before it.
    pub now: DateTime<Utc>,
}

/// Why a value was not kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("{0:?} is not a number{1}")]
    NotANumber(String, String),
    #[error("{0:?} is not a date or time the rule reads")]
    NotADate(String),
    /// A JSON value that is not text, where the rules need text.
    #[error("{0} is not text")]
    NotText(String),
    #[error("{0}")]
    Pattern(String),
}

/// A field's value once its rules are applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Typed {
    pub value: Value,
    /// The currency field's value, when the number rule names one.
    pub currency: Option<Value>,
    /// Values that did not parse (a list keeps the others).
    pub unparsed: u32,
    /// The first of them.
    pub error: Option<ValueError>,
    /// No value and no default, on a required field: the item is not kept.
    pub missing_required: bool,
}

/// One value before its type is read.
enum Raw<'a> {
    Text(Cow<'a, str>),
    /// A JSON API's number, boolean, list or object.
    Json(&'a Value),
}

impl ValueRules {
    /// Whether there is nothing to apply: extraction's value is kept.
    pub fn is_plain(&self) -> bool {
        *self == ValueRules::default()
    }

    /// The field's value from what extraction read (`null`, a text, a list
    /// of texts with `all`, or a JSON API's value); `link`: a URL field.
    pub fn apply(&self, raw: &Value, link: bool, ctx: &ValueContext<'_>) -> Typed {
        let mut typed = Typed {
            value: Value::Null,
            currency: None,
            unparsed: 0,
            error: None,
            missing_required: false,
        };
        let mut values = Vec::new();
        let mut currency = None;
        for value in self.raw_values(raw) {
            for value in self.captured(value, &mut typed) {
                match self.typed(value, link, ctx) {
                    Ok((value, found)) => {
                        currency = currency.or(found);
                        values.push(value);
                    }
                    Err(error) => {
                        typed.unparsed += 1;
                        typed.error.get_or_insert(error);
                    }
                }
                if !self.all || values.len() >= MAX_LIST_VALUES {
                    break;
                }
            }
            if (!self.all && (!values.is_empty() || typed.unparsed > 0))
                || values.len() >= MAX_LIST_VALUES
            {
                break;
            }
        }
        let found = !values.is_empty();
        typed.value = match self.all {
            true => Value::Array(values),
            false => values.into_iter().next().unwrap_or(Value::Null),
        };
        if let ValueKind::Number(NumberRule {
            currency_field: Some(_),
            ..
        }) = &self.kind
        {
            typed.currency = Some(currency.map_or(Value::Null, Value::from));
        }
        if !found && typed.unparsed == 0 {
            match &self.default {
                Some(default) => typed.value = default.clone(),
                None => typed.missing_required = self.required,
            }
        } else if !found {
            typed.missing_required = self.required;
        }
        typed
    }

    /// The values extraction read, one by one.
    fn raw_values<'a>(&self, raw: &'a Value) -> Vec<Raw<'a>> {
        match raw {
            Value::Null => Vec::new(),
            Value::String(text) => vec![Raw::Text(Cow::Borrowed(text))],
            Value::Array(list) if self.all => list
                .iter()
                .filter(|v| !v.is_null())
                .map(|v| match v {
                    Value::String(text) => Raw::Text(Cow::Borrowed(text)),
                    other => Raw::Json(other),
                })
                .collect(),
            other => vec![Raw::Json(other)],
        }
    }

    /// A value's whitespace cleaned and the pattern's captures taken; an
    /// empty text is no value.
    fn captured<'a>(&self, raw: Raw<'a>, typed: &mut Typed) -> Vec<Raw<'a>> {
        let text = match raw {
            Raw::Text(text) => text,
            Raw::Json(value @ (Value::Number(_) | Value::Bool(_))) if self.regex.is_some() => {
                Cow::Owned(value.to_string())
            }
            Raw::Json(value @ (Value::Array(_) | Value::Object(_))) if self.regex.is_some() => {
                typed.unparsed += 1;
                typed
                    .error
                    .get_or_insert(ValueError::NotText(sample(&value.to_string())));
                return Vec::new();
            }
            Raw::Json(_) => return vec![raw],
        };
        let text = match self.whitespace {
            Some(Whitespace::Collapse) => Cow::Owned(collapse_whitespace(&text)),
            _ => text,
        };
        let Some(pattern) = &self.regex else {
            return match text.trim().is_empty() {
                true => Vec::new(),
                false => vec![Raw::Text(text)],
            };
        };
        match pattern.values(&text, self.all) {
            Ok(found) => found
                .into_iter()
                .filter(|v| !v.trim().is_empty())
                .map(|v| Raw::Text(Cow::Owned(v.to_owned())))
                .collect(),
            Err(why) => {
                typed.unparsed += 1;
                typed.error.get_or_insert(ValueError::Pattern(why));
                Vec::new()
            }
        }
    }

    /// A value of the field's kind, and the currency it names.
    fn typed(
        &self,
        raw: Raw<'_>,
        link: bool,
        ctx: &ValueContext<'_>,
    ) -> Result<(Value, Option<&'static str>), ValueError> {
        let text: Cow<'_, str> = match (raw, &self.kind) {
            (Raw::Text(text), _) => text,
            (Raw::Json(Value::Number(n)), ValueKind::Number(_)) => {
                return Ok((Value::Number(n.clone()), None));
            }
            (Raw::Json(value), ValueKind::Text) if !link => return Ok((value.clone(), None)),
            (Raw::Json(value @ (Value::Number(_) | Value::String(_))), _) => Cow::Owned(
                value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned),
            ),
            (Raw::Json(value), _) => return Err(ValueError::NotText(sample(&value.to_string()))),
        };
        match &self.kind {
            ValueKind::Text if link => Ok((Value::String(absolute(&text, ctx.base)), None)),
            ValueKind::Text => Ok((Value::String(text.into_owned()), None)),
            ValueKind::Number(rule) => {
                let wants_currency = rule.currency_field.is_some();
                read_number(&text, rule.locale.as_ref(), wants_currency)
                    .map(|read| (Value::Number(read.value), read.currency))
                    .map_err(|why| ValueError::NotANumber(sample(&text), hint(why, rule)))
            }
            ValueKind::Date(rule) => rule
                .read(&text, ctx.now)
                .map(|read| (Value::String(read.to_text()), None))
                .ok_or_else(|| ValueError::NotADate(sample(&text))),
        }
    }
}

/// What a number that did not parse lacked, for its message.
fn hint(why: number::NotANumber, rule: &NumberRule) -> String {
    match (why, &rule.locale) {
        (number::NotANumber::NoDigits, _) => String::new(),
        (number::NotANumber::TooLong, _) => " (too many digits)".to_owned(),
        (number::NotANumber::Grouping, Some(locale)) => format!(
            " as {} writes one ({})",
            locale.as_str(),
            number::describe(locale.separators())
        ),
        (number::NotANumber::Grouping, None) => {
            " (its separators do not group as numbers do)".to_owned()
        }
    }
}

/// `value` resolved against `base` as `new URL(value, base).href` does;
/// unchanged when it does not parse (the crawl bounds then drop it).
pub fn absolute(value: &str, base: &Url) -> String {
    base.join(value.trim())
        .map(|u| u.to_string())
        .unwrap_or_else(|_| value.to_owned())
}

/// The start of a value, for a message.
fn sample(text: &str) -> String {
    match text.char_indices().nth(SAMPLE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
