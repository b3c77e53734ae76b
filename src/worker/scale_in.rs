//! ECS task scale-in protection: while the worker holds any run its task is
//! protected, so Application Auto Scaling removes idle tasks, not busy ones.
//! Active only when ECS sets `ECS_AGENT_URI`.
//!
//! A protected task also holds up a deployment, and a busy worker takes run
//! after run: renewed for as long as it is busy, its protection would hold a
//! rollout until the queue drains. So a protection is short (it lapses unless
//! renewed), and a worker that sees a worker of another release start after it
//! (the deployment's replacement) drops its protection and never takes it
//! again: ECS then stops it, and its in-flight crawls drain or go back to the
//! queue as on any SIGTERM.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use serde::Deserialize;
use serde_json::json;
use tokio::sync::Mutex;

/// An agent call must not hold up a crawl for long.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

pub struct ScaleInProtection {
    endpoint: String,
    http: reqwest::Client,
    expires_in_minutes: u64,
    /// Runs held right now.
    held: Mutex<usize>,
    /// A newer release replaces this worker: protection is never taken again.
    replaced: AtomicBool,
}

impl ScaleInProtection {
    pub fn new(agent_uri: &str, expires_in_minutes: u64) -> Self {
        Self {
            endpoint: format!(
                "{}/task-protection/v1/state",
                agent_uri.trim_end_matches('/')
            ),
            http: reqwest::Client::new(),
            expires_in_minutes: expires_in_minutes.max(1),
            held: Mutex::new(0),
            replaced: AtomicBool::new(false),
        }
    }

    /// How often a protection still needed is renewed: three times per
    /// lifetime, so one failed agent call does not let it lapse.
    pub fn renew_every(&self) -> Duration {
        Duration::from_secs(self.expires_in_minutes * 60 / 3)
    }

    /// A run is held: protect the task if it was idle.
    pub async fn hold(&self) {
        let mut held = self.held.lock().await;
        *held += 1;
        if *held == 1 && !self.is_replaced() {
            self.put(true).await;
        }
    }

    /// A run was let go: drop the protection once the task is idle.
    pub async fn release(&self) {
        let mut held = self.held.lock().await;
        *held = held.saturating_sub(1);
        if *held == 0 && !self.is_replaced() {
            self.put(false).await;
        }
    }

    /// Renews a protection still needed before it lapses.
    pub async fn renew(&self) {
        let held = self.held.lock().await;
        if *held > 0 && !self.is_replaced() {
            self.put(true).await;
        }
    }

    /// A newer release is running: let ECS stop this task now rather than when
    /// the queue is empty.
    pub async fn replaced(&self) {
        let held = self.held.lock().await;
        if self.replaced.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::info!(
            runs_held = *held,
            "a newer release of the worker is running; scale-in protection dropped for good"
        );
        if *held > 0 {
            self.put(false).await;
        }
    }

    fn is_replaced(&self) -> bool {
        self.replaced.load(Ordering::SeqCst)
    }

    async fn put(&self, enabled: bool) {
        let mut body = json!({ "ProtectionEnabled": enabled });
        if enabled {
            body["ExpiresInMinutes"] = json!(self.expires_in_minutes);
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

/// What a worker is a release of: on ECS its task definition and revision
/// (every deployment makes a new revision), elsewhere the crate's version.
pub async fn release(metadata_uri: Option<&str>) -> String {
    let local = concat!("crawlfleet-", env!("CARGO_PKG_VERSION")).to_owned();
    let Some(uri) = metadata_uri else {
        return local;
    };
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Task {
        family: String,
        revision: String,
    }
    let task = async {
        reqwest::Client::new()
            .get(format!("{}/task", uri.trim_end_matches('/')))
            .timeout(CALL_TIMEOUT)
            .send()
            .await?
            .error_for_status()?
            .json::<Task>()
            .await
    };
    match task.await {
        Ok(task) => format!("{}:{}", task.family, task.revision),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the task's metadata; release is the crate version");
            local
        }
    }
}
