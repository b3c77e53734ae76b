//! Credentials that rotate without an outage, as tests/it/rotation.rs proves and
//! docs/deploy.md says: the Postgres user comes from its parameter wherever
//! crawlfleet runs (two login roles take turns), and no password is part of a
//! datastore container's configuration, so rolling the fleet onto a new one
//! restarts neither Postgres nor Redis.

use serde_json::Value as Json;

use crate::sources::{
    Terraform, attr, compose, datastores_compose, ecs_names, json_file, nested, read, source, text,
};

const DEPLOY_SCRIPT: &str = "infra/templates/user_data.sh.tftpl";
const POSTGRES_INIT: &str = "postgres-init.sh";

/// The `valueFrom` of the ECS container's secret `name`.
fn secret_from(container: &Json, name: &str) -> String {
    let secrets = container["secrets"].as_array().expect("secrets");
    let secret = secrets
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no secret {name}: {container}"));
    text(&secret["valueFrom"])
}

#[test]
fn the_postgres_user_comes_from_its_parameter_wherever_crawlfleet_runs() {
    let tf = Terraform::load();
    let parameter = tf.resource("aws_ssm_parameter", "postgres_user");
    assert_eq!(
        source(attr(parameter, "name")),
        "\"${local.ssm_prefix}/postgres-user\""
    );
    assert_eq!(tf.eval(attr(parameter, "type")), "String", "not secret");
    assert_eq!(
        source(attr(parameter, "value")),
        "local.postgres_login_roles[0]"
    );
    let roles = tf.get("local", "postgres_login_roles");
    assert_eq!(
        roles,
        serde_json::json!(["crawlfleet_blue", "crawlfleet_green"])
    );

    // Fargate: the worker and the migrate task, in Terraform and in the JSON.
    let hcl_arn = "aws_ssm_parameter.postgres_user.arn";
    for name in ["worker_container", "migrate_container"] {
        // As written, whatever the layout: `{ name = "DATABASE_USER", valueFrom = ... }`.
        let container: String = source(tf.expr("local", name))
            .chars()
            .filter(|c| !c.is_whitespace() && *c != ',')
            .collect();
        assert!(
            container.contains(&format!("name=\"DATABASE_USER\"valueFrom={hcl_arn}")),
            "{name}: DATABASE_USER from postgres-user"
        );
        let evaluated = tf.get("local", name);
        assert!(
            !ecs_names(&evaluated, "environment").contains(&"DATABASE_USER".to_owned()),
            "{name}: DATABASE_USER is not a constant"
        );
    }
    for file in [
        "ecs/task-definition.json",
        "ecs/migrate-task-definition.json",
    ] {
        let container = &json_file(file)["containerDefinitions"][0];
        assert!(
            secret_from(container, "DATABASE_USER")
                .ends_with(":parameter/crawlfleet/postgres-user"),
            "{file}"
        );
        assert!(!ecs_names(container, "environment").contains(&"DATABASE_USER".to_owned()));
    }
    // The execution role may read it (both tasks use it); so may the host.
    for (policy, sid) in [
        ("ecs_execution", "WorkerSecrets"),
        ("ec2", "ReadOwnParameters"),
    ] {
        let document = tf.data("aws_iam_policy_document", policy);
        let resources = nested(document, "statement")
            .find(|s| tf.eval(attr(s, "sid")) == sid)
            .map(|s| source(attr(s, "resources")))
            .unwrap_or_else(|| panic!("{policy}: no statement {sid}"));
        assert!(resources.contains(hcl_arn), "{policy}.{sid}: {resources}");
    }

    // The host: crawlfleet-deploy reads it into .env, which every crawlfleet
    // container reads; nothing sets it as a constant.
    let script = read(DEPLOY_SCRIPT);
    assert!(script.contains("database_user=$(parameter postgres-user) || exit 1"));
    assert!(script.contains("echo \"DATABASE_USER=$database_user\""));
    assert!(!source(tf.expr("local", "database_env")).contains("DATABASE_USER"));
    for (name, service) in compose().as_object().unwrap() {
        assert!(
            service["environment"].get("DATABASE_USER").is_none(),
            "{name}: DATABASE_USER comes from .env"
        );
    }
}

