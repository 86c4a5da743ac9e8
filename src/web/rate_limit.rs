//! Per-client-address rate limits kept in memory: a token bucket for each address, refilled
//! steadily, in a table bounded in size so a flood from many addresses cannot grow it without
//! limit. The address is the TCP peer: behind a reverse proxy every visitor shares the proxy's,
//! so limits there should be generous (forwarded headers are not trusted, as anyone can send
//! them).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses tracked at once; beyond this the fullest buckets (idle longest) are forgotten.
const MAX_TRACKED: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// At most `burst` events per address at once, refilled at `burst` per `period`.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    burst: f64,
    period: Duration,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl RateLimiter {
    pub(crate) fn new(burst: u32, period: Duration) -> RateLimiter {
        RateLimiter {
            burst: f64::from(burst.max(1)),
            period: period.max(Duration::from_millis(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn refilled(&self, bucket: Bucket, now: Instant) -> f64 {
        let elapsed = now.duration_since(bucket.updated).as_secs_f64();
        (bucket.tokens + elapsed * self.burst / self.period.as_secs_f64()).min(self.burst)
    }

    /// Whether `client` may do one more now (and count it if so). Requests without a known
    /// address share one bucket.
    pub(crate) fn allow(&self, client: Option<IpAddr>) -> bool {
        let client = client.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let now = Instant::now();
        let Ok(mut buckets) = self.buckets.lock() else {
            return true;
        };
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(&client) {
            buckets.retain(|_, b| self.refilled(*b, now) < self.burst);
            if buckets.len() >= MAX_TRACKED {
                if let Some(oldest) = buckets
                    .iter()
                    .min_by_key(|(_, b)| b.updated)
                    .map(|(a, _)| *a)
                {
                    buckets.remove(&oldest);
                }
            }
        }
        let bucket = buckets.entry(client).or_insert(Bucket {
            tokens: self.burst,
            updated: now,
        });
        let tokens = self.refilled(*bucket, now);
        if tokens >= 1.0 {
            *bucket = Bucket {
                tokens: tokens - 1.0,
                updated: now,
            };
            true
        } else {
            *bucket = Bucket {
                tokens,
                updated: now,
            };
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_gets_its_own_burst() {
        let limiter = RateLimiter::new(2, Duration::from_secs(3600));
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        let b = Some(IpAddr::from([10, 0, 0, 2]));
        assert!(limiter.allow(a));
        assert!(limiter.allow(a));
        assert!(!limiter.allow(a));
        assert!(limiter.allow(b));
    }

    #[test]
    fn the_bucket_refills_over_the_period() {
        let limiter = RateLimiter::new(1, Duration::from_millis(50));
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        assert!(limiter.allow(a));
        assert!(!limiter.allow(a));
        std::thread::sleep(Duration::from_millis(80));
        assert!(limiter.allow(a));
    }
}
