//! robots.txt: which pages of an origin our user agent may fetch, and how
//! slowly. What a fetch of the file means (by its status) and the rules it
//! gives are decided here; fetching and caching are the worker's.
//!
//! The rules follow RFC 9309 as the `texting_robots` parser reads it: the
//! group naming our product token, else `*`; the longest matching rule wins,
//! an `Allow` on a tie. One difference, chosen on purpose: a robots.txt that
//! cannot be read (5xx, no answer) allows everything, as a missing one does,
//! where RFC 9309 would disallow everything; the worker asks again soon
//! ([`RobotsFile::is_transient`]) instead of keeping that for its whole TTL.

use std::time::Duration;

use url::Url;

/// The product token a site without a user agent of its own is matched as.
pub const DEFAULT_AGENT: &str = "crawlfleet";
/// A longer robots.txt is cut here (RFC 9309 asks parsers to read at least 500 KiB).
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;
/// A Crawl-delay longer than this is read as this: the stuck timeout and the
/// run's heartbeat assume pages come within minutes.
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(600);

/// The product token robots.txt groups are matched against (RFC 9309 §2.2.1):
/// the site's user agent up to its first `/` or space (`Mozilla/5.0 (...)`
/// is `mozilla`, `FerrisBot/1.2` is `ferrisbot`), else [`DEFAULT_AGENT`].
pub fn agent_token(user_agent: Option<&str>) -> String {
    let token: String = user_agent
        .unwrap_or(DEFAULT_AGENT)
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .collect();
    match token.is_empty() {
        true => DEFAULT_AGENT.to_owned(),
        false => token.to_ascii_lowercase(),
    }
}

/// The address of the robots.txt that governs `url`: its origin's.
pub fn robots_url(url: &Url) -> Option<Url> {
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return None;
    }
    url.join("/robots.txt").ok().map(|mut robots| {
        let _ = robots.set_username("");
        let _ = robots.set_password(None);
        robots
    })
}

/// What asking an origin for its robots.txt gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobotsFile {
    /// A file was served (2xx): its rules (at most [`MAX_ROBOTS_BYTES`]).
    Served(Vec<u8>),
    /// There is none (4xx but 429): everything is allowed.
    Missing { status: u16 },
    /// It could not be read (5xx, 429, no answer, too many redirects):
    /// everything is allowed for now.
    Unreadable { why: String },
}

impl RobotsFile {
    /// What the final status of the request (after redirects) says; `body`
    /// is what was read of it.
    pub fn answered(status: u16, body: Vec<u8>) -> RobotsFile {
        match status {
            200..=299 => RobotsFile::Served(body),
            429 => RobotsFile::Unreadable {
                why: "HTTP 429 (too many requests)".to_owned(),
            },
            400..=499 => RobotsFile::Missing { status },
            _ => RobotsFile::Unreadable {
                why: format!("HTTP {status}"),
            },
        }
    }

    /// Whether the answer may change soon (a server error, no answer): the
    /// worker keeps it for a short time, not its whole TTL.
    pub fn is_transient(&self) -> bool {
        matches!(self, RobotsFile::Unreadable { .. })
    }

    /// The `outcome` label of `crawlfleet_robots_fetches_total`.
    pub fn label(&self) -> &'static str {
        match self {
            RobotsFile::Served(_) => "served",
            RobotsFile::Missing { .. } => "missing",
            RobotsFile::Unreadable { .. } => "unreadable",
        }
    }

    /// The rules for user agent `agent` (a product token, see
    /// [`agent_token`]); a file the parser cannot read allows everything.
    pub fn rules_for(&self, agent: &str) -> Result<RobotsRules, String> {
        match self {
            RobotsFile::Served(body) => texting_robots::Robot::new(agent, body)
                .map(|robot| RobotsRules { robot: Some(robot) })
                .map_err(|e| format!("robots.txt does not parse: {e:#}")),
            RobotsFile::Missing { .. } | RobotsFile::Unreadable { .. } => {
                Ok(RobotsRules::allow_all())
            }
        }
    }
}

/// The rules of one origin's robots.txt for one user agent.
#[derive(Debug)]
pub struct RobotsRules {
    /// `None`: no rules (no file, or none we could read).
    robot: Option<texting_robots::Robot>,
}

impl RobotsRules {
    pub fn allow_all() -> Self {
        RobotsRules { robot: None }
    }

    /// Whether `url` (its path and query) may be fetched.
    pub fn allows(&self, url: &Url) -> bool {
        self.robot
            .as_ref()
            .is_none_or(|robot| robot.allowed(url.as_str()))
    }

    /// The time the file asks between two requests, if any (at most
    /// [`MAX_CRAWL_DELAY`]; zero or nonsense is none).
    pub fn crawl_delay(&self) -> Option<Duration> {
        let secs = self.robot.as_ref()?.delay?;
        (secs.is_finite() && secs > 0.0)
            .then(|| Duration::from_secs_f32(secs.min(MAX_CRAWL_DELAY.as_secs_f32())))
    }
}

