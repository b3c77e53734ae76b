//! Ports: the code's defaults, the compose file, the security groups, the Dockerfile
//! and the ECS JSON.

use serde_json::json;

use crate::sources::{
    Terraform, attr, code_default, compose, datastores_compose, ecs_env, health_port, json_file,
    runtime_stage, source, text, url_port,
};

#[test]
fn ports_agree_between_the_code_compose_terraform_and_the_ecs_json() {
    let tf = Terraform::load();
    let services = compose();
    let api = code_default("API_PORT");
    assert_eq!(tf.get("local", "api_port"), api);
    assert_eq!(services["api"]["ports"][0], format!("{api}:{api}"));
    assert_eq!(services["api"]["environment"]["API_PORT"], api.to_string());
    assert_eq!(health_port(&services["api"]["healthcheck"]["test"]), api);
    // The api's /metrics: a port of its own, published on the host's loopback
    // only (the load balancer and the security group never see it).
    let api_metrics = code_default("API_METRICS_PORT");
    assert_ne!(api_metrics, api);
    assert_eq!(
        services["api"]["environment"]["API_METRICS_PORT"],
        api_metrics.to_string()
    );
    assert_eq!(
        services["api"]["environment"]["API_METRICS_HOST"],
        "0.0.0.0"
    );
    assert_eq!(
        services["api"]["ports"][1],
        format!("127.0.0.1:{api_metrics}:{api_metrics}")
    );
    assert_eq!(services["api"]["ports"].as_array().unwrap().len(), 2);

    let scheduler = code_default("SCHEDULER_PORT");
    assert_eq!(
        services["scheduler"]["environment"]["SCHEDULER_PORT"],
        scheduler.to_string()
    );
    assert_eq!(
        health_port(&services["scheduler"]["healthcheck"]["test"]),
        scheduler
    );

    let metrics = code_default("METRICS_PORT");
    let base = &services["worker"];
    assert_eq!(base["environment"]["METRICS_PORT"], metrics.to_string());
    assert_eq!(health_port(&base["healthcheck"]["test"]), metrics);

    let worker = &json_file("ecs/task-definition.json")["containerDefinitions"][0];
    let tf_worker = tf.get("local", "worker_container");
    let port = tf
        .get("var", "worker_metrics_port")
        .as_u64()
        .expect("worker_metrics_port");
    assert_eq!(port, metrics);
    assert_eq!(ecs_env(worker, "METRICS_PORT"), port.to_string());
    assert_eq!(worker["portMappings"][0]["containerPort"], port);
    assert_eq!(health_port(&worker["healthCheck"]["command"]), port);
    assert_eq!(
        tf_worker["healthCheck"]["command"],
        json!([
            "CMD",
            "crawlfleet",
            "healthcheck",
            "--url",
            "http://127.0.0.1:${var.worker_metrics_port}/health"
        ])
    );
}

#[test]
fn the_image_exposes_the_ports_of_every_role() {
    let stage = runtime_stage();
    let mut exposed: Vec<u64> = stage
        .iter()
        .filter_map(|i| i.strip_prefix("EXPOSE "))
        .flat_map(str::split_whitespace)
        .map(|p| p.trim_end_matches("/tcp").parse().expect("a port"))
        .collect();
    exposed.sort();
    let mut roles = [
        code_default("API_PORT"),
        code_default("API_METRICS_PORT"),
        code_default("METRICS_PORT"),
        code_default("SCHEDULER_PORT"),
    ];
    roles.sort();
    assert_eq!(
        exposed, roles,
        "EXPOSE: api, its metrics, worker, scheduler"
    );

    // The image's own HEALTHCHECK probes the api unless told otherwise.
    let url = stage
        .iter()
        .find_map(|i| {
            i.split_once("HEALTHCHECK_URL=")
                .map(|(_, url)| url.to_owned())
        })
        .expect("ENV HEALTHCHECK_URL");
    assert_eq!(url_port(&url), code_default("API_PORT"));
}

