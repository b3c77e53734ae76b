//! The worker's side of proxy health: before a page goes out through a
//! site's proxy it waits while the fleet has that proxy retired (the run is
//! not failed: it waits between pages, its heartbeat going on, until the
//! member returns), and after the page it records what the proxy got: a page
//! read, or a refusal that retires it for a back-off.

use std::time::Duration;

use chrono::Utc;
use sqlx::PgPool;

use super::{error::CrawlError, fetch::Fetched};
use crate::{
    domain::{
        failure::FailureKind,
        site::{ProxyUrl, metric_label},
    },
    ops::metrics::metrics,
    store,
};

/// How often a waiting run looks again (a member may return early: a page
/// through it on another worker ends its retirement).
const RECHECK: Duration = Duration::from_secs(5);

/// Waits while `proxy`, the only member of the site's pool, is retired.
pub async fn wait_while_retired(
    pool: &PgPool,
    site_id: i64,
    run_id: i64,
    proxy: &ProxyUrl,
) -> Result<(), CrawlError> {
    let mut told = false;
    loop {
        let retired = store::proxy_health::retired_until(pool, site_id, proxy)
            .await
            .map_err(|e| {
                CrawlError::failed(FailureKind::Internal, format!("reading proxy health: {e}"))
            })?;
        let Some(until) = retired else {
            return Ok(());
        };
        if !told {
            // The reason a person reads; the site's proxies say the same.
            tracing::info!(
                run_id,
                site_id,
                proxy = %metric_label(proxy),
                %until,
                "every proxy of the site is retired; the run waits until one returns"
            );
            told = true;
        }
        let left = (until - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        tokio::time::sleep(left.min(RECHECK).max(Duration::from_millis(100))).await;
    }
}

/// Whether a page's outcome counts against the proxy it went through: the
/// site refused it (429, 503, the blocked selector), answered 403, or the
/// connection failed.
pub fn refusal_of(fetched: &Result<Fetched, CrawlError>) -> Option<String> {
    match fetched {
        Ok(Fetched::Refused { reason, .. }) => Some(reason.clone()),
        Ok(_) => None,
        Err(CrawlError::Attempt { failure, .. })
            if failure.kind == FailureKind::Network
                || (failure.kind == FailureKind::HttpStatus
                    && failure.message.starts_with("HTTP 403")) =>
        {
            Some(failure.message.clone())
        }
        Err(_) => None,
    }
}

/// Records what a page got through `proxy`, for the fleet and the metrics.
/// A failure to record is logged: the page's own outcome stands.
pub async fn record(
    pool: &PgPool,
    site_id: i64,
    proxy: &ProxyUrl,
    fetched: &Result<Fetched, CrawlError>,
) {
    let site = site_id.to_string();
    let label = metric_label(proxy);
    let labels = [site.as_str(), label.as_str()];
    let recorded = match refusal_of(fetched) {
        Some(reason) => {
            metrics().proxy_refusals.with_label_values(&labels).inc();
            metrics().proxy_retired.with_label_values(&labels).set(1);
            // The reason names the page, never the proxy's credentials.
            store::proxy_health::record_refusal(pool, site_id, proxy, &reason)
                .await
                .map(|until| {
                    tracing::info!(site_id, proxy = %label, %until, %reason, "proxy retired");
                })
        }
        None if fetched.is_ok() => {
            metrics().proxy_pages.with_label_values(&labels).inc();
            metrics().proxy_retired.with_label_values(&labels).set(0);
            store::proxy_health::record_page(pool, site_id, proxy).await
        }
        None => Ok(()),
    };
    if let Err(e) = recorded {
        tracing::warn!(site_id, proxy = %label, error = %e, "proxy health not recorded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_403s_and_failed_connections_count_against_the_proxy() {
        let failed = |kind, message: &str| Err(CrawlError::failed(kind, message));
        let refused = Ok(Fetched::Refused {
            refusal: crate::worker::fetch::Refusal::Status(429),
            reason: "HTTP 429 at http://shop.example/".into(),
            retry_after: None,
        });
        assert!(refusal_of(&refused).unwrap().contains("429"));
        assert!(refusal_of(&failed(FailureKind::HttpStatus, "HTTP 403 at x: refused")).is_some());
        assert!(refusal_of(&failed(FailureKind::Network, "requesting x: closed")).is_some());
        // The site's own answers and our own limits are not the proxy's fault.
        assert!(refusal_of(&failed(FailureKind::HttpStatus, "HTTP 404 at x")).is_none());
        assert!(refusal_of(&failed(FailureKind::Stuck, "stuck")).is_none());
        assert!(refusal_of(&Ok(Fetched::PastTheEnd)).is_none());
    }
}
