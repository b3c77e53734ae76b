//! Value rules under any input: settings parse or name their path; accepted
//! rules apply to any value a page or an API holds, at any time, in any zone,
//! without a panic; and an accepted pattern matches the longest value a
//! field may hold within a bound (the `regex` crate is linear in the text;
//! what compiles is bounded in size).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use crawlfleet::domain::value::{
    DateInput, MAX_LIST_VALUES, MAX_PATTERN_CHARS, NumberInput, NumberLocale, Pattern,
    ValueContext, ValueInput, ValueKind, read_number,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{config, text, value, zone};

/// The longest text a field keeps by default (`FIELD_MAX_CHARS`), as bytes
/// of a four-byte character at worst.
const LONGEST_VALUE: usize = 10_000;
/// What matching the longest value may take, in a debug build on a loaded
/// machine (release takes a tenth of it).
const MATCH_BOUND: Duration = Duration::from_secs(3);

/// Locale tags: real ones, near misses and anything.
fn locale() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(
            &[
                "ko-KR", "de-DE", "en-US", "fr-FR", "pl-PL", "de-CH", "ja-JP", "en-IN", "pt-PT"
            ][..]
        )
        .prop_map(str::to_owned),
        Just("xx-XX".to_owned()),
        Just("en--US".to_owned()),
        text(40),
    ]
}

/// chrono formats: real ones, broken ones and anything.
fn format() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(
            &[
                "%Y-%m-%d",
                "%d.%m.%Y %H:%M",
                "%B %d, %Y",
                "%H:%M",
                "%s",
                "%Y-%m-%dT%H:%M:%S%z",
                "%",
                "%Q",
                "%E"
            ][..]
        )
        .prop_map(str::to_owned),
        text(30),
    ]
}

/// Patterns that cost the most a regex engine can be asked for: nested
/// repetition, alternations of the same thing, counted repetition of big
/// classes, and anything.
fn pattern() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just(r"(a+)+".to_owned()),
        Just(r"(a|a)*".to_owned()),
        Just(r"(a|aa)+$".to_owned()),
        Just(r"\w".to_owned()),
        Just(r"\p{L}".to_owned()),
        Just(r"[^\n]".to_owned()),
        Just(r".".to_owned()),
        Just(r"(?i)[a-zß]".to_owned()),
        Just(r"\b".to_owned()),
        (1u32..300).prop_map(|n| format!("{{{n}}}")),
        (1u32..50, 1u32..50).prop_map(|(a, b)| format!("{{{a},{b}}}")),
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just("*".to_owned()),
        Just("|".to_owned()),
        text(6),
    ];
    let class = proptest::sample::select(
        &[
            "a",
            "[a-z]",
            r"\w",
            ".",
            "(?:[a-z]|é)",
            "(?i:[a-zé])",
            "(?:a|ab|é)",
            "[^!]",
            r"\p{L}",
        ][..],
    );
    // What resolving a match's groups costs most: a big program over a long match.
    let costly = (
        class,
        1u32..400,
        proptest::sample::select(&["+$", "+!", r"\s?)+$"][..]),
    )
        .prop_map(|(class, n, tail)| match tail {
            r"\s?)+$" => format!("(?:({class}{{1,{n}}}){tail}"),
            tail => format!("({class}{{1,{n}}}){tail}"),
        });
    prop_oneof![
        proptest::collection::vec(piece, 1..12).prop_map(|p| p.concat()),
        (1usize..80).prop_map(|depth| format!("{}a{}", "(?:".repeat(depth), ")*".repeat(depth))),
        (1u32..40, 1u32..40).prop_map(|(a, b)| format!(r"(?:\w{{{a}}}){{{b}}}")),
        costly,
    ]
}

/// Texts a value may hold: one character repeated (what backtracking
/// engines choke on), prices, dates, and anything.
fn raw_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (1usize..200).prop_map(|n| format!("{}!", "a".repeat(n))),
        proptest::sample::select(
            &[
                "₩1,299,000",
                "1.299,00 €",
                "$1,299",
                "1 299,00 zł",
                "-$5",
                "１，２９９円",
                "3 hours ago",
                "yesterday, 14:30",
                "vor 3 Stunden",
                "3시간 전",
                "99999999 years ago",
                "2025-03-30T02:30:00",
                "Tue, 4 Mar 2025 10:00:00 +0000",
                "999999999999999999999999",
                "0.0000000000000000000000001",
                "1e308",
                "NaN",
                "",
            ][..]
        )
        .prop_map(str::to_owned),
        text(80),
    ]
}

