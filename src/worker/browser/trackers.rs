//! The known tracker and ad hosts a browser page sends no request to unless
//! its site allows `tracker` (`domain::site::ResourceKind`). One list, kept
//! here and nowhere else.
//!
//! An entry matches its host and every host under it (`doubleclick.net`:
//! `securepubads.g.doubleclick.net`), never a host that merely ends with
//! its text (`notdoubleclick.net`). Entries are hosts that serve tracking,
//! tag management, ads or session recording and nothing a page needs to show
//! its content: a whole domain when the domain does only that
//! (`doubleclick.net`), else the one host (`analytics.google.com`, not
//! `google.com`; `connect.facebook.net` is all of `facebook.net`, but
//! `facebook.com` serves pages too and is not listed). A page of a listed
//! domain itself (crawling `www.hotjar.com`) is not blocked from its own
//! domain: see [`blocks`].
//!
//! What goes in: the hosts of the tag managers, analytics, advertising,
//! social pixels and session-replay scripts most often found on shop and
//! news pages (what EasyList and EasyPrivacy block first). A host that also
//! serves what sites need to work (a CDN, a consent banner, a payment or
//! captcha script) never goes in: blocking it could change a page's items.

/// Hosts (and the hosts under them) of trackers and ads, by what they do.
pub const TRACKER_HOSTS: &[&str] = &[
    // Tag managers and analytics.
    "google-analytics.com",
    "googletagmanager.com",
    "analytics.google.com",
    "googletagservices.com",
    "segment.io",
    "cdn.segment.com",
    "mixpanel.com",
    "api.amplitude.com",
    "cdn.amplitude.com",
    "heapanalytics.com",
    "scorecardresearch.com",
    "quantserve.com",
    "chartbeat.com",
    "chartbeat.net",
    "newrelic.com",
    "nr-data.net",
    "mc.yandex.ru",
    "hm.baidu.com",
    // Advertising.
    "doubleclick.net",
    "googlesyndication.com",
    "googleadservices.com",
    "adservice.google.com",
    "amazon-adsystem.com",
    "adnxs.com",
    "criteo.com",
    "criteo.net",
    "taboola.com",
    "outbrain.com",
    "pubmatic.com",
    "rubiconproject.com",
    "openx.net",
    "casalemedia.com",
    "adsrvr.org",
    "moatads.com",
    "serving-sys.com",
    "smartadserver.com",
    // Social and conversion pixels.
    "facebook.net",
    "ads-twitter.com",
    "analytics.twitter.com",
    "px.ads.linkedin.com",
    "snap.licdn.com",
    "bat.bing.com",
    "analytics.tiktok.com",
    "ct.pinterest.com",
    "sc-static.net",
    // Session recording and heat maps.
    "hotjar.com",
    "hotjar.io",
    "clarity.ms",
    "fullstory.com",
    "mouseflow.com",
    "luckyorange.com",
    "crazyegg.com",
];

/// The entry of the list `host` is (or is under), if any.
pub fn tracker_entry(host: &str) -> Option<&'static str> {
    let host = host.trim_end_matches('.');
    TRACKER_HOSTS.iter().copied().find(|entry| {
        host.len() >= entry.len()
            && host[host.len() - entry.len()..].eq_ignore_ascii_case(entry)
            && (host.len() == entry.len() || host.as_bytes()[host.len() - entry.len() - 1] == b'.')
    })
}

/// Whether a request to `host` from a page on `page_host` goes to a
/// tracker: `host` is on the list, and the page is not of the same entry (a
/// listed domain's own pages load their own scripts).
pub fn blocks(host: &str, page_host: Option<&str>) -> bool {
    match tracker_entry(host) {
        Some(entry) => page_host.and_then(tracker_entry) != Some(entry),
        None => false,
    }
}

/// DevTools `Fetch.RequestPattern` URL patterns (`*` any text) matching
/// every URL of every listed host, with or without a port. They match a
/// few URLs that are not the hosts' (one naming the host in its query):
/// the paused request's host is judged again with [`tracker_entry`].
pub fn url_patterns() -> impl Iterator<Item = String> {
    TRACKER_HOSTS.iter().flat_map(|entry| {
        [
            format!("*//{entry}/*"),
            format!("*//{entry}:*"),
            format!("*.{entry}/*"),
            format!("*.{entry}:*"),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_matches_its_host_and_hosts_under_it_only() {
        assert_eq!(tracker_entry("doubleclick.net"), Some("doubleclick.net"));
        assert_eq!(
            tracker_entry("securepubads.g.DoubleClick.net."),
            Some("doubleclick.net")
        );
        assert_eq!(tracker_entry("notdoubleclick.net"), None);
        assert_eq!(tracker_entry("doubleclick.net.example"), None);
        assert_eq!(
            tracker_entry("www.google-analytics.com"),
            Some("google-analytics.com")
        );
        assert_eq!(tracker_entry("www.google.com"), None);
        assert_eq!(tracker_entry("connect.facebook.net"), Some("facebook.net"));
        assert_eq!(tracker_entry("www.facebook.com"), None);
        assert_eq!(tracker_entry("127.0.0.1"), None);
    }

    #[test]
    fn a_listed_domains_own_pages_load_from_it() {
        assert!(blocks("www.hotjar.com", Some("shop.example")));
        assert!(blocks("www.hotjar.com", None));
        assert!(!blocks("static.hotjar.com", Some("www.hotjar.com")));
        assert!(blocks("www.google-analytics.com", Some("www.hotjar.com")));
        assert!(!blocks("cdn.shop.example", Some("shop.example")));
    }

    #[test]
    fn every_entry_is_a_lowercase_host_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for entry in TRACKER_HOSTS {
            assert!(seen.insert(*entry), "{entry} listed twice");
            assert_eq!(entry.to_ascii_lowercase(), *entry);
            assert!(
                url::Host::parse(entry).is_ok() && entry.contains('.'),
                "{entry}"
            );
            for other in TRACKER_HOSTS.iter().filter(|other| *other != entry) {
                assert!(
                    !entry.ends_with(&format!(".{other}")),
                    "{entry} is under {other}"
                );
            }
        }
        assert_eq!(url_patterns().count(), TRACKER_HOSTS.len() * 4);
    }
}
