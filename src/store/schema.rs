//! The schema this binary knows against the one the database has: the
//! migrations in `migrations/`, applied by `crawlfleet migrate` (and by the
//! api and scheduler at start). Within a release migrations only add
//! (expand/contract), so a worker of the release before runs on the new
//! schema and the schema may be ahead of a binary, never behind it.

use std::collections::BTreeSet;

use anyhow::Context;
use sqlx::{PgPool, migrate::Migrator};

/// Every migration of this binary.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Applies pending migrations. sqlx takes a Postgres advisory lock around them,
/// so several processes starting together apply each migration once.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATOR
        .run(pool)
        .await
        .context("running database migrations")
}

/// How the database's schema stands against this binary's migrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaState {
    /// Migrations of this binary the database does not have yet (version, description).
    pub pending: Vec<(i64, String)>,
    /// Migrations the database has that this binary does not know: a newer
    /// release migrated it (fine for an older binary, by expand/contract).
    pub unknown: Vec<i64>,
    /// Migrations that started and did not finish.
    pub failed: Vec<i64>,
}

impl SchemaState {
    /// Whether this binary may run on the database as it is.
    pub fn is_current(&self) -> bool {
        self.pending.is_empty() && self.failed.is_empty()
    }
}

/// Reads which migrations the database has.
pub async fn schema_state(pool: &PgPool) -> anyhow::Result<SchemaState> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await
        .context("looking for the migrations table")?;
    let applied: Vec<(i64, bool)> = match exists {
        true => sqlx::query_as("SELECT version, success FROM _sqlx_migrations")
            .fetch_all(pool)
            .await
            .context("reading the applied migrations")?,
        false => Vec::new(),
    };
    let done: BTreeSet<i64> = applied
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(v, _)| *v)
        .collect();
    let known: BTreeSet<i64> = MIGRATOR
        .iter()
        .filter(|m| m.migration_type.is_up_migration())
        .map(|m| m.version)
        .collect();
    Ok(SchemaState {
        pending: MIGRATOR
            .iter()
            .filter(|m| m.migration_type.is_up_migration() && !done.contains(&m.version))
            .map(|m| (m.version, m.description.to_string()))
            .collect(),
        unknown: done.difference(&known).copied().collect(),
        failed: applied
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(v, _)| *v)
            .collect(),
    })
}
