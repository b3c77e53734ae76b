//! A page's structured data: its JSON-LD, its microdata (in JSON-LD's
//! shape) and its OpenGraph, read from the parsed page in http mode and
//! from the HTML Chrome serialized in browser mode, so both modes read
//! the same values. A site's items can be the page's structured items of
//! one type, and a field can read a path in its item or in the page's
//! first item of a type (see `domain::site::StructuredPath`). No crate
//! does this within a budget (docs/structured-data.md says which were
//! looked at), so it is ours: serde_json for JSON-LD, scraper for the rest.

mod json_ld;
mod listing;
mod microdata;
mod open_graph;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value};
use url::Url;

pub use listing::StructuredListing;

use super::{
    HtmlPage, absolute, budget::ExtractBudget, collapse_whitespace, js_trim, json::copied,
};
use crate::domain::site::{
    FieldSpec, PathStart, SchemaType, Step, StructuredPath, short_type_name,
};

/// What one page publishes as structured data.
pub struct StructuredData {
    /// Each JSON-LD script's values, in page order.
    json_ld: Vec<Value>,
    /// Each top-level microdata item, in page order.
    microdata: Vec<Value>,
    /// OpenGraph properties by name.
    open_graph: Map<String, Value>,
    /// JSON-LD scripts that could not be read.
    skipped_scripts: usize,
    /// What relative URLs resolve against.
    base: Url,
}

impl StructuredData {
    /// Reads a parsed page's structured data within `budget`.
    pub fn read(page: &HtmlPage, budget: &ExtractBudget) -> Self {
        let (json_ld, skipped_scripts) = json_ld::read(page.document(), budget);
        StructuredData {
            json_ld,
            microdata: microdata::read(page.document(), page.base(), budget),
            open_graph: open_graph::read(page.document(), budget),
            skipped_scripts,
            base: page.base().clone(),
        }
    }
}

/// The page's structured data ready to be looked into: its JSON-LD nodes
/// by `@id`, so that a reference (`"offers": {"@id": "#offer"}`) reads the
/// node it names, as JSON-LD's `@graph` pages write them.
pub struct Lookup<'a> {
    data: &'a StructuredData,
    ids: HashMap<&'a str, &'a Value>,
}

impl<'a> Lookup<'a> {
    pub fn new(data: &'a StructuredData, budget: &ExtractBudget) -> Self {
        let mut ids = HashMap::new();
        for value in &data.json_ld {
            index_ids(value, &mut ids, budget);
        }
        Lookup { data, ids }
    }

