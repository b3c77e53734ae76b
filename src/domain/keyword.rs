//! A keyword to search, on which sites, and when.

use chrono::{DateTime, TimeDelta, Utc};
use croner::{Cron, parser::CronParser, parser::Seconds};
use serde::Deserialize;

use super::{FieldError, text};

/// Longest keyword text.
/// Longest keyword, in characters.
pub const MAX_KEYWORD_CHARS: usize = 500;
/// Longest schedule text: a cron expression is a few dozen characters.
const MAX_SCHEDULE_CHARS: usize = 200;
/// Fire times read to find a schedule's shortest interval. Its gaps repeat
/// from one minute, hour or day to the next, so the first few hundred show
/// the shortest one.
const INTERVAL_SAMPLE: usize = 512;

/// A 6-field cron expression, seconds first, parsed with the same grammar the
/// scheduler uses (croner, as tokio-cron-scheduler does).
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

    /// The shortest time between two consecutive fire times after `from`
    /// (read from the next few hundred); `None` when it fires at most once.
    /// Fails when it never fires (`0 0 0 30 2 *`).
    pub fn shortest_interval(&self, from: DateTime<Utc>) -> Result<Option<TimeDelta>, FieldError> {
        // One search after the other: croner's iterator skips a fire time
        // after each one it yields (3.0.1: `* * * * * *` comes out 2 s apart).
        let next = |after: &DateTime<Utc>| self.cron.find_next_occurrence(after, false).ok();
        let Some(mut previous) = next(&from) else {
            return Err(FieldError::new("schedule", "never fires"));
        };
        let mut shortest: Option<TimeDelta> = None;
        for _ in 1..INTERVAL_SAMPLE {
            let Some(time) = next(&previous) else { break };
            let gap = time - previous;
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            previous = time;
        }
        Ok(shortest)
    }

    /// The next `n` fire times after `from` (fewer when it stops firing).
    pub fn next_fire_times(&self, from: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        // One search after the other, as in `shortest_interval`.
        let mut times = Vec::with_capacity(n);
        let mut after = from;
        while times.len() < n {
            let Ok(time) = self.cron.find_next_occurrence(&after, false) else {
                break;
            };
            times.push(time);
            after = time;
        }
        times
    }

    /// The start of the schedule period `at` falls in: the latest fire time at or
    /// before `at`.
    pub fn period_start(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_previous_occurrence(&at, true).ok()
    }
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

/// A keyword as a client sends it; `schedule` is a 6-field cron expression,
/// seconds first, in UTC.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeywordInput {
    pub keyword: String,
    pub site_ids: Vec<i64>,
    pub schedule: String,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    #[serde(default)]
    pub priority: i32,
}

fn enabled_by_default() -> bool {
    true
}

/// A keyword that passed every rule (site ids are checked against the store).
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordSpec {
    pub keyword: String,
    pub site_ids: Vec<i64>,
    pub schedule: CronSchedule,
    pub enabled: bool,
    pub priority: i32,
}

impl KeywordInput {
    /// Checks every rule; a schedule may not fire more often than once per
    /// `min_interval` (`MIN_SCHEDULE_INTERVAL_SECS`).
    pub fn parse(self, min_interval: TimeDelta) -> Result<KeywordSpec, FieldError> {
        let keyword = text::non_empty(&self.keyword, "keyword", MAX_KEYWORD_CHARS)?;
        if self.site_ids.is_empty() {
            return Err(FieldError::new("site_ids", "must name at least one site"));
        }
        let mut site_ids = self.site_ids;
        site_ids.sort_unstable();
        site_ids.dedup();
        if !(-1000..=1000).contains(&self.priority) {
            return Err(FieldError::new(
                "priority",
                "must be between -1000 and 1000",
            ));
        }
        let schedule = CronSchedule::parse(&self.schedule)?;
        if let Some(shortest) = schedule.shortest_interval(Utc::now())?
            && shortest < min_interval
        {
            return Err(FieldError::new(
                "schedule",
                format!(
                    "fires {} s apart at times; the shortest interval allowed is {} s \
                     (MIN_SCHEDULE_INTERVAL_SECS)",
                    shortest.num_seconds(),
                    min_interval.num_seconds()
                ),
            ));
        }
        Ok(KeywordSpec {
            keyword: keyword.to_owned(),
            site_ids,
            schedule,
            enabled: self.enabled,
            priority: self.priority,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_next_fire_times_follow_one_another_without_a_gap() {
        let hourly = CronSchedule::parse("0 30 * * * *").unwrap();
        let from = Utc.with_ymd_and_hms(2026, 11, 23, 10, 45, 0).unwrap();
        let first = Utc.with_ymd_and_hms(2026, 11, 23, 11, 30, 0).unwrap();
        let expected: Vec<_> = (0..5).map(|h| first + TimeDelta::hours(h)).collect();
        assert_eq!(hourly.next_fire_times(from, 5), expected);
        let never = CronSchedule::parse("0 0 0 30 2 *").unwrap();
        assert!(never.next_fire_times(from, 5).is_empty());
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
    fn the_period_starts_at_the_latest_fire_time() {
        let daily = CronSchedule::parse("0 0 3 * * *").unwrap();
        let at = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
        assert_eq!(
            daily.period_start(at),
            Some(Utc.with_ymd_and_hms(2026, 11, 22, 3, 0, 0).unwrap())
        );
        let every5 = CronSchedule::parse("*/5 * * * * *").unwrap();
        let on_tick = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 5).unwrap();
        assert_eq!(every5.period_start(on_tick), Some(on_tick));
    }

    #[test]
    fn schedules_firing_more_often_than_the_minimum_are_refused() {
        let input = |schedule: &str| KeywordInput {
            keyword: "k".into(),
            site_ids: vec![1],
            schedule: schedule.into(),
            enabled: true,
            priority: 0,
        };
        let minute = TimeDelta::seconds(60);
        for fast in [
            "* * * * * *",
            "*/30 * * * * *",
            "0,59 * * * * *",
            "0 0,1 * * * *",
        ] {
            let limit = if fast.starts_with("0 0,1") {
                TimeDelta::hours(1)
            } else {
                minute
            };
            let err = input(fast).parse(limit).unwrap_err();
            assert_eq!(err.field, "schedule", "{fast}");
            assert!(
                err.message.contains("MIN_SCHEDULE_INTERVAL_SECS"),
                "{fast}: {}",
                err.message
            );
        }
        for fine in [
            "0 * * * * *",
            "0 */10 * * * *",
            "0 0 3 * * *",
            "0 0 0 29 2 *",
        ] {
            assert!(input(fine).parse(minute).is_ok(), "{fine}");
        }
        assert!(input("*/2 * * * * *").parse(TimeDelta::seconds(1)).is_ok());
        let never = input("0 0 0 30 2 *").parse(minute).unwrap_err();
        assert_eq!(
            (never.field.as_str(), never.message.as_str()),
            ("schedule", "never fires")
        );
    }

    #[test]
    fn site_ids_are_deduplicated() {
        let spec = KeywordInput {
            keyword: " shoes ".into(),
            site_ids: vec![3, 1, 3],
            schedule: "0 0 * * * *".into(),
            enabled: true,
            priority: 0,
        }
        .parse(TimeDelta::seconds(60))
        .unwrap();
        assert_eq!(spec.site_ids, vec![1, 3]);
        assert_eq!(spec.keyword, "shoes");
    }
}
