//! Bearer tokens on `/api` and `/ws`: write tokens may do anything, read
//! tokens only GET and subscribe. Compared in constant time; never logged.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Request, State},
    http::{HeaderMap, Method, Uri, header},
    middleware::Next,
    response::Response,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, AppState, error::ErrorBody};
use crate::net::{client_ip::ClientIp, http_server::Authenticate};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(access))
}

/// What the presented token may do, and who the api takes the client for.
#[derive(Debug, Serialize, ToSchema)]
struct AccessView {
    /// `read`: GET only; `write`: everything.
    access: Access,
    /// The address the api sees this client at: behind a proxy listed in
    /// `TRUSTED_PROXIES`, the one it forwarded; else the connection's.
    client_ip: Option<String>,
}

/// What the presented token may do: a client (the console) hides the
/// controls a read token may not use. The API refuses them anyway.
#[utoipa::path(get, path = "/access", tag = "operations", security(("bearer" = [])),
    responses((status = 200, body = AccessView), (status = 401, description = "No valid token", body = ErrorBody)))]
async fn access(
    Extension(access): Extension<Access>,
    client: Option<Extension<ClientIp>>,
) -> Json<AccessView> {
    Json(AccessView {
        access,
        client_ip: client.map(|Extension(ClientIp(ip))| ip.to_string()),
    })
}

/// The configured tokens, kept as digests so comparing them takes the same
/// time whatever the input (no length or prefix leaks).
#[derive(Clone, Default)]
pub struct Tokens {
    write: Vec<[u8; 32]>,
    read: Vec<[u8; 32]>,
}

/// Which token a request came with, for per-token caps: a prefix of its
/// digest, never the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenKey([u8; 8]);

impl TokenKey {
    pub fn of(token: &str) -> Self {
        let digest = digest(token);
        TokenKey(digest[..8].try_into().expect("8 of 32 bytes"))
    }

    /// How a record names the token that made a change: `token:` and the
    /// prefix in hex (the same token always gives the same name, and the
    /// name gives no way back to the token).
    pub fn name(&self) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("token:{hex}")
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    pub fn new(write: &[String], read: &[String]) -> Self {
        let keep = |tokens: &[String]| {
            tokens
                .iter()
                .map(|t| t.trim())
                .filter(|t| !t.is_empty())
                .map(digest)
                .collect::<Vec<_>>()
        };
        Tokens {
            write: keep(write),
            read: keep(read),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.write.is_empty() && self.read.is_empty()
    }

    /// The access a presented token grants; every token is compared.
    pub fn access(&self, presented: &str) -> Option<Access> {
        let presented = digest(presented);
        let write = self
            .write
            .iter()
            .fold(false, |found, t| found | same(t, &presented));
        let read = self
            .read
            .iter()
            .fold(false, |found, t| found | same(t, &presented));
        if write {
            Some(Access::Write)
        } else if read {
            Some(Access::Read)
        } else {
            None
        }
    }
}

/// The token of a request: `Authorization: Bearer`, or `?token=` on `/ws`
/// (browsers cannot set headers on a WebSocket).
fn presented_token(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_owned());
    }
    if uri.path() == "/ws" {
        let query = uri.query()?;
        return url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.into_owned());
    }
    None
}

/// For the HTTP server: whether a request carries a token that grants any
/// access (every request does with auth disabled), so its connection may
/// use a slot kept for such requests.
pub fn authenticator(tokens: Option<Tokens>) -> Authenticate {
    Arc::new(move |headers: &HeaderMap, uri: &Uri| match &tokens {
        None => true,
        Some(tokens) => presented_token(headers, uri)
            .and_then(|token| tokens.access(&token))
            .is_some(),
    })
}

/// Middleware: lets a request through only with a token allowed to make it.
pub async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let mut req = req;
    let Some(tokens) = &state.tokens else {
        req.extensions_mut().insert(Access::Write);
        return Ok(next.run(req).await);
    };
    let presented = presented_token(req.headers(), req.uri());
    let access = presented.as_deref().and_then(|t| tokens.access(t));
    if let (Some(token), Some(access)) = (&presented, access) {
        req.extensions_mut().insert(TokenKey::of(token));
        req.extensions_mut().insert(access);
    }
    match access {
        None => {
            // The request's span says which (its path in full: this router
            // may be nested), never with the token.
            let client = req.extensions().get::<ClientIp>().map(|c| c.0);
            tracing::info!(?client, "request without a valid token refused");
            Err(ApiError::Unauthorized)
        }
        Some(Access::Read) if !matches!(*req.method(), Method::GET | Method::HEAD) => {
            Err(ApiError::Forbidden)
        }
        Some(_) => Ok(next.run(req).await),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_grant_their_access_and_nothing_else() {
        let tokens = Tokens::new(&["w1".into(), " w2 ".into()], &["r1".into(), "".into()]);
        assert_eq!(tokens.access("w1"), Some(Access::Write));
        assert_eq!(tokens.access("w2"), Some(Access::Write));
        assert_eq!(tokens.access("r1"), Some(Access::Read));
        assert_eq!(tokens.access(""), None);
        assert_eq!(tokens.access("w"), None);
        assert!(Tokens::new(&[], &["".into()]).is_empty());
    }
}
