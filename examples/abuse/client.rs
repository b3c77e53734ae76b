//! The driver's HTTP client for the fleet's api: every request it sends is
//! counted, its answer judged and kept in the ledger. A request that gets no
//! answer waits for the api to be back (the supervisor restarts a crashed
//! one), so one crash costs one failure, not a cascade.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use reqwest::{Method, RequestBuilder};
use serde_json::Value;

use crate::ledger::{Answer, Expect, Ledger};

/// How long any request may take before it counts as unanswered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(8);
/// How long /health may take between classes.
const HEALTH_LIMIT: Duration = Duration::from_secs(2);

/// Which credentials a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    None,
    /// A token the fleet does not know.
    Wrong,
    Read,
    Write,
}

/// The bearer tokens of this throwaway fleet.
pub struct Tokens {
    pub write: String,
    pub read: String,
    pub wrong: String,
}

/// The fleet's api as the driver reaches it.
pub struct Api {
    pub port: u16,
    pub base: String,
    /// The api's metrics port (API_METRICS_PORT): `{metrics_base}/metrics`.
    pub metrics_base: String,
    pub tokens: Tokens,
    pub ledger: Ledger,
    http: reqwest::Client,
    /// Set when the api did not come back within a wait: later failures do
    /// not wait again, so an api left down ends the catalogue quickly.
    down: AtomicBool,
}

