//! The scaling policies as infra/ deploys them: autoscaling.tf read with an
//! HCL parser and evaluator (hcl-rs), variables.tf's defaults, and a
//! terraform.tfvars over them. Strict: a block, a policy setting or an
//! expression this reader does not model is an error naming it, so a change to
//! autoscaling.tf cannot be silently simulated as something else.

use std::{collections::BTreeSet, path::Path};

use anyhow::{Context as _, anyhow, bail, ensure};
use hcl::eval::{Context, Evaluate};
use hcl::{Body, Expression, Map, Value};

use super::policy::{Adjustment, AlarmMetric, AutoScaling, Comparison, StepPolicy, TargetTracking};

/// The two modes `var.scaling_mode` chooses between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalingMode {
    Step,
    TargetTracking,
}

impl ScalingMode {
    pub fn name(self) -> &'static str {
        match self {
            ScalingMode::Step => "step",
            ScalingMode::TargetTracking => "target_tracking",
        }
    }
}

/// What the simulator takes from infra/.
#[derive(Debug, Clone, PartialEq)]
pub struct InfraScaling {
    pub region: String,
    /// The mode infra/ deploys (var.scaling_mode).
    pub deployed_mode: ScalingMode,
    /// The policies of each mode.
    pub step: AutoScaling,
    pub target_tracking: AutoScaling,
    /// WORKER_CONCURRENCY of a Fargate task.
    pub slots_per_task: u32,
    pub task_vcpu: f64,
    pub task_gb: f64,
    /// The step alarms' period in step mode, seconds (10: high-resolution alarms).
    pub step_period_secs: f64,
    /// The alarms' period in target-tracking mode, seconds: its step alarms',
    /// its from-zero alarm's and (AWS's own) its tracking alarms'.
    pub target_tracking_period_secs: f64,
}

impl InfraScaling {
    pub fn policy(&self, mode: ScalingMode) -> &AutoScaling {
        match mode {
            ScalingMode::Step => &self.step,
            ScalingMode::TargetTracking => &self.target_tracking,
        }
    }

    /// The period of the alarms of `mode`, seconds.
    pub fn period_secs(&self, mode: ScalingMode) -> f64 {
        match mode {
            ScalingMode::Step => self.step_period_secs,
            ScalingMode::TargetTracking => self.target_tracking_period_secs,
        }
    }
}

/// The period of the alarms AWS creates for target tracking (1-minute
/// metrics): the simulator's target-tracking model counts datapoints of it.
const TRACKING_PERIOD_SECS: f64 = 60.0;

/// Reads `dir`/autoscaling.tf and `dir`/variables.tf, and `tfvars` if given.
pub fn read(dir: &Path, tfvars: Option<&Path>) -> anyhow::Result<InfraScaling> {
    let file = |path: &Path| {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    };
    let autoscaling = file(&dir.join("autoscaling.tf"))?;
    let variables = file(&dir.join("variables.tf"))?;
    let tfvars = tfvars.map(file).transpose()?;
    parse(&autoscaling, &variables, tfvars.as_deref())
        .with_context(|| format!("{}: the scaling policies", dir.display()))
}

/// The blocks of autoscaling.tf this reader models, and nothing else.
const KNOWN_BLOCKS: &[&str] = &[
    "locals",
    "resource aws_appautoscaling_target workers",
    "resource aws_appautoscaling_policy step",
    "resource aws_cloudwatch_metric_alarm step",
    "resource aws_appautoscaling_policy backlog_per_task",
    "resource aws_appautoscaling_policy from_zero",
    "resource aws_cloudwatch_metric_alarm from_zero",
];

/// The settings of one entry of `local.step_policies`.
const STEP_KEYS: &[&str] = &[
    "threshold",
    "comparison",
    "periods",
    "adjustment_type",
    "adjustment",
    "cooldown",
    "enabled",
];

