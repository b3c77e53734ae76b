//! The currency a price names, as an ISO 4217 code: by its symbol (`₩`,
//! `€`, `zł`; a bare `$`, `¥` or `kr` read by the locale) or its code
//! (`EUR`). Of several, the one nearest the amount wins: `원피스 5,000원` is
//! in won whatever else the text holds.

use std::ops::Range;

use super::locale::NumberLocale;

/// What a symbol means.
#[derive(Clone, Copy)]
enum Means {
    Code(&'static str),
    Dollar,
    Yen,
    Krone,
}

/// Symbols, longest first where one starts another (`US$` before `$`).
/// Those written in Latin or Cyrillic letters are matched as whole words only.
const SYMBOLS: &[(&str, Means)] = &[
    ("US$", Means::Code("USD")),
    ("CA$", Means::Code("CAD")),
    ("AU$", Means::Code("AUD")),
    ("NZ$", Means::Code("NZD")),
    ("HK$", Means::Code("HKD")),
    ("NT$", Means::Code("TWD")),
    ("MX$", Means::Code("MXN")),
    ("R$", Means::Code("BRL")),
    ("C$", Means::Code("CAD")),
    ("A$", Means::Code("AUD")),
    ("S$", Means::Code("SGD")),
    ("$", Means::Dollar),
    ("€", Means::Code("EUR")),
    ("£", Means::Code("GBP")),
    ("¥", Means::Yen),
    ("￥", Means::Yen),
    ("円", Means::Code("JPY")),
    ("元", Means::Code("CNY")),
    ("₩", Means::Code("KRW")),
    ("￦", Means::Code("KRW")),
    ("원", Means::Code("KRW")),
    ("₹", Means::Code("INR")),
    ("₽", Means::Code("RUB")),
    ("руб", Means::Code("RUB")),
    ("₺", Means::Code("TRY")),
    ("₫", Means::Code("VND")),
    ("฿", Means::Code("THB")),
    ("₱", Means::Code("PHP")),
    ("₪", Means::Code("ILS")),
    ("₴", Means::Code("UAH")),
    ("₦", Means::Code("NGN")),
    ("zł", Means::Code("PLN")),
    ("Kč", Means::Code("CZK")),
    ("Ft", Means::Code("HUF")),
    ("lei", Means::Code("RON")),
    ("лв", Means::Code("BGN")),
    ("Fr.", Means::Code("CHF")),
    ("Rp", Means::Code("IDR")),
    ("RM", Means::Code("MYR")),
    ("Rs.", Means::Code("INR")),
    ("kr", Means::Krone),
];

/// ISO 4217 codes a price may name in letters.
const CODES: &[&str] = &[
    "USD", "EUR", "GBP", "JPY", "CNY", "KRW", "INR", "RUB", "PLN", "CZK", "HUF", "SEK", "NOK",
    "DKK", "ISK", "CHF", "CAD", "AUD", "NZD", "HKD", "SGD", "TWD", "BRL", "MXN", "ARS", "CLP",
    "COP", "PEN", "TRY", "VND", "THB", "PHP", "ILS", "UAH", "RON", "BGN", "ZAR", "NGN", "IDR",
    "MYR", "AED", "SAR", "EGP", "KZT",
];

/// The currency `text` names nearest `amount` (the byte range of its
/// number), read in `locale` (none: a bare `$` is USD, `¥` JPY, `kr` unknown).
pub fn currency_of(
    text: &str,
    amount: Range<usize>,
    locale: Option<&NumberLocale>,
) -> Option<&'static str> {
    let mut best: Option<(usize, &'static str)> = None;
    let mut consider = |at: Range<usize>, code: Option<&'static str>| {
        let Some(code) = code else { return };
        let distance = if at.end <= amount.start {
            amount.start - at.end
        } else {
            at.start.saturating_sub(amount.end)
        };
        if best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, code));
        }
    };
    let mut taken: Vec<Range<usize>> = Vec::new();
    for (symbol, means) in SYMBOLS {
        // Hangul and CJK currency signs sit right against the amount.
        let wordy = symbol.starts_with(|c: char| c.is_alphabetic() && (c as u32) < 0x1100);
        for (at, _) in text.match_indices(symbol) {
            let range = at..at + symbol.len();
            // `US$` took this `$` already.
            if taken
                .iter()
                .any(|t| t.start <= range.start && range.end <= t.end)
            {
                continue;
            }
            if wordy && !stands_alone(text, &range) {
                continue;
            }
            taken.push(range.clone());
            let code = match means {
                Means::Code(code) => Some(*code),
                Means::Dollar => Some(locale.map_or("USD", NumberLocale::dollar)),
                Means::Yen => Some(locale.map_or("JPY", NumberLocale::yen)),
                Means::Krone => locale.and_then(NumberLocale::krone),
            };
            consider(range, code);
        }
    }
    for (at, word) in words(text) {
        if let Some(code) = CODES.iter().find(|code| **code == word) {
            consider(at..at + word.len(), Some(code));
        }
    }
    best.map(|(_, code)| code)
}

/// Whether `range` of `text` has no letter right before or after it.
fn stands_alone(text: &str, range: &Range<usize>) -> bool {
    let before = text[..range.start].chars().next_back();
    let after = text[range.end..].chars().next();
    !before.is_some_and(char::is_alphabetic) && !after.is_some_and(char::is_alphabetic)
}

/// Runs of three ASCII capitals standing alone, with where they start.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.char_indices().filter_map(move |(at, c)| {
        if !c.is_ascii_uppercase() {
            return None;
        }
        let word = text.get(at..at + 3)?;
        (word.chars().all(|c| c.is_ascii_uppercase()) && stands_alone(text, &(at..at + 3)))
            .then_some((at, word))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn currency(text: &str, tag: Option<&str>) -> Option<&'static str> {
        let locale = tag.map(|t| NumberLocale::parse(t, "f").unwrap());
        let start = text.find(|c: char| c.is_ascii_digit()).unwrap_or(0);
        currency_of(text, start..start + 1, locale.as_ref())
    }

    #[test]
    fn symbols_and_codes_name_their_currency() {
        assert_eq!(currency("₩1,299,000", Some("ko-KR")), Some("KRW"));
        assert_eq!(currency("1.299,00 €", Some("de-DE")), Some("EUR"));
        assert_eq!(currency("$1,299", Some("en-US")), Some("USD"));
        assert_eq!(currency("$1,299", Some("en-CA")), Some("CAD"));
        assert_eq!(currency("US$ 5", Some("en-CA")), Some("USD"));
        assert_eq!(currency("1 299,00 zł", Some("pl-PL")), Some("PLN"));
        assert_eq!(currency("5,000원", None), Some("KRW"));
        assert_eq!(currency("1299 EUR", None), Some("EUR"));
        assert_eq!(currency("¥1,200", Some("zh-CN")), Some("CNY"));
        assert_eq!(currency("¥1,200", None), Some("JPY"));
        assert_eq!(currency("199 kr", Some("sv-SE")), Some("SEK"));
        assert_eq!(currency("199 kr", None), None, "a bare kr needs the locale");
        assert_eq!(currency("1299", None), None);
    }

    #[test]
    fn letters_inside_words_are_no_symbol_and_the_nearest_wins() {
        assert_eq!(
            currency("Ukraine 5", Some("sv-SE")),
            None,
            "no kr in Ukraine"
        );
        assert_eq!(currency("EURO 5", None), None);
        let text = "원피스 (one-piece) $12";
        let at = text.find('1').unwrap();
        assert_eq!(currency_of(text, at..at + 2, None), Some("USD"));
    }
}
