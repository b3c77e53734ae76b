//! The Fargate worker in Terraform, the ECS JSON and the compose file's base worker.

use serde_json::json;

use crate::sources::{
    Terraform, attr, code_default, compose, ecs_env, ecs_names, json_file, source, text,
    with_host_datastore_secrets,
};

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
        "ECS_PROTECTION_MINUTES",
        "METRICS_PORT",
        "DATABASE_MAX_CONNECTIONS",
        "LOG_FORMAT",
        "DATABASE_PORT",
        "DATABASE_NAME",
        "DATABASE_SSLROOTCERT",
        "REDIS_PORT",
    ] {
        assert_eq!(ecs_env(&tf_worker, name), ecs_env(worker, name), "{name}");
    }
    // The same settings by name; where the datastores are differs by mode and
    // account (Terraform's expressions, the JSON's ${PLACEHOLDERS}).
    assert_eq!(
        ecs_names(&tf_worker, "environment"),
        ecs_names(worker, "environment")
    );
    assert_eq!(
        ecs_env(worker, "ECS_PROTECTION_MINUTES"),
        code_default("ECS_PROTECTION_MINUTES").to_string(),
        "short protection: a deployment waits minutes, not for the queue"
    );
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

    // Secrets reach the task from Parameter Store, the same ones in both: the
    // passwords (and the Postgres user that goes with its password), never a URL
    // holding one (SESSION_KEY_PREVIOUS only while rotating, var.session_key_previous).
    // Terraform's default is the host's datastores, whose CA comes beside them
    // (tests/infra_agrees/durability.rs): the JSON with what
    // ecs/host-datastores-secrets.json adds is Terraform's, secret for secret;
    // without it, the managed datastores' shape.
    let host = with_host_datastore_secrets(worker, "worker");
    assert_eq!(
        ecs_names(&host, "secrets"),
        ecs_names(&tf_worker, "secrets")
    );
    assert_eq!(
        ecs_names(&tf_worker, "secrets")
            .iter()
            .filter(|name| name.ends_with("_PEM"))
            .collect::<Vec<_>>(),
        ["DATABASE_SSLROOTCERT_PEM", "REDIS_CA_CERT_PEM"]
    );
    let parameter = tf.resource("aws_ssm_parameter", "datastores_ca");
    assert_eq!(
        source(attr(parameter, "name")),
        "local.datastores_ca_parameter"
    );
    assert_eq!(
        source(tf.expr("local", "datastores_ca_parameter")),
        "\"${local.ssm_prefix}/datastores-ca\""
    );
    assert_eq!(source(tf.expr("local", "ssm_prefix")), "\"/${var.name}\"");
    assert_eq!(tf.get("var", "name"), "crawlfleet");
    assert_eq!(
        ecs_names(worker, "secrets"),
        [
            "DATABASE_PASSWORD",
            "DATABASE_USER",
            "REDIS_PASSWORD",
            "SESSION_KEY"
        ]
    );
    for container in [worker, &tf_worker] {
        let environment = container["environment"].to_string();
        for secret in ["SESSION_KEY", "PASSWORD", "DATABASE_URL", "REDIS_URL"] {
            assert!(
                !environment.contains(secret),
                "{secret} in plain environment: {environment}"
            );
        }
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
