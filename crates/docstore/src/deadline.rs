//! `maxTimeMS`: how long a command may run before it is stopped with MongoDB's 50
//! MaxTimeMSExpired ("operation exceeded time limit").
//!
//! The dispatcher reads a command's `maxTimeMS` ([`parse`]) and, around the command's
//! synchronous work, puts its deadline in force on the thread ([`enter`], as
//! `collation::enter` does for a collation). The loops that may run long (collection and index
//! scans, skips, the text index walks, an aggregation's stages, the per-document loops of
//! `distinct` and multi-document writes) take a [`Ticker`] and tick it once per document or
//! key: every [`CHECK_EVERY`] ticks (and at the first) it compares the clock with the
//! deadline, so a check costs a counter decrement almost always and a clock read rarely.
//! Without a deadline a tick is one well-predicted branch. The error unwinds the command like
//! any other, so nothing of it runs on after the answer.
//!
//! Not interrupted midway: one in-memory sort (checked before and after), and the work between
//! two checks (at most [`CHECK_EVERY`] documents or keys).

use crate::error::{Error, ErrorCode, Result};
use bson::Bson;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// Ticks between two looks at the clock. A collection scan matches a document in about a
/// tenth of a microsecond to a few microseconds, so a deadline is noticed within about a
/// millisecond of passing, for a clock read per thousand documents.
pub(crate) const CHECK_EVERY: u32 = 1024;

/// A running command's time limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    /// When the command's time is spent.
    deadline: Instant,
    /// Tests only: how long each check sleeps first (`Config::max_time_check_delay`).
    check_delay: Option<Duration>,
}

impl Limit {
    /// A limit of `max_time` from `started`; `check_delay` as `Config::max_time_check_delay`.
    pub(crate) fn new(
        started: Instant,
        max_time: Duration,
        check_delay: Option<Duration>,
    ) -> Limit {
        Limit {
            deadline: started + max_time,
            check_delay,
        }
    }

    /// MaxTimeMSExpired once the deadline has passed.
    fn check(&self) -> Result<()> {
        if let Some(delay) = self.check_delay {
            std::thread::sleep(delay);
        }
        if Instant::now() >= self.deadline {
            return Err(expired());
        }
        Ok(())
    }
}

/// MongoDB's answer to a command stopped at its `maxTimeMS`.
pub(crate) fn expired() -> Error {
    Error::new(ErrorCode::MaxTimeMSExpired, "operation exceeded time limit")
}

thread_local! {
    /// The time limit of the command running on this thread, if it has one.
    static CURRENT: Cell<Option<Limit>> = const { Cell::new(None) };
}

/// Puts back the limit that was in force when [`enter`] was called.
pub(crate) struct Scope {
    previous: Option<Limit>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// Make `limit` the one in force on this thread until the returned guard drops. Callers keep
/// the guard within synchronous code: a task moved to another thread would leave it behind,
/// and another task run on this one would inherit it.
#[must_use = "the limit is in force only while the guard lives"]
pub(crate) fn enter(limit: Option<Limit>) -> Scope {
    Scope {
        previous: CURRENT.with(|c| c.replace(limit)),
    }
}

/// MaxTimeMSExpired if the command running on this thread has spent its time (between the
/// stages of a pipeline, around a sort).
pub(crate) fn check() -> Result<()> {
    match CURRENT.with(Cell::get) {
        Some(limit) => limit.check(),
        None => Ok(()),
    }
}

/// A loop's view of the thread's time limit, read once when the loop starts: [`Ticker::tick`]
/// once per document or key.
pub(crate) struct Ticker {
    limit: Option<Limit>,
    /// Ticks left before the next look at the clock.
    countdown: u32,
}

impl Ticker {
    /// A ticker for the limit in force on this thread; its first tick looks at the clock.
    pub(crate) fn start() -> Ticker {
        Ticker {
            limit: CURRENT.with(Cell::get),
            countdown: 1,
        }
    }

