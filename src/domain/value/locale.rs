//! How a locale writes numbers: which character is the decimal separator,
//! which ones group thousands, and which currency a bare `$`, `¥` or `kr`
//! means there. A small table of the conventions shops use (CLDR's, for the
//! languages and regions listed); a locale it does not know is refused, so a
//! typo is a 422 rather than prices read wrong.

use super::super::{FieldError, text};

/// Longest locale tag a client may send.
const MAX_TAG_CHARS: usize = 35;

/// Languages that write `1,234.5`.
const DOT_DECIMAL: &[&str] = &[
    "en", "ko", "ja", "zh", "th", "he", "hi", "ms", "fil", "tl", "ga", "cy", "mt", "sw", "ta",
    "te", "bn", "mr", "gu", "kn", "ml", "pa", "my", "km", "lo", "mn", "ne", "si",
];
/// Languages that write `1.234,5`.
const COMMA_DECIMAL_DOT_GROUP: &[&str] = &[
    "de", "es", "it", "nl", "pt", "id", "tr", "da", "el", "ro", "hr", "sl", "sr", "vi", "ca", "eu",
    "gl", "is", "az", "mk", "bs", "af",
];
/// Languages that write `1 234,5`.
const COMMA_DECIMAL_SPACE_GROUP: &[&str] = &[
    "fr", "pl", "ru", "cs", "sk", "uk", "bg", "sv", "nb", "no", "nn", "fi", "hu", "lt", "lv", "et",
    "be", "kk", "ka", "hy", "uz", "sq",
];
/// Spanish-speaking regions that write `1,234.5`.
const DOT_DECIMAL_SPANISH: &[&str] = &["MX", "US", "PR", "GT", "HN", "NI", "PA", "SV", "DO", "PE"];

/// How a locale writes a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Separators {
    /// `1,234.5`.
    DotDecimal,
    /// `1.234,5`.
    CommaDecimalDotGroup,
    /// `1 234,5`.
    CommaDecimalSpaceGroup,
    /// `1'234.5` (Switzerland, Liechtenstein).
    DotDecimalApostropheGroup,
}

impl Separators {
    pub fn decimal(self) -> char {
        match self {
            Separators::DotDecimal | Separators::DotDecimalApostropheGroup => '.',
            Separators::CommaDecimalDotGroup | Separators::CommaDecimalSpaceGroup => ',',
        }
    }

    /// Whether `c` groups thousands here. The spaces only ever used inside a
    /// number (no-break, narrow no-break, thin) group in every locale.
    pub fn groups_with(self, c: char) -> bool {
        matches!(c, '\u{A0}' | '\u{202F}' | '\u{2009}')
            || match self {
                Separators::DotDecimal => c == ',',
                Separators::CommaDecimalDotGroup => c == '.',
                Separators::CommaDecimalSpaceGroup => c == ' ',
                Separators::DotDecimalApostropheGroup => matches!(c, '\'' | '’'),
            }
    }
}

/// A locale as a number rule reads it (`ko-KR`, `de-DE`, `en-US`, `pl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumberLocale {
    /// The tag as the client wrote it (trimmed).
    tag: String,
    language: String,
    region: Option<String>,
    separators: Separators,
}

impl NumberLocale {
    /// A BCP 47 tag: a language, optionally a script and a region
    /// (`zh-Hant-TW`); the language must be one the table knows.
    pub fn parse(tag: &str, path: &str) -> Result<Self, FieldError> {
        let tag = text::non_empty(tag, path, MAX_TAG_CHARS)?;
        Self::read(tag).ok_or_else(|| {
            FieldError::new(
                path,
                format!(
                    "{tag:?} is not a locale whose numbers are known (a language and region such as \"en-US\", \"de-DE\", \"ko-KR\", \"fr-FR\")"
                ),
            )
        })
    }

