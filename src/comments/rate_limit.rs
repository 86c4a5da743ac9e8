//! How many comments one client address may post per minute: a sliding window per address,
//! held in this process's memory (several instances behind a balancer each count their own).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);
/// Above this many tracked addresses, idle ones are dropped so the map cannot grow without end.
const PRUNE_ABOVE: usize = 10_000;

pub(crate) struct CommentRateLimit {
    per_minute: u32,
    recent: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl CommentRateLimit {
    /// `per_minute` of 0 turns the limit off.
    pub(crate) fn new(per_minute: u32) -> CommentRateLimit {
        CommentRateLimit {
            per_minute,
            recent: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Count one comment from `client` now; false (and nothing counted) when the address
    /// already posted its allowance in the last minute.
    pub(crate) fn try_acquire(&self, client: IpAddr) -> bool {
        self.try_acquire_at(client, Instant::now())
    }

    fn try_acquire_at(&self, client: IpAddr, now: Instant) -> bool {
        if self.per_minute == 0 {
            return true;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() > PRUNE_ABOVE {
            recent.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.duration_since(*t) < WINDOW)
            });
        }
        let times = recent.entry(client).or_default();
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            times.pop_front();
        }
        if times.len() >= self.per_minute as usize {
            return false;
        }
        times.push_back(now);
        true
    }

    /// Give back a counted comment that was not stored after all (a form error after the
    /// check), so a visitor fixing a typo is not locked out.
    pub(crate) fn release(&self, client: IpAddr) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(times) = recent.get_mut(&client) {
            times.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_allowance_per_minute() {
        let limit = CommentRateLimit::new(2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        assert!(limit.try_acquire_at(a, t0));
        assert!(limit.try_acquire_at(a, t0 + Duration::from_secs(1)));
        assert!(!limit.try_acquire_at(a, t0 + Duration::from_secs(2)));
        assert!(limit.try_acquire_at(b, t0 + Duration::from_secs(2)));
        assert!(limit.try_acquire_at(a, t0 + Duration::from_secs(61)));
    }

    #[test]
    fn zero_turns_the_limit_off() {
        let limit = CommentRateLimit::new(0);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        assert!((0..100).all(|_| limit.try_acquire(a)));
    }
}
