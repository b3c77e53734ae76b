//! An endpoint as a client sends it, the rules it must pass, and as it is
//! stored.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use url::Url;
use utoipa::ToSchema;

use super::{MASKED_SECRET, WebhookEventType, WebhookSecret};
use crate::domain::{FieldError, text};

/// Longest endpoint URL.
const MAX_URL_CHARS: usize = 2048;
/// Longest description.
const MAX_DESCRIPTION_CHARS: usize = 500;
/// Most site or keyword ids a filter may list.
const MAX_FILTER_IDS: usize = 1000;

/// An endpoint as a client sends it. Filters left empty let every site or
/// keyword through; `secret` left out is generated on creation and kept on
/// replacement (as is the masked form a response shows).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookInput {
    /// Where messages are POSTed: an http(s) URL the SSRF guard lets through.
    pub url: String,
    /// The events it is told about (at least one).
    #[schema(value_type = Vec<WebhookEventType>)]
    pub events: Vec<String>,
    /// Only events about these sites; empty or left out: every site.
    #[serde(default)]
    pub site_ids: Vec<i64>,
    /// Only events about these keywords; empty or left out: every keyword
    /// (events about no keyword, like site.blocked, pass).
    #[serde(default)]
    pub keyword_ids: Vec<i64>,
    /// The signing secret, `whsec_` and 24 to 64 bytes in base64. Left out:
    /// generated on creation, kept on replacement (as is `whsec_***`, the
    /// masked form responses show); a new one rotates it.
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default)]
    pub description: String,
    /// False: no new message is queued for it and nothing is sent. Turning
    /// it back on sends what waited.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

/// An endpoint that passed every rule but the store's (the filter ids exist)
/// and the SSRF guard's (where its URL leads, judged by the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSpec {
    pub url: Url,
    /// Sorted, without repeats.
    pub events: Vec<WebhookEventType>,
    /// Sorted, without repeats; empty: every site.
    pub site_ids: Vec<i64>,
    /// Sorted, without repeats; empty: every keyword.
    pub keyword_ids: Vec<i64>,
    /// `None`: generate one (creation) or keep the stored one (replacement).
    pub secret: Option<WebhookSecret>,
    pub description: String,
    pub enabled: bool,
}

impl WebhookInput {
    pub fn parse(self) -> Result<WebhookSpec, FieldError> {
        let url = parse_url(&self.url)?;
        if self.events.is_empty() {
            return Err(FieldError::new(
                "events",
                format!(
                    "must name at least one event: {}",
                    WebhookEventType::names()
                ),
            ));
        }
        let mut events = self
            .events
            .iter()
            .enumerate()
            .map(|(i, name)| {
                name.parse().map_err(|_| {
                    FieldError::new(
                        format!("events[{i}]"),
                        format!(
                            "{:?} is not an event; known: {}",
                            name.chars().take(50).collect::<String>(),
                            WebhookEventType::names()
                        ),
                    )
                })
            })
            .collect::<Result<Vec<WebhookEventType>, _>>()?;
        events.sort();
        events.dedup();
        let secret = match self.secret.as_deref().map(str::trim) {
            None | Some(MASKED_SECRET) => None,
            Some(text) => Some(WebhookSecret::parse(text)?),
        };
        let description = text::check(&self.description, "description", MAX_DESCRIPTION_CHARS)
            .map(|()| self.description.trim().to_owned())?;
        Ok(WebhookSpec {
            url,
            events,
            site_ids: filter_ids(self.site_ids, "site_ids")?,
            keyword_ids: filter_ids(self.keyword_ids, "keyword_ids")?,
            secret,
            description,
            enabled: self.enabled,
        })
    }
}

