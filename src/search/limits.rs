//! Bounds on site search, the one public page whose cost the visitor chooses: a phrase or
//! negation search over a large catalog takes the store a noticeable fraction of a second, so
//! a few clients repeating them could slow every other page. Two limits, from `[search]` in
//! the config:
//! - at most `search.max_concurrent` searches run at once; another waits up to
//!   `search.max_wait_ms` for a slot, then gets a 503 "Search is busy" page with `Retry-After`;
//! - each client address may start `search.per_client_per_minute` searches a minute (a token
//!   bucket, so a short burst is fine); beyond that it gets a 429 page with `Retry-After`.
//!
//! Registered by start-up as app data of its own (the search area's helper, like the comment
//! rate limit), and taken from the request by [`super::pages::results`].

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::SearchSettings;
use crate::web::rate_limit::RateLimiter;

pub struct SearchLimits {
    slots: Arc<Semaphore>,
    max_concurrent: usize,
    max_wait: Duration,
    per_client: RateLimiter,
    per_minute: u32,
}

impl SearchLimits {
    pub(crate) fn new(settings: &SearchSettings) -> SearchLimits {
        let max_concurrent = settings.max_concurrent.max(1);
        SearchLimits {
            slots: Arc::new(Semaphore::new(max_concurrent)),
            max_concurrent,
            max_wait: settings.max_wait,
            per_client: RateLimiter::new(settings.per_client_per_minute, Duration::from_secs(60)),
            per_minute: settings.per_client_per_minute.max(1),
        }
    }

    /// Searches one address may start a minute.
    pub(crate) fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Seconds until an address that has used its allowance may search again (one search's
    /// worth of refill, rounded up).
    pub(crate) fn retry_after_secs(&self) -> u64 {
        60u64.div_ceil(u64::from(self.per_minute)).max(1)
    }

    /// How long a search waits for a slot (`search.max_wait_ms`); also how long it waits for
    /// the same search run by another visitor (see [`super::cache::turn`]).
    pub(crate) fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Count one search from `client`; false when it is over its allowance.
    pub(crate) fn allow(&self, client: Option<IpAddr>) -> bool {
        self.per_client.allow(client)
    }

    /// A slot to run one search in, waiting up to `search.max_wait_ms`; `None` when every
    /// slot stayed busy. The search runs while the permit is held.
    pub(crate) async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        let acquire = Arc::clone(&self.slots).acquire_owned();
        match tokio::time::timeout(self.max_wait, acquire).await {
            Ok(Ok(permit)) => Some(permit),
            _ => None,
        }
    }

    /// Every slot at once, waiting for running searches to finish: while it is held no search
    /// runs (tests use it to see the busy page; maintenance could).
    pub async fn hold_all(&self) -> Option<OwnedSemaphorePermit> {
        let all = u32::try_from(self.max_concurrent).ok()?;
        Arc::clone(&self.slots).acquire_many_owned(all).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_concurrent: usize, per_minute: u32) -> SearchLimits {
        SearchLimits::new(&SearchSettings {
            max_concurrent,
            max_wait: Duration::from_millis(20),
            per_client_per_minute: per_minute,
        })
    }

    #[tokio::test]
    async fn a_search_waits_briefly_for_a_slot_then_gives_up() {
        let limits = limits(2, 60);
        let first = limits.slot().await.expect("a free slot");
        let second = limits.slot().await.expect("a second free slot");
        assert!(limits.slot().await.is_none(), "both slots are taken");
        drop(first);
        assert!(limits.slot().await.is_some(), "a slot came free");
        drop(second);
    }

    #[test]
    fn an_address_over_its_allowance_is_told_when_to_come_back() {
        let limits = limits(1, 3);
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        assert!((0..3).all(|_| limits.allow(a)));
        assert!(!limits.allow(a));
        assert!(limits.allow(Some(IpAddr::from([10, 0, 0, 2]))));
        assert_eq!(limits.retry_after_secs(), 20);
    }
}
