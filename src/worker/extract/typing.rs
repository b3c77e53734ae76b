//! The fields' value rules (`domain::value`) applied to a page's items as
//! every render mode read them: numbers, dates, captures, lists, defaults;
//! an item without a required field left out; what did not parse counted
//! for the run's data health. A site without rules costs nothing here; one
//! with rules is typed on a blocking thread within the page's extraction
//! budget (each value's bytes are charged: a pattern runs in time linear in
//! them), never on the async runtime.

use std::{collections::BTreeMap, time::Duration};

use chrono::Utc;
use serde_json::{Map, Value};
use url::Url;

use super::{ReadError, budget::ExtractBudget, off_runtime, page_item};
use crate::domain::{
    bounds::cut_to_chars,
    item::PageItem,
    site::FieldSpec,
    value::{ValueContext, ValueReport},
};

/// A page's items as extraction read them: per field a text, null, a list
/// of texts (`all`), or a JSON API's value; and the URL links resolve against.
#[derive(Debug, Clone, PartialEq)]
pub struct RawItems {
    pub items: Vec<Map<String, Value>>,
    /// The page's base URL (its `<base href>`, else where it was served).
    pub base: Url,
}

impl RawItems {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// One item once its fields' rules were applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedItem {
    /// Its fields, typed (a currency field among them).
    pub fields: Map<String, Value>,
    /// Its fields as read (kept for a preview only).
    pub raw: Option<Map<String, Value>>,
    /// Each field whose value did not parse, and why.
    pub errors: BTreeMap<String, String>,
    /// The required field it lacks, when left out.
    pub left_out_by: Option<String>,
}

/// Whether any field has rules to apply.
pub fn has_rules(fields: &BTreeMap<String, FieldSpec>) -> bool {
    fields.values().any(|spec| !spec.rules.is_plain())
}

/// Applies the rules of `fields` to `raw`, reading at most `max_chars` and
/// one more of each text; `keep_raw` keeps each item's fields as read (a
/// preview shows both).
pub fn type_items(
    raw: RawItems,
    fields: &BTreeMap<String, FieldSpec>,
    max_chars: usize,
    keep_raw: bool,
    budget: &ExtractBudget,
) -> Result<(Vec<TypedItem>, ValueReport), ReadError> {
    let ctx = ValueContext {
        base: &raw.base,
        now: Utc::now(),
    };
    let mut report = ValueReport::default();
    let mut typed = Vec::with_capacity(raw.items.len());
    for mut read in raw.items {
        let kept_raw = keep_raw.then(|| read.clone());
        let mut values = Map::new();
        let mut errors = BTreeMap::new();
        let mut left_out_by = None;
        for (name, spec) in fields {
            let mut value = read.remove(name).unwrap_or(Value::Null);
            if spec.rules.is_plain() {
                values.insert(name.clone(), value);
                continue;
            }
            cut(&mut value, max_chars.saturating_add(1));
            charge(&value, budget);
            budget.look_now()?;
            let applied = spec.rules.apply(&value, spec.is_link(), &ctx);
            report.record(name, &applied);
            if let Some(error) = &applied.error {
                errors.insert(name.clone(), error.to_string());
            }
            if applied.missing_required && left_out_by.is_none() {
                left_out_by = Some(name.clone());
            }
            if let (Some(currency_field), Some(currency)) =
                (spec.currency_field(), applied.currency)
            {
                values.insert(currency_field.to_owned(), currency);
            }
            values.insert(name.clone(), applied.value);
        }
        budget.check()?;
        typed.push(TypedItem {
            fields: values,
            raw: kept_raw,
            errors,
            left_out_by,
        });
    }
    Ok((typed, report))
}

