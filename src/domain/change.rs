//! What an item was to a run: new, changed (with the old and new value of
//! each field that changed), unchanged, or removed (stored before, gone from
//! a run that read every page); and what a run's completion tells of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{FieldError, text_enum::text_enum};

text_enum! {
    /// What an item was to a run.
    pub enum Change as "change" {
        /// Not stored for its keyword/site before (or back after it was removed).
        New = "new",
        /// Stored before with other values.
        Changed = "changed",
        Unchanged = "unchanged",
        /// Stored before, and not found by a run that read every page.
        Removed = "removed",
    }
}

impl Change {
    /// What `?change=` may ask for.
    pub const LISTED: [Change; 3] = [Change::New, Change::Changed, Change::Removed];

    /// A client's `change` filter: one of [`Change::LISTED`].
    pub fn parse_filter(value: &str) -> Result<Change, FieldError> {
        Change::LISTED
            .into_iter()
            .find(|c| c.as_str() == value)
            .ok_or_else(|| {
                FieldError::new(
                    "change",
                    format!(
                        "unknown change {value:?}; supported: \"new\", \"changed\", \"removed\""
                    ),
                )
            })
    }
}

/// One field's values before and after; `null` on the side that lacks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    pub old: Value,
    pub new: Value,
}

/// The fields that differ between two values of an item, by name. The store
/// computes it where it compares them (`field_diff` in SQL, the same rule).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FieldDiff(pub BTreeMap<String, FieldChange>);

impl FieldDiff {
    /// The fields of `old` and `new` (JSON objects) whose values differ; a
    /// field only one of them has is `null` on the other side.
    pub fn between(old: &Value, new: &Value) -> FieldDiff {
        let empty = serde_json::Map::new();
        let (old, new) = (
            old.as_object().unwrap_or(&empty),
            new.as_object().unwrap_or(&empty),
        );
        let names = old.keys().chain(new.keys());
        FieldDiff(
            names
                .filter(|name| old.get(*name) != new.get(*name))
                .map(|name| {
                    let side = |fields: &serde_json::Map<String, Value>| {
                        fields.get(name).cloned().unwrap_or(Value::Null)
                    };
                    (
                        name.clone(),
                        FieldChange {
                            old: side(old),
                            new: side(new),
                        },
                    )
                })
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One item a run found new, changed or removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemChange {
    pub item_id: i64,
    pub change: Change,
    pub item_url: Option<String>,
    /// Its fields as the run saw them (removed: as last seen).
    pub fields: Value,
    /// Changed: the fields that changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<FieldDiff>,
}

/// Most items of each kind a run's completion describes (events, webhooks);
/// the counts are whole.
pub const CHANGE_SAMPLES: usize = 20;

/// What a completed run found: how many items were new, changed and removed,
/// and up to [`CHANGE_SAMPLES`] of each, with their diffs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChangeSummary {
    pub new: i32,
    pub changed: i32,
    pub removed: i32,
    /// Whether removals were judged: only a run that read every page can
    /// tell an item is gone.
    pub removals_judged: bool,
    /// The first new, changed and removed items (in page order).
    pub samples: Vec<ItemChange>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_diff_names_each_changed_added_and_dropped_field_with_both_values() {
        let diff = FieldDiff::between(
            &json!({"title": "Lamp", "price": "$5", "old": 1}),
            &json!({"title": "Lamp", "price": "$6", "new": true}),
        );
        assert_eq!(
            serde_json::to_value(&diff).unwrap(),
            json!({
                "price": {"old": "$5", "new": "$6"},
                "old": {"old": 1, "new": null},
                "new": {"old": null, "new": true},
            })
        );
        assert!(FieldDiff::between(&json!({"a": [1]}), &json!({"a": [1]})).is_empty());
    }

    #[test]
    fn a_change_filter_takes_new_changed_or_removed_and_names_the_field_otherwise() {
        for change in Change::LISTED {
            assert_eq!(Change::parse_filter(change.as_str()).unwrap(), change);
        }
        for bad in ["unchanged", "NEW", ""] {
            assert_eq!(Change::parse_filter(bad).unwrap_err().field, "change");
        }
        for change in Change::ALL {
            assert_eq!(change.as_str().parse::<Change>().unwrap(), change);
        }
    }
}
