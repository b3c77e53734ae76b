//! scripts/release runs the steps of a release in order, each after the one before
//! succeeded, and stops at the first that fails: proved against stand-ins for
//! `terraform` and `aws` first on PATH, which record every call and answer what
//! the script asks (or fail where a test says), so no AWS is reached.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::sources::read;

/// The stand-in `aws`: records its arguments, fails the call that contains
/// FAKE_FAIL, answers the rest like the CLI with `--output text`.
const FAKE_AWS: &str = r#"#!/usr/bin/env bash
printf 'aws %s\n' "$*" >> "$FAKE_CALLS"
if [[ -n ${FAKE_FAIL:-} && "aws $*" == *"$FAKE_FAIL"* ]]; then echo "fake aws: failing as told" >&2; exit 255; fi
case "$*" in
    "ecs run-task"*crawlfleet-migrate*) echo "arn:aws:ecs:ap-northeast-2:123456789012:task/crawlfleet/migrate0" ;;
    "ecs run-task"*crawlfleet-worker*) echo "arn:aws:ecs:ap-northeast-2:123456789012:task/crawlfleet/smoke0" ;;
    "ecs wait "*|"ssm wait "*) ;;
    "ecs describe-tasks"*smoke0*exitCode*) echo "${FAKE_SMOKE_EXIT:-0}" ;;
    "ecs describe-tasks"*migrate0*exitCode*) echo "${FAKE_MIGRATE_EXIT:-0}" ;;
    "ecs describe-tasks"*stoppedReason*) echo "Essential container in task exited" ;;
    "ssm send-command"*"compose ps"*) echo health0 ;;
    "ssm send-command"*crawlfleet-deploy*) echo deploy0 ;;
    "ssm get-command-invocation"*deploy0*Status*) echo "${FAKE_DEPLOY_STATUS:-Success}" ;;
    "ssm get-command-invocation"*Status*) echo Success ;;
    "ssm get-command-invocation"*health0*StandardOutputContent*) printf 'api=%s\nscheduler=healthy\n' "${FAKE_API_HEALTH:-healthy}" ;;
    "ssm get-command-invocation"*StandardOutputContent*) echo "deployed" ;;
    "ecs update-service"*) echo crawlfleet-worker ;;
    "ecs describe-services"*) printf 'arn:aws:ecs:ap-northeast-2:123456789012:task-definition/%s\tCOMPLETED\n' "${FAKE_PRIMARY:-crawlfleet-worker:8}" ;;
    *) echo "fake aws: unexpected call: $*" >&2; exit 2 ;;
esac
"#;

/// The stand-in `terraform`: the apply, and the outputs the script reads.
const FAKE_TERRAFORM: &str = r#"#!/usr/bin/env bash
printf 'terraform %s\n' "$*" >> "$FAKE_CALLS"
if [[ -n ${FAKE_FAIL:-} && "terraform $*" == *"$FAKE_FAIL"* ]]; then echo "fake terraform: failing as told" >&2; exit 1; fi
case "$*" in
    *" apply "*) ;;
    *"output -raw ecs_cluster") printf crawlfleet ;;
    *"output -raw ecs_service") printf crawlfleet-worker ;;
    *"output -raw host_instance_id") printf i-0123456789abcdef0 ;;
    *"output -raw migrate_network_configuration") printf 'awsvpcConfiguration={subnets=[subnet-1],securityGroups=[sg-1],assignPublicIp=DISABLED}' ;;
    *"output -raw migrate_task_definition") printf crawlfleet-migrate:8 ;;
    *"output -raw worker_task_definition") printf crawlfleet-worker:8 ;;
    *"output -raw image_tag") printf abc1234 ;;
    *) echo "fake terraform: unexpected call: $*" >&2; exit 2 ;;
esac
"#;

struct Release {
    dir: PathBuf,
    output: Output,
}

