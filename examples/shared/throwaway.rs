//! What the throwaway fleets of `scripts/chaos` and `scripts/abuse` share: a
//! database and a queue of their own, dropped at the end; the crawlfleet
//! binary built beside the example; and the clean-up a container would do
//! after a worker killed with SIGKILL.

use std::path::PathBuf;

use sqlx::{Connection, PgConnection};

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

/// Lowest port a fixed-port process is given.
const FIXED_PORTS_FROM: u16 = 10_000;

/// A free port on loopback, for a process that is told its port (and given
/// the same one when it is restarted). It is taken from below the kernel's
/// ephemeral range: a port from that range (what binding port 0 gives) can be
/// the local end of any outbound connection meanwhile, the process's own to
/// Postgres included, and then it cannot bind it ("Address already in use").
pub fn free_port() -> std::io::Result<u16> {
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let span = ephemeral_from.saturating_sub(FIXED_PORTS_FROM).max(1);
    // A random start: two runs side by side seldom try the same ports.
    let start = rand::random::<u16>() % span;
    (0..span)
        .map(|i| FIXED_PORTS_FROM + (start + i) % span)
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrInUse))
}

/// The crawlfleet binary of the same build as this example.
pub fn crawlfleet_binary() -> PathBuf {
    let me = std::env::current_exe().expect("own path");
    me.parent()
        .and_then(|examples| examples.parent())
        .expect("target/<profile>/examples")
        .join("crawlfleet")
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
