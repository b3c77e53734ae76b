//! Why a crawl attempt ended without completing.

use crate::{store::runs::FenceError, target_guard::Refused};

#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error("worker draining")]
    Drained,
    /// The attempt failed; `retry` says whether another attempt may succeed.
    #[error("{reason}")]
    Attempt {
        reason: String,
        retry: bool,
        /// The browser session is unusable and must be replaced.
        broken_session: bool,
    },
}

impl CrawlError {
    pub fn transient(reason: impl Into<String>) -> Self {
        CrawlError::Attempt {
            reason: reason.into(),
            retry: true,
            broken_session: false,
        }
    }

    pub fn permanent(reason: impl Into<String>) -> Self {
        CrawlError::Attempt {
            reason: reason.into(),
            retry: false,
            broken_session: false,
        }
    }

    pub fn broken(reason: impl Into<String>) -> Self {
        CrawlError::Attempt {
            reason: reason.into(),
            retry: true,
            broken_session: true,
        }
    }

    /// Whether the browser session that hit this error must be replaced.
    pub fn breaks_session(&self) -> bool {
        matches!(
            self,
            CrawlError::Attempt {
                broken_session: true,
                ..
            }
        )
    }

    /// A target the SSRF guard refused: no later attempt can succeed (a name
    /// that does not resolve may resolve later).
    pub fn refused(refused: Refused) -> Self {
        if refused.may_pass_later() {
            return CrawlError::transient(refused.to_string());
        }
        CrawlError::permanent(format!("target refused: {refused}"))
    }
}

/// A refusal met here, counted as it is turned into the attempt's error.
impl From<Refused> for CrawlError {
    fn from(refused: Refused) -> Self {
        if !refused.may_pass_later() {
            crate::metrics::metrics().refused_targets.inc();
        }
        CrawlError::refused(refused)
    }
}
