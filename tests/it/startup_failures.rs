//! A process that cannot start says why: the real binary, with the default
//! environment (no `RUST_LOG`), exits with the code of its kind of failure,
//! writes one line on stderr naming the cause, and the same as an error in
//! its log. Before, an error met after the migrations' "already exists"
//! notice (every start but the first on a database) was not written at all.

use std::{process::Stdio, time::Duration};

use crate::support::{TestDb, free_port, test_queue_name};

/// What a process that stopped left: its exit code, its log (stdout) and stderr.
struct Stopped {
    code: i32,
    log: String,
    stderr: String,
}

/// Runs crawlfleet with exactly `env` (nothing inherited: no `RUST_LOG`)
/// and `args`, until it exits (60 s at most: the Redis client's retries take
/// about 10 s).
async fn run_until_exit(env: &[(&str, String)], args: &[&str]) -> Stopped {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.env_clear()
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the process stops by itself within 60 s")
        .expect("the binary runs");
    Stopped {
        code: output.status.code().unwrap_or(-1),
        log: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

impl Stopped {
    /// Exit code `code`, one stderr line `crawlfleet: <kind>: ...` containing
    /// `cause`, and the error in the log with its kind.
    fn assert_stopped_as(&self, code: i32, kind: &str, cause: &str) {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            (self.code, lines.len()),
            (code, 1),
            "exit code and one stderr line expected\nstderr:\n{}\nlog:\n{}",
            self.stderr,
            self.log
        );
        let prefix = format!("crawlfleet: {kind}: ");
        assert!(
            lines[0].starts_with(&prefix) && lines[0].contains(cause),
            "stderr {:?} should start with {prefix:?} and name {cause:?}",
            lines[0]
        );
        let logged = self
            .log
            .lines()
            .find(|l| l.contains("ERROR") && l.contains("crawlfleet stopped"));
        let logged = logged.unwrap_or_else(|| panic!("no error in the log:\n{}", self.log));
        assert!(logged.contains(kind) && logged.contains(cause), "{logged}");
    }
}

/// The environment of a fleet on `db` whose Redis is `redis_url`.
fn fleet_env(db: &TestDb, redis_url: String) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", db.url.clone()),
        ("REDIS_URL", redis_url),
        ("QUEUE_NAME", test_queue_name()),
        ("API_HOST", "127.0.0.1".into()),
        ("API_PORT", "0".into()),
        ("API_METRICS_PORT", "0".into()),
        ("SCHEDULER_PORT", "0".into()),
        ("METRICS_PORT", "0".into()),
    ]
}

/// A port nothing listens on: connecting to it is refused at once.
fn closed_port() -> u16 {
    free_port().expect("a free port")
}

#[tokio::test]
async fn a_fleet_or_worker_whose_redis_is_unreachable_exits_4_and_says_so_in_its_json_log() {
    // Migrated already: the start runs the migrations again and Postgres
    // answers with a notice, after which the error used to go unwritten.
    let db = TestDb::new().await;
    let mut env = fleet_env(&db, format!("redis://127.0.0.1:{}", closed_port()));
    env.push(("AUTH_DISABLED", "true".into()));
    // As the containers run: JSON lines, no RUST_LOG.
    env.push(("LOG_FORMAT", "json".into()));
    let stopped = run_until_exit(&env, &["--process=all"]).await;
    stopped.assert_stopped_as(4, "redis_unreachable", "connecting to Redis");
    let line = stopped
        .log
        .lines()
        .find(|l| l.contains("crawlfleet stopped"))
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
    assert_eq!(json["level"], "ERROR", "{json}");
    assert_eq!(json["exit_code"], 4, "{json}");
    // A Fargate worker: no api, no migrations, the same line.
    let stopped = run_until_exit(&env, &["--process=worker"]).await;
    stopped.assert_stopped_as(4, "redis_unreachable", "connecting to Redis");
    db.drop().await;
}

#[tokio::test]
async fn a_worker_whose_postgres_is_unreachable_exits_3_after_its_wait() {
    let env = vec![
        (
            "DATABASE_URL",
            format!("postgres://postgres@127.0.0.1:{}/nowhere", closed_port()),
        ),
        ("REDIS_URL", crate::support::redis_url()),
        ("DATABASE_WAIT_SECS", "1".into()),
        ("METRICS_PORT", "0".into()),
    ];
    let stopped = run_until_exit(&env, &["--process=worker"]).await;
    stopped.assert_stopped_as(3, "database_unreachable", "connecting to Postgres");
}

#[tokio::test]
async fn an_api_whose_port_is_taken_exits_5_and_names_the_port() {
    let db = TestDb::new().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut env = fleet_env(&db, crate::support::redis_url());
    env.push(("API_PORT", port.to_string()));
    env.push(("API_TOKENS", "a-token".into()));
    let stopped = run_until_exit(&env, &["--process=api"]).await;
    stopped.assert_stopped_as(5, "port_taken", &format!("127.0.0.1:{port}"));
    drop(taken);
    db.drop().await;
}

