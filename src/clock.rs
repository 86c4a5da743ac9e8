//! The wall clock the shop reads. One lives with each database handle (`Db::clock`), so a test
//! can step it the way an NTP correction, a VM resume or an operator steps a server's clock,
//! and check that nothing a reader was shown disappears and no cut-off stretches.
//!
//! The kernel of the layer map: it uses nothing else in the crate.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bson::DateTime;

/// The system clock plus an offset that only tests change. It reads the system clock on every
/// call, so time keeps flowing after a step, as it does on a server.
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicI64,
}

impl Clock {
    pub(crate) fn now(&self) -> DateTime {
        let offset = self.offset_ms.load(Ordering::Relaxed);
        DateTime::from_millis(DateTime::now().timestamp_millis().saturating_add(offset))
    }

    /// Test hook: step the clock back by `by` (as `ntpdate` or a VM restore does).
    #[doc(hidden)]
    pub fn step_back(&self, by: Duration) {
        self.offset_ms.fetch_sub(millis(by), Ordering::Relaxed);
    }

    /// Test hook: step the clock forward by `by`.
    #[doc(hidden)]
    pub fn step_forward(&self, by: Duration) {
        self.offset_ms.fetch_add(millis(by), Ordering::Relaxed);
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `age` before `now`: anything last touched before it is older than `age` (the background
/// jobs' "idle for", "left behind for").
pub(crate) fn before(now: DateTime, age: Duration) -> DateTime {
    DateTime::from_millis(now.timestamp_millis().saturating_sub(millis(age)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stepped_clock_reads_the_system_time_moved_by_the_steps() {
        let clock = Clock::default();
        let before_step = DateTime::now().timestamp_millis();
        clock.step_back(Duration::from_secs(3600));
        let stepped = clock.now().timestamp_millis();
        assert!(
            stepped <= before_step - 3_600_000 + 1_000,
            "{stepped} vs {before_step}"
        );
        assert!(stepped >= before_step - 3_600_000);
        clock.step_forward(Duration::from_secs(7200));
        assert!(clock.now().timestamp_millis() >= before_step + 3_600_000);
    }

    #[test]
    fn a_cutoff_is_the_age_before_now_and_never_overflows() {
        let now = DateTime::from_millis(10_000);
        assert_eq!(
            before(now, Duration::from_secs(3)).timestamp_millis(),
            7_000
        );
        let far = before(DateTime::MIN, Duration::MAX);
        assert_eq!(far, DateTime::MIN);
    }
}
