//! "Test this site": what the api asks a worker (a site as a client sent it,
//! a keyword, one or two pages) and what the worker answers (the items of
//! each page, which fields came out empty, where the pages ended, what
//! stopped it). Nothing of it is stored; it travels through the fleet's queue.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::site::SiteInput;

/// Pages a preview reads at most.
pub const MAX_PREVIEW_PAGES: u8 = 2;

/// A preview as the api hands it to a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreviewRequest {
    /// The site as the client sent it, its masked secrets restored: the worker
    /// parses it with the rules the api already checked it against.
    pub site: SiteInput,
    /// The stored site previewed, if any: its fleet-wide pace is the one used.
    pub site_id: Option<i64>,
    pub keyword: String,
    /// 1 or 2.
    pub pages: u8,
    /// The api stops waiting then; a worker that takes the request later drops it.
    pub deadline: DateTime<Utc>,
}

/// What a worker found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewOutcome {
    pub worker_id: String,
    /// Where the last page fetched ended (after redirects).
    pub final_url: Option<String>,
    pub pages: Vec<PreviewPage>,
    pub items: Vec<PreviewItem>,
    /// Every field of the site: how many items had it empty or missing.
    pub empty_fields: BTreeMap<String, usize>,
    /// The last page as the browser showed it (browser mode): a PNG, in
    /// base64 as the api's answer carries it (encoded once, on the worker).
    pub screenshot_png: Option<String>,
    /// What stopped the preview before its last page, if anything.
    pub refusal: Option<PreviewRefusal>,
    /// How long the crawl took on the worker, from taking the request.
    pub crawl_ms: u64,
    /// The detail pages of the first items (at most
    /// `site::PREVIEW_DETAIL_PAGES`), when the site has them; their values
    /// are merged into those items' fields too.
    #[serde(default)]
    pub details: Vec<PreviewDetail>,
}

/// One detail page a preview read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewDetail {
    pub url: String,
    /// The item it is the detail page of (its index in `items`).
    pub item: usize,
    /// Its fields, typed by their value rules.
    pub fields: serde_json::Value,
    /// Its fields as the page held them (a detail field with rules only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<serde_json::Value>,
    /// Each field whose value did not parse, and why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, String>,
    pub took_ms: u64,
}

/// One page a preview fetched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewPage {
    pub page: u8,
    /// The URL asked for.
    pub url: String,
    /// Where it ended (after redirects).
    pub final_url: Option<String>,
    pub items: usize,
    pub took_ms: u64,
    /// What the page publishes as structured data (browser and http modes;
    /// none from a worker of a release before it was listed).
    #[serde(default)]
    pub structured: Option<StructuredFound>,
}

/// A page's structured data as a person setting a site up reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StructuredFound {
    /// How many items each type would give as the site's `structured_items`.
    pub types: BTreeMap<String, usize>,
    /// The page's top-level structured items (a bounded number, each cut).
    pub items: Vec<StructuredItem>,
    /// JSON-LD scripts on the page that could not be read.
    pub skipped_scripts: usize,
}

/// One item of a page's structured data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StructuredItem {
    /// `json-ld`, `microdata` or `opengraph`.
    pub source: String,
    /// Its types by name (`Product`); OpenGraph's is its `og:type`.
    pub types: Vec<String>,
    /// Its properties as JSON, as a field's path reads them.
    pub properties: serde_json::Value,
}

/// One extracted item, with the page it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewItem {
    /// Its fields as a crawl stores them: typed by their value rules.
    pub fields: serde_json::Value,
    pub item_url: Option<String>,
    pub page: u8,
    /// Its fields as the page held them, before the value rules (a site
    /// with rules only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<serde_json::Value>,
    /// Each field whose value did not parse, and why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, String>,
    /// The required field without a value that makes a crawl leave the item out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out_by: Option<String>,
}

/// Why a preview stopped early: the site refused it (`blocked`: 429, 503 or
/// its blocked selector; not tried again, unlike a crawl), or the page failed
/// as an attempt would (`kind` is that failure kind: `target_refused`,
/// `stuck`, `http_status`, `no_items`...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewRefusal {
    pub kind: String,
    pub message: String,
}

impl PreviewOutcome {
    /// How many items a crawl keeps left each of `fields` empty (missing,
    /// null, or blank text).
    pub fn count_empty<'a>(
        fields: impl IntoIterator<Item = &'a String>,
        items: &[PreviewItem],
    ) -> BTreeMap<String, usize> {
        fields
            .into_iter()
            .map(|name| {
                let empty = items
                    .iter()
                    .filter(|item| item.left_out_by.is_none())
                    .filter(|item| match item.fields.get(name) {
                        None | Some(serde_json::Value::Null) => true,
                        Some(serde_json::Value::String(text)) => text.trim().is_empty(),
                        Some(_) => false,
                    })
                    .count();
                (name.clone(), empty)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_is_empty_when_missing_null_or_blank() {
        let item = |fields| PreviewItem {
            fields,
            item_url: None,
            page: 1,
            raw: None,
            errors: BTreeMap::new(),
            left_out_by: None,
        };
        let left_out = PreviewItem {
            left_out_by: Some("price".into()),
            ..item(json!({"title": "", "price": null}))
        };
        let items = [
            item(json!({"title": "Lamp", "price": ""})),
            item(json!({"title": " ", "price": null})),
            item(json!({"title": "Desk", "price": 3})),
            left_out,
        ];
        let names = ["title".to_owned(), "price".to_owned(), "sku".to_owned()];
        let empty = PreviewOutcome::count_empty(&names, &items);
        assert_eq!(empty["title"], 1);
        assert_eq!(empty["price"], 2);
        assert_eq!(empty["sku"], 3);
    }
}
