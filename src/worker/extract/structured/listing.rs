//! What a page publishes as structured data, for a person setting a site up
//! (the preview): its top-level items with their properties, and how many
//! items of each type `structured_items` would find there. A hostile page
//! can publish any amount: the listing keeps [`MAX_LISTED`] items, each cut
//! to [`MAX_VALUES_PER_ITEM`] values and [`MAX_TEXT_CHARS`] characters a text.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Lookup, StructuredData, declared_types, short_type_name};
use crate::{domain::bounds::cut_to_chars, worker::extract::budget::ExtractBudget};

/// Items listed from one page at most.
pub const MAX_LISTED: usize = 50;
/// Values (texts, numbers, lists, objects) shown of one item at most.
pub const MAX_VALUES_PER_ITEM: usize = 500;
/// Characters shown of one text at most.
pub const MAX_TEXT_CHARS: usize = 300;
/// Deepest nesting shown.
const MAX_DEPTH: usize = 12;
/// Types counted at most (each count walks the page's data once).
const MAX_TYPES: usize = 50;
/// Items of one type counted at most.
const MAX_COUNTED: usize = 10_000;

/// One top-level item a page publishes.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundItem {
    /// `json-ld`, `microdata` or `opengraph`.
    pub source: &'static str,
    /// Its types as short names (`Product`); OpenGraph's is its `og:type`.
    pub types: Vec<String>,
    /// Its properties, cut to the listing's bounds.
    pub properties: Value,
}

/// A page's structured data as the preview shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StructuredListing {
    /// Its top-level items in page order: JSON-LD, then microdata, then OpenGraph.
    pub items: Vec<FoundItem>,
    /// Items each type would give as `structured_items` (nested ones too,
    /// such as the products of an ItemList).
    pub types: BTreeMap<String, usize>,
    /// JSON-LD scripts that could not be read.
    pub skipped_scripts: usize,
}

impl StructuredData {
    /// The page's structured data for a person to read.
    pub fn listing(&self, budget: &ExtractBudget) -> StructuredListing {
        let mut items = Vec::new();
        let top_level = self.json_ld.iter().flat_map(top_level_nodes);
        for node in top_level.take(MAX_LISTED) {
            items.push(found("json-ld", node));
        }
        for item in self.microdata.iter().take(MAX_LISTED - items.len()) {
            items.push(found("microdata", item));
        }
        if !self.open_graph.is_empty() && items.len() < MAX_LISTED {
            let og_type = self.open_graph.get("og:type").and_then(Value::as_str);
            items.push(FoundItem {
                source: "opengraph",
                types: og_type.map(str::to_owned).into_iter().collect(),
                properties: sampled(&Value::Object(self.open_graph.clone())),
            });
        }
        let mut names = BTreeMap::new();
        for node in self.json_ld.iter().chain(&self.microdata) {
            type_names(node, &mut names, budget);
        }
        let lookup = Lookup::new(self, budget);
        let types = names
            .into_values()
            .map(|name| {
                let count = lookup.items_of_type(&name, MAX_COUNTED, budget).len();
                (name, count)
            })
            .collect();
        StructuredListing {
            items,
            types,
            skipped_scripts: self.skipped_scripts,
        }
    }
}

/// A script's top-level items: the value, each of a list, each of a `@graph`.
fn top_level_nodes(value: &Value) -> Box<dyn Iterator<Item = &Value> + '_> {
    match value {
        Value::Array(list) => Box::new(list.iter().flat_map(top_level_nodes)),
        Value::Object(node) => match node.get("@graph") {
            Some(Value::Array(graph)) => Box::new(graph.iter()),
            Some(graph @ Value::Object(_)) => Box::new(std::iter::once(graph)),
            _ => Box::new(std::iter::once(value)),
        },
        _ => Box::new(std::iter::empty()),
    }
}

fn found(source: &'static str, node: &Value) -> FoundItem {
    let types = node
        .as_object()
        .map(|node| {
            declared_types(node)
                .map(|t| short_type_name(t).to_owned())
                .collect()
        })
        .unwrap_or_default();
    FoundItem {
        source,
        types,
        properties: sampled(node),
    }
}

/// The types declared anywhere in `value` (the first [`MAX_TYPES`] met),
/// by their name's lowercase (the first spelling met is shown).
fn type_names(value: &Value, names: &mut BTreeMap<String, String>, budget: &ExtractBudget) {
    if !budget.step() {
        return;
    }
    match value {
        Value::Object(node) => {
            for declared in declared_types(node) {
                let name = short_type_name(declared);
                if !name.is_empty() && names.len() < MAX_TYPES {
                    names
                        .entry(name.to_ascii_lowercase())
                        .or_insert_with(|| name.to_owned());
                }
            }
            node.values()
                .for_each(|each| type_names(each, names, budget));
        }
        Value::Array(list) => list.iter().for_each(|each| type_names(each, names, budget)),
        _ => {}
    }
}

/// `value` within the listing's bounds: long texts cut (with `…`), and
/// past the values an item may show or the depth, `"…"`.
fn sampled(value: &Value) -> Value {
    let mut left = MAX_VALUES_PER_ITEM;
    sample(value, &mut left, 0)
}

fn sample(value: &Value, left: &mut usize, depth: usize) -> Value {
    if *left == 0 || depth > MAX_DEPTH {
        return Value::String("…".into());
    }
    *left -= 1;
    match value {
        Value::String(text) => match cut_to_chars(text, MAX_TEXT_CHARS) {
            Some(cut) => Value::String(format!("{cut}…")),
            None => value.clone(),
        },
        Value::Array(list) => {
            let mut out = Vec::new();
            for each in list {
                if *left == 0 {
                    out.push(Value::String("…".into()));
                    break;
                }
                out.push(sample(each, left, depth + 1));
            }
            Value::Array(out)
        }
        Value::Object(node) => {
            let mut out = Map::new();
            for (key, each) in node {
                if *left == 0 {
                    out.insert("…".into(), Value::String("…".into()));
                    break;
                }
                let key = cut_to_chars(key, MAX_TEXT_CHARS).unwrap_or(key);
                out.insert(key.to_owned(), sample(each, left, depth + 1));
            }
            Value::Object(out)
        }
        _ => value.clone(),
    }
}