pub fn parse(
    autoscaling_tf: &str,
    variables_tf: &str,
    tfvars: Option<&str>,
) -> anyhow::Result<InfraScaling> {
    let mut vars = variable_defaults(variables_tf)?;
    if let Some(tfvars) = tfvars {
        let body = hcl::parse(tfvars).context("terraform.tfvars")?;
        for attr in body.attributes() {
            let value = attr
                .expr()
                .evaluate(&Context::new())
                .map_err(|e| anyhow!("terraform.tfvars: {}: {e}", attr.key()))?;
            vars.insert(attr.key().to_owned(), value);
        }
    }
    let body = hcl::parse(autoscaling_tf).context("autoscaling.tf is not HCL")?;
    let seen: BTreeSet<String> = body.blocks().map(block_name).collect();
    for name in &seen {
        ensure!(
            KNOWN_BLOCKS.contains(&name.as_str()),
            "autoscaling.tf: `{name}` is not modelled by the simulator"
        );
    }
    for name in KNOWN_BLOCKS {
        ensure!(seen.contains(*name), "autoscaling.tf: no `{name}`");
    }

    let number = |name: &str| var_number(&vars, name);
    let deployed_mode = match var_string(&vars, "scaling_mode")?.as_str() {
        "step" => ScalingMode::Step,
        "target_tracking" => ScalingMode::TargetTracking,
        other => bail!("var.scaling_mode: {other:?} is neither step nor target_tracking"),
    };
    let ctx_for = |mode: ScalingMode| -> anyhow::Result<Context<'static>> {
        let mut vars = vars.clone();
        vars.insert("scaling_mode".into(), Value::from(mode.name()));
        let locals = evaluate_locals(&body, &vars)?;
        let mut ctx = Context::new();
        ctx.declare_var("var", Value::Object(vars));
        ctx.declare_var("local", Value::Object(locals));
        Ok(ctx)
    };

    let target = block(&body, "resource aws_appautoscaling_target workers")?;
    let step_ctx = ctx_for(ScalingMode::Step)?;
    let bounds = (
        as_u32(
            &eval(&step_ctx, attr(target, "min_capacity")?)?,
            "min_capacity",
        )?,
        as_u32(
            &eval(&step_ctx, attr(target, "max_capacity")?)?,
            "max_capacity",
        )?,
    );
    let step_period_secs = step_alarm_period(&body, &step_ctx)?;
    check_step_resources(&body)?;

    let step = AutoScaling {
        steps: step_policies(&step_ctx)?,
        tracking: None,
        min_tasks: bounds.0,
        max_tasks: bounds.1,
    };
    let tracking_ctx = ctx_for(ScalingMode::TargetTracking)?;
    // One evaluation period for every alarm of the mode: target tracking's
    // own are AWS's 1-minute ones, so its step alarms must be too.
    let target_tracking_period_secs = step_alarm_period(&body, &tracking_ctx)?;
    ensure!(
        target_tracking_period_secs == TRACKING_PERIOD_SECS,
        "target_tracking mode: the step alarms' period is {target_tracking_period_secs} s; \
         the simulator models that mode on {TRACKING_PERIOD_SECS} s periods, those of \
         AWS's own target-tracking alarms"
    );
    let mut tracking_steps = step_policies(&tracking_ctx)?;
    tracking_steps.insert(
        0,
        from_zero(&body, &tracking_ctx, target_tracking_period_secs)?,
    );
    let target_tracking = AutoScaling {
        steps: tracking_steps,
        tracking: Some(target_tracking(&body, &tracking_ctx)?),
        min_tasks: bounds.0,
        max_tasks: bounds.1,
    };

    Ok(InfraScaling {
        region: var_string(&vars, "region")?,
        deployed_mode,
        step,
        target_tracking,
        slots_per_task: number("worker_concurrency")? as u32,
        task_vcpu: number("worker_cpu")? / 1024.0,
        task_gb: number("worker_memory")? / 1024.0,
        step_period_secs,
        target_tracking_period_secs,
    })
}

/// `variable` blocks' defaults, evaluated.
fn variable_defaults(variables_tf: &str) -> anyhow::Result<Map<String, Value>> {
    let body = hcl::parse(variables_tf).context("variables.tf is not HCL")?;
    let mut vars = Map::new();
    for var in body.blocks().filter(|b| b.identifier() == "variable") {
        let name = var.labels()[0].as_str();
        if let Some(default) = var.body().attributes().find(|a| a.key() == "default") {
            let value = default
                .expr()
                .evaluate(&Context::new())
                .map_err(|e| anyhow!("variables.tf: {name}: {e}"))?;
            vars.insert(name.to_owned(), value);
        }
    }
    Ok(vars)
}

