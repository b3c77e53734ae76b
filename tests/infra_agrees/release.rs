//! How a release reaches production and what it may reach: the migration first
//! (compose, Terraform, the ECS JSON), the instance role out of the containers'
//! reach, the load balancer in front of the api, the datastores over TLS, and
//! every variable handed to crawlfleet one it reads.

use std::collections::BTreeSet;

use serde_json::{Value as Json, json};

use crate::sources::{
    Terraform, attr, code, code_default, compose, datastores_compose, ecs_names, env_example_names,
    first, json_file, nested, read, source, text, with_host_datastore_secrets,
};

const USER_DATA: &str = "infra/templates/user_data.sh.tftpl";

/// A compose service's `depends_on` condition on `other`.
fn condition(service: &Json, other: &str) -> String {
    text(&service["depends_on"][other]["condition"])
}

#[test]
fn the_release_migrates_before_any_of_it_runs() {
    // `crawlfleet migrate` exists and is what every path runs first.
    assert!(
        code().contains("Some(\"migrate\")"),
        "src/main.rs: the migrate subcommand"
    );
    let services = compose();
    let migrate = &services["migrate"];
    assert_eq!(migrate["command"], json!(["migrate"]));
    assert_eq!(migrate["restart"], "no", "a one-shot");
    for service in ["api", "scheduler"] {
        assert_eq!(
            condition(&services[service], "migrate"),
            "service_completed_successfully",
            "{service} starts once the schema is this release's"
        );
    }
    // The workers after the api of the same release.
    assert_eq!(condition(&services["worker"], "api"), "service_healthy");
    assert_eq!(
        condition(&services["worker"], "migrate"),
        "service_completed_successfully"
    );
    // With Postgres on the host, the migration waits for it.
    assert_eq!(
        condition(&datastores_compose()["migrate"], "postgres"),
        "service_healthy"
    );
    // crawlfleet-deploy runs it on its own, before the release's `up`, so a
    // failure changes nothing (with host datastores, only Postgres and Redis are
    // started before it).
    let script = read(USER_DATA);
    let run = script
        .find("docker compose run --rm migrate")
        .expect("migrate runs first");
    let up = script
        .find("docker compose up -d --remove-orphans")
        .expect("then up");
    assert!(run < up);
    for early in script
        .match_indices("docker compose up -")
        .filter(|(at, _)| *at < run)
    {
        let line = script[early.0..].lines().next().unwrap();
        assert!(
            line.ends_with(" postgres redis"),
            "before the migration only the datastores start: {line}"
        );
    }

    // On ECS: a task of the release's image (not the workers', which an upgrade
    // holds back), with the database's parts, user and password only.
    let tf = Terraform::load();
    let tf_migrate = tf.get("local", "migrate_container");
    let json_migrate = &json_file("ecs/migrate-task-definition.json")["containerDefinitions"][0];
    assert_eq!(tf.get("local", "migrate_command"), json!(["migrate"]));
    assert_eq!(tf_migrate["command"], json!(["migrate"]));
    assert_eq!(json_migrate["command"], tf_migrate["command"]);
    assert_eq!(source(&hcl_image(&tf)), "local.image");
    // With host datastores (Terraform's default) also the host's CA, as text
    // (tests/infra_agrees/durability.rs): the JSON with what
    // ecs/host-datastores-secrets.json adds is Terraform's.
    let json_host = with_host_datastore_secrets(json_migrate, "migrate");
    assert_eq!(
        ecs_names(&json_host, "secrets"),
        ecs_names(&tf_migrate, "secrets")
    );
    assert_eq!(
        ecs_names(json_migrate, "secrets"),
        ["DATABASE_PASSWORD", "DATABASE_USER"]
    );
    for container in [&tf_migrate, json_migrate] {
        assert!(
            ecs_names(container, "environment")
                .iter()
                .all(|n| n == "LOG_FORMAT" || n.starts_with("DATABASE_")),
            "{container}"
        );
    }
    assert_eq!(
        ecs_names(&tf_migrate, "environment"),
        ecs_names(json_migrate, "environment")
    );
    let run_task = json_file("ecs/run-migrate.json");
    assert_eq!(
        run_task["taskDefinition"],
        json_file("ecs/migrate-task-definition.json")["family"]
    );
}