impl Release {
    /// scripts/release abc1234 with the stand-ins first on PATH and `env` set.
    fn run(name: &str, env: &[(&str, &str)]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("crawlfleet-release-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, body) in [("aws", FAKE_AWS), ("terraform", FAKE_TERRAFORM)] {
            write_executable(&dir.join(file), body);
        }
        let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap());
        let mut command = Command::new("scripts/release");
        command
            .arg("abc1234")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("PATH", path)
            .env("FAKE_CALLS", dir.join("calls"))
            .env("RELEASE_HOST_CHECKS", "3")
            .env("RELEASE_HOST_CHECK_SECS", "0");
        for (key, value) in env {
            command.env(key, value);
        }
        let output = command.output().expect("scripts/release runs");
        Release { dir, output }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The index of the first call containing every one of `parts`.
    fn position(&self, parts: &[&str]) -> Option<usize> {
        self.calls()
            .iter()
            .position(|call| parts.iter().all(|part| call.contains(part)))
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write_executable(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Each step of a release, as the calls that make it, in the order they must come.
const STEPS: [&[&str]; 13] = [
    &["terraform", " apply ", "image_tag=abc1234"],
    &[
        "ecs run-task",
        "crawlfleet-migrate:8",
        "--started-by crawlfleet-release",
    ],
    &["ecs wait tasks-stopped", "migrate0"],
    &["ecs describe-tasks", "migrate0", "exitCode"],
    &["ssm send-command", "crawlfleet-deploy"],
    &["ssm wait command-executed", "deploy0"],
    &["ssm get-command-invocation", "deploy0", "Status"],
    &[
        "ssm get-command-invocation",
        "health0",
        "StandardOutputContent",
    ],
    &[
        "ecs run-task",
        "crawlfleet-worker:8",
        "--started-by crawlfleet-release",
        "--overrides",
    ],
    &["ecs wait tasks-stopped", "smoke0"],
    &["ecs describe-tasks", "smoke0", "exitCode"],
    &[
        "ecs update-service",
        "--task-definition crawlfleet-worker:8",
    ],
    &["ecs wait services-stable"],
];

#[test]
fn a_release_migrates_then_deploys_the_host_then_smokes_a_worker_and_only_then_moves_the_workers() {
    let release = Release::run("ordered", &[]);
    assert!(
        release.output.status.success(),
        "{}\n{:#?}",
        release.stderr(),
        release.calls()
    );
    let mut last = None;
    for step in STEPS {
        let at = release
            .position(step)
            .unwrap_or_else(|| panic!("no call {step:?} in {:#?}", release.calls()));
        assert!(
            last.is_none_or(|before| at > before),
            "{step:?} came before the step ahead of it: {:#?}",
            release.calls()
        );
        last = Some(at);
    }
    // The smoke runs the worker's own task definition, its command replaced.
    let smoke = &release.calls()[release.position(STEPS[8]).unwrap()];
    assert!(
        smoke.contains(r#"{"containerOverrides":[{"name":"worker","command":["smoke"]}]}"#),
        "{smoke}"
    );
    // The deployment that completed is checked after the service is stable.
    assert!(release.position(&["ecs describe-services"]) > Some(last.unwrap()));
}

/// A failure at one step: the release exits non-zero naming it, and no call of a
/// later step was made.
fn stops_at(name: &str, env: &[(&str, &str)], says: &str, first_never: usize) {
    let release = Release::run(name, env);
    assert!(
        !release.output.status.success(),
        "{name}: {:#?}",
        release.calls()
    );
    assert!(
        release.stderr().contains(says),
        "{name}: {}",
        release.stderr()
    );
    for step in &STEPS[first_never..] {
        assert_eq!(
            release.position(step),
            None,
            "{name}: {step:?} ran after the failure: {:#?}",
            release.calls()
        );
    }
}

#[test]
fn a_release_stops_at_the_first_step_that_fails_and_runs_nothing_after_it() {
    stops_at(
        "apply",
        &[("FAKE_FAIL", " apply ")],
        "terraform apply failed",
        1,
    );
    stops_at("migrate", &[("FAKE_MIGRATE_EXIT", "6")], "migrate: task", 4);
    stops_at(
        "migrate-start",
        &[("FAKE_FAIL", "crawlfleet-migrate:8")],
        "migrate: run-task failed",
        2,
    );
    stops_at(
        "deploy",
        &[("FAKE_DEPLOY_STATUS", "Failed")],
        "crawlfleet-deploy' ended Failed",
        7,
    );
    stops_at(
        "unhealthy",
        &[("FAKE_API_HEALTH", "unhealthy")],
        "api and scheduler not healthy after 3 checks",
        8,
    );
    stops_at("smoke", &[("FAKE_SMOKE_EXIT", "4")], "smoke: task", 11);
    stops_at(
        "rollback",
        &[("FAKE_PRIMARY", "crawlfleet-worker:7")],
        "not crawlfleet-worker:8 (rolled back?)",
        STEPS.len(),
    );
}

#[test]
fn terraform_alone_cannot_move_the_workers_and_the_release_tasks_failures_reach_the_topic() {
    // The service ignores its task definition: only scripts/release moves it.
    let ecs = read("infra/ecs.tf");
    assert!(ecs.contains("ignore_changes = [desired_count, task_definition]"));
    // The alarm rule matches the tasks the script starts.
    let script = read("scripts/release");
    assert!(script.contains("STARTED_BY=crawlfleet-release"));
    let alarms = read("infra/alarms.tf");
    assert!(alarms.contains(r#"startedBy  = ["crawlfleet-release"]"#));
    assert!(alarms.contains(r#"eventName = ["SERVICE_DEPLOYMENT_FAILED"]"#));
    for rule in ["deployment_failed", "release_task_failed"] {
        assert!(
            alarms.contains(&format!("aws_cloudwatch_event_rule.{rule}.arn")),
            "the topic admits {rule}"
        );
        assert!(alarms.contains(&format!(
            "resource \"aws_cloudwatch_event_target\" \"{rule}\""
        )));
    }
}