/// What extraction may hand over: a text, null, a list of texts (`all`),
/// or any JSON an API holds.
fn raw_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => raw_text().prop_map(Value::from),
        1 => Just(Value::Null),
        2 => proptest::collection::vec(raw_text().prop_map(Value::from), 0..150).prop_map(Value::from),
        1 => value(),
    ]
}

fn settings() -> impl Strategy<Value = ValueInput> {
    (
        proptest::option::of(prop_oneof![
            Just("collapse".to_owned()),
            Just("keep".to_owned()),
            text(10)
        ]),
        proptest::option::of(prop_oneof![pattern(), Just(r"(\d[\d,.]*)".to_owned())]),
        proptest::option::of(any::<bool>()),
        proptest::option::of(
            (
                proptest::option::of(locale()),
                proptest::option::of(text(12)),
            )
                .prop_map(|(locale, currency_field)| NumberInput {
                    locale,
                    currency_field,
                }),
        ),
        proptest::option::of(
            (
                proptest::collection::vec(format(), 0..12),
                proptest::option::of(zone()),
            )
                .prop_map(|(formats, time_zone)| DateInput { formats, time_zone }),
        ),
        proptest::option::of(value()),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(
            |(whitespace, regex, all, number, date, default, required)| ValueInput {
                whitespace,
                regex,
                all,
                number,
                date,
                default,
                required,
            },
        )
}

/// Any instant chrono holds, mostly near now.
fn now() -> impl Strategy<Value = DateTime<Utc>> {
    prop_oneof![
        3 => (0i64..4_000_000_000).prop_map(|s| DateTime::from_timestamp(s, 0).unwrap()),
        1 => (-8_000_000_000_000i64..8_000_000_000_000).prop_map(|s| {
            DateTime::from_timestamp(s, 0).unwrap_or(DateTime::<Utc>::MIN_UTC)
        }),
        1 => Just(DateTime::<Utc>::MAX_UTC),
        1 => Just(DateTime::<Utc>::MIN_UTC),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// Rules parse or name their path under `fields.f`; accepted ones apply
    /// to anything: a list stays within its bound, a number is a number.
    #[test]
    fn value_rules_parse_or_name_their_path_and_apply_to_anything(
        input in settings(),
        link in any::<bool>(),
        raw in raw_value(),
        now in now(),
    ) {
        let rules = match input.parse("fields.f", link) {
            Ok(rules) => rules,
            Err(e) => {
                prop_assert!(e.field.starts_with("fields.f."), "{}", e.field);
                return Ok(());
            }
        };
        let base = url::Url::parse("http://shop.example/list?q=a").unwrap();
        let typed = rules.apply(&raw, link, &ValueContext { base: &base, now });
        if rules.all {
            let list = typed.value.as_array();
            prop_assert!(list.is_some() || rules.default.is_some(), "{:?}", typed.value);
            prop_assert!(list.is_none_or(|l| l.len() <= MAX_LIST_VALUES));
        }
        if matches!(rules.kind, ValueKind::Number(_)) && !rules.all && rules.default.is_none() {
            prop_assert!(typed.value.is_null() || typed.value.is_number(), "{:?}", typed.value);
        }
        prop_assert_eq!(typed.error.is_some(), typed.unparsed > 0);
    }

    /// Any text in any locale is a number or is not; an integer is exact.
    #[test]
    fn numbers_are_read_from_any_text_in_any_locale(raw in raw_text(), tag in locale(), n in any::<i32>()) {
        let locale = NumberLocale::parse(&tag, "f").ok();
        let _ = read_number(&raw, locale.as_ref(), true);
        let written = n.to_string();
        prop_assert_eq!(read_number(&written, locale.as_ref(), false).map(|r| json!(r.value)), Ok(json!(n)));
    }

    /// An accepted pattern matches the longest value a field holds, of the
    /// text that costs it most, within the bound.
    #[test]
    fn accepted_patterns_match_the_longest_value_within_a_bound(source in pattern()) {
        let Ok(pattern) = Pattern::parse(&source, "fields.f.regex") else {
            return Ok(());
        };
        prop_assert!(source.chars().count() <= MAX_PATTERN_CHARS);
        for text in [format!("{}!", "a".repeat(LONGEST_VALUE)), "é".repeat(LONGEST_VALUE), "ab ".repeat(LONGEST_VALUE / 3)] {
            let started = Instant::now();
            let found = pattern.values(&text, true).unwrap();
            let took = started.elapsed();
            prop_assert!(took < MATCH_BOUND, "{source:?} took {took:?} over {} bytes", text.len());
            prop_assert!(found.len() <= text.len() + 1);
        }
    }
}