/// The image of the migrate container, as written in locals.tf.
fn hcl_image(tf: &Terraform) -> hcl::Expression {
    let hcl::Expression::Object(container) = tf.expr("local", "migrate_container") else {
        panic!("migrate_container is an object");
    };
    container
        .iter()
        .find(|(key, _)| matches!(key, hcl::ObjectKey::Identifier(i) if i.as_str() == "image"))
        .map(|(_, value)| value.clone())
        .expect("an image")
}

#[test]
fn a_deployment_is_rolled_back_and_never_waits_for_the_queue() {
    let tf = Terraform::load();
    let service = tf.resource("aws_ecs_service", "worker");
    let breaker = first(service, "deployment_circuit_breaker");
    assert_eq!(tf.eval(attr(breaker, "enable")), true);
    assert_eq!(tf.eval(attr(breaker, "rollback")), true);
    let json = json_file("ecs/service.json");
    assert_eq!(
        json["deploymentConfiguration"]["deploymentCircuitBreaker"],
        json!({"enable": true, "rollback": true})
    );
    // Protection is minutes, renewed while busy: the default the code has.
    assert_eq!(
        tf.get("var", "worker_protection_minutes"),
        code_default("ECS_PROTECTION_MINUTES")
    );

    // On-demand and Spot, by the variables; the JSON says the defaults.
    let strategy: Vec<_> = nested(service, "capacity_provider_strategy").collect();
    assert_eq!(strategy.len(), 2);
    assert!(service.attributes().all(|a| a.key() != "launch_type"));
    assert_eq!(
        json["capacityProviderStrategy"],
        json!([
            {"capacityProvider": "FARGATE", "base": tf.get("var", "worker_on_demand_base"),
             "weight": tf.get("var", "worker_on_demand_weight")},
            {"capacityProvider": "FARGATE_SPOT", "weight": tf.get("var", "worker_spot_weight")},
        ])
    );
    for (index, provider, base, weight) in [
        (
            0,
            "FARGATE",
            Some("var.worker_on_demand_base"),
            "var.worker_on_demand_weight",
        ),
        (1, "FARGATE_SPOT", None, "var.worker_spot_weight"),
    ] {
        assert_eq!(
            tf.eval(attr(strategy[index], "capacity_provider")),
            provider
        );
        assert_eq!(source(attr(strategy[index], "weight")), weight);
        if let Some(base) = base {
            assert_eq!(source(attr(strategy[index], "base")), base);
        }
    }
}

#[test]
fn no_container_can_take_the_instance_role() {
    let tf = Terraform::load();
    let metadata = first(
        tf.resource("aws_launch_template", "host"),
        "metadata_options",
    );
    assert_eq!(tf.eval(attr(metadata, "http_tokens")), "required");
    assert_eq!(
        tf.eval(attr(metadata, "http_put_response_hop_limit")),
        1,
        "IMDSv2 with one hop: the host's processes, not its containers"
    );
    // The api (its metrics) and the scheduler (its heartbeat) alone get
    // credentials, of the role that may only put metrics, through the folder
    // mounted into their containers and nobody else's.
    let services = compose();
    let publishers = ["api", "scheduler"];
    for (name, service) in services.as_object().unwrap() {
        let mounts = service["volumes"].to_string();
        assert_eq!(
            mounts.contains("./aws:"),
            publishers.contains(&name.as_str()),
            "{name}: {mounts}"
        );
    }
    let api = &services["api"];
    let mount = text(&api["volumes"][0]);
    let inside = mount.split(':').nth(1).unwrap();
    for name in publishers {
        let service = &services[name];
        assert_eq!(text(&service["volumes"][0]), mount, "{name}");
        assert_eq!(
            text(&service["environment"]["AWS_CONFIG_FILE"]),
            format!("{inside}/config"),
            "{name}"
        );
    }
    let script = read(USER_DATA);
    assert!(script.contains(&format!(
        "credential_process = /bin/cat {inside}/api-credentials.json"
    )));
    assert!(script.contains("--role-arn \"${api_metrics_role_arn}\""));
    let policy = tf.data("aws_iam_policy_document", "api_metrics");
    let statements: Vec<_> = nested(policy, "statement").collect();
    assert_eq!(statements.len(), 1);
    assert_eq!(
        tf.eval(attr(statements[0], "actions")),
        json!(["cloudwatch:PutMetricData"])
    );
    let namespace = first(statements[0], "condition");
    assert_eq!(
        tf.eval(attr(namespace, "values")),
        json!([tf.get("var", "cloudwatch_namespace")])
    );
}