/// The locals that evaluate from variables and other locals, in as many
/// passes as their references need; those naming resources stay out.
fn evaluate_locals(body: &Body, vars: &Map<String, Value>) -> anyhow::Result<Map<String, Value>> {
    let pending: Vec<(String, Expression)> = body
        .blocks()
        .filter(|b| b.identifier() == "locals")
        .flat_map(|b| b.body().attributes())
        .map(|a| (a.key().to_owned(), a.expr().clone()))
        .collect();
    let mut locals = Map::new();
    loop {
        let mut ctx = Context::new();
        ctx.declare_var("var", Value::Object(vars.clone()));
        ctx.declare_var("local", Value::Object(locals.clone()));
        let before = locals.len();
        for (name, expr) in &pending {
            if !locals.contains_key(name)
                && let Ok(value) = expr.evaluate(&ctx)
            {
                locals.insert(name.clone(), value);
            }
        }
        if locals.len() == before {
            return Ok(locals);
        }
    }
}

/// `local.active_step_policies` of the context's mode, in the file's order.
fn step_policies(ctx: &Context) -> anyhow::Result<Vec<StepPolicy>> {
    let all = eval(ctx, &local("step_policies"))?;
    let Value::Object(all) = all else {
        bail!("local.step_policies is not an object");
    };
    let mut policies = Vec::new();
    for (name, settings) in &all {
        let Value::Object(settings) = settings else {
            bail!("step_policies.{name} is not an object");
        };
        for key in settings.keys() {
            ensure!(
                STEP_KEYS.contains(&key.as_str()),
                "step_policies.{name}.{key} is not modelled by the simulator"
            );
        }
        let get = |key: &str| {
            settings
                .get(key)
                .ok_or_else(|| anyhow!("step_policies.{name}: no {key}"))
        };
        let Value::Bool(enabled) = get("enabled")? else {
            bail!("step_policies.{name}.enabled is not a bool");
        };
        if !enabled {
            continue;
        }
        let comparison = as_str(get("comparison")?, "comparison")?;
        let adjustment = as_f64(get("adjustment")?, "adjustment")?;
        policies.push(StepPolicy {
            name: name.clone(),
            metric: AlarmMetric::Backlog,
            comparison: Comparison::parse(comparison)
                .ok_or_else(|| anyhow!("step_policies.{name}: comparison {comparison:?}"))?,
            threshold: as_f64(get("threshold")?, "threshold")?,
            periods: as_u32(get("periods")?, "periods")?,
            adjustment: adjustment_of(
                as_str(get("adjustment_type")?, "adjustment_type")?,
                adjustment,
            )
            .with_context(|| format!("step_policies.{name}"))?,
            cooldown_secs: as_f64(get("cooldown")?, "cooldown")?,
        });
    }
    Ok(policies)
}

fn adjustment_of(kind: &str, value: f64) -> anyhow::Result<Adjustment> {
    match kind {
        "ChangeInCapacity" => Ok(Adjustment::Change(value as i64)),
        "ExactCapacity" if value >= 0.0 => Ok(Adjustment::Exact(value as u32)),
        other => bail!("adjustment_type {other:?} with {value} is not modelled"),
    }
}

/// The step policies and their alarms take every setting from the entry of
/// `local.step_policies` (what [`step_policies`] reads) and watch the backlog
/// the way the simulator's alarms do.
fn check_step_resources(body: &Body) -> anyhow::Result<()> {
    let policy = block(body, "resource aws_appautoscaling_policy step")?;
    expect_source(policy, "for_each", "local.active_step_policies")?;
    expect_source(policy, "policy_type", "\"StepScaling\"")?;
    let config = nested(policy, "step_scaling_policy_configuration")?;
    expect_source(config, "adjustment_type", "each.value.adjustment_type")?;
    expect_source(config, "cooldown", "each.value.cooldown")?;
    expect_source(config, "metric_aggregation_type", "\"Maximum\"")?;
    let steps: Vec<&Body> = config
        .blocks()
        .filter(|b| b.identifier() == "step_adjustment")
        .map(|b| b.body())
        .collect();
    ensure!(
        steps.len() == 1,
        "the step policy has {} step_adjustment blocks; the simulator models one",
        steps.len()
    );
    expect_source(steps[0], "scaling_adjustment", "each.value.adjustment")?;

    let alarm = block(body, "resource aws_cloudwatch_metric_alarm step")?;
    expect_source(alarm, "for_each", "local.active_step_policies")?;
    expect_source(alarm, "metric_name", "local.queue_metric")?;
    expect_source(alarm, "statistic", "\"Maximum\"")?;
    expect_source(alarm, "evaluation_periods", "each.value.periods")?;
    expect_source(alarm, "threshold", "each.value.threshold")?;
    expect_source(alarm, "comparison_operator", "each.value.comparison")?;
    expect_source(alarm, "treat_missing_data", "\"notBreaching\"")?;
    ensure!(
        !alarm.attributes().any(|a| a.key() == "datapoints_to_alarm"),
        "the step alarms set datapoints_to_alarm (M of N): not modelled"
    );
    Ok(())
}

