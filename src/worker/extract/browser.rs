//! Reads a site's items out of the page Chrome shows, in one script call
//! (2-3x faster than one WebDriver round trip per element, BROWSER-NOTES.md).
//! The rules match [`super::html`]: the same page gives the same items.

use std::collections::BTreeMap;

use anyhow::Context;
use fantoccini::Client;
use serde_json::{Value, json};

use super::page_item;
use crate::domain::{page::PageItem, site::FieldSpec};

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
