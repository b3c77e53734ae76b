//! Dates as feeds and shops write them relative to now: `3 hours ago`,
//! `yesterday`, `2 days ago`, `vor 3 Stunden`, `gestern, 14:30`, `3시간 전`,
//! `어제`. What is recognised is a closed list (English, German, Korean); the
//! arithmetic is [`super::date`]'s, in the site's time zone.

use chrono::NaiveTime;

/// The unit a relative date counts in, which is also its precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

/// A date relative to now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relative {
    /// `n` units before now (`just now`: 0 minutes).
    Ago(u32, Unit),
    /// `days` days before today, at `time` if given (`yesterday, 14:30`).
    Day { days: u32, time: Option<NaiveTime> },
}

/// The relative date `text` says, if it says one.
pub fn read_relative(text: &str) -> Option<Relative> {
    let text = text.trim().trim_end_matches('.').trim().to_lowercase();
    let text = text.as_str();
    if matches!(
        text,
        "now"
            | "just now"
            | "right now"
            | "a moment ago"
            | "moments ago"
            | "jetzt"
            | "gerade eben"
            | "soeben"
            | "방금"
            | "방금 전"
            | "지금"
    ) {
        return Some(Relative::Ago(0, Unit::Minute));
    }
    day_word(text)
        .or_else(|| english_ago(text))
        .or_else(|| german_ago(text))
        .or_else(|| korean_ago(text))
}

/// `today`, `yesterday`, `gestern`, `어제`..., maybe with a time.
fn day_word(text: &str) -> Option<Relative> {
    const DAYS: [(&str, u32); 10] = [
        ("the day before yesterday", 2),
        ("yesterday", 1),
        ("today", 0),
        ("vorgestern", 2),
        ("gestern", 1),
        ("heute", 0),
        ("그저께", 2),
        ("그제", 2),
        ("어제", 1),
        ("오늘", 0),
    ];
    let (word, days) = DAYS.iter().find(|(word, _)| text.starts_with(word))?;
    let rest = text[word.len()..].trim_start_matches([',', ' ']);
    let rest = rest.strip_prefix("at ").unwrap_or(rest).trim();
    let rest = rest.strip_prefix("um ").unwrap_or(rest).trim();
    let time = match rest {
        "" => None,
        rest => Some(time_of_day(rest)?),
    };
    Some(Relative::Day { days: *days, time })
}

/// `14:30`, `14:30:05`, `2:30 pm`, `14:30 uhr`.
fn time_of_day(text: &str) -> Option<NaiveTime> {
    let text = text.trim_end_matches(" uhr").trim();
    let (clock, afternoon) = match text.strip_suffix("pm") {
        Some(clock) => (clock.trim(), Some(true)),
        None => match text.strip_suffix("am") {
            Some(clock) => (clock.trim(), Some(false)),
            None => (text, None),
        },
    };
    let mut parts = clock.split(':');
    let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
    let (mut hour, minute) = (next()?, next()?);
    let second = next().unwrap_or(0);
    match afternoon {
        Some(pm) if (1..=12).contains(&hour) => hour = hour % 12 + if pm { 12 } else { 0 },
        Some(_) => return None,
        None => {}
    }
    NaiveTime::from_hms_opt(hour, minute, second)
}

/// A count: digits, or a word for one.
fn count(word: &str) -> Option<u32> {
    match word {
        "a" | "an" | "one" | "ein" | "eine" | "einer" | "einem" => Some(1),
        digits => digits.parse().ok(),
    }
}

fn english_unit(word: &str) -> Option<Unit> {
    Some(match word {
        "s" | "sec" | "secs" | "second" | "seconds" => Unit::Second,
        "m" | "min" | "mins" | "minute" | "minutes" => Unit::Minute,
        "h" | "hr" | "hrs" | "hour" | "hours" => Unit::Hour,
        "d" | "day" | "days" => Unit::Day,
        "w" | "wk" | "wks" | "week" | "weeks" => Unit::Week,
        "mo" | "mos" | "month" | "months" => Unit::Month,
        "y" | "yr" | "yrs" | "year" | "years" => Unit::Year,
        _ => return None,
    })
}

