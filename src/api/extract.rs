//! Extractors whose rejections are [`ApiError`]s naming the field at fault.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::{header, request::Parts},
};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Largest body of a URL list's upload (plain text, read as it streams in):
/// room for [`crate::domain::url_list::MAX_LIST_URLS`] URLs of about 160 bytes each.
pub const MAX_UPLOAD_BYTES: usize = 16 * 1024 * 1024;

/// Whether `path` is an upload route, whose bodies may be larger than other
/// requests' (they are bounded by [`MAX_UPLOAD_BYTES`] instead).
fn is_upload_path(path: &str) -> bool {
    path.strip_prefix("/api/url-lists/")
        .and_then(|rest| rest.strip_suffix("/urls"))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// Middleware: a request declaring a body over [`MAX_BODY_BYTES`] (a URL
/// list upload: its own bound) is refused
/// with 413 before anything waits for that body (it would otherwise wait,
/// for bytes that may never come, until the request timeout).
pub async fn refuse_oversized_declared_body(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let limit = if is_upload_path(req.uri().path()) {
        MAX_UPLOAD_BYTES
    } else {
        MAX_BODY_BYTES
    };
    match declared {
        Some(length) if length > limit as u64 => ApiError::PayloadTooLarge(limit).into_response(),
        _ => next.run(req).await,
    }
}

/// A JSON body; type errors name the offending field (`fields.title.selector`).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(is_json_media_type);
        if !is_json {
            return Err(ApiError::UnsupportedMediaType("application/json"));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge(MAX_BODY_BYTES)
            } else {
                ApiError::BadRequest {
                    message: rejection.body_text(),
                    field: None,
                }
            }
        })?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                ApiError::BadRequest {
                    message: format!("malformed JSON: {inner}"),
                    field: None,
                }
            } else {
                ApiError::Invalid(crate::domain::FieldError::new(
                    if field == "." {
                        "body".to_owned()
                    } else {
                        field
                    },
                    inner.to_string(),
                ))
            }
        })?;
        // One JSON value and nothing after it.
        de.end().map_err(|e| ApiError::BadRequest {
            message: format!("malformed JSON: {e}"),
            field: None,
        })?;
        Ok(ApiJson(value))
    }
}

/// `application/json`, with parameters or not (`; charset=utf-8`).
fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Query parameters; a value of the wrong type names its parameter.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(url::form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(ApiQuery)
            .map_err(|e| {
                let field = match e.path().to_string().as_str() {
                    // The query as a whole: a parameter missing or unknown.
                    // serde names it only in its message ("missing field
                    // `format`", "unknown field `evil`").
                    "." => e.inner().to_string().split('`').nth(1).map(str::to_owned),
                    path => Some(path.to_owned()),
                };
                ApiError::BadRequest {
                    message: format!(
                        "invalid query parameter {}: {}",
                        field.as_deref().unwrap_or("."),
                        e.inner()
                    ),
                    field,
                }
            })
    }
}

/// The numeric `{id}` of a resource path.
pub struct Id(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::BadRequest {
                    message: e.body_text(),
                    field: Some("id".into()),
                })?;
        raw.parse().map(Id).map_err(|_| ApiError::BadRequest {
            message: format!("id must be a positive integer, got {raw:?}"),
            field: Some("id".into()),
        })
    }
}

/// The `{id}` and `{attempt}` of a run's attempt path.
pub struct RunAttempt {
    pub run_id: i64,
    pub attempt: i32,
}

impl<S: Send + Sync> FromRequestParts<S> for RunAttempt {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let [id, attempt] = two_ids(parts, state, ["id", "attempt"]).await?;
        Ok(RunAttempt {
            run_id: id,
            attempt: small("attempt", attempt)?,
        })
    }
}

/// The `{id}` and `{version}` of a site's version path.
pub struct SiteVersion {
    pub site_id: i64,
    pub version: i32,
}

impl<S: Send + Sync> FromRequestParts<S> for SiteVersion {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let [site_id, version] = two_ids(parts, state, ["id", "version"]).await?;
        Ok(SiteVersion {
            site_id,
            version: small("version", version)?,
        })
    }
}

/// A path number kept as an `i32` (an attempt, a version): a 400 naming
/// `field` when it does not fit.
fn small(field: &str, value: i64) -> Result<i32, ApiError> {
    i32::try_from(value).map_err(|_| ApiError::BadRequest {
        message: format!("{field} is out of range: {value}"),
        field: Some(field.into()),
    })
}

/// The `{id}` and `{delivery_id}` of a webhook's delivery path.
pub struct WebhookDelivery {
    pub webhook_id: i64,
    pub delivery_id: i64,
}

impl<S: Send + Sync> FromRequestParts<S> for WebhookDelivery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let [webhook_id, delivery_id] = two_ids(parts, state, ["id", "delivery_id"]).await?;
        Ok(WebhookDelivery {
            webhook_id,
            delivery_id,
        })
    }
}

/// The `{id}` and `{repair_id}` of a site's repair path.
pub struct SiteRepair {
    pub site_id: i64,
    pub repair_id: i64,
}

impl<S: Send + Sync> FromRequestParts<S> for SiteRepair {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let [site_id, repair_id] = two_ids(parts, state, ["id", "repair_id"]).await?;
        Ok(SiteRepair { site_id, repair_id })
    }
}

/// The two positive numbers of a path, each error naming its `fields`.
async fn two_ids<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    fields: [&str; 2],
) -> Result<[i64; 2], ApiError> {
    let axum::extract::Path((first, second)) =
        axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest {
                message: e.body_text(),
                field: Some(fields[0].into()),
            })?;
    let number = |raw: &str, field: &str| {
        raw.parse::<i64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| ApiError::BadRequest {
                message: format!("{field} must be a positive integer, got {raw:?}"),
                field: Some(field.into()),
            })
    };
    Ok([number(&first, fields[0])?, number(&second, fields[1])?])
}
