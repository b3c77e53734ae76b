//! A URL list's URLs, uploaded as plain text, one URL per line, and read as
//! the body streams in: a line at a time, within [`MAX_UPLOAD_BYTES`]. Each
//! line is taken or reported by its number (refused, duplicate); then every
//! host of the taken URLs is put to the SSRF guard once, and what it refuses
//! is reported too. Only then is anything written, in one transaction: a
//! body that breaks off or runs over its bound writes nothing.

use std::collections::HashMap;

use axum::{
    Json,
    body::Body,
    extract::State,
    http::{HeaderMap, header},
};
use futures::StreamExt;
use serde::Serialize;
use url::Url;
use utoipa::ToSchema;

use super::super::{
    ApiError, AppState,
    error::ErrorBody,
    extract::{Id, MAX_UPLOAD_BYTES},
};
use crate::{
    domain::url_list::{LineNotes, Upload},
    store::{
        self,
        url_lists::{UploadMode, Written},
    },
};

/// What an upload did: the list's URLs after it, and the lines it did not take.
#[derive(Debug, Serialize, ToSchema)]
pub struct UploadReport {
    pub list_id: i64,
    /// Lines read, comments and blank lines included.
    pub lines: u32,
    /// URLs the list did not have before.
    pub added: i64,
    /// URLs it had already: they keep when they were last read.
    pub kept: i64,
    /// URLs a replacement left out (0 when appending).
    pub removed: i64,
    /// URLs in the list now.
    pub total: i64,
    /// Lines that are not a URL the fleet may crawl, with why.
    pub refused: LineNotes,
    /// Lines repeating an earlier line's URL.
    pub duplicates: LineNotes,
}

/// Replace a URL list's URLs with those of a text body, one per line (`#` lines
/// and blank lines skipped). URLs kept keep when they were last read; lines not
/// taken are reported by number.
#[utoipa::path(put, path = "/url-lists/{id}/urls", tag = "url-lists", security(("bearer" = [])),
    params(("id" = i64, Path)), request_body(content = String, content_type = "text/plain", description = "One URL per line"),
    responses((status = 200, body = UploadReport), (status = 404, body = ErrorBody), (status = 413, description = "Over 16 MiB", body = ErrorBody), (status = 415, description = "Not text/plain", body = ErrorBody), (status = 422, description = "More URLs than a list holds", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn replace(
    State(state): State<AppState>,
    Id(id): Id,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<UploadReport>, ApiError> {
    write(&state, id, UploadMode::Replace, &headers, body).await
}

/// Add the URLs of a text body to a URL list, after its last; URLs it has are kept as they are.
#[utoipa::path(post, path = "/url-lists/{id}/urls", tag = "url-lists", security(("bearer" = [])),
    params(("id" = i64, Path)), request_body(content = String, content_type = "text/plain", description = "One URL per line"),
    responses((status = 200, body = UploadReport), (status = 404, body = ErrorBody), (status = 413, description = "Over 16 MiB", body = ErrorBody), (status = 415, description = "Not text/plain", body = ErrorBody), (status = 422, description = "More URLs than a list holds", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn append(
    State(state): State<AppState>,
    Id(id): Id,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<UploadReport>, ApiError> {
    write(&state, id, UploadMode::Append, &headers, body).await
}

async fn write(
    state: &AppState,
    id: i64,
    mode: UploadMode,
    headers: &HeaderMap,
    body: Body,
) -> Result<Json<UploadReport>, ApiError> {
    let is_text = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("text/plain"));
    if !store::url_lists::exists(&state.pool, id).await? {
        return Err(ApiError::not_found("URL list", id));
    }
    if !is_text {
        return Err(ApiError::UnsupportedMediaType(
            "text/plain, one URL per line",
        ));
    }
    let mut upload = read_lines(body).await?;
    refuse_unreachable(state, &mut upload).await;
    let (urls, lines) = upload.urls();
    let Written {
        added,
        kept,
        removed,
        total,
    } = store::url_lists::write_urls(&state.pool, id, mode, urls, lines)
        .await?
        .ok_or_else(|| ApiError::not_found("URL list", id))?;
    tracing::info!(
        list_id = id,
        ?mode,
        added,
        kept,
        removed,
        total,
        refused = upload.refused.count,
        duplicates = upload.duplicates.count,
        "URL list written"
    );
    Ok(Json(UploadReport {
        list_id: id,
        lines: upload.lines_read(),
        added,
        kept,
        removed,
        total,
        refused: upload.refused,
        duplicates: upload.duplicates,
    }))
}

/// Reads the body a line at a time as it arrives.
async fn read_lines(body: Body) -> Result<Upload, ApiError> {
    let mut upload = Upload::default();
    let mut stream = body.into_data_stream();
    let mut pending: Vec<u8> = Vec::new();
    let mut received = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadRequest {
            message: format!("the body broke off: {e}"),
            field: Some("body".into()),
        })?;
        received += chunk.len();
        if received > MAX_UPLOAD_BYTES {
            return Err(ApiError::PayloadTooLarge(MAX_UPLOAD_BYTES));
        }
        pending.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
            upload.push_line(&pending[start..start + end])?;
            start += end + 1;
        }
        pending.drain(..start);
    }
    if !pending.is_empty() {
        upload.push_line(&pending)?;
    }
    Ok(upload)
}

/// Puts each distinct host and port of the upload to the SSRF guard once and
/// drops the URLs it refuses. A name that does not resolve from here may
/// resolve for the workers (they judge every connection they open), so it is
/// let through, as a site's search URL is.
async fn refuse_unreachable(state: &AppState, upload: &mut Upload) {
    let target = |url: &str| {
        let url = Url::parse(url).ok()?;
        Some((url.host_str()?.to_owned(), url.port_or_known_default()?))
    };
    let mut verdicts: HashMap<(String, u16), Option<String>> = HashMap::new();
    for url in upload.urls().0 {
        let Some(key) = target(url) else { continue };
        if verdicts.contains_key(&key) {
            continue;
        }
        let verdict = match state.guard.addresses(&key.0, key.1).await {
            Err(refused) if !refused.may_pass_later() => Some(refused.to_string()),
            _ => None,
        };
        verdicts.insert(key, verdict);
    }
    upload.drop_refused(|url| target(url).and_then(|key| verdicts.get(&key).cloned().flatten()));
}
