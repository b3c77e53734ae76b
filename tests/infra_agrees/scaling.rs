//! Application Auto Scaling: the bounds, the step policies and their alarms, and
//! the target-tracking mode, the same in Terraform and ecs/autoscaling.json, and
//! the same as the architecture; the api publishes the metric as often and at the
//! resolution the alarms need; the fleet simulator reads what is deployed.

use std::path::Path;

use crawlfleet::api::cloudwatch;
use crawlfleet_simulate::{
    infra::{self as simulated, ScalingMode},
    policy::{Adjustment, AlarmMetric, Comparison, StepPolicy},
};
use serde_json::{Value as Json, json};

use crate::sources::{
    Terraform, attr, code, code_default, first, json_file, nested, number, read, source, text,
};

#[test]
fn scaling_bounds_and_metrics_agree_with_the_code() {
    let tf = Terraform::load();
    let scaling = json_file("ecs/autoscaling.json");
    let (min, max) = (
        tf.get("var", "worker_min_tasks"),
        tf.get("var", "worker_max_tasks"),
    );
    assert_eq!((&min, &max), (&json!(0), &json!(50)));
    // The scaling target takes its bounds from the variables, so setting
    // worker_max_tasks (the runbook's cap) really caps the fleet.
    let target = tf.resource("aws_appautoscaling_target", "workers");
    assert_eq!(source(attr(target, "min_capacity")), "var.worker_min_tasks");
    assert_eq!(source(attr(target, "max_capacity")), "var.worker_max_tasks");
    assert_eq!(scaling["registerScalableTarget"]["MinCapacity"], min);
    assert_eq!(scaling["registerScalableTarget"]["MaxCapacity"], max);

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

/// The step policy of ecs/autoscaling.json named `<name>-<key>`.
fn json_step<'a>(scaling: &'a Json, tf: &Terraform, key: &str) -> &'a Json {
    let name = format!("{}-{key}", text(&tf.get("var", "name")));
    scaling["stepScaling"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["policy"]["PolicyName"] == name.as_str())
        .unwrap_or_else(|| panic!("ecs/autoscaling.json has no step policy {name}"))
}

