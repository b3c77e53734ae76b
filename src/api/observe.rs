//! `/metrics`, the HTTP metrics of every request, and the span every request
//! is logged in.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request},
    middleware::Next,
    response::Response,
};
use tracing::Span;

use crate::{net::client_ip::ClientIp, ops::metrics::metrics};

/// Counts requests by method, route (the pattern, not the path: bounded
/// labels) and status, and observes their latency.
pub async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| route_label(p.as_str()))
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = req.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(req).await;
    let m = metrics();
    m.http_requests
        .with_label_values(&[&method, &route, response.status().as_str()])
        .inc();
    m.http_request_duration
        .with_label_values(&[&method, &route])
        .observe(started.elapsed().as_secs_f64());
    response
}

/// A route pattern as a label, its parameters written `:id` rather than
/// `{id}`: braces inside label values trip common text-format parsers
/// (prometheus-parse, for one, ends the label set at the first `}`).
fn route_label(pattern: &str) -> String {
    pattern
        .split('/')
        .map(
            |segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => format!(":{}", name.trim_start_matches('*')),
                None => segment.to_owned(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

/// The span a request is logged in: method, path and query, with the value
/// of any `token` parameter (the bearer token browsers give `/ws`) shown as
/// `***`, so no log level ever shows a token. Headers are not recorded.
pub fn request_span(req: &Request) -> Span {
    let query = req.uri().query().map(redact_token);
    let client = req.extensions().get::<ClientIp>().map(|c| c.0);
    tracing::debug_span!(
        "request",
        client = client.map(tracing::field::display),
        method = %req.method(),
        path = req.uri().path(),
        query = query.as_deref(),
        version = ?req.version(),
    )
}

/// A query string with the value of every `token` parameter replaced by `***`.
fn redact_token(query: &str) -> String {
    query
        .split('&')
        .map(|pair| {
            let is_token = url::form_urlencoded::parse(pair.as_bytes())
                .next()
                .is_some_and(|(name, _)| name == "token");
            if is_token { "token=***" } else { pair }
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_labels_have_no_braces() {
        assert_eq!(
            route_label("/api/keywords/{id}/crawl"),
            "/api/keywords/:id/crawl"
        );
        assert_eq!(route_label("/files/{*path}"), "/files/:path");
        assert_eq!(route_label("/api/runs"), "/api/runs");
    }

    #[test]
    fn tokens_in_queries_are_redacted_however_written() {
        assert_eq!(redact_token("token=s3cret"), "token=***");
        assert_eq!(redact_token("a=1&token=s3cret&b=2"), "a=1&token=***&b=2");
        assert_eq!(redact_token("%74oken=s3cret"), "token=***");
        assert_eq!(redact_token("token"), "token=***");
        assert_eq!(redact_token("tokens=1&x=token"), "tokens=1&x=token");
    }
}
