//! Where a value is in a page: a CSS selector over HTML, or a JSON pointer
//! into an API's answer. Both are bounded and checked before they are used.

use serde::{Deserialize, Serialize};

use crate::domain::{FieldError, text};

/// Longest selector accepted: real ones are a few dozen characters.
pub const MAX_SELECTOR_CHARS: usize = 1000;
/// Deepest nesting of parentheses and brackets in a selector (`:is(:not(a))`
/// nests 2): the selector parser recurses once per level, and a few thousand
/// levels overflow the stack and abort the whole process.
pub const MAX_SELECTOR_NESTING: usize = 10;
/// Longest JSON pointer accepted.
pub const MAX_POINTER_CHARS: usize = 500;
/// A CSS selector that parses (checked with the same grammar browsers use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CssSelector(String);

impl CssSelector {
    pub fn parse(selector: &str, field: &str) -> Result<Self, FieldError> {
        let trimmed = text::non_empty(selector, field, MAX_SELECTOR_CHARS)?;
        if nesting(trimmed) > MAX_SELECTOR_NESTING {
            return Err(FieldError::new(
                field,
                format!(
                    "nests parentheses or brackets more than {MAX_SELECTOR_NESTING} levels deep"
                ),
            ));
        }
        scraper::Selector::parse(trimmed)
            .map_err(|e| FieldError::new(field, format!("is not a valid CSS selector: {e}")))?;
        Ok(Self(trimmed.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The compiled selector (it parsed when accepted).
    pub fn compile(&self) -> scraper::Selector {
        scraper::Selector::parse(&self.0).expect("checked to parse when accepted")
    }
}

/// How deep parentheses and brackets nest in a selector, outside quoted
/// strings (an escaped character counts as a letter). Counted before the
/// selector parser, which recurses, ever sees it.
fn nesting(selector: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote = None;
    let mut chars = selector.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (_, '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, ')' | ']') => depth = depth.saturating_sub(1),
            (None, _) => {}
        }
    }
    deepest
}

/// A JSON pointer (RFC 6901): empty for the whole document, else `/a/0/b`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonPointer(String);

impl JsonPointer {
    pub fn parse(pointer: &str, field: &str) -> Result<Self, FieldError> {
        text::check(pointer, field, MAX_POINTER_CHARS)?;
        if !(pointer.is_empty() || pointer.starts_with('/')) {
            return Err(FieldError::new(
                field,
                "must be a JSON pointer: empty, or starting with / (e.g. /data/items)",
            ));
        }
        // RFC 6901: `~` only escapes, as `~0` (~) or `~1` (/).
        let mut rest = pointer;
        while let Some(at) = rest.find('~') {
            if !matches!(rest.as_bytes().get(at + 1), Some(b'0' | b'1')) {
                return Err(FieldError::new(
                    field,
                    "has a ~ that is not ~0 (for ~) or ~1 (for /)",
                ));
            }
            rest = &rest[at + 2..];
        }
        Ok(Self(pointer.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn find<'a>(&self, value: &'a serde_json::Value) -> Option<&'a serde_json::Value> {
        value.pointer(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_that_does_not_parse_names_its_field() {
        let err = CssSelector::parse("li[", "item_selector").unwrap_err();
        assert_eq!(err.field, "item_selector");
        assert!(CssSelector::parse("ul > li.product a[href]", "x").is_ok());
    }

    #[test]
    fn a_pointer_escapes_only_with_tilde_zero_and_one() {
        assert!(JsonPointer::parse("/a~0b/c~1d", "x").is_ok());
        for bad in ["/a~2b", "/~", "/a~"] {
            assert_eq!(
                JsonPointer::parse(bad, "json.items").unwrap_err().field,
                "json.items"
            );
        }
    }

    #[test]
    fn a_pointer_must_start_with_a_slash() {
        assert_eq!(
            JsonPointer::parse("items", "json.items").unwrap_err().field,
            "json.items"
        );
        let doc = serde_json::json!({"a": [{"b": 1}]});
        assert_eq!(
            JsonPointer::parse("/a/0/b", "x").unwrap().find(&doc),
            Some(&serde_json::json!(1))
        );
    }
}
