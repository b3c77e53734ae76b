//! What the catalogue found. Every request is counted here and its answer
//! judged against what it should have been; everything the driver received
//! is kept, so the secrets search can read it at the end.

use std::sync::{Arc, Mutex};

use serde_json::Value;

/// An answer from the server: its status and what came with it.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// `error.field` of the JSON error body.
    pub fn error_field(&self) -> Option<String> {
        self.json()?["error"]["field"].as_str().map(str::to_owned)
    }

    /// Whether the body is the API's error shape, `{"error": {"code", "message", "field"?}}`.
    pub fn has_error_body(&self) -> bool {
        self.json().is_some_and(|v| {
            v["error"]["code"].is_string()
                && v["error"]["message"].is_string()
                && (v["error"]["field"].is_null() || v["error"]["field"].is_string())
        })
    }
}

/// What a hostile request should get.
#[derive(Debug, Clone)]
pub enum Expect {
    /// Refused as breaking a rule: 422 whose `field` is this one or inside it
    /// (`headers` covers `headers.X-A`).
    Invalid(String),
    /// Refused as unreadable or breaking a rule (400 or 422), naming this
    /// field: a query parameter.
    Rejected(String),
    /// One of these statuses. A 5xx listed here is not counted as one: HTTP
    /// prescribes a few (503 for a WebSocket client over the cap, 505 for an
    /// unsupported version, 501 for an unknown transfer coding).
    Status(&'static [u16]),
    /// Anything but a 5xx.
    NotServerError,
}

impl Expect {
    pub fn invalid(field: &str) -> Expect {
        Expect::Invalid(field.to_owned())
    }

    pub fn rejected(field: &str) -> Expect {
        Expect::Rejected(field.to_owned())
    }
}

#[derive(Default)]
struct Findings {
    requests: usize,
    server_errors: Vec<String>,
    dropped: Vec<String>,
    wrong_field: Vec<String>,
    accepted: Vec<String>,
    breaches: Vec<String>,
    unexpected: Vec<String>,
    let_through: Vec<String>,
    starved: Vec<String>,
    driver_errors: Vec<String>,
    received: Vec<(String, Vec<u8>)>,
}

/// The findings, shared by the catalogue's concurrent probes.
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<Findings>>);

/// The figures of a finished catalogue, with the details behind them.
pub struct Tally {
    pub requests: usize,
    pub server_errors: Vec<String>,
    pub dropped: Vec<String>,
    pub wrong_field: Vec<String>,
    pub accepted: Vec<String>,
    /// Hostile requests that got through a guard that must hold: a stored
    /// secret handed to a new target, a secret shown to a read token,
    /// /metrics open on the API's port or a database read per scrape.
    pub breaches: Vec<String>,
    pub unexpected: Vec<String>,
    /// What hostile pages got stored or answered past a bound (a failure).
    pub let_through: Vec<String>,
    /// Requests with a valid token refused or unanswered while another
    /// client held connections.
    pub starved: Vec<String>,
    pub driver_errors: Vec<String>,
    /// (where, what): every answer, WebSocket frame and raw reply received.
    pub received: Vec<(String, Vec<u8>)>,
}

/// Bodies kept for the secrets search, at most this long each (an answer
/// echoing a 1 MiB hostile body needs no more than its start).
const KEPT_BYTES: usize = 256 * 1024;

impl Ledger {
    fn with<T>(&self, f: impl FnOnce(&mut Findings) -> T) -> T {
        f(&mut self.0.lock().expect("ledger lock"))
    }

    /// One more request tried.
    pub fn tried(&self) {
        self.with(|f| f.requests += 1);
    }

    /// Keeps what the server sent, for the secrets search.
    pub fn received(&self, what: &str, bytes: &[u8]) {
        let kept = bytes[..bytes.len().min(KEPT_BYTES)].to_vec();
        self.with(|f| f.received.push((what.to_owned(), kept)));
    }

    /// No answer where one was due: a reset, a close or a timeout.
    pub fn dropped(&self, what: &str, why: impl std::fmt::Display) {
        self.with(|f| f.dropped.push(format!("{what}: {why}")));
    }

