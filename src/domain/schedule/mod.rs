//! When a keyword fires: a cron expression read on the wall clock of its
//! time zone, delayed by its jitter.
//!
//! A keyword fires at the first instant its zone's clocks show a time its
//! cron matches (`Timezone::instant_of`). Across daylight-saving changes,
//! as cron (Vixie, cronie) does for a job at a fixed time:
//! - clocks set forward over a matching time (02:30 on 8 March 2026 in
//!   New York): it fires once, when the clocks jump (03:00 EDT, 07:00 UTC);
//! - clocks set back over it (01:30 on 1 November 2026): it fires once, the
//!   first time the clocks show it (01:30 EDT, 05:30 UTC), never twice.
//!
//! So a sub-daily schedule in such a zone has one short gap and one
//! hour-long pause a year; in UTC it has neither.

mod cron;
mod jitter;
mod zone;

use chrono::{DateTime, TimeDelta, Utc};

pub use cron::CronSchedule;
pub use jitter::{Jitter, MAX_JITTER_SECS};
pub use zone::Timezone;

/// Wall times looked at for one answer before giving up: a clock set back an
/// hour shows at most 3,600 matching times of a per-second schedule again.
const SEARCH_LIMIT: usize = 100_000;

/// A keyword's schedule: its cron, its zone, its jitter.
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordSchedule {
    cron: CronSchedule,
    zone: Timezone,
    jitter: Jitter,
}

/// One fire of a keyword: the instant its cron names (`nominal`, the start of
/// the period the fire is for) and, jitter added, when it happens (`at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fire {
    pub nominal: DateTime<Utc>,
    pub at: DateTime<Utc>,
}

impl KeywordSchedule {
    pub fn new(cron: CronSchedule, zone: Timezone, jitter: Jitter) -> Self {
        Self { cron, zone, jitter }
    }

    /// A stored schedule: its cron text, zone name and jitter seconds.
    pub fn parse(
        cron: &str,
        zone: &str,
        jitter_secs: i64,
    ) -> Result<Self, crate::domain::FieldError> {
        Ok(Self::new(
            CronSchedule::parse(cron)?,
            Timezone::parse(zone)?,
            Jitter::parse(jitter_secs)?,
        ))
    }

    pub fn cron(&self) -> &CronSchedule {
        &self.cron
    }

    pub fn zone(&self) -> Timezone {
        self.zone
    }

    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The first instant the cron names strictly after `after`.
    pub fn next_nominal_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // A wall time at or before the one shown at `after` was first shown
        // at or before `after` (see `Timezone::instant_of`), and later wall
        // times are never earlier instants: walk the wall times from there,
        // up to the first one first shown after `after`. Past a setback the
        // first few are earlier instants (already fired); none is twice.
        let mut wall = self.zone.wall_time(after);
        for _ in 0..SEARCH_LIMIT {
            wall = self.cron.next_after(wall)?;
            let at = self.zone.instant_of(wall);
            if at > after {
                return Some(at);
            }
        }
        None
    }

    /// The next fire of keyword `keyword_id` happening strictly after `after`.
    pub fn next_fire_after(&self, keyword_id: i64, after: DateTime<Utc>) -> Option<Fire> {
        let offset = self.jitter.offset_for(keyword_id);
        let nominal = self.next_nominal_after(after - offset)?;
        Some(Fire {
            nominal,
            at: nominal + offset,
        })
    }

    /// The next `n` fires of keyword `keyword_id` after `from`, in order
    /// (fewer when the cron stops matching).
    pub fn next_fires(&self, keyword_id: i64, from: DateTime<Utc>, n: usize) -> Vec<Fire> {
        let mut fires: Vec<Fire> = Vec::with_capacity(n);
        let mut after = from;
        while fires.len() < n {
            let Some(fire) = self.next_fire_after(keyword_id, after) else {
                break;
            };
            fires.push(fire);
            after = fire.at;
        }
        fires
    }

    /// The start of the schedule period `at` falls in: the latest instant at
    /// or before `at` the cron names, in the keyword's zone (a daily
    /// keyword's period is its local day, from its local fire time).
    pub fn period_start(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Every wall time the clocks showed by `at` is at most the one they
        // show at `at`, plus a recent setback; walk back from there to the
        // first one shown by `at`.
        let latest_shown = self.zone.wall_time(at) + self.zone.recently_set_back(at);
        let mut wall = self.cron.latest_at_or_before(latest_shown)?;
        for _ in 0..SEARCH_LIMIT {
            let start = self.zone.instant_of(wall);
            if start <= at {
                return Some(start);
            }
            wall = self.cron.latest_before(wall)?;
        }
        None
    }

    /// A schedule a client sends (cron text, zone name, jitter seconds),
    /// checked against the rules every schedule obeys: it may not fire more
    /// often than once per `min_interval` (`MIN_SCHEDULE_INTERVAL_SECS`), and
    /// its jitter must be shorter than its shortest interval (a fire stays in
    /// its own period). Errors name `schedule`, `timezone` or `jitter_secs`.
    pub fn checked(
        cron: &str,
        zone: &str,
        jitter_secs: i64,
        min_interval: TimeDelta,
    ) -> Result<Self, crate::domain::FieldError> {
        use crate::domain::FieldError;
        let schedule = Self::parse(cron, zone, jitter_secs)?;
        let Some(shortest) = schedule.shortest_interval(Utc::now())? else {
            return Ok(schedule);
        };
        if shortest < min_interval {
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
        if TimeDelta::seconds(schedule.jitter.secs().into()) >= shortest {
            return Err(FieldError::new(
                "jitter_secs",
                format!(
                    "must be shorter than the schedule's shortest interval ({} s), \
                     so each fire stays in its own period",
                    shortest.num_seconds()
                ),
            ));
        }
        Ok(schedule)
    }

    /// The shortest time between two fires from `from` on, read on the wall
    /// clock (the minimum interval rule); `None` when it fires at most once.
    pub fn shortest_interval(
        &self,
        from: DateTime<Utc>,
    ) -> Result<Option<TimeDelta>, crate::domain::FieldError> {
        self.cron.shortest_interval(self.zone.wall_time(from))
    }
}

#[cfg(test)]
mod tests;