#[tokio::test]
async fn a_migration_that_fails_exits_6() {
    let db = TestDb::new().await;
    // An applied migration whose file no longer matches what was applied.
    sqlx::query(
        "UPDATE _sqlx_migrations SET checksum = '\\x00'::bytea \
         WHERE version = (SELECT min(version) FROM _sqlx_migrations)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let mut env = fleet_env(&db, crate::support::redis_url());
    env.push(("API_TOKENS", "a-token".into()));
    let stopped = run_until_exit(&env, &["--process=api"]).await;
    stopped.assert_stopped_as(6, "migration_failed", "migration");
    db.drop().await;
}

#[tokio::test]
async fn bad_settings_exit_2_with_the_setting_named() {
    let db = TestDb::new().await;
    // Found only once Postgres is reached and migrated (the notice again).
    let env = fleet_env(&db, crate::support::redis_url());
    let stopped = run_until_exit(&env, &["--process=api"]).await;
    stopped.assert_stopped_as(2, "config", "API_TOKENS");
    // Refused by the command line's parser itself.
    let stopped = run_until_exit(&env, &["--process=bogus"]).await;
    stopped.assert_stopped_as(2, "config", "--process");
    db.drop().await;
}

/// A remote browser named wrongly stops a worker before it connects to
/// anything: the setting is named, its value (it may hold a token) is not.
#[tokio::test]
async fn a_worker_whose_remote_browser_is_named_wrongly_exits_2_naming_the_setting_not_its_value() {
    refused_at_start(
        ("devtools", "BROWSER_DEVTOOLS_URL"),
        "ws://127.0.0.1:9/devtools/browser/x",
        &[
            ("BROWSER_DEVTOOLS_URL", "not a url ?token=s3cret-url"),
            (
                "BROWSER_DEVTOOLS_URL",
                "ftp://127.0.0.1:9/?token=s3cret-url",
            ),
            ("BROWSER_DEVTOOLS_URL", "ws://:9/?token=s3cret-url"),
            ("BROWSER_DEVTOOLS_SLOTS", "0"),
            ("BROWSER_RELAY_BIND", "0.0.0.0"),
        ],
    )
    .await;
}

/// The same for a WebDriver endpoint: only http(s) with a host is one.
#[tokio::test]
async fn a_worker_whose_webdriver_endpoint_is_named_wrongly_exits_2_naming_the_setting_not_its_value()
 {
    refused_at_start(
        ("webdriver", "BROWSER_WEBDRIVER_URL"),
        "http://127.0.0.1:9",
        &[
            ("BROWSER_WEBDRIVER_URL", "not a url ?token=s3cret-url"),
            (
                "BROWSER_WEBDRIVER_URL",
                "ws://127.0.0.1:9/?token=s3cret-url",
            ),
            ("BROWSER_WEBDRIVER_URL", "http://:9/?token=s3cret-url"),
            ("BROWSER_WEBDRIVER_SLOTS", "0"),
        ],
    )
    .await;
}

/// Starts a worker of `backend` (its URL in `url_setting`, `url` unless a
/// case says otherwise) with each of `cases` (a setting and its wrong
/// value): each stops it with exit 2 naming the setting, never a secret; so
/// does the backend without its URL.
async fn refused_at_start(
    (backend, url_setting): (&str, &'static str),
    url: &str,
    cases: &[(&'static str, &str)],
) {
    for (setting, value) in cases {
        let mut env = vec![
            // Nothing listens here: a worker that got past its settings
            // would fail otherwise.
            (
                "DATABASE_URL",
                format!("postgres://postgres@127.0.0.1:{}/nowhere", closed_port()),
            ),
            ("REDIS_URL", crate::support::redis_url()),
            ("BROWSER_BACKEND", backend.into()),
            (url_setting, url.into()),
        ];
        env.retain(|(name, _)| name != setting);
        env.push((setting, (*value).into()));
        let stopped = run_until_exit(&env, &["--process=worker"]).await;
        stopped.assert_stopped_as(2, "config", setting);
        assert!(
            !stopped.stderr.contains("s3cret") && !stopped.log.contains("s3cret"),
            "{setting}={value}: {}{}",
            stopped.stderr,
            stopped.log
        );
    }
    // Without the remote browser's URL the backend cannot be had either.
    let env = vec![
        (
            "DATABASE_URL",
            "postgres://postgres@127.0.0.1:1/nowhere".to_owned(),
        ),
        ("REDIS_URL", crate::support::redis_url()),
        ("BROWSER_BACKEND", backend.to_owned()),
    ];
    let stopped = run_until_exit(&env, &["--process=worker"]).await;
    stopped.assert_stopped_as(2, "config", url_setting);
}
