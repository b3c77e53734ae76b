//! `crawlfleet migrate`: the schema as a deploy step of its own, run before
//! the api, the scheduler and the workers of a release (docs/deploy.md).
//! `--check` changes nothing and exits non-zero while the schema is behind
//! this binary (a release's first step has not run, or failed).

use std::process::ExitCode;

use clap::Parser;

use crate::{config::DatabaseSettings, ops::telemetry, store};

/// Apply the database migrations, or check that none is pending.
#[derive(Debug, Parser)]
#[command(name = "crawlfleet migrate")]
pub struct Args {
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// Change nothing: exit 0 when the schema is this binary's (or newer),
    /// 1 when a migration is pending or failed.
    #[arg(long)]
    pub check: bool,

    /// Log format: json or pretty.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "pretty")]
    pub log_format: telemetry::LogFormat,
}

pub async fn run(args: &Args) -> ExitCode {
    telemetry::init(args.log_format);
    match migrate(args).await {
        Ok(code) => code,
        Err(e) => {
            tracing::error!(error = ?e, "crawlfleet migrate failed");
            ExitCode::from(2)
        }
    }
}

/// The schema is behind this binary: a migration is pending or failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "the schema is behind this binary (pending: {pending:?}, failed: {failed:?}): run `crawlfleet migrate`"
)]
pub struct SchemaBehind {
    pub pending: Vec<i64>,
    pub failed: Vec<i64>,
}

/// Judges the database's schema for this binary, changing nothing: what
/// `migrate --check` and `crawlfleet smoke` both ask. The outer error: the
/// schema could not be read; the inner one: it is behind.
pub async fn check_schema(pool: &sqlx::PgPool) -> anyhow::Result<Result<(), SchemaBehind>> {
    let state = store::schema::schema_state(pool).await?;
    if !state.unknown.is_empty() {
        tracing::info!(
            versions = ?state.unknown,
            "the database has migrations of a newer release; this binary runs on it"
        );
    }
    if state.is_current() {
        tracing::info!("the schema is current");
        return Ok(Ok(()));
    }
    let behind = SchemaBehind {
        pending: state.pending.iter().map(|(v, _)| *v).collect(),
        failed: state.failed,
    };
    tracing::error!(
        pending = ?behind.pending,
        failed = ?behind.failed,
        "the schema is behind this binary: run `crawlfleet migrate`"
    );
    Ok(Err(behind))
}

async fn migrate(args: &Args) -> anyhow::Result<ExitCode> {
    let url = args.database.resolve()?;
    let pool = store::connect(&url, 1).await?;
    if args.check {
        let judged = check_schema(&pool).await;
        pool.close().await;
        return Ok(match judged? {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        });
    }
    let before = store::schema::schema_state(&pool).await?;
    if !before.unknown.is_empty() {
        tracing::info!(
            versions = ?before.unknown,
            "the database has migrations of a newer release; this binary runs on it"
        );
    }
    store::migrate(&pool).await?;
    tracing::info!(
        applied = before.pending.len(),
        versions = ?before.pending.iter().map(|(v, _)| v).collect::<Vec<_>>(),
        "the schema is current"
    );
    pool.close().await;
    Ok(ExitCode::SUCCESS)
}
