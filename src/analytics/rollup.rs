//! Hierarchical roll-ups of the traffic log: hourly, daily, weekly (ISO weeks, Monday to Sunday)
//! and monthly statistics, one document per period for the whole site and one per page and
//! period, each level built from the one below by an aggregation pipeline ending in `$merge`.
//! Events → hourly → daily → weekly, and daily → monthly: an ISO week may span two months, so
//! months are summed from days, not weeks.
//!
//! A document: `{ _id: { at, path }, at, path, view, product_viewed, added_to_cart,
//! checkout_started, order_placed, search, hll: [packed] }` — `path` is `null` for the whole
//! site; the counts are exact; `hll` is the [`super::hll`] sketch of the period's visitors,
//! merged upward by `$group` on the register with `$max` (uniques cannot be summed). Bots are
//! never counted.
//!
//! **Watermarks.** Each level keeps in `traffic.watermarks` the end of the periods it has
//! built (`{ _id: "hour", upto }`). A run builds only closed periods: from its watermark up to
//! the current hour (less [`GRACE`], for events still queued in some instance) for hours, and up
//! to the period holding the level below's watermark for the others, so a day is built only once
//! all its hours are. Every period in that range is recomputed whole from the level below and
//! written with `$merge … whenMatched: "replace"`, and only then is the watermark advanced. A
//! crash between the two (or a second run) recomputes the same periods from the same sources and
//! replaces them with identical documents: nothing is lost or counted twice. One instance rolls
//! up at a time ([`roll_up_under_lease`]); a second at once would also be harmless.
//!
//! Events that reach the log after their hour was rolled up (a clock far behind, a writer stuck
//! longer than [`GRACE`]) stay in the raw reports but not in the roll-ups.

use std::time::Duration;

use bson::{doc, Bson, DateTime, Document};
use chrono::{Datelike, NaiveDate, TimeZone, Timelike, Utc};
use futures::TryStreamExt;
use mongodb::IndexModel;

use super::events::{EVENTS, KINDS};
use crate::db::{Db, DbError};

/// Where each level's watermark is kept.
pub const WATERMARKS: &str = "traffic.watermarks";
/// How long after an hour ends it is rolled up: events are queued for a few seconds before they
/// are written.
pub const GRACE: Duration = Duration::from_secs(120);
/// The lease one instance rolls up under.
pub const LEASE: &str = "traffic.rollup";
/// How long the lease is held at most (a run takes seconds).
const LEASE_FOR: Duration = Duration::from_secs(600);

/// A level of the roll-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Hour,
    Day,
    Week,
    Month,
}

impl Level {
    /// Every level, in the order a run builds them.
    pub const ALL: [Level; 4] = [Level::Hour, Level::Day, Level::Week, Level::Month];

    pub fn collection(self) -> &'static str {
        match self {
            Level::Hour => "traffic.hourly",
            Level::Day => "traffic.daily",
            Level::Week => "traffic.weekly",
            Level::Month => "traffic.monthly",
        }
    }

    /// The `$dateTrunc` unit (and the watermark's `_id`).
    pub fn unit(self) -> &'static str {
        match self {
            Level::Hour => "hour",
            Level::Day => "day",
            Level::Week => "week",
            Level::Month => "month",
        }
    }

    /// The start of the period holding `at` (UTC; weeks start on Monday).
    pub fn truncate(self, at: DateTime) -> DateTime {
        let t = at.to_chrono();
        let day = t.date_naive();
        let start = match self {
            Level::Hour => day.and_hms_opt(t.hour(), 0, 0),
            Level::Day => day.and_hms_opt(0, 0, 0),
            Level::Week => (day
                - chrono::Duration::days(i64::from(day.weekday().num_days_from_monday())))
            .and_hms_opt(0, 0, 0),
            Level::Month => NaiveDate::from_ymd_opt(day.year(), day.month(), 1)
                .and_then(|d| d.and_hms_opt(0, 0, 0)),
        };
        start.map_or(at, |s| DateTime::from_chrono(Utc.from_utc_datetime(&s)))
    }

    /// The level a level is built from (`None`: the events themselves).
    fn source(self) -> Option<Level> {
        match self {
            Level::Hour => None,
            Level::Day => Some(Level::Hour),
            Level::Week | Level::Month => Some(Level::Day),
        }
    }
}