/// `3 hours ago`, `an hour ago`, `about 2 weeks ago`, `5m ago`.
fn english_ago(text: &str) -> Option<Relative> {
    let text = text.strip_suffix(" ago")?.trim();
    let text = ["about ", "over ", "almost ", "nearly "]
        .iter()
        .find_map(|p| text.strip_prefix(p))
        .unwrap_or(text);
    let (n, unit) = match text.split_once(' ') {
        Some((n, unit)) => (count(n)?, english_unit(unit.trim())?),
        None => {
            // `5m`, `3h`: the digits and the unit together.
            let at = text.find(|c: char| !c.is_ascii_digit())?;
            (text[..at].parse().ok()?, english_unit(&text[at..])?)
        }
    };
    Some(Relative::Ago(n, unit))
}

/// `vor 3 Stunden`, `vor einer Stunde`, `vor 2 Tagen`.
fn german_ago(text: &str) -> Option<Relative> {
    let (n, unit) = text.strip_prefix("vor ")?.trim().split_once(' ')?;
    let unit = match unit.trim() {
        "sekunde" | "sekunden" | "sek." | "sek" => Unit::Second,
        "minute" | "minuten" | "min." | "min" => Unit::Minute,
        "stunde" | "stunden" | "std." | "std" => Unit::Hour,
        "tag" | "tagen" => Unit::Day,
        "woche" | "wochen" => Unit::Week,
        "monat" | "monaten" => Unit::Month,
        "jahr" | "jahren" => Unit::Year,
        _ => return None,
    };
    Some(Relative::Ago(count(n)?, unit))
}

/// `3시간 전`, `5분전`, `2 일 전`.
fn korean_ago(text: &str) -> Option<Relative> {
    let text = text.strip_suffix('전')?.trim_end();
    let at = text.find(|c: char| !c.is_ascii_digit())?;
    let n = text[..at].parse().ok()?;
    let unit = match text[at..].trim() {
        "초" => Unit::Second,
        "분" => Unit::Minute,
        "시간" => Unit::Hour,
        "일" => Unit::Day,
        "주" => Unit::Week,
        "개월" | "달" => Unit::Month,
        "년" => Unit::Year,
        _ => return None,
    };
    Some(Relative::Ago(n, unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_german_and_korean_relative_dates_are_read() {
        use Relative::Ago;
        use Unit::{Hour, Minute, Month, Week};
        let day = |days, time| Relative::Day { days, time };
        let at = |h, m| Some(NaiveTime::from_hms_opt(h, m, 0).unwrap());
        for (text, read) in [
            ("3 hours ago", Ago(3, Hour)),
            ("an hour ago", Ago(1, Hour)),
            ("About 2 weeks ago.", Ago(2, Week)),
            ("5m ago", Ago(5, Minute)),
            ("Just now", Ago(0, Minute)),
            ("yesterday", day(1, None)),
            ("2 days ago", Ago(2, Unit::Day)),
            ("Yesterday at 2:30 pm", day(1, at(14, 30))),
            ("today, 09:05", day(0, at(9, 5))),
            ("vor 3 Stunden", Ago(3, Hour)),
            ("vor einer Stunde", Ago(1, Hour)),
            ("gestern, 14:30 Uhr", day(1, at(14, 30))),
            ("3시간 전", Ago(3, Hour)),
            ("5분전", Ago(5, Minute)),
            ("어제", day(1, None)),
            ("2개월 전", Ago(2, Month)),
        ] {
            assert_eq!(read_relative(text), Some(read), "{text}");
        }
    }

    #[test]
    fn anything_else_is_no_relative_date() {
        for text in [
            "",
            "ago",
            "3 parsecs ago",
            "in 3 days",
            "yesterday-ish",
            "yesterday at 25:00",
            "13:00 pm today",
            "vor langer Zeit",
            "전",
            "99999999999 hours ago",
        ] {
            assert_eq!(read_relative(text), None, "{text}");
        }
    }
}
