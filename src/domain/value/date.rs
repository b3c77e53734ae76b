//! A date or time in a page's text: by the site's formats (chrono's
//! `strftime` syntax), as ISO 8601 / RFC 3339 or RFC 2822, or relative to now
//! (`3 hours ago`, `yesterday`: see [`super::relative`]), all in the rule's
//! time zone. A date comes out as `2026-03-29`; a time as RFC 3339 with the
//! zone's offset then in force (`2026-03-29T23:00:00+01:00`). A relative
//! time keeps the precision its unit has (`3 hours ago` to the hour), so a
//! page read again an hour later gives the same value.

use chrono::{
    DateTime, Datelike, Months, NaiveDate, NaiveDateTime, NaiveTime, SecondsFormat, TimeDelta,
    TimeZone, Timelike, Utc,
    format::{Item, StrftimeItems},
};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    super::{FieldError, schedule::Timezone, text},
    relative::{Relative, Unit, read_relative},
};

/// Most formats one rule may try.
pub const MAX_FORMATS: usize = 10;
/// Longest format, in characters.
const MAX_FORMAT_CHARS: usize = 100;

/// How a field's dates are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DateRule {
    /// Tried in order, before ISO 8601 and the relative forms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub formats: Vec<String>,
    /// Dates without an offset are in this zone, and "yesterday" is its
    /// yesterday (default UTC).
    #[serde(default = "utc", with = "zone_name")]
    pub time_zone: Tz,
}

fn utc() -> Tz {
    Tz::UTC
}

/// How a field's dates are read: the `formats` in order, then ISO 8601 /
/// RFC 3339 and RFC 2822, then relative forms (`3 hours ago`, `yesterday`,
/// `vor 2 Tagen`, `3시간 전`), in `time_zone`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DateRule)]
pub struct DateInput {
    /// chrono `strftime` formats (`%d.%m.%Y %H:%M`), at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub formats: Vec<String>,
    /// The IANA zone the site's dates are in (default `UTC`): a wall time is
    /// read there, and "yesterday" is its yesterday.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

impl DateInput {
    /// Checks each format and the zone; `path` is the rule's (`fields.x.date`).
    pub fn parse(self, path: &str) -> Result<DateRule, FieldError> {
        if self.formats.len() > MAX_FORMATS {
            return Err(FieldError::new(
                format!("{path}.formats"),
                format!("at most {MAX_FORMATS} formats"),
            ));
        }
        for (i, format) in self.formats.iter().enumerate() {
            check_format(format, &format!("{path}.formats[{i}]"))?;
        }
        let time_zone = match self.time_zone {
            Some(name) => {
                let field = format!("{path}.time_zone");
                text::check(&name, &field, 64)?;
                let zone =
                    Timezone::parse(&name).map_err(|e| FieldError::new(&field, e.message))?;
                zone.name().parse::<Tz>().unwrap_or(Tz::UTC)
            }
            None => Tz::UTC,
        };
        Ok(DateRule {
            formats: self.formats,
            time_zone,
        })
    }
}

fn check_format(format: &str, field: &str) -> Result<(), FieldError> {
    text::non_empty(format, field, MAX_FORMAT_CHARS)?;
    let mut names_a_part = false;
    for item in StrftimeItems::new(format) {
        match item {
            Item::Error => {
                return Err(FieldError::new(
                    field,
                    "is not a strftime format (chrono's: %Y-%m-%d %H:%M; a literal % is %%)",
                ));
            }
            Item::Numeric(..) | Item::Fixed(..) => names_a_part = true,
            _ => {}
        }
    }
    if !names_a_part {
        return Err(FieldError::new(
            field,
            "names no part of a date or time (e.g. %d.%m.%Y)",
        ));
    }
    Ok(())
}

/// A date or a time, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadDate {
    Date(NaiveDate),
    Time(DateTime<Tz>),
}

impl ReadDate {
    fn year(&self) -> i32 {
        match self {
            ReadDate::Date(date) => date.year(),
            ReadDate::Time(time) => time.year(),
        }
    }

    /// As it is stored: `2026-03-29`, or RFC 3339 with the zone's offset.
    pub fn to_text(self) -> String {
        match self {
            ReadDate::Date(date) => date.format("%Y-%m-%d").to_string(),
            ReadDate::Time(time) => time.to_rfc3339_opts(SecondsFormat::Secs, true),
        }
    }
}

