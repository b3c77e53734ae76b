//! What the Fargate tasks cost: Linux/x86 on-demand per vCPU-hour and
//! GB-hour, billed per second with a one-minute minimum (the minimum is
//! applied per task in `fleet`), and Fargate Spot.

/// Fargate prices of one region, USD.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FargatePrices {
    pub vcpu_hour: f64,
    pub gb_hour: f64,
    /// Spot's price as a fraction of on-demand.
    pub spot_fraction: f64,
}

/// Where the prices come from, printed with every report.
pub const PRICES_SOURCE: &str = "AWS Fargate pricing page (aws.amazon.com/fargate/pricing), \
Linux/x86 on-demand, as of 2026-11; Spot = on-demand x 0.30 (AWS: 'up to 70% off'; \
the live Spot price moves with supply and demand) - override with --vcpu-hour, \
--gb-hour, --spot-fraction";

/// On-demand Linux/x86 prices by region (USD per vCPU-hour, per GB-hour).
const ON_DEMAND: &[(&str, f64, f64)] = &[
    // Asia Pacific (Seoul): infra/'s default region.
    ("ap-northeast-2", 0.04656, 0.00511),
    // US East (N. Virginia).
    ("us-east-1", 0.04048, 0.004445),
];

/// AWS's ceiling for the Spot discount ("up to 70%").
pub const SPOT_FRACTION: f64 = 0.30;

impl FargatePrices {
    /// The prices of `region`, if this table knows them.
    pub fn of_region(region: &str) -> Option<Self> {
        ON_DEMAND
            .iter()
            .find(|(name, ..)| *name == region)
            .map(|&(_, vcpu_hour, gb_hour)| FargatePrices {
                vcpu_hour,
                gb_hour,
                spot_fraction: SPOT_FRACTION,
            })
    }

    /// One task of `vcpu` and `gb` for an hour, on-demand.
    pub fn task_hour(&self, vcpu: f64, gb: f64) -> f64 {
        vcpu * self.vcpu_hour + gb * self.gb_hour
    }

    /// (on-demand, Spot) dollars for `task_hours` of such tasks.
    pub fn cost(&self, task_hours: f64, vcpu: f64, gb: f64) -> (f64, f64) {
        let on_demand = task_hours * self.task_hour(vcpu, gb);
        (on_demand, on_demand * self.spot_fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_hour_of_1_vcpu_and_2_gb_in_seoul() {
        let seoul = FargatePrices::of_region("ap-northeast-2").unwrap();
        let hour = seoul.task_hour(1.0, 2.0);
        assert!((hour - 0.05678).abs() < 1e-9, "{hour}");
        let (on_demand, spot) = seoul.cost(10.0, 1.0, 2.0);
        assert!((on_demand - 0.5678).abs() < 1e-9);
        assert!((spot - 0.17034).abs() < 1e-9);
        assert!(FargatePrices::of_region("mars-north-1").is_none());
    }
}
