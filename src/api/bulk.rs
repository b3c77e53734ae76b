//! Enabling or disabling many sites or keywords at once: the request both
//! take (`ids`, or `all`), its checks, and the answer.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{api::ApiError, domain::FieldError};

/// Most rows one request names by id.
pub const MAX_IDS: usize = 500;

/// Which rows to enable or disable: `ids`, or `all`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkEnableRequest {
    /// Enable (`true`) or disable (`false`).
    pub enabled: bool,
    /// Rows by id (1 to 500).
    pub ids: Option<Vec<i64>>,
    /// Every row.
    #[serde(default)]
    pub all: bool,
    /// Only count: nothing changes, the answer says what would.
    #[serde(default)]
    pub dry_run: bool,
}

/// What enabling or disabling did (or, with `dry_run`, would do).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct BulkEnableOutcome {
    pub enabled: bool,
    pub dry_run: bool,
    /// Rows named or matched.
    pub matched: usize,
    /// Rows whose `enabled` changed (or would).
    pub changed: usize,
    pub changed_ids: Vec<i64>,
    /// Rows already so, left as they were.
    pub unchanged_ids: Vec<i64>,
    /// Ids named that name nothing.
    pub not_found: Vec<i64>,
}

impl BulkEnableRequest {
    /// The ids named (each once), or `None` for `all`; a 422 naming the field
    /// when neither or both are given, or too many ids.
    pub fn targets(&self) -> Result<Option<Vec<i64>>, ApiError> {
        match (&self.ids, self.all) {
            (Some(_), true) => Err(FieldError::new("all", "give ids or all, not both").into()),
            (None, false) => Err(FieldError::new("ids", "give ids or all: true").into()),
            (None, true) => Ok(None),
            (Some(ids), false) if ids.is_empty() => {
                Err(FieldError::new("ids", "name at least one").into())
            }
            (Some(ids), false) if ids.len() > MAX_IDS => Err(FieldError::new(
                "ids",
                format!("at most {MAX_IDS} at once, not {}", ids.len()),
            )
            .into()),
            (Some(ids), false) => {
                let mut seen = std::collections::HashSet::new();
                Ok(Some(
                    ids.iter().copied().filter(|id| seen.insert(*id)).collect(),
                ))
            }
        }
    }

    pub fn outcome(&self) -> BulkEnableOutcome {
        BulkEnableOutcome {
            enabled: self.enabled,
            dry_run: self.dry_run,
            ..BulkEnableOutcome::default()
        }
    }
}

impl BulkEnableOutcome {
    /// Records one row found: `is` its `enabled` now, `apply` makes the change.
    pub fn judge(&mut self, id: i64, is: bool) -> bool {
        self.matched += 1;
        if is == self.enabled {
            self.unchanged_ids.push(id);
            false
        } else {
            self.changed_ids.push(id);
            self.changed += 1;
            true
        }
    }

    pub fn missing(&mut self, id: i64) {
        self.matched += 1;
        self.not_found.push(id);
    }
}
