//! Each origin's robots.txt as this worker last read it: asked for once per
//! `ROBOTS_CACHE_SECS` (once a minute at most while it cannot be read), the
//! crawls asking for the same origin at once sharing one request; its rules
//! parsed once per user agent. Every crawl and preview asks it before each
//! page of a site that respects robots.txt.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::sync::OnceCell;
use url::Url;

use super::pages::Crawl;
use crate::worker::error::CrawlError;
use crate::{
    domain::{
        failure::FailureKind,
        page::{EarlyStop, StopReason},
        robots::{RobotsFile, RobotsRules, agent_token, paced_rate, robots_url},
        site::{Identity, SiteSpec},
    },
    net::target_guard::TargetGuard,
    ops::metrics::metrics,
    worker::fetch::fetch_robots,
};

/// How long a robots.txt that could not be read (5xx, no answer) is taken
/// as allowing everything before it is asked for again.
pub const UNREADABLE_TTL: Duration = Duration::from_secs(60);
/// Origins kept before expired ones are swept out.
const SWEEP_ABOVE: usize = 10_000;

/// The worker's robots.txt cache; cheap to clone.
#[derive(Clone)]
pub struct RobotsCache {
    ttl: Duration,
    origins: Arc<Mutex<HashMap<String, Arc<Entry>>>>,
}

/// One origin's robots.txt: being asked for, or read.
#[derive(Default)]
struct Entry {
    read: OnceCell<ReadFile>,
}

struct ReadFile {
    at: Instant,
    /// How long it holds: the TTL, or less while it cannot be read.
    keep_for: Duration,
    file: RobotsFile,
    /// Its rules for each user agent that asked.
    by_agent: Mutex<HashMap<String, Arc<RobotsRules>>>,
}

impl Entry {
    fn is_stale(&self) -> bool {
        self.read
            .get()
            .is_some_and(|read| read.at.elapsed() >= read.keep_for)
    }
}

impl RobotsCache {
    /// A cache keeping each file `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            origins: Arc::default(),
        }
    }

    /// The rules of `url`'s robots.txt for `identity`'s user agent. The file
    /// is asked for as `identity` (the first site to ask, when several sites
    /// share an origin) through `guard`; one that cannot be had allows all.
    pub async fn rules(
        &self,
        url: &Url,
        identity: &Identity,
        guard: &TargetGuard,
    ) -> Arc<RobotsRules> {
        let Some(robots_url) = robots_url(url) else {
            return Arc::new(RobotsRules::allow_all());
        };
        let entry = self.entry(robots_url.as_str());
        let read = entry
            .read
            .get_or_init(|| async {
                let started = Instant::now();
                let file = fetch_robots(&robots_url, identity, guard).await;
                metrics()
                    .robots_fetches
                    .with_label_values(&[file.label()])
                    .inc();
                let keep_for = match file.is_transient() {
                    true => UNREADABLE_TTL.min(self.ttl),
                    false => self.ttl,
                };
                match &file {
                    RobotsFile::Unreadable { why } => tracing::info!(
                        %robots_url, %why, ?keep_for,
                        "robots.txt could not be read: everything allowed for now"
                    ),
                    _ => tracing::debug!(%robots_url, outcome = file.label(), took = ?started.elapsed(), "robots.txt read"),
                }
                ReadFile {
                    at: Instant::now(),
                    keep_for,
                    file,
                    by_agent: Mutex::default(),
                }
            })
            .await;
        read.rules_for(&agent_token(identity.user_agent.as_deref()), &robots_url)
    }

    /// Why `spec` may not fetch `url`, when its origin's robots.txt
    /// disallows it and the site respects robots.txt; `None`: go ahead.
    pub async fn disallows(
        &self,
        spec: &SiteSpec,
        url: &Url,
        guard: &TargetGuard,
    ) -> Option<String> {
        if !spec.respect_robots {
            return None;
        }
        let rules = self.rules(url, &spec.identity, guard).await;
        if rules.allows(url) {
            return None;
        }
        let agent = agent_token(spec.identity.user_agent.as_deref());
        Some(format!(
            "robots.txt of {} disallows {url} for user agent {agent}",
            url.origin().ascii_serialization()
        ))
    }

    /// The Crawl-delay of `url`'s robots.txt, when `spec` respects it.
    pub async fn crawl_delay(
        &self,
        spec: &SiteSpec,
        url: &Url,
        guard: &TargetGuard,
    ) -> Option<Duration> {
        match spec.respect_robots {
            true => self.rules(url, &spec.identity, guard).await.crawl_delay(),
            false => None,
        }
    }

    /// The origin's entry; a stale one is replaced (the next caller asks again).
    fn entry(&self, key: &str) -> Arc<Entry> {
        let mut origins = self.origins.lock().expect("robots cache lock");
        if let Some(entry) = origins.get(key)
            && !entry.is_stale()
        {
            return entry.clone();
        }
        if origins.len() >= SWEEP_ABOVE {
            origins.retain(|_, entry| !entry.is_stale());
        }
        let entry = Arc::new(Entry::default());
        origins.insert(key.to_owned(), entry.clone());
        entry
    }
}