#[test]
fn the_login_roles_take_turns_as_the_owner_role_in_every_mode_and_in_the_test() {
    let tf = Terraform::load();
    let roles: Vec<String> = tf
        .get("local", "postgres_login_roles")
        .as_array()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    let init = read(POSTGRES_INIT);
    let deploy = read("docs/deploy.md");
    let proof = read("tests/it/rotation.rs");
    assert!(init.contains("CREATE ROLE crawlfleet NOLOGIN;"));
    assert!(
        deploy.contains("CREATE ROLE crawlfleet NOLOGIN;"),
        "managed first deploy"
    );
    for role in &roles {
        for statement in [
            format!("CREATE ROLE {role} LOGIN IN ROLE crawlfleet"),
            format!("ALTER ROLE {role} SET role = 'crawlfleet';"),
        ] {
            assert!(init.contains(&statement), "{POSTGRES_INIT}: {statement}");
            assert!(deploy.contains(&statement), "docs/deploy.md: {statement}");
        }
        assert!(
            proof.contains(&format!("\"{role}\"")),
            "tests/it/rotation.rs rotates {role}"
        );
    }
    // The host's Postgres runs the script on its first start, with what it reads.
    let postgres = &datastores_compose()["postgres"];
    let mounts = postgres["volumes"].to_string();
    assert!(mounts.contains(&format!("./{POSTGRES_INIT}:/docker-entrypoint-initdb.d/")));
    assert!(init.contains("/run/crawlfleet/datastores/postgres-user"));
    // crawlfleet-deploy writes it on the host (host mode's files).
    assert!(source(tf.expr("local", "host_files")).contains(&format!("\"{POSTGRES_INIT}\"")));
}

#[test]
fn no_password_is_part_of_a_datastore_containers_configuration() {
    let services = datastores_compose();
    let script = read(DEPLOY_SCRIPT);
    for name in ["postgres", "redis"] {
        let service = &services[name];
        let configuration = service.to_string();
        for variable in ["DATABASE_PASSWORD", "REDIS_PASSWORD", "DATABASE_USER"] {
            assert!(
                !configuration.contains(&format!("${{{variable}")),
                "{name} interpolates {variable}: a rotation would restart it"
            );
        }
        assert!(
            service["volumes"]
                .to_string()
                .contains("\"./datastores:/run/crawlfleet/datastores:ro\""),
            "{name} reads its credentials from ./datastores"
        );
    }
    // Each file they read is one crawlfleet-deploy writes.
    let read_by_them = format!(
        "{}{}",
        services["postgres"]["environment"], services["redis"]
    ) + &read(POSTGRES_INIT);
    for file in ["postgres-user", "postgres-password", "redis-password"] {
        assert!(
            read_by_them.contains(&format!("/run/crawlfleet/datastores/{file}")),
            "nothing reads {file}"
        );
        assert!(
            script.contains(&format!("> datastores/{file}.new")),
            "crawlfleet-deploy writes no datastores/{file}"
        );
    }
}

/// The `"..."` string literal of `code` that contains `part`.
fn literal_with<'a>(code: &'a str, part: &str) -> &'a str {
    let at = code.find(part).unwrap_or_else(|| panic!("no {part:?}"));
    let start = code[..at].rfind('"').unwrap() + 1;
    let end = at + code[at..].find('"').unwrap();
    &code[start..end]
}

#[test]
fn each_rotation_in_the_docs_names_the_test_that_proves_it_and_quotes_the_code() {
    let deploy = read("docs/deploy.md");
    let rotating = deploy
        .split("## Rotating secrets")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/deploy.md: Rotating secrets");
    let proof = read("tests/it/rotation.rs");
    for test in [
        "postgres_and_redis_passwords_rotate_while_a_worker_crawls_and_no_run_is_lost",
        "a_rotated_session_key_reseals_every_stored_value_at_the_api_start_and_the_old_key_can_go",
    ] {
        assert!(
            proof.contains(&format!("async fn {test}()")),
            "no test {test}"
        );
        assert!(
            rotating.contains(test),
            "docs/deploy.md does not name {test}"
        );
    }
    // The log line an operator waits for, word for word.
    let app = read("src/app.rs");
    let logged = literal_with(&app, "SESSION_KEY rotation:");
    assert!(
        rotating.contains(&format!("`{logged}`")),
        "docs/deploy.md quotes another line than src/app.rs logs: {logged}"
    );
    for field in ["resealed=", "unopenable="] {
        assert!(proof.contains(field) && rotating.contains(field), "{field}");
    }
    // Rotation is by rolling with both credentials valid: nothing re-reads one.
    assert!(
        !deploy.contains("re-read"),
        "docs/deploy.md: a process re-reads a secret"
    );
    // The Redis ACL steps the test takes are the ones the docs give.
    for step in [
        "ACL SETUSER default \">$NEW\"",
        "ACL SETUSER default \"<$OLD\"",
    ] {
        assert!(rotating.contains(step), "docs/deploy.md: {step}");
    }
    assert!(proof.contains("\"SETUSER\", \"default\", \">redis-new\""));
    assert!(proof.contains("\"SETUSER\", \"default\", \"<redis-old\""));
    assert!(rotating.contains("PASSWORD NULL") && proof.contains("PASSWORD NULL"));
}