    /// The locale of `tag`, if the table knows its language.
    fn read(tag: &str) -> Option<Self> {
        let mut parts = tag.split(['-', '_']);
        let language = parts.next()?.to_ascii_lowercase();
        if !(2..=3).contains(&language.len()) || !language.chars().all(|c| c.is_ascii_alphabetic())
        {
            return None;
        }
        let mut region = None;
        for part in parts {
            if part.is_empty() || part.len() > 8 || !part.chars().all(|c| c.is_ascii_alphanumeric())
            {
                return None;
            }
            let is_region = (part.len() == 2 && part.chars().all(|c| c.is_ascii_alphabetic()))
                || (part.len() == 3 && part.chars().all(|c| c.is_ascii_digit()));
            if is_region && region.is_none() {
                region = Some(part.to_ascii_uppercase());
            }
        }
        let lang = language.as_str();
        let region_is = |r: &str| region.as_deref() == Some(r);
        let separators = if region_is("CH") || region_is("LI") {
            Separators::DotDecimalApostropheGroup
        } else if lang == "es" && DOT_DECIMAL_SPANISH.iter().any(|r| region_is(r)) {
            Separators::DotDecimal
        } else if (lang == "pt" && region_is("PT")) || (lang == "en" && region_is("ZA")) {
            Separators::CommaDecimalSpaceGroup
        } else if DOT_DECIMAL.contains(&lang) {
            Separators::DotDecimal
        } else if COMMA_DECIMAL_DOT_GROUP.contains(&lang) {
            Separators::CommaDecimalDotGroup
        } else if COMMA_DECIMAL_SPACE_GROUP.contains(&lang) {
            Separators::CommaDecimalSpaceGroup
        } else {
            return None;
        };
        Some(NumberLocale {
            tag: tag.to_owned(),
            language,
            region,
            separators,
        })
    }

    /// A stored tag, read again without refusal: a tag the table no longer
    /// knows reads numbers as if no locale were set.
    pub fn stored(tag: &str) -> Option<Self> {
        Self::read(tag)
    }

    pub fn as_str(&self) -> &str {
        &self.tag
    }

    pub fn separators(&self) -> Separators {
        self.separators
    }

    /// What a bare `$` means here.
    pub fn dollar(&self) -> &'static str {
        match self.region.as_deref() {
            Some("CA") => "CAD",
            Some("AU") => "AUD",
            Some("NZ") => "NZD",
            Some("SG") => "SGD",
            Some("HK") => "HKD",
            Some("TW") => "TWD",
            Some("MX") => "MXN",
            Some("AR") => "ARS",
            Some("CL") => "CLP",
            Some("CO") => "COP",
            _ => "USD",
        }
    }

    /// What a bare `¥` means here.
    pub fn yen(&self) -> &'static str {
        match self.language.as_str() {
            "zh" => "CNY",
            _ => "JPY",
        }
    }

    /// What a bare `kr` means here, if anything.
    pub fn krone(&self) -> Option<&'static str> {
        match self.language.as_str() {
            "sv" => Some("SEK"),
            "nb" | "no" | "nn" => Some("NOK"),
            "da" => Some("DKK"),
            "is" => Some("ISK"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn separators(tag: &str) -> Separators {
        NumberLocale::parse(tag, "f").unwrap().separators()
    }

    #[test]
    fn languages_and_regions_pick_their_separators() {
        assert_eq!(separators("en-US"), Separators::DotDecimal);
        assert_eq!(separators("ko-KR"), Separators::DotDecimal);
        assert_eq!(separators("de-DE"), Separators::CommaDecimalDotGroup);
        assert_eq!(separators("de_at"), Separators::CommaDecimalDotGroup);
        assert_eq!(separators("pl"), Separators::CommaDecimalSpaceGroup);
        assert_eq!(separators("fr-FR"), Separators::CommaDecimalSpaceGroup);
        assert_eq!(separators("de-CH"), Separators::DotDecimalApostropheGroup);
        assert_eq!(separators("es-MX"), Separators::DotDecimal);
        assert_eq!(separators("es-ES"), Separators::CommaDecimalDotGroup);
        assert_eq!(separators("pt-PT"), Separators::CommaDecimalSpaceGroup);
        assert_eq!(separators("zh-Hant-TW"), Separators::DotDecimal);
        assert!(Separators::CommaDecimalSpaceGroup.groups_with('\u{A0}'));
        assert!(!Separators::DotDecimal.groups_with(' '));
    }

    #[test]
    fn absurd_locales_are_refused_naming_the_field() {
        for bad in [
            "",
            "xx-XX",
            "english",
            "en--US",
            "e",
            "en-US-\u{0}",
            "../../etc",
            &"en-".repeat(40),
        ] {
            let err = NumberLocale::parse(bad, "fields.price.number.locale").unwrap_err();
            assert_eq!(err.field, "fields.price.number.locale", "{bad:?}");
        }
    }

    #[test]
    fn a_bare_dollar_yen_or_krone_is_read_by_the_locale() {
        let locale = |tag| NumberLocale::parse(tag, "f").unwrap();
        assert_eq!(locale("en-US").dollar(), "USD");
        assert_eq!(locale("en-CA").dollar(), "CAD");
        assert_eq!(locale("ja-JP").yen(), "JPY");
        assert_eq!(locale("zh-CN").yen(), "CNY");
        assert_eq!(locale("sv-SE").krone(), Some("SEK"));
        assert_eq!(locale("en-US").krone(), None);
    }
}