    /// Not what the API should do, but no failure of the run (a status other
    /// than the expected one, a missing error body, no WebSocket cap...).
    pub fn unexpected(&self, what: &str, why: impl std::fmt::Display) {
        self.with(|f| f.unexpected.push(format!("{what}: {why}")));
    }

    /// A hostile request the API took as valid.
    pub fn accepted(&self, what: &str, why: impl std::fmt::Display) {
        self.with(|f| f.accepted.push(format!("{what}: {why}")));
    }

    /// A hostile page got something past a bound of what a crawl stores
    /// (a field too long, an item URL that is a script, forged items...).
    pub fn let_through(&self, what: &str, why: impl std::fmt::Display) {
        self.with(|f| f.let_through.push(format!("{what}: {why}")));
    }

    /// A guard that must hold did not: the run fails.
    pub fn breach(&self, what: &str, why: impl std::fmt::Display) {
        self.with(|f| f.breaches.push(format!("{what}: {why}")));
    }

    /// A request with a valid token not served because another client held
    /// connections: a failure of the run, whatever the status.
    pub fn starved(&self, what: &str, why: impl std::fmt::Display) {
        self.with(|f| f.starved.push(format!("{what}: {why}")));
    }

    /// The driver could not do part of the catalogue (a set-up request failed).
    pub fn driver_error(&self, what: &str, why: impl std::fmt::Display) {
        self.with(|f| f.driver_errors.push(format!("{what}: {why}")));
    }

    /// Judges an answer against what was expected.
    pub fn judge(&self, what: &str, answer: &Answer, expect: &Expect) {
        let status = answer.status;
        let listed = matches!(expect, Expect::Status(list) if list.contains(&status));
        let got = || format!("{status} {}", snippet(&answer.body));
        if status >= 500 && !listed {
            self.with(|f| f.server_errors.push(format!("{what}: {}", got())));
            return;
        }
        match expect {
            Expect::Invalid(field) | Expect::Rejected(field) => {
                let refusals: &[u16] = match expect {
                    Expect::Invalid(_) => &[422],
                    _ => &[400, 422],
                };
                if refusals.contains(&status) {
                    match answer.error_field() {
                        Some(f) if f == *field || f.starts_with(&format!("{field}.")) => {}
                        named => self.with(|f| {
                            f.wrong_field.push(format!(
                                "{what}: {status} naming {named:?}, expected {field:?}"
                            ))
                        }),
                    }
                } else if (200..300).contains(&status) {
                    self.accepted(what, status);
                } else {
                    self.unexpected(
                        what,
                        format!("{}, expected a refusal naming {field}", got()),
                    );
                }
            }
            Expect::Status(list) if !listed => {
                if (200..300).contains(&status) {
                    self.accepted(what, format!("{status}, expected one of {list:?}"));
                } else {
                    self.unexpected(what, format!("{}, expected one of {list:?}", got()));
                }
            }
            Expect::Status(_) | Expect::NotServerError => {}
        }
    }

    pub fn tally(&self) -> Tally {
        self.with(|f| Tally {
            requests: f.requests,
            server_errors: std::mem::take(&mut f.server_errors),
            dropped: std::mem::take(&mut f.dropped),
            wrong_field: std::mem::take(&mut f.wrong_field),
            accepted: std::mem::take(&mut f.accepted),
            breaches: std::mem::take(&mut f.breaches),
            unexpected: std::mem::take(&mut f.unexpected),
            let_through: std::mem::take(&mut f.let_through),
            starved: std::mem::take(&mut f.starved),
            driver_errors: std::mem::take(&mut f.driver_errors),
            received: std::mem::take(&mut f.received),
        })
    }
}

/// The start of a body on one line, control characters escaped, for reports.
pub fn snippet(body: &[u8]) -> String {
    const SHOWN: usize = 120;
    let text = String::from_utf8_lossy(&body[..body.len().min(SHOWN)]);
    let mut line: String = text.chars().flat_map(char::escape_debug).collect();
    if body.len() > SHOWN {
        line.push('…');
    }
    line
}
