use std::path::PathBuf;

use super::*;

fn infra_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../infra")
}

fn infra_file(name: &str) -> String {
    std::fs::read_to_string(infra_dir().join(name)).unwrap()
}

/// autoscaling.tf with `from` replaced by `to` (which must be there).
fn changed(from: &str, to: &str) -> String {
    let text = infra_file("autoscaling.tf");
    assert!(text.contains(from), "autoscaling.tf no longer has {from:?}");
    text.replacen(from, to, 1)
}

fn parse_changed(from: &str, to: &str) -> anyhow::Result<InfraScaling> {
    parse(&changed(from, to), &infra_file("variables.tf"), None)
}

#[test]
fn infra_is_read_as_the_architecture_describes_it() {
    let infra = read(&infra_dir(), None).unwrap();
    assert_eq!(infra.region, "ap-northeast-2");
    assert_eq!(infra.deployed_mode, ScalingMode::Step);
    assert_eq!((infra.step.min_tasks, infra.step.max_tasks), (0, 50));
    assert_eq!(infra.slots_per_task, 4);
    assert_eq!((infra.task_vcpu, infra.task_gb), (1.0, 2.0));
    // High-resolution alarms in step mode; AWS's 1-minute ones in target tracking.
    assert_eq!(infra.period_secs(ScalingMode::Step), 10.0);
    assert_eq!(infra.period_secs(ScalingMode::TargetTracking), 60.0);
    let steps: Vec<_> = infra
        .step
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.comparison,
                s.threshold,
                s.periods,
                s.adjustment,
                s.cooldown_secs,
            )
        })
        .collect();
    use Comparison::*;
    assert_eq!(
        steps,
        vec![
            (
                "scale-out-small",
                GreaterThan,
                20.0,
                1,
                Adjustment::Change(1),
                60.0
            ),
            (
                "scale-out-large",
                GreaterThan,
                200.0,
                1,
                Adjustment::Change(50),
                30.0
            ),
            ("scale-in", LessThan, 10.0, 1, Adjustment::Change(-1), 300.0),
            (
                "scale-to-zero",
                LessThanOrEqualTo,
                0.0,
                3,
                Adjustment::Exact(0),
                300.0
            ),
        ]
    );
    assert!(infra.step.tracking.is_none());

    let tracking = &infra.target_tracking;
    assert_eq!(
        tracking.tracking,
        Some(TargetTracking {
            target: 8.0,
            scale_out_cooldown_secs: 60.0,
            scale_in_cooldown_secs: 300.0,
        })
    );
    let names: Vec<_> = tracking.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["scale-from-zero", "scale-to-zero"]);
    // Ten empty minutes before scaling to zero, as before step mode's 10 s alarms.
    assert_eq!(tracking.steps[1].periods, 10);
    let from_zero = &tracking.steps[0];
    assert_eq!(from_zero.metric, AlarmMetric::Starved);
    assert_eq!(
        (from_zero.comparison, from_zero.threshold, from_zero.periods),
        (GreaterThanOrEqualTo, 1.0, 1)
    );
    assert_eq!(
        (from_zero.adjustment, from_zero.cooldown_secs),
        (Adjustment::Change(1), 60.0)
    );
}

#[test]
fn a_tfvars_file_overrides_the_defaults() {
    let infra = parse(
        &infra_file("autoscaling.tf"),
        &infra_file("variables.tf"),
        Some("scaling_mode = \"target_tracking\"\nbacklog_per_task_target = 16\nworker_max_tasks = 20\nregion = \"us-east-1\"\n"),
    )
    .unwrap();
    assert_eq!(infra.deployed_mode, ScalingMode::TargetTracking);
    assert_eq!(
        infra.target_tracking.tracking.as_ref().unwrap().target,
        16.0
    );
    assert_eq!(infra.step.max_tasks, 20);
    assert_eq!(infra.region, "us-east-1");
}

#[test]
fn a_changed_threshold_is_read() {
    let infra = parse_changed("threshold = 20,", "threshold = 100,").unwrap();
    assert_eq!(infra.step.steps[0].threshold, 100.0);
}

#[test]
fn a_changed_period_is_read() {
    let infra = parse_changed(
        "step_alarm_period = local.step_mode ? 10 : 60",
        "step_alarm_period = local.step_mode ? 30 : 60",
    )
    .unwrap();
    assert_eq!(infra.period_secs(ScalingMode::Step), 30.0);
    assert_eq!(infra.period_secs(ScalingMode::TargetTracking), 60.0);
}

#[test]
fn what_the_simulator_does_not_model_is_an_error_naming_it() {
    let cases = [
        // A setting of a step policy it would ignore.
        (
            "cooldown = 30, enabled",
            "cooldown = 30, warmup = 60, enabled",
            "warmup",
        ),
        // An alarm that no longer takes its periods from the policy.
        (
            "evaluation_periods  = each.value.periods",
            "evaluation_periods  = 3",
            "evaluation_periods",
        ),
        // M out of N datapoints.
        (
            "treat_missing_data = \"notBreaching\"\n  alarm_actions",
            "treat_missing_data = \"notBreaching\"\n  datapoints_to_alarm = 2\n  alarm_actions",
            "datapoints_to_alarm",
        ),
        // Missing data treated otherwise.
        (
            "treat_missing_data = \"notBreaching\"\n  alarm_actions",
            "treat_missing_data = \"breaching\"\n  alarm_actions",
            "treat_missing_data",
        ),
        // An adjustment type it cannot apply.
        (
            "adjustment_type = \"ChangeInCapacity\", adjustment = 50",
            "adjustment_type = \"PercentChangeInCapacity\", adjustment = 50",
            "PercentChangeInCapacity",
        ),
        // A period CloudWatch refuses.
        (
            "step_alarm_period = local.step_mode ? 10 : 60",
            "step_alarm_period = local.step_mode ? 15 : 60",
            "CloudWatch allows",
        ),
        // Target tracking beside step alarms of another period than its own.
        (
            "step_alarm_period = local.step_mode ? 10 : 60",
            "step_alarm_period = 10",
            "target_tracking mode",
        ),
        // A from-zero alarm on other periods than the mode's other alarms.
        (
            "stat        = \"Maximum\"\n      period      = 60",
            "stat        = \"Maximum\"\n      period      = 10",
            "from-zero alarm",
        ),
        // Another target-tracking metric.
        (
            "expression  = \"backlog / tasks\"",
            "expression  = \"backlog / (tasks + 1)\"",
            "backlog / tasks",
        ),
    ];
    for (from, to, named) in cases {
        let err = format!("{:#}", parse_changed(from, to).unwrap_err());
        assert!(err.contains(named), "{to:?}: {err}");
    }
    let extra = format!(
        "{}\nresource \"aws_appautoscaling_scheduled_action\" \"night\" {{\n  name = \"x\"\n}}\n",
        infra_file("autoscaling.tf")
    );
    let err = format!(
        "{:#}",
        parse(&extra, &infra_file("variables.tf"), None).unwrap_err()
    );
    assert!(err.contains("aws_appautoscaling_scheduled_action"), "{err}");
    assert!(parse("resource {", &infra_file("variables.tf"), None).is_err());
}
