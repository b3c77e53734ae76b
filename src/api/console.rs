//! The operator's console: one page and its scripts (plain ES modules, no
//! build step), embedded in the binary and served at `/` and `/console/…`.
//! Open like `/health`: the page holds nothing; it asks for a token and sends
//! it with every API call. Every answer carries a strict Content-Security-Policy:
//! only this origin's scripts run, kept pages of crawled sites are shown in a
//! sandboxed frame, and nothing may frame the console.

use std::sync::LazyLock;

use axum::{
    Router,
    extract::Path,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use sha2::{Digest, Sha256};

use super::{ApiError, AppState};

/// The console's files: (path under `/console/`, content type, contents).
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../console/index.html"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../../console/console.css"),
    ),
    ("js/api.js", JS, include_str!("../../console/js/api.js")),
    ("js/dom.js", JS, include_str!("../../console/js/dom.js")),
    ("js/live.js", JS, include_str!("../../console/js/live.js")),
    ("js/main.js", JS, include_str!("../../console/js/main.js")),
    (
        "js/overview.js",
        JS,
        include_str!("../../console/js/overview.js"),
    ),
    (
        "js/verdict.js",
        JS,
        include_str!("../../console/js/verdict.js"),
    ),
    ("js/runs.js", JS, include_str!("../../console/js/runs.js")),
    ("js/bulk.js", JS, include_str!("../../console/js/bulk.js")),
    ("js/sites.js", JS, include_str!("../../console/js/sites.js")),
    (
        "js/site_editor.js",
        JS,
        include_str!("../../console/js/site_editor.js"),
    ),
    (
        "js/site_fields.js",
        JS,
        include_str!("../../console/js/site_fields.js"),
    ),
    (
        "js/site_detail.js",
        JS,
        include_str!("../../console/js/site_detail.js"),
    ),
    (
        "js/site_preview.js",
        JS,
        include_str!("../../console/js/site_preview.js"),
    ),
    (
        "js/site_learn.js",
        JS,
        include_str!("../../console/js/site_learn.js"),
    ),
    (
        "js/site_versions.js",
        JS,
        include_str!("../../console/js/site_versions.js"),
    ),
    (
        "js/site_repairs.js",
        JS,
        include_str!("../../console/js/site_repairs.js"),
    ),
    (
        "js/keywords.js",
        JS,
        include_str!("../../console/js/keywords.js"),
    ),
    ("js/form.js", JS, include_str!("../../console/js/form.js")),
    (
        "js/url_lists.js",
        JS,
        include_str!("../../console/js/url_lists.js"),
    ),
    (
        "js/results.js",
        JS,
        include_str!("../../console/js/results.js"),
    ),
    (
        "js/webhooks.js",
        JS,
        include_str!("../../console/js/webhooks.js"),
    ),
];

const JS: &str = "text/javascript; charset=utf-8";

/// Scripts, styles and connections of this origin only; pictures from the
/// API arrive as blobs; a kept page of a crawled site is shown in a frame
/// sandboxed without scripts (`srcdoc` inherits this policy too).
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; frame-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|headers: HeaderMap| async move { serve("index.html", &headers) }))
        .route(
            "/console/{*path}",
            get(|Path(path): Path<String>, headers: HeaderMap| async move { serve(&path, &headers) }),
        )
}

/// Each file's ETag, from its contents: a browser revalidates (`no-cache`)
/// and a new binary's files are fetched anew.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|(_, _, body)| {
            let digest = Sha256::digest(body.as_bytes());
            format!("\"{}\"", hex::encode(&digest[..12]))
        })
        .collect()
});

fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(at) = ASSETS.iter().position(|(name, _, _)| *name == path) else {
        return ApiError::NotFound(format!("no console file {path:?}")).into_response();
    };
    let (_, content_type, body) = ASSETS[at];
    let etag = &ETAGS[at];
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .is_some_and(|seen| seen.as_bytes() == etag.as_bytes());
    let mut response = match fresh {
        true => StatusCode::NOT_MODIFIED.into_response(),
        false => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        header::ETAG,
        HeaderValue::from_str(etag).expect("hex is a valid header value"),
    );
    response
}
