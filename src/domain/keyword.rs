//! A keyword to search, on which sites, and when.

use chrono::{DateTime, Utc};
use croner::{Cron, parser::CronParser, parser::Seconds};
use serde::Deserialize;

use super::FieldError;

/// A 6-field cron expression, seconds first, parsed with the same grammar the
/// scheduler uses (croner, as tokio-cron-scheduler does).
#[derive(Debug, Clone)]
pub struct CronSchedule {
    text: String,
    cron: Cron,
}

impl CronSchedule {
    pub fn parse(text: &str) -> Result<Self, FieldError> {
        let text = text.trim();
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

    /// The start of the schedule period `at` falls in: the latest fire time at or
    /// before `at`.
    pub fn period_start(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_previous_occurrence(&at, true).ok()
    }
}

impl PartialEq for CronSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

/// A keyword as a client sends it; `schedule` is a 6-field cron expression,
/// seconds first, in UTC.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
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
    pub fn parse(self) -> Result<KeywordSpec, FieldError> {
        let keyword = self.keyword.trim();
        if keyword.is_empty() || keyword.chars().count() > 500 {
            return Err(FieldError::new("keyword", "must be 1 to 500 characters"));
        }
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
        Ok(KeywordSpec {
            keyword: keyword.to_owned(),
            site_ids,
            schedule: CronSchedule::parse(&self.schedule)?,
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
    fn site_ids_are_deduplicated() {
        let spec = KeywordInput {
            keyword: " shoes ".into(),
            site_ids: vec![3, 1, 3],
            schedule: "0 0 * * * *".into(),
            enabled: true,
            priority: 0,
        }
        .parse()
        .unwrap();
        assert_eq!(spec.site_ids, vec![1, 3]);
        assert_eq!(spec.keyword, "shoes");
    }
}
