//! Why an attempt failed: decided once, where the failure happens, stored
//! beside the human message, and matched on by the worker, the watchdog, the
//! metrics and the retry policy — nobody reads it back out of the message.

use std::fmt;

use super::text_enum::text_enum;

text_enum! {
    /// The kind of a failed attempt.
    pub enum FailureKind as "failure kind" {
        /// A page did not load, or its request did not return, within the
        /// site's stuck timeout.
        Stuck = "stuck",
        /// The worker holding the run stopped sending heartbeats.
        WorkerLost = "worker_lost",
        /// The browser session broke: it crashed, hung, or could not be had.
        BrowserCrashed = "browser_crashed",
        /// The network failed: no connection, no answer, a name that does not
        /// resolve (yet), too many redirects.
        Network = "network",
        /// The site answered 5xx or 408: it may answer next time.
        SiteError = "site_error",
        /// The site answered 4xx to the search page: it will answer the same.
        HttpStatus = "http_status",
        /// The site refused us on every try (429, 503, a block page).
        Blocked = "blocked",
        /// The SSRF guard refused the target (or where a redirect led).
        TargetRefused = "target_refused",
        /// The answer could not be read (a JSON API that answered with no JSON).
        UnreadablePage = "unreadable_page",
        /// The answer is larger than a worker reads.
        PageTooLarge = "page_too_large",
        /// The first page had no items on a site that expects them: its
        /// selectors no longer find anything (the site changed).
        NoItems = "no_items",
        /// The site's settings cannot crawl (e.g. a search URL the keyword
        /// breaks, a kept session with no SESSION_KEY on the worker).
        Misconfigured = "misconfigured",
        /// A service of the fleet itself failed (the rate limiter in Redis, a
        /// kept session in Postgres).
        Internal = "internal",
        /// A user cancelled the run during the attempt.
        Cancelled = "cancelled",
        /// The site's robots.txt disallows the first page for our user agent
        /// (and the site respects robots.txt): the page is not fetched.
        RobotsDisallowed = "robots_disallowed",
        /// Reading a page took more than its budget (`EXTRACT_BUDGET_MS`): the
        /// site's selectors cost too much on that page (deeply nested `:is()`,
        /// `:not()`, `:has()` with descendant combinators), or its items held
        /// too much. The same selectors cost the same next time.
        ExtractionOverBudget = "extraction_over_budget",
        /// A step of the site's page actions failed (its element never
        /// appeared, its option is not there, it ran out of time): the
        /// message names the step (`actions[2]`).
        ActionFailed = "action_failed",
    }
}

impl FailureKind {
    /// The retry policy: whether another attempt may succeed. A run whose
    /// attempt failed this way is queued again (with backoff) while it has
    /// attempts left; otherwise it fails at once.
    pub fn may_succeed_later(self) -> bool {
        match self {
            FailureKind::Stuck
            | FailureKind::WorkerLost
            | FailureKind::BrowserCrashed
            | FailureKind::Network
            | FailureKind::SiteError
            | FailureKind::Blocked
            | FailureKind::UnreadablePage
            // A slow banner or a slow search box may be there next time.
            | FailureKind::ActionFailed
            | FailureKind::NoItems
            | FailureKind::Internal => true,
            FailureKind::HttpStatus
            | FailureKind::TargetRefused
            | FailureKind::PageTooLarge
            | FailureKind::Misconfigured
            | FailureKind::Cancelled
            // A robots.txt changes on the site's schedule, not within a run's
            // backoff; the next scheduled run asks it again.
            | FailureKind::RobotsDisallowed
            // The page and the selectors are the same on the next attempt.
            | FailureKind::ExtractionOverBudget => false,
        }
    }
}

/// A failed attempt: its kind, and what a person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_text_and_json() {
        for kind in FailureKind::ALL {
            assert_eq!(kind.as_str().parse::<FailureKind>().unwrap(), kind);
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
        }
        assert!("stuck: at x".parse::<FailureKind>().is_err());
    }

    #[test]
    fn only_failures_that_can_pass_are_retried() {
        assert!(FailureKind::Stuck.may_succeed_later());
        assert!(FailureKind::SiteError.may_succeed_later());
        assert!(!FailureKind::HttpStatus.may_succeed_later());
        assert!(!FailureKind::TargetRefused.may_succeed_later());
        assert!(!FailureKind::Cancelled.may_succeed_later());
        assert!(!FailureKind::RobotsDisallowed.may_succeed_later());
        assert!(!FailureKind::ExtractionOverBudget.may_succeed_later());
    }
}