impl Api {
    pub fn new(
        port: u16,
        metrics_port: u16,
        tokens: Tokens,
        ledger: Ledger,
    ) -> anyhow::Result<Api> {
        let http = reqwest::Client::builder()
            // Loopback only, whatever HTTP_PROXY says.
            .no_proxy()
            // The api closes a kept-alive connection idle for its idle
            // timeout (HTTP_IDLE_TIMEOUT_SECS, 5 s); a client that reused
            // one idle that long could send into the close.
            .pool_idle_timeout(std::time::Duration::from_secs(2))
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Api {
            port,
            base: format!("http://127.0.0.1:{port}"),
            metrics_base: format!("http://127.0.0.1:{metrics_port}"),
            tokens,
            ledger,
            http,
            down: AtomicBool::new(false),
        })
    }

    pub fn token(&self, token: Token) -> Option<&str> {
        match token {
            Token::None => None,
            Token::Wrong => Some(&self.tokens.wrong),
            Token::Read => Some(&self.tokens.read),
            Token::Write => Some(&self.tokens.write),
        }
    }

    /// A request to `path` (with its query) carrying `token`.
    pub fn request(&self, method: Method, path: &str, token: Token) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match self.token(token) {
            Some(t) => request.bearer_auth(t),
            None => request,
        }
    }

    /// A GET of `url` (another port of the fleet's), with no token.
    pub fn get_url(&self, url: &str) -> RequestBuilder {
        self.http.get(url)
    }

    /// Sends a JSON body.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        token: Token,
        body: &Value,
        what: &str,
        expect: Expect,
    ) -> Option<Answer> {
        let request = self.request(method, path, token).json(body);
        self.call(what, request, expect).await
    }

    /// Creates a site with the write token (a 201 is due); its id, `None`
    /// when it was not created.
    pub async fn create_site(&self, body: &Value, what: &str) -> Option<i64> {
        self.json(
            Method::POST,
            "/api/sites",
            Token::Write,
            body,
            what,
            Expect::Status(&[201]),
        )
        .await
        .and_then(|a| a.json()?["id"].as_i64())
    }

    /// Sends bytes as they are, with this content type (or none).
    #[allow(clippy::too_many_arguments)]
    pub async fn bytes(
        &self,
        method: Method,
        path: &str,
        token: Token,
        content_type: Option<&str>,
        body: Vec<u8>,
        what: &str,
        expect: Expect,
    ) -> Option<Answer> {
        let mut request = self.request(method, path, token).body(body);
        if let Some(content_type) = content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        self.call(what, request, expect).await
    }

    /// Sends, counts and judges; `None` when no answer came (counted as dropped).
    pub async fn call(
        &self,
        what: &str,
        request: RequestBuilder,
        expect: Expect,
    ) -> Option<Answer> {
        self.ledger.tried();
        let (request, label) = match request.build() {
            Ok(request) => {
                let label = self.label(&request, what);
                (request, label)
            }
            Err(e) => {
                self.ledger.driver_error(what, e);
                return None;
            }
        };
        let path = request.url().path().to_owned();
        let answer = match self.http.execute(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let head = format!("{:?}\n", response.headers());
                match response.bytes().await {
                    Ok(body) => {
                        self.ledger.received(&label, head.as_bytes());
                        Answer {
                            status,
                            body: body.to_vec(),
                        }
                    }
                    Err(e) => {
                        self.ledger
                            .dropped(&label, format!("{status}, then the body failed: {e}"));
                        return None;
                    }
                }
            }
            Err(e) => {
                self.ledger.dropped(&label, describe(&e));
                self.wait_ready(Duration::from_secs(20)).await;
                return None;
            }
        };
        self.ledger.received(&label, &answer.body);
        self.ledger.judge(&label, &answer, &expect);
        let ours = path.starts_with("/api") || path == "/ws";
        if ours && (400..500).contains(&answer.status) && !answer.has_error_body() {
            self.ledger.unexpected(
                &label,
                format!("{} without the JSON error body", answer.status),
            );
        }
        Some(answer)
    }

    /// "METHOD /path [token] what", short enough for a report line.
    fn label(&self, request: &reqwest::Request, what: &str) -> String {
        let token = match request.headers().get(reqwest::header::AUTHORIZATION) {
            None => "no token",
            Some(v) if v.as_bytes().ends_with(self.tokens.write.as_bytes()) => "write token",
            Some(v) if v.as_bytes().ends_with(self.tokens.read.as_bytes()) => "read token",
            Some(_) => "wrong token",
        };
        let url = request.url();
        let mut target = url.path().to_owned();
        if let Some(query) = url.query() {
            // Reports never show a token, even one put in a query on purpose.
            let query: Vec<&str> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("token" | "%74oken", _)) => "token=***",
                    _ => pair,
                })
                .collect();
            target = format!("{target}?{}", query.join("&"));
        }
        if target.len() > 100 {
            target = format!("{}…({} bytes)", &target[..100], target.len());
        }
        format!("{} {target} [{token}] {what}", request.method())
    }

    /// /health answers 200 within [`HEALTH_LIMIT`]; counted, and a miss is
    /// recorded as an answer that was due and did not come.
    pub async fn check_health(&self, when: &str) -> bool {
        self.ledger.tried();
        let started = Instant::now();
        let what = format!("GET /health {when}");
        let answered = tokio::time::timeout(
            HEALTH_LIMIT,
            self.http.get(format!("{}/health", self.base)).send(),
        )
        .await;
        match answered {
            Ok(Ok(response)) if response.status() == 200 => true,
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                if status >= 500 {
                    self.ledger.judge(
                        &what,
                        &Answer {
                            status,
                            body: Vec::new(),
                        },
                        &Expect::Status(&[200]),
                    );
                } else {
                    self.ledger
                        .unexpected(&what, format!("{status}, expected 200"));
                }
                false
            }
            Ok(Err(e)) => {
                self.ledger.dropped(&what, describe(&e));
                self.wait_ready(Duration::from_secs(20)).await;
                false
            }
            Err(_) => {
                self.ledger.dropped(
                    &what,
                    format!("no answer within {:.1}s", started.elapsed().as_secs_f64()),
                );
                false
            }
        }
    }

    /// Waits (not counted) until /ready answers 200, at most `limit`; at
    /// once false if an earlier wait found the api down for good.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        if self.down.load(Ordering::Relaxed) {
            return false;
        }
        let started = Instant::now();
        while started.elapsed() < limit {
            let ready = self
                .http
                .get(format!("{}/ready", self.base))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if ready.is_ok_and(|r| r.status() == 200) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.down.store(true, Ordering::Relaxed);
        false
    }
}

/// What went wrong with a request that got no answer.
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "no answer"
    };
    let mut source: Option<&dyn std::error::Error> = Some(e);
    let mut chain = Vec::new();
    while let Some(s) = source {
        chain.push(s.to_string());
        source = s.source();
    }
    format!("{kind} ({})", chain.join(": "))
}
