//! "Selectors from examples": what the api asks a worker (a page to load, as
//! a site would load it, and per field a few values as they appear on it)
//! and what the worker answers (ranked proposals of an item selector and
//! field selectors, with the items each extracts, or why there are none).
//! It travels the preview's lane ([`LaneRequest`]); nothing of it is stored.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{FieldError, preview::PreviewRequest, site::SiteInput, text};

/// Most fields one learning may name.
pub const MAX_LEARN_FIELDS: usize = 12;
/// Most examples a field may have.
pub const MAX_FIELD_EXAMPLES: usize = 3;
/// Longest field name.
pub const MAX_LEARN_FIELD_NAME_CHARS: usize = 64;
/// Longest example value.
pub const MAX_EXAMPLE_CHARS: usize = 300;
/// Most items of a proposal an answer shows.
pub const LEARN_ITEMS_SHOWN: usize = 25;
/// Longest page HTML a learning answers with (bytes; a longer page is cut at
/// a character boundary), for a person to pick examples from.
pub const LEARN_PAGE_SHOWN_BYTES: usize = 1024 * 1024;

/// Per field, its example values as they appear on the page.
pub type Examples = BTreeMap<String, Vec<String>>;

/// What a worker is asked through a lane: a preview, or a learning. Read
/// as a learning when it has `examples`, else as a preview (the shape a
/// preview always had).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub enum LaneRequest {
    Learn(LearnRequest),
    Preview(PreviewRequest),
}

/// A learning as the api hands it to a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LearnRequest {
    /// How the page is loaded (render mode, identity, wait_for), as a site
    /// the api checked; its extraction is not used.
    pub site: SiteInput,
    /// The stored site this is for, if any: its fleet-wide pace is the one used.
    pub site_id: Option<i64>,
    /// The page, when given as a URL; else the site's search URL for `keyword`.
    pub url: Option<String>,
    pub keyword: String,
    /// Always present (maybe empty: discovery); it tells a learning from a preview.
    pub examples: Examples,
    /// The api stops waiting then; a worker that takes the request later drops it.
    pub deadline: DateTime<Utc>,
}

/// What a worker answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnOutcome {
    pub worker_id: String,
    /// Where the page ended (after redirects).
    pub final_url: Option<String>,
    /// Best first; empty when `failure` says why.
    pub proposals: Vec<LearnedProposal>,
    pub failure: Option<LearnFailure>,
    /// Loading the page, and learning from it, on the worker.
    pub load_ms: u64,
    pub learn_ms: u64,
    /// The page as it was learned from (at most [`LEARN_PAGE_SHOWN_BYTES`]).
    #[serde(default)]
    pub page_html: Option<String>,
}

/// One proposal, in the shapes a site keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedProposal {
    pub item_selector: String,
    /// Field name -> its field spec as a site takes it (`selector`, `attr`, `link`).
    pub fields: serde_json::Value,
    /// The first items these selectors read (at most [`LEARN_ITEMS_SHOWN`]).
    pub items: Vec<serde_json::Value>,
    pub items_found: usize,
    pub items_complete: usize,
    pub examples_given: usize,
    pub examples_reproduced: usize,
    /// 0..1.
    pub confidence: f64,
}

/// Why a learning gave no proposals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnFailure {
    pub kind: LearnFailureKind,
    /// The request's field at fault (`examples.price`); none for the page,
    /// which the api names as the client gave it (`url` or `search_url`).
    pub field: Option<String>,
    pub message: String,
}

/// What stopped a learning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LearnFailureKind {
    /// The page was not loaded: refused by the guard or robots.txt, the
    /// site refused it, it failed or got stuck.
    Page,
    /// The examples are not on the page, or not in repeated items.
    Examples,
    /// The page, or the work it asks for, is over the learning budget.
    Budget,
}

/// Checks the examples a client sent: at most [`MAX_LEARN_FIELDS`] fields,
/// each named, with 1 to [`MAX_FIELD_EXAMPLES`] non-empty values, each
/// bounded; errors name `examples.<field>` or `examples.<field>[i]`.
pub fn check_examples(examples: &Examples) -> Result<(), FieldError> {
    if examples.len() > MAX_LEARN_FIELDS {
        return Err(FieldError::new(
            "examples",
            format!("at most {MAX_LEARN_FIELDS} fields"),
        ));
    }
    for (name, values) in examples {
        let field = format!("examples.{name}");
        text::non_empty(name, &field, MAX_LEARN_FIELD_NAME_CHARS)?;
        if values.is_empty() || values.len() > MAX_FIELD_EXAMPLES {
            return Err(FieldError::new(
                field,
                format!("give 1 to {MAX_FIELD_EXAMPLES} example values"),
            ));
        }
        for (at, value) in values.iter().enumerate() {
            text::non_empty(value, &format!("{field}[{at}]"), MAX_EXAMPLE_CHARS)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn examples(pairs: &[(&str, &[&str])]) -> Examples {
        pairs
            .iter()
            .map(|(name, values)| {
                let values = values.iter().map(|v| v.to_string()).collect();
                (name.to_string(), values)
            })
            .collect()
    }

    #[test]
    fn examples_are_bounded_and_errors_name_the_value() {
        assert!(check_examples(&Examples::new()).is_ok());
        assert!(check_examples(&examples(&[("title", &["Lamp", "Desk"])])).is_ok());
        let long = "x".repeat(MAX_EXAMPLE_CHARS + 1);
        let err = check_examples(&examples(&[("title", &["Lamp", &long])])).unwrap_err();
        assert_eq!(err.field, "examples.title[1]");
        let err = check_examples(&examples(&[("price", &[])])).unwrap_err();
        assert_eq!(err.field, "examples.price");
        let err = check_examples(&examples(&[("price", &["1", "2", "3", "4"])])).unwrap_err();
        assert_eq!(err.field, "examples.price");
        let err = check_examples(&examples(&[("price", &[" "])])).unwrap_err();
        assert_eq!(err.field, "examples.price[0]");
        let many: Examples = (0..=MAX_LEARN_FIELDS)
            .map(|n| (format!("f{n}"), vec!["v".to_owned()]))
            .collect();
        assert_eq!(check_examples(&many).unwrap_err().field, "examples");
    }

    #[test]
    fn a_request_with_examples_is_a_learning_and_one_without_a_preview() {
        let learn = serde_json::json!({
            "site": {"name": "s", "search_url": "http://s.example/?q={keyword}", "fields": {}},
            "site_id": null, "url": null, "keyword": "k", "examples": {},
            "deadline": "2030-01-01T00:00:00Z"
        });
        let read: LaneRequest = serde_json::from_value(learn.clone()).unwrap();
        assert!(matches!(read, LaneRequest::Learn(_)));
        let mut preview = learn;
        preview.as_object_mut().unwrap().remove("examples");
        preview["pages"] = serde_json::json!(1);
        let read: LaneRequest = serde_json::from_value(preview).unwrap();
        assert!(matches!(read, LaneRequest::Preview(_)));
    }
}
