//! Traffic analytics from pre-aggregated reports: page views are counted off the request path
//! ([`counter`]) into one document per page and day (`stats.daily`) and per page and month
//! (`stats.monthly`), which the admin charts ([`report`], [`svg`]) read without scanning raw hits.
//!
//! A daily document:
//! `{ _id: "20261121//products/x", metadata: { date, path }, daily, hourly: { "0".."23" },
//! minute: { "14": { "0".."59" } } }`; a monthly one:
//! `{ _id: "202611//products/x", metadata: { date, path }, total, daily: { "1".."31" } }`.
//! The `_id` is the day (or month) and the path joined by `/`; paths always begin with `/`, so
//! the id of the catch-all [`OTHER_PATH`] cannot collide with a real page's. Hours and minutes are
//! UTC. Counters are created by the first `$inc` that needs them: a missing one reads as zero.
//!
//! Beside the counters, the traffic log ([`events`]) keeps one document per page view and
//! commerce event, rolled up hour by hour into visitor and view statistics ([`rollup`], with
//! [`hll`] sketches for unique visitors) that the traffic reports ([`traffic`]) read.

pub(crate) mod counter;
pub mod dimensions;
pub mod events;
pub mod hll;
pub mod middleware;
pub mod report;
pub mod rolled;
pub mod rollup;
pub mod sales;
pub mod svg;
pub mod traffic;

use bson::doc;
use chrono::{Datelike, NaiveDate};
use mongodb::IndexModel;

pub use counter::{PageView, PageViewCounter};

/// One document per page and day.
pub const DAILY: &str = "stats.daily";
/// One document per page and month.
pub const MONTHLY: &str = "stats.monthly";

/// Where views of paths beyond `analytics.max_paths_per_day` are counted.
pub const OTHER_PATH: &str = "(other)";

/// A calendar day (UTC), as the reports address it: parsed from `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(NaiveDate);

impl Day {
    /// `2026-11-21`; anything else (including impossible dates such as `2026-02-30`) is `None`.
    pub fn parse(s: &str) -> Option<Day> {
        let s = s.trim();
        // chrono accepts a sign and more digits in the year; the reports want exactly ISO dates.
        if s.len() != 10 || !s.is_ascii() {
            return None;
        }
        NaiveDate::parse_from_str(s, "%Y-%m-%d").ok().map(Day)
    }

    pub(crate) fn from_date(date: NaiveDate) -> Day {
        Day(date)
    }

    /// The UTC day `at` falls in (today, given the site clock's `Db::now`).
    pub(crate) fn of(at: bson::DateTime) -> Day {
        Day(at.to_chrono().date_naive())
    }

    pub(crate) fn date(&self) -> NaiveDate {
        self.0
    }

    pub fn month(&self) -> Month {
        Month {
            year: self.0.year(),
            month: self.0.month(),
        }
    }

    /// `YYYYMMDD`, the first part of a daily document's `_id`.
    pub(crate) fn key(&self) -> String {
        self.0.format("%Y%m%d").to_string()
    }

    /// Midnight UTC, as stored in `metadata.date`.
    pub fn start(&self) -> bson::DateTime {
        bson::DateTime::from_chrono(self.0.and_time(chrono::NaiveTime::MIN).and_utc())
    }

    pub(crate) fn previous(&self) -> Option<Day> {
        self.0.pred_opt().map(Day)
    }

    pub(crate) fn next(&self) -> Option<Day> {
        self.0.succ_opt().map(Day)
    }

    /// `2026-11-21`, as the query string spells it.
    pub(crate) fn iso(&self) -> String {
        self.0.format("%Y-%m-%d").to_string()
    }

    /// `Saturday 21 November 2026`.
    pub(crate) fn long(&self) -> String {
        self.0.format("%A %-d %B %Y").to_string()
    }

    /// `Sat 21`, a chart label.
    pub(crate) fn short(&self) -> String {
        self.0.format("%a %-d").to_string()
    }
}

/// A calendar month, as the reports address it: parsed from `YYYY-MM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Month {
    year: i32,
    month: u32,
}

impl Month {
    /// `2026-11`; anything else is `None`.
    pub fn parse(s: &str) -> Option<Month> {
        let s = s.trim();
        if s.len() != 7 || !s.is_ascii() {
            return None;
        }
        let first = NaiveDate::parse_from_str(&format!("{s}-01"), "%Y-%m-%d").ok()?;
        Some(Day(first).month())
    }

    pub(crate) fn first_day(&self) -> Day {
        // Every Month is built from a valid date, so its first day exists.
        Day(NaiveDate::from_ymd_opt(self.year, self.month, 1).unwrap_or_default())
    }

    /// 28 to 31.
    pub(crate) fn days(&self) -> u32 {
        let next = self
            .next()
            .map(|m| m.first_day().date())
            .unwrap_or(NaiveDate::MAX);
        next.signed_duration_since(self.first_day().date())
            .num_days() as u32
    }

