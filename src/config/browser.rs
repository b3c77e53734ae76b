//! Where the worker's browser slots live (`BROWSER_BACKEND`): in a Chrome the
//! worker starts itself, in a remote browser spoken to as the DevTools
//! protocol over a WebSocket (Browserless, `chrome --remote-debugging-port`),
//! or in a Chrome a WebDriver endpoint (Selenium Grid 4, chromedriver) starts
//! for the worker, spoken to over the DevTools connection its session names.

use std::net::IpAddr;

use anyhow::bail;

/// The browser the worker's slots are contexts of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BrowserBackend {
    /// A Chrome the worker starts and drives over a pipe.
    Local,
    /// A remote browser at `BROWSER_DEVTOOLS_URL`.
    Devtools,
    /// A Chrome session of the WebDriver endpoint at `BROWSER_WEBDRIVER_URL`.
    Webdriver,
}

/// How the worker reaches a remote browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteProtocol {
    /// Its DevTools WebSocket, straight.
    DevTools,
    /// A WebDriver session per browser, then the DevTools connection the
    /// session names (`se:cdp`, or `goog:chromeOptions.debuggerAddress`).
    WebDriver,
}

impl RemoteProtocol {
    /// The setting naming the endpoint.
    pub fn url_setting(self) -> &'static str {
        match self {
            RemoteProtocol::DevTools => "BROWSER_DEVTOOLS_URL",
            RemoteProtocol::WebDriver => "BROWSER_WEBDRIVER_URL",
        }
    }
}

/// `BROWSER_DEVTOOLS_URL` or `BROWSER_WEBDRIVER_URL`: a secret (Browserless
/// takes its token in the query, a grid its credentials), so its `Debug`
/// shows nothing and logs name its host and port only.
#[derive(Clone)]
pub struct DevToolsUrl(url::Url);

impl std::fmt::Debug for DevToolsUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DevToolsUrl(<redacted>)")
    }
}

impl DevToolsUrl {
    /// A `ws(s)://host:port/devtools/browser/...` URL, or the `http(s)://host:port`
    /// whose `/json/version` names it; the error never repeats the value.
    pub fn parse(text: &str) -> anyhow::Result<DevToolsUrl> {
        Self::parse_for(text, RemoteProtocol::DevTools)
    }

    /// The URL of an endpoint of `protocol` (a WebDriver endpoint is an
    /// `http(s)://host:port[/path]`); the error never repeats the value.
    pub fn parse_for(text: &str, protocol: RemoteProtocol) -> anyhow::Result<DevToolsUrl> {
        let setting = protocol.url_setting();
        let Ok(url) = url::Url::parse(text.trim()) else {
            bail!("{setting} is not a URL");
        };
        match protocol {
            RemoteProtocol::DevTools
                if !matches!(url.scheme(), "ws" | "wss" | "http" | "https") =>
            {
                bail!("{setting} must be a ws://, wss://, http:// or https:// URL")
            }
            RemoteProtocol::WebDriver if !matches!(url.scheme(), "http" | "https") => {
                bail!("{setting} must be an http:// or https:// URL")
            }
            _ => {}
        }
        if url.host_str().is_none_or(str::is_empty) || url.port_or_known_default().is_none() {
            bail!("{setting} names no host");
        }
        let mut url = url;
        // WebDriver commands are paths under the endpoint's (`/wd/hub/`).
        if protocol == RemoteProtocol::WebDriver && !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        Ok(DevToolsUrl(url))
    }

    /// The URL, credentials and all: for connecting only.
    pub fn expose(&self) -> &url::Url {
        &self.0
    }

    /// Whether it names the WebSocket itself (else `/json/version` does).
    pub fn is_websocket(&self) -> bool {
        matches!(self.0.scheme(), "ws" | "wss")
    }

    /// `host:port`, what logs and errors may say of it.
    pub fn host_port(&self) -> String {
        format!(
            "{}:{}",
            self.0.host_str().unwrap_or_default(),
            self.0.port_or_known_default().unwrap_or_default()
        )
    }
}

/// The remote browser of `BROWSER_BACKEND=devtools` or `webdriver`, checked.
#[derive(Debug, Clone)]
pub struct RemoteBrowserSettings {
    pub protocol: RemoteProtocol,
    pub url: DevToolsUrl,
    /// Where the relays listen for the remote browser's connections.
    pub relay_bind: IpAddr,
}

