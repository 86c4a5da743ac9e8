//! Slowing down password guessing: after a few failed logins from one client address, each
//! further attempt from that address waits, twice as long after every failure, up to a cap. A
//! success forgets the address. The table of addresses is bounded, so a client cycling through
//! addresses cannot grow memory without end; the wait happens on the attempting connection's own
//! task (an async sleep), so no other client is held up.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Failed logins an address may have before its attempts are delayed (a person mistyping, a
/// pool of connections all started with an old password).
pub(crate) const FREE_FAILURES: u32 = 5;
/// The wait before the first delayed attempt; it doubles with every further failure.
pub(crate) const FIRST_DELAY: Duration = Duration::from_millis(500);
/// The longest wait: long enough to cut guessing to a trickle (from 170 a second to one every
/// five seconds), short enough that a client who has fixed its password is not locked out.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(5);
/// An address whose last failure is this old starts again with a clean record.
pub(crate) const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Most addresses remembered at once (about 100 bytes each).
pub(crate) const MAX_TRACKED: usize = 10_000;

/// Who failed: an IPv4 address, an IPv6 address's /64 network (one host usually holds a whole
/// /64, so counting single IPv6 addresses would be no limit at all), or the Unix socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Client(Option<IpAddr>);

impl Client {
    pub(crate) fn of(peer: Option<SocketAddr>) -> Client {
        Client(peer.map(|addr| match addr.ip() {
            IpAddr::V4(v4) => IpAddr::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let mut segments = v6.segments();
                    segments[4..].fill(0);
                    IpAddr::V6(segments.into())
                }
            },
        }))
    }
}

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    last_failure: Instant,
    /// The earliest time the next attempt from this client may start: concurrent attempts on
    /// several connections queue one after another instead of all waiting the same delay.
    next_start: Instant,
}

/// The failed-login record of every client that failed recently.
#[derive(Debug, Default)]
pub(crate) struct LoginThrottle {
    clients: Mutex<HashMap<Client, Record>>,
}

/// The wait before an attempt by a client with `failures` failures behind it.
pub(crate) fn delay_after(failures: u32) -> Duration {
    if failures < FREE_FAILURES {
        return Duration::ZERO;
    }
    let doublings = (failures - FREE_FAILURES).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

impl LoginThrottle {
    /// How long `client`'s login attempt starting `now` must wait first; the attempt's turn is
    /// booked, so the next one waits for it.
    pub(crate) fn admit(&self, client: Client, now: Instant) -> Duration {
        let mut clients = self.clients.lock();
        let Some(record) = clients.get_mut(&client) else {
            return Duration::ZERO;
        };
        if now.saturating_duration_since(record.last_failure) >= FORGET_AFTER {
            clients.remove(&client);
            return Duration::ZERO;
        }
        let delay = delay_after(record.failures);
        if delay.is_zero() {
            return Duration::ZERO;
        }
        let start = (record.last_failure + delay)
            .max(record.next_start)
            .max(now);
        record.next_start = start + delay;
        start - now
    }

    /// `client` failed to authenticate at `now`.
    pub(crate) fn failed(&self, client: Client, now: Instant) {
        let mut clients = self.clients.lock();
        if !clients.contains_key(&client) && clients.len() >= MAX_TRACKED {
            make_room(&mut clients, now);
        }
        let record = clients.entry(client).or_insert(Record {
            failures: 0,
            last_failure: now,
            next_start: now,
        });
        if now.saturating_duration_since(record.last_failure) >= FORGET_AFTER {
            record.failures = 0;
        }
        record.failures = record.failures.saturating_add(1);
        record.last_failure = now;
    }

    /// `client` authenticated: its failures are forgiven.
    pub(crate) fn succeeded(&self, client: Client) {
        self.clients.lock().remove(&client);
    }

    /// Clients remembered right now (the tests check the bound on them).
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.clients.lock().len()
    }
}

/// Forget the records that have expired; if none has, the one whose last failure is oldest.
fn make_room(clients: &mut HashMap<Client, Record>, now: Instant) {
    clients.retain(|_, r| now.saturating_duration_since(r.last_failure) < FORGET_AFTER);
    if clients.len() >= MAX_TRACKED {
        let oldest = clients
            .iter()
            .min_by_key(|(_, r)| r.last_failure)
            .map(|(client, _)| *client);
        if let Some(oldest) = oldest {
            clients.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(last: u8) -> Client {
        Client::of(Some(SocketAddr::from(([192, 0, 2, last], 40_000))))
    }

    #[test]
    fn the_first_failures_cost_nothing_and_later_ones_double_up_to_the_cap() {
        let delays: Vec<u64> = (0..12).map(|f| delay_after(f).as_millis() as u64).collect();
        assert_eq!(
            delays,
            vec![0, 0, 0, 0, 0, 500, 1000, 2000, 4000, 5000, 5000, 5000]
        );
        assert_eq!(delay_after(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn an_address_waits_after_five_failures_and_a_success_clears_it() {
        let throttle = LoginThrottle::default();
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES {
            assert_eq!(throttle.admit(client(1), t0), Duration::ZERO);
            throttle.failed(client(1), t0);
        }
        assert_eq!(throttle.admit(client(1), t0), FIRST_DELAY);
        assert_eq!(
            throttle.admit(client(2), t0),
            Duration::ZERO,
            "another address is not delayed"
        );
        throttle.failed(client(1), t0 + FIRST_DELAY);
        assert_eq!(throttle.admit(client(1), t0 + FIRST_DELAY), 2 * FIRST_DELAY);
        throttle.succeeded(client(1));
        assert_eq!(throttle.admit(client(1), t0 + FIRST_DELAY), Duration::ZERO);
    }

    #[test]
    fn concurrent_attempts_from_one_address_queue_behind_each_other() {
        let throttle = LoginThrottle::default();
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES {
            throttle.failed(client(1), t0);
        }
        let waits: Vec<Duration> = (0..3).map(|_| throttle.admit(client(1), t0)).collect();
        assert_eq!(waits, vec![FIRST_DELAY, 2 * FIRST_DELAY, 3 * FIRST_DELAY]);
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_while() {
        let throttle = LoginThrottle::default();
        let t0 = Instant::now();
        for _ in 0..10 {
            throttle.failed(client(1), t0);
        }
        assert_eq!(throttle.admit(client(1), t0 + FORGET_AFTER), Duration::ZERO);
        assert_eq!(throttle.tracked(), 0);
    }

    #[test]
    fn the_table_stays_bounded_when_every_attempt_comes_from_a_new_address() {
        let throttle = LoginThrottle::default();
        let t0 = Instant::now();
        for i in 0..(MAX_TRACKED as u32 + 50) {
            let addr = SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 1));
            throttle.failed(Client::of(Some(addr)), t0 + Duration::from_millis(i.into()));
        }
        assert_eq!(throttle.tracked(), MAX_TRACKED);
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_network() {
        let a: SocketAddr = "[2001:db8:1:2:aaaa::1]:5000".parse().unwrap();
        let b: SocketAddr = "[2001:db8:1:2:bbbb::9]:5001".parse().unwrap();
        let other: SocketAddr = "[2001:db8:1:3::1]:5000".parse().unwrap();
        assert_eq!(Client::of(Some(a)), Client::of(Some(b)));
        assert_ne!(Client::of(Some(a)), Client::of(Some(other)));
        let mapped: SocketAddr = "[::ffff:192.0.2.1]:1".parse().unwrap();
        assert_eq!(Client::of(Some(mapped)), client(1));
    }
}
