//! The wall clock the shop reads, as a trait: the system clock in production, a clock the
//! holder steps in tests. One lives with each database handle (`Db::clock`), so a test can step
//! it the way an NTP correction, a VM resume or an operator steps a server's clock, and check
//! that nothing a reader was shown disappears and no cut-off stretches.
//!
//! The kernel of the layer map: it uses nothing else in the crate.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bson::DateTime;

/// Where the shop reads the time. Production runs on [`SystemClock`]; tests and drills hand
/// the application a [`SteppedClock`] (`Db::with_clock`) and step it.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time by this clock.
    fn now(&self) -> DateTime;
}

/// The operating system's wall clock: what every instance in production reads.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime {
        DateTime::now()
    }
}

/// The system clock plus an offset that the holder steps, the way an NTP correction, a VM
/// resume or an operator steps a server's clock. It reads the system clock on every call, so
/// time keeps flowing after a step, as it does on a server.
#[derive(Debug, Default)]
pub struct SteppedClock {
    offset_ms: AtomicI64,
}

impl Clock for SteppedClock {
    fn now(&self) -> DateTime {
        let offset = self.offset_ms.load(Ordering::Relaxed);
        DateTime::from_millis(DateTime::now().timestamp_millis().saturating_add(offset))
    }
}

impl SteppedClock {
    /// Step the clock back by `by` (as `ntpdate` or a VM restore does).
    pub fn step_back(&self, by: Duration) {
        self.offset_ms.fetch_sub(millis(by), Ordering::Relaxed);
    }

    /// Step the clock forward by `by`.
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
        let clock = SteppedClock::default();
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
    fn the_system_clock_reads_the_operating_systems_time() {
        let before_read = DateTime::now().timestamp_millis();
        let read = SystemClock.now().timestamp_millis();
        assert!(read >= before_read && read <= before_read + 1_000);
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
