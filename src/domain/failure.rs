//! Why an attempt failed: decided once, where the failure happens, stored
//! beside the human message, and matched on by the worker, the watchdog, the
//! metrics and the retry policy — nobody reads it back out of the message.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

/// The kind of a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A page did not load, or its request did not return, within the
    /// site's stuck timeout.
    Stuck,
    /// The worker holding the run stopped sending heartbeats.
    WorkerLost,
    /// The browser session broke: it crashed, hung, or could not be had.
    BrowserCrashed,
    /// The network failed: no connection, no answer, a name that does not
    /// resolve (yet), too many redirects.
    Network,
    /// The site answered 5xx or 408: it may answer next time.
    SiteError,
    /// The site answered 4xx to the search page: it will answer the same.
    HttpStatus,
    /// The site refused us on every try (429, 503, a block page).
    Blocked,
    /// The SSRF guard refused the target (or where a redirect led).
    TargetRefused,
    /// The answer could not be read (a JSON API that answered with no JSON).
    UnreadablePage,
    /// The answer is larger than a worker reads.
    PageTooLarge,
    /// The first page had no items on a site that expects them: its
    /// selectors no longer find anything (the site changed).
    NoItems,
    /// The site's settings cannot crawl (e.g. a search URL the keyword
    /// breaks, a kept session with no SESSION_KEY on the worker).
    Misconfigured,
    /// A service of the fleet itself failed (the rate limiter in Redis, a
    /// kept session in Postgres).
    Internal,
    /// A user cancelled the run during the attempt.
    Cancelled,
    /// The site's robots.txt disallows the first page for our user agent
    /// (and the site respects robots.txt): the page is not fetched.
    RobotsDisallowed,
    /// Reading a page took more than its budget (`EXTRACT_BUDGET_MS`): the
    /// site's selectors cost too much on that page (deeply nested `:is()`,
    /// `:not()`, `:has()` with descendant combinators), or its items held
    /// too much. The same selectors cost the same next time.
    ExtractionOverBudget,
}

impl FailureKind {
    pub const ALL: [FailureKind; 16] = [
        FailureKind::Stuck,
        FailureKind::WorkerLost,
        FailureKind::BrowserCrashed,
        FailureKind::Network,
        FailureKind::SiteError,
        FailureKind::HttpStatus,
        FailureKind::Blocked,
        FailureKind::TargetRefused,
        FailureKind::UnreadablePage,
        FailureKind::PageTooLarge,
        FailureKind::NoItems,
        FailureKind::Misconfigured,
        FailureKind::Internal,
        FailureKind::Cancelled,
        FailureKind::RobotsDisallowed,
        FailureKind::ExtractionOverBudget,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Stuck => "stuck",
            FailureKind::WorkerLost => "worker_lost",
            FailureKind::BrowserCrashed => "browser_crashed",
            FailureKind::Network => "network",
            FailureKind::SiteError => "site_error",
            FailureKind::HttpStatus => "http_status",
            FailureKind::Blocked => "blocked",
            FailureKind::TargetRefused => "target_refused",
            FailureKind::UnreadablePage => "unreadable_page",
            FailureKind::PageTooLarge => "page_too_large",
            FailureKind::NoItems => "no_items",
            FailureKind::Misconfigured => "misconfigured",
            FailureKind::Internal => "internal",
            FailureKind::Cancelled => "cancelled",
            FailureKind::RobotsDisallowed => "robots_disallowed",
            FailureKind::ExtractionOverBudget => "extraction_over_budget",
        }
    }

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

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown failure kind {0:?}")]
pub struct UnknownFailureKind(pub String);

impl FromStr for FailureKind {
    type Err = UnknownFailureKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FailureKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownFailureKind(s.to_owned()))
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
