//! Alarms watch metrics that exist and reach the alarm topic: every CloudWatch
//! alarm names a metric the code, the host (its CloudWatch agent and its backup
//! script) or AWS really publishes, with the dimensions it publishes; every event
//! rule feeding the topic may publish to it; and the host restarts the containers
//! whose healthcheck fails.

use std::collections::BTreeSet;

use crawlfleet::api::cloudwatch;
use hcl::{Body, Expression};
use serde_json::Value as Json;

use crate::sources::{Terraform, attr, compose, nested, read, source, text};

const USER_DATA: &str = "infra/templates/user_data.sh.tftpl";

/// What AWS services publish by themselves, by namespace: the metrics of their
/// CloudWatch documentation ("metrics" pages of EC2, RDS, ElastiCache, NAT gateways,
/// EventBridge, Application Load Balancers and Container Insights) that alarms here
/// name. A name not in its service's page is a typo or an invention.
const AWS_METRICS: &[(&str, &[&str])] = &[
    (
        "AWS/EC2",
        &[
            "CPUUtilization",
            "StatusCheckFailed",
            "StatusCheckFailed_System",
            "StatusCheckFailed_Instance",
        ],
    ),
    // With the group's metrics collection enabled (enabled_metrics).
    ("AWS/AutoScaling", &["GroupInServiceInstances"]),
    (
        "AWS/RDS",
        &["CPUUtilization", "FreeStorageSpace", "DatabaseConnections"],
    ),
    (
        "AWS/ElastiCache",
        &["DatabaseMemoryUsagePercentage", "Evictions"],
    ),
    ("AWS/NATGateway", &["ErrorPortAllocation"]),
    ("AWS/Events", &["MatchedEvents"]),
    ("AWS/ApplicationELB", &["HealthyHostCount"]),
    (
        "ECS/ContainerInsights",
        &["RunningTaskCount", "DesiredTaskCount"],
    ),
];

/// One metric an alarm watches: its namespace, name and dimension names.
#[derive(Debug)]
struct Watched {
    alarm: String,
    namespace: String,
    metric: String,
    dimensions: BTreeSet<String>,
}

/// The values `each.value` takes in a `for_each` resource: of both branches when
/// the map depends on a variable (`local.host_datastore ? {} : local.db_alarms`).
fn each_values(tf: &Terraform, alarm: &Body) -> Vec<Json> {
    let Some(for_each) = alarm.attributes().find(|a| a.key() == "for_each") else {
        return Vec::new();
    };
    let branches = match for_each.expr() {
        Expression::Conditional(c) => vec![tf.eval(&c.true_expr), tf.eval(&c.false_expr)],
        other => vec![tf.eval(other)],
    };
    branches
        .iter()
        .filter_map(Json::as_object)
        .flat_map(|map| map.values().cloned())
        .collect()
}

/// An alarm's attribute as text, once per `each.value` it may take; a template
/// (`"${var.name}/host"`) as written.
fn values(tf: &Terraform, alarm: &Body, expr: &Expression) -> Vec<String> {
    let written = source(expr);
    if let Some(field) = written.strip_prefix("each.value.") {
        let values = each_values(tf, alarm);
        assert!(!values.is_empty(), "{written}: no for_each values");
        return values.iter().map(|v| text(&v[field])).collect();
    }
    match tf.eval(expr) {
        Json::Null => vec![written],
        value => vec![text(&value)],
    }
}

fn dimension_names(tf: &Terraform, body: &Body) -> BTreeSet<String> {
    body.attributes()
        .find(|a| a.key() == "dimensions")
        .map(|a| match a.expr() {
            Expression::Object(fields) => fields.keys().map(|k| k.to_string()).collect(),
            other => tf
                .eval(other)
                .as_object()
                .unwrap_or_else(|| panic!("dimensions: an object, not {}", source(other)))
                .keys()
                .cloned()
                .collect(),
        })
        .unwrap_or_default()
}

