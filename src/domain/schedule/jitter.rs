//! Jitter: each keyword fires a fixed while after its cron time, so keywords
//! on the same cron do not all start in the same second.

use chrono::TimeDelta;

use crate::domain::FieldError;

/// The widest jitter: an hour spreads hundreds of keywords over distinct
/// seconds, and a morning crawl delayed more than that is no longer the
/// morning's.
pub const MAX_JITTER_SECS: u32 = 3600;

/// Up to how many seconds a keyword's fires are delayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Jitter(u32);

impl Jitter {
    /// 0 to [`MAX_JITTER_SECS`] seconds.
    pub fn parse(secs: i64) -> Result<Self, FieldError> {
        u32::try_from(secs)
            .ok()
            .filter(|secs| *secs <= MAX_JITTER_SECS)
            .map(Jitter)
            .ok_or_else(|| {
                FieldError::new(
                    "jitter_secs",
                    format!("must be between 0 and {MAX_JITTER_SECS}"),
                )
            })
    }

    pub fn secs(self) -> u32 {
        self.0
    }

    /// How long after its cron time keyword `keyword_id` fires, every time:
    /// whole seconds in [0, jitter). Derived from the id alone, so it is the
    /// same in the scheduler and the API (the fire times shown are the real
    /// ones) and stable across restarts. Hashed rather than `id % jitter`:
    /// keywords created one after the other would otherwise fire one second
    /// apart at the start of the window instead of across it.
    pub fn offset_for(self, keyword_id: i64) -> TimeDelta {
        if self.0 == 0 {
            return TimeDelta::zero();
        }
        let spread = mix(keyword_id as u64) % u64::from(self.0);
        TimeDelta::seconds(spread as i64)
    }
}

/// SplitMix64's finalizer: consecutive ids land far apart, the same id
/// always in the same place (unlike `std`'s hasher, which may change).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn jitter_is_bounded_and_named_when_out_of_bounds() {
        assert_eq!(Jitter::parse(0).unwrap().secs(), 0);
        assert_eq!(Jitter::parse(3600).unwrap().secs(), 3600);
        for bad in [-1, 3601, i64::MAX, i64::MIN] {
            let err = Jitter::parse(bad).unwrap_err();
            assert_eq!(err.field, "jitter_secs", "{bad}");
            assert!(err.message.contains("between 0 and 3600"), "{err}");
        }
    }

    #[test]
    fn a_keyword_offset_is_within_the_window_and_always_the_same() {
        assert_eq!(Jitter::default().offset_for(42), TimeDelta::zero());
        let window = Jitter::parse(600).unwrap();
        for id in 1..=10_000 {
            let offset = window.offset_for(id);
            assert!(
                offset >= TimeDelta::zero() && offset < TimeDelta::seconds(600),
                "{id}: {offset}"
            );
            assert_eq!(offset, window.offset_for(id), "deterministic");
        }
        assert_eq!(Jitter::parse(1).unwrap().offset_for(7), TimeDelta::zero());
    }

    #[test]
    fn eighty_keywords_on_one_cron_spread_across_the_window() {
        let window = Jitter::parse(600).unwrap();
        let offsets: Vec<i64> = (1..=80)
            .map(|id| window.offset_for(id).num_seconds())
            .collect();
        let distinct: BTreeSet<_> = offsets.iter().collect();
        // 80 ids in 600 slots: a few may share a second, never most of them.
        assert!(distinct.len() >= 70, "{} distinct seconds", distinct.len());
        let (first, last) = (offsets.iter().min().unwrap(), offsets.iter().max().unwrap());
        assert!(*first < 60 && *last >= 540, "spread {first}..{last}");
        // A quarter of the window holds about a quarter of them.
        let early = offsets.iter().filter(|o| **o < 150).count();
        assert!((10..=30).contains(&early), "{early} in the first quarter");
    }
}