#[test]
fn the_step_policies_are_the_architectures_in_terraform_and_the_ecs_json() {
    let tf = Terraform::load();
    let policies = tf.get("local", "step_policies");
    // (key, comparison, threshold, alarm periods, adjustment type, adjustment, cooldown):
    // on 10 s periods, a task for a trickle and the whole fleet for a burst
    // (`crawlfleet simulate`, BENCHMARKS.md).
    let architecture = [
        (
            "scale-out-small",
            "GreaterThanThreshold",
            20,
            1,
            "ChangeInCapacity",
            1,
            60,
        ),
        (
            "scale-out-large",
            "GreaterThanThreshold",
            200,
            1,
            "ChangeInCapacity",
            50,
            30,
        ),
        (
            "scale-in",
            "LessThanThreshold",
            10,
            1,
            "ChangeInCapacity",
            -1,
            300,
        ),
        (
            "scale-to-zero",
            "LessThanOrEqualToThreshold",
            0,
            3,
            "ExactCapacity",
            0,
            300,
        ),
    ];
    assert_eq!(policies.as_object().unwrap().len(), architecture.len());
    let scaling = json_file("ecs/autoscaling.json");
    assert_eq!(
        scaling["stepScaling"].as_array().unwrap().len(),
        architecture.len()
    );

    // What every step policy and alarm shares, written once in Terraform.
    let tf_policy = first(
        tf.resource("aws_appautoscaling_policy", "step"),
        "step_scaling_policy_configuration",
    );
    let tf_alarm = tf.resource("aws_cloudwatch_metric_alarm", "step");

    for (key, comparison, threshold, periods, adjustment_type, adjustment, cooldown) in architecture
    {
        let p = &policies[key];
        assert_eq!(
            (
                text(&p["comparison"]),
                number(&p["threshold"]),
                number(&p["periods"]),
                text(&p["adjustment_type"]),
                number(&p["adjustment"]),
                number(&p["cooldown"]),
            ),
            (
                comparison.to_owned(),
                f64::from(threshold),
                f64::from(periods),
                adjustment_type.to_owned(),
                f64::from(adjustment),
                f64::from(cooldown),
            ),
            "{key}: Terraform is not the architecture's policy"
        );

        let step = json_step(&scaling, &tf, key);
        let (policy, alarm) = (
            &step["policy"]["StepScalingPolicyConfiguration"],
            &step["alarm"],
        );
        assert_eq!(alarm["ComparisonOperator"], comparison, "{key}");
        assert_eq!(number(&alarm["Threshold"]), f64::from(threshold), "{key}");
        assert_eq!(
            number(&alarm["EvaluationPeriods"]),
            f64::from(periods),
            "{key}"
        );
        assert_eq!(policy["AdjustmentType"], adjustment_type, "{key}");
        assert_eq!(number(&policy["Cooldown"]), f64::from(cooldown), "{key}");
        let adjustments = policy["StepAdjustments"].as_array().unwrap();
        assert_eq!(adjustments.len(), 1, "{key}: one step, as in Terraform");
        let only = &adjustments[0];
        assert_eq!(
            number(&only["ScalingAdjustment"]),
            f64::from(adjustment),
            "{key}"
        );
        // Terraform's step covers the whole breaching side of the threshold: above
        // it for Greater*, below it otherwise.
        let (bound, other) = if comparison.starts_with("Greater") {
            ("MetricIntervalLowerBound", "MetricIntervalUpperBound")
        } else {
            ("MetricIntervalUpperBound", "MetricIntervalLowerBound")
        };
        assert_eq!(number(&only[bound]), 0.0, "{key}: {bound}");
        assert!(only.get(other).is_none(), "{key}: no {other}");

        assert_eq!(
            policy["MetricAggregationType"],
            tf.eval(attr(tf_policy, "metric_aggregation_type")),
            "{key}"
        );
        for (json_key, tf_key) in [
            ("Statistic", "statistic"),
            ("Period", "period"),
            ("TreatMissingData", "treat_missing_data"),
        ] {
            assert_eq!(
                alarm[json_key],
                tf.eval(attr(tf_alarm, tf_key)),
                "{key}: {json_key}"
            );
        }
    }
    // The large step takes the fleet to its cap at once.
    assert_eq!(
        number(&policies["scale-out-large"]["adjustment"]),
        number(&tf.get("var", "worker_max_tasks"))
    );
    // docs/deploy.md's AWS CLI path puts every step policy, not a count it remembers.
    let indices: Vec<String> = (0..architecture.len()).map(|i| i.to_string()).collect();
    let step_loop = format!("for i in {}; do", indices.join(" "));
    assert!(
        read("docs/deploy.md").contains(&step_loop),
        "docs/deploy.md: {step_loop}"
    );
}

#[test]
fn the_api_publishes_the_backlog_as_often_and_as_finely_as_the_step_alarms_read_it() {
    let tf = Terraform::load();
    // Step mode (the default): high-resolution alarms, 10 s periods.
    assert_eq!(tf.get("var", "scaling_mode"), "step");
    let period = number(&tf.eval(attr(
        tf.resource("aws_cloudwatch_metric_alarm", "step"),
        "period",
    )));
    assert_eq!(period, 10.0);
    // An alarm under 60 s needs a metric stored at 1 s resolution...
    assert_eq!(cloudwatch::QUEUE_WAITING_JOBS_RESOLUTION_SECS, 1);
    // ...and a datapoint in every period: missing data does not breach, so a
    // period without a put would scale nothing.
    let interval = code_default("METRIC_INTERVAL_SECS") as f64;
    assert!(
        interval <= period,
        "the api puts every {interval} s, the step alarms read {period} s periods"
    );
    assert!(
        read(".env.example").contains(&format!("\nMETRIC_INTERVAL_SECS={interval}\n")),
        ".env.example shows METRIC_INTERVAL_SECS={interval}"
    );
    // Nothing sets another interval on the host.
    assert!(!read("docker-compose.ec2.yaml").contains("METRIC_INTERVAL_SECS"));
}