/// Each text of `value` cut to `max` characters.
fn cut(value: &mut Value, max: usize) {
    match value {
        Value::String(text) => {
            if let Some(kept) = cut_to_chars(text, max) {
                *text = kept.to_owned();
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| cut(v, max)),
        _ => {}
    }
}

/// The bytes of a value read, charged before its rules run over them.
fn charge(value: &Value, budget: &ExtractBudget) {
    match value {
        Value::String(text) => {
            budget.charge_bytes(text.len());
        }
        Value::Array(list) => list.iter().for_each(|v| charge(v, budget)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {
            budget.step();
        }
        Value::Object(_) => {
            budget.charge_bytes(value.to_string().len());
        }
    }
}

/// A page's items typed for storing, and what did not parse: off the
/// runtime within `budget` (waiting at most `wait_at_most`), or at once for
/// a site without rules.
pub async fn typed_page(
    raw: RawItems,
    fields: &BTreeMap<String, FieldSpec>,
    max_chars: usize,
    (budget, wait_at_most): (Duration, Duration),
) -> Result<(Vec<PageItem>, ValueReport), ReadError> {
    if !has_rules(fields) {
        let items = raw
            .items
            .into_iter()
            .map(|fields_read| page_item(fields_read, fields))
            .collect();
        return Ok((items, ValueReport::default()));
    }
    let fields = fields.clone();
    off_runtime(budget, wait_at_most, move |budget| {
        let (typed, report) = type_items(raw, &fields, max_chars, false, budget)?;
        let kept = typed
            .into_iter()
            .filter(|t| t.left_out_by.is_none())
            .map(|t| page_item(t.fields, &fields))
            .collect();
        Ok((kept, report))
    })
    .await
}

/// A page's items typed for a preview, each with its fields as read.
pub async fn typed_for_preview(
    raw: RawItems,
    fields: &BTreeMap<String, FieldSpec>,
    max_chars: usize,
    (budget, wait_at_most): (Duration, Duration),
) -> Result<Vec<TypedItem>, ReadError> {
    let fields = fields.clone();
    let keep_raw = has_rules(&fields);
    off_runtime(budget, wait_at_most, move |budget| {
        type_items(raw, &fields, max_chars, keep_raw, budget).map(|(typed, _)| typed)
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::{site::CssSelector, value::ValueInput};

    fn field(rules: ValueInput) -> FieldSpec {
        FieldSpec {
            selector: Some(CssSelector::parse(".x", "x").unwrap()),
            rules: rules.parse("fields.x", false).unwrap(),
            ..FieldSpec::default()
        }
    }

    fn raw(items: Value) -> RawItems {
        RawItems {
            items: serde_json::from_value(items).unwrap(),
            base: Url::parse("http://shop.example/").unwrap(),
        }
    }

    #[test]
    fn fields_are_typed_currencies_kept_apart_and_required_ones_leave_items_out() {
        let fields = BTreeMap::from([
            ("title".to_owned(), FieldSpec::default()),
            (
                "price".to_owned(),
                field(ValueInput {
                    number: Some(
                        serde_json::from_value(
                            json!({"locale": "ko-KR", "currency_field": "currency"}),
                        )
                        .unwrap(),
                    ),
                    required: Some(true),
                    ..ValueInput::default()
                }),
            ),
        ]);
        let page = raw(json!([
            {"title": "Lamp", "price": "₩1,299,000"},
            {"title": "Ad", "price": "문의"},
        ]));
        let (typed, report) =
            type_items(page, &fields, 100, true, &ExtractBudget::unlimited()).unwrap();
        assert_eq!(
            Value::Object(typed[0].fields.clone()),
            json!({"title": "Lamp", "price": 1_299_000, "currency": "KRW"})
        );
        assert_eq!(typed[0].raw.as_ref().unwrap()["price"], "₩1,299,000");
        assert_eq!(typed[1].left_out_by.as_deref(), Some("price"));
        assert_eq!(typed[1].errors["price"], "\"문의\" is not a number");
        assert_eq!(report.fields["price"].unparsed, 1);
        assert_eq!(report.fields["price"].left_out, 1);
    }

    #[tokio::test]
    async fn a_site_without_rules_keeps_its_values_as_read() {
        let fields = BTreeMap::from([("title".to_owned(), FieldSpec::default())]);
        let page = raw(json!([{"title": " as read "}]));
        let limits = (Duration::from_secs(1), Duration::from_secs(1));
        let (items, report) = typed_page(page, &fields, 100, limits).await.unwrap();
        assert_eq!(items[0].fields, json!({"title": " as read "}));
        assert!(report.is_empty());
    }
}