impl DateRule {
    /// The date `text` names, `now` being the time of reading; `None` when
    /// it names none (or one out of chrono's range).
    pub fn read(&self, text: &str, now: DateTime<Utc>) -> Option<ReadDate> {
        let text = text.trim();
        let zone = self.time_zone;
        let today = now.with_timezone(&zone).date_naive();
        self.formats
            .iter()
            .find_map(|format| by_format(text, format, zone, today))
            .or_else(|| iso(text, zone))
            .or_else(|| relative(read_relative(text)?, zone, now))
            // ISO 8601's four-digit years: `99999 years ago` is no date.
            .filter(|read| (1..=9999).contains(&read.year()))
    }
}

fn by_format(text: &str, format: &str, zone: Tz, today: NaiveDate) -> Option<ReadDate> {
    if let Ok(time) = DateTime::parse_from_str(text, format) {
        return Some(ReadDate::Time(time.with_timezone(&zone)));
    }
    if let Ok(wall) = NaiveDateTime::parse_from_str(text, format) {
        return Some(ReadDate::Time(local(wall, zone)?));
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, format) {
        return Some(ReadDate::Date(date));
    }
    let time = NaiveTime::parse_from_str(text, format).ok()?;
    Some(ReadDate::Time(local(today.and_time(time), zone)?))
}

/// ISO 8601 / RFC 3339 (an offset kept, a wall time in the zone), a bare
/// `YYYY-MM-DD`, or RFC 2822 (feeds).
fn iso(text: &str, zone: Tz) -> Option<ReadDate> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .or_else(|_| DateTime::parse_from_rfc2822(text))
    {
        return Some(ReadDate::Time(time.with_timezone(&zone)));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(wall) = NaiveDateTime::parse_from_str(text, format) {
            return Some(ReadDate::Time(local(wall, zone)?));
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .map(ReadDate::Date)
}

/// The instant a wall time in `zone` is: the first of two (clocks set
/// back), or the moment the clocks jump past one never shown.
fn local(wall: NaiveDateTime, zone: Tz) -> Option<DateTime<Tz>> {
    zone.from_local_datetime(&wall).earliest().or_else(|| {
        let later = wall.checked_add_signed(TimeDelta::hours(1))?;
        let after = zone.from_local_datetime(&later).earliest()?;
        let minutes = i64::from(after.minute());
        after.checked_sub_signed(TimeDelta::minutes(minutes))
    })
}

/// A relative date now: a count of hours is counted in real time (across a
/// clock change, 3 hours ago is 3 hours ago), days on the zone's calendar.
fn relative(read: Relative, zone: Tz, now: DateTime<Utc>) -> Option<ReadDate> {
    let here = now.with_timezone(&zone);
    let today = here.date_naive();
    let (n, unit) = match read {
        Relative::Day { days, time } => {
            let day = today.checked_sub_days(chrono::Days::new(days.into()))?;
            return Some(match time {
                Some(time) => ReadDate::Time(local(day.and_time(time), zone)?),
                None => ReadDate::Date(day),
            });
        }
        Relative::Ago(n, unit) => (i64::from(n), unit),
    };
    let back = match unit {
        Unit::Second => TimeDelta::try_seconds(n),
        Unit::Minute => TimeDelta::try_minutes(n),
        Unit::Hour => TimeDelta::try_hours(n),
        Unit::Day => {
            return today
                .checked_sub_days(chrono::Days::new(n as u64))
                .map(ReadDate::Date);
        }
        Unit::Week => {
            let days = (n as u64).checked_mul(7)?;
            return today
                .checked_sub_days(chrono::Days::new(days))
                .map(ReadDate::Date);
        }
        Unit::Month | Unit::Year => {
            let months = match unit {
                Unit::Year => u32::try_from(n).ok()?.checked_mul(12)?,
                _ => u32::try_from(n).ok()?,
            };
            return today
                .checked_sub_months(Months::new(months))
                .map(ReadDate::Date);
        }
    }?;
    let then = here.checked_sub_signed(back)?;
    // Cut to the unit's precision as the zone's clock shows it, on the
    // instant (a wall time shown twice would be ambiguous).
    let cut = match unit {
        Unit::Second => 0,
        Unit::Minute => i64::from(then.second()),
        _ => i64::from(then.minute() * 60 + then.second()),
    };
    let then = then
        .checked_sub_signed(TimeDelta::nanoseconds(i64::from(then.nanosecond())))?
        .checked_sub_signed(TimeDelta::seconds(cut))?;
    Some(ReadDate::Time(then))
}

/// A stored zone by its IANA name.
mod zone_name {
    use chrono_tz::Tz;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(zone: &Tz, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(zone.name())
    }

    /// A name this build does not know reads as UTC: a stored site stays readable.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Tz, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(name.parse().unwrap_or(Tz::UTC))
    }
}

#[cfg(test)]
mod tests;
