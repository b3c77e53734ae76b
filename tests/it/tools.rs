//! The tools that ship apart from the fleet (src/tools.rs): `crawlfleet
//! simulate` and `--demo` run `crawlfleet-simulate` and `crawlfleet-demo`,
//! found next to the crawlfleet executable, with the fleet's arguments; a
//! missing one is named, with how to build it (exit 2). The real binary runs
//! here from a folder of the test's own, beside stand-ins for the tools that
//! record what they were given.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use uuid::Uuid;

use crate::support::{TestDb, eventually, redis_url, test_queue_name};

/// A folder holding this build's crawlfleet (hard-linked: it looks for its
/// tools in its own executable's folder first) and the stand-ins a test puts
/// beside it; removed on drop.
struct Beside {
    dir: PathBuf,
}

impl Beside {
    fn new() -> Beside {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("tools-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let binary = dir.join("crawlfleet");
        if std::fs::hard_link(env!("CARGO_BIN_EXE_crawlfleet"), &binary).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_crawlfleet"), &binary).unwrap();
        }
        Beside { dir }
    }

    /// A stand-in for the tool `name`: a shell script.
    fn tool(&self, name: &str, script: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        let path = self.dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// crawlfleet `args` with exactly `env` (and a PATH without any tool).
    fn crawlfleet(&self, args: &[&str], env: &[(&str, String)]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(self.dir.join("crawlfleet"));
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("NO_COLOR", "1")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs crawlfleet until it exits: its exit code, stdout and stderr.
    async fn run(&self, args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
        let output =
            tokio::time::timeout(Duration::from_secs(60), self.crawlfleet(args, env).output())
                .await
                .expect("crawlfleet stops by itself within 60 s")
                .expect("crawlfleet runs");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The environment of an api on `db` (no worker: nothing is crawled).
fn api_env(db: &TestDb) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", db.url.clone()),
        ("REDIS_URL", redis_url()),
        ("QUEUE_NAME", test_queue_name()),
        ("API_HOST", "127.0.0.1".into()),
        ("API_PORT", "0".into()),
        ("API_METRICS_PORT", "0".into()),
        ("AUTH_DISABLED", "true".into()),
        ("ALLOW_PRIVATE_TARGETS", "true".into()),
    ]
}

#[tokio::test]
async fn crawlfleet_simulate_runs_crawlfleet_simulate_with_its_arguments_and_exits_as_it_does() {
    let beside = Beside::new();
    let args_file = beside.file("args");
    beside.tool(
        "crawlfleet-simulate",
        &format!(
            "printf '%s\\n' \"$@\" > {}\necho the simulator speaks\nexit 3",
            args_file.display()
        ),
    );
    let (code, stdout, _) = beside
        .run(
            &["simulate", "--burst", "8000", "--cron", "0 0 6 * * *"],
            &[],
        )
        .await;
    assert_eq!((code, stdout.as_str()), (3, "the simulator speaks\n"));
    assert_eq!(
        std::fs::read_to_string(&args_file).unwrap(),
        "--burst\n8000\n--cron\n0 0 6 * * *\n"
    );
}

#[tokio::test]
async fn a_missing_tool_is_named_with_how_to_build_it_and_exit_code_2() {
    let beside = Beside::new();
    let (code, _, stderr) = beside.run(&["simulate", "--json"], &[]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with("crawlfleet: config: crawlfleet-simulate is missing")
            && stderr.contains("`cargo build --workspace`")
            && stderr.contains("`cargo build -p crawlfleet-simulate`"),
        "{stderr}"
    );
    // --demo says so before it connects anything: no database or Redis here.
    let env = [
        (
            "DATABASE_URL",
            "postgres://postgres@127.0.0.1:1/none".into(),
        ),
        ("REDIS_URL", "redis://127.0.0.1:1".into()),
    ];
    let (code, _, stderr) = beside.run(&["--process=all", "--demo"], &env).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--demo runs the demo shop: crawlfleet-demo is missing")
            && stderr.contains("`cargo build -p crawlfleet-demo`"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_demo_shop_runs_as_a_child_with_the_fleets_arguments_and_is_ended_by_its_pid() {
    let db = TestDb::new().await;
    let beside = Beside::new();
    let (pid_file, args_file, ended_file) = (
        beside.file("pid"),
        beside.file("args"),
        beside.file("ended"),
    );
    // Says it is ready, then waits for its SIGTERM (a second at most after it;
    // a minute at most, should the test fail before it ends the fleet).
    beside.tool(
        "crawlfleet-demo",
        &format!(
            "echo $$ > {pid}\nprintf '%s\\n' \"$@\" > {args}\n\
             trap 'echo SIGTERM > {ended}; exit 0' TERM\n\
             echo ready http://127.0.0.1:9\n\
             i=0; while [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done",
            pid = pid_file.display(),
            args = args_file.display(),
            ended = ended_file.display(),
        ),
    );
    let mut fleet = beside
        .crawlfleet(&["--process=api", "--demo"], &api_env(&db))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid: i32 = eventually(Duration::from_secs(30), "the demo shop's pid", || {
        let pid_file = pid_file.clone();
        async move { std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok() }
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(&args_file).unwrap(),
        "--process=api\n--demo\n"
    );
    // A process group of its own: a Ctrl-C at the terminal reaches the fleet alone.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let pgid: i32 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(pgid, pid, "{stat}");
    // SAFETY: kill(2) on the fleet this test started.
    assert_eq!(
        unsafe { libc::kill(fleet.id().unwrap() as i32, libc::SIGTERM) },
        0
    );
    let status = tokio::time::timeout(Duration::from_secs(30), fleet.wait())
        .await
        .expect("the fleet stops within 30 s")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(std::fs::read_to_string(&ended_file).unwrap(), "SIGTERM\n");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the demo shop outlived the fleet"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_demo_shop_that_stops_before_it_is_ready_stops_the_fleet_with_its_exit_code() {
    let db = TestDb::new().await;
    let beside = Beside::new();
    beside.tool(
        "crawlfleet-demo",
        "echo 'crawlfleet: port_taken: the shop port' >&2\nexit 5",
    );
    let (code, _, stderr) = beside
        .run(&["--process=api", "--demo"], &api_env(&db))
        .await;
    assert_eq!(code, 5, "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(lines[0], "crawlfleet: port_taken: the shop port");
    assert!(
        lines[1].starts_with(
            "crawlfleet: port_taken: starting the demo: crawlfleet-demo stopped before it served the shop"
        ),
        "{stderr}"
    );
    db.drop().await;
}
