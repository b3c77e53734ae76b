//! The deployment says what the code says: Terraform (infra/), the AWS CLI JSON
//! (ecs/) and docker-compose.ec2.yaml agree with each other and with the code on
//! the metric, the worker's command, size and concurrency, the scaling bounds, the
//! ports, and a stop timeout that covers the worker's drain. Reads files only.

use std::{collections::HashMap, fs, path::Path};

use crawlfleet::cloudwatch;
use hcl::expr::TraversalOperator;
use hcl::{Expression, ObjectKey};
use serde_json::{Value as Json, json};

fn read(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    fs::read_to_string(&full).unwrap_or_else(|e| panic!("reading {}: {e}", full.display()))
}

/// Every .rs file under src/, concatenated.
fn code() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for path in fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = String::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

/// The `default_value_t` of the clap argument with `env = "NAME"`, else .env.example's value.
fn code_default(name: &str) -> u64 {
    let in_code = code().lines().find_map(|line| {
        let rest = line.split_once(&format!("env = \"{name}\""))?.1;
        let value = rest.split_once("default_value_t = ")?.1;
        value
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse::<u64>()
            .ok()
    });
    let in_example = || {
        let example = read(".env.example");
        example.lines().find_map(|l| {
            l.strip_prefix(&format!("{name}="))?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    in_code
        .or_else(in_example)
        .unwrap_or_else(|| panic!("no default for {name} in src/ or .env.example"))
}

fn text(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `variable` defaults and `locals` of infra/*.tf, evaluated to JSON as far as the
/// checks need: literals, var.* / local.*, tostring(); templates stay as written and
/// anything else (resource attributes) becomes null.
struct Terraform {
    vars: HashMap<String, Expression>,
    locals: HashMap<String, Expression>,
}

impl Terraform {
    fn load() -> Self {
        let (mut vars, mut locals) = (HashMap::new(), HashMap::new());
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("infra");
        for path in fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            if path.extension().is_none_or(|e| e != "tf") {
                continue;
            }
            let body = hcl::parse(&fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for block in body.blocks() {
                let mut attrs = block.body().attributes();
                match block.identifier() {
                    "variable" => {
                        if let Some(default) = attrs.find(|a| a.key() == "default") {
                            vars.insert(
                                block.labels()[0].as_str().to_owned(),
                                default.expr().clone(),
                            );
                        }
                    }
                    "locals" => {
                        locals.extend(attrs.map(|a| (a.key().to_owned(), a.expr().clone())))
                    }
                    _ => {}
                }
            }
        }
        Terraform { vars, locals }
    }

    fn get(&self, scope: &str, name: &str) -> Json {
        let map = if scope == "var" {
            &self.vars
        } else {
            &self.locals
        };
        let expr = map
            .get(name)
            .unwrap_or_else(|| panic!("{scope}.{name} has no value in infra/"));
        self.eval(expr)
    }

    fn eval(&self, expr: &Expression) -> Json {
        match expr {
            Expression::Number(n) => n.as_i64().map_or_else(|| json!(n.as_f64()), Json::from),
            Expression::String(s) => Json::from(s.as_str()),
            Expression::Bool(b) => Json::from(*b),
            Expression::Array(items) => items.iter().map(|e| self.eval(e)).collect(),
            Expression::Object(fields) => fields
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        ObjectKey::Identifier(i) => i.as_str().to_owned(),
                        ObjectKey::Expression(e) => text(&self.eval(e)),
                        other => panic!("unsupported object key {other:?}"),
                    };
                    (key, self.eval(value))
                })
                .collect(),
            Expression::TemplateExpr(t) => Json::from(t.to_string()),
            Expression::FuncCall(f) if f.name.name.as_str() == "tostring" => {
                Json::from(text(&self.eval(&f.args[0])))
            }
            Expression::Traversal(t) => match (&t.expr, &t.operators[..]) {
                (Expression::Variable(scope), [TraversalOperator::GetAttr(name)])
                    if matches!(scope.as_str(), "var" | "local") =>
                {
                    self.get(scope.as_str(), name.as_str())
                }
                _ => Json::Null,
            },
            _ => Json::Null,
        }
    }
}

fn json_file(path: &str) -> Json {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The services of docker-compose.ec2.yaml, anchors merged, as JSON.
fn compose() -> Json {
    let mut doc: serde_yaml::Value =
        serde_yaml::from_str(&read("docker-compose.ec2.yaml")).unwrap();
    doc.apply_merge().unwrap();
    serde_json::to_value(&doc["services"]).unwrap()
}

/// A `{name, value}` environment entry of an ECS container definition.
fn ecs_env(container: &Json, name: &str) -> String {
    let entries = container["environment"].as_array().expect("environment");
    let entry = entries
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name}"));
    text(&entry["value"])
}

/// The port of the URL at the end of a healthcheck command.
fn health_port(command: &Json) -> u64 {
    let command = command.as_array().expect("a healthcheck command");
    assert_eq!(
        command[1], "crawlfleet",
        "healthchecks run `crawlfleet healthcheck`"
    );
    let url = text(command.last().unwrap());
    let port = url
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .unwrap();
    port.parse().unwrap_or_else(|_| panic!("no port in {url}"))
}

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
fn scaling_bounds_and_metrics_agree_with_the_code() {
    let tf = Terraform::load();
    let scaling = json_file("ecs/autoscaling.json");
    assert_eq!(
        (
            tf.get("var", "worker_min_tasks"),
            tf.get("var", "worker_max_tasks")
        ),
        (json!(0), json!(50))
    );
    assert_eq!(scaling["registerScalableTarget"]["MinCapacity"], 0);
    assert_eq!(scaling["registerScalableTarget"]["MaxCapacity"], 50);

    let namespace = text(&tf.get("var", "cloudwatch_namespace"));
    let metric = text(&tf.get("local", "queue_metric"));
    assert_eq!(
        (namespace.as_str(), metric.as_str()),
        ("CrawlerService", "QueueWaitingJobs")
    );
    // The names the api's publisher puts are the ones Terraform watches.
    assert_eq!(metric, cloudwatch::QUEUE_WAITING_JOBS);
    assert_eq!(
        tf.get("local", "completed_metric"),
        cloudwatch::CRAWLS_COMPLETED
    );
    assert_eq!(tf.get("local", "failed_metric"), cloudwatch::CRAWLS_FAILED);
    // The code's default namespace is the one the scaling alarms watch.
    let code = code();
    assert!(
        code.contains(&format!("\"{namespace}\"")),
        "src/ never names \"{namespace}\": the api publishes there"
    );
    for step in scaling["stepScaling"].as_array().unwrap() {
        assert_eq!(step["alarm"]["Namespace"], namespace.as_str());
        assert_eq!(step["alarm"]["MetricName"], metric.as_str());
    }
    let dashboard = read("ecs/dashboard.json");
    for name in [
        metric.as_str(),
        cloudwatch::CRAWLS_COMPLETED,
        cloudwatch::CRAWLS_FAILED,
        "RunningTaskCount",
        "DesiredTaskCount",
    ] {
        assert!(
            dashboard.contains(&format!("\"{name}\"")),
            "the dashboard shows {name}"
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

#[test]
fn ports_agree_between_the_code_compose_terraform_and_the_ecs_json() {
    let tf = Terraform::load();
    let services = compose();
    let api = code_default("API_PORT");
    assert_eq!(tf.get("local", "api_port"), api);
    assert_eq!(services["api"]["ports"][0], format!("{api}:{api}"));
    assert_eq!(services["api"]["environment"]["API_PORT"], api.to_string());
    assert_eq!(health_port(&services["api"]["healthcheck"]["test"]), api);

    let scheduler = code_default("SCHEDULER_PORT");
    assert_eq!(tf.get("local", "scheduler_port"), scheduler);
    assert_eq!(
        services["scheduler"]["environment"]["SCHEDULER_PORT"],
        scheduler.to_string()
    );
    assert_eq!(
        health_port(&services["scheduler"]["healthcheck"]["test"]),
        scheduler
    );

    let base = &services["worker"];
    let base_port = text(&base["environment"]["METRICS_PORT"]);
    assert_eq!(
        health_port(&base["healthcheck"]["test"]).to_string(),
        base_port
    );

    let worker = &json_file("ecs/task-definition.json")["containerDefinitions"][0];
    let tf_worker = tf.get("local", "worker_container");
    let port = tf
        .get("var", "worker_metrics_port")
        .as_u64()
        .expect("worker_metrics_port");
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