impl ReadFile {
    fn rules_for(&self, agent: &str, robots_url: &Url) -> Arc<RobotsRules> {
        let mut by_agent = self.by_agent.lock().expect("robots rules lock");
        if let Some(rules) = by_agent.get(agent) {
            return rules.clone();
        }
        by_agent
            .entry(agent.to_owned())
            .or_insert_with(|| {
                Arc::new(self.file.rules_for(agent).unwrap_or_else(|why| {
                    tracing::info!(%robots_url, %why, "robots.txt unreadable: everything allowed");
                    RobotsRules::allow_all()
                }))
            })
            .clone()
    }
}

impl Crawl<'_> {
    /// Asks the site's robots.txt before page `page` at `url` is fetched. A
    /// first page it disallows fails the attempt (`robots_disallowed`, not
    /// retried); a later one ends the crawl there: it completes with what it
    /// read, and the run names the page it did not read.
    pub(super) async fn robots_stop(
        &self,
        url: &Url,
        page: i32,
    ) -> Result<Option<EarlyStop>, CrawlError> {
        let ctx = self.ctx;
        let Some(why) = ctx.robots.disallows(self.spec, url, &ctx.guard).await else {
            return Ok(None);
        };
        metrics()
            .robots_disallowed
            .with_label_values(&[&self.run.site_id.to_string()])
            .inc();
        if page == 1 {
            return Err(CrawlError::failed(FailureKind::RobotsDisallowed, why));
        }
        tracing::info!(run_id = self.fence.run_id, page, %why, "the run stops before a page robots.txt disallows");
        Ok(Some(EarlyStop {
            url: url.to_string(),
            reason: StopReason::RobotsDisallowed,
        }))
    }
}