/// Every metric of every `aws_cloudwatch_metric_alarm`: its own, or those of its
/// `metric_query` blocks.
fn watched(tf: &Terraform) -> Vec<Watched> {
    let mut out = Vec::new();
    for alarm in tf.all("resource", "aws_cloudwatch_metric_alarm") {
        let name = source(attr(alarm, "alarm_name"));
        let mut metrics: Vec<&Body> = nested(alarm, "metric_query")
            .flat_map(|q| nested(q, "metric"))
            .collect();
        if alarm.attributes().any(|a| a.key() == "metric_name") {
            metrics.push(alarm);
        }
        assert!(!metrics.is_empty(), "{name} watches no metric");
        for metric in metrics {
            let namespaces = values(tf, alarm, attr(metric, "namespace"));
            let names = values(tf, alarm, attr(metric, "metric_name"));
            for (namespace, metric_name) in namespaces.iter().cycle().zip(names) {
                out.push(Watched {
                    alarm: name.clone(),
                    namespace: namespace.clone(),
                    metric: metric_name,
                    dimensions: dimension_names(tf, metric),
                });
            }
        }
    }
    out
}

/// The host's CloudWatch agent configuration (ec2.tf), as the agent reads it.
fn agent_config(tf: &Terraform) -> Json {
    tf.get("local", "cloudwatch_agent_config")
}

/// The metrics the agent publishes for its configuration: `<plugin>_<measurement>`
/// (mem's measurements carry the prefix already), procstat's `pid_count` as
/// `procstat_lookup_pid_count` (its lookup, published even when nothing matches).
fn agent_metrics(config: &Json) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let collected = config["metrics"]["metrics_collected"]
        .as_object()
        .expect("metrics_collected");
    for (plugin, settings) in collected {
        let sections = match settings {
            Json::Array(list) => list.clone(),
            single => vec![single.clone()],
        };
        for measurement in sections.iter().flat_map(|s| {
            s["measurement"]
                .as_array()
                .expect("measurement")
                .iter()
                .map(text)
        }) {
            names.insert(match (plugin.as_str(), measurement.as_str()) {
                ("procstat", "pid_count") => "procstat_lookup_pid_count".to_owned(),
                (_, m) if m.starts_with(&format!("{plugin}_")) => m.to_owned(),
                (_, m) => format!("{plugin}_{m}"),
            });
        }
    }
    names
}

/// The metrics the host's scripts put (`--metric-name NAME` in the user data).
fn host_script_metrics() -> BTreeSet<String> {
    read(USER_DATA)
        .split("--metric-name ")
        .skip(1)
        .map(|rest| rest.split_whitespace().next().unwrap().to_owned())
        .collect()
}

#[test]
fn every_alarm_watches_a_metric_that_someone_publishes() {
    let tf = Terraform::load();
    let config = agent_config(&tf);
    let agent_namespace = text(&config["metrics"]["namespace"]);
    let agent = agent_metrics(&config);
    // The agent's own names, checked once so the rule above is not a guess.
    for expected in [
        "mem_used_percent",
        "disk_used_percent",
        "procstat_memory_rss",
        "procstat_lookup_pid_count",
    ] {
        assert!(agent.contains(expected), "the agent publishes {expected}");
    }
    let code_namespace = text(&tf.get("var", "cloudwatch_namespace"));
    let code = [
        cloudwatch::QUEUE_WAITING_JOBS,
        cloudwatch::CRAWLS_COMPLETED,
        cloudwatch::CRAWLS_FAILED,
        cloudwatch::REDIS_MEMORY_USAGE_PERCENT,
        crawlfleet::scheduler::SCHEDULER_HEARTBEAT,
    ];
    let host_namespace = text(&tf.get("local", "host_metric_namespace"));
    let host = host_script_metrics();
    assert!(host.contains("PgDumpBytes"), "the backup puts PgDumpBytes");

    let watched = watched(&tf);
    assert!(
        watched.len() >= 20,
        "only {} watched metrics",
        watched.len()
    );
    for w in &watched {
        let known = if w.namespace == code_namespace {
            code.contains(&w.metric.as_str())
        } else if w.namespace == agent_namespace {
            agent.contains(&w.metric)
        } else if w.namespace == host_namespace {
            host.contains(&w.metric)
        } else {
            AWS_METRICS
                .iter()
                .find(|(namespace, _)| *namespace == w.namespace)
                .is_some_and(|(_, metrics)| metrics.contains(&w.metric.as_str()))
        };
        assert!(
            known,
            "alarm {} watches {}/{}, which nobody publishes",
            w.alarm, w.namespace, w.metric
        );
    }
}