    /// The page's items of type `name`, outermost ones (a product's related
    /// products are part of it), each node once (by `@id`): JSON-LD's when
    /// the page has any there, else microdata's, so a page describing its
    /// products both ways gives each once. At most `max`.
    pub fn items_of_type(&self, name: &str, max: usize, budget: &ExtractBudget) -> Vec<&'a Value> {
        let mut found = Vec::new();
        for source in [&self.data.json_ld, &self.data.microdata] {
            let mut seen = HashSet::new();
            for value in source {
                outermost_of_type(value, name, max, &mut found, &mut seen, budget);
            }
            if !found.is_empty() {
                break;
            }
        }
        found
    }

    /// The site's structured items on this page (at most `max`), each
    /// with its structured fields read.
    pub fn items(
        &self,
        item_type: &SchemaType,
        fields: &BTreeMap<String, FieldSpec>,
        max: usize,
        budget: &ExtractBudget,
    ) -> Vec<Map<String, Value>> {
        self.items_of_type(item_type.as_str(), max, budget)
            .into_iter()
            .map(|item| self.fields(Some(item), fields, budget))
            .collect()
    }

    /// The structured fields among `fields`, read in `item` (none: the
    /// site's items are found by a selector, and paths start at a type).
    pub fn fields(
        &self,
        item: Option<&'a Value>,
        fields: &BTreeMap<String, FieldSpec>,
        budget: &ExtractBudget,
    ) -> Map<String, Value> {
        fields
            .iter()
            .filter_map(|(name, spec)| {
                let path = spec.structured.as_ref()?;
                Some((name.clone(), self.value(item, path, spec.link, budget)))
            })
            .collect()
    }

    /// The first alternative of `path` that finds a value (not null, not
    /// blank), as stored: text with its whitespace collapsed, numbers and
    /// booleans as they are, a list or an object as JSON; a `link` is the
    /// first URL found there, made absolute.
    pub fn value(
        &self,
        item: Option<&'a Value>,
        path: &StructuredPath,
        link: bool,
        budget: &ExtractBudget,
    ) -> Value {
        for alternative in path.alternatives(item.is_some()) {
            let start = match alternative.start {
                PathStart::Item => item,
                PathStart::FirstOfType(name) => self.items_of_type(name, 1, budget).pop(),
                PathStart::OpenGraph(name) => self.data.open_graph.get(name),
            };
            let found = start.and_then(|start| self.follow(start, &alternative.steps, budget));
            let value = found.map_or(Value::Null, |found| self.stored(found, link, budget));
            if !is_blank(&value) {
                return value;
            }
        }
        Value::Null
    }

    /// The value `steps` lead to from `value`. A list is looked through
    /// (`offers.price` is the first offer's price that has one), an object
    /// is a list of one (`offers.0` is the offer when there is just one),
    /// and a reference reads the node it names.
    fn follow(
        &self,
        value: &'a Value,
        steps: &[Step<'_>],
        budget: &ExtractBudget,
    ) -> Option<&'a Value> {
        if !budget.step() {
            return None;
        }
        let value = self.resolved(value);
        let Some((step, rest)) = steps.split_first() else {
            let value = value.get("@value").unwrap_or(value);
            return (!value.is_null()).then_some(value);
        };
        match (step, value) {
            (Step::Key(_), Value::Array(list)) => list
                .iter()
                .find_map(|each| self.follow(each, steps, budget)),
            (Step::Key(key), Value::Object(map)) => map
                .get(*key)
                .and_then(|next| self.follow(next, rest, budget)),
            (Step::Index(at), Value::Array(list)) => list
                .get(*at)
                .and_then(|next| self.follow(next, rest, budget)),
            (Step::Index(0), Value::Object(_)) => self.follow(value, rest, budget),
            _ => None,
        }
    }

    /// The node a reference (an object of only `@id`) names, if the page has it.
    fn resolved(&self, value: &'a Value) -> &'a Value {
        match value.as_object() {
            Some(map) if map.len() == 1 => map
                .get("@id")
                .and_then(Value::as_str)
                .and_then(|id| self.ids.get(id).copied())
                .unwrap_or(value),
            _ => value,
        }
    }

    fn stored(&self, value: &'a Value, link: bool, budget: &ExtractBudget) -> Value {
        if link {
            return self.first_url(value, 0).map_or(Value::Null, |url| {
                Value::String(absolute(url, &self.data.base))
            });
        }
        match value {
            Value::String(text) => {
                budget.charge_bytes(text.len());
                Value::String(collapse_whitespace(text))
            }
            other => copied(other, budget),
        }
    }

    /// A URL where a link field points: the text, a list's first, an
    /// object's `url` (else its `@id`: an ImageObject, a reference).
    fn first_url(&self, value: &'a Value, depth: usize) -> Option<&'a str> {
        if depth > 4 {
            return None;
        }
        match self.resolved(value) {
            Value::String(url) => Some(js_trim(url)).filter(|url| !url.is_empty()),
            Value::Array(list) => list
                .first()
                .and_then(|first| self.first_url(first, depth + 1)),
            Value::Object(map) => map
                .get("url")
                .or_else(|| map.get("@id"))
                .and_then(|url| self.first_url(url, depth + 1)),
            _ => None,
        }
    }
}

fn is_blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.trim().is_empty(),
        _ => false,
    }
}

/// The types a node declares (`@type`: a name or a list of them).
fn declared_types(node: &Map<String, Value>) -> impl Iterator<Item = &str> {
    let types = node.get("@type");
    let one = types.and_then(Value::as_str);
    let many = types
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    one.into_iter().chain(many)
}

fn is_of_type(node: &Map<String, Value>, name: &str) -> bool {
    declared_types(node).any(|declared| short_type_name(declared).eq_ignore_ascii_case(name))
}

fn outermost_of_type<'a>(
    value: &'a Value,
    name: &str,
    max: usize,
    found: &mut Vec<&'a Value>,
    seen: &mut HashSet<&'a str>,
    budget: &ExtractBudget,
) {
    if found.len() >= max || !budget.step() {
        return;
    }
    match value {
        Value::Object(node) if is_of_type(node, name) => {
            let id = node.get("@id").and_then(Value::as_str);
            if id.is_none_or(|id| seen.insert(id)) {
                found.push(value);
            }
        }
        Value::Object(node) => {
            for each in node.values() {
                outermost_of_type(each, name, max, found, seen, budget);
            }
        }
        Value::Array(list) => {
            for each in list {
                outermost_of_type(each, name, max, found, seen, budget);
            }
        }
        _ => {}
    }
}

/// Every node with an `@id` and more than it, by its `@id` (the first of two).
fn index_ids<'a>(value: &'a Value, ids: &mut HashMap<&'a str, &'a Value>, budget: &ExtractBudget) {
    if !budget.step() {
        return;
    }
    match value {
        Value::Object(node) => {
            if node.len() > 1
                && let Some(id) = node.get("@id").and_then(Value::as_str)
            {
                ids.entry(id).or_insert(value);
            }
            for each in node.values() {
                index_ids(each, ids, budget);
            }
        }
        Value::Array(list) => {
            for each in list {
                index_ids(each, ids, budget);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
