//! `crawl_runs` and `crawl_attempts` rows as sqlx reads them, decoded into the
//! domain's run and attempt: the text columns the state machine branches on
//! become their types here, once.

use chrono::{DateTime, Utc};

use crate::{
    domain::{
        page::EarlyStop,
        run::{Attempt, CrawlRun, RunHealth},
    },
    store::columns::{decode, decode_optional},
};

/// Declares a row of every column of `crawl_runs` and, for a query that
/// returns more beside them, those `extra` columns; `into_parts` splits it
/// into the run's row and the extras. The columns are listed once, in the
/// `@columns` arm's call.
///
/// A query reading into it names each of these columns (never `RETURNING *`
/// or `run.*`): `query_as!` decodes by position, so a wildcard would shift
/// under a release that still runs while a later migration adds a column.
macro_rules! run_row {
    ($(#[$doc:meta])* $name:ident { $($extra:ident: $ty:ty),* $(,)? }) => {
        run_row!(@columns $(#[$doc])* $name { $($extra: $ty),* } {
            id: i64,
            keyword_id: Option<i64>,
            site_id: i64,
            state: String,
            trigger: String,
            priority: i32,
            attempt: i32,
            max_attempts: i32,
            worker_id: Option<String>,
            pages_crawled: i32,
            items_found: i32,
            current_url: Option<String>,
            error: Option<String>,
            error_kind: Option<String>,
            queued_at: ::chrono::DateTime<::chrono::Utc>,
            not_before: Option<::chrono::DateTime<::chrono::Utc>>,
            dispatched_at: Option<::chrono::DateTime<::chrono::Utc>>,
            started_at: Option<::chrono::DateTime<::chrono::Utc>>,
            heartbeat_at: Option<::chrono::DateTime<::chrono::Utc>>,
            state_changed_at: ::chrono::DateTime<::chrono::Utc>,
            finished_at: Option<::chrono::DateTime<::chrono::Utc>>,
            health: Option<String>,
            health_reason: Option<String>,
            refusals: i32,
            stopped_at_url: Option<String>,
            stop_reason: Option<String>,
            items_new: i32,
            items_changed: i32,
            items_removed: i32,
            paging_ended: Option<String>,
            url_list_id: Option<i64>,
            period_start: Option<::chrono::DateTime<::chrono::Utc>>,
            urls_failed: i32,
            site_version: Option<i32>,
        });
    };
    (@columns $(#[$doc:meta])* $name:ident { $($extra:ident: $ty:ty),* }
        { $($column:ident: $column_ty:ty,)* }) => {
        $(#[$doc])*
        pub(in crate::store) struct $name {
            $(pub $column: $column_ty,)*
            $(pub $extra: $ty,)*
        }

        impl $name {
            /// The run's columns, comma separated, for a query built at run time.
            #[allow(dead_code)]
            pub(in crate::store) const RUN_COLUMNS: &'static str =
                concat!($(stringify!($column), ", ",)* "");

            #[allow(dead_code)]
            pub(in crate::store) fn into_parts(self) -> (RunRow, ($($ty,)*)) {
                let run = RunRow { $($column: self.$column,)* };
                (run, ($(self.$extra,)*))
            }
        }
    };
}
pub(in crate::store) use run_row;

run_row!(
    /// Every column of `crawl_runs`, as stored (a query returning a run names
    /// them; a listing built at run time reads them by name).
    #[derive(sqlx::FromRow)]
    RunRow {}
);

impl TryFrom<RunRow> for CrawlRun {
    type Error = sqlx::Error;

    fn try_from(row: RunRow) -> sqlx::Result<CrawlRun> {
        Ok(CrawlRun {
            id: row.id,
            keyword_id: row.keyword_id,
            url_list_id: row.url_list_id,
            period_start: row.period_start,
            urls_failed: row.urls_failed,
            site_version: row.site_version,
            site_id: row.site_id,
            state: decode("state", &row.state)?,
            trigger: decode("trigger", &row.trigger)?,
            priority: row.priority,
            attempt: row.attempt,
            max_attempts: row.max_attempts,
            worker_id: row.worker_id,
            pages_crawled: row.pages_crawled,
            items_found: row.items_found,
            items_new: row.items_new,
            items_changed: row.items_changed,
            items_removed: row.items_removed,
            paging_ended: decode_optional("paging_ended", row.paging_ended.as_deref())?,
            current_url: row.current_url,
            error: row.error,
            error_kind: decode_optional("error_kind", row.error_kind.as_deref())?,
            queued_at: row.queued_at,
            not_before: row.not_before,
            dispatched_at: row.dispatched_at,
            started_at: row.started_at,
            heartbeat_at: row.heartbeat_at,
            state_changed_at: row.state_changed_at,
            finished_at: row.finished_at,
            health: run_health(row.health.as_deref(), row.health_reason, row.refusals)?,
            refusals: row.refusals,
            // Both or neither (crawl_runs_stop_check).
            stopped_early: match (row.stopped_at_url, row.stop_reason.as_deref()) {
                (Some(url), Some(reason)) => Some(EarlyStop {
                    url,
                    reason: decode("stop_reason", reason)?,
                }),
                _ => None,
            },
        })
    }
}

/// The `health` column with its reason; a degraded run the site refused
/// pages of was degraded because it blocks us.
fn run_health(
    health: Option<&str>,
    reason: Option<String>,
    refusals: i32,
) -> sqlx::Result<Option<RunHealth>> {
    match health {
        None => Ok(None),
        Some("healthy") => Ok(Some(RunHealth::Healthy)),
        Some("degraded") => Ok(Some(RunHealth::Degraded {
            reason: reason.unwrap_or_default(),
            blocked: refusals > 0,
        })),
        Some(other) => Err(sqlx::Error::ColumnDecode {
            index: "health".to_owned(),
            source: format!("unknown run health {other:?}").into(),
        }),
    }
}

/// Decodes rows read together.
pub(super) fn runs(rows: Vec<RunRow>) -> sqlx::Result<Vec<CrawlRun>> {
    rows.into_iter().map(CrawlRun::try_from).collect()
}

/// Decodes a row that may not be there.
pub(super) fn maybe_run(row: Option<RunRow>) -> sqlx::Result<Option<CrawlRun>> {
    row.map(CrawlRun::try_from).transpose()
}

/// A `crawl_attempts` row, as the run's history reads it.
pub(super) struct AttemptRow {
    pub attempt: i32,
    pub worker_id: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: Option<String>,
    pub reason: Option<String>,
    pub error_kind: Option<String>,
    pub last_url: Option<String>,
    pub kept_html: bool,
    pub kept_screenshot: bool,
}

impl TryFrom<AttemptRow> for Attempt {
    type Error = sqlx::Error;

    fn try_from(row: AttemptRow) -> sqlx::Result<Attempt> {
        Ok(Attempt {
            attempt: row.attempt,
            worker_id: row.worker_id,
            started_at: row.started_at,
            ended_at: row.ended_at,
            outcome: decode_optional("outcome", row.outcome.as_deref())?,
            reason: row.reason,
            error_kind: decode_optional("error_kind", row.error_kind.as_deref())?,
            last_url: row.last_url,
            kept_html: row.kept_html,
            kept_screenshot: row.kept_screenshot,
        })
    }
}