#[test]
fn the_host_alarms_name_the_dimensions_the_agent_publishes() {
    let tf = Terraform::load();
    let config = agent_config(&tf);
    let agent_namespace = text(&config["metrics"]["namespace"]);
    // Each metric goes out with all its dimensions (a disk's device, which no
    // alarm can know) and aggregated to each of these sets: what an alarm may name.
    let aggregated: Vec<BTreeSet<String>> = config["metrics"]["aggregation_dimensions"]
        .as_array()
        .expect("aggregation_dimensions")
        .iter()
        .map(|set| set.as_array().unwrap().iter().map(text).collect())
        .collect();
    let on_the_agent: Vec<Watched> = watched(&tf)
        .into_iter()
        .filter(|w| w.namespace == agent_namespace)
        .collect();
    let alarmed: BTreeSet<&str> = on_the_agent.iter().map(|w| w.metric.as_str()).collect();
    assert_eq!(
        alarmed,
        BTreeSet::from([
            "disk_used_percent",
            "mem_used_percent",
            "procstat_lookup_pid_count"
        ])
    );
    for w in &on_the_agent {
        assert!(
            aggregated.contains(&w.dimensions),
            "alarm {} names dimensions {:?}; the agent aggregates to {aggregated:?}",
            w.alarm,
            w.dimensions
        );
    }

    // The scheduler's process is the one the compose file starts.
    let pattern = text(&tf.get("local", "scheduler_process_pattern"));
    let procstat = config["metrics"]["metrics_collected"]["procstat"]
        .as_array()
        .expect("procstat sections");
    assert!(
        procstat
            .iter()
            .any(|p| p["pattern"] == pattern.as_str() && p["measurement"][0] == "pid_count"),
        "the agent counts the processes of {pattern}"
    );
    let scheduler = compose()["scheduler"]["command"].clone();
    assert!(
        scheduler
            .as_array()
            .unwrap()
            .iter()
            .any(|arg| *arg == pattern.as_str()),
        "the compose file starts the scheduler with {pattern}: {scheduler}"
    );
    let alarm = tf.resource("aws_cloudwatch_metric_alarm", "scheduler_down");
    let dimensions = source(attr(alarm, "dimensions"));
    let dimensions: Vec<&str> = dimensions.split_whitespace().collect();
    assert_eq!(
        dimensions.join(" "),
        "{ AutoScalingGroupName = aws_autoscaling_group.host.name pattern = local.scheduler_process_pattern }"
    );
    // No process and no data (agent or host down) alike are an alarm.
    assert_eq!(tf.eval(attr(alarm, "treat_missing_data")), "breaching");
}

