//! The IANA time zone a keyword's schedule is read in, and how a wall time in
//! it becomes one instant across daylight-saving changes.

use chrono::{
    DateTime, LocalResult, NaiveDateTime, Offset, SecondsFormat, TimeDelta, TimeZone, Utc,
};
use chrono_tz::{TZ_VARIANTS, Tz};

use crate::domain::{FieldError, text};

/// Longest zone name: the longest IANA name is 32 characters.
const MAX_ZONE_CHARS: usize = 64;
/// The furthest ahead of UTC a zone's clocks are (+14:00, Pacific/Kiritimati)…
const MOST_AHEAD: TimeDelta = TimeDelta::hours(14);
/// …and the furthest behind (-12:00).
const MOST_BEHIND: TimeDelta = TimeDelta::hours(12);

/// An IANA time zone (`Asia/Seoul`, `America/New_York`, `UTC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timezone(Tz);

impl Timezone {
    pub const UTC: Timezone = Timezone(Tz::UTC);

    /// Its IANA name, exactly; a wrong case is refused with the right one.
    pub fn parse(name: &str) -> Result<Self, FieldError> {
        let name = text::non_empty(name, "timezone", MAX_ZONE_CHARS)?;
        if let Ok(tz) = name.parse::<Tz>() {
            return Ok(Timezone(tz));
        }
        let message = match TZ_VARIANTS
            .iter()
            .find(|tz| tz.name().eq_ignore_ascii_case(name))
        {
            Some(tz) => format!("is not an IANA time zone name; did you mean {}?", tz.name()),
            None => {
                "is not an IANA time zone name (e.g. Asia/Seoul, America/New_York, UTC)".to_owned()
            }
        };
        Err(FieldError::new("timezone", message))
    }

    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// What the zone's clocks show at `at`.
    pub fn wall_time(&self, at: DateTime<Utc>) -> NaiveDateTime {
        at.with_timezone(&self.0).naive_local()
    }

    /// `at` as the zone's clocks show it, RFC 3339 with the offset then in
    /// force (`2026-11-26T06:00:00+09:00`).
    pub fn local_rfc3339(&self, at: DateTime<Utc>) -> String {
        at.with_timezone(&self.0)
            .to_rfc3339_opts(SecondsFormat::Secs, false)
    }

    /// How far ahead of UTC the zone's clocks are at `at`.
    fn offset_at(&self, at: DateTime<Utc>) -> TimeDelta {
        let offset = self.0.offset_from_utc_datetime(&at.naive_utc()).fix();
        TimeDelta::seconds(offset.local_minus_utc().into())
    }

    /// How far the clocks were set back lately (zero when they were not): the
    /// clocks have shown at most this much later a wall time than they show
    /// at `at`. A setback further back than the span of all offsets (26 h)
    /// has been caught up with.
    pub fn recently_set_back(&self, at: DateTime<Utc>) -> TimeDelta {
        let before = at - (MOST_AHEAD + MOST_BEHIND);
        (self.offset_at(before) - self.offset_at(at)).max(TimeDelta::zero())
    }

    /// The first instant the zone's clocks show `wall` or later. A wall time
    /// shown twice (clocks set back) is its first showing; one never shown
    /// (clocks set forward over it) is the instant the clocks jump past it.
    /// So a later wall time is never an earlier instant.
    pub fn instant_of(&self, wall: NaiveDateTime) -> DateTime<Utc> {
        match self.0.from_local_datetime(&wall) {
            LocalResult::Single(at) => at.with_timezone(&Utc),
            LocalResult::Ambiguous(first, _) => first.with_timezone(&Utc),
            LocalResult::None => self.jump_past(wall),
        }
    }

    /// The instant the clocks jumped over `wall` (a wall time never shown):
    /// the first instant showing a later one. Found by bisection between two
    /// instants that surely show an earlier and a later wall time; zone
    /// transitions fall on whole seconds.
    fn jump_past(&self, wall: NaiveDateTime) -> DateTime<Utc> {
        let as_utc = wall.and_utc();
        let margin = TimeDelta::hours(1);
        let mut before = (as_utc - MOST_AHEAD - margin).timestamp();
        let mut after = (as_utc + MOST_BEHIND + margin).timestamp();
        let shows_later = |second: i64| {
            let at = DateTime::from_timestamp(second, 0).expect("within chrono's range");
            self.wall_time(at) > wall
        };
        while after - before > 1 {
            let middle = before + (after - before) / 2;
            if shows_later(middle) {
                after = middle;
            } else {
                before = middle;
            }
        }
        DateTime::from_timestamp(after, 0).expect("within chrono's range")
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    fn wall(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap()
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        wall(y, mo, d, h, mi).and_utc()
    }

    #[test]
    fn an_unknown_zone_is_refused_naming_the_field() {
        for bad in ["Mars/Olympus", "", "KST", "Asia/Seoul\n"] {
            let err = Timezone::parse(bad).unwrap_err();
            assert_eq!(err.field, "timezone", "{bad:?}");
        }
        let err = Timezone::parse("asia/seoul").unwrap_err();
        assert!(err.message.contains("did you mean Asia/Seoul?"), "{err}");
        assert_eq!(Timezone::parse("Asia/Seoul").unwrap().name(), "Asia/Seoul");
        assert_eq!(Timezone::parse(" UTC ").unwrap(), Timezone::UTC);
    }

    #[test]
    fn a_wall_time_is_the_first_instant_the_clocks_show_it() {
        let seoul = Timezone::parse("Asia/Seoul").unwrap();
        assert_eq!(
            seoul.instant_of(wall(2026, 11, 26, 6, 0)),
            utc(2026, 11, 25, 21, 0)
        );
        let new_york = Timezone::parse("America/New_York").unwrap();
        // 8 March 2026: 02:00 EST becomes 03:00 EDT (07:00 UTC); 02:30 is never shown.
        assert_eq!(
            new_york.instant_of(wall(2026, 3, 8, 2, 30)),
            utc(2026, 3, 8, 7, 0)
        );
        assert_eq!(
            new_york.instant_of(wall(2026, 3, 8, 3, 0)),
            utc(2026, 3, 8, 7, 0)
        );
        // 1 November 2026: 02:00 EDT becomes 01:00 EST; 01:30 is shown twice.
        assert_eq!(
            new_york.instant_of(wall(2026, 11, 1, 1, 30)),
            utc(2026, 11, 1, 5, 30)
        );
        assert_eq!(
            new_york.local_rfc3339(utc(2026, 11, 1, 6, 30)),
            "2026-11-01T01:30:00-05:00"
        );
        assert_eq!(
            new_york.recently_set_back(utc(2026, 11, 1, 6, 30)),
            TimeDelta::hours(1)
        );
        assert_eq!(
            new_york.recently_set_back(utc(2026, 3, 8, 8, 0)),
            TimeDelta::zero()
        );
    }
}
