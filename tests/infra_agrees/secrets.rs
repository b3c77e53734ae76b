//! Secrets: every one in Parameter Store has a reader, and the API's tokens reach
//! the api and nothing else.

use serde_json::Value as Json;

use crate::sources::{Terraform, attr, compose, nested, read, source, text};

const DEPLOY_SCRIPT: &str = "infra/templates/user_data.sh.tftpl";

/// The `{ ... } > FILE` group of the deploy script that writes FILE.
fn written_to<'a>(script: &'a str, file: &str) -> &'a str {
    let end = script
        .find(&format!("}} > {file}\n"))
        .unwrap_or_else(|| panic!("{DEPLOY_SCRIPT} writes no {file}"));
    let start = script[..end]
        .rfind("{\n")
        .expect("the group's opening brace");
    &script[start..end]
}

/// The names a service's `env_file` lists (a string or a list).
fn env_files(service: &Json) -> Vec<String> {
    match &service["env_file"] {
        Json::Null => Vec::new(),
        Json::Array(files) => files.iter().map(text).collect(),
        file => vec![text(file)],
    }
}

#[test]
fn the_api_tokens_reach_the_api_and_no_other_container() {
    for (name, service) in compose().as_object().unwrap() {
        assert_eq!(
            env_files(service).iter().any(|f| f == "api.env"),
            name == "api",
            "{name}: env_file {:?}; api.env is the api's alone",
            env_files(service)
        );
        assert!(
            service["environment"].get("API_TOKENS").is_none(),
            "{name}: API_TOKENS belongs in api.env"
        );
    }

    let script = read(DEPLOY_SCRIPT);
    let api_env = written_to(&script, "api.env.new");
    let env = written_to(&script, ".env.new");
    for variable in ["API_TOKENS=", "API_READ_TOKENS="] {
        assert!(api_env.contains(variable), "api.env sets {variable}");
        assert!(
            !env.contains(variable),
            ".env (every container's) sets {variable}"
        );
    }
}

#[test]
fn every_secret_in_parameter_store_has_a_reader() {
    let tf = Terraform::load();
    let script = read(DEPLOY_SCRIPT);
    let task = source(tf.expr("local", "worker_container"));
    // What the execution role lets ECS read into the Fargate task.
    let execution = tf.data("aws_iam_policy_document", "ecs_execution");
    let task_may_read = nested(execution, "statement")
        .find(|s| tf.eval(attr(s, "sid")) == "WorkerSecrets")
        .map(|s| source(attr(s, "resources")))
        .expect("the WorkerSecrets statement");

    let secrets = tf.get("local", "secret_parameters");
    let names: Vec<&String> = secrets.as_object().unwrap().keys().collect();
    assert!(
        names.iter().any(|n| *n == "api-tokens") && names.iter().any(|n| *n == "api-read-tokens")
    );
    for name in names {
        let host_reads = [format!("$(secret {name})"), format!("$(secret {name} ")]
            .iter()
            .any(|read| script.contains(read.as_str()));
        let task_reads = task.contains(&format!("aws_ssm_parameter.secret[\"{name}\"]"));
        assert!(
            host_reads || task_reads,
            "{name}: neither crawlfleet-deploy nor the Fargate task reads it"
        );
        assert_eq!(
            task_may_read.contains(&format!("\"{name}\"")),
            task_reads,
            "{name}: the execution role may read exactly the task's secrets"
        );
        if name.starts_with("api-") {
            assert!(host_reads && !task_reads, "{name}: the api's alone");
        }
    }
}