#[test]
fn target_tracking_is_the_same_in_terraform_and_the_ecs_json() {
    let tf = Terraform::load();
    let scaling = json_file("ecs/autoscaling.json");

    let tf_config = first(
        tf.resource("aws_appautoscaling_policy", "backlog_per_task"),
        "target_tracking_scaling_policy_configuration",
    );
    let config = &scaling["targetTracking"]["TargetTrackingScalingPolicyConfiguration"];
    assert_eq!(
        source(attr(tf_config, "target_value")),
        "var.backlog_per_task_target"
    );
    assert_eq!(
        number(&config["TargetValue"]),
        number(&tf.get("var", "backlog_per_task_target"))
    );
    for (json_key, tf_key) in [
        ("ScaleOutCooldown", "scale_out_cooldown"),
        ("ScaleInCooldown", "scale_in_cooldown"),
    ] {
        assert_eq!(
            config[json_key],
            tf.eval(attr(tf_config, tf_key)),
            "{json_key}"
        );
    }

    // The same metric math: backlog / tasks, from the same statistics.
    let tf_metrics: Vec<(Json, Json, Json)> = nested(
        first(tf_config, "customized_metric_specification"),
        "metrics",
    )
    .map(|m| {
        let stat = nested(m, "metric_stat")
            .next()
            .map_or(Json::Null, |s| tf.eval(attr(s, "stat")));
        let expression = m
            .attributes()
            .find(|a| a.key() == "expression")
            .map_or(Json::Null, |a| tf.eval(a.expr()));
        (tf.eval(attr(m, "id")), stat, expression)
    })
    .collect();
    let json_metrics: Vec<(Json, Json, Json)> = config["CustomizedMetricSpecification"]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let expression = m.get("Expression").cloned().unwrap_or(Json::Null);
            (m["Id"].clone(), m["MetricStat"]["Stat"].clone(), expression)
        })
        .collect();
    assert_eq!(json_metrics, tf_metrics);
    assert!(
        tf_metrics
            .iter()
            .any(|(_, _, e)| *e == json!("backlog / tasks")),
        "backlog per running task"
    );

    // Target tracking cannot leave zero tasks: the step policy that does.
    let tf_from_zero = first(
        tf.resource("aws_appautoscaling_policy", "from_zero"),
        "step_scaling_policy_configuration",
    );
    let from_zero = &scaling["scaleFromZero"];
    let policy = &from_zero["policy"]["StepScalingPolicyConfiguration"];
    assert_eq!(policy["Cooldown"], tf.eval(attr(tf_from_zero, "cooldown")));
    assert_eq!(
        policy["StepAdjustments"][0]["ScalingAdjustment"],
        tf.eval(attr(
            first(tf_from_zero, "step_adjustment"),
            "scaling_adjustment"
        ))
    );
    let tf_alarm = tf.resource("aws_cloudwatch_metric_alarm", "from_zero");
    assert_eq!(
        number(&from_zero["alarm"]["Threshold"]),
        number(&tf.eval(attr(tf_alarm, "threshold")))
    );
    assert_eq!(
        from_zero["alarm"]["ComparisonOperator"],
        tf.eval(attr(tf_alarm, "comparison_operator"))
    );
    let starved = nested(tf_alarm, "metric_query")
        .find(|q| tf.eval(attr(q, "id")) == "starved")
        .expect("the starved query");
    let json_starved = from_zero["alarm"]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Id"] == "starved")
        .expect("the starved metric");
    assert_eq!(
        json_starved["Expression"],
        tf.eval(attr(starved, "expression"))
    );
}

#[test]
fn the_redis_memory_alarm_watches_what_the_api_publishes() {
    let tf = Terraform::load();
    assert_eq!(
        tf.get("local", "redis_memory_metric"),
        cloudwatch::REDIS_MEMORY_USAGE_PERCENT
    );
    // Host datastores: the api's metric, in the api's namespace.
    let alarm = tf.resource("aws_cloudwatch_metric_alarm", "redis_memory_host");
    assert_eq!(
        source(attr(alarm, "metric_name")),
        "local.redis_memory_metric"
    );
    assert_eq!(source(attr(alarm, "namespace")), "var.cloudwatch_namespace");
    assert_eq!(
        tf.get("var", "redis_memory_alarm_percent"),
        json!(80),
        "the architecture: 80 % of maxmemory"
    );
}