#[test]
fn postgres_and_redis_ports_agree_between_the_security_groups_and_compose() {
    let tf = Terraform::load();
    let data_ports = tf.get("local", "data_ports");
    assert_eq!(data_ports, json!({ "postgres": 5432, "redis": 6379 }));
    let datastores = datastores_compose();
    let tf_worker = tf.get("local", "worker_container");
    let worker = &json_file("ecs/task-definition.json")["containerDefinitions"][0];

    for (service, port_variable) in [("postgres", "DATABASE_PORT"), ("redis", "REDIS_PORT")] {
        let port = data_ports[service].as_u64().unwrap();
        // "${PRIVATE_BIND_IP:-127.0.0.1}:5432:5432": published on the host's
        // private IP at the port the security group opens, to the same port inside.
        let published = text(&datastores[service]["ports"][0]);
        let mut fields = published.rsplit(':');
        let (inside, on_host) = (fields.next().unwrap(), fields.next().unwrap());
        assert_eq!(
            (inside, on_host),
            (port.to_string().as_str(), port.to_string().as_str()),
            "{service}: {published}"
        );
        // The host's containers (.env from Terraform), the Fargate workers and
        // the migrate task connect on that port.
        assert_eq!(ecs_env(&tf_worker, port_variable), port.to_string());
        assert_eq!(ecs_env(worker, port_variable), port.to_string());
    }
    let migrate = tf.get("local", "migrate_container");
    assert_eq!(ecs_env(&migrate, "DATABASE_PORT"), "5432");

    // The rules take their ports from local.data_ports, none of their own, and go
    // to wherever the datastores are (the host's group, or RDS's and ElastiCache's).
    assert!(source(tf.expr("local", "data_rules")).contains("local.data_ports["));
    let ingress = tf.resource("aws_vpc_security_group_ingress_rule", "data");
    assert_eq!(source(attr(ingress, "for_each")), "local.data_rules");
    assert_eq!(
        source(attr(ingress, "security_group_id")),
        "each.value.server"
    );
    let egress = tf.resource("aws_vpc_security_group_egress_rule", "workers_data");
    assert_eq!(source(attr(egress, "for_each")), "local.data_ports");
    for (rule, port) in [(ingress, "each.value.port"), (egress, "each.value")] {
        assert_eq!(source(attr(rule, "from_port")), port);
        assert_eq!(source(attr(rule, "to_port")), port);
    }
    // ElastiCache on the same port; RDS on its default, 5432.
    let redis = tf.resource("aws_elasticache_replication_group", "redis");
    assert_eq!(tf.eval(attr(redis, "port")), data_ports["redis"]);
    let postgres = tf.resource("aws_db_instance", "postgres");
    assert!(postgres.attributes().all(|a| a.key() != "port"));
}

#[test]
fn the_api_is_reached_through_the_load_balancer_only() {
    let tf = Terraform::load();
    let api = code_default("API_PORT");
    // The target group and the host's one ingress rule: the api's port, from the
    // ALB's group (no CIDR, nothing from the internet).
    let target = tf.resource("aws_lb_target_group", "api");
    assert_eq!(source(attr(target, "port")), "local.api_port");
    assert_eq!(tf.get("local", "api_port"), api);
    let rule = tf.resource("aws_vpc_security_group_ingress_rule", "api");
    assert_eq!(
        source(attr(rule, "referenced_security_group_id")),
        "aws_security_group.alb[0].id"
    );
    assert!(rule.attributes().all(|a| !a.key().starts_with("cidr")));
    let ingress: Vec<String> = tf
        .all("resource", "aws_vpc_security_group_ingress_rule")
        .filter(|r| source(attr(r, "security_group_id")) == "aws_security_group.ec2.id")
        .map(|r| source(attr(r, "ip_protocol")))
        .collect();
    assert_eq!(
        ingress.len(),
        1,
        "the host admits the ALB alone: {ingress:?}"
    );
    // Nothing opens SSH.
    for rule in tf.all("resource", "aws_vpc_security_group_ingress_rule") {
        for key in ["from_port", "to_port"] {
            if let Some(port) = rule.attributes().find(|a| a.key() == key) {
                assert_ne!(source(port.expr()), "22", "SSH is Session Manager's");
            }
        }
    }
}
