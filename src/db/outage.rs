//! Remembering that the database is unreachable, so a page costs at most one
//! `database.timeout_ms` during an outage instead of one per query it makes.
//!
//! A circuit breaker, one per [`Db`](super::Db) handle (kept as its extension, shared by every
//! worker's handle): closed while the database answers. A request that found it unreachable
//! opens it; while open, requests get the 503 page at once, except one request at a time every
//! [`PROBE_EVERY`], which goes through as a probe. A probe that gets its page without finding the
//! database unreachable closes the breaker; one that fails keeps it open. The middleware that
//! consults it is `crate::state::with_site_settings`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often, during an outage, one request is let through to find out whether the database is
/// back.
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The database answered last time: go ahead.
    Normal,
    /// The database is down, and this request finds out whether it is back.
    Probe,
    /// The database is down and a probe is running or ran moments ago: answer 503 now.
    Refuse,
}

#[derive(Debug, Default)]
struct Down {
    last_failure: Option<Instant>,
    probing: bool,
}

/// The breaker (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Outage {
    /// Fast path: false while the database answers, so a request takes no lock.
    down: AtomicBool,
    state: Mutex<Down>,
}

impl Outage {
    pub(crate) fn admit(&self) -> Admission {
        if !self.down.load(Ordering::Acquire) {
            return Admission::Normal;
        }
        let Ok(mut state) = self.state.lock() else {
            return Admission::Normal;
        };
        let due = state
            .last_failure
            .is_none_or(|at| at.elapsed() >= PROBE_EVERY);
        if state.probing || !due {
            return Admission::Refuse;
        }
        state.probing = true;
        Admission::Probe
    }

    /// A request found the database unreachable.
    pub(crate) fn failed(&self) {
        if let Ok(mut state) = self.state.lock() {
            if !self.down.swap(true, Ordering::AcqRel) {
                tracing::warn!(
                    "the database is unreachable: answering 503 at once, probing every {}s",
                    PROBE_EVERY.as_secs()
                );
            }
            state.last_failure = Some(Instant::now());
            state.probing = false;
        }
    }

    /// A probe got its page without finding the database unreachable.
    pub(crate) fn recovered(&self) {
        if let Ok(mut state) = self.state.lock() {
            if self.down.swap(false, Ordering::AcqRel) {
                tracing::info!("the database answers again");
            }
            *state = Down::default();
        }
    }

    /// Whether the store is taken for down now (the unit tests look).
    #[cfg(test)]
    fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_refuses_at_once_and_lets_one_probe_through_per_period() {
        let outage = Outage::default();
        assert_eq!(outage.admit(), Admission::Normal);
        outage.failed();
        assert_eq!(
            outage.admit(),
            Admission::Refuse,
            "just failed: no probe yet"
        );
        // Pretend the last failure was a period ago.
        outage.state.lock().unwrap().last_failure = Some(Instant::now() - PROBE_EVERY);
        assert_eq!(outage.admit(), Admission::Probe);
        assert_eq!(outage.admit(), Admission::Refuse, "one probe at a time");
        outage.recovered();
        assert_eq!(outage.admit(), Admission::Normal);
        assert!(!outage.is_down());
    }

    #[test]
    fn a_failed_probe_keeps_the_breaker_open() {
        let outage = Outage::default();
        outage.failed();
        outage.state.lock().unwrap().last_failure = Some(Instant::now() - PROBE_EVERY);
        assert_eq!(outage.admit(), Admission::Probe);
        outage.failed();
        assert_eq!(outage.admit(), Admission::Refuse);
        assert!(outage.is_down());
    }
}
