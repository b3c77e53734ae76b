//! The Fargate worker in Terraform, the ECS JSON and the compose file's base worker.

use serde_json::{Value as Json, json};

use crate::sources::{Terraform, code_default, compose, ecs_env, json_file, text};

#[test]
fn the_fargate_worker_is_the_same_in_terraform_and_the_ecs_json() {
    let tf = Terraform::load();
    let tf_worker = tf.get("local", "worker_container");
    let task = json_file("ecs/task-definition.json");
    let worker = &task["containerDefinitions"][0];

    assert_eq!(tf_worker["command"], json!(["--process=worker"]));
    assert_eq!(worker["command"], tf_worker["command"]);
    assert_eq!(
        (tf.get("var", "worker_cpu"), tf.get("var", "worker_memory")),
        (json!(1024), json!(2048))
    );
    assert_eq!(task["cpu"], text(&tf.get("var", "worker_cpu")));
    assert_eq!(task["memory"], text(&tf.get("var", "worker_memory")));
    for name in [
        "WORKER_CONCURRENCY",
        "HTTP_CONCURRENCY",
        "DRAIN_TIMEOUT_SECS",
        "METRICS_PORT",
        "DATABASE_MAX_CONNECTIONS",
        "LOG_FORMAT",
    ] {
        assert_eq!(ecs_env(&tf_worker, name), ecs_env(worker, name), "{name}");
    }
    assert_eq!(
        ecs_env(worker, "WORKER_CONCURRENCY"),
        "4",
        "Fargate workers: 1 vCPU, 2 GB, 4 crawls"
    );
    let base = &compose()["worker"];
    assert_eq!(
        base["environment"]["WORKER_CONCURRENCY"], "2",
        "EC2 base workers: 2 crawls"
    );
    assert_eq!(base["command"], tf_worker["command"]);

    // Secrets reach the task from Parameter Store, the same ones in both.
    let secrets = |container: &Json| -> Vec<String> {
        let mut names: Vec<String> = container["secrets"]
            .as_array()
            .expect("secrets")
            .iter()
            .map(|s| text(&s["name"]))
            .collect();
        names.sort();
        names
    };
    assert_eq!(secrets(worker), secrets(&tf_worker));
    assert_eq!(
        secrets(worker),
        ["DATABASE_URL", "REDIS_URL", "SESSION_KEY"]
    );
    for container in [worker, &tf_worker] {
        let environment = container["environment"].to_string();
        assert!(
            !environment.contains("SESSION_KEY") && !environment.contains("DATABASE_URL"),
            "a secret in plain environment"
        );
    }
}

#[test]
fn every_stop_timeout_covers_the_workers_drain() {
    let tf = Terraform::load();
    let drain = code_default("DRAIN_TIMEOUT_SECS");
    let worker = &json_file("ecs/task-definition.json")["containerDefinitions"][0];
    let stop = worker["stopTimeout"].as_u64().expect("stopTimeout");

    assert_eq!(tf.get("var", "worker_drain_timeout_secs"), drain);
    assert_eq!(ecs_env(worker, "DRAIN_TIMEOUT_SECS"), drain.to_string());
    assert_eq!(tf.get("var", "worker_stop_timeout_secs"), stop);
    assert!(
        (drain + 5..=120).contains(&stop),
        "stopTimeout {stop}: the drain ({drain} s) + margin, at most 120"
    );

    let base = &compose()["worker"];
    assert_eq!(base["environment"]["DRAIN_TIMEOUT_SECS"], drain.to_string());
    let grace: u64 = text(&base["stop_grace_period"])
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!(
        grace >= drain + 5,
        "stop_grace_period {grace}s: the drain ({drain} s) + margin"
    );
}
