//! `crawlfleet smoke`, the release's smoke task, as the real binary: with a
//! worker's settings on the test's Postgres and Redis it passes every step
//! (the browser's and both crawls' included) and leaves no browser, no Redis
//! key and no row behind; with a schema one migration behind, a Redis that
//! is not there, or a browser binary that does not exist, it exits 1 naming
//! that step, and runs none after it.

use std::{process::Stdio, time::Duration};

use crawlfleet::store;

use crate::support::{
    RemoteChrome, TestDb, browser_slots, free_port, leftovers_of_worker, redis_url,
};

const STEPS: [&str; 5] = [
    "postgres",
    "redis",
    "browser",
    "crawl-http",
    "crawl-browser",
];

/// What a smoke run left: its exit code, stdout (the steps) and stderr.
struct Smoked {
    code: Option<i32>,
    pid: i32,
    stdout: String,
    stderr: String,
}

impl Smoked {
    /// The line of `step` on stdout, if it ran.
    fn step(&self, step: &str) -> Option<&str> {
        let prefix = format!("smoke: {step} ");
        self.stdout.lines().find(|l| l.starts_with(&prefix))
    }

    /// Exit 1, `step` failed and named on stderr with `cause`, the steps
    /// before it passed and none after it ran.
    fn assert_failed_at(&self, step: &str, cause: &str) {
        let said = format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        assert_eq!(self.code, Some(1), "{said}");
        let named = format!("crawlfleet smoke: step {step} failed: ");
        let line = self.stderr.lines().find(|l| l.starts_with(&named));
        let line = line.unwrap_or_else(|| panic!("stderr names no failed {step}: {said}"));
        assert!(line.contains(cause), "{line:?} should say {cause:?}");
        let at = STEPS.iter().position(|s| *s == step).unwrap();
        for before in &STEPS[..at] {
            let line = self
                .step(before)
                .unwrap_or_else(|| panic!("{before} did not run: {said}"));
            assert!(line.contains(" ok "), "{line}");
        }
        assert!(self.step(step).unwrap().contains(" FAILED "), "{said}");
        for after in &STEPS[at + 1..] {
            assert!(
                self.step(after).is_none(),
                "{after} ran after {step} failed: {said}"
            );
        }
    }
}