/// The remote browser the settings name, `None` for the local backend, or an
/// error naming the setting that is wrong (never its value). Its `slots`
/// bound the worker's browser slots (`worker::browser_slots`).
pub fn remote_browser(
    backend: BrowserBackend,
    url: Option<&str>,
    slots: Option<usize>,
    relay_bind: &str,
) -> anyhow::Result<Option<RemoteBrowserSettings>> {
    let Ok(relay_bind) = relay_bind.trim().parse::<IpAddr>() else {
        bail!("BROWSER_RELAY_BIND must be an IP address (the remote browser connects to it)");
    };
    if relay_bind.is_unspecified() {
        bail!(
            "BROWSER_RELAY_BIND must be an address the remote browser can reach, not {relay_bind}"
        );
    }
    let (protocol, name) = match backend {
        BrowserBackend::Local => return Ok(None),
        BrowserBackend::Devtools => (RemoteProtocol::DevTools, "devtools"),
        BrowserBackend::Webdriver => (RemoteProtocol::WebDriver, "webdriver"),
    };
    let setting = protocol.url_setting();
    let Some(url) = url.filter(|u| !u.trim().is_empty()) else {
        bail!("BROWSER_BACKEND={name} needs {setting}");
    };
    if slots == Some(0) {
        bail!("{} must be at least 1", setting.replace("_URL", "_SLOTS"));
    }
    Ok(Some(RemoteBrowserSettings {
        protocol,
        url: DevToolsUrl::parse_for(url, protocol)?,
        relay_bind,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_url_is_refused_naming_the_setting_not_the_value() {
        for bad in [
            "not a url?token=s3cret",
            "ftp://h:1/?token=s3cret",
            "ws://:9/?token=s3cret",
        ] {
            let error = remote_browser(BrowserBackend::Devtools, Some(bad), None, "127.0.0.1")
                .unwrap_err()
                .to_string();
            assert!(error.contains("BROWSER_DEVTOOLS_URL"), "{error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
        let error = remote_browser(BrowserBackend::Devtools, None, None, "127.0.0.1").unwrap_err();
        assert!(error.to_string().contains("BROWSER_DEVTOOLS_URL"));
        for bad in [
            "ws://127.0.0.1:4444/?token=s3cret",
            "not a url?token=s3cret",
            "http://:4444/?token=s3cret",
        ] {
            let error = remote_browser(BrowserBackend::Webdriver, Some(bad), None, "127.0.0.1")
                .unwrap_err()
                .to_string();
            assert!(error.contains("BROWSER_WEBDRIVER_URL"), "{error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
        let error = remote_browser(BrowserBackend::Webdriver, None, None, "127.0.0.1").unwrap_err();
        assert!(error.to_string().contains("BROWSER_WEBDRIVER_URL"));
        let error = remote_browser(
            BrowserBackend::Webdriver,
            Some("http://127.0.0.1:4444"),
            Some(0),
            "127.0.0.1",
        )
        .unwrap_err();
        assert!(error.to_string().contains("BROWSER_WEBDRIVER_SLOTS"));
        let error = remote_browser(BrowserBackend::Local, None, None, "0.0.0.0").unwrap_err();
        assert!(error.to_string().contains("BROWSER_RELAY_BIND"));
    }

    #[test]
    fn the_url_is_never_shown_whole() {
        let remote = remote_browser(
            BrowserBackend::Devtools,
            Some("ws://127.0.0.1:3000/?token=s3cret"),
            Some(4),
            "127.0.0.1",
        )
        .unwrap()
        .unwrap();
        assert_eq!(remote.url.host_port(), "127.0.0.1:3000");
        assert!(!format!("{remote:?}").contains("s3cret"));
        assert!(remote.url.is_websocket());
        let grid = remote_browser(
            BrowserBackend::Webdriver,
            Some("http://127.0.0.1:4444/wd/hub"),
            None,
            "127.0.0.1",
        )
        .unwrap()
        .unwrap();
        assert_eq!(grid.url.expose().path(), "/wd/hub/", "commands go under it");
        assert_eq!(grid.protocol, RemoteProtocol::WebDriver);
    }
}