/// The Crawl-delay of the robots.txt of a search starting at `first`, for a
/// site that respects it. When it paces the site slower than the site's own
/// rate it is logged and shown as `crawlfleet_robots_crawl_delay_seconds`.
pub(super) async fn crawl_delay(
    cache: &RobotsCache,
    spec: &SiteSpec,
    site_id: i64,
    first: &Url,
    guard: &TargetGuard,
) -> Option<Duration> {
    let delay = cache.crawl_delay(spec, first, guard).await;
    let own = spec.politeness.max_requests_per_sec;
    let stricter = delay.filter(|_| paced_rate(own, delay) != own);
    if let Some(delay) = stricter {
        tracing::info!(site_id, ?delay, own_rate = ?own, "robots.txt Crawl-delay paces the site fleet-wide");
    }
    metrics()
        .robots_crawl_delay
        .with_label_values(&[&site_id.to_string()])
        .set(stricter.map_or(0.0, |d| d.as_secs_f64()));
    delay
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A server on loopback answering every request with `body` as
    /// robots.txt after `delay`; how many requests it got.
    async fn robots_server(body: &'static str, delay: Duration) -> (Url, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    tokio::time::sleep(delay).await;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        (base, asked)
    }

    #[tokio::test]
    async fn crawls_asking_at_once_share_one_fetch_until_the_file_goes_stale() {
        let (base, asked) = robots_server(
            "User-agent: *\nDisallow: /private\nCrawl-delay: 3\n",
            Duration::from_millis(200),
        )
        .await;
        let cache = RobotsCache::new(Duration::from_secs(3600));
        let guard = TargetGuard::new(true, &[]);
        let identity = Identity::default();
        let page = base.join("/search?q=x").unwrap();
        let private = base.join("/private/1").unwrap();

        let at_once =
            futures::future::join_all((0..20).map(|_| cache.rules(&page, &identity, &guard))).await;
        assert_eq!(
            asked.load(Ordering::SeqCst),
            1,
            "twenty callers, one request"
        );
        for rules in &at_once {
            assert!(rules.allows(&page) && !rules.allows(&private));
            assert_eq!(rules.crawl_delay(), Some(Duration::from_secs(3)));
        }
        for _ in 0..100 {
            assert!(cache.rules(&page, &identity, &guard).await.allows(&page));
        }
        assert_eq!(
            asked.load(Ordering::SeqCst),
            1,
            "a fresh file is not asked again"
        );

        // A cache of its own whose files go stale at once, whatever the
        // machine's pace: each check asks again.
        let stale = RobotsCache::new(Duration::ZERO);
        assert!(!stale.rules(&page, &identity, &guard).await.allows(&private));
        assert!(!stale.rules(&page, &identity, &guard).await.allows(&private));
        assert_eq!(
            asked.load(Ordering::SeqCst),
            3,
            "a stale file is asked for again"
        );
    }

    #[tokio::test]
    async fn a_file_that_cannot_be_had_allows_everything_for_a_short_while() {
        // Nothing listens there.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let nowhere =
            Url::parse(&format!("http://{}/search", listener.local_addr().unwrap())).unwrap();
        drop(listener);
        let cache = RobotsCache::new(Duration::from_secs(3600));
        let rules = cache
            .rules(&nowhere, &Identity::default(), &TargetGuard::new(true, &[]))
            .await;
        assert!(rules.allows(&nowhere));
        let origins = cache.origins.lock().unwrap();
        let read = origins.values().next().unwrap().read.get().unwrap();
        assert_eq!(read.keep_for, UNREADABLE_TTL);
        assert!(read.file.is_transient(), "{:?}", read.file);
    }

    #[tokio::test]
    async fn a_site_that_does_not_respect_robots_txt_never_asks_for_it() {
        let (base, asked) = robots_server("User-agent: *\nDisallow: /\n", Duration::ZERO).await;
        let mut spec = crate::domain::site::SiteInput {
            name: "s".into(),
            search_url: format!("{base}search?q={{keyword}}"),
            item_selector: Some("li".into()),
            fields: [("title".to_owned(), Default::default())].into(),
            ..Default::default()
        }
        .parse()
        .unwrap();
        let cache = RobotsCache::new(Duration::from_secs(3600));
        let guard = TargetGuard::new(true, &[]);
        let page = base.join("/search?q=x").unwrap();
        spec.respect_robots = false;
        assert_eq!(cache.disallows(&spec, &page, &guard).await, None);
        assert_eq!(cache.crawl_delay(&spec, &page, &guard).await, None);
        assert_eq!(asked.load(Ordering::SeqCst), 0);
        spec.respect_robots = true;
        let why = cache.disallows(&spec, &page, &guard).await.unwrap();
        assert!(
            why.contains("disallows") && why.contains("crawlfleet"),
            "{why}"
        );
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }
}
