//! Webhooks on the wire (the body a client sends is the domain's
//! `WebhookInput`): the endpoint as responses show it (its secret masked but in the response that created or rotated
//! it), and its deliveries with their attempts. A read token sees no secret
//! of an endpoint: its URL (Slack's and others' carry their key in the path)
//! shows scheme and host only, and the endpoint's answers are left out.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::super::auth::Access;
use crate::{
    api::view::view,
    domain::webhook::{DeliveryState, MASKED_SECRET, Webhook, WebhookEventType, WebhookSecret},
    store::webhooks::{Delivery, DeliveryAttempt},
};

view! {
    /// A stored endpoint, as the API shows it.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = Webhook)]
    pub struct WebhookView from (w: Webhook) {} {
        id: i64 = w.id,
        /// Where messages are POSTed. To a read token only its scheme and host
        /// (`https://hooks.slack.com/***`): the rest of a URL can be its key.
        url: String = w.url.to_string(),
        events: Vec<WebhookEventType> = w.events,
        site_ids: Vec<i64> = w.site_ids,
        keyword_ids: Vec<i64> = w.keyword_ids,
        description: String = w.description,
        /// The signing secret: in full only in the response that created or
        /// rotated it, `whsec_***` everywhere else. Receivers verify messages with it.
        secret: String = MASKED_SECRET.to_owned(),
        enabled: bool = w.enabled,
        /// When and why the sender disabled it: a whole retry schedule (about a
        /// day) without one successful delivery. Enabling it clears both.
        disabled_at: Option<DateTime<Utc>> = w.disabled_at,
        disabled_reason: Option<String> = w.disabled_reason,
        created_at: DateTime<Utc> = w.created_at,
        updated_at: DateTime<Utc> = w.updated_at,
    }
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

view! {
    /// A message to one endpoint, with every attempt to send it.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = WebhookDelivery)]
    pub struct DeliveryView from (d: Delivery) {} {
        id: i64 = d.id,
        webhook_id: i64 = d.webhook_id,
        /// The `webhook-id` header: the same on every attempt.
        msg_id: String = d.msg_id,
        event_type: WebhookEventType = d.event_type,
        state: DeliveryState = d.state,
        /// Attempts of the current retry schedule (a resend starts a new one).
        attempts: i32 = d.attempts,
        /// When it is tried next, while pending.
        next_attempt_at: Option<DateTime<Utc>> = d.next_attempt_at,
        delivered_at: Option<DateTime<Utc>> = d.delivered_at,
        created_at: DateTime<Utc> = d.created_at,
        /// The body sent (and signed).
        #[schema(value_type = Object)]
        // Written as JSON by the outbox; shown as the text if it ever is not.
        payload: serde_json::Value =
            serde_json::from_str(&d.body).unwrap_or(serde_json::Value::String(d.body)),
        /// Every attempt, oldest first.
        attempt_log: Vec<DeliveryAttemptView> =
            d.attempt_log.into_iter().map(DeliveryAttemptView::from).collect(),
    }
}

view! {
    /// One attempt of a delivery.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = WebhookDeliveryAttempt)]
    pub struct DeliveryAttemptView from (a: DeliveryAttempt) {} {
        attempted_at: DateTime<Utc> = a.attempted_at,
        /// The endpoint's HTTP status; null when it did not answer.
        status: Option<i32> = a.status,
        /// Why there was no answer: refused, timed out, refused by the SSRF guard...
        error: Option<String> = a.error,
        latency_ms: i32 = a.latency_ms,
        /// The first KiB of the answer's body; null to a read token (an
        /// endpoint may echo what it was sent, or answer with its own secrets).
        response_excerpt: Option<String> = a.response_excerpt,
    }
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
