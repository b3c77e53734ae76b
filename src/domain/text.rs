//! What every text a client sends must be before anything parses or stores
//! it: bounded in length, and printable. A control character has no business
//! in a name, URL, selector or schedule, and Postgres refuses NUL in text and
//! in JSONB: refused here, it is a 422 naming the field instead of a 500.

use super::FieldError;

/// Checks `value` (the client's `field`): at most `max_chars` characters,
/// none of them a control character (NUL, line breaks, tab, escape, DEL, C1).
pub fn check(value: &str, field: &str, max_chars: usize) -> Result<(), FieldError> {
    // Bytes first: a huge text is refused without walking it.
    if value.len() > max_chars * 4 || value.chars().count() > max_chars {
        return Err(FieldError::new(
            field,
            format!("must be at most {max_chars} characters"),
        ));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(FieldError::new(
            field,
            format!(
                "must not contain control characters (found U+{:04X})",
                c as u32
            ),
        ));
    }
    Ok(())
}

/// Like [`check`], and not empty once trimmed; returns the trimmed text.
pub fn non_empty<'a>(value: &'a str, field: &str, max_chars: usize) -> Result<&'a str, FieldError> {
    check(value, field, max_chars)?;
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    Ok(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_long_texts_are_refused_naming_the_field() {
        for bad in [
            "a\u{0}b",
            "tab\there",
            "line\nbreak",
            "\u{1b}[31m",
            "del\u{7f}",
            "c1\u{85}",
        ] {
            let err = check(bad, "name", 100).unwrap_err();
            assert_eq!(err.field, "name");
            assert!(err.message.contains("control"), "{bad:?}: {}", err.message);
        }
        assert!(check(&"é".repeat(100), "name", 100).is_ok());
        assert!(check(&"é".repeat(101), "name", 100).is_err());
        assert!(check("노트북 가방", "keyword", 100).is_ok());
        assert_eq!(non_empty("  x ", "f", 10).unwrap(), "x");
        assert!(non_empty("   ", "f", 10).is_err());
    }
}
