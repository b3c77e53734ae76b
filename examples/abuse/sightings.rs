//! The search for secrets: in every answer the driver received, every log
//! line of every process the fleet ran and the environment of every Chrome
//! process, each a place where a secret may never show.

use std::path::Path;

use crawlfleet_demo::site::{DemoSite, member_cookie};

use crate::{
    ledger::{Ledger, Tally},
    secrets::Secrets,
};

/// Every place a secret may not show: what the driver received, and every
/// log of every process the fleet ran. A search with no answers, or with a
/// log missing or empty, would find nothing for want of looking: reported to
/// `ledger` as a probe that did not run.
pub fn secrets_seen(
    secrets: &Secrets,
    cookies: &[String],
    tally: &Tally,
    log_dir: &Path,
    browser: &[(String, Vec<u8>)],
    ledger: &Ledger,
) -> Vec<Sighting> {
    let sought = secrets.sought(cookies);
    let logs: Vec<(String, Vec<u8>)> = std::fs::read_dir(log_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| {
            let name = format!("log {}", entry.file_name().to_string_lossy());
            (name, std::fs::read(entry.path()).unwrap_or_default())
        })
        .collect();
    for role in ["api", "scheduler", "worker"] {
        let logged = logs
            .iter()
            .any(|(name, bytes)| name.contains(role) && !bytes.is_empty());
        if !logged {
            ledger.unexpected(
                "the secrets search",
                format!("no log of the {role} to search in {}", log_dir.display()),
            );
        }
    }
    if tally.received.is_empty() {
        ledger.unexpected("the secrets search", "no answer was received to search");
    }
    let answers = tally
        .received
        .iter()
        .map(|(what, bytes)| (what.as_str(), bytes.as_slice()));
    let logs = logs
        .iter()
        .chain(browser)
        .map(|(name, bytes)| (name.as_str(), bytes.as_slice()));
    search(&sought, answers.chain(logs))
}

/// The `member` cookie values the fixture handed out: read from its request
/// log, and derived as it makes them (`m<n>`, one per visit without one).
/// A session that was never handed out, or never sent back, is reported:
/// the search would then have looked for it on paths it never took.
pub fn member_cookies(site: &DemoSite, ledger: &Ledger) -> Vec<String> {
    let visits = site.requests("/members");
    let handed_out = visits
        .iter()
        .filter(|hit| member_cookie(&hit.headers).is_none())
        .count();
    let mut values: Vec<String> = (1..=handed_out).map(|n| format!("m{n}")).collect();
    let mut sent_back = false;
    for hit in visits.iter().chain(&site.requests("/members/visits")) {
        if let Some(value) = member_cookie(&hit.headers) {
            sent_back |= hit.path == "/members";
            values.push(value);
        }
    }
    if handed_out == 0 {
        ledger.unexpected(
            "the kept session",
            "the fixture handed out no member cookie",
        );
    } else if !sent_back {
        ledger.unexpected(
            "the kept session",
            "the second run did not send the member cookie back",
        );
    }
    values.sort();
    values.dedup();
    values
}

/// A value no answer and no log line may contain.
pub struct Sought {
    pub name: String,
    pub value: String,
    /// For short values (the fixture's cookies are `m1`, `m2`...): counted
    /// only as a whole word with this word shortly before it.
    pub near: Option<&'static str>,
}

impl Secrets {
    pub fn sought(&self, cookies: &[String]) -> Vec<Sought> {
        let plain = |name: &str, value: &str| Sought {
            name: name.to_owned(),
            value: value.to_owned(),
            near: None,
        };
        let mut sought = vec![
            plain("the write token", &self.write_token),
            plain("the read token", &self.read_token),
            plain("SESSION_KEY", &self.session_key),
            plain("secret A (Authorization header value)", &self.header_bearer),
            plain("secret B (X-Api-Key header value)", &self.api_key),
            plain("secret C (proxy user name)", &self.proxy_user),
            plain("secret D (proxy password)", &self.proxy_password),
        ];
        sought.extend(cookies.iter().map(|value| Sought {
            name: format!("member cookie {value}"),
            value: value.clone(),
            near: Some("member"),
        }));
        sought
    }
}

/// Sought values found in one place (an answer, a log file).
pub struct Sighting {
    pub place: String,
    /// Each value found, with how often.
    pub found: Vec<(String, usize)>,
    /// The first value found, in context.
    pub example: String,
}

impl std::fmt::Display for Sighting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let found: Vec<String> = self
            .found
            .iter()
            .map(|(name, n)| format!("{name} ({n}x)"))
            .collect();
        write!(
            f,
            "in {}: {}; e.g. …{}…",
            self.place,
            found.join(", "),
            self.example
        )
    }
}

/// Every place where a sought value shows.
pub fn search<'a>(
    sought: &[Sought],
    places: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Vec<Sighting> {
    let mut sightings = Vec::new();
    for (place, bytes) in places {
        let text = String::from_utf8_lossy(bytes);
        let mut found = Vec::new();
        let mut example = None;
        for secret in sought {
            let at: Vec<usize> = text
                .match_indices(&secret.value)
                .map(|(at, _)| at)
                .filter(|at| {
                    secret
                        .near
                        .is_none_or(|word| stands_near(&text, *at, &secret.value, word))
                })
                .collect();
            let Some(first) = at.first() else { continue };
            found.push((secret.name.clone(), at.len()));
            example.get_or_insert_with(|| {
                let start = text.floor_char_boundary(first.saturating_sub(60));
                let end =
                    text.ceil_char_boundary((first + secret.value.len() + 60).min(text.len()));
                let context =
                    text[start..end].replace(&secret.value, &format!("<{}>", secret.name));
                context
                    .chars()
                    .flat_map(char::escape_debug)
                    .collect::<String>()
            });
        }
        if let Some(example) = example {
            sightings.push(Sighting {
                place: place.to_owned(),
                found,
                example,
            });
        }
    }
    sightings
}

/// Whether `value` at `at` is a whole word with `word` in the 100 bytes before it.
fn stands_near(text: &str, at: usize, value: &str, word: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_alphanumeric);
    let whole = (at == 0 || !alnum(at - 1)) && !alnum(at + value.len());
    let before = &text[text.floor_char_boundary(at.saturating_sub(100))..at];
    whole && before.contains(word)
}
