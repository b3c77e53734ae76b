//! When runs are queued: a burst at once, or the fires of a set of keywords on
//! one cron schedule (each keyword queues one run per site), read with the
//! scheduler's own rules (`domain::schedule`: the zone's clocks, the keyword's
//! jitter).

use anyhow::Context;
use chrono::{DateTime, Utc};

use crawlfleet::domain::schedule::KeywordSchedule;

#[derive(Debug, Clone)]
pub enum Arrivals {
    /// `runs` runs queued at t = 0.
    Burst { runs: usize },
    /// Keywords 1..=`keywords`, each on `sites` sites, at their first fire
    /// after `after`; t = 0 is the earliest cron time among them.
    Cron {
        // Boxed: a schedule is large beside a burst's one number.
        schedule: Box<KeywordSchedule>,
        keywords: u32,
        sites: u32,
        after: DateTime<Utc>,
    },
}

impl Arrivals {
    /// Seconds from t = 0 at which each run is queued, in order.
    pub fn times(&self) -> anyhow::Result<Vec<f64>> {
        match self {
            Arrivals::Burst { runs } => Ok(vec![0.0; *runs]),
            Arrivals::Cron {
                schedule,
                keywords,
                sites,
                after,
            } => {
                let fires = (1..=i64::from(*keywords))
                    .map(|id| {
                        schedule
                            .next_fire_after(id, *after)
                            .with_context(|| format!("the cron never fires after {after}"))
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let Some(start) = fires.iter().map(|f| f.nominal).min() else {
                    return Ok(Vec::new());
                };
                let mut times: Vec<f64> = fires
                    .iter()
                    .flat_map(|f| {
                        let at = (f.at - start).num_milliseconds() as f64 / 1000.0;
                        std::iter::repeat_n(at, *sites as usize)
                    })
                    .collect();
                times.sort_by(f64::total_cmp);
                Ok(times)
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Arrivals::Burst { runs } => format!("a burst of {runs} runs at t=0"),
            Arrivals::Cron {
                schedule,
                keywords,
                sites,
                ..
            } => format!(
                "{keywords} keywords x {sites} sites on \"{}\" ({}), jitter {} s",
                schedule.cron().as_str(),
                schedule.zone().name(),
                schedule.jitter().secs()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cron_batch_queues_each_keyword_on_each_site_within_its_jitter() {
        let arrivals = Arrivals::Cron {
            schedule: Box::new(KeywordSchedule::parse("0 0 6 * * *", "Asia/Seoul", 600).unwrap()),
            keywords: 50,
            sites: 3,
            after: "2026-11-25T00:00:00Z".parse().unwrap(),
        };
        let times = arrivals.times().unwrap();
        assert_eq!(times.len(), 150);
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        assert!(times[0] >= 0.0 && times[149] < 600.0, "{times:?}");
        assert!(times[149] - times[0] > 300.0, "spread over the window");
        assert_eq!(
            times.iter().filter(|t| **t == times[0]).count() % 3,
            0,
            "one run per site"
        );
    }

    #[test]
    fn a_burst_is_every_run_at_once() {
        assert_eq!(Arrivals::Burst { runs: 3 }.times().unwrap(), vec![0.0; 3]);
    }
}
