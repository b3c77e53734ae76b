//! What a request refused by the server itself gets: a JSON error like the
//! api's (`{"error": {"code", "message"}}`), with `Retry-After`.

use std::net::IpAddr;

use axum::{
    body::Body,
    http::{HeaderValue, Response, StatusCode, header},
};

use crate::ops::metrics::metrics;

/// Why the server refused a request before any route saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every open slot is taken and the request has no valid token (or, past
    /// the reserved slots too, is not a probe): 503.
    Overloaded,
    /// The client holds its share of connections, all of them serving, and
    /// the request has no valid token: 429.
    TooManyConnections,
    /// The client has its share of requests in flight: 429.
    TooManyRequests,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Refusal::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::TooManyConnections | Refusal::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    fn code(self) -> &'static str {
        match self {
            Refusal::Overloaded => "overloaded",
            Refusal::TooManyConnections => "too_many_connections",
            Refusal::TooManyRequests => "too_many_requests",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Refusal::Overloaded => "the server is at its connection limit; try again shortly",
            Refusal::TooManyConnections => {
                "this client holds as many connections as it may, all of them busy; \
                 reuse one, or try again shortly"
            }
            Refusal::TooManyRequests => {
                "this client has as many requests in flight as it may; try again shortly"
            }
        }
    }

    /// The per-client limit it counts against, for the metric.
    fn limit(self) -> Option<&'static str> {
        match self {
            Refusal::Overloaded => None,
            Refusal::TooManyConnections => Some("connections"),
            Refusal::TooManyRequests => Some("requests"),
        }
    }

    /// The answer to `client`'s refused request, counted.
    pub fn response(self, client: IpAddr) -> Response<Body> {
        if let Some(limit) = self.limit() {
            metrics()
                .http_client_refusals
                .with_label_values(&[limit])
                .inc();
            // Debug: under a flood this would be a line per request.
            tracing::debug!(%client, limit, "request refused: per-client limit");
        }
        let body = serde_json::json!({"error": {
            "code": self.code(),
            "message": self.message(),
        }});
        let mut response = Response::new(Body::from(body.to_string()));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        response
    }
}