    /// Day `n` (1-based) of the month, if the month has it.
    pub(crate) fn day(&self, n: u32) -> Option<Day> {
        NaiveDate::from_ymd_opt(self.year, self.month, n).map(Day)
    }

    pub(crate) fn previous(&self) -> Option<Month> {
        self.first_day().previous().map(|d| d.month())
    }

    pub(crate) fn next(&self) -> Option<Month> {
        let (year, month) = if self.month == 12 {
            (self.year.checked_add(1)?, 1)
        } else {
            (self.year, self.month + 1)
        };
        NaiveDate::from_ymd_opt(year, month, 1).map(|d| Day(d).month())
    }

    /// `YYYYMM`, the first part of a monthly document's `_id`.
    pub(crate) fn key(&self) -> String {
        format!("{:04}{:02}", self.year, self.month)
    }

    /// The first of the month at midnight UTC, as stored in `metadata.date`.
    pub(crate) fn start(&self) -> bson::DateTime {
        self.first_day().start()
    }

    /// `2026-11`, as the query string spells it.
    pub(crate) fn iso(&self) -> String {
        format!("{:04}-{:02}", self.year, self.month)
    }

    /// `November 2026`.
    pub(crate) fn long(&self) -> String {
        self.first_day().date().format("%B %Y").to_string()
    }
}

/// The `_id` of `path`'s document for `day`.
pub(crate) fn daily_id(day: Day, path: &str) -> String {
    format!("{}/{path}", day.key())
}

/// The `_id` of `path`'s document for `month`.
pub(crate) fn monthly_id(month: Month, path: &str) -> String {
    format!("{}/{path}", month.key())
}

/// The `metadata` of a report document, always built in this field order (`date`, then `path`)
/// so that documents written by any version compare equal as embedded documents.
pub(crate) fn metadata(date: bson::DateTime, path: &str) -> bson::Document {
    doc! { "date": date, "path": path }
}

/// Indexes of both report collections: one page over time (the drill-down and a page's own
/// charts) and every page of one day or month by its count (site totals and top pages).
pub(crate) fn indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder()
            .keys(doc! { "metadata.path": 1, "metadata.date": 1 })
            .build(),
        IndexModel::builder()
            .keys(doc! { "metadata.date": 1, report::RANK_FIELD: -1 })
            .build(),
    ]
}

/// [`indexes`] for the monthly collection, whose documents rank by their `total`.
pub(crate) fn monthly_indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder()
            .keys(doc! { "metadata.path": 1, "metadata.date": 1 })
            .build(),
        IndexModel::builder()
            .keys(doc! { "metadata.date": 1, report::MONTH_RANK_FIELD: -1 })
            .build(),
    ]
}

/// A count as the store returns it (`$sum` gives 32 or 64 bits), 0 when missing.
pub(crate) fn number(value: Option<&bson::Bson>) -> i64 {
    match value {
        Some(bson::Bson::Int32(n)) => i64::from(*n),
        Some(bson::Bson::Int64(n)) => *n,
        Some(bson::Bson::Double(n)) => *n as i64,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_starts_at_its_utc_midnight_before_and_after_1970() {
        let day = 86_400_000;
        let start = |ms| Day::of(bson::DateTime::from_millis(ms)).start();
        assert_eq!(start(day + 5), bson::DateTime::from_millis(day));
        assert_eq!(start(-5), bson::DateTime::from_millis(-day));
    }

    #[test]
    fn dates_parse_only_in_iso_form_and_only_when_they_exist() {
        assert_eq!(
            Day::parse("2026-11-21").map(|d| d.key()),
            Some("20261121".into())
        );
        for bad in [
            "2026-02-30",
            "21/11/2026",
            "2026-1-2",
            "+2026-11-21",
            "",
            "2026-11-21x",
        ] {
            assert_eq!(Day::parse(bad), None, "{bad}");
        }
        assert_eq!(Month::parse("2024-02").map(|m| m.days()), Some(29));
        assert_eq!(Month::parse("2026-12").map(|m| m.days()), Some(31));
        assert_eq!(Month::parse("2026-13"), None);
        assert_eq!(
            Month::parse("2026-12")
                .and_then(|m| m.next())
                .map(|m| m.iso()),
            Some("2027-01".into())
        );
    }

    #[test]
    fn ids_join_the_period_and_the_path() {
        let day = Day::parse("2026-11-21").expect("valid");
        assert_eq!(daily_id(day, "/products/x"), "20261121//products/x");
        assert_eq!(monthly_id(day.month(), "/"), "202611//");
        assert_eq!(daily_id(day, OTHER_PATH), "20261121/(other)");
        let metadata = metadata(day.start(), "/");
        let keys: Vec<&str> = metadata.keys().map(String::as_str).collect();
        assert_eq!(keys, ["date", "path"]);
    }
}
