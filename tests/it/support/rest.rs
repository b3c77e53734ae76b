//! REST calls to an api process a test started itself ([`super::RoleProcess`]),
//! where [`super::TestApp`]'s own helpers do not reach.

use std::{fmt::Display, net::SocketAddr};

use serde_json::Value;

/// POSTs `body` to `http://{api}{path}` and returns the answer, which must be
/// a success.
pub async fn post_ok(
    http: &reqwest::Client,
    api: SocketAddr,
    path: impl Display,
    body: Value,
) -> Value {
    let response = http
        .post(format!("http://{api}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "POST {path}: {}",
        response.status()
    );
    response.json().await.unwrap()
}
