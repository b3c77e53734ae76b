//! Reads items out of a JSON API's answer: items at a JSON pointer, fields by
//! pointers inside each item, and the next page's token.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use url::Url;

use super::{absolute, page_item};
use crate::{
    domain::page::PageItem,
    domain::site::{FieldSpec, JsonPointer, TokenPaging},
};

/// What one answer of a JSON API holds.
#[derive(Debug)]
pub struct JsonPage {
    pub items: Vec<PageItem>,
    /// The next page's token; none: this was the last page.
    pub next_token: Option<String>,
}

/// Reads `answer` (served at `url`). Items missing or null count as an empty
/// page (the end); items that are not a list are an error naming the pointer.
pub fn extract_json(
    answer: &Value,
    url: &Url,
    items: &JsonPointer,
    fields: &BTreeMap<String, FieldSpec>,
    paging: Option<&TokenPaging>,
) -> Result<JsonPage, String> {
    let list = match items.find(answer) {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(list)) => &list[..],
        Some(other) => {
            return Err(format!(
                "json.items {:?} points at {}, not a list",
                items.as_str(),
                kind(other)
            ));
        }
    };
    let items = list
        .iter()
        .map(|item| {
            let values: Map<String, Value> = fields
                .iter()
                .map(|(name, spec)| {
                    let value = spec
                        .pointer
                        .as_ref()
                        .and_then(|p| p.find(item))
                        .cloned()
                        .unwrap_or(Value::Null);
                    let value = match value {
                        Value::String(s) if spec.link => Value::String(absolute(s.trim(), url)),
                        other => other,
                    };
                    (name.clone(), value)
                })
                .collect();
            page_item(values, fields)
        })
        .collect();
    let next_token = paging
        .and_then(|p| p.next_token.find(answer))
        .and_then(|token| match token {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
    Ok(JsonPage { items, next_token })
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
                },
            ),
            (
                "url".to_owned(),
                FieldSpec {
                    selector: None,
                    attr: None,
                    pointer: Some(pointer("/url")),
                    link: true,
                },
            ),
            (
                "likes".to_owned(),
                FieldSpec {
                    selector: None,
                    attr: None,
                    pointer: Some(pointer("/stats/likes")),
                    link: false,
                },
            ),
        ]);
        let paging = TokenPaging {
            next_token: pointer("/next_token"),
            token_param: "token".into(),
        };
        let url = Url::parse("http://api.example/s?q=a").unwrap();
        let page = extract_json(
            &answer,
            &url,
            &pointer("/data/items"),
            &fields,
            Some(&paging),
        )
        .unwrap();
        assert_eq!(page.next_token.as_deref(), Some("abc"));
        assert_eq!(
            page.items[0].fields,
            json!({"title": "A", "url": "http://api.example/p/1", "likes": 3})
        );
        assert_eq!(
            page.items[0].item_url.as_deref(),
            Some("http://api.example/p/1")
        );
        assert_eq!(page.items[1].fields["likes"], Value::Null);

        let end = extract_json(
            &json!({"next_token": null}),
            &url,
            &pointer("/data/items"),
            &fields,
            Some(&paging),
        )
        .unwrap();
        assert!(end.items.is_empty() && end.next_token.is_none());
        let wrong = extract_json(
            &json!({"data": {"items": "x"}}),
            &url,
            &pointer("/data/items"),
            &fields,
            None,
        );
        assert!(wrong.unwrap_err().contains("a string"));
    }
}
