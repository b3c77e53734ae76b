//! Where the worker's browser slots live (`BROWSER_BACKEND`): in a Chrome the
//! worker starts itself, or in a remote browser spoken to as the DevTools
//! protocol over a WebSocket (Browserless, `chrome --remote-debugging-port`).

use std::net::IpAddr;

use anyhow::bail;

/// The browser the worker's slots are contexts of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BrowserBackend {
    /// A Chrome the worker starts and drives over a pipe.
    Local,
    /// A remote browser at `BROWSER_DEVTOOLS_URL`.
    Devtools,
}

/// `BROWSER_DEVTOOLS_URL`: a secret (Browserless takes its token in the
/// query), so its `Debug` shows nothing and logs name its host and port only.
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
        let Ok(url) = url::Url::parse(text.trim()) else {
            bail!("BROWSER_DEVTOOLS_URL is not a URL");
        };
        if !matches!(url.scheme(), "ws" | "wss" | "http" | "https") {
            bail!("BROWSER_DEVTOOLS_URL must be a ws://, wss://, http:// or https:// URL");
        }
        if url.host_str().is_none_or(str::is_empty) || url.port_or_known_default().is_none() {
            bail!("BROWSER_DEVTOOLS_URL names no host");
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

/// The remote browser of `BROWSER_BACKEND=devtools`, checked.
#[derive(Debug, Clone)]
pub struct RemoteBrowserSettings {
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
    match backend {
        BrowserBackend::Local => Ok(None),
        BrowserBackend::Devtools => {
            let Some(url) = url.filter(|u| !u.trim().is_empty()) else {
                bail!("BROWSER_BACKEND=devtools needs BROWSER_DEVTOOLS_URL");
            };
            if slots == Some(0) {
                bail!("BROWSER_DEVTOOLS_SLOTS must be at least 1");
            }
            Ok(Some(RemoteBrowserSettings {
                url: DevToolsUrl::parse(url)?,
                relay_bind,
            }))
        }
    }
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
    }
}
