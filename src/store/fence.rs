//! The fence every worker write is conditional on: (run, attempt, worker),
//! in one of the states a worker holds a run in (`RunState::HELD`). Below
//! the tables it guards, so runs, items, sessions and evidence all use it
//! without importing one another.

/// The identity every worker write is conditional on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub run_id: i64,
    pub attempt: i32,
    pub worker_id: String,
}

/// A worker write that did not land.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The attempt is no longer this worker's (retried elsewhere, cancelled,
    /// deleted): stop the crawl at once.
    #[error("run {run_id} attempt {attempt} is no longer held by this worker")]
    Superseded { run_id: i64, attempt: i32 },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl Fence {
    /// The error of a write this fence no longer allows.
    pub(in crate::store) fn superseded(&self) -> FenceError {
        FenceError::Superseded {
            run_id: self.run_id,
            attempt: self.attempt,
        }
    }
}
