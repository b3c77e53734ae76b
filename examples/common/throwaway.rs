//! What the throwaway fleets of `scripts/chaos` and `scripts/abuse` share: a
//! database and a queue of their own, dropped at the end; the crawlfleet
//! binary built beside the example; a client of its api; and the clean-up a
//! container would do after a worker killed with SIGKILL.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::Context;
use sqlx::{Connection, PgConnection};
use tokio::process::Command;

#[path = "../../tests/it/support/ports.rs"]
mod ports;
pub use ports::free_port;

/// A database made for one run, and the Redis queue name that goes with it.
pub struct Scratch {
    admin: PgConnection,
    pub db: String,
    pub database_url: url::Url,
    pub redis_url: String,
    pub queue: String,
}

impl Scratch {
    /// A new database `<prefix>_<uuid>` on the server of `DATABASE_URL`.
    pub async fn create(prefix: &str) -> anyhow::Result<Scratch> {
        let mut server: url::Url = std::env::var("DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
            .parse()?;
        let db = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        server.set_path("/postgres");
        let mut admin = PgConnection::connect(server.as_str()).await?;
        sqlx::query(&format!("CREATE DATABASE {db}"))
            .execute(&mut admin)
            .await?;
        let mut database_url = server;
        database_url.set_path(&format!("/{db}"));
        Ok(Scratch {
            admin,
            queue: format!("{prefix}-{db}"),
            db,
            database_url,
            redis_url: std::env::var("REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
        })
    }

    /// Drops the queue's Redis keys and the database.
    pub async fn drop(mut self) -> anyhow::Result<()> {
        let mut redis = crawlfleet::queue::connect(&self.redis_url).await?;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", self.queue))
            .query_async(&mut redis)
            .await?;
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL").arg(keys).query_async(&mut redis).await?;
        }
        sqlx::query(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.db))
            .execute(&mut self.admin)
            .await?;
        Ok(())
    }
}

/// The crawlfleet binary of the same build as this example.
pub fn crawlfleet_binary() -> PathBuf {
    let me = std::env::current_exe().expect("own path");
    me.parent()
        .and_then(|examples| examples.parent())
        .expect("target/<profile>/examples")
        .join("crawlfleet")
}

/// `binary --process=<process>` as a member of the fleet on `scratch`: its
/// database and queue, the api on loopback at `api_port` taking `token`, two
/// browser slots, side ports picked freely (several workers share a host), the
/// demo shop on loopback allowed, the output to `log`. The caller adds its own
/// settings and spawns it; the process dies with its handle.
pub fn fleet_command(
    binary: &Path,
    process: &str,
    scratch: &Scratch,
    api_port: u16,
    token: &str,
    log: &Path,
) -> anyhow::Result<Command> {
    let log = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = Command::new(binary);
    command
        .arg(format!("--process={process}"))
        .env("DATABASE_URL", scratch.database_url.as_str())
        .env("REDIS_URL", &scratch.redis_url)
        .env("QUEUE_NAME", &scratch.queue)
        .env("API_HOST", "127.0.0.1")
        .env("API_PORT", api_port.to_string())
        .env("API_TOKENS", token)
        .env("API_METRICS_PORT", "0")
        .env("SCHEDULER_PORT", "0")
        .env("METRICS_PORT", "0")
        .env("WORKER_CONCURRENCY", "2")
        .env("ALLOW_PRIVATE_TARGETS", "true")
        .env("DISPATCH_INTERVAL_MS", "100")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
    Ok(command)
}

/// A client of the api at `api` (`http://host:port`) that sends `token` with
/// every request, once the api's `/ready` says it is (within `limit`).
pub async fn ready_api_client(
    api: &str,
    token: &str,
    limit: Duration,
) -> anyhow::Result<reqwest::Client> {
    let authorization = format!("Bearer {token}").parse()?;
    let http = reqwest::Client::builder()
        .default_headers(
            [(reqwest::header::AUTHORIZATION, authorization)]
                .into_iter()
                .collect(),
        )
        .build()?;
    let started = Instant::now();
    while !http
        .get(format!("{api}/ready"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        anyhow::ensure!(
            started.elapsed() < limit,
            "the api at {api} was not ready within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(http)
}

/// The profile folders a killed worker left (`crawlfleet-<host>-<pid>-<nonce>`),
/// with anything still running in them: the container would have taken them along.
pub fn remove_profiles_of(pid: u32) {
    let marker = format!("-{pid}-");
    for entry in std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("crawlfleet-") && name.contains(&marker) {
            crawlfleet::worker::browser::processes::kill_chrome_under(&entry.path());
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
