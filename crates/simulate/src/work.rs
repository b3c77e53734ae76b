//! How long one run holds a slot: a fixed overhead (claim, browser session,
//! storing) plus, for each of its pages, a page time drawn from a distribution.

use anyhow::{Context, bail};
use rand::Rng;

/// The worker's own figures for the demo shop, `scripts/bench` (render_modes,
/// release build, README "Testing", 2026-11-23): a browser page 100.3 ms mean
/// (`crawlfleet_page_fetch_duration_seconds`), a whole one-page crawl 228 ms,
/// so about 128 ms a run besides its pages. Measured one crawl at a time on the
/// 2-core dev machine; a Fargate task runs 4 on 1 vCPU, so treat these as a
/// lower bound and pass your own with `--page-secs` / `--page-secs-samples`.
pub const DEMO_PAGE_SECS: f64 = 0.1003;
pub const DEMO_RUN_OVERHEAD_SECS: f64 = 0.128;
/// The demo shop's paged search: 3 pages of items, then the empty page 4 that
/// ends the crawl.
pub const DEMO_PAGES_PER_RUN: u32 = 4;
/// The spread of page times around their mean (coefficient of variation):
/// not measured for the demo shop; an assumption until a sample is given.
pub const DEFAULT_PAGE_SECS_CV: f64 = 0.3;

/// Seconds per page.
#[derive(Debug, Clone, PartialEq)]
pub enum PageSecs {
    /// Log-normal with this mean and coefficient of variation.
    LogNormal { mean: f64, cv: f64 },
    /// Drawn uniformly from measured values.
    Samples(Vec<f64>),
}

impl PageSecs {
    /// Measured page times, one number (seconds) a line; blank lines and `#` comments skipped.
    pub fn parse_samples(text: &str) -> anyhow::Result<Self> {
        let mut samples = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let secs: f64 = line
                .parse()
                .with_context(|| format!("line {}: {line:?} is not a number", n + 1))?;
            if !(secs.is_finite() && secs >= 0.0) {
                bail!("line {}: {secs} is not a duration in seconds", n + 1);
            }
            samples.push(secs);
        }
        if samples.is_empty() {
            bail!("no page times in the samples");
        }
        Ok(PageSecs::Samples(samples))
    }

    pub fn mean(&self) -> f64 {
        match self {
            PageSecs::LogNormal { mean, .. } => *mean,
            PageSecs::Samples(s) => s.iter().sum::<f64>() / s.len() as f64,
        }
    }

    fn sample(&self, rng: &mut impl Rng) -> f64 {
        match self {
            PageSecs::LogNormal { mean, cv } => {
                if *cv <= 0.0 {
                    return *mean;
                }
                let sigma2 = (1.0 + cv * cv).ln();
                let mu = mean.ln() - sigma2 / 2.0;
                (mu + sigma2.sqrt() * standard_normal(rng)).exp()
            }
            PageSecs::Samples(s) => s[rng.random_range(0..s.len())],
        }
    }
}

/// Box-Muller: one standard normal from two uniforms.
fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]: ln is finite
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The work of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunWork {
    /// Pages per run, drawn uniformly from `min..=max`.
    pub pages: (u32, u32),
    pub page_secs: PageSecs,
    pub overhead_secs: f64,
}

impl RunWork {
    /// The demo shop's browser crawl, as the worker measured it.
    pub fn demo_shop() -> Self {
        RunWork {
            pages: (DEMO_PAGES_PER_RUN, DEMO_PAGES_PER_RUN),
            page_secs: PageSecs::LogNormal {
                mean: DEMO_PAGE_SECS,
                cv: DEFAULT_PAGE_SECS_CV,
            },
            overhead_secs: DEMO_RUN_OVERHEAD_SECS,
        }
    }

    /// Seconds one run holds its slot.
    pub fn sample(&self, rng: &mut impl Rng) -> f64 {
        let pages = rng.random_range(self.pages.0..=self.pages.1);
        self.overhead_secs + (0..pages).map(|_| self.page_secs.sample(rng)).sum::<f64>()
    }

    /// The mean of [`Self::sample`].
    pub fn mean_secs(&self) -> f64 {
        let pages = f64::from(self.pages.0 + self.pages.1) / 2.0;
        self.overhead_secs + pages * self.page_secs.mean()
    }
}

/// `4` or `1-4`: pages per run.
pub fn parse_pages(text: &str) -> anyhow::Result<(u32, u32)> {
    let (min, max) = match text.split_once('-') {
        Some((a, b)) => (a.trim().parse()?, b.trim().parse()?),
        None => {
            let n = text.trim().parse()?;
            (n, n)
        }
    };
    if min == 0 || min > max {
        bail!("pages per run: {text:?} is not N or MIN-MAX with 1 <= MIN <= MAX");
    }
    Ok((min, max))
}

#[cfg(test)]
mod tests {
    use rand::{SeedableRng, rngs::StdRng};

    use super::*;

    #[test]
    fn log_normal_page_times_have_the_mean_asked_for() {
        let work = RunWork {
            pages: (1, 1),
            page_secs: PageSecs::LogNormal { mean: 2.0, cv: 0.5 },
            overhead_secs: 0.0,
        };
        let mut rng = StdRng::seed_from_u64(7);
        let n = 200_000;
        let mean = (0..n).map(|_| work.sample(&mut rng)).sum::<f64>() / f64::from(n);
        assert!((mean - 2.0).abs() < 0.02, "{mean}");
    }

    #[test]
    fn a_run_is_its_overhead_plus_its_pages() {
        let work = RunWork {
            pages: (3, 3),
            page_secs: PageSecs::Samples(vec![0.5]),
            overhead_secs: 0.25,
        };
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(work.sample(&mut rng), 1.75);
        assert_eq!(work.mean_secs(), 1.75);
    }

    #[test]
    fn samples_and_page_counts_are_parsed_or_refused() {
        assert_eq!(
            PageSecs::parse_samples("# measured\n0.5\n\n1.5\n").unwrap(),
            PageSecs::Samples(vec![0.5, 1.5])
        );
        assert!(PageSecs::parse_samples("0.5\nslow\n").is_err());
        assert!(PageSecs::parse_samples("-1\n").is_err());
        assert!(PageSecs::parse_samples("# nothing\n").is_err());
        assert_eq!(parse_pages("4").unwrap(), (4, 4));
        assert_eq!(parse_pages("1-3").unwrap(), (1, 3));
        assert!(parse_pages("0").is_err());
        assert!(parse_pages("3-1").is_err());
    }
}