/// A scheduler whose process lives but whose loop hangs puts no heartbeat: its
/// alarm watches the metric the scheduler's leader puts, in the code's
/// namespace, and no heartbeat at all (missing data) alarms too.
#[test]
fn the_scheduler_heartbeat_alarm_watches_what_the_leader_puts() {
    let tf = Terraform::load();
    let alarm = tf.resource("aws_cloudwatch_metric_alarm", "scheduler_heartbeat");
    assert_eq!(source(attr(alarm, "namespace")), "var.cloudwatch_namespace");
    assert_eq!(
        tf.eval(attr(alarm, "metric_name")),
        crawlfleet::scheduler::SCHEDULER_HEARTBEAT
    );
    assert_eq!(tf.eval(attr(alarm, "treat_missing_data")), "breaching");
    assert_eq!(
        tf.eval(attr(alarm, "comparison_operator")),
        "LessThanThreshold"
    );
    assert_eq!(tf.eval(attr(alarm, "period")), 60);
    // The scheduler on the host puts it: the compose file turns it on.
    let scheduler = &compose()["scheduler"];
    assert_eq!(
        text(&scheduler["environment"]["SCHEDULER_HEARTBEAT_ENABLED"]),
        "true"
    );
}

#[test]
fn every_alarm_and_event_rule_for_people_reaches_the_topic() {
    let tf = Terraform::load();
    // Scaling alarms act on their policies (autoscaling.tf); every other tells people.
    let scaling = ["step", "from_zero"];
    let topic = ["local.alarm_topic", "aws_sns_topic.alarms.arn"];
    let scaling_alarms: Vec<String> = scaling
        .iter()
        .map(|name| {
            source(attr(
                tf.resource("aws_cloudwatch_metric_alarm", name),
                "alarm_name",
            ))
        })
        .collect();
    for alarm in tf.all("resource", "aws_cloudwatch_metric_alarm") {
        let name = source(attr(alarm, "alarm_name"));
        if scaling_alarms.contains(&name) {
            continue;
        }
        let actions = source(attr(alarm, "alarm_actions"));
        assert!(
            topic.iter().any(|t| actions.contains(t)),
            "alarm {name} reaches nobody: alarm_actions = {actions}"
        );
    }

    // The topic lets EventBridge publish for exactly the rules that target it.
    let policy = tf.data("aws_iam_policy_document", "alarm_topic");
    let events = nested(policy, "statement")
        .find(|s| tf.eval(attr(s, "sid")) == "EventBridgePublishesTaskFailures")
        .expect("the topic's EventBridge statement");
    let allowed = source(attr(nested(events, "condition").next().unwrap(), "values"));
    let mut rules = 0;
    for target in tf.all("resource", "aws_cloudwatch_event_target") {
        assert_eq!(source(attr(target, "arn")), "aws_sns_topic.alarms.arn");
        let rule = source(attr(target, "rule"));
        let arn = rule.replace(".name", ".arn");
        assert!(
            allowed.contains(&arn),
            "{rule} targets the topic, which does not let it publish: {allowed}"
        );
        rules += 1;
    }
    assert!(
        rules >= 2,
        "the tasks that fail to start, the workers that crash"
    );

    // Recipients: none only when waived in so many words.
    let recipients = tf.expr("var", "alarm_email");
    assert_eq!(text(&tf.eval(recipients)), "");
    let variables = read("infra/variables.tf");
    assert!(variables.contains(
        "condition     = var.alarm_email == \"\" ? var.alarms_without_recipients : can(regex("
    ));
}

#[test]
fn the_host_restarts_the_containers_whose_healthcheck_fails() {
    let services = compose();
    for name in ["api", "scheduler", "worker"] {
        let service = &services[name];
        assert!(
            service["healthcheck"]["test"].is_array(),
            "{name} has a healthcheck"
        );
        assert_eq!(
            service["labels"]["crawlfleet.autoheal"], "true",
            "{name} is restarted when unhealthy"
        );
    }
    assert_eq!(
        services["migrate"]["labels"]["crawlfleet.autoheal"],
        "false"
    );
    let user_data = read(USER_DATA);
    assert!(
        user_data.contains(
            "docker ps --filter health=unhealthy --filter label=crawlfleet.autoheal=true"
        )
    );
    assert!(user_data.contains("systemctl enable --now crawlfleet-autoheal.timer"));
}
