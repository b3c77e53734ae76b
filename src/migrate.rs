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

async fn migrate(args: &Args) -> anyhow::Result<ExitCode> {
    let url = args.database.resolve()?;
    let pool = store::connect(&url, 1).await?;
    let before = store::schema::schema_state(&pool).await?;
    if !before.unknown.is_empty() {
        tracing::info!(
            versions = ?before.unknown,
            "the database has migrations of a newer release; this binary runs on it"
        );
    }
    if args.check {
        pool.close().await;
        return Ok(match before.is_current() {
            true => {
                tracing::info!("the schema is current");
                ExitCode::SUCCESS
            }
            false => {
                tracing::error!(
                    pending = ?before.pending,
                    failed = ?before.failed,
                    "the schema is behind this binary: run `crawlfleet migrate`"
                );
                ExitCode::FAILURE
            }
        });
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
