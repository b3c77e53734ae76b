//! The worker's side of proxy health: before a page goes out, a member of
//! the site's pool is chosen by its rotation among those the fleet has not
//! retired (by weight); while every member is retired the run waits between
//! pages (it is not failed: its heartbeat goes on, the site's health says it
//! is paused and until when) until the first returns. After the page it
//! records what the member got: a page read, or a refusal that retires it
//! for a back-off.

use std::{
    hash::{Hash, Hasher},
    sync::Mutex,
    time::Duration,
};

use chrono::Utc;
use sqlx::PgPool;

use super::{error::CrawlError, fetch::Fetched};
use crate::{
    domain::{
        failure::FailureKind,
        site::{ProxyPool, ProxyUrl, Rotation, metric_label},
    },
    ops::metrics::metrics,
    store,
};

/// How often a waiting run looks again (a member may return early: a page
/// through it on another worker ends its retirement).
const RECHECK: Duration = Duration::from_secs(5);

/// The member a crawl's pages go out through, chosen again as its pool's
/// rotation says.
pub struct ProxyChoice {
    pool: ProxyPool,
    site_id: i64,
    /// The member chosen last (kept by `per_run` and `sticky` while it is
    /// not retired).
    current: Mutex<Option<ProxyUrl>>,
}

impl ProxyChoice {
    pub fn new(pool: ProxyPool, site_id: i64) -> Self {
        ProxyChoice {
            pool,
            site_id,
            current: Mutex::new(None),
        }
    }

    /// How many members the pool has.
    pub fn members(&self) -> usize {
        self.pool.members().len()
    }

    /// The member the next page goes out through. `keep`: the page source
    /// cannot change its way out (a browser's context leaves through one
    /// member for the run), so the member chosen first is kept, waited for
    /// while retired. Otherwise `per_page` chooses again for every page,
    /// `per_run` and `sticky` keep their member while it is not retired and
    /// choose another (its share goes to the others) when it is. While
    /// every member is retired, waits until the first returns.
    pub async fn next(
        &self,
        pool: &PgPool,
        run_id: i64,
        keep: bool,
    ) -> Result<ProxyUrl, CrawlError> {
        let mut told = false;
        loop {
            let health = store::proxy_health::for_site(pool, self.site_id)
                .await
                .map_err(|e| {
                    CrawlError::failed(FailureKind::Internal, format!("reading proxy health: {e}"))
                })?;
            let now = Utc::now();
            let retired_until = |p: &ProxyUrl| {
                let address = p.address();
                health
                    .iter()
                    .find(|h| h.proxy == address && h.is_retired(now))
                    .and_then(|h| h.retired_until)
            };
            let current = self.current.lock().expect("choice lock").clone();
            let chosen = match (&current, keep, self.pool.rotation()) {
                (Some(current), true, _) => {
                    (retired_until(current).is_none()).then(|| current.clone())
                }
                (Some(current), false, Rotation::PerRun | Rotation::Sticky)
                    if retired_until(current).is_none() =>
                {
                    Some(current.clone())
                }
                _ => self
                    .pool
                    .pick(|p| retired_until(p).is_some(), self.roll())
                    .map(|m| m.proxy.clone()),
            };
            if let Some(chosen) = chosen {
                *self.current.lock().expect("choice lock") = Some(chosen.clone());
                return Ok(chosen);
            }
            // Every member it may use is retired: the earliest return.
            let waited_for: Vec<&ProxyUrl> = match (&current, keep) {
                (Some(current), true) => vec![current],
                _ => self.pool.members().iter().map(|m| &m.proxy).collect(),
            };
            let until = waited_for
                .into_iter()
                .filter_map(retired_until)
                .min()
                .unwrap_or(now);
            if !told {
                // The reason a person reads; the site's health says the same.
                tracing::info!(
                    run_id,
                    site_id = self.site_id,
                    members = self.pool.members().len(),
                    %until,
                    "every proxy of the site is retired; the run waits until one returns"
                );
                told = true;
            }
            let left = (until - Utc::now()).to_std().unwrap_or(Duration::ZERO);
            tokio::time::sleep(left.min(RECHECK).max(Duration::from_millis(100))).await;
        }
    }

    /// Where in `[0, 1)` the weighted choice lands: anywhere, or for
    /// `sticky` always the same place for the site, so its runs (and the
    /// session they keep) leave through the same member while it is not
    /// retired.
    fn roll(&self) -> f64 {
        match self.pool.rotation() {
            Rotation::Sticky => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                self.site_id.hash(&mut hasher);
                (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
            }
            Rotation::PerRun | Rotation::PerPage => rand::random::<f64>(),
        }
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
    first_backoff: Duration,
) {
    let site = site_id.to_string();
    let label = metric_label(proxy);
    let labels = [site.as_str(), label.as_str()];
    let recorded = match refusal_of(fetched) {
        Some(reason) => {
            metrics().proxy_refusals.with_label_values(&labels).inc();
            metrics().proxy_retired.with_label_values(&labels).set(1);
            // The reason names the page, never the proxy's credentials.
            store::proxy_health::record_refusal(pool, site_id, proxy, &reason, first_backoff)
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
    use crate::domain::site::PoolMemberInput;

    #[test]
    fn sticky_lands_in_one_place_for_a_site_and_the_others_anywhere() {
        let pool = |rotation| {
            let members = (1..=3)
                .map(|i| PoolMemberInput {
                    url: format!("http://10.0.0.{i}:3128"),
                    weight: Some(i),
                })
                .collect();
            ProxyPool::parse(members, rotation).unwrap()
        };
        let sticky = |site_id| ProxyChoice::new(pool(Rotation::Sticky), site_id).roll();
        assert_eq!(sticky(7), sticky(7), "the same site, the same place");
        assert!((0.0..1.0).contains(&sticky(7)));
        let sites: std::collections::HashSet<u64> =
            (1..50).map(|id| (sticky(id) * 1e9) as u64).collect();
        assert!(sites.len() > 40, "sites land in different places");
        let per_page = ProxyChoice::new(pool(Rotation::PerPage), 7);
        let rolls: std::collections::HashSet<u64> =
            (0..20).map(|_| (per_page.roll() * 1e9) as u64).collect();
        assert!(rolls.len() > 15, "per page, anywhere");
    }

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