/// An endpoint's URL: http or https, with a host, no credentials (the
/// signature is what proves a message comes from crawlfleet) and no fragment.
fn parse_url(text: &str) -> Result<Url, FieldError> {
    let field = "url";
    let text = text::non_empty(text, field, MAX_URL_CHARS)?;
    let url =
        Url::parse(text).map_err(|e| FieldError::new(field, format!("is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FieldError::new(field, "must be an http:// or https:// URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(FieldError::new(field, "must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(FieldError::new(
            field,
            "must not carry credentials: receivers check the webhook-signature header instead",
        ));
    }
    if url.fragment().is_some() {
        return Err(FieldError::new(field, "must not have a #fragment"));
    }
    Ok(url)
}

fn filter_ids(mut ids: Vec<i64>, field: &str) -> Result<Vec<i64>, FieldError> {
    if ids.len() > MAX_FILTER_IDS {
        return Err(FieldError::new(
            field,
            format!("may list at most {MAX_FILTER_IDS} ids"),
        ));
    }
    if let Some(bad) = ids.iter().find(|id| **id <= 0) {
        return Err(FieldError::new(
            field,
            format!("ids are positive integers, got {bad}"),
        ));
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// A stored endpoint (its secret stays sealed in the store; see
/// [`WebhookSecret`] for when it is shown).
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    pub id: i64,
    pub url: Url,
    pub events: Vec<WebhookEventType>,
    pub site_ids: Vec<i64>,
    pub keyword_ids: Vec<i64>,
    pub description: String,
    /// Off by a client, or by the sender after a whole retry schedule
    /// without one successful delivery (then `disabled_at` and
    /// `disabled_reason` say when and why).
    pub enabled: bool,
    pub disabled_at: Option<DateTime<Utc>>,
    pub disabled_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> WebhookInput {
        WebhookInput {
            url: "https://hooks.example.com/crawlfleet".into(),
            events: vec!["run.failed".into(), "site.blocked".into()],
            enabled: true,
            ..WebhookInput::default()
        }
    }

    fn refused(change: impl FnOnce(&mut WebhookInput)) -> FieldError {
        let mut input = input();
        change(&mut input);
        input.parse().unwrap_err()
    }

    #[test]
    fn a_good_endpoint_parses_with_its_events_and_filters_in_order() {
        let mut input = input();
        input.events.push("run.failed".into());
        input.site_ids = vec![3, 1, 3];
        let spec = input.parse().unwrap();
        assert_eq!(
            spec.events,
            [WebhookEventType::RunFailed, WebhookEventType::SiteBlocked]
        );
        assert_eq!(spec.site_ids, [1, 3]);
        assert!(spec.keyword_ids.is_empty());
        assert_eq!(spec.secret, None, "generated by whoever stores it");
    }

    #[test]
    fn bad_endpoints_are_refused_naming_the_field() {
        for (url, why) in [
            ("", "empty"),
            ("not a url", "valid URL"),
            ("ftp://example.com/x", "http"),
            ("file:///etc/passwd", "http"),
            ("https://user:pw@example.com/", "credentials"),
            ("https://example.com/#x", "fragment"),
        ] {
            let e = refused(|i| i.url = url.into());
            assert_eq!(e.field, "url", "{url}");
            assert!(e.message.contains(why), "{url}: {}", e.message);
        }
        assert_eq!(refused(|i| i.events.clear()).field, "events");
        let e = refused(|i| i.events.push("run.exploded".into()));
        assert_eq!(e.field, "events[2]");
        assert!(e.message.contains("run.completed"), "{}", e.message);
        assert_eq!(refused(|i| i.site_ids = vec![0]).field, "site_ids");
        assert_eq!(refused(|i| i.keyword_ids = vec![-4]).field, "keyword_ids");
        assert_eq!(
            refused(|i| i.secret = Some("hunter2".into())).field,
            "secret"
        );
        assert_eq!(
            refused(|i| i.description = "a\nb".into()).field,
            "description"
        );
    }

    #[test]
    fn the_masked_secret_sent_back_keeps_the_stored_one() {
        let mut input = input();
        input.secret = Some(MASKED_SECRET.into());
        assert_eq!(input.parse().unwrap().secret, None);
        let mut input = self::tests::input();
        input.secret = Some("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".into());
        assert!(input.parse().unwrap().secret.is_some());
    }
}
