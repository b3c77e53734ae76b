//! A number in a page's text, read as its locale writes it: `₩1,299,000`
//! (ko-KR), `1.299,00 €` (de-DE), `$1,299` (en-US), `1 299,00 zł` (pl-PL),
//! fullwidth digits (`１，２９９円`) too. The first number in the text is the
//! value; its currency, if the rule asks, is kept apart as an ISO 4217 code.
//! Without a locale the separators are guessed as `price-parser` does: of
//! `.` and `,` the last one is the decimal separator, one used twice groups,
//! and one followed by exactly three digits groups (`$1,299` is 1299).

use serde_json::Number;

use super::{currency::currency_of, locale::NumberLocale, locale::Separators};

/// Most digits a number may have: more is an id or a phone number, not an amount.
const MAX_DIGITS: usize = 30;

/// A number read from text, and the currency near it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadNumber {
    /// An integer when it has no fraction (so `1.299,00` and `1299` are
    /// the same value, and compare equal run after run).
    pub value: Number,
    pub currency: Option<&'static str>,
}

/// Why a text is not a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotANumber {
    NoDigits,
    /// Separators where the locale has none (`1,29` in en-US, `1,299,000` in de-DE).
    Grouping,
    TooLong,
}

/// Fullwidth digits and separators as their ASCII selves.
fn ascii(c: char) -> char {
    match c {
        '０'..='９' => char::from_u32(c as u32 - '０' as u32 + '0' as u32).unwrap_or(c),
        '，' => ',',
        '．' => '.',
        '－' => '-',
        other => other,
    }
}

/// The first number in `text`, read in `locale` (none: separators guessed);
/// its currency only when `with_currency`.
pub fn read_number(
    text: &str,
    locale: Option<&NumberLocale>,
    with_currency: bool,
) -> Result<ReadNumber, NotANumber> {
    let separators = locale.map(NumberLocale::separators);
    let chars: Vec<(usize, char)> = text.char_indices().map(|(at, c)| (at, ascii(c))).collect();
    let start = chars
        .iter()
        .position(|(_, c)| c.is_ascii_digit())
        .ok_or(NotANumber::NoDigits)?;
    let may_join = |c: char| match separators {
        Some(s) => c == s.decimal() || s.groups_with(c),
        None => matches!(
            c,
            ',' | '.' | '\u{A0}' | '\u{202F}' | '\u{2009}' | '\'' | '’'
        ),
    };
    let mut end = start;
    while end < chars.len() {
        let c = chars[end].1;
        let next_is_digit = chars.get(end + 1).is_some_and(|(_, n)| n.is_ascii_digit());
        if c.is_ascii_digit() || (may_join(c) && next_is_digit) {
            end += 1;
        } else {
            break;
        }
    }
    let token: Vec<char> = chars[start..end].iter().map(|(_, c)| *c).collect();
    if token.iter().filter(|c| c.is_ascii_digit()).count() > MAX_DIGITS {
        return Err(NotANumber::TooLong);
    }
    let decimal = match separators {
        Some(s) => s.decimal(),
        None => guess_decimal(&token),
    };
    let digits = normalise(&token, decimal)?;
    let negative = is_negative(&text[..chars[start].0]);
    let value = to_number(&digits, negative).ok_or(NotANumber::TooLong)?;
    let amount = chars[start].0..chars.get(end).map_or(text.len(), |(at, _)| *at);
    let currency = match with_currency {
        true => currency_of(text, amount, locale),
        false => None,
    };
    Ok(ReadNumber { value, currency })
}

/// The decimal separator of a token whose locale is not known, as
/// `price-parser` guesses it; `\0` when it has none.
fn guess_decimal(token: &[char]) -> char {
    let last = token.iter().rposition(|c| matches!(c, ',' | '.'));
    let Some(last) = last else { return '\0' };
    let mark = token[last];
    let other = if mark == ',' { '.' } else { ',' };
    if token.contains(&other) {
        return mark;
    }
    let uses = token.iter().filter(|c| **c == mark).count();
    let after = token.len() - last - 1;
    if uses > 1 || after == 3 { '\0' } else { mark }
}

/// The token's digits with `.` for its decimal separator, its groups checked:
/// the first of one to three digits, each after it of three (two before the
/// last, for India's lakh and crore).
fn normalise(token: &[char], decimal: char) -> Result<String, NotANumber> {
    let split = token.iter().position(|c| *c == decimal);
    let (whole, fraction) = match split {
        Some(at) => (&token[..at], Some(&token[at + 1..])),
        None => (token, None),
    };
    let groups: Vec<&[char]> = whole.split(|c| !c.is_ascii_digit()).collect();
    if groups.len() > 1 {
        let last = groups.len() - 1;
        for (i, group) in groups.iter().enumerate() {
            let fits = match i {
                0 => (1..=3).contains(&group.len()),
                _ if i == last => group.len() == 3,
                _ => (2..=3).contains(&group.len()),
            };
            if !fits {
                return Err(NotANumber::Grouping);
            }
        }
    }
    let mut digits: String = groups.concat().into_iter().collect();
    if let Some(fraction) = fraction {
        if fraction.is_empty() || !fraction.iter().all(char::is_ascii_digit) {
            return Err(NotANumber::Grouping);
        }
        digits.push('.');
        digits.extend(fraction);
    }
    Ok(digits)
}

