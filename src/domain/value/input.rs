//! A field's value rules as a client sends them (new keys of a field, all
//! optional), checked into [`ValueRules`]; and how the rules are stored in a
//! site's `fields` JSON, in the same shape (every key defaulted, so a site
//! stored before them reads as having none).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{
    DateInput, DateRule, MAX_LIST_VALUES, NumberLocale, NumberRule, Pattern, ValueKind, ValueRules,
    Whitespace,
};
use crate::domain::{FieldError, text};

/// Longest default, as JSON text.
const MAX_DEFAULT_CHARS: usize = 1000;
/// Longest name of a currency field.
const MAX_NAME_CHARS: usize = 100;

/// How a field's number is read: `"₩1,299,000"` (ko-KR) is 1299000,
/// `"1.299,00 €"` (de-DE) 1299, with `currency_field` its currency (`KRW`,
/// `EUR`) into a field of its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NumberRule)]
pub struct NumberInput {
    /// The page's locale (`ko-KR`, `de-DE`, `en-US`, `fr-FR`, `pl-PL`): its
    /// decimal and thousands separators. None: guessed (the last of `.`
    /// and `,` is the decimal separator; one followed by three digits groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// An item field (not one of `fields`) that gets the currency as an ISO
    /// 4217 code, or null when the text names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency_field: Option<String>,
}

/// A field's value rules as a client sends them.
#[derive(Debug, Clone, Default)]
pub struct ValueInput {
    pub whitespace: Option<String>,
    pub regex: Option<String>,
    pub all: Option<bool>,
    pub number: Option<NumberInput>,
    pub date: Option<DateInput>,
    pub default: Option<Value>,
    pub required: Option<bool>,
}

impl ValueInput {
    /// The rules of the field at `path` (`fields.price`); `link`: the field
    /// is a URL.
    pub fn parse(self, path: &str, link: bool) -> Result<ValueRules, FieldError> {
        let at = |key: &str| format!("{path}.{key}");
        let whitespace = self
            .whitespace
            .map(|w| Whitespace::parse(&w, &at("whitespace")))
            .transpose()?;
        let regex = self
            .regex
            .map(|r| Pattern::parse(&r, &at("regex")))
            .transpose()?;
        let all = self.all.unwrap_or(false);
        let kind = match (self.number, self.date) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    at("date"),
                    "a field is a number or a date, not both",
                ));
            }
            (Some(_), None) | (None, Some(_)) if link => {
                return Err(FieldError::new(
                    at("link"),
                    "a link is a URL: it cannot be a number or a date too",
                ));
            }
            (Some(number), None) => ValueKind::Number(number.parse(&at("number"), all)?),
            (None, Some(date)) => ValueKind::Date(date.parse(&at("date"))?),
            (None, None) => ValueKind::Text,
        };
        let required = self.required.unwrap_or(false);
        let default = self
            .default
            .filter(|d| !d.is_null())
            .map(|d| check_default(d, &kind, all, &at("default")))
            .transpose()?;
        if required && default.is_some() {
            return Err(FieldError::new(
                at("required"),
                "a field with a default is never missing: drop one of them",
            ));
        }
        Ok(ValueRules {
            whitespace,
            regex,
            all,
            kind,
            default,
            required,
        })
    }
}

impl NumberInput {
    fn parse(self, path: &str, all: bool) -> Result<NumberRule, FieldError> {
        let locale = self
            .locale
            .map(|l| NumberLocale::parse(&l, &format!("{path}.locale")))
            .transpose()?;
        let currency_field = match self.currency_field {
            Some(_) if all => {
                return Err(FieldError::new(
                    format!("{path}.currency_field"),
                    "not with all: a list of numbers has no one currency",
                ));
            }
            Some(name) => Some(
                text::non_empty(&name, &format!("{path}.currency_field"), MAX_NAME_CHARS)?
                    .to_owned(),
            ),
            None => None,
        };
        Ok(NumberRule {
            locale,
            currency_field,
        })
    }
}

/// A default of the field's kind: a number for a number, text otherwise;
/// with `all`, a list of them.
fn check_default(
    default: Value,
    kind: &ValueKind,
    all: bool,
    field: &str,
) -> Result<Value, FieldError> {
    let json = default.to_string();
    if json.chars().count() > MAX_DEFAULT_CHARS {
        return Err(FieldError::new(
            field,
            format!("must be at most {MAX_DEFAULT_CHARS} characters as JSON"),
        ));
    }
    let (wanted, fits): (&str, fn(&Value) -> bool) = match kind {
        ValueKind::Number(_) => ("a number", Value::is_number),
        ValueKind::Text | ValueKind::Date(_) => ("text", Value::is_string),
    };
    let values = match (&default, all) {
        (Value::Array(list), true) if list.len() <= MAX_LIST_VALUES => list.iter().collect(),
        (_, true) => {
            return Err(FieldError::new(
                field,
                format!("must be a list (all) of at most {MAX_LIST_VALUES} values, each {wanted}"),
            ));
        }
        (value, false) => vec![value],
    };
    for value in values {
        if !fits(value) {
            return Err(FieldError::new(field, format!("must be {wanted}")));
        }
        if let Value::String(text) = value {
            text::check(text, field, MAX_DEFAULT_CHARS)?;
        }
    }
    Ok(default)
}

/// The rules as a site's `fields` JSON holds them: the keys a client sends.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct StoredRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    whitespace: Option<Whitespace>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    regex: Option<Pattern>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    all: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    number: Option<NumberInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    date: Option<DateRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default: Option<Value>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    required: bool,
}

/// Read back without refusal: the rules passed [`ValueInput::parse`] when stored.
impl From<StoredRules> for ValueRules {
    fn from(stored: StoredRules) -> Self {
        let kind = match (stored.number, stored.date) {
            (Some(number), _) => ValueKind::Number(NumberRule {
                locale: number.locale.as_deref().and_then(NumberLocale::stored),
                currency_field: number.currency_field,
            }),
            (None, Some(date)) => ValueKind::Date(date),
            (None, None) => ValueKind::Text,
        };
        ValueRules {
            whitespace: stored.whitespace,
            regex: stored.regex,
            all: stored.all,
            kind,
            default: stored.default,
            required: stored.required,
        }
    }
}

impl From<ValueRules> for StoredRules {
    fn from(rules: ValueRules) -> Self {
        let (number, date) = match rules.kind {
            ValueKind::Text => (None, None),
            ValueKind::Number(number) => (
                Some(NumberInput {
                    locale: number.locale.map(|l| l.as_str().to_owned()),
                    currency_field: number.currency_field,
                }),
                None,
            ),
            ValueKind::Date(date) => (None, Some(date)),
        };
        StoredRules {
            whitespace: rules.whitespace,
            regex: rules.regex,
            all: rules.all,
            number,
            date,
            default: rules.default,
            required: rules.required,
        }
    }
}
