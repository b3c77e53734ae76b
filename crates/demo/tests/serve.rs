//! `crawlfleet-demo` as `crawlfleet --demo` runs it (src/tools.rs): with the
//! fleet's arguments and environment it serves the shop, registers it once
//! (a site, the keyword `laptop`, a first crawl), says `ready <url>` on
//! stdout, and stops on SIGTERM, or by itself once its parent is gone.
//! Needs Postgres (DATABASE_URL names the server; each test makes a database
//! of its own).

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use sqlx::{Connection as _, PgConnection, PgPool};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    process::{Child, Command},
};

/// A database of the test's own on DATABASE_URL's server, dropped by [`Scratch::drop`].
struct Scratch {
    server: String,
    name: String,
    url: String,
}

impl Scratch {
    async fn new() -> Scratch {
        let given = std::env::var("DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/crawlfleet".into());
        let server = match given.rsplit_once('/') {
            Some((server, _)) => server.to_owned(),
            None => given.clone(),
        };
        let name = format!("demo_serve_{}_{}", std::process::id(), next_number());
        let mut admin = PgConnection::connect(&format!("{server}/postgres"))
            .await
            .expect("Postgres reachable (DATABASE_URL)");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap();
        let url = format!("{server}/{name}");
        Scratch { server, name, url }
    }

    async fn pool(&self) -> PgPool {
        PgPool::connect(&self.url).await.unwrap()
    }

    async fn drop(self) {
        let mut admin = PgConnection::connect(&format!("{}/postgres", self.server))
            .await
            .unwrap();
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&mut admin)
        .await
        .unwrap();
    }
}

/// Tells apart the databases of this process's tests.
fn next_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// crawlfleet-demo with the fleet's arguments, on `db`, its stdout piped.
fn demo(db: &Scratch, allow_private_targets: bool) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet-demo"));
    cmd.args(["--process=all", "--demo"])
        .env_clear()
        .env("DATABASE_URL", &db.url)
        .env("REDIS_URL", "redis://127.0.0.1:6379")
        .env("DEMO_PORT", "0")
        .env("ALLOW_PRIVATE_TARGETS", allow_private_targets.to_string())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// The shop's URL from its first line on stdout, within 30 s.
async fn ready_url(child: &mut Child) -> String {
    let mut line = String::new();
    let stdout = child.stdout.as_mut().unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .expect("ready within 30 s")
    .unwrap();
    line.trim_end()
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("not a ready line: {line:?}"))
        .to_owned()
}

/// The status of GET `path` on the shop at `url` (HTTP/1.0, read to the end).
async fn get_status(url: &str, path: &str) -> u16 {
    let addr = url.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer[9..12]).parse().unwrap()
}

/// Sends SIGTERM and waits for the exit code (10 s at most).
async fn terminate(child: &mut Child) -> i32 {
    // SAFETY: kill(2) on this test's own child.
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("stops within 10 s of SIGTERM")
        .unwrap();
    status.code().unwrap_or(-1)
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

#[tokio::test]
async fn it_serves_the_shop_registers_it_once_and_stops_on_sigterm() {
    let db = Scratch::new().await;
    let mut shop = demo(&db, true).spawn().unwrap();
    let url = ready_url(&mut shop).await;
    assert_eq!(get_status(&url, "/js-search?q=laptop").await, 200);
    let pool = db.pool().await;
    let (name, search_url): (String, String) = sqlx::query_as("SELECT name, search_url FROM sites")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(name, "demo-shop");
    assert!(
        search_url.starts_with(&format!("{url}/js-search?")),
        "{search_url}"
    );
    let keyword: String = sqlx::query_scalar("SELECT keyword FROM keywords")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(keyword, "laptop");
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM crawl_runs WHERE state = 'queued'"
        )
        .await,
        1
    );
    assert_eq!(terminate(&mut shop).await, 0);
    // Started again on a fleet that has a site: it serves, and registers nothing.
    let mut shop = demo(&db, true).spawn().unwrap();
    let url = ready_url(&mut shop).await;
    assert_eq!(get_status(&url, "/").await, 200);
    assert_eq!(count(&pool, "SELECT count(*) FROM sites").await, 1);
    assert_eq!(count(&pool, "SELECT count(*) FROM crawl_runs").await, 1);
    assert_eq!(terminate(&mut shop).await, 0);
    pool.close().await;
    db.drop().await;
}

#[tokio::test]
async fn without_private_targets_allowed_it_says_why_and_never_says_ready() {
    let db = Scratch::new().await;
    let output = demo(&db, false).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("crawlfleet: failed:")
                && l.contains("ALLOW_PRIVATE_TARGETS=true")),
        "{stderr}"
    );
    db.drop().await;
}

#[tokio::test]
async fn it_stops_by_itself_once_the_process_that_started_it_is_gone() {
    let db = Scratch::new().await;
    // A parent that is killed outright: its child, the shop, is handed to init.
    let mut parent = Command::new("/bin/sh")
        .args(["-c", "\"$0\" --process=all --demo & echo \"pid $!\"; wait"])
        .arg(env!("CARGO_BIN_EXE_crawlfleet-demo"))
        .env_clear()
        .env("DATABASE_URL", &db.url)
        .env("REDIS_URL", "redis://127.0.0.1:6379")
        .env("DEMO_PORT", "0")
        .env("ALLOW_PRIVATE_TARGETS", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(parent.stdout.take().unwrap()).lines();
    let (mut pid, mut url) = (None, None);
    while pid.is_none() || url.is_none() {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("a line within 30 s")
            .unwrap()
            .expect("the pid and the ready line");
        if let Some(p) = line.strip_prefix("pid ") {
            pid = Some(p.parse::<i32>().unwrap());
        } else if let Some(u) = line.strip_prefix("ready ") {
            url = Some(u.to_owned());
        }
    }
    let (pid, url) = (pid.unwrap(), url.unwrap());
    assert_eq!(get_status(&url, "/").await, 200);
    parent.kill().await.unwrap();
    // Gone (or a zombie waiting for init to reap it) within a few seconds.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit(')')
                    .next()?
                    .split_whitespace()
                    .next()
                    .map(str::to_owned)
            });
        if state.is_none_or(|s| s == "Z") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the shop (pid {pid}) still runs 10 s after its parent was killed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        tokio::net::TcpStream::connect(url.strip_prefix("http://").unwrap())
            .await
            .is_err(),
        "the shop's port still answers"
    );
    db.drop().await;
}
