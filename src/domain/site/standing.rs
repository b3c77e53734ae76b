//! Where a site stands: how its runs have been ending lately, in one word an
//! operator (or an alert rule) can act on.

use chrono::{DateTime, Utc};

use crate::domain::text_enum::text_enum;

text_enum! {
    /// How one ended run went.
    pub enum RunVerdict as "run verdict" {
        /// Completed and met the site's expectations.
        Healthy = "healthy",
        /// Completed below the site's expectations.
        Degraded = "degraded",
        /// Failed after its last attempt.
        Failed = "failed",
    }
}

/// The site's last ended runs that went the same way, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streak {
    pub verdict: RunVerdict,
    pub runs: i64,
    /// When the first run of the streak ended.
    pub since: DateTime<Utc>,
}

text_enum! {
    /// A site in one word.
    pub enum SiteStatus as "site status" {
        /// No run has ended yet.
        Unknown = "unknown",
        Healthy = "healthy",
        /// Its last runs completed below its expectations.
        Degraded = "degraded",
        /// Its last runs failed.
        Failing = "failing",
        /// It refuses us: a run failed as `blocked`, or degraded by refusals,
        /// and no healthy run has ended since.
        Blocked = "blocked",
    }
}

impl SiteStatus {
    pub fn of(blocked_since: Option<DateTime<Utc>>, streak: Option<&Streak>) -> Self {
        if blocked_since.is_some() {
            return SiteStatus::Blocked;
        }
        match streak.map(|s| s.verdict) {
            None => SiteStatus::Unknown,
            Some(RunVerdict::Healthy) => SiteStatus::Healthy,
            Some(RunVerdict::Degraded) => SiteStatus::Degraded,
            Some(RunVerdict::Failed) => SiteStatus::Failing,
        }
    }

    /// The value of `crawlfleet_site_health{site}`: 2 healthy, 1 degraded,
    /// 0 failing or blocked, so `< 2` means "look at it" and `== 0` "it is
    /// down"; a site with no ended run has no sample (`None`).
    pub fn gauge(self) -> Option<i64> {
        match self {
            SiteStatus::Unknown => None,
            SiteStatus::Healthy => Some(2),
            SiteStatus::Degraded => Some(1),
            SiteStatus::Failing | SiteStatus::Blocked => Some(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streak(verdict: RunVerdict) -> Streak {
        Streak {
            verdict,
            runs: 3,
            since: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_blocked_site_is_blocked_whatever_its_last_runs_did() {
        let since = Some(DateTime::UNIX_EPOCH);
        for verdict in [RunVerdict::Healthy, RunVerdict::Failed] {
            assert_eq!(
                SiteStatus::of(since, Some(&streak(verdict))),
                SiteStatus::Blocked
            );
        }
    }

    #[test]
    fn otherwise_the_current_streak_says() {
        assert_eq!(SiteStatus::of(None, None), SiteStatus::Unknown);
        assert_eq!(
            SiteStatus::of(None, Some(&streak(RunVerdict::Degraded))),
            SiteStatus::Degraded
        );
        assert_eq!(
            SiteStatus::of(None, Some(&streak(RunVerdict::Failed))),
            SiteStatus::Failing
        );
    }

    #[test]
    fn the_gauge_orders_statuses_by_how_bad_they_are() {
        let values: Vec<_> = SiteStatus::ALL.iter().map(|s| s.gauge()).collect();
        assert_eq!(values, [None, Some(2), Some(1), Some(0), Some(0)]);
    }
}
