//! Where an event's reader finds more: the paths of the API that shows a run,
//! its results, its site and keyword. The domain does not know the API's
//! paths; whoever records an event hands it the `Links` that do
//! (`store::webhooks::ApiLinks`).

use crate::domain::change::Change;

/// The paths an event links to, by what they show.
pub trait Links {
    /// A run.
    fn run(&self, run_id: i64) -> String;
    /// A run's results, or only those with `change`.
    fn run_results(&self, run_id: i64, change: Option<Change>) -> String;
    /// A site.
    fn site(&self, site_id: i64) -> String;
    /// A site's health.
    fn site_health(&self, site_id: i64) -> String;
    /// A keyword.
    fn keyword(&self, keyword_id: i64) -> String;
}
