//! Reads a site's items out of a loaded page in one script call (2-3x faster
//! than one WebDriver round trip per element, BROWSER-NOTES.md).

use std::collections::BTreeMap;

use anyhow::Context;
use fantoccini::Client;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::{domain::site::FieldSpec, store::runs::PageItem};

/// Returns one object per item: field name -> text (whitespace collapsed) or
/// attribute value, with `href`/`src` made absolute; `null` when missing.
const EXTRACT_JS: &str = r#"
const [itemSelector, fields] = arguments;
const absolute = (value) => { try { return new URL(value, document.baseURI).href; } catch (e) { return value; } };
return Array.from(document.querySelectorAll(itemSelector)).map((item) => {
  const out = {};
  for (const [name, selector, attr] of fields) {
    const el = selector ? item.querySelector(selector) : item;
    let value = null;
    if (el) {
      value = attr ? el.getAttribute(attr) : el.textContent;
      if (value !== null) {
        value = attr ? value.trim() : value.replace(/\s+/g, ' ').trim();
        if (attr && ['href', 'src'].includes(attr.toLowerCase())) value = absolute(value);
      }
    }
    out[name] = value;
  }
  return out;
});
"#;

/// The HTTP status the page's document was served with, when the browser
/// knows it (Navigation Timing `responseStatus`).
pub async fn response_status(client: &Client) -> anyhow::Result<Option<u16>> {
    let status = client
        .execute(
            "const nav = performance.getEntriesByType('navigation')[0]; return nav ? nav.responseStatus : null;",
            vec![],
        )
        .await
        .context("reading the response status")?;
    Ok(status.as_u64().filter(|s| *s > 0).map(|s| s as u16))
}

/// Extracts the items of the page the session shows.
pub async fn extract_items(
    client: &Client,
    item_selector: &str,
    fields: &BTreeMap<String, FieldSpec>,
) -> anyhow::Result<Vec<PageItem>> {
    let field_args: Vec<Value> = fields
        .iter()
        .map(|(name, spec)| json!([name, spec.selector.as_ref().map(|s| s.as_str()), spec.attr]))
        .collect();
    let raw = client
        .execute(
            EXTRACT_JS,
            vec![json!(item_selector), Value::Array(field_args)],
        )
        .await
        .context("running the extraction script")?;
    let Value::Array(objects) = raw else {
        anyhow::bail!("extraction script returned {raw}, not a list");
    };
    objects
        .into_iter()
        .map(|object| match object {
            Value::Object(map) => Ok(page_item(map, fields)),
            other => Err(anyhow::anyhow!("extraction script returned item {other}")),
        })
        .collect()
}

/// The item's URL is its first `href` field (fields in name order).
fn page_item(fields: Map<String, Value>, specs: &BTreeMap<String, FieldSpec>) -> PageItem {
    let item_url = specs
        .iter()
        .filter(|(_, spec)| {
            spec.attr
                .as_deref()
                .is_some_and(|a| a.eq_ignore_ascii_case("href"))
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::site::CssSelector;

    #[test]
    fn the_item_url_is_the_first_href_field() {
        let mut specs = BTreeMap::new();
        specs.insert(
            "title".into(),
            FieldSpec {
                selector: None,
                attr: None,
            },
        );
        specs.insert(
            "link".into(),
            FieldSpec {
                selector: Some(CssSelector::parse("a", "x").unwrap()),
                attr: Some("href".into()),
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
}
