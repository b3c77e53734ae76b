//! Chrome DevTools Protocol commands through chromedriver's `goog/cdp/execute`
//! endpoint: what WebDriver cannot do (user agent, extra headers, cookies of
//! every domain, storage of an origin, scripts that run before a page's own).

use anyhow::Context;
use fantoccini::{Client, wd::WebDriverCompatibleCommand};
use serde_json::{Value, json};

#[derive(Debug)]
struct CdpCommand {
    cmd: &'static str,
    params: Value,
}

impl WebDriverCompatibleCommand for CdpCommand {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        let session = session_id.unwrap_or_default();
        base_url.join(&format!("session/{session}/goog/cdp/execute"))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        let body = json!({"cmd": self.cmd, "params": self.params});
        (http::Method::POST, Some(body.to_string()))
    }
}

/// Runs one CDP command on the session's page; returns its result.
pub async fn cdp(client: &Client, cmd: &'static str, params: Value) -> anyhow::Result<Value> {
    client
        .issue_cmd(CdpCommand { cmd, params })
        .await
        .with_context(|| format!("CDP {cmd}"))
}
