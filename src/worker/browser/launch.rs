//! How a Chrome is started for a crawl: its flags, the sink for Chrome's own
//! services, and the WebDriver capabilities that carry them.

use std::path::Path;

use serde_json::{Map, Value, json};

/// Flags measured necessary or useful on these machines (BROWSER-NOTES.md),
/// and those that keep Chrome from connecting anywhere of its own accord
/// (network time, optimization hints, translation, domain reliability
/// reports, pings, crash uploads, preconnects to the default search
/// engine...): a crawl's connections are the crawl's.
const CHROME_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-component-extensions-with-background-pages",
    "--disable-sync",
    "--disable-domain-reliability",
    "--disable-breakpad",
    "--disable-search-engine-choice-screen",
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,OptimizationHintsFetching,\
OptimizationGuideModelDownloading,MediaRouter,DialMediaRouteProvider,Translate,\
AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,\
PreconnectToSearch,PreconnectToSearchNonGoogle",
    // Chromium (not Chrome) builds turn on the experiments of its field-trial
    // testing config: a crawler wants Chrome's defaults, not its experiments.
    "--disable-field-trial-config",
    "--no-pings",
    "--metrics-recording-only",
    "--no-default-browser-check",
    "--no-first-run",
    "--disable-quic",
    "--disable-extensions",
    "--mute-audio",
    "--window-size=1280,1024",
];

/// Where Chrome's own services that no flag turns off are sent: the Google
/// account listing every profile makes at start (`--gaia-url`), the
/// component updater's on-demand checks, and the default search engine
/// (Debian's, DuckDuckGo, has its start page loaded at start). A name that never resolves
/// (RFC 6761 `.invalid`): the relay answers it on the spot without a lookup,
/// and Chrome's own resolver (no relay) is told it does not exist.
pub const OWN_SERVICES_HOST: &str = "chrome-services.crawlfleet.invalid";

fn own_services_flags() -> [String; 3] {
    [
        format!("--gaia-url=http://{OWN_SERVICES_HOST}"),
        format!("--component-updater=url-source=http://{OWN_SERVICES_HOST}/"),
        format!("--host-resolver-rules=MAP {OWN_SERVICES_HOST} ~NOTFOUND"),
    ]
}

/// The capabilities of a new session: Chrome with the flags above, its
/// profile in `profile_dir`, through `proxy_server` when given, its network
/// events in the performance log, and its default search engine sunk.
pub fn capabilities(
    profile_dir: &Path,
    proxy_server: Option<&str>,
    chrome_path: Option<&str>,
) -> Map<String, Value> {
    let mut args: Vec<String> = CHROME_FLAGS.iter().map(|f| f.to_string()).collect();
    args.extend(own_services_flags());
    // The first tab: without it Chrome opens its new tab page, which is
    // the default search engine's (Debian's: start.duckduckgo.com).
    args.push("about:blank".to_owned());
    args.push(format!("--user-data-dir={}", profile_dir.display()));
    if let Some(server) = proxy_server {
        args.push(format!("--proxy-server={server}"));
        // Every request goes through the proxy, loopback included, and
        // WebRTC sends no UDP around it.
        args.push("--proxy-bypass-list=<-loopback>".to_owned());
        args.push("--force-webrtc-ip-handling-policy=disable_non_proxied_udp".to_owned());
    }
    // Network events go to chromedriver's performance log: the only
    // place a page's response headers (Retry-After) can be read.
    let mut chrome_options = json!({
        "args": args,
        "perfLoggingPrefs": {"enableNetwork": true, "enablePage": false},
        // The default search engine, sunk too (see OWN_SERVICES_HOST).
        "prefs": {"default_search_provider_data": {"template_url_data": {
            "keyword": "crawlfleet",
            "short_name": "crawlfleet",
            "url": format!("http://{OWN_SERVICES_HOST}/search?q={{searchTerms}}"),
            "new_tab_url": "about:blank",
        }}},
    });
    if let Some(path) = chrome_path {
        chrome_options["binary"] = json!(path);
    }
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": chrome_options,
        "goog:loggingPrefs": {"performance": "ALL"},
        "timeouts": {"pageLoad": 120_000, "script": 30_000},
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!("built as an object")
    };
    capabilities
}
