//! Why a crawl attempt ended without completing.

use crate::{
    domain::failure::{Failure, FailureKind},
    net::target_guard::Refused,
    store::runs::FenceError,
};

#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error("worker draining")]
    Drained,
    /// The attempt failed; its kind decides whether another attempt follows.
    #[error("{failure}")]
    Attempt {
        failure: Failure,
        /// The browser session is unusable and must be replaced.
        broken_session: bool,
    },
}

impl CrawlError {
    /// The attempt failed; the browser session (if any) is still good.
    pub fn failed(kind: FailureKind, message: impl Into<String>) -> Self {
        CrawlError::Attempt {
            failure: Failure::new(kind, message),
            broken_session: false,
        }
    }

    /// The attempt failed and took its browser session with it.
    pub fn broken(kind: FailureKind, message: impl Into<String>) -> Self {
        CrawlError::Attempt {
            failure: Failure::new(kind, message),
            broken_session: true,
        }
    }

    /// The browser stopped working (crashed, hung, gone): the session is replaced.
    pub fn browser(message: impl Into<String>) -> Self {
        CrawlError::broken(FailureKind::BrowserCrashed, message)
    }

    /// The same failure, saying it was the detail page at `url`'s.
    pub fn of_detail_page(self, url: &url::Url) -> Self {
        match self {
            CrawlError::Attempt {
                failure,
                broken_session,
            } => CrawlError::Attempt {
                failure: Failure::new(
                    failure.kind,
                    format!("detail page {url}: {}", failure.message),
                ),
                broken_session,
            },
            other => other,
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

    /// A target the SSRF guard refused: no later attempt can succeed, except
    /// for a name that does not resolve (it may resolve later).
    pub fn refused(refused: Refused) -> Self {
        if refused.may_pass_later() {
            return CrawlError::failed(FailureKind::Network, refused.to_string());
        }
        CrawlError::failed(
            FailureKind::TargetRefused,
            format!("target refused: {refused}"),
        )
    }
}

/// A refusal met here, counted as it is turned into the attempt's error.
impl From<Refused> for CrawlError {
    fn from(refused: Refused) -> Self {
        if !refused.may_pass_later() {
            crate::ops::metrics::metrics().refused_targets.inc();
        }
        CrawlError::refused(refused)
    }
}
