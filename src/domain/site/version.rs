//! Versions of a site: every change to how a site is read is kept, with why
//! it was made, and two versions compare field by field.

use serde::Serialize;
use serde_json::Value;

use crate::domain::text_enum::text_enum;

text_enum! {
    /// Why a site's version was made.
    pub enum VersionReason as "version reason" {
        /// The site as it was when versions began to be kept.
        Recorded = "recorded",
        Created = "created",
        Edited = "edited",
        /// An earlier version's spec brought back.
        Restored = "restored",
        /// A repair proposal's selectors applied (accepted, or by the site's
        /// `repair: auto` policy).
        Repaired = "repaired",
        /// An automatic repair undone: the next run was degraded again.
        RolledBack = "rolled_back",
    }
}

/// One place where two versions differ: its path (`fields.price.selector`)
/// and its value on each side (`None`: absent there).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub path: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// Where `after` differs from `before`, in path order: objects are compared
/// key by key, down to the values; anything else (a list, a string) is one
/// value.
pub fn differences(before: &Value, after: &Value) -> Vec<Difference> {
    let mut found = Vec::new();
    walk(String::new(), Some(before), Some(after), &mut found);
    found
}

fn walk(path: String, before: Option<&Value>, after: Option<&Value>, found: &mut Vec<Difference>) {
    match (before, after) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let inner = match path.is_empty() {
                    true => key.clone(),
                    false => format!("{path}.{key}"),
                };
                walk(inner, a.get(key), b.get(key), found);
            }
        }
        // A null and an absent key say the same: nothing set.
        (a, b) if a.filter(|v| !v.is_null()) == b.filter(|v| !v.is_null()) => {}
        (a, b) => found.push(Difference {
            path,
            before: a.filter(|v| !v.is_null()).cloned(),
            after: b.filter(|v| !v.is_null()).cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn equal_specs_differ_nowhere_and_null_is_the_same_as_absent() {
        let spec =
            json!({"name": "shop", "fields": {"title": {"selector": "h2"}}, "wait_for": null});
        assert!(differences(&spec, &spec).is_empty());
        let without = json!({"name": "shop", "fields": {"title": {"selector": "h2"}}});
        assert!(differences(&spec, &without).is_empty());
    }

    #[test]
    fn a_changed_selector_is_one_difference_named_by_its_path() {
        let before = json!({"item_selector": "li.product", "fields": {
            "title": {"selector": "a.title"}, "price": {"selector": "span.price"}}});
        let after = json!({"item_selector": "li.product", "fields": {
            "title": {"selector": "a.title"}, "price": {"selector": "b.cost", "attr": "data-v"}}});
        assert_eq!(
            differences(&before, &after),
            vec![
                Difference {
                    path: "fields.price.attr".into(),
                    before: None,
                    after: Some(json!("data-v")),
                },
                Difference {
                    path: "fields.price.selector".into(),
                    before: Some(json!("span.price")),
                    after: Some(json!("b.cost")),
                },
            ]
        );
    }

    #[test]
    fn a_field_added_or_removed_and_a_list_changed_are_named() {
        let before =
            json!({"fields": {"title": {"selector": "h2"}}, "expect_required_fields": ["title"]});
        let after = json!({"fields": {"sku": {"selector": ".sku"}}, "expect_required_fields": ["title", "sku"]});
        let paths: Vec<String> = differences(&before, &after)
            .into_iter()
            .map(|d| d.path)
            .collect();
        assert_eq!(
            paths,
            ["expect_required_fields", "fields.sku", "fields.title"]
        );
        let removed = &differences(&before, &after)[2];
        assert_eq!(removed.after, None);
        assert_eq!(removed.before, Some(json!({"selector": "h2"})));
    }
}