    /// Count one step; every [`CHECK_EVERY`] steps, MaxTimeMSExpired if the time is spent.
    #[inline]
    pub(crate) fn tick(&mut self) -> Result<()> {
        let Some(limit) = &self.limit else {
            return Ok(());
        };
        self.countdown -= 1;
        if self.countdown > 0 {
            return Ok(());
        }
        self.countdown = CHECK_EVERY;
        limit.check()
    }
}

/// Advance `items` past `n` of them, as `Iterator::skip` would, looking at the clock between
/// every [`CHECK_EVERY`] (a skip along an index's keys may pass hundreds of thousands).
pub(crate) fn skip<I: Iterator>(items: &mut I, n: usize) -> Result<()> {
    let mut left = n;
    while left > 0 {
        check()?;
        let step = left.min(CHECK_EVERY as usize);
        if items.nth(step - 1).is_none() {
            break;
        }
        left -= step;
    }
    Ok(())
}

/// How many `items` there are, as `Iterator::count` would answer, looking at the clock between
/// every [`CHECK_EVERY`] (a count from an index's keys may pass millions).
pub(crate) fn count<I: Iterator>(items: I) -> Result<usize> {
    let mut items = items;
    let mut total = 0;
    loop {
        check()?;
        let counted = items.by_ref().take(CHECK_EVERY as usize).count();
        total += counted;
        if counted < CHECK_EVERY as usize {
            return Ok(total);
        }
    }
}

/// The BSON type names MongoDB's parser expects a number to be one of.
const NUMBER_TYPES: &str = "'[long, int, decimal, double']";

/// A command's `maxTimeMS`, checked as mongod 7.0 checks it: `None` when absent or 0 (no
/// limit); a number of another type than int, long, double or decimal 14 TypeMismatch (null:
/// 2, "must be a number"); a negative value 51024; over 2³¹ − 1 2 "out of range"; a double with
/// a fraction 2 "non-integral value". A double or decimal is first taken as a long, saturating,
/// as mongod's `safeNumberLong` does (the messages show that long).
pub(crate) fn parse(command: &str, value: Option<&Bson>) -> Result<Option<Duration>> {
    let (whole, integral) = match value {
        None => return Ok(None),
        Some(Bson::Int32(n)) => (i64::from(*n), true),
        Some(Bson::Int64(n)) => (*n, true),
        Some(Bson::Double(d)) => (saturating_long(*d), d.fract() == 0.0),
        Some(Bson::Decimal128(d)) => {
            let d = crate::value::decimal_to_f64(d);
            (saturating_long(d), true)
        }
        Some(Bson::Null) => return Err(Error::bad_value("maxTimeMS must be a number")),
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field '{command}.maxTimeMS' is the wrong type '{}', expected types \
                 {NUMBER_TYPES}",
                crate::value::type_name(other)
            )))
        }
    };
    if whole < 0 {
        return Err(Error::location(
            51024,
            format!("BSON field 'maxTimeMS' value must be >= 0, actual value '{whole}'"),
        ));
    }
    if whole > i64::from(i32::MAX) {
        return Err(Error::bad_value(format!(
            "{whole} value for maxTimeMS is out of range"
        )));
    }
    if !integral {
        return Err(Error::bad_value("maxTimeMS has non-integral value"));
    }
    Ok((whole > 0).then(|| Duration::from_millis(whole as u64)))
}

/// `d` as a long the way mongod's `safeNumberLong` takes a double: truncated toward zero,
/// saturating at the ends of the range, NaN as 0.
fn saturating_long(d: f64) -> i64 {
    // Rust's float-to-integer cast truncates, saturates and maps NaN to 0.
    d as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(result: Result<Option<Duration>>) -> i32 {
        result.expect_err("refused").code_number()
    }

    #[test]
    fn max_time_ms_is_read_as_mongod_reads_it() {
        assert_eq!(parse("find", None).unwrap(), None);
        assert_eq!(parse("find", Some(&Bson::Int32(0))).unwrap(), None);
        assert_eq!(
            parse("find", Some(&Bson::Int64(250))).unwrap(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse("find", Some(&Bson::Double(1000.0))).unwrap(),
            Some(Duration::from_millis(1000))
        );
        let fraction = parse("aggregate", Some(&Bson::Double(1000.5))).unwrap_err();
        assert_eq!(fraction.code_number(), 2);
        assert_eq!(fraction.message, "maxTimeMS has non-integral value");
        let negative = parse("aggregate", Some(&Bson::Int32(-1_123_123))).unwrap_err();
        assert_eq!(negative.code_number(), 51024);
        assert_eq!(
            negative.message,
            "BSON field 'maxTimeMS' value must be >= 0, actual value '-1123123'"
        );
        let huge = parse("aggregate", Some(&Bson::Double(f64::MAX))).unwrap_err();
        assert_eq!(huge.code_number(), 2);
        assert_eq!(
            huge.message,
            "9223372036854775807 value for maxTimeMS is out of range"
        );
        assert_eq!(
            code(parse("find", Some(&Bson::Int64(i64::from(i32::MAX) + 1)))),
            2
        );
        assert_eq!(code(parse("find", Some(&Bson::Null))), 2);
        let text = parse("aggregate", Some(&Bson::String("1".into()))).unwrap_err();
        assert_eq!(text.code_number(), 14);
        assert_eq!(
            text.message,
            "BSON field 'aggregate.maxTimeMS' is the wrong type 'string', expected types \
             '[long, int, decimal, double']"
        );
    }

    #[test]
    fn a_ticker_without_a_limit_never_fails_and_with_a_spent_one_fails_at_once() {
        let mut free = Ticker::start();
        for _ in 0..3 * CHECK_EVERY {
            free.tick().unwrap();
        }
        let spent = Limit::new(Instant::now(), Duration::ZERO, None);
        let _scope = enter(Some(spent));
        let mut ticker = Ticker::start();
        assert_eq!(ticker.tick().unwrap_err().code_number(), 50);
        assert_eq!(check().unwrap_err().code_number(), 50);
        assert_eq!(skip(&mut (0..10), 3).unwrap_err().code_number(), 50);
    }

    #[test]
    fn skip_and_count_agree_with_the_iterator_methods() {
        for n in [0, 1, 5, CHECK_EVERY as usize, 3 * CHECK_EVERY as usize + 7] {
            assert_eq!(count(0..n).unwrap(), n);
            for by in [0, 1, n / 2, n, n + 3] {
                let mut items = 0..n;
                skip(&mut items, by).unwrap();
                assert_eq!(items.next(), (0..n).nth(by), "skip {by} of {n}");
            }
        }
    }

    #[test]
    fn a_scope_puts_the_previous_limit_back() {
        let far = Limit::new(Instant::now(), Duration::from_secs(3600), None);
        {
            let _outer = enter(Some(far));
            {
                let _inner = enter(None);
                assert!(check().is_ok());
            }
            assert!(CURRENT.with(Cell::get).is_some());
        }
        assert!(CURRENT.with(Cell::get).is_none());
    }
}
