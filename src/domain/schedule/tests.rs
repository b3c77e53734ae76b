//! Fire times across zones and daylight-saving changes.

use std::collections::BTreeMap;

use chrono::{NaiveDate, TimeZone};

use super::*;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

fn schedule(cron: &str, zone: &str) -> KeywordSchedule {
    KeywordSchedule::parse(cron, zone, 0).unwrap()
}

/// Every nominal fire of `s` in [from, until).
fn fires_between(
    s: &KeywordSchedule,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let mut fires = Vec::new();
    let mut after = from - TimeDelta::seconds(1);
    while let Some(next) = s.next_nominal_after(after) {
        if next >= until {
            break;
        }
        fires.push(next);
        after = next;
    }
    fires
}

#[test]
fn a_keyword_at_six_in_seoul_fires_at_nine_the_evening_before_in_utc() {
    let seoul = schedule("0 0 6 * * *", "Asia/Seoul");
    let fires = seoul.next_fires(1, utc(2026, 11, 25, 12, 0), 3);
    let at: Vec<_> = fires.iter().map(|f| f.at).collect();
    assert_eq!(
        at,
        [
            utc(2026, 11, 25, 21, 0),
            utc(2026, 11, 26, 21, 0),
            utc(2026, 11, 27, 21, 0)
        ]
    );
    assert_eq!(
        seoul.zone().local_rfc3339(at[0]),
        "2026-11-26T06:00:00+09:00"
    );
    // The same cron in UTC fires nine hours later.
    let in_utc = schedule("0 0 6 * * *", "UTC");
    assert_eq!(
        in_utc.next_nominal_after(utc(2026, 11, 25, 12, 0)),
        Some(utc(2026, 11, 26, 6, 0))
    );
}