/// A step policy of ecs/autoscaling.json (`{"policy", "alarm"}`) as the
/// simulator models one.
fn json_step_policy(entry: &Json) -> (Comparison, f64, u32, Adjustment, f64) {
    let (policy, alarm) = (
        &entry["policy"]["StepScalingPolicyConfiguration"],
        &entry["alarm"],
    );
    let value = number(&policy["StepAdjustments"][0]["ScalingAdjustment"]);
    let adjustment = match policy["AdjustmentType"].as_str().unwrap() {
        "ChangeInCapacity" => Adjustment::Change(value as i64),
        "ExactCapacity" => Adjustment::Exact(value as u32),
        other => panic!("adjustment type {other}"),
    };
    (
        Comparison::parse(alarm["ComparisonOperator"].as_str().unwrap()).unwrap(),
        number(&alarm["Threshold"]),
        number(&alarm["EvaluationPeriods"]) as u32,
        adjustment,
        number(&policy["Cooldown"]),
    )
}

fn modelled(step: &StepPolicy) -> (Comparison, f64, u32, Adjustment, f64) {
    (
        step.comparison,
        step.threshold,
        step.periods,
        step.adjustment,
        step.cooldown_secs,
    )
}

/// `crawlfleet simulate` reads infra/ with its own HCL evaluator, in each
/// mode: it must see the policies and periods both deployment paths create.
#[test]
fn the_simulator_reads_the_policies_and_periods_that_are_deployed() {
    let infra = simulated::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("infra"), None)
        .expect("the simulator reads infra/");
    let scaling = json_file("ecs/autoscaling.json");
    let period = |entry: &Json| number(&entry["alarm"]["Period"]);

    // Step mode: stepScaling, in order.
    let json_steps = scaling["stepScaling"].as_array().unwrap();
    assert_eq!(infra.step.steps.len(), json_steps.len());
    for (step, entry) in infra.step.steps.iter().zip(json_steps) {
        assert_eq!(step.metric, AlarmMetric::Backlog, "{}", step.name);
        assert_eq!(modelled(step), json_step_policy(entry), "{}", step.name);
        assert_eq!(period(entry), infra.period_secs(ScalingMode::Step));
    }
    assert_eq!(infra.period_secs(ScalingMode::Step), 10.0);

    // Target tracking: the from-zero and scale-to-zero steps, then tracking.
    let tracking = &infra.target_tracking;
    let tracking_period = infra.period_secs(ScalingMode::TargetTracking);
    assert_eq!(
        tracking_period, 60.0,
        "AWS's target-tracking alarms: 1 minute"
    );
    let names: Vec<&str> = tracking.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["scale-from-zero", "scale-to-zero"]);
    let to_zero = &scaling["targetTrackingScaleToZero"];
    assert_eq!(modelled(&tracking.steps[1]), json_step_policy(to_zero));
    assert_eq!(period(to_zero), tracking_period);
    assert_eq!(
        to_zero["policy"]["PolicyName"],
        json_step(&scaling, &Terraform::load(), "scale-to-zero")["policy"]["PolicyName"],
        "one scale-to-zero policy, in either mode"
    );
    let from_zero = &scaling["scaleFromZero"];
    let (_, threshold, periods, adjustment, cooldown) = json_step_policy(from_zero);
    let modelled_from_zero = &tracking.steps[0];
    assert_eq!(modelled_from_zero.metric, AlarmMetric::Starved);
    assert_eq!(
        (threshold, periods, adjustment, cooldown),
        (
            modelled_from_zero.threshold,
            modelled_from_zero.periods,
            modelled_from_zero.adjustment,
            modelled_from_zero.cooldown_secs
        )
    );
    for metric in from_zero["alarm"]["Metrics"].as_array().unwrap() {
        if let Some(stat) = metric.get("MetricStat") {
            assert_eq!(number(&stat["Period"]), tracking_period, "{metric}");
        }
    }
    let target = &scaling["targetTracking"]["TargetTrackingScalingPolicyConfiguration"];
    let modelled_tracking = tracking.tracking.as_ref().unwrap();
    assert_eq!(number(&target["TargetValue"]), modelled_tracking.target);
    assert_eq!(
        number(&target["ScaleOutCooldown"]),
        modelled_tracking.scale_out_cooldown_secs
    );
    assert_eq!(
        number(&target["ScaleInCooldown"]),
        modelled_tracking.scale_in_cooldown_secs
    );

    // The bounds.
    let target = &scaling["registerScalableTarget"];
    for mode in [&infra.step, tracking] {
        assert_eq!(
            (f64::from(mode.min_tasks), f64::from(mode.max_tasks)),
            (
                number(&target["MinCapacity"]),
                number(&target["MaxCapacity"])
            )
        );
    }
}
