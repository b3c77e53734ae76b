//! How the worker's Chrome is started: its flags, the sink for Chrome's own
//! services, and the preferences its profile starts with.

use std::path::Path;

use anyhow::Context;
use serde_json::json;

/// Flags measured necessary or useful on these machines (docs/dependencies.md),
/// and those that keep Chrome from connecting anywhere of its own accord
/// (network time, optimization hints, translation, domain reliability
/// reports, pings, crash uploads, preconnects to the default search
/// engine...): a crawl's connections are the crawl's.
const CHROME_FLAGS: &[&str] = &[
    "--headless",
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
PreconnectToSearch,PreconnectToSearchNonGoogle,\
WebUIOmniboxPopup,WebUIOmniboxFullPopup,WebUIOmniboxAimPopup,PreloadTopChromeWebUI",
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
    // WebRTC sends no UDP around the proxy a context leaves through.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
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

/// Chrome's command line: the flags above, its profile in `profile_dir`,
/// every connection it opens outside a crawl's context through
/// `proxy_server` when given (a crawl's context names its own), and
/// `--no-sandbox` unless it runs with its `sandbox` (see `confinement`).
pub fn chrome_args(profile_dir: &Path, proxy_server: Option<&str>, sandbox: bool) -> Vec<String> {
    let mut args: Vec<String> = CHROME_FLAGS.iter().map(|f| f.to_string()).collect();
    if !sandbox {
        args.push("--no-sandbox".to_owned());
    }
    args.extend(own_services_flags());
    args.push(format!("--user-data-dir={}", profile_dir.display()));
    if let Some(server) = proxy_server {
        args.push(format!("--proxy-server={server}"));
        args.push(format!("--proxy-bypass-list={PROXY_BYPASS}"));
    }
    // The first tab: without it Chrome opens its new tab page, which is
    // the default search engine's (Debian's: start.duckduckgo.com).
    args.push("about:blank".to_owned());
    args
}

/// Every request goes through the proxy, loopback included.
pub const PROXY_BYPASS: &str = "<-loopback>";

/// Writes the preferences a new profile starts with: the default search
/// engine sunk too (see [`OWN_SERVICES_HOST`]).
pub async fn write_preferences(profile_dir: &Path) -> anyhow::Result<()> {
    let preferences = json!({
        "default_search_provider_data": {"template_url_data": {
            "keyword": "crawlfleet",
            "short_name": "crawlfleet",
            "url": format!("http://{OWN_SERVICES_HOST}/search?q={{searchTerms}}"),
            "new_tab_url": "about:blank",
        }},
    });
    let default = profile_dir.join("Default");
    tokio::fs::create_dir_all(&default)
        .await
        .with_context(|| format!("creating {}", default.display()))?;
    tokio::fs::write(default.join("Preferences"), preferences.to_string())
        .await
        .context("writing Chrome's preferences")
}