/// A daily keyword in New York through 2026, both daylight-saving changes
/// included: one fire per local calendar day, none twice, none missed.
fn once_a_day_through_2026(cron: &str) -> BTreeMap<NaiveDate, Vec<DateTime<Utc>>> {
    let new_york = schedule(cron, "America/New_York");
    let fires = fires_between(&new_york, utc(2026, 1, 1, 5, 0), utc(2027, 1, 1, 5, 0));
    assert!(fires.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
    let mut by_day: BTreeMap<NaiveDate, Vec<DateTime<Utc>>> = BTreeMap::new();
    for fire in fires {
        by_day
            .entry(new_york.zone().wall_time(fire).date())
            .or_default()
            .push(fire);
    }
    assert_eq!(by_day.len(), 365, "{cron}: a fire on every day of 2026");
    assert!(
        by_day.values().all(|fires| fires.len() == 1),
        "{cron}: twice on {:?}",
        by_day.iter().find(|(_, f)| f.len() > 1)
    );
    by_day
}

#[test]
fn new_york_at_two_thirty_fires_once_a_day_and_when_the_clocks_jump_over_it() {
    let by_day = once_a_day_through_2026("0 30 2 * * *");
    let on = |m, d| by_day[&NaiveDate::from_ymd_opt(2026, m, d).unwrap()][0];
    assert_eq!(on(3, 7), utc(2026, 3, 7, 7, 30), "02:30 EST");
    // 8 March: 02:00 EST jumps to 03:00 EDT; 02:30 is never shown.
    assert_eq!(on(3, 8), utc(2026, 3, 8, 7, 0), "as the clocks jump");
    assert_eq!(on(3, 9), utc(2026, 3, 9, 6, 30), "02:30 EDT");
    // 1 November: 02:00 EDT goes back to 01:00 EST; 02:30 is shown once.
    assert_eq!(on(11, 1), utc(2026, 11, 1, 7, 30), "02:30 EST");
    assert_eq!(on(10, 31), utc(2026, 10, 31, 6, 30), "02:30 EDT");
}

#[test]
fn new_york_at_one_thirty_fires_once_on_the_day_the_clocks_go_back() {
    let by_day = once_a_day_through_2026("0 30 1 * * *");
    let on = |m, d| by_day[&NaiveDate::from_ymd_opt(2026, m, d).unwrap()][0];
    assert_eq!(
        on(3, 8),
        utc(2026, 3, 8, 6, 30),
        "01:30 EST, before the jump"
    );
    // 1 November: 01:30 is shown twice (EDT, then EST): the first only.
    assert_eq!(on(11, 1), utc(2026, 11, 1, 5, 30), "01:30 EDT");
    assert_eq!(on(11, 2), utc(2026, 11, 2, 6, 30), "01:30 EST");
}

#[test]
fn a_half_hourly_schedule_across_both_changes_never_repeats_an_instant() {
    let new_york = schedule("0 0,30 * * * *", "America/New_York");
    let spring = fires_between(&new_york, utc(2026, 3, 8, 5, 0), utc(2026, 3, 8, 8, 0));
    // 00:00, 00:30, 01:00, 01:30 EST; 02:00 and 02:30 are never shown, so
    // both are the jump, which is 03:00 EDT: one fire; then 03:30 EDT.
    assert_eq!(
        spring,
        [
            utc(2026, 3, 8, 5, 0),
            utc(2026, 3, 8, 5, 30),
            utc(2026, 3, 8, 6, 0),
            utc(2026, 3, 8, 6, 30),
            utc(2026, 3, 8, 7, 0),
            utc(2026, 3, 8, 7, 30),
        ]
    );
    let autumn = fires_between(&new_york, utc(2026, 11, 1, 4, 0), utc(2026, 11, 1, 8, 0));
    // 00:00 .. 01:30 EDT; the second 01:00 and 01:30 (EST) are not fired
    // again; 02:00 EST next.
    assert_eq!(
        autumn,
        [
            utc(2026, 11, 1, 4, 0),
            utc(2026, 11, 1, 4, 30),
            utc(2026, 11, 1, 5, 0),
            utc(2026, 11, 1, 5, 30),
            utc(2026, 11, 1, 7, 0),
            utc(2026, 11, 1, 7, 30),
        ]
    );
    // Asked from inside the repeated hour, the next fire is still 02:00 EST.
    assert_eq!(
        new_york.next_nominal_after(utc(2026, 11, 1, 6, 10)),
        Some(utc(2026, 11, 1, 7, 0))
    );
}

#[test]
fn the_period_starts_at_the_latest_fire_in_the_keyword_zone() {
    let seoul = schedule("0 0 0 * * *", "Asia/Seoul");
    // 23:00 KST on 25 November is 14:00 UTC: the local day began at 15:00
    // UTC the day before, not at midnight UTC.
    assert_eq!(
        seoul.period_start(utc(2026, 11, 25, 14, 0)),
        Some(utc(2026, 11, 24, 15, 0))
    );
    assert_eq!(
        seoul.period_start(utc(2026, 11, 25, 15, 0)),
        Some(utc(2026, 11, 25, 15, 0)),
        "a fire time starts its own period"
    );
    // Hourly in New York, asked at every fire and around it, through both
    // changes and the hour shown twice.
    let new_york = schedule("0 0 * * * *", "America/New_York");
    for (from, until) in [
        (utc(2026, 3, 7, 0, 0), utc(2026, 3, 10, 0, 0)),
        (utc(2026, 10, 31, 0, 0), utc(2026, 11, 3, 0, 0)),
    ] {
        let fires = fires_between(&new_york, from, until);
        for pair in fires.windows(2) {
            let (previous, fire) = (pair[0], pair[1]);
            assert_eq!(new_york.period_start(fire), Some(fire));
            assert_eq!(
                new_york.period_start(fire - TimeDelta::seconds(1)),
                Some(previous)
            );
            let middle = previous + (fire - previous) / 2;
            assert_eq!(new_york.period_start(middle), Some(previous), "{middle}");
        }
    }
    // 01:15 EST on 1 November (06:15 UTC), in the hour shown twice: the
    // period began at 01:00 EDT (05:00 UTC).
    assert_eq!(
        new_york.period_start(utc(2026, 11, 1, 6, 15)),
        Some(utc(2026, 11, 1, 5, 0))
    );
}

#[test]
fn jitter_delays_every_fire_of_a_keyword_by_the_same_offset() {
    let cron = CronSchedule::parse("0 0 6 * * *").unwrap();
    let jitter = Jitter::parse(900).unwrap();
    let seoul = KeywordSchedule::new(cron, Timezone::parse("Asia/Seoul").unwrap(), jitter);
    let from = utc(2026, 11, 25, 12, 0);
    for id in [1, 2, 3, 80] {
        let offset = jitter.offset_for(id);
        let fires = seoul.next_fires(id, from, 5);
        assert_eq!(fires.len(), 5);
        for (day, fire) in fires.iter().enumerate() {
            let nominal = utc(2026, 11, 25, 21, 0) + TimeDelta::days(day as i64);
            assert_eq!((fire.nominal, fire.at), (nominal, nominal + offset), "{id}");
        }
        // A fire whose cron time passed but whose jittered time has not is
        // still ahead; asked at its own time, the next is the day after.
        let first = fires[0];
        if offset > TimeDelta::zero() {
            assert_eq!(seoul.next_fire_after(id, first.nominal), Some(first));
        }
        assert_eq!(seoul.next_fire_after(id, first.at), Some(fires[1]));
    }
}

#[test]
fn two_times_the_clocks_skip_on_one_day_fire_once_that_day() {
    // croner 3.0.1 asked in the zone fires neither on 8 March: a missed day.
    let new_york = schedule("0 0,30 2 * * *", "America/New_York");
    let fires = fires_between(&new_york, utc(2026, 3, 7, 5, 0), utc(2026, 3, 10, 5, 0));
    assert_eq!(
        fires,
        [
            utc(2026, 3, 7, 7, 0),
            utc(2026, 3, 7, 7, 30),
            utc(2026, 3, 8, 7, 0),
            utc(2026, 3, 9, 6, 0),
            utc(2026, 3, 9, 6, 30),
        ]
    );
}

#[test]
fn fire_times_are_whole_seconds_whatever_the_clock_reads() {
    let every_minute = schedule("0 * * * * *", "Asia/Seoul");
    let now = utc(2026, 11, 25, 12, 0) + TimeDelta::nanoseconds(123_456_789);
    let fires = every_minute.next_fires(9, now, 2);
    assert_eq!(
        fires.iter().map(|f| f.at).collect::<Vec<_>>(),
        [utc(2026, 11, 25, 12, 1), utc(2026, 11, 25, 12, 2)]
    );
}
