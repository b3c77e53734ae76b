//! What a fixture server was asked for: every request counted by its path
//! and query, so a test proves a page (or a batch) was never read.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{Router, extract::State, http::Uri};

/// Requests a fixture server answered, by path and query.
#[derive(Clone, Default)]
pub struct RequestCounts(Arc<Mutex<HashMap<String, u32>>>);

impl RequestCounts {
    /// `router` counting every request it gets here.
    pub fn count(&self, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(self.clone(), count))
    }

    /// Requests whose path and query is `path_and_query` exactly.
    pub fn of(&self, path_and_query: &str) -> u32 {
        let counts = self.0.lock().unwrap();
        counts.get(path_and_query).copied().unwrap_or(0)
    }

    /// Requests to `path`, whatever their query.
    pub fn on_path(&self, path: &str) -> u32 {
        let counts = self.0.lock().unwrap();
        counts
            .iter()
            .filter(|(at, _)| at.split('?').next() == Some(path))
            .map(|(_, n)| n)
            .sum()
    }
}

async fn count(
    State(counts): State<RequestCounts>,
    uri: Uri,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let at = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    *counts.0.lock().unwrap().entry(at).or_default() += 1;
    next.run(request).await
}
