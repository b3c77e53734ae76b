//! Postgres: the truth and the backlog. All SQL of crawlfleet lives here; it
//! takes and returns domain types (rows are decoded here, once), and seals
//! secrets at rest (`sealing`). May import `domain` only; no room.

pub mod items;
pub mod keywords;
pub mod leader;
pub mod listing;
pub mod names;
pub mod rekey;
pub mod results;
pub mod runs;
pub mod schema;
pub mod sealing;
pub mod sessions;
pub mod sites;
pub mod stats;
pub mod webhooks;
pub mod workers;

pub use schema::migrate;

use std::time::Duration;

use anyhow::Context;
use sqlx::{PgPool, postgres::PgPoolOptions};

/// Opens the pool, retrying with backoff while Postgres is not reachable yet
/// (containers start together; a database restart must not kill the process).
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    crate::ops::tls::use_ring_provider();
    let mut delay = Duration::from_millis(200);
    let mut tries = 0;
    loop {
        let result = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await;
        match result {
            Ok(pool) => return Ok(pool),
            // A certificate that does not check out will not later: say so now.
            Err(e) if is_certificate_error(&e) => {
                return Err(e).context("connecting to Postgres over TLS");
            }
            Err(e) if tries < 30 => {
                tries += 1;
                tracing::warn!(error = %e, "Postgres not reachable yet, retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e).context("connecting to Postgres"),
        }
    }
}

/// Whether connecting failed on TLS: a configuration or a certificate that
/// will not check out later either (rustls' verdict comes wrapped in an I/O
/// error).
fn is_certificate_error(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Tls(_) => true,
        sqlx::Error::Io(io) => io
            .get_ref()
            .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()),
        _ => false,
    }
}

/// Whether an error is a violation of the named constraint.
pub fn violates(error: &sqlx::Error, constraint: &str) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.constraint())
        .is_some_and(|c| c == constraint)
}