/// The fleet-wide pace of a site: its own `max_requests_per_sec`, or one
/// request per `crawl_delay` when that is stricter (or the site sets none).
pub fn paced_rate(site_rate: Option<f64>, crawl_delay: Option<Duration>) -> Option<f64> {
    let robots_rate = crawl_delay.map(|delay| 1.0 / delay.as_secs_f64());
    match (site_rate, robots_rate) {
        (Some(site), Some(robots)) => Some(site.min(robots)),
        (site, robots) => site.or(robots),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(u: &str) -> Url {
        Url::parse(u).unwrap()
    }

    fn rules(agent: &str, txt: &str) -> RobotsRules {
        RobotsFile::Served(txt.as_bytes().to_vec())
            .rules_for(agent)
            .unwrap()
    }

    #[test]
    fn the_agent_is_the_product_token_of_the_user_agent() {
        assert_eq!(agent_token(None), "crawlfleet");
        assert_eq!(agent_token(Some("FerrisBot/1.2 (+https://x)")), "ferrisbot");
        assert_eq!(agent_token(Some("Mozilla/5.0 (X11; Linux)")), "mozilla");
        assert_eq!(agent_token(Some("my-crawler")), "my-crawler");
        assert_eq!(agent_token(Some("  /odd")), "crawlfleet");
    }

    #[test]
    fn the_group_of_our_agent_wins_over_the_catch_all() {
        let txt = "User-agent: *\nDisallow: /\n\nUser-agent: crawlfleet\nDisallow: /private\n";
        let ours = rules(&agent_token(None), txt);
        assert!(ours.allows(&url("http://s.example/search?q=x")));
        assert!(!ours.allows(&url("http://s.example/private/1")));
        let other = rules(&agent_token(Some("OtherBot/1")), txt);
        assert!(!other.allows(&url("http://s.example/search?q=x")));
    }

    #[test]
    fn rules_match_path_and_query_the_longest_winning() {
        let txt = "User-agent: *\nDisallow: /*page=2\nDisallow: /shop\nAllow: /shop/open\n";
        let r = rules("crawlfleet", txt);
        assert!(r.allows(&url("http://s.example/search?q=x&page=1")));
        assert!(!r.allows(&url("http://s.example/search?q=x&page=2")));
        assert!(!r.allows(&url("http://s.example/shop?q=x")));
        assert!(r.allows(&url("http://s.example/shop/open?q=x")));
        assert!(r.allows(&url("http://s.example/robots.txt")));
    }

    #[test]
    fn missing_broken_or_garbage_files_allow_everything() {
        let page = url("http://s.example/search?q=x");
        for file in [
            RobotsFile::answered(404, b"Disallow: /".to_vec()),
            RobotsFile::answered(410, Vec::new()),
            RobotsFile::answered(500, b"Disallow: /".to_vec()),
            RobotsFile::answered(429, Vec::new()),
            RobotsFile::Served(b"<html><body>Not a robots file</body></html>".to_vec()),
            RobotsFile::Served(vec![0xff, 0xfe, 0x00, 0x9c, 0x80]),
            RobotsFile::Served(Vec::new()),
        ] {
            let rules = file
                .rules_for("crawlfleet")
                .unwrap_or_else(|_| RobotsRules::allow_all());
            assert!(rules.allows(&page), "{file:?}");
            assert_eq!(rules.crawl_delay(), None, "{file:?}");
        }
        assert!(RobotsFile::answered(503, Vec::new()).is_transient());
        assert!(!RobotsFile::answered(404, Vec::new()).is_transient());
        assert_eq!(RobotsFile::answered(200, Vec::new()).label(), "served");
    }

    #[test]
    fn crawl_delay_is_read_for_our_group_and_bounded() {
        let r = rules("crawlfleet", "User-agent: *\nCrawl-delay: 2\n");
        assert_eq!(r.crawl_delay(), Some(Duration::from_secs(2)));
        let r = rules("crawlfleet", "User-agent: *\nCrawl-delay: 0.5\n");
        assert_eq!(r.crawl_delay(), Some(Duration::from_millis(500)));
        let r = rules("crawlfleet", "User-agent: *\nCrawl-delay: 86400\n");
        assert_eq!(r.crawl_delay(), Some(MAX_CRAWL_DELAY));
        let r = rules("crawlfleet", "User-agent: *\nCrawl-delay: 0\n");
        assert_eq!(r.crawl_delay(), None);
        let r = rules("crawlfleet", "User-agent: otherbot\nCrawl-delay: 9\n");
        assert_eq!(r.crawl_delay(), None);
    }

    #[test]
    fn the_stricter_of_the_site_rate_and_the_crawl_delay_paces_the_site() {
        let two_secs = Some(Duration::from_secs(2));
        assert_eq!(paced_rate(None, two_secs), Some(0.5));
        assert_eq!(paced_rate(Some(10.0), two_secs), Some(0.5));
        assert_eq!(paced_rate(Some(0.1), two_secs), Some(0.1));
        assert_eq!(paced_rate(Some(3.0), None), Some(3.0));
        assert_eq!(paced_rate(None, None), None);
    }

    #[test]
    fn robots_txt_is_at_the_root_of_the_origin() {
        assert_eq!(
            robots_url(&url("https://u:p@s.example:8443/a/b?q=1#f"))
                .unwrap()
                .as_str(),
            "https://s.example:8443/robots.txt"
        );
        assert_eq!(robots_url(&url("file:///etc/passwd")), None);
    }
}
