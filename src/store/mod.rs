//! Postgres: the truth and the backlog. All SQL of crawlfleet lives here; it
//! takes and returns domain types (rows are decoded here, once), and seals
//! secrets at rest (`sealing`). May import `domain` only; no room.

pub mod columns;
pub mod fence;
pub mod items;
pub mod keywords;
pub mod leader;
pub mod listing;
pub mod names;
pub mod proxy_health;
pub mod rekey;
pub mod repairs;
pub mod results;
pub mod runs;
pub mod saved_pages;
pub mod schema;
pub mod sealing;
pub mod sessions;
pub mod sites;
pub mod stats;
pub mod url_lists;
pub mod webhooks;
pub mod workers;

pub use schema::migrate;

use std::time::Duration;

use anyhow::Context;
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

/// How long [`connect`] waits for Postgres to answer, by default.
pub const CONNECT_WAIT: Duration = Duration::from_secs(120);

/// The query parameter of a resolved DATABASE_URL that carries the CA as PEM
/// text (`DATABASE_SSLROOTCERT_PEM`; libpq has none, [`connect_options`]
/// takes it out again).
pub const ROOT_CERT_PEM_PARAMETER: &str = "sslrootcert_pem";

/// The options sqlx connects with, from a resolved DATABASE_URL: the URL, and
/// the CA given as text (`DATABASE_SSLROOTCERT_PEM`), which rides in the URL's
/// `sslrootcert_pem` (libpq has no such parameter; sqlx takes it apart).
pub fn connect_options(url: &str) -> anyhow::Result<PgConnectOptions> {
    let parameter = ROOT_CERT_PEM_PARAMETER;
    let mut parsed = url::Url::parse(url).context("parsing DATABASE_URL")?;
    let pem = parsed
        .query_pairs()
        .find(|(k, _)| k == parameter)
        .map(|(_, v)| v.into_owned());
    let Some(pem) = pem else {
        return url.parse().context("parsing DATABASE_URL");
    };
    let rest: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| k != parameter)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    parsed.set_query(None);
    if !rest.is_empty() {
        parsed.query_pairs_mut().extend_pairs(rest);
    }
    let options: PgConnectOptions = parsed.as_str().parse().context("parsing DATABASE_URL")?;
    Ok(options.ssl_root_cert_from_pem(pem.into_bytes()))
}

/// Opens the pool, retrying with backoff while Postgres is not reachable yet
/// (containers start together; a database restart must not kill the process),
/// for [`CONNECT_WAIT`].
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    connect_within(url, max_connections, CONNECT_WAIT).await
}

/// [`connect`], retrying for `wait` at most.
pub async fn connect_within(
    url: &str,
    max_connections: u32,
    wait: Duration,
) -> anyhow::Result<PgPool> {
    crate::ops::tls::use_ring_provider();
    let options = connect_options(url)?;
    let deadline = tokio::time::Instant::now() + wait;
    let mut delay = Duration::from_millis(200);
    loop {
        let result = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.clone())
            .await;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match result {
            Ok(pool) => return Ok(pool),
            // A certificate that does not check out will not later: say so now.
            Err(e) if is_certificate_error(&e) => {
                return Err(e).context("connecting to Postgres over TLS");
            }
            Err(e) if !left.is_zero() => {
                let delay_now = delay.min(left);
                tracing::warn!(error = %e, "Postgres not reachable yet, retrying in {delay_now:?}");
                tokio::time::sleep(delay_now).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("connecting to Postgres (waited {}s)", wait.as_secs())
                });
            }
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