/// Indexes of every roll-up collection: the periods of a range (the next level's `$match`, top
/// pages) and one page's (or the site's, `path: null`) periods of a range.
pub fn indexes() -> Vec<(&'static str, Vec<IndexModel>)> {
    Level::ALL
        .iter()
        .map(|level| {
            (
                level.collection(),
                vec![
                    IndexModel::builder().keys(doc! { "at": 1 }).build(),
                    IndexModel::builder()
                        .keys(doc! { "path": 1, "at": 1 })
                        .build(),
                ],
            )
        })
        .collect()
}

/// What one run built: each level that had periods due, with their range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollupReport {
    pub built: Vec<Built>,
}

/// One level's periods built by a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub level: Level,
    pub from: DateTime,
    pub to: DateTime,
    /// How long the level's pipeline took.
    pub took: Duration,
}

/// Where a test stops a run, as a crash would: after `Level`'s `$merge`, before its watermark.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashAfter {
    Never,
    Merge(Level),
}

/// Build every level up to `now` (see the module header).
pub async fn roll_up(db: &Db, now: DateTime) -> Result<RollupReport, DbError> {
    roll_up_crashing(db, now, CrashAfter::Never).await
}

/// [`roll_up`] that stops as a crash would at `crash` (tests).
#[doc(hidden)]
pub async fn roll_up_crashing(
    db: &Db,
    now: DateTime,
    crash: CrashAfter,
) -> Result<RollupReport, DbError> {
    let mut report = RollupReport::default();
    for level in Level::ALL {
        let from = watermark(db, level)
            .await?
            .unwrap_or(DateTime::from_millis(0));
        let to = match level.source() {
            None => Level::Hour.truncate(crate::clock::before(now, GRACE)),
            Some(source) => match watermark(db, source).await? {
                Some(upto) => level.truncate(upto),
                None => continue,
            },
        };
        if to <= from {
            continue;
        }
        let pipeline = match level.source() {
            None => from_events(from, to),
            Some(_) => from_level(level, from, to),
        };
        let source = level.source().map_or(EVENTS, Level::collection);
        let started = std::time::Instant::now();
        db.collection::<Document>(source)
            .aggregate(pipeline)
            .await?
            .try_collect::<Vec<_>>()
            .await?;
        if crash == CrashAfter::Merge(level) {
            return Err(DbError::Invalid(format!(
                "roll-up stopped after the {} merge (test)",
                level.unit()
            )));
        }
        db.collection::<Document>(WATERMARKS)
            .update_one(
                doc! { "_id": level.unit() },
                doc! { "$set": { "upto": to } },
            )
            .upsert(true)
            .await?;
        report.built.push(Built {
            level,
            from,
            to,
            took: started.elapsed(),
        });
    }
    Ok(report)
}

/// [`roll_up`] by whichever instance holds the roll-up lease; `None` when another holds it.
pub async fn roll_up_under_lease(db: &Db) -> Result<Option<RollupReport>, DbError> {
    roll_up_under_lease_at(db, db.now()).await
}

/// [`roll_up_under_lease`] as of `now` (`bazaar traffic-rollup --now`).
pub async fn roll_up_under_lease_at(
    db: &Db,
    now: DateTime,
) -> Result<Option<RollupReport>, DbError> {
    let Some(lease) = crate::db::lease::try_take_here(db, LEASE, LEASE_FOR).await? else {
        return Ok(None);
    };
    let report = roll_up(db, now).await;
    lease.release(db).await?;
    report.map(Some)
}

/// How far `level` is built (the end of its last built period).
pub async fn watermark(db: &Db, level: Level) -> Result<Option<DateTime>, DbError> {
    let found = db
        .collection::<Document>(WATERMARKS)
        .find_one(doc! { "_id": level.unit() })
        .await?;
    Ok(found.and_then(|d| d.get_datetime("upto").ok().copied()))
}

/// `$sum` of one kind's events.
fn kind_sums() -> Document {
    let mut sums = Document::new();
    for kind in KINDS {
        sums.insert(
            kind,
            doc! { "$sum": { "$cond": [{ "$eq": ["$kind", kind] }, 1, 0] } },
        );
    }
    sums
}

/// `{ kind: { op: "$kind" } }` for every kind.
fn kinds_with(op: &str) -> Document {
    let mut fields = Document::new();
    for kind in KINDS {
        fields.insert(kind, doc! { op: format!("${kind}") });
    }
    fields
}

fn merge_into(level: Level) -> Document {
    doc! { "$merge": {
        "into": level.collection(),
        "on": "_id",
        "whenMatched": "replace",
        "whenNotMatched": "insert",
    } }
}

fn truncated(unit: &str) -> Document {
    let mut trunc = doc! { "date": "$at", "unit": unit };
    if unit == "week" {
        trunc.insert("startOfWeek", "monday");
    }
    doc! { "$dateTrunc": trunc }
}

