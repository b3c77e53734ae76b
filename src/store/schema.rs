//! The schema this binary knows against the one the database has: the
//! migrations in `migrations/`, applied by `crawlfleet migrate` (and by the
//! api and scheduler at start). Within a release migrations only add
//! (expand/contract), so a worker of the release before runs on the new
//! schema and the schema may be ahead of a binary, never behind it.

use std::{borrow::Cow, collections::BTreeSet, sync::LazyLock};

use anyhow::Context;
use sqlx::{PgPool, migrate::Migrator};

/// Migrations whose comments were reworded after databases applied them, with
/// the checksum those databases recorded (SHA-384 of the text as applied) and
/// the SHA-384 of their statements (every line but `--` comment lines), which
/// must not change. sqlx refuses to run when an applied migration's text
/// differs from what it recorded, so these keep the recorded checksum: every
/// release, before and after the rewording, agrees with every database.
const REWORDED: &[Reworded] = &[
    Reworded {
        version: 20261122000001,
        applied_checksum: "9b69eab2e4ef5b1727ea3e2f5e95b8194e1f912b5c18e91233a90c60f111eb97224daa2a07cb14f8ddf3be74b3bb828f",
        #[cfg(test)]
        statements: "7fe2257083be118095d9a9b9e976526eac5f77b5c52ebb1b6e72668d7814b562fca7616210fc70ed93ed0e792e9de9e6",
    },
    Reworded {
        version: 20261125000020,
        applied_checksum: "3e8ec7973fd0b869256d578f3c6b63a682795ecc5da3040b79843ffe2174ea2bd8dfe95a3c5768e5111858eb3a62efdd",
        #[cfg(test)]
        statements: "0edf6fb53d24c18be727152ab4f39904d91168eeec8edde0a27388dda95ac0ddfb1d31f564b936bc511c66829bd24e2e",
    },
    Reworded {
        version: 20261125000040,
        applied_checksum: "836640218be298f28fe7c5f8c1a999ce8f246440c730e38269e26d1984c058d08a90116b6784000388388e5e90d68f3b",
        #[cfg(test)]
        statements: "947853ed3cbfbd57f8452dd1d028d471d4a6f4bda75a93442b5a64c234aaa8ba5759ddf4e3cfa86563bc5eb20f333d39",
    },
];

struct Reworded {
    version: i64,
    applied_checksum: &'static str,
    #[cfg(test)]
    statements: &'static str,
}

/// Every migration of this binary, the reworded ones with their applied checksum.
static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrator = sqlx::migrate!("./migrations");
    let migrations = migrator.migrations.iter().cloned().map(|mut migration| {
        if let Some(reworded) = REWORDED.iter().find(|r| r.version == migration.version) {
            let checksum = hex::decode(reworded.applied_checksum).expect("a hex checksum");
            migration.checksum = Cow::Owned(checksum);
        }
        migration
    });
    migrator.migrations = Cow::Owned(migrations.collect());
    migrator
});

/// Applies pending migrations. sqlx takes a Postgres advisory lock around them,
/// so several processes starting together apply each migration once.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATOR
        .run(pool)
        .await
        .context("running database migrations")
}

/// Applies this binary's migrations older than `version` only, leaving the
/// database as the release before that migration left it: how the upgrade
/// tests prepare the data a migration must carry over.
pub async fn migrate_before(pool: &PgPool, version: i64) -> anyhow::Result<()> {
    let mut older = sqlx::migrate!("./migrations");
    older.migrations = Cow::Owned(
        MIGRATOR
            .iter()
            .filter(|m| m.version < version)
            .cloned()
            .collect(),
    );
    older
        .run(pool)
        .await
        .with_context(|| format!("running the migrations before {version}"))
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

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha384};

    use super::*;

    /// SHA-384 of a migration's statements: its text without `--` comment lines.
    fn statements_digest(sql: &str) -> String {
        let statements: String = sql
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .map(|line| format!("{line}\n"))
            .collect();
        hex::encode(Sha384::digest(statements.as_bytes()))
    }

    #[test]
    fn a_reworded_migration_changed_only_its_comments() {
        for reworded in REWORDED {
            let migration = MIGRATOR
                .iter()
                .find(|m| m.version == reworded.version)
                .expect("every reworded migration exists");
            assert_eq!(
                statements_digest(&migration.sql),
                reworded.statements,
                "migration {} changed a statement, not only a comment: give the \
                 change a migration of its own",
                reworded.version
            );
            assert_eq!(
                hex::encode(&migration.checksum[..]),
                reworded.applied_checksum
            );
        }
    }
}
