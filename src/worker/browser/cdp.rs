//! Chrome DevTools Protocol through chromedriver: commands over its
//! `goog/cdp/execute` endpoint, for what WebDriver cannot do (user agent,
//! extra headers, cookies of every domain, storage of an origin, scripts that
//! run before a page's own), and the network events of its performance log,
//! for what a page cannot tell about itself (its response headers).

use anyhow::Context;
use fantoccini::{Client, wd::WebDriverCompatibleCommand};
use serde_json::{Value, json};

/// A POST to one of chromedriver's own endpoints of the session.
#[derive(Debug)]
struct ChromedriverCommand {
    /// Below `session/{id}/`.
    path: &'static str,
    body: Value,
}

impl WebDriverCompatibleCommand for ChromedriverCommand {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        let session = session_id.unwrap_or_default();
        base_url.join(&format!("session/{session}/{}", self.path))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(self.body.to_string()))
    }
}

/// Runs one CDP command on the session's page; returns its result.
pub async fn cdp(client: &Client, cmd: &'static str, params: Value) -> anyhow::Result<Value> {
    client
        .issue_cmd(ChromedriverCommand {
            path: "goog/cdp/execute",
            body: json!({"cmd": cmd, "params": params}),
        })
        .await
        .with_context(|| format!("CDP {cmd}"))
}

/// The responses the session received since the last call, oldest first:
/// each `Network.responseReceived` event's `params` (type, frame, response
/// with url, status and headers). Needs the session opened with
/// `goog:loggingPrefs: {performance: ALL}`. chromedriver keeps every network
/// event until it is read: read it after each page.
pub async fn take_responses(client: &Client) -> anyhow::Result<Vec<Value>> {
    let entries = client
        .issue_cmd(ChromedriverCommand {
            path: "se/log",
            body: json!({"type": "performance"}),
        })
        .await
        .context("reading the performance log")?;
    let Value::Array(entries) = entries else {
        anyhow::bail!("the performance log is not a list: {entries}");
    };
    Ok(entries
        .iter()
        .filter_map(|entry| entry["message"].as_str())
        // Most events are of no interest: parse only the responses.
        .filter(|message| message.contains("\"Network.responseReceived\""))
        .filter_map(|message| serde_json::from_str::<Value>(message).ok())
        .filter(|event| event["message"]["method"] == "Network.responseReceived")
        .map(|mut event| event["message"]["params"].take())
        .collect())
}
