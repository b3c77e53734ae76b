//! Webhooks on the wire: the body a client sends, the endpoint as responses
//! show it (its secret masked but in the response that created or rotated
//! it), and its deliveries with their attempts. A read token sees no secret
//! of an endpoint: its URL (Slack's and others' carry their key in the path)
//! shows scheme and host only, and the endpoint's answers are left out.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::super::auth::Access;
use crate::{
    domain::webhook::{
        DeliveryState, MASKED_SECRET, Webhook, WebhookEventType, WebhookInput, WebhookSecret,
    },
    store::webhooks::{Delivery, DeliveryAttempt},
};

/// An endpoint as a client sends it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = WebhookInput)]
pub struct WebhookBody {
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

impl From<WebhookBody> for WebhookInput {
    fn from(body: WebhookBody) -> Self {
        WebhookInput {
            url: body.url,
            events: body.events,
            site_ids: body.site_ids,
            keyword_ids: body.keyword_ids,
            secret: body.secret,
            description: body.description,
            enabled: body.enabled,
        }
    }
}

/// A stored endpoint, as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Webhook)]
pub struct WebhookView {
    pub id: i64,
    /// Where messages are POSTed. To a read token only its scheme and host
    /// (`https://hooks.slack.com/***`): the rest of a URL can be its key.
    pub url: String,
    pub events: Vec<WebhookEventType>,
    pub site_ids: Vec<i64>,
    pub keyword_ids: Vec<i64>,
    pub description: String,
    /// The signing secret: in full only in the response that created or
    /// rotated it, `whsec_***` everywhere else. Receivers verify messages with it.
    pub secret: String,
    pub enabled: bool,
    /// When and why the sender disabled it: a whole retry schedule (about a
    /// day) without one successful delivery. Enabling it clears both.
    pub disabled_at: Option<DateTime<Utc>>,
    pub disabled_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl WebhookView {
    /// The endpoint as a token of `access` may see it: a read token sees its
    /// URL masked.
    pub fn shown_to(webhook: Webhook, access: Access) -> Self {
        let mut view = Self::from(webhook);
        if access == Access::Read
            && let Ok(url) = url::Url::parse(&view.url)
        {
            view.url = masked_url(&url);
        }
        view
    }

    /// The endpoint, with `secret` shown in full (creation, rotation).
    pub fn revealing(webhook: Webhook, secret: &WebhookSecret) -> Self {
        WebhookView {
            secret: secret.expose(),
            ..Self::from(webhook)
        }
    }
}

impl From<Webhook> for WebhookView {
    fn from(w: Webhook) -> Self {
        WebhookView {
            id: w.id,
            url: w.url.to_string(),
            events: w.events,
            site_ids: w.site_ids,
            keyword_ids: w.keyword_ids,
            description: w.description,
            secret: MASKED_SECRET.to_owned(),
            enabled: w.enabled,
            disabled_at: w.disabled_at,
            disabled_reason: w.disabled_reason,
            created_at: w.created_at,
            updated_at: w.updated_at,
        }
    }
}

/// A message to one endpoint, with every attempt to send it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = WebhookDelivery)]
pub struct DeliveryView {
    pub id: i64,
    pub webhook_id: i64,
    /// The `webhook-id` header: the same on every attempt.
    pub msg_id: String,
    pub event_type: WebhookEventType,
    pub state: DeliveryState,
    /// Attempts of the current retry schedule (a resend starts a new one).
    pub attempts: i32,
    /// When it is tried next, while pending.
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The body sent (and signed).
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// Every attempt, oldest first.
    pub attempt_log: Vec<DeliveryAttemptView>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = WebhookDeliveryAttempt)]
pub struct DeliveryAttemptView {
    pub attempted_at: DateTime<Utc>,
    /// The endpoint's HTTP status; null when it did not answer.
    pub status: Option<i32>,
    /// Why there was no answer: refused, timed out, refused by the SSRF guard...
    pub error: Option<String>,
    pub latency_ms: i32,
    /// The first KiB of the answer's body; null to a read token (an
    /// endpoint may echo what it was sent, or answer with its own secrets).
    pub response_excerpt: Option<String>,
}

impl DeliveryView {
    /// The delivery as a token of `access` may see it: a read token sees no
    /// answer's body.
    pub fn shown_to(delivery: Delivery, access: Access) -> Self {
        let mut view = Self::from(delivery);
        if access == Access::Read {
            for attempt in &mut view.attempt_log {
                attempt.response_excerpt = None;
            }
        }
        view
    }
}

/// A URL as a read token sees it: scheme, host and port, the rest `***`.
fn masked_url(url: &url::Url) -> String {
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{}{port}/***",
        url.scheme(),
        url.host_str().unwrap_or_default()
    )
}

impl From<Delivery> for DeliveryView {
    fn from(d: Delivery) -> Self {
        DeliveryView {
            id: d.id,
            webhook_id: d.webhook_id,
            msg_id: d.msg_id,
            event_type: d.event_type,
            state: d.state,
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at,
            delivered_at: d.delivered_at,
            created_at: d.created_at,
            // Written as JSON by the outbox; shown as the text if it ever is not.
            payload: serde_json::from_str(&d.body).unwrap_or(serde_json::Value::String(d.body)),
            attempt_log: d
                .attempt_log
                .into_iter()
                .map(DeliveryAttemptView::from)
                .collect(),
        }
    }
}

impl From<DeliveryAttempt> for DeliveryAttemptView {
    fn from(a: DeliveryAttempt) -> Self {
        DeliveryAttemptView {
            attempted_at: a.attempted_at,
            status: a.status,
            error: a.error,
            latency_ms: a.latency_ms,
            response_excerpt: a.response_excerpt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masked_url_keeps_scheme_host_and_port_only() {
        let url = |s: &str| masked_url(&url::Url::parse(s).unwrap());
        assert_eq!(
            url("https://hooks.slack.com/services/T000/B000/XXXXXXXX?x=1#f"),
            "https://hooks.slack.com/***"
        );
        assert_eq!(
            url("http://user:pw@127.0.0.1:8080/hook/key"),
            "http://127.0.0.1:8080/***"
        );
        assert_eq!(url("https://[::1]:8443/k"), "https://[::1]:8443/***");
    }
}