/// The register of a packed sketch value.
fn register(field: &str) -> Document {
    doc! { "$floor": { "$divide": [field, super::hll::RANK_SPAN] } }
}

/// Hours `[from, to)` from the events: per hour, once for the site (`path: null`) and once per
/// page, the count of each kind and the visitors' sketch.
fn from_events(from: DateTime, to: DateTime) -> Vec<Document> {
    let mut by_register = doc! {
        "_id": { "at": "$at", "path": "$scope", "r": register("$hll") },
        "hll": { "$max": "$hll" },
    };
    by_register.extend(kind_sums());
    let mut by_period = doc! {
        "_id": { "at": "$_id.at", "path": "$_id.path" },
        "hll": { "$push": "$hll" },
    };
    by_period.extend(kinds_with("$sum"));
    vec![
        doc! { "$match": { "at": { "$gte": from, "$lt": to }, "bot": false } },
        doc! { "$project": {
            "at": truncated("hour"), "kind": 1, "hll": 1, "scope": [Bson::Null, "$path"],
        } },
        doc! { "$unwind": "$scope" },
        doc! { "$group": by_register },
        doc! { "$group": by_period },
        doc! { "$set": { "at": "$_id.at", "path": "$_id.path" } },
        merge_into(Level::Hour),
    ]
}

/// Periods of `level` in `[from, to)` from the level below's documents: counts summed, sketches merged
/// register by register.
fn from_level(level: Level, from: DateTime, to: DateTime) -> Vec<Document> {
    let mut by_period = doc! {
        "_id": { "at": "$at", "path": "$path" },
        "sketches": { "$push": "$hll" },
    };
    by_period.extend(kinds_with("$sum"));
    let mut by_register = doc! {
        "_id": { "at": "$_id.at", "path": "$_id.path", "r": register("$sketches") },
        "hll": { "$max": "$sketches" },
    };
    by_register.extend(kinds_with("$first"));
    let mut merged = doc! {
        "_id": { "at": "$_id.at", "path": "$_id.path" },
        "hll": { "$push": "$hll" },
    };
    merged.extend(kinds_with("$first"));
    let mut projected = doc! { "at": truncated(level.unit()), "path": 1, "hll": 1 };
    for kind in KINDS {
        projected.insert(kind, 1);
    }
    vec![
        doc! { "$match": { "at": { "$gte": from, "$lt": to } } },
        doc! { "$project": projected },
        doc! { "$group": by_period },
        // A list of sketches, flattened to their packed values (a period without visitors
        // keeps one row, so its counts are not lost).
        doc! { "$unwind": { "path": "$sketches", "preserveNullAndEmptyArrays": true } },
        doc! { "$unwind": { "path": "$sketches", "preserveNullAndEmptyArrays": true } },
        doc! { "$group": by_register },
        doc! { "$group": merged },
        doc! { "$set": {
            "at": "$_id.at",
            "path": "$_id.path",
            "hll": { "$filter": { "input": "$hll", "cond": { "$ne": ["$$this", Bson::Null] } } },
        } },
        merge_into(level),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, m: u32, d: u32, h: u32, mi: u32) -> DateTime {
        DateTime::from_chrono(
            Utc.with_ymd_and_hms(y, m, d, h, mi, 7)
                .single()
                .expect("valid"),
        )
    }

    #[test]
    fn periods_start_at_the_hour_the_day_the_iso_monday_and_the_first_of_the_month() {
        let t = at(2026, 12, 2, 13, 45); // a Wednesday
        assert_eq!(
            Level::Hour.truncate(t),
            at(2026, 12, 2, 13, 0)
                .to_chrono()
                .with_second(0)
                .map(DateTime::from_chrono)
                .expect("t")
        );
        assert_eq!(
            Level::Day.truncate(t).to_chrono().to_rfc3339(),
            "2026-12-02T00:00:00+00:00"
        );
        // The ISO week of 2 December 2026 began on Monday 30 November.
        assert_eq!(
            Level::Week.truncate(t).to_chrono().to_rfc3339(),
            "2026-11-30T00:00:00+00:00"
        );
        assert_eq!(
            Level::Month.truncate(t).to_chrono().to_rfc3339(),
            "2026-12-01T00:00:00+00:00"
        );
        let sunday = at(2026, 12, 6, 23, 59);
        assert_eq!(
            Level::Week.truncate(sunday).to_chrono().to_rfc3339(),
            "2026-11-30T00:00:00+00:00"
        );
    }
}