#[test]
fn the_load_balancer_keeps_websockets_open_and_checks_the_api_health() {
    let tf = Terraform::load();
    let idle = tf.get("var", "alb_idle_timeout_secs").as_u64().unwrap();
    let ping = code_default("WS_PING_INTERVAL_SECS");
    assert!(
        idle > ping,
        "ALB idle timeout {idle} s above the WebSocket ping ({ping} s)"
    );
    let alb = tf.resource("aws_lb", "api");
    assert_eq!(
        source(attr(alb, "idle_timeout")),
        "var.alb_idle_timeout_secs"
    );
    assert_eq!(tf.eval(attr(alb, "drop_invalid_header_fields")), true);
    let health = first(tf.resource("aws_lb_target_group", "api"), "health_check");
    let path = text(&tf.eval(attr(health, "path")));
    assert!(
        code().contains(&format!("\"{path}\"")),
        "the api serves {path}"
    );
    assert_eq!(path, "/health");
    let https = tf.resource("aws_lb_listener", "https");
    assert!(text(&tf.eval(attr(https, "ssl_policy"))).starts_with("ELBSecurityPolicy-TLS13-1-2"));
    // The api's keep-alive outlasts the ALB's (compose: HTTP_HEADER_TIMEOUT_SECS).
    assert_eq!(
        text(&compose()["api"]["environment"]["HTTP_HEADER_TIMEOUT_SECS"]),
        "${API_HTTP_HEADER_TIMEOUT_SECS:-10}"
    );
    assert!(
        read("infra/ssm.tf")
            .contains("API_HTTP_HEADER_TIMEOUT_SECS=${local.tls ? var.alb_idle_timeout_secs + 5")
    );
    // X-Forwarded-For is believed from the ALB's subnets only.
    assert_eq!(
        text(&compose()["api"]["environment"]["TRUSTED_PROXIES"]),
        "${TRUSTED_PROXIES:-}"
    );
    assert!(source(tf.expr("local", "trusted_proxies")).contains("var.public_subnet_cidrs"));
}

#[test]
fn managed_datastores_are_spoken_to_over_verified_tls() {
    let tf = Terraform::load();
    let params = tf.resource("aws_db_parameter_group", "postgres");
    let force_ssl = nested(params, "parameter")
        .find(|p| tf.eval(attr(p, "name")) == "rds.force_ssl")
        .expect("rds.force_ssl");
    assert_eq!(tf.eval(attr(force_ssl, "value")), "1");
    let database = source(tf.expr("local", "database_env"));
    assert!(database.contains("\"verify-full\""), "{database}");
    assert_eq!(
        tf.get("local", "rds_ca_bundle"),
        "/usr/local/share/crawlfleet/rds-ca-bundle.pem"
    );
    let redis = tf.resource("aws_elasticache_replication_group", "redis");
    for setting in ["transit_encryption_enabled", "at_rest_encryption_enabled"] {
        assert_eq!(tf.eval(attr(redis, setting)), true, "{setting}");
    }
    let postgres = tf.resource("aws_db_instance", "postgres");
    for setting in [
        "storage_encrypted",
        "deletion_protection",
        "manage_master_user_password",
    ] {
        assert_eq!(tf.eval(attr(postgres, setting)), true, "{setting}");
    }
    assert_eq!(
        source(attr(postgres, "backup_retention_period")),
        "var.db_backup_retention_days"
    );
    // On the host, images of one release each, never a floating tag.
    for service in ["postgres", "redis"] {
        let image = text(&datastores_compose()[service]["image"]);
        let tag = image.split(':').nth(1).expect("a tag");
        let version = tag.split('-').next().unwrap();
        assert!(
            version.split('.').count() >= 2 && version.split('.').all(|p| p.parse::<u32>().is_ok()),
            "{service}: {image} is not pinned to a release"
        );
    }
}

