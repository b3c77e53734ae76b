//! The side-by-side table of policies, in text or as JSON lines.

use serde_json::json;

use super::cost::FargatePrices;
use super::fleet::Outcome;

/// One policy's outcome, named.
pub struct Row {
    pub label: String,
    pub outcome: Outcome,
}

/// What a task costs: the region's prices and the task's size.
#[derive(Debug, Clone, Copy)]
pub struct TaskCost {
    pub prices: FargatePrices,
    pub vcpu: f64,
    pub gb: f64,
}

impl TaskCost {
    /// (task-hours, on-demand $, Spot $).
    pub fn of(&self, outcome: &Outcome) -> (f64, f64, f64) {
        let hours = outcome.billed_task_secs / 3600.0;
        let (on_demand, spot) = self.prices.cost(hours, self.vcpu, self.gb);
        (hours, on_demand, spot)
    }
}

/// `1h02m`, `12m34s`, `45.2s`.
pub fn duration(secs: f64) -> String {
    if secs < 60.0 {
        return format!("{secs:.1}s");
    }
    let whole = secs.round() as u64;
    if whole < 3600 {
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else {
        format!("{}h{:02}m", whole / 3600, (whole % 3600) / 60)
    }
}

/// The rows as a table; `ideal_drain` makes the "x ideal" column.
pub fn table(rows: &[Row], ideal_drain: Option<f64>, cost: &TaskCost) -> String {
    let header = [
        "policy",
        "drain",
        "x ideal",
        "peak tasks",
        "launched",
        "task-hours",
        "on-demand $",
        "Spot $",
        "mean wait",
        "0 tasks at",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for row in rows {
        let o = &row.outcome;
        let (hours, on_demand, spot) = cost.of(o);
        let drain = if o.unfinished_runs > 0 {
            format!("{} left", o.unfinished_runs)
        } else {
            duration(o.drain_secs)
        };
        lines.push(vec![
            row.label.clone(),
            drain,
            ideal_drain.map_or("-".into(), |ideal| format!("{:.2}", o.drain_secs / ideal)),
            o.peak_tasks.to_string(),
            o.tasks_launched.to_string(),
            format!("{hours:.2}"),
            format!("{on_demand:.2}"),
            format!("{spot:.2}"),
            duration(o.mean_wait_secs),
            o.fleet_at_zero_secs.map_or("never".into(), duration),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            let total = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

/// One JSON object per row (for scripts and the bench).
pub fn json_lines(scenario: &str, rows: &[Row], cost: &TaskCost) -> String {
    rows.iter()
        .map(|row| {
            let o = &row.outcome;
            let (hours, on_demand, spot) = cost.of(o);
            json!({
                "scenario": scenario,
                "policy": row.label,
                "runs": o.runs,
                "unfinished_runs": o.unfinished_runs,
                "drain_secs": o.drain_secs,
                "peak_tasks": o.peak_tasks,
                "tasks_launched": o.tasks_launched,
                "task_hours": hours,
                "on_demand_usd": on_demand,
                "spot_usd": spot,
                "mean_wait_secs": o.mean_wait_secs,
                "max_wait_secs": o.max_wait_secs,
                "fleet_at_zero_secs": o.fleet_at_zero_secs,
            })
            .to_string()
                + "\n"
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(duration(45.24), "45.2s");
        assert_eq!(duration(754.0), "12m34s");
        assert_eq!(duration(3720.0), "1h02m");
    }
}
