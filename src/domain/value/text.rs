//! Whitespace in a value: collapsed as the browser script collapses an
//! element's text (`replace(/\s+/g, ' ').trim()`), so a value read in any
//! render mode comes out the same.

use super::super::{FieldError, text_enum::text_enum};

text_enum! {
    /// What happens to the whitespace of a field's text.
    pub enum Whitespace as "whitespace" {
        /// Every run of whitespace one space, the ends trimmed (the default
        /// for an element's text in browser and http modes).
        Collapse = "collapse",
        /// Line breaks and inner spacing kept; in browser and http modes the
        /// ends are trimmed.
        Keep = "keep",
    }
}

impl Whitespace {
    /// A client's `whitespace` setting for the field at `path`.
    pub fn parse(value: &str, path: &str) -> Result<Self, FieldError> {
        value.parse().map_err(|_| {
            FieldError::new(
                path,
                format!("unknown whitespace {value:?}; supported: \"collapse\", \"keep\""),
            )
        })
    }
}

/// JavaScript's `\s`: what the browser script collapses.
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// Text with every run of whitespace made one space, trimmed.
pub fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(is_js_space).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Trims as JavaScript's `String.prototype.trim` does.
pub fn js_trim(text: &str) -> &str {
    text.trim_matches(is_js_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_collapses_like_javascript() {
        assert_eq!(
            collapse_whitespace("\n  a\u{A0}\u{A0}b\t c \u{3000}"),
            "a b c"
        );
        assert_eq!(
            collapse_whitespace("\u{85}x"),
            "\u{85}x",
            "NEL is not \\s in JS"
        );
        assert_eq!(js_trim("\u{FEFF} v \n"), "v");
    }

    #[test]
    fn a_whitespace_setting_is_collapse_or_keep_and_names_its_field_otherwise() {
        assert_eq!(Whitespace::parse("keep", "f").unwrap(), Whitespace::Keep);
        let err = Whitespace::parse("squash", "fields.t.whitespace").unwrap_err();
        assert_eq!(err.field, "fields.t.whitespace");
        assert!(err.message.contains("\"collapse\""), "{}", err.message);
    }
}
