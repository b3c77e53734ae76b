//! Replay: a site's extraction (a stored version of it, or an edit not
//! saved yet) run over its saved pages, fetching nothing, and what it would
//! extract compared with what the runs stored. The api asks, a worker
//! answers (the extraction is the worker's), through the preview lane.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::site::SiteInput;

/// Saved pages one replay reads at most (the newest runs' first).
pub const MAX_REPLAY_PAGES: usize = 40;

/// The extraction to replay.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ReplaySource {
    /// A stored version of the site (`site_versions`).
    Version(i32),
    /// A site body as `PUT /api/sites` takes it, checked by the api; its
    /// header values and proxy are left out (a replay fetches nothing).
    Site(Box<SiteInput>),
}

/// A replay as the api hands it to a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplayRequest {
    pub site_id: i64,
    pub source: ReplaySource,
    /// Saved pages read at most.
    pub max_pages: usize,
    /// The api stops waiting then; a worker that takes it later drops it.
    pub deadline: DateTime<Utc>,
}

/// What a worker found replaying.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplayOutcome {
    pub worker_id: String,
    /// Each saved run, newest first.
    pub runs: Vec<ReplayedRun>,
    /// Saved pages read.
    pub pages: usize,
    /// Whether the site has more saved pages than one replay reads.
    pub truncated: bool,
    /// Why nothing was replayed (the version could not be read), if so.
    pub error: Option<String>,
    pub replay_ms: u64,
}

impl ReplayOutcome {
    /// Nothing replayed yet, by `worker_id`.
    pub fn empty(worker_id: String) -> Self {
        ReplayOutcome {
            worker_id,
            runs: Vec::new(),
            pages: 0,
            truncated: false,
            error: None,
            replay_ms: 0,
        }
    }
}

/// One saved run, replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplayedRun {
    pub run_id: i64,
    /// The site version the run crawled with (null: not recorded).
    pub site_version: Option<i32>,
    pub pages: Vec<ReplayedPage>,
}

/// One saved page, replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplayedPage {
    pub page_no: i32,
    pub url: String,
    /// The items the extraction replayed would store from it:
    /// `{fields, item_url}`, typed by the value rules.
    pub items: Vec<Value>,
    /// Why the page could not be read (over its budget, not JSON...): its
    /// items are then empty and no diff is made.
    pub error: Option<String>,
    /// Items replayed that the run did not store.
    pub added: Vec<Value>,
    /// Items the run stored that the replay does not find.
    pub removed: Vec<Value>,
    /// Items found by both with other field values.
    pub changed: Vec<ChangedItem>,
    /// Detail pages of its items read again from what the run saved; an
    /// item whose detail page was not saved keeps the detail values it was
    /// stored with.
    #[serde(default)]
    pub details_read: usize,
}

/// An item both found, with the fields whose values differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ChangedItem {
    /// Its URL, else its place on the page (`#0` is the first).
    pub item: String,
    pub fields: BTreeMap<String, BeforeAfter>,
}

/// A field's value as stored (`before`) and as replayed (`after`); null on
/// the side that lacks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BeforeAfter {
    pub before: Value,
    pub after: Value,
}

/// The three lists of a page's diff.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemsDiff {
    pub added: Vec<Value>,
    pub removed: Vec<Value>,
    pub changed: Vec<ChangedItem>,
}

/// What tells two items of a page apart: the item's URL (its n-th
/// occurrence), else its place on the page.
fn keys(items: &[Value]) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    items
        .iter()
        .enumerate()
        .map(|(at, item)| match item["item_url"].as_str() {
            Some(url) => {
                let n = seen.entry(url.to_owned()).or_default();
                *n += 1;
                match *n {
                    1 => url.to_owned(),
                    n => format!("{url}#{n}"),
                }
            }
            None => format!("#{at}"),
        })
        .collect()
}

/// `stored` (what the run stored from a page) against `replayed` (what the
/// replayed extraction reads on it), both `[{fields, item_url}]`.
pub fn diff(stored: &[Value], replayed: &[Value]) -> ItemsDiff {
    let (stored_keys, replayed_keys) = (keys(stored), keys(replayed));
    let by_key: HashMap<&str, &Value> = replayed_keys
        .iter()
        .map(String::as_str)
        .zip(replayed)
        .collect();
    let mut diff = ItemsDiff::default();
    for (key, before) in stored_keys.iter().zip(stored) {
        let Some(after) = by_key.get(key.as_str()) else {
            diff.removed.push(before.clone());
            continue;
        };
        let fields = field_changes(&before["fields"], &after["fields"]);
        if !fields.is_empty() {
            diff.changed.push(ChangedItem {
                item: key.clone(),
                fields,
            });
        }
    }
    for (key, after) in replayed_keys.iter().zip(replayed) {
        if !stored_keys.contains(key) {
            diff.added.push(after.clone());
        }
    }
    diff
}

fn field_changes(before: &Value, after: &Value) -> BTreeMap<String, BeforeAfter> {
    let empty = serde_json::Map::new();
    let before = before.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    before
        .keys()
        .chain(after.keys())
        .filter(|name| before.get(*name) != after.get(*name))
        .map(|name| {
            let side = |fields: &serde_json::Map<String, Value>| {
                fields.get(name).cloned().unwrap_or(Value::Null)
            };
            (
                name.clone(),
                BeforeAfter {
                    before: side(before),
                    after: side(after),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn item(url: &str, title: &str, price: &str) -> Value {
        json!({"fields": {"title": title, "price": price}, "item_url": url})
    }

    #[test]
    fn the_same_items_make_no_diff() {
        let items = [item("/a", "A", "$1"), item("/b", "B", "$2")];
        assert_eq!(diff(&items, &items), ItemsDiff::default());
    }

    #[test]
    fn items_are_matched_by_url_and_their_fields_compared() {
        let stored = [item("/a", "A", "$1"), item("/b", "B", "$2")];
        let replayed = [item("/b", "B", "2.00"), item("/c", "C", "$3")];
        let diff = diff(&stored, &replayed);
        assert_eq!(diff.removed, [stored[0].clone()]);
        assert_eq!(diff.added, [replayed[1].clone()]);
        assert_eq!(diff.changed.len(), 1);
        assert_eq!(diff.changed[0].item, "/b");
        assert_eq!(
            diff.changed[0].fields["price"],
            BeforeAfter {
                before: json!("$2"),
                after: json!("2.00")
            }
        );
        assert_eq!(diff.changed[0].fields.len(), 1);
    }

    #[test]
    fn items_without_a_url_are_matched_by_place() {
        let stored = [json!({"fields": {"title": "A", "spec": "x"}, "item_url": null})];
        let replayed = [json!({"fields": {"title": "A2", "spec": "x"}, "item_url": null})];
        let diff = diff(&stored, &replayed);
        assert_eq!(diff.changed[0].item, "#0");
        assert_eq!(diff.changed[0].fields.keys().collect::<Vec<_>>(), ["title"]);
    }
}
