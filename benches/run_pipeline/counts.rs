//! Counting what the fleet asks of its stores: Postgres statements from
//! `pg_stat_statements` (the bench's own queries run as another role and are
//! left out), Redis commands from `INFO commandstats`, and, to tell the
//! commands clients send (round trips, but for pipelines) from those Lua
//! scripts run inside Redis, a `MONITOR` of a pass of their own.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use sqlx::PgPool;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// One normalized statement and how often it ran.
#[derive(Debug, Clone)]
pub struct Statement {
    pub query: String,
    pub calls: i64,
    pub total_ms: f64,
}

pub async fn reset_statements(observer: &PgPool) {
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(observer)
        .await
        .expect("pg_stat_statements reset");
}

/// Statements run in the bench's database by anyone but the observer, most
/// called first.
pub async fn statements(observer: &PgPool) -> Vec<Statement> {
    let rows: Vec<(String, i64, f64)> = sqlx::query_as(
        "SELECT query, calls, total_exec_time FROM pg_stat_statements s
         WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND s.userid <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
         ORDER BY calls DESC, query",
    )
    .fetch_all(observer)
    .await
    .expect("pg_stat_statements");
    rows.into_iter()
        .map(|(query, calls, total_ms)| Statement {
            query,
            calls,
            total_ms,
        })
        .collect()
}

/// Commands by name since the last reset (`INFO commandstats`), script
/// calls inside EVAL/EVALSHA included.
pub async fn redis_commands(conn: &mut redis::aio::ConnectionManager) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

pub async fn reset_redis(conn: &mut redis::aio::ConnectionManager) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .expect("CONFIG RESETSTAT");
}

/// Commands seen by a `MONITOR` connection, by (sent by a client rather
/// than a script, command name).
pub struct Monitor {
    pub counts: Arc<Mutex<BTreeMap<(bool, String), u64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Monitor {
    pub async fn start(port: u16) -> Monitor {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("Redis reachable");
        stream.write_all(b"MONITOR\r\n").await.unwrap();
        let mut lines = BufReader::new(stream).lines();
        // +OK
        lines.next_line().await.unwrap();
        let counts: Arc<Mutex<BTreeMap<(bool, String), u64>>> = Arc::default();
        let task = tokio::spawn({
            let counts = counts.clone();
            async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    // +1700000000.123456 [0 127.0.0.1:5555] "evalsha" "..." ...
                    // +1700000000.123456 [0 lua] "hmget" ...
                    let Some((source, rest)) = line.split_once("] ") else {
                        continue;
                    };
                    let by_client = !source.ends_with(" lua");
                    let name = rest
                        .split('"')
                        .nth(1)
                        .unwrap_or_default()
                        .to_ascii_lowercase();
                    *counts.lock().unwrap().entry((by_client, name)).or_default() += 1;
                }
            }
        });
        Monitor { counts, task }
    }

    pub fn stop(self) -> BTreeMap<(bool, String), u64> {
        self.task.abort();
        self.counts.lock().unwrap().clone()
    }
}
