//! `BROWSER_BACKEND=webdriver`: a Chrome session opened through a WebDriver
//! endpoint (Selenium Grid 4, chromedriver), then driven over the DevTools
//! connection that session names, as any other browser of the pool. The
//! crawl code is one for every backend: WebDriver only starts and ends the
//! browser; contexts, pages, wiping and disposing are DevTools as before.

use anyhow::Context;
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use super::{DevToolsUrl, launch::chrome_args};

/// A session of the endpoint at `url`, its Chrome started with the worker's
/// flags (its own connections through `proxy_server` when given), and the
/// DevTools WebSocket to reach that Chrome at. Errors name the endpoint by
/// its host and port only.
pub async fn open_session(
    url: &DevToolsUrl,
    proxy_server: Option<&str>,
) -> anyhow::Result<(Client, String)> {
    let at = url.host_port();
    // The profile is the endpoint's to choose: a path of the worker's
    // means nothing where the browser runs.
    let args: Vec<String> = chrome_args(std::path::Path::new(""), proxy_server, false)
        .into_iter()
        .filter(|arg| !arg.starts_with("--user-data-dir=") && !arg.starts_with("about:"))
        .collect();
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {"args": args},
        "se:cdpEnabled": true,
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!("built as an object")
    };
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(url.expose().as_str())
        .await
        // The error may quote the URL (and its credentials): its kind only.
        .map_err(|e| anyhow::anyhow!("opening a session at {at}: {}", error_kind(&e)))?;
    let answered = client.capabilities().cloned().unwrap_or_default();
    match devtools_of(url, &answered).await {
        Ok(socket) => Ok((client, socket)),
        Err(e) => {
            let _ = client.close().await;
            Err(e)
        }
    }
}

/// The WebSocket of the session's Chrome: the grid's `se:cdp` (a proxy of
/// it through the grid), else the `/json/version` of chromedriver's
/// `debuggerAddress`, at the endpoint's host (each names itself as it sees
/// itself: a node's address, `localhost`).
async fn devtools_of(
    url: &DevToolsUrl,
    capabilities: &serde_json::Map<String, Value>,
) -> anyhow::Result<String> {
    let at = url.host_port();
    let host = url.expose().host_str().unwrap_or_default();
    if let Some(cdp) = capabilities.get("se:cdp").and_then(Value::as_str) {
        let mut socket = url::Url::parse(cdp)
            .with_context(|| format!("the session of {at} names no valid se:cdp"))?;
        let _ = socket.set_host(Some(host));
        let _ = socket.set_port(url.expose().port_or_known_default());
        let _ = socket.set_scheme(match url.expose().scheme() {
            "https" => "wss",
            _ => "ws",
        });
        return Ok(socket.to_string());
    }
    let address = capabilities
        .get("goog:chromeOptions")
        .and_then(|options| options.get("debuggerAddress"))
        .and_then(Value::as_str)
        .with_context(|| {
            format!(
                "the session of {at} names no DevTools address (neither se:cdp nor \
                 goog:chromeOptions.debuggerAddress): BROWSER_BACKEND=webdriver needs Chrome"
            )
        })?;
    let port = address
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .with_context(|| format!("the session of {at} names no valid debuggerAddress"))?;
    let debugger = DevToolsUrl::parse(&format!("http://{host}:{port}"))?;
    super::chrome::websocket_of(&debugger).await
}

/// What went wrong opening a session, without the URL.
fn error_kind(error: &fantoccini::error::NewSessionError) -> String {
    use fantoccini::error::NewSessionError;
    match error {
        NewSessionError::BadWebdriverUrl(_) => "not a WebDriver URL".to_owned(),
        NewSessionError::Failed(_) | NewSessionError::FailedC(_) => {
            "the endpoint did not answer".to_owned()
        }
        NewSessionError::Lost(_) => "the endpoint closed the connection".to_owned(),
        NewSessionError::NotW3C(_) => "the endpoint does not speak W3C WebDriver".to_owned(),
        NewSessionError::SessionNotCreated(e) => {
            format!("the endpoint created no session: {}", e.message)
        }
        _ => "the endpoint refused the session".to_owned(),
    }
}
