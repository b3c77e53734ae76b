//! A client's regular expression, bounded. The `regex` crate matches in time
//! linear in the text (no backtracking blow-up: `(a+)+$` costs what `a+$`
//! does), so what a hostile pattern can still cost is its size: a short
//! pattern can compile to a huge program (`\w{1000}{1000}`), and resolving
//! a match's groups costs the program's size times the match's length. The
//! pattern's length, its nesting and the size it compiles to are bounded,
//! one that can match the empty text (a match at every position, each a
//! search to the end: `$|`) is refused, and a value's matches are taken up
//! to a list's bound. Over the longest value a field keeps (10,000
//! characters), the costliest accepted patterns found take up to 0.2 s in a
//! release build; the page's extraction budget stops a page after such a value.

use std::fmt;

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

use super::{
    super::{FieldError, text},
    MAX_LIST_VALUES,
};

/// Longest pattern a client may send, in characters.
pub const MAX_PATTERN_CHARS: usize = 500;
/// Largest program a pattern may compile to, in bytes: room for `SKU:\s*(\w+)`
/// or `(\w+)@(\w+)\.com` with Unicode classes, not for `\w{1,50}`.
const COMPILED_LIMIT: usize = 128 * 1024;
/// Largest lazy DFA cache a pattern may use while matching, in bytes.
const DFA_LIMIT: usize = 1024 * 1024;
/// Deepest nesting of groups and repetitions.
const NEST_LIMIT: u32 = 50;

/// A pattern that passed the bounds, compiled. Its first capture group is
/// the value (the whole match when it has no group).
#[derive(Clone)]
pub struct Pattern {
    source: String,
    /// `None` only for a stored pattern today's bounds refuse: matching it
    /// fails each value, naming why.
    regex: Option<Regex>,
}

impl Pattern {
    /// The client's pattern for the field at `path`.
    pub fn parse(source: &str, path: &str) -> Result<Self, FieldError> {
        text::check(source, path, MAX_PATTERN_CHARS)?;
        if source.is_empty() {
            return Err(FieldError::new(path, "must not be empty"));
        }
        let regex = compile(source).map_err(|why| FieldError::new(path, why))?;
        let matches_empty = regex_syntax::parse(source)
            .map(|hir| hir.properties().minimum_len() == Some(0))
            .unwrap_or(true);
        if matches_empty {
            return Err(FieldError::new(
                path,
                "can match the empty text, so it matches everywhere: make it match something (+ rather than *)",
            ));
        }
        Ok(Pattern {
            source: source.to_owned(),
            regex: Some(regex),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The value of each match in `text` (the first only unless `all`; at
    /// most a list's bound of matches); an error when the stored pattern no
    /// longer compiles.
    pub fn values<'t>(&self, text: &'t str, all: bool) -> Result<Vec<&'t str>, String> {
        let regex = self.regex.as_ref().ok_or_else(|| {
            format!(
                "the pattern {:?} is past today's bounds: edit the site",
                self.source
            )
        })?;
        let group = usize::from(regex.captures_len() > 1);
        let mut found = Vec::new();
        for captures in regex.captures_iter(text).take(MAX_LIST_VALUES) {
            if let Some(value) = captures.get(group) {
                found.push(value.as_str());
            }
            if !all && !found.is_empty() {
                break;
            }
        }
        Ok(found)
    }
}

fn compile(source: &str) -> Result<Regex, String> {
    RegexBuilder::new(source)
        .size_limit(COMPILED_LIMIT)
        .dfa_size_limit(DFA_LIMIT)
        .nest_limit(NEST_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => format!(
                "compiles to more than {} KiB: repeat less (e.g. \\w{{1000}}) or use ASCII classes ((?-u:\\w))",
                COMPILED_LIMIT / 1024
            ),
            regex::Error::Syntax(why) => {
                // The crate's message spans lines (the pattern, a caret).
                let why = why.lines().last().unwrap_or_default().trim().to_owned();
                format!("is not a regular expression: {why}")
            }
            other => format!("is not a regular expression: {other}"),
        })
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({:?})", self.source)
    }
}

impl Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

/// A stored pattern is compiled again, never refused: a site stays readable
/// (and editable) even if the bounds tighten; its values then fail.
impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = String::deserialize(deserializer)?;
        let regex = compile(&source).ok();
        Ok(Pattern { source, regex })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_group_is_the_value_else_the_whole_match() {
        let sku = Pattern::parse(r"SKU:\s*(\w+)", "f").unwrap();
        assert_eq!(sku.values("Lamp SKU: A12 red", false).unwrap(), ["A12"]);
        let digits = Pattern::parse(r"\d+", "f").unwrap();
        assert_eq!(digits.values("3 of 45", false).unwrap(), ["3"]);
        assert_eq!(digits.values("3 of 45", true).unwrap(), ["3", "45"]);
        assert!(digits.values("none", true).unwrap().is_empty());
        for legit in [
            r"SKU:\s*(\w+)",
            r"(\w+)@(\w+)\.com",
            r"\b(\d{4}-\d{2}-\d{2})\b",
            r"(\p{L}+)",
        ] {
            assert!(Pattern::parse(legit, "f").is_ok(), "{legit}");
        }
        let optional = Pattern::parse(r"a(b)?", "f").unwrap();
        assert!(
            optional.values("a", false).unwrap().is_empty(),
            "a group that took no part is no value"
        );
    }

    #[test]
    fn bad_and_huge_patterns_are_refused_naming_the_field() {
        for (pattern, says) in [
            ("(", "not a regular expression"),
            (r"\w{1000}{1000}", "compiles to more than"),
            (r"(?:\p{L}{100}){100}", "compiles to more than"),
            (r"\w{1,50}", "compiles to more than"),
            (r"$|", "empty text"),
            (r"\d*", "empty text"),
            (r"\b", "empty text"),
            ("", "empty"),
            ("a\u{0}", "control"),
        ] {
            let err = Pattern::parse(pattern, "fields.p.regex").unwrap_err();
            assert_eq!(err.field, "fields.p.regex");
            assert!(err.message.contains(says), "{pattern:?}: {}", err.message);
        }
        let long = "a".repeat(MAX_PATTERN_CHARS + 1);
        assert!(Pattern::parse(&long, "f").is_err());
        let deep = format!("{}a{}", "(".repeat(60), ")".repeat(60));
        assert!(Pattern::parse(&deep, "f").is_err(), "nested past the limit");
    }

    #[test]
    fn a_stored_pattern_past_the_bounds_still_reads_and_fails_its_values() {
        let stored: Pattern = serde_json::from_value(serde_json::json!(r"\w{1000}{1000}")).unwrap();
        assert_eq!(stored.as_str(), r"\w{1000}{1000}");
        assert!(stored.values("x", false).unwrap_err().contains("bounds"));
        let good: Pattern = serde_json::from_value(serde_json::json!(r"(\d+)")).unwrap();
        assert_eq!(serde_json::to_value(&good).unwrap(), r"(\d+)");
    }
}