/// The step alarms' `period` in the context's mode: one CloudWatch allows.
fn step_alarm_period(body: &Body, ctx: &Context) -> anyhow::Result<f64> {
    let alarm = block(body, "resource aws_cloudwatch_metric_alarm step")?;
    let period = as_f64(&eval(ctx, attr(alarm, "period")?)?, "period")?;
    alarm_period(period).context("the step alarms")
}

/// CloudWatch's alarm periods: 10, 20 or 30 s (high resolution, on a metric
/// published that often at 1 s resolution) or a multiple of 60 s.
fn alarm_period(period: f64) -> anyhow::Result<f64> {
    ensure!(
        [10.0, 20.0, 30.0].contains(&period) || (period >= 60.0 && period % 60.0 == 0.0),
        "period {period} s: CloudWatch allows 10, 20, 30 or a multiple of 60"
    );
    Ok(period)
}

/// Target tracking of `backlog / tasks`.
fn target_tracking(body: &Body, ctx: &Context) -> anyhow::Result<TargetTracking> {
    let policy = block(body, "resource aws_appautoscaling_policy backlog_per_task")?;
    expect_source(policy, "policy_type", "\"TargetTrackingScaling\"")?;
    let config = nested(policy, "target_tracking_scaling_policy_configuration")?;
    let metrics = nested(config, "customized_metric_specification")?;
    let returned: Vec<String> = metrics
        .blocks()
        .filter(|b| b.identifier() == "metrics")
        .filter(|m| {
            m.body()
                .attributes()
                .any(|a| a.key() == "return_data" && source(a.expr()) == "true")
        })
        .map(|m| attr(m.body(), "expression").map(source))
        .collect::<anyhow::Result<_>>()?;
    ensure!(
        returned == ["\"backlog / tasks\""],
        "target tracking follows {returned:?}; the simulator models \"backlog / tasks\""
    );
    Ok(TargetTracking {
        target: as_f64(&eval(ctx, attr(config, "target_value")?)?, "target_value")?,
        scale_out_cooldown_secs: as_f64(
            &eval(ctx, attr(config, "scale_out_cooldown")?)?,
            "scale_out_cooldown",
        )?,
        scale_in_cooldown_secs: as_f64(
            &eval(ctx, attr(config, "scale_in_cooldown")?)?,
            "scale_in_cooldown",
        )?,
    })
}

/// The step policy that leaves zero tasks in target-tracking mode, and its
/// alarm, whose metrics' period must be the mode's `period_secs`.
fn from_zero(body: &Body, ctx: &Context, period_secs: f64) -> anyhow::Result<StepPolicy> {
    let policy = block(body, "resource aws_appautoscaling_policy from_zero")?;
    let config = nested(policy, "step_scaling_policy_configuration")?;
    let kind = eval(ctx, attr(config, "adjustment_type")?)?;
    let step = nested(config, "step_adjustment")?;
    let adjustment = eval(ctx, attr(step, "scaling_adjustment")?)?;
    let alarm = block(body, "resource aws_cloudwatch_metric_alarm from_zero")?;
    expect_source(alarm, "treat_missing_data", "\"notBreaching\"")?;
    let starved = alarm
        .blocks()
        .filter(|b| b.identifier() == "metric_query")
        .find(|q| {
            q.body()
                .attributes()
                .any(|a| a.key() == "return_data" && source(a.expr()) == "true")
        })
        .ok_or_else(|| anyhow!("the from-zero alarm returns no metric query"))?;
    expect_source(
        starved.body(),
        "expression",
        "\"IF(backlog > 0 AND FILL(tasks, 0) == 0, 1, 0)\"",
    )?;
    for query in alarm.blocks().filter(|b| b.identifier() == "metric_query") {
        let Ok(metric) = nested(query.body(), "metric") else {
            continue;
        };
        let period = as_f64(&eval(ctx, attr(metric, "period")?)?, "period")?;
        ensure!(
            period == period_secs,
            "the from-zero alarm's metrics have a {period} s period, the mode's other \
             alarms {period_secs} s: not modelled"
        );
    }
    let comparison = eval(ctx, attr(alarm, "comparison_operator")?)?;
    let comparison = as_str(&comparison, "comparison_operator")?;
    Ok(StepPolicy {
        name: "scale-from-zero".into(),
        metric: AlarmMetric::Starved,
        comparison: Comparison::parse(comparison)
            .ok_or_else(|| anyhow!("from-zero alarm: comparison {comparison:?}"))?,
        threshold: as_f64(&eval(ctx, attr(alarm, "threshold")?)?, "threshold")?,
        periods: as_u32(
            &eval(ctx, attr(alarm, "evaluation_periods")?)?,
            "evaluation_periods",
        )?,
        adjustment: adjustment_of(
            as_str(&kind, "adjustment_type")?,
            as_f64(&adjustment, "scaling_adjustment")?,
        )?,
        cooldown_secs: as_f64(&eval(ctx, attr(config, "cooldown")?)?, "cooldown")?,
    })
}