/// `crawlfleet smoke` with a worker's environment on `db` and Redis at
/// `redis`, `extra` over it; two minutes at most.
async fn smoke(db: &TestDb, redis: &str, queue: &str, extra: &[(&str, String)]) -> Smoked {
    let chrome = std::env::var("CHROME_PATH").unwrap_or_else(|_| "chromium".into());
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .env("PROCESS", "worker")
        .env("DATABASE_URL", &db.url)
        .env("REDIS_URL", redis)
        .env("QUEUE_NAME", queue)
        .env("CHROME_PATH", chrome)
        .env("WORKER_CONCURRENCY", "1")
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["smoke", "--step-timeout-secs=45", "--timeout-secs=110"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd.spawn().expect("the binary runs");
    let pid = child.id().expect("just started") as i32;
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("crawlfleet smoke ends by itself within its time")
        .expect("the binary runs");
    Smoked {
        code: output.status.code(),
        pid,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn queue() -> String {
    crate::support::test_queue_name()
}

#[tokio::test]
async fn smoke_passes_every_step_on_a_current_schema_and_leaves_nothing_behind() {
    let _slots = browser_slots(1).await;
    let db = TestDb::new().await;
    let queue = queue();
    let smoked = smoke(&db, &redis_url(), &queue, &[]).await;
    let said = format!("stdout:\n{}\nstderr:\n{}", smoked.stdout, smoked.stderr);
    assert_eq!(smoked.code, Some(0), "{said}");
    for step in STEPS {
        let line = smoked
            .step(step)
            .unwrap_or_else(|| panic!("no {step}: {said}"));
        assert!(line.contains(" ok ") && line.contains(" ms "), "{line}");
    }
    // Both crawls read the three items of the built-in page.
    for crawl in ["crawl-http", "crawl-browser"] {
        assert!(
            smoked
                .step(crawl)
                .unwrap()
                .contains("3 items from http://127.0.0.1:")
        );
    }
    // No browser and no profile folder of it left.
    let (pids, dirs) = leftovers_of_worker(smoked.pid);
    assert!(pids.is_empty() && dirs.is_empty(), "{pids:?} {dirs:?}");
    // No key of its round trip left under the queue's prefix.
    let mut redis = crawlfleet::queue::connect(&redis_url()).await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{queue}:*"))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(keys.iter().all(|k| !k.contains(":smoke:")), "{keys:?}");
    // Nothing written to Postgres: no worker announced, no run, no item.
    for table in ["workers", "crawl_runs", "crawl_results", "items", "sites"] {
        let rows: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(rows, 0, "{table}");
    }
    db.drop().await;
}

/// With `BROWSER_BACKEND=devtools` the browser step reaches the remote
/// browser and the browser crawl runs in it; with the browser gone the step
/// fails naming where it was, never its URL.
#[tokio::test]
async fn smoke_passes_with_a_remote_browser_and_fails_at_the_browser_once_it_is_gone() {
    let db = TestDb::new().await;
    let mut remote = RemoteChrome::start().await;
    let at = format!("the remote browser at 127.0.0.1:{}", remote.port());
    let env = [
        ("BROWSER_BACKEND", "devtools".to_owned()),
        (
            "BROWSER_DEVTOOLS_URL",
            format!("{}?token=smoke-secret-2468", remote.websocket_url()),
        ),
    ];
    let smoked = smoke(&db, &redis_url(), &queue(), &env).await;
    let said = format!("stdout:\n{}\nstderr:\n{}", smoked.stdout, smoked.stderr);
    assert_eq!(smoked.code, Some(0), "{said}");
    assert!(smoked.step("browser").unwrap().contains(&at), "{said}");
    assert!(
        smoked
            .step("crawl-browser")
            .unwrap()
            .contains("3 items from http://127.0.0.1:"),
        "{said}"
    );
    assert!(!said.contains("smoke-secret-2468"), "{said}");
    remote.kill();
    let smoked = smoke(&db, &redis_url(), &queue(), &env).await;
    smoked.assert_failed_at("browser", &format!("reaching {at}"));
    assert!(
        !smoked.stderr.contains("smoke-secret-2468"),
        "{}",
        smoked.stderr
    );
    drop(remote);
    db.drop().await;
}

#[tokio::test]
async fn smoke_fails_at_postgres_when_the_schema_lacks_its_last_migration() {
    let db = TestDb::unmigrated().await;
    let pending = store::schema::schema_state(&db.pool).await.unwrap().pending;
    let (last, _) = pending.last().expect("this binary has migrations").clone();
    store::schema::migrate_before(&db.pool, last).await.unwrap();
    let smoked = smoke(&db, &redis_url(), &queue(), &[]).await;
    smoked.assert_failed_at(
        "postgres",
        &format!("the schema is behind this binary (pending: [{last}]"),
    );
    db.drop().await;
}

#[tokio::test]
async fn smoke_fails_at_redis_when_redis_is_not_there() {
    let db = TestDb::new().await;
    let closed = free_port().unwrap();
    let smoked = smoke(&db, &format!("redis://127.0.0.1:{closed}"), &queue(), &[]).await;
    smoked.assert_failed_at("redis", "Redis");
    db.drop().await;
}

#[tokio::test]
async fn smoke_fails_at_the_browser_when_its_binary_does_not_exist() {
    let db = TestDb::new().await;
    let missing = "/nonexistent/crawlfleet-test/chromium";
    let smoked = smoke(
        &db,
        &redis_url(),
        &queue(),
        &[("CHROME_PATH", missing.into())],
    )
    .await;
    smoked.assert_failed_at("browser", missing);
    let (pids, dirs) = leftovers_of_worker(smoked.pid);
    assert!(pids.is_empty() && dirs.is_empty(), "{pids:?} {dirs:?}");
    db.drop().await;
}
