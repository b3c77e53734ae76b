//! Reads a page Chrome shows in one script call: the wait for the site's
//! element (a MutationObserver, not polling), whether it is the site's
//! blocked page, where the page is, and its items. One round trip instead of
//! one per element (docs/dependencies.md) or one per step. The item rules match
//! [`super::html`]: the same page gives the same items.

use std::{collections::BTreeMap, time::Duration};

use anyhow::Context;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{
    domain::{
        bounds::CrawlBounds,
        site::FieldSpec,
        value::{MAX_LIST_VALUES, Whitespace},
    },
    worker::browser::BrowserSession,
};

/// A function of the awaited selector (or null), the blocked selector (or
/// null), how long to wait (ms), the item selector (null: none, the items
/// are structured data), the fields as [name, selector, attr, link, all,
/// keep whitespace], the bounds: items to read, characters of a value, bytes
/// of the page, whether to send the page's HTML, and values of a list; the
/// items already read from this document (skipped: in-place paging), and
/// the next link's selector (or null). It resolves to {url, base, appeared,
/// blocked, page_bytes, items, shown, next, html}: `shown` counts the items
/// the document shows, `next` is the next link's href made absolute. Items
/// are objects of field name -> text (whitespace collapsed, or only trimmed)
/// or attribute value, a link made absolute, `null` when missing; a list of
/// them for a field that reads all; `html` is the page's serialized DOM, for
/// its structured data to be read in Rust as over HTTP (within the page's
/// bound).
///
/// It runs in an isolated world (see `BrowserSession::evaluate_isolated`):
/// `URL`, `Array`, `document.querySelectorAll`, `getAttribute`, the
/// `textContent` getter are this world's own, whatever the page's scripts
/// did to theirs. Within the bounds it reads one item more than a page may
/// keep (so the worker knows the page had more), and each value up to what
/// can hold one character more than a field may keep (two UTF-16 units a
/// character, a pair never split), so the worker cuts text exactly as it
/// cuts a page read over HTTP. A page whose HTML is over its bound is not
/// read: only its size comes back.
const READ_PAGE_JS: &str = r#"
(awaited, blocked, waitMs, itemSelector, fields, maxItems, maxChars, maxBytes, wantHtml, maxValues, skip, nextSelector) => new Promise((done) => {
const absolute = (value) => { try { return new URL(value, document.baseURI).href; } catch (e) { return value; } };
const keepUnits = 2 * maxChars + 2;
const cut = (value) => {
  if (value.length <= keepUnits) return value;
  const kept = value.slice(0, keepUnits);
  const last = kept.charCodeAt(kept.length - 1);
  return last >= 0xD800 && last <= 0xDBFF ? kept.slice(0, -1) : kept;
};
const pageBytes = (html) =>
  // A UTF-16 unit is at most 3 bytes of UTF-8: only a page that may be over is encoded.
  html.length * 3 <= maxBytes ? html.length : new TextEncoder().encode(html).length;
const extract = () => {
  if (itemSelector === null) return [[], 0];
  const found = document.querySelectorAll(itemSelector);
  const items = [];
  for (let at = skip; at < found.length && at <= skip + maxItems; at++) {
    const item = found[at];
    const out = {};
    for (const [name, selector, attr, link, all, keep] of fields) {
      const read = (el) => {
        let value = attr ? el.getAttribute(attr) : el.textContent;
        if (value === null) return null;
        value = cut(attr || keep ? value.trim() : value.replace(/\s+/g, ' ').trim());
        return link ? absolute(value) : value;
      };
      if (all) {
        const found = selector ? item.querySelectorAll(selector) : [item];
        const list = [];
        for (let at = 0; at < found.length && at <= maxValues; at++) {
          const value = read(found[at]);
          if (value !== null) list.push(value);
        }
        out[name] = list;
      } else {
        const el = selector ? item.querySelector(selector) : item;
        out[name] = el ? read(el) : null;
      }
    }
    items.push(out);
  }
  return [items, found.length];
};
const nextLink = () => {
  if (nextSelector === null) return null;
  const link = document.querySelector(nextSelector);
  const href = link === null ? null : link.getAttribute('href');
  return href === null ? null : absolute(href.trim());
};
const answer = (appeared) => {
  const root = document.documentElement;
  const html = root ? root.outerHTML : '';
  const bytes = pageBytes(html);
  if (bytes > maxBytes) {
    done({url: document.URL, base: document.baseURI, appeared, blocked: false, page_bytes: bytes, items: [], shown: 0, next: null, html: null});
    return;
  }
  const isBlocked = blocked !== null && document.querySelector(blocked) !== null;
  const [items, shown] = isBlocked ? [[], 0] : extract();
  done({
    url: document.URL, base: document.baseURI, appeared, blocked: isBlocked, page_bytes: bytes,
    items, shown, next: isBlocked ? null : nextLink(),
    html: wantHtml && !isBlocked ? html : null,
  });
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
    /// None: the site's items are structured data, read from `html`.
    pub item_selector: Option<&'a str>,
    pub fields: &'a BTreeMap<String, FieldSpec>,
    /// Send the page's HTML (for its structured data).
    pub want_html: bool,
    /// What one page may hold (the worker cuts to it; the script only
    /// keeps the browser from sending much more).
    pub bounds: CrawlBounds,
    /// Items of this document read already, skipped (in-place paging).
    pub skip: usize,
    /// The next link's selector (`next_link` paging).
    pub next_link: Option<&'a str>,
}

/// What the page showed.
#[derive(Debug)]
pub struct PageReading {
    /// Where the browser is (after redirects).
    pub url: Option<String>,
    /// The document's base URL, which its links resolve against.
    pub base: Option<url::Url>,
    /// Whether the awaited element appeared (true when nothing was awaited).
    pub appeared: bool,
    /// Whether the site's blocked page is shown.
    pub blocked: bool,
    /// The page's HTML, in bytes when it is near or over its bound (else
    /// in UTF-16 units, a lower bound).
    pub page_bytes: u64,
    /// The markup fields of each item the item selector found (past the
    /// skipped ones); empty when blocked, or when the page is over its size bound.
    pub items: Vec<Map<String, Value>>,
    /// Items the document shows, the skipped ones included.
    pub shown: usize,
    /// Where the page's next link goes, made absolute (not checked yet).
    pub next: Option<String>,
    /// The page's HTML as the browser holds it, when asked for and within
    /// the page's bound.
    pub html: Option<String>,
}

impl PageReading {
    /// Whether the page is larger than it may be (it was not read).
    pub fn oversized(&self, bounds: &CrawlBounds) -> bool {
        self.page_bytes > bounds.page_bytes as u64
    }
}

#[derive(Deserialize)]
struct Answer {
    url: Option<String>,
    #[serde(default)]
    base: Option<String>,
    #[serde(default)]
    appeared: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    page_bytes: u64,
    #[serde(default)]
    items: Vec<Map<String, Value>>,
    #[serde(default)]
    shown: usize,
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    html: Option<String>,
}

impl PageReader<'_> {
    /// Reads the page the session shows, in one script call, in an
    /// isolated world.
    pub async fn read(&self, session: &BrowserSession) -> anyhow::Result<PageReading> {
        // Structured fields are read from the HTML, in Rust.
        let field_args: Vec<Value> = self
            .fields
            .iter()
            .filter(|(_, spec)| spec.structured.is_none())
            .map(|(name, spec)| {
                // A pattern picks a link out of the text before it is made absolute.
                let link = spec.is_link() && spec.rules.regex.is_none();
                let keep = spec.rules.whitespace == Some(Whitespace::Keep);
                json!([
                    name,
                    spec.selector.as_ref().map(|s| s.as_str()),
                    spec.attr,
                    link,
                    spec.rules.all,
                    keep
                ])
            })
            .collect();
        let args = json!([
            self.awaited,
            self.blocked,
            self.wait_limit.as_millis() as u64,
            self.item_selector,
            field_args,
            self.bounds.page_items,
            self.bounds.field_chars,
            self.bounds.page_bytes,
            self.want_html,
            MAX_LIST_VALUES,
            self.skip,
            self.next_link,
        ]);
        let expression = format!("({READ_PAGE_JS})(...{args})");
        let raw = session
            .evaluate_isolated(&expression)
            .await
            .context("running the page script")?;
        let answer: Answer = serde_json::from_value(raw).context("the page script's answer")?;
        Ok(PageReading {
            url: answer.url,
            base: answer.base.and_then(|base| url::Url::parse(&base).ok()),
            appeared: answer.appeared,
            blocked: answer.blocked,
            page_bytes: answer.page_bytes,
            items: answer.items,
            shown: answer.shown,
            next: answer.next,
            html: answer.html,
        })
    }
}