fn block_name(block: &hcl::Block) -> String {
    std::iter::once(block.identifier())
        .chain(block.labels().iter().map(|l| l.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn block<'a>(body: &'a Body, name: &str) -> anyhow::Result<&'a Body> {
    body.blocks()
        .find(|b| block_name(b) == name)
        .map(|b| b.body())
        .ok_or_else(|| anyhow!("no `{name}`"))
}

fn nested<'a>(body: &'a Body, name: &str) -> anyhow::Result<&'a Body> {
    body.blocks()
        .find(|b| b.identifier() == name)
        .map(|b| b.body())
        .ok_or_else(|| anyhow!("no `{name}` block"))
}

fn attr<'a>(body: &'a Body, key: &str) -> anyhow::Result<&'a Expression> {
    body.attributes()
        .find(|a| a.key() == key)
        .map(|a| a.expr())
        .ok_or_else(|| anyhow!("no attribute `{key}`"))
}

/// An expression as HCL writes it.
fn source(expr: &Expression) -> String {
    hcl::format::to_string(expr).unwrap_or_else(|_| format!("{expr:?}"))
}

fn expect_source(body: &Body, key: &str, expected: &str) -> anyhow::Result<()> {
    let found = source(attr(body, key)?);
    ensure!(
        found == expected,
        "`{key} = {found}`: the simulator models `{key} = {expected}`"
    );
    Ok(())
}

fn local(name: &str) -> Expression {
    use hcl::expr::{Traversal, TraversalOperator, Variable};
    Expression::from(Traversal::new(
        Variable::unchecked("local"),
        [TraversalOperator::GetAttr(name.into())],
    ))
}

fn eval(ctx: &Context, expr: &Expression) -> anyhow::Result<Value> {
    expr.evaluate(ctx)
        .map_err(|e| anyhow!("`{}`: {e}", source(expr)))
}

fn as_f64(value: &Value, what: &str) -> anyhow::Result<f64> {
    value
        .as_number()
        .and_then(|n| n.as_f64())
        .ok_or_else(|| anyhow!("{what}: {value:?} is not a number"))
}

fn as_u32(value: &Value, what: &str) -> anyhow::Result<u32> {
    let n = as_f64(value, what)?;
    ensure!(
        n >= 0.0 && n.fract() == 0.0 && n <= f64::from(u32::MAX),
        "{what}: {n} is not a count"
    );
    Ok(n as u32)
}

fn as_str<'a>(value: &'a Value, what: &str) -> anyhow::Result<&'a str> {
    value
        .as_str()
        .ok_or_else(|| anyhow!("{what}: {value:?} is not a string"))
}

fn var_number(vars: &Map<String, Value>, name: &str) -> anyhow::Result<f64> {
    as_f64(
        vars.get(name)
            .ok_or_else(|| anyhow!("var.{name} has no default"))?,
        &format!("var.{name}"),
    )
}

fn var_string(vars: &Map<String, Value>, name: &str) -> anyhow::Result<String> {
    let value = vars
        .get(name)
        .ok_or_else(|| anyhow!("var.{name} has no default"))?;
    Ok(as_str(value, &format!("var.{name}"))?.to_owned())
}

#[cfg(test)]
mod tests;
