//! A keyword to search, on which sites, and when.

use chrono::TimeDelta;
use serde::Deserialize;
use utoipa::ToSchema;

use super::{
    FieldError,
    schedule::{KeywordSchedule, Timezone},
    text,
};

/// Longest keyword, in characters.
pub const MAX_KEYWORD_CHARS: usize = 500;
/// A keyword as a client sends it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeywordInput {
    pub keyword: String,
    pub site_ids: Vec<i64>,
    /// 6-field cron expression, seconds first (`0 0 6 * * *`: 06:00 every
    /// day), read on the clocks of `timezone`. A time the clocks skip (set
    /// forward) fires when they jump past it; a time they show twice (set
    /// back) fires the first time only.
    #[schema(example = "0 0 6 * * *")]
    pub schedule: String,
    /// IANA time zone the schedule is read in.
    #[serde(default = "utc")]
    #[schema(default = "UTC", example = "Asia/Seoul")]
    pub timezone: String,
    /// Spreads keywords on the same cron: each fire of this keyword is
    /// delayed by a fixed share of this many seconds (0 to 3600, and shorter
    /// than the schedule's shortest interval).
    #[serde(default)]
    #[schema(default = 0, minimum = 0, maximum = 3600)]
    pub jitter_secs: i64,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    #[serde(default)]
    pub priority: i32,
}

fn enabled_by_default() -> bool {
    true
}

fn utc() -> String {
    Timezone::UTC.name().to_owned()
}

/// A keyword that passed every rule (site ids are checked against the store).
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordSpec {
    pub keyword: String,
    pub site_ids: Vec<i64>,
    pub schedule: KeywordSchedule,
    pub enabled: bool,
    pub priority: i32,
}

impl KeywordInput {
    /// Checks every rule, the schedule's by [`KeywordSchedule::checked`].
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
        let schedule = KeywordSchedule::checked(
            &self.schedule,
            &self.timezone,
            self.jitter_secs,
            min_interval,
        )?;
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
    use crate::domain::schedule::Jitter;

    fn input(schedule: &str) -> KeywordInput {
        KeywordInput {
            keyword: "k".into(),
            site_ids: vec![1],
            schedule: schedule.into(),
            timezone: utc(),
            jitter_secs: 0,
            enabled: true,
            priority: 0,
        }
    }

    #[test]
    fn schedules_firing_more_often_than_the_minimum_are_refused() {
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
            ..input("0 0 * * * *")
        }
        .parse(TimeDelta::seconds(60))
        .unwrap();
        assert_eq!(spec.site_ids, vec![1, 3]);
        assert_eq!(spec.keyword, "shoes");
    }

    #[test]
    fn a_keyword_is_in_utc_without_jitter_unless_it_says_otherwise() {
        let body = r#"{"keyword": "k", "site_ids": [1], "schedule": "0 0 6 * * *"}"#;
        let plain: KeywordInput = serde_json::from_str(body).unwrap();
        let spec = plain.parse(TimeDelta::seconds(60)).unwrap();
        assert_eq!(spec.schedule.zone(), Timezone::UTC);
        assert_eq!(spec.schedule.jitter(), Jitter::default());
        let seoul = KeywordInput {
            timezone: "Asia/Seoul".into(),
            jitter_secs: 600,
            ..input("0 0 6 * * *")
        }
        .parse(TimeDelta::seconds(60))
        .unwrap();
        assert_eq!(seoul.schedule.zone().name(), "Asia/Seoul");
        assert_eq!(seoul.schedule.jitter().secs(), 600);
    }

    #[test]
    fn an_unknown_zone_or_a_jitter_out_of_bounds_is_refused_naming_the_field() {
        let minute = TimeDelta::seconds(60);
        let zone = KeywordInput {
            timezone: "Korea/Seoul".into(),
            ..input("0 0 6 * * *")
        };
        assert_eq!(zone.parse(minute).unwrap_err().field, "timezone");
        for jitter in [-1, 3601] {
            let err = KeywordInput {
                jitter_secs: jitter,
                ..input("0 0 6 * * *")
            }
            .parse(minute)
            .unwrap_err();
            assert_eq!(err.field, "jitter_secs", "{jitter}");
        }
        // Every 10 minutes: a 10-minute jitter would push a fire into the next period.
        let err = KeywordInput {
            jitter_secs: 600,
            ..input("0 */10 * * * *")
        }
        .parse(minute)
        .unwrap_err();
        assert_eq!(err.field, "jitter_secs");
        assert!(err.message.contains("600 s"), "{err}");
        let fits = KeywordInput {
            jitter_secs: 599,
            ..input("0 */10 * * * *")
        };
        assert!(fits.parse(minute).is_ok());
    }
}
