//! Reads items out of a JSON API's answer: items at a JSON pointer, fields by
//! pointers inside each item, and the next page's token. Each value copied
//! is charged to the page's budget (a pointer may pick a large subtree, once
//! per item and field).

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use url::Url;

use super::{RawItems, ReadError, absolute, budget::ExtractBudget};
use crate::domain::site::{FieldSpec, JsonPointer, TokenPaging};

/// What one answer of a JSON API holds.
#[derive(Debug)]
pub struct JsonPage {
    /// Its items as read; links resolve against the answer's URL.
    pub items: RawItems,
    /// The next page's token; none: this was the last page.
    pub next_token: Option<String>,
}

/// Reads `answer` (served at `url`). Items missing or null count as an empty
/// page (the end); items that are not a list are an error naming the pointer.
/// At most `max_items` items are read.
pub fn extract_json(
    answer: &Value,
    url: &Url,
    items: &JsonPointer,
    fields: &BTreeMap<String, FieldSpec>,
    paging: Option<&TokenPaging>,
    max_items: usize,
    budget: &ExtractBudget,
) -> Result<JsonPage, ReadError> {
    let list = match items.find(answer) {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(list)) => &list[..],
        Some(other) => {
            return Err(ReadError::Misconfigured(format!(
                "json.items {:?} points at {}, not a list",
                items.as_str(),
                kind(other)
            )));
        }
    };
    let list = &list[..list.len().min(max_items)];
    let mut read = Vec::with_capacity(list.len());
    for item in list {
        let mut values = Map::new();
        for (name, spec) in fields {
            let value = spec
                .pointer
                .as_ref()
                .and_then(|p| p.find(item))
                .map_or(Value::Null, |found| copied(found, budget));
            // A pattern picks a link out of the text before it is made absolute.
            let value = match value {
                Value::String(s) if spec.link && spec.rules.regex.is_none() => {
                    Value::String(absolute(s.trim(), url))
                }
                other => other,
            };
            values.insert(name.clone(), value);
        }
        budget.check()?;
        read.push(values);
    }
    let items = RawItems {
        items: read,
        base: url.clone(),
    };
    let next_token = paging
        .and_then(|p| p.next_token.find(answer))
        .and_then(|token| match token {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
    Ok(JsonPage { items, next_token })
}

/// A copy of `value`, each of its values and bytes charged to `budget`;
/// what is left once the budget is spent is null (the page then fails).
pub(super) fn copied(value: &Value, budget: &ExtractBudget) -> Value {
    match value {
        Value::String(s) if budget.charge_bytes(s.len()) => Value::String(s.clone()),
        Value::Array(list) if budget.step() => {
            Value::Array(list.iter().map(|v| copied(v, budget)).collect())
        }
        Value::Object(map) if budget.step() => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    budget.charge_bytes(k.len());
                    (k.clone(), copied(v, budget))
                })
                .collect(),
        ),
        Value::Null | Value::Bool(_) | Value::Number(_) if budget.step() => value.clone(),
        _ => Value::Null,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pointer(p: &str) -> JsonPointer {
        JsonPointer::parse(p, "x").unwrap()
    }

    #[test]
    fn items_fields_links_and_the_next_token_are_read() {
        let answer = json!({
            "data": {"items": [
                {"title": "A", "url": "/p/1", "stats": {"likes": 3}},
                {"title": "B", "url": "https://x.example/2"}
            ]},
            "next_token": "abc"
        });
        let fields = BTreeMap::from([
            (
                "title".to_owned(),
                FieldSpec {
                    selector: None,
                    attr: None,
                    pointer: Some(pointer("/title")),
                    link: false,
                    structured: None,
                    rules: Default::default(),
                },
            ),
            (
                "url".to_owned(),
                FieldSpec {
                    selector: None,
                    attr: None,
                    pointer: Some(pointer("/url")),
                    link: true,
                    structured: None,
                    rules: Default::default(),
                },
            ),
            (
                "likes".to_owned(),
                FieldSpec {
                    selector: None,
                    attr: None,
                    pointer: Some(pointer("/stats/likes")),
                    link: false,
                    structured: None,
                    rules: Default::default(),
                },
            ),
        ]);
        let paging = TokenPaging {
            next_token: pointer("/next_token"),
            token_param: "token".into(),
        };
        let url = Url::parse("http://api.example/s?q=a").unwrap();
        let budget = ExtractBudget::unlimited();
        let page = extract_json(
            &answer,
            &url,
            &pointer("/data/items"),
            &fields,
            Some(&paging),
            usize::MAX,
            &budget,
        )
        .unwrap();
        assert_eq!(page.next_token.as_deref(), Some("abc"));
        let items: Vec<_> = page
            .items
            .items
            .into_iter()
            .map(|item| super::super::page_item(item, &fields))
            .collect();
        assert_eq!(
            items[0].fields,
            json!({"title": "A", "url": "http://api.example/p/1", "likes": 3})
        );
        assert_eq!(items[0].item_url.as_deref(), Some("http://api.example/p/1"));
        assert_eq!(items[1].fields["likes"], Value::Null);

        let end = extract_json(
            &json!({"next_token": null}),
            &url,
            &pointer("/data/items"),
            &fields,
            Some(&paging),
            usize::MAX,
            &budget,
        )
        .unwrap();
        assert!(end.items.is_empty() && end.next_token.is_none());
        let wrong = extract_json(
            &json!({"data": {"items": "x"}}),
            &url,
            &pointer("/data/items"),
            &fields,
            None,
            usize::MAX,
            &budget,
        );
        assert!(wrong.unwrap_err().to_string().contains("a string"));
    }
}
