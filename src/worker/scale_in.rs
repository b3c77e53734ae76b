//! ECS task scale-in protection: while the worker holds any run its task is
//! protected, so Application Auto Scaling removes idle tasks, not busy ones.
//! Active only when ECS sets `ECS_AGENT_URI`.

use std::time::Duration;

use serde_json::json;
use tokio::sync::Mutex;

/// How long one protection lasts; renewed while runs are held.
const EXPIRES_IN_MINUTES: u64 = 60;
/// Renewal period of a protection that is still needed.
pub const RENEW_EVERY: Duration = Duration::from_secs(20 * 60);
/// An agent call must not hold up a crawl for long.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

pub struct ScaleInProtection {
    endpoint: String,
    http: reqwest::Client,
    /// Runs held right now.
    held: Mutex<usize>,
}

impl ScaleInProtection {
    pub fn new(agent_uri: &str) -> Self {
        Self {
            endpoint: format!(
                "{}/task-protection/v1/state",
                agent_uri.trim_end_matches('/')
            ),
            http: reqwest::Client::new(),
            held: Mutex::new(0),
        }
    }

    /// A run is held: protect the task if it was idle.
    pub async fn hold(&self) {
        let mut held = self.held.lock().await;
        *held += 1;
        if *held == 1 {
            self.put(true).await;
        }
    }

    /// A run was let go: drop the protection once the task is idle.
    pub async fn release(&self) {
        let mut held = self.held.lock().await;
        *held = held.saturating_sub(1);
        if *held == 0 {
            self.put(false).await;
        }
    }

    /// Renews a protection still needed (it expires after an hour).
    pub async fn renew(&self) {
        let held = self.held.lock().await;
        if *held > 0 {
            self.put(true).await;
        }
    }

    async fn put(&self, enabled: bool) {
        let mut body = json!({ "ProtectionEnabled": enabled });
        if enabled {
            body["ExpiresInMinutes"] = json!(EXPIRES_IN_MINUTES);
        }
        let call = self
            .http
            .put(&self.endpoint)
            .json(&body)
            .timeout(CALL_TIMEOUT)
            .send()
            .await;
        match call.and_then(|r| r.error_for_status()) {
            Ok(_) => tracing::debug!(enabled, "task scale-in protection set"),
            // Losing protection risks one crawl being retried, never lost.
            Err(e) => tracing::warn!(enabled, error = %e, "could not set task scale-in protection"),
        }
    }
}
