//! Dates by format, ISO 8601 and relative forms, in the rule's zone, across
//! the daylight-saving changes of Europe/Berlin in 2025 (clocks forward at
//! 01:00 UTC on 30 March, back at 01:00 UTC on 26 October).

use chrono::{DateTime, Utc};

use super::*;

fn rule(zone: &str, formats: &[&str]) -> DateRule {
    DateInput {
        formats: formats.iter().map(|f| (*f).to_owned()).collect(),
        time_zone: Some(zone.to_owned()),
    }
    .parse("fields.posted.date")
    .unwrap()
}

fn at(utc: &str) -> DateTime<Utc> {
    utc.parse().unwrap()
}

fn read(rule: &DateRule, text: &str, now: &str) -> Option<String> {
    rule.read(text, at(now)).map(ReadDate::to_text)
}

#[test]
fn hours_ago_count_real_hours_across_the_spring_change() {
    let berlin = rule("Europe/Berlin", &[]);
    // 03:30 CEST, half an hour after the clocks skipped 02:00-03:00.
    let now = "2025-03-30T01:30:00Z";
    assert_eq!(
        read(&berlin, "3 hours ago", now).as_deref(),
        Some("2025-03-29T23:00:00+01:00"),
        "22:30 UTC is 23:30 CET, cut to the hour; wall-clock arithmetic would say 00:30"
    );
    assert_eq!(
        read(&berlin, "vor 2 Stunden", now).as_deref(),
        Some("2025-03-30T00:00:00+01:00")
    );
    assert_eq!(
        read(&berlin, "90 minutes ago", now).as_deref(),
        Some("2025-03-30T01:00:00+01:00")
    );
}

#[test]
fn yesterday_is_the_zones_yesterday_across_the_change() {
    let berlin = rule("Europe/Berlin", &[]);
    // 00:30 CEST on 31 March, still 30 March in UTC.
    let now = "2025-03-30T22:30:00Z";
    assert_eq!(
        read(&berlin, "yesterday", now).as_deref(),
        Some("2025-03-30")
    );
    assert_eq!(read(&berlin, "gestern", now).as_deref(), Some("2025-03-30"));
    assert_eq!(read(&berlin, "today", now).as_deref(), Some("2025-03-31"));
    assert_eq!(
        read(&berlin, "2 days ago", now).as_deref(),
        Some("2025-03-29")
    );
    assert_eq!(
        read(&berlin, "yesterday, 02:30", now).as_deref(),
        Some("2025-03-30T03:00:00+02:00"),
        "a wall time the clocks skipped is the moment they jumped past it"
    );
    let utc = rule("UTC", &[]);
    assert_eq!(read(&utc, "yesterday", now).as_deref(), Some("2025-03-29"));
    let seoul = rule("Asia/Seoul", &[]);
    assert_eq!(
        read(&seoul, "어제", "2025-03-30T16:00:00Z").as_deref(),
        Some("2025-03-30")
    );
}

#[test]
fn the_two_half_past_twos_of_the_autumn_change_are_told_apart() {
    let berlin = rule("Europe/Berlin", &[]);
    // 02:30 CET, the second time the clocks show 02:30 that night.
    let now = "2025-10-26T01:30:00Z";
    assert_eq!(
        read(&berlin, "just now", now).as_deref(),
        Some("2025-10-26T02:30:00+01:00")
    );
    assert_eq!(
        read(&berlin, "1 hour ago", now).as_deref(),
        Some("2025-10-26T02:00:00+02:00"),
        "00:30 UTC is the first 02:30 (CEST), cut to 02:00 CEST"
    );
    assert_eq!(
        read(&berlin, "2 weeks ago", now).as_deref(),
        Some("2025-10-12")
    );
    assert_eq!(
        read(&berlin, "1 month ago", "2025-03-31T10:00:00Z").as_deref(),
        Some("2025-02-28"),
        "a month back from 31 March is the end of February"
    );
}

#[test]
fn formats_come_first_then_iso_8601_and_rfc_2822() {
    let berlin = rule(
        "Europe/Berlin",
        &["%d.%m.%Y %H:%M", "%d.%m.%Y", "%B %d, %Y"],
    );
    let now = "2025-06-01T12:00:00Z";
    assert_eq!(
        read(&berlin, "04.03.2025 10:15", now).as_deref(),
        Some("2025-03-04T10:15:00+01:00")
    );
    assert_eq!(
        read(&berlin, "04.03.2025", now).as_deref(),
        Some("2025-03-04")
    );
    assert_eq!(
        read(&berlin, "March 4, 2025", now).as_deref(),
        Some("2025-03-04")
    );
    assert_eq!(
        read(&berlin, "2025-03-04T10:00:00Z", now).as_deref(),
        Some("2025-03-04T11:00:00+01:00"),
        "an offset is kept as the instant, shown in the zone"
    );
    assert_eq!(
        read(&berlin, "2025-07-04 10:00", now).as_deref(),
        Some("2025-07-04T10:00:00+02:00")
    );
    assert_eq!(
        read(&berlin, " 2025-03-04 ", now).as_deref(),
        Some("2025-03-04")
    );
    assert_eq!(
        read(&berlin, "Tue, 4 Mar 2025 10:00:00 +0000", now).as_deref(),
        Some("2025-03-04T11:00:00+01:00")
    );
    let utc = rule("UTC", &[]);
    assert_eq!(
        read(&utc, "2025-03-04T10:00:00+09:00", now).as_deref(),
        Some("2025-03-04T01:00:00Z")
    );
    for text in ["", "soon", "32.13.2025", "3 parsecs ago", "99999 years ago"] {
        assert_eq!(read(&berlin, text, now), None, "{text}");
    }
}

#[test]
fn bad_formats_and_zones_are_refused_naming_their_path() {
    let parse = |formats: Vec<String>, zone: Option<&str>| {
        DateInput {
            formats,
            time_zone: zone.map(str::to_owned),
        }
        .parse("fields.posted.date")
    };
    for (format, says) in [
        ("%Q", "strftime"),
        ("%Y-%", "strftime"),
        ("posted on", "names no part"),
        ("", "empty"),
    ] {
        let err = parse(vec!["%Y".into(), format.into()], None).unwrap_err();
        assert_eq!(err.field, "fields.posted.date.formats[1]", "{format:?}");
        assert!(err.message.contains(says), "{format:?}: {}", err.message);
    }
    let long = format!("%Y{}", "x".repeat(200));
    assert!(parse(vec![long], None).is_err());
    let many = vec!["%Y".to_owned(); MAX_FORMATS + 1];
    assert_eq!(
        parse(many, None).unwrap_err().field,
        "fields.posted.date.formats"
    );
    for zone in ["Mars/Olympus", "europe/berlin", "", "Asia/\u{0}Seoul"] {
        let err = parse(vec![], Some(zone)).unwrap_err();
        assert_eq!(err.field, "fields.posted.date.time_zone", "{zone:?}");
    }
}

#[test]
fn a_rule_is_stored_with_its_zone_by_name() {
    let seoul = rule("Asia/Seoul", &["%Y.%m.%d"]);
    let stored = serde_json::to_value(&seoul).unwrap();
    assert_eq!(
        stored,
        serde_json::json!({"formats": ["%Y.%m.%d"], "time_zone": "Asia/Seoul"})
    );
    assert_eq!(serde_json::from_value::<DateRule>(stored).unwrap(), seoul);
    let bare: DateRule = serde_json::from_value(serde_json::json!({})).unwrap();
    assert_eq!(bare.time_zone, Tz::UTC);
}
