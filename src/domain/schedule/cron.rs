//! A 6-field cron expression read on a wall clock: dates and times without a
//! zone. The zone is applied by `KeywordSchedule`, one wall time at a time.

use chrono::{NaiveDateTime, TimeDelta, Timelike};
use croner::{Cron, parser::CronParser, parser::Seconds};

use crate::domain::{FieldError, text};

/// Longest schedule text: a cron expression is a few dozen characters.
const MAX_SCHEDULE_CHARS: usize = 200;
/// Fire times read to find a schedule's shortest interval. Its gaps repeat
/// from one minute, hour or day to the next, so the first few hundred show
/// the shortest one.
const INTERVAL_SAMPLE: usize = 512;

/// A 6-field cron expression, seconds first, parsed with croner.
///
/// croner is only ever asked about wall times dressed as UTC, a clock without
/// daylight-saving changes: asked in a zone with them, croner 3.0.1 gives the
/// same instant twice around a spring-forward gap. The zone is applied after,
/// by `Timezone::instant_of`.
#[derive(Clone)]
pub struct CronSchedule {
    text: String,
    cron: Cron,
}

impl CronSchedule {
    pub fn parse(text: &str) -> Result<Self, FieldError> {
        let text = text::non_empty(text, "schedule", MAX_SCHEDULE_CHARS)?;
        let fields = text.split_whitespace().count();
        if fields != 6 {
            return Err(FieldError::new(
                "schedule",
                format!("must have 6 fields (seconds first), found {fields}"),
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .dom_and_dow(true)
            .build()
            .parse(text)
            .map_err(|e| {
                FieldError::new("schedule", format!("is not a valid cron expression: {e}"))
            })?;
        Ok(Self {
            text: text.to_owned(),
            cron,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The first wall time the expression matches strictly after `wall`;
    /// `None` when it never matches again.
    pub fn next_after(&self, wall: NaiveDateTime) -> Option<NaiveDateTime> {
        // One search after the other, never croner's iterator: it skips a
        // fire time after each one it yields (3.0.1: `* * * * * *` comes out
        // 2 s apart).
        self.cron
            .find_next_occurrence(&whole_second(wall).and_utc(), false)
            .ok()
            .map(|t| t.naive_utc())
    }

    /// The latest wall time the expression matches at or before `wall`.
    pub fn latest_at_or_before(&self, wall: NaiveDateTime) -> Option<NaiveDateTime> {
        self.cron
            .find_previous_occurrence(&whole_second(wall).and_utc(), true)
            .ok()
            .map(|t| t.naive_utc())
    }

    /// The latest wall time the expression matches strictly before `wall`,
    /// a whole second (a time it matched).
    pub fn latest_before(&self, wall: NaiveDateTime) -> Option<NaiveDateTime> {
        self.cron
            .find_previous_occurrence(&whole_second(wall).and_utc(), false)
            .ok()
            .map(|t| t.naive_utc())
    }

    /// The shortest wall-clock time between two consecutive matches after
    /// `from` (read from the next few hundred); `None` when it matches at most
    /// once. Fails when it never matches (`0 0 0 30 2 *`).
    pub fn shortest_interval(&self, from: NaiveDateTime) -> Result<Option<TimeDelta>, FieldError> {
        let Some(mut previous) = self.next_after(from) else {
            return Err(FieldError::new("schedule", "never fires"));
        };
        let mut shortest: Option<TimeDelta> = None;
        for _ in 1..INTERVAL_SAMPLE {
            let Some(time) = self.next_after(previous) else {
                break;
            };
            let gap = time - previous;
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            previous = time;
        }
        Ok(shortest)
    }
}

/// `wall` without its fraction of a second. Matches are whole seconds, and
/// croner 3.0.1 keeps the fraction it is given (after 10:00:00.5 it answers
/// 10:00:01.5).
fn whole_second(wall: NaiveDateTime) -> NaiveDateTime {
    wall.with_nanosecond(0).unwrap_or(wall)
}

/// Only the text: the parsed form is kilobytes of bit fields.
impl std::fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CronSchedule").field(&self.text).finish()
    }
}

impl PartialEq for CronSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    fn wall(h: u32, m: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2026, 11, 23)
            .unwrap()
            .and_hms_opt(h, m, s)
            .unwrap()
    }

    #[test]
    fn five_field_cron_is_refused_with_a_reason() {
        let err = CronSchedule::parse("*/5 * * * *").unwrap_err();
        assert_eq!(err.field, "schedule");
        assert!(err.message.contains("6 fields"));
    }

    #[test]
    fn nonsense_cron_is_refused() {
        assert!(CronSchedule::parse("99 * * * * *").is_err());
        assert!(CronSchedule::parse("a b c d e f").is_err());
    }

    #[test]
    fn matches_are_searched_strictly_after_and_at_or_before() {
        let hourly = CronSchedule::parse("0 30 * * * *").unwrap();
        assert_eq!(hourly.next_after(wall(10, 45, 0)), Some(wall(11, 30, 0)));
        assert_eq!(hourly.next_after(wall(11, 30, 0)), Some(wall(12, 30, 0)));
        assert_eq!(
            hourly.latest_at_or_before(wall(11, 30, 0)),
            Some(wall(11, 30, 0))
        );
        assert_eq!(hourly.latest_before(wall(11, 30, 0)), Some(wall(10, 30, 0)));
        let every_second = CronSchedule::parse("* * * * * *").unwrap();
        let half = wall(10, 0, 0) + TimeDelta::milliseconds(500);
        assert_eq!(every_second.next_after(half), Some(wall(10, 0, 1)));
        assert_eq!(
            every_second.next_after(wall(10, 0, 0)),
            Some(wall(10, 0, 1))
        );
        let never = CronSchedule::parse("0 0 0 30 2 *").unwrap();
        assert_eq!(never.next_after(wall(10, 0, 0)), None);
    }
}
