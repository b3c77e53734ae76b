//! When a delivery that failed is tried again: a fixed list of delays after
//! the first attempt, growing to about a day in all (as Svix's: 5 s, 5 min,
//! 30 min, 2 h, 5 h, 10 h, 10 h). After the last retry fails the delivery is
//! failed, and an endpoint that had no success in all that time is disabled.

use std::time::Duration;

use rand::Rng;

/// The delays before each retry of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(Vec<Duration>);

impl RetrySchedule {
    /// Delays in seconds; an empty list is one attempt and no retry.
    pub fn from_secs(secs: &[u64]) -> Self {
        RetrySchedule(secs.iter().map(|s| Duration::from_secs(*s)).collect())
    }

    /// Attempts a delivery gets in all: the first and each retry.
    pub fn attempts(&self) -> u32 {
        self.0.len() as u32 + 1
    }

    /// How long after its `made`-th failed attempt a delivery is tried
    /// again, with up to 10% jitter either way (deliveries that failed
    /// together do not all return together); `None` after the last one.
    pub fn retry_after(&self, made: u32) -> Option<Duration> {
        let base = *self.0.get((made as usize).checked_sub(1)?)?;
        let jitter = rand::rng().random_range(0.9..=1.1);
        Some(base.mul_f64(jitter))
    }

    /// From the first attempt to the last, jitter aside.
    pub fn span(&self) -> Duration {
        self.0.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failed_attempt_waits_its_delay_until_the_schedule_is_spent() {
        let schedule = RetrySchedule::from_secs(&[5, 300]);
        assert_eq!(schedule.attempts(), 3);
        let first = schedule.retry_after(1).unwrap().as_secs_f64();
        assert!((4.5..=5.5).contains(&first), "{first}");
        let second = schedule.retry_after(2).unwrap().as_secs_f64();
        assert!((270.0..=330.0).contains(&second), "{second}");
        assert_eq!(schedule.retry_after(3), None);
        assert_eq!(schedule.retry_after(0), None);
        assert_eq!(RetrySchedule::from_secs(&[]).retry_after(1), None);
        assert_eq!(schedule.span(), Duration::from_secs(305));
    }
}