/// Whether the text before a number ends in a minus sign (`-5`, `- 5`),
/// maybe with a currency symbol between (`−$5`); a hyphen in a word (`A-1`)
/// is no sign.
fn is_negative(before: &str) -> bool {
    let is_sign = |c: char| matches!(c, '-' | '−' | '－');
    let signed = |text: &str| {
        let mut back = text.trim_end().chars().rev();
        back.next().is_some_and(is_sign) && !back.next().is_some_and(char::is_alphanumeric)
    };
    let before = before.trim_end();
    if signed(before) {
        return true;
    }
    let symbol_at = before
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace() || is_sign(*c))
        .map_or(0, |(at, c)| at + c.len_utf8());
    let symbol = &before[symbol_at..];
    !symbol.is_empty() && symbol.chars().count() <= 4 && signed(&before[..symbol_at])
}

/// `digits` (ASCII, `.` decimal) as a JSON number: an integer when the
/// fraction is zero and it fits, else a float.
fn to_number(digits: &str, negative: bool) -> Option<Number> {
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if fraction.bytes().all(|b| b == b'0')
        && let Ok(n) = whole.parse::<i64>()
    {
        return Some(Number::from(if negative { -n } else { n }));
    }
    let n: f64 = digits.parse().ok()?;
    Number::from_f64(if negative { -n } else { n })
}

/// How a locale writes a number, for a message.
pub fn describe(separators: Separators) -> &'static str {
    match separators {
        Separators::DotDecimal => "1,234.5",
        Separators::CommaDecimalDotGroup => "1.234,5",
        Separators::CommaDecimalSpaceGroup => "1 234,5",
        Separators::DotDecimalApostropheGroup => "1'234.5",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(
        text: &str,
        tag: Option<&str>,
    ) -> Result<(serde_json::Value, Option<&'static str>), NotANumber> {
        let locale = tag.map(|t| NumberLocale::parse(t, "f").unwrap());
        read_number(text, locale.as_ref(), true).map(|n| (json!(n.value), n.currency))
    }

    #[test]
    fn prices_read_as_their_locale_writes_them() {
        assert_eq!(
            read("₩1,299,000", Some("ko-KR")),
            Ok((json!(1_299_000), Some("KRW")))
        );
        assert_eq!(
            read("1.299,00 €", Some("de-DE")),
            Ok((json!(1299), Some("EUR")))
        );
        assert_eq!(
            read("1.299,50 €", Some("de-DE")),
            Ok((json!(1299.5), Some("EUR")))
        );
        assert_eq!(
            read("$1,299", Some("en-US")),
            Ok((json!(1299), Some("USD")))
        );
        assert_eq!(
            read("$1,299.99", Some("en-US")),
            Ok((json!(1299.99), Some("USD")))
        );
        assert_eq!(
            read("1 299,00 zł", Some("pl-PL")),
            Ok((json!(1299), Some("PLN")))
        );
        assert_eq!(
            read("1\u{202F}299,00\u{A0}€", Some("fr-FR")),
            Ok((json!(1299), Some("EUR")))
        );
        assert_eq!(
            read("CHF 1'299.–", Some("de-CH")),
            Ok((json!(1299), Some("CHF")))
        );
        assert_eq!(
            read("１，２９９円", Some("ja-JP")),
            Ok((json!(1299), Some("JPY")))
        );
        assert_eq!(
            read("₹1,50,087.99", Some("en-IN")),
            Ok((json!(150_087.99), Some("INR")))
        );
        assert_eq!(read("Only 3 left", Some("en-US")), Ok((json!(3), None)));
    }

    #[test]
    fn a_number_the_locale_does_not_write_is_refused_not_misread() {
        assert_eq!(
            read("1,299,000 €", Some("de-DE")),
            Err(NotANumber::Grouping)
        );
        assert_eq!(read("$1,29", Some("en-US")), Err(NotANumber::Grouping));
        assert_eq!(
            read("Call for price", Some("en-US")),
            Err(NotANumber::NoDigits)
        );
        assert_eq!(read(&"9".repeat(40), None), Err(NotANumber::TooLong));
    }

    #[test]
    fn without_a_locale_the_separators_are_guessed() {
        assert_eq!(read("$1,299", None), Ok((json!(1299), Some("USD"))));
        assert_eq!(read("22,90 €", None), Ok((json!(22.9), Some("EUR"))));
        assert_eq!(read("1.299,00", None), Ok((json!(1299), None)));
        assert_eq!(read("1,299.50", None), Ok((json!(1299.5), None)));
        assert_eq!(read("1.000.000", None), Ok((json!(1_000_000), None)));
        assert_eq!(read("0.5", None), Ok((json!(0.5), None)));
    }

    #[test]
    fn a_minus_before_the_number_or_its_symbol_makes_it_negative() {
        assert_eq!(read("-5", None), Ok((json!(-5), None)));
        assert_eq!(
            read("−$5.50", Some("en-US")),
            Ok((json!(-5.5), Some("USD")))
        );
        assert_eq!(read("- 20", None), Ok((json!(-20), None)));
        assert_eq!(
            read("A-1 5", None).map(|r| r.0),
            Ok(json!(1)),
            "a hyphen in a word is not a sign"
        );
    }
}
