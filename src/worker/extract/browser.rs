//! Reads a page Chrome shows in one script call: the wait for the site's
//! element (a MutationObserver, not polling), whether it is the site's
//! blocked page, where the page is, and its items. One round trip instead of
//! one per element (BROWSER-NOTES.md) or one per step. The item rules match
//! [`super::html`]: the same page gives the same items.

use std::{collections::BTreeMap, time::Duration};

use anyhow::Context;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::page_item;
use crate::{
    domain::{page::PageItem, site::FieldSpec},
    worker::browser::BrowserSession,
};

/// A function of the awaited selector (or null), the blocked selector (or
/// null), how long to wait (ms), the item selector and the fields as [name,
/// selector, attr]; it resolves to {url, appeared, blocked, items}. Items
/// are objects of field name -> text (whitespace collapsed) or attribute
/// value, `href`/`src` made absolute, `null` when missing.
const READ_PAGE_JS: &str = r#"
(awaited, blocked, waitMs, itemSelector, fields) => new Promise((done) => {
const absolute = (value) => { try { return new URL(value, document.baseURI).href; } catch (e) { return value; } };
const extract = () => Array.from(document.querySelectorAll(itemSelector)).map((item) => {
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
const answer = (appeared) => {
  const isBlocked = blocked !== null && document.querySelector(blocked) !== null;
  done({url: document.URL, appeared, blocked: isBlocked, items: isBlocked ? [] : extract()});
};
if (awaited === null || document.querySelector(awaited) !== null) {
  answer(true);
} else {
  const observer = new MutationObserver(() => {
    if (document.querySelector(awaited) !== null) { observer.disconnect(); clearTimeout(timer); answer(true); }
  });
  const timer = setTimeout(() => { observer.disconnect(); answer(false); }, waitMs);
  observer.observe(document, {childList: true, subtree: true, attributes: true});
}
})
"#;

/// How a page is to be read: what to wait for (the site's `wait_for` and
/// blocked page alike end the wait), for how long, and its items.
pub struct PageReader<'a> {
    pub awaited: Option<String>,
    pub blocked: Option<&'a str>,
    pub wait_limit: Duration,
    pub item_selector: &'a str,
    pub fields: &'a BTreeMap<String, FieldSpec>,
}

/// What the page showed.
#[derive(Debug)]
pub struct PageReading {
    /// Where the browser is (after redirects).
    pub url: Option<String>,
    /// Whether the awaited element appeared (true when nothing was awaited).
    pub appeared: bool,
    /// Whether the site's blocked page is shown.
    pub blocked: bool,
    /// Empty when blocked.
    pub items: Vec<PageItem>,
}

#[derive(Deserialize)]
struct Answer {
    url: Option<String>,
    #[serde(default)]
    appeared: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    items: Vec<Map<String, Value>>,
}

impl PageReader<'_> {
    /// Reads the page the session shows, in one script call.
    pub async fn read(&self, session: &BrowserSession) -> anyhow::Result<PageReading> {
        let field_args: Vec<Value> = self
            .fields
            .iter()
            .map(|(name, spec)| {
                json!([name, spec.selector.as_ref().map(|s| s.as_str()), spec.attr])
            })
            .collect();
        let args = json!([
            self.awaited,
            self.blocked,
            self.wait_limit.as_millis() as u64,
            self.item_selector,
            field_args,
        ]);
        let expression = format!("({READ_PAGE_JS})(...{args})");
        let raw = session
            .evaluate(&expression)
            .await
            .context("running the page script")?;
        let answer: Answer = serde_json::from_value(raw).context("the page script's answer")?;
        Ok(PageReading {
            url: answer.url,
            appeared: answer.appeared,
            blocked: answer.blocked,
            items: answer
                .items
                .into_iter()
                .map(|fields| page_item(fields, self.fields))
                .collect(),
        })
    }
}