#[test]
fn every_variable_the_deployment_hands_crawlfleet_is_one_it_reads() {
    // What crawlfleet reads: its settings (.env.example lists each, src/config.rs's
    // test sees to that) and the AWS SDK's own variables.
    let known: BTreeSet<String> = env_example_names();
    let reads = |name: &str| known.contains(name) || name.starts_with("AWS_");
    let tf = Terraform::load();
    let mut given: Vec<(String, String)> = Vec::new();
    for (what, container) in [
        ("Terraform worker", tf.get("local", "worker_container")),
        ("Terraform migrate", tf.get("local", "migrate_container")),
        (
            "ecs/task-definition.json",
            json_file("ecs/task-definition.json")["containerDefinitions"][0].clone(),
        ),
        (
            "ecs/migrate-task-definition.json",
            json_file("ecs/migrate-task-definition.json")["containerDefinitions"][0].clone(),
        ),
    ] {
        for key in ["environment", "secrets"] {
            for name in ecs_names(&container, key) {
                given.push((what.to_owned(), name));
            }
        }
    }
    for (name, service) in compose().as_object().unwrap() {
        for variable in service["environment"].as_object().unwrap().keys() {
            given.push((format!("compose {name}"), variable.clone()));
        }
    }
    // The host's .env (infra/ssm.tf): the datastores' parts by name.
    for part in tf.get("local", "database_env").as_object().unwrap().keys() {
        given.push(("host .env".into(), part.clone()));
    }
    for part in tf.get("local", "redis_env").as_object().unwrap().keys() {
        given.push(("host .env".into(), part.clone()));
    }
    // ... and what crawlfleet-deploy adds from the secrets and postgres-user.
    let script = read(USER_DATA);
    for line in script.lines() {
        let written = line
            .trim()
            .strip_prefix("echo \"")
            .and_then(|l| l.split_once('='));
        if let Some((name, _)) =
            written.filter(|(name, _)| name.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        {
            given.push(("host .env (crawlfleet-deploy)".into(), name.to_owned()));
        }
    }
    assert!(given.iter().any(|(_, n)| n == "DATABASE_USER"));
    assert!(given.iter().any(|(_, n)| n == "DATABASE_SSLROOTCERT"));
    let unknown: Vec<_> = given.iter().filter(|(_, name)| !reads(name)).collect();
    assert!(unknown.is_empty(), "crawlfleet reads none of {unknown:?}");
}

/// The role whose settings (src/config/mod.rs) read the variable `name`.
fn read_by(name: &str) -> &'static str {
    let config = read("src/config/mod.rs");
    let at = config
        .find(&format!("env = \"{name}\""))
        .unwrap_or_else(|| panic!("src/config/mod.rs reads no {name}"));
    let owner = config[..at]
        .rsplit("pub struct ")
        .next()
        .and_then(|s| s.split_whitespace().next())
        .unwrap();
    match owner {
        "ApiConfig" => "api",
        "SchedulerConfig" => "scheduler",
        "WorkerConfig" => "worker",
        other => panic!("{name} is read by {other}"),
    }
}

#[test]
fn settings_reach_the_role_that_reads_them() {
    let tf = Terraform::load();
    // Scale-in protection: the worker's, on ECS only (where ECS_AGENT_URI is set).
    assert_eq!(read_by("ECS_PROTECTION_MINUTES"), "worker");
    let tf_worker = tf.get("local", "worker_container");
    let json_worker = &json_file("ecs/task-definition.json")["containerDefinitions"][0];
    for container in [&tf_worker, json_worker] {
        assert!(
            ecs_names(container, "environment").contains(&"ECS_PROTECTION_MINUTES".to_owned()),
            "{container}"
        );
    }
    assert!(source(tf.expr("local", "worker_container")).contains(
        "{ name = \"ECS_PROTECTION_MINUTES\", value = tostring(var.worker_protection_minutes) }"
    ));

    // The load balancer's subnets: the api's, on the host, from .env.
    assert_eq!(read_by("TRUSTED_PROXIES"), "api");
    for (name, service) in compose().as_object().unwrap() {
        assert_eq!(
            service["environment"].get("TRUSTED_PROXIES").is_some(),
            name == "api",
            "{name}: TRUSTED_PROXIES is the api's"
        );
    }
    assert!(read("infra/ssm.tf").contains("\"TRUSTED_PROXIES=${local.trusted_proxies}\""));
}
