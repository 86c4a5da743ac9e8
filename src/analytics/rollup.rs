//! Hierarchical roll-ups of the traffic log: hourly, daily, weekly (ISO weeks, Monday to Sunday)
//! and monthly statistics, one document per period for the whole site and one per page and
//! period, each level built from the one below. Events → hourly → daily → weekly, and daily →
//! monthly: an ISO week may span two months, so months are summed from days, not weeks.
//!
//! A document: `{ _id: { at, path }, at, path, view, product_viewed, added_to_cart,
//! checkout_started, order_placed, search, hll: [packed] }` — `path` is `null` for the whole
//! site; the counts are exact; `hll` is the [`super::hll`] sketch of the period's visitors
//! (uniques cannot be summed: sketches are merged upward, register by register). Bots are never
//! counted.
//!
//! **How a level is built.** An aggregation pipeline over the level below (the events for
//! hours) groups its documents by period and page, summing the counts and pushing the packed
//! sketch values; the app then compacts each period's values to its sketch ([`hll::compact`])
//! and adds the page periods up into the site's. The store groups each source document once:
//! the first version merged sketches inside the pipeline (`$unwind` every packed value, `$group`
//! by register with `$max`, regroup by period), twice over (pages and site), and ended in a
//! `$merge` looking up every period; building a month of 1 000 000 events took 168 s that way
//! (docs/data-model.md has the figures now).
//!
//! **Watermarks.** Each level keeps in `traffic.watermarks` the end of the periods it has
//! built (`{ _id: "hour", upto }`). A run builds only closed periods: from its watermark up to
//! the current hour (less [`GRACE`], for events still queued in some instance) for hours, and up
//! to the period holding the level below's watermark for the others, so a day is built only once
//! all its hours are. Every period in that range is recomputed whole from the level below; the
//! level's documents in the range (none, unless a run crashed before its watermark) are deleted
//! and the new ones inserted (a period another run inserted meanwhile is left as it is: it is the
//! same document), and only then is the watermark advanced. A crash anywhere before
//! that (or a second run) recomputes the same periods from the same sources and replaces them
//! with identical documents: nothing is lost or counted twice. One instance rolls up at a time
//! ([`roll_up_under_lease`]); a second at once would also be harmless.
//!
//! **Catching up.** A run that finds weeks due (the roll-up was off, every instance down) builds
//! them a stretch at a time: a day of hours, a week of days, eight weeks of weeks (months in one
//! go), each stretch's documents and watermark written before the next stretch is read, so a
//! run holds one stretch in memory, not the whole retention (the dimension documents are still
//! built in one step, see [`dimensions_once`]). A stretch starts at the first document below it, so a first run starts at
//! the oldest event.
//!
//! **Dimensions.** After the four levels, a run builds the documents of what the report's
//! tables group by ([`super::dimensions`]): the hours rolled up since its `hours` watermark from
//! the events, then the days those close from their hours, with the same delete, insert, then
//! watermark steps (both of its watermarks, `upto` and `hours`, in one write).
//!
//! Events that reach the log after their hour was rolled up (a clock far behind, a writer stuck
//! longer than [`GRACE`]) stay in the raw reports but not in the roll-ups.

use std::collections::HashMap;
use std::time::Duration;

use bson::{doc, Bson, DateTime, Document};
use chrono::{Datelike, NaiveDate, TimeZone, Timelike, Utc};
use futures::TryStreamExt;
use mongodb::IndexModel;

use super::events::{EVENTS, KINDS};
use super::{dimensions, hll, number};
use crate::db::lease::Lease;
use crate::db::{Db, DbError};

/// Where each level's watermark is kept.
pub const WATERMARKS: &str = "traffic.watermarks";
/// How long after an hour ends it is rolled up: events are queued for a few seconds before they
/// are written.
pub(crate) const GRACE: Duration = Duration::from_secs(120);
/// The lease one instance rolls up under.
pub const LEASE: &str = "traffic.rollup";
/// How long the lease is held at most without renewal; a run renews it after every stretch (a
/// run takes seconds; a catch-up over weeks, a minute or more).
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
    pub(crate) fn truncate(self, at: DateTime) -> DateTime {
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

    /// The most of this level one step of a run builds (see [`stretch_end`]): periods of the
    /// level below add up in memory until the stretch is written. Whole days, weeks from a
    /// Monday, so a stretch ends on a period boundary; months, of uneven length, are built in
    /// one stretch (from days: a year of them is a few hundred documents a page).
    fn stretch(self) -> Option<Duration> {
        match self {
            Level::Hour => Some(DAY),
            Level::Day => Some(7 * DAY),
            Level::Week => Some(8 * 7 * DAY),
            Level::Month => None,
        }
    }

    /// The collection this level is built from: the level below's, or the events.
    fn source_collection(self) -> &'static str {
        self.source().map_or(EVENTS, Level::collection)
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
/// With them, the dimension documents' ([`dimensions::indexes`], daily and hourly).
pub fn indexes() -> Vec<(&'static str, Vec<IndexModel>)> {
    let levels = Level::ALL.iter().map(|level| {
        (
            level.collection(),
            vec![
                IndexModel::builder().keys(doc! { "at": 1 }).build(),
                IndexModel::builder()
                    .keys(doc! { "path": 1, "at": 1 })
                    .build(),
            ],
        )
    });
    levels.chain(dimensions::indexes()).collect()
}

/// What one run built: each level that had periods due, with their range, and the days of
/// dimension documents ([`super::dimensions`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollupReport {
    pub built: Vec<Built>,
    /// `(from, to, took)` of the daily dimension documents built, if a day closed.
    pub dimensions: Option<(DateTime, DateTime, Duration)>,
    /// `(from, to, took)` of the hours of dimension documents built, if any were due.
    pub dimension_hours: Option<(DateTime, DateTime, Duration)>,
}

/// One level's periods built by a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub level: Level,
    pub(crate) from: DateTime,
    pub(crate) to: DateTime,
    /// How long the level's pipeline took.
    pub took: Duration,
    /// How many stretches ([`Level::stretch`]) the run built the periods in.
    pub stretches: usize,
}

/// Where a test stops a run, as a crash would: after some of a level's documents are written,
/// before their watermark.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashAfter {
    Never,
    /// After the first stretch of `Level`'s documents.
    Merge(Level),
    /// After the `n`th stretch (from 1) of `Level`'s documents, the earlier stretches' watermarks
    /// written.
    Stretch(Level, usize),
    /// After the first day's dimension documents are written, before their watermark.
    Dimensions,
}

impl CrashAfter {
    /// Whether a run stops after stretch `n` (from 1) of `level`.
    fn after_stretch(self, level: Level, n: usize) -> bool {
        match self {
            CrashAfter::Merge(l) => l == level && n == 1,
            CrashAfter::Stretch(l, at) => l == level && n == at,
            CrashAfter::Never | CrashAfter::Dimensions => false,
        }
    }
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
    run(db, now, crash, None).await
}

/// Renew `lease` (when the run holds one) after a stretch: a catch-up can outlast
/// [`LEASE_FOR`]. `false`: the lease was lost (another instance took it over after it lapsed),
/// so this run stops and leaves the rest to that one.
async fn still_ours(db: &Db, lease: &mut Option<&mut Lease>) -> Result<bool, DbError> {
    match lease {
        Some(lease) => lease.renew(db, LEASE_FOR).await,
        None => Ok(true),
    }
}

/// The run behind [`roll_up`] and [`roll_up_under_lease`] (which gives its `lease`).
async fn run(
    db: &Db,
    now: DateTime,
    crash: CrashAfter,
    mut lease: Option<&mut Lease>,
) -> Result<RollupReport, DbError> {
    let mut report = RollupReport::default();
    for level in Level::ALL {
        let to = match level.source() {
            None => Level::Hour.truncate(crate::clock::before(now, GRACE)),
            Some(source) => match watermark(db, source).await? {
                Some(upto) => level.truncate(upto),
                None => continue,
            },
        };
        // A first run starts at the period of the oldest document below (none: nothing to do).
        let mut from = match watermark(db, level).await? {
            Some(upto) => upto,
            None => {
                match first_at(db, level.source_collection(), DateTime::from_millis(0)).await? {
                    Some(first) => level.truncate(first),
                    None => continue,
                }
            }
        };
        let started = std::time::Instant::now();
        let mut stretches = 0;
        while from < to {
            let upto = stretch_end(db, level, from, to).await?;
            let periods = build(db, level, from, upto).await?;
            replace(db, level, from, upto, periods).await?;
            stretches += 1;
            if crash.after_stretch(level, stretches) {
                return Err(DbError::Invalid(format!(
                    "roll-up stopped after stretch {stretches} of the {} merge (test)",
                    level.unit()
                )));
            }
            set_watermark(db, level.unit(), doc! { "upto": upto }).await?;
            match report.built.last_mut() {
                Some(built) if built.level == level => built.to = upto,
                _ => report.built.push(Built {
                    level,
                    from,
                    to: upto,
                    took: Duration::ZERO,
                    stretches: 0,
                }),
            }
            from = upto;
            if !still_ours(db, &mut lease).await? {
                return Ok(report);
            }
        }
        if let Some(built) = report.built.last_mut().filter(|b| b.level == level) {
            built.took = started.elapsed();
            built.stretches = stretches;
        }
    }
    if let Some(hours) = watermark(db, Level::Hour).await? {
        dimensions_once(db, hours, crash, &mut report).await?;
    }
    Ok(report)
}

/// Move watermark `name` forward to `upto` (each field of it; `$max`, so a run that lost its
/// lease and ends late never moves a watermark back over what another run built since).
async fn set_watermark(db: &Db, name: &str, upto: Document) -> Result<(), DbError> {
    db.collection::<Document>(WATERMARKS)
        .update_one(doc! { "_id": name }, doc! { "$max": upto })
        .upsert(true)
        .await?;
    Ok(())
}

/// Where the stretch of `level` a run builds next, from `from` (the level's watermark) towards
/// `to`, ends: a catch-up over weeks (the roll-up off, every instance down) is built a bounded
/// stretch at a time ([`Level::stretch`]), each stretch's watermark written before the next is
/// read, so a run holds at most a stretch of periods in memory. Periods with nothing below them
/// make no documents, so a stretch starts at the first source document at or after `from` (a
/// first run starts at the oldest event, not in 1970); `[from, start)` is still part of the
/// stretch, so a crashed run's documents there are deleted as before.
async fn stretch_end(
    db: &Db,
    level: Level,
    from: DateTime,
    to: DateTime,
) -> Result<DateTime, DbError> {
    let Some(stretch) = level.stretch() else {
        return Ok(to);
    };
    let Some(first) = first_at(db, level.source_collection(), from).await? else {
        return Ok(to);
    };
    // `from` is a period's start (a watermark, or a first run's first period), so is `start`.
    let start = level.truncate(first).max(from);
    if start >= to {
        return Ok(to);
    }
    Ok(DateTime::from_millis(start.timestamp_millis() + stretch.as_millis() as i64).min(to))
}

/// The time of the first document of `collection` at or after `from` (its `at` index).
async fn first_at(db: &Db, collection: &str, from: DateTime) -> Result<Option<DateTime>, DbError> {
    let first = db
        .collection::<Document>(collection)
        .find_one(doc! { "at": { "$gte": from } })
        .sort(doc! { "at": 1 })
        .projection(doc! { "_id": 0, "at": 1 })
        .await?;
    Ok(first.and_then(|d| d.get_datetime("at").ok().copied()))
}

/// The dimension documents up to the hourly roll-ups' watermark `hours`, in one step
/// ([`dimensions_up_to`]). The stored hours of the days closed before this run are deleted
/// first (not the hours of the days it closes: a run that lost its lease may still read them).
/// Unlike the levels, this step is not cut into stretches: a day-at-a-time version failed the
/// SIGKILL test (`traffic::a_roll_up_killed_with_sigkill_…`) once in a few runs, cause not found.
async fn dimensions_once(
    db: &Db,
    hours: DateTime,
    crash: CrashAfter,
    report: &mut RollupReport,
) -> Result<(), DbError> {
    let (days_upto, _) = dimension_watermarks(db).await?;
    let closed_before = days_upto.unwrap_or(DateTime::from_millis(0));
    db.collection::<Document>(dimensions::HOURLY)
        .delete_many(doc! { "at": { "$lt": closed_before } })
        .await?;
    dimensions_up_to(db, hours, crash, report).await
}

/// The length of a UTC day (stretches are counted in days).
const DAY: Duration = Duration::from_secs(86_400);

/// Widen `slot` (a report's `(from, to, took)`) by one more step of the same run.
fn widen(
    slot: &mut Option<(DateTime, DateTime, Duration)>,
    from: DateTime,
    to: DateTime,
    took: Duration,
) {
    *slot = Some(match slot.take() {
        Some((first, _, before)) => (first, to, before + took),
        None => (from, to, took),
    });
}

/// The dimension documents ([`super::dimensions`]) up to `hour_to` (at most the hourly roll-ups'
/// watermark; see [`dimensions_once`]): the hours since their own watermark
/// from the events, then every day those close from its hours (the ones stored by earlier steps
/// and this step's), in one step: the days' and the open day's hours' documents replaced, then
/// both watermarks set in one write. The stored hours the days read are deleted only by a later
/// step, once the days' watermark is past them, so a re-run or a run after a crash reads the
/// same sources; the hours of a day closed in the same step are never written.
async fn dimensions_up_to(
    db: &Db,
    hour_to: DateTime,
    crash: CrashAfter,
    report: &mut RollupReport,
) -> Result<(), DbError> {
    let (days_upto, hours_upto) = dimension_watermarks(db).await?;
    let day_from = days_upto.unwrap_or(DateTime::from_millis(0));
    let hourly = db.collection::<Document>(dimensions::HOURLY);
    // A store whose dimensions were built by days only: its hours start where its days end.
    let hour_from = hours_upto.map_or(day_from, |h| h.max(day_from));
    if hour_to <= hour_from {
        return Ok(());
    }
    let day_to = Level::Day.truncate(hour_to).max(day_from);
    let started = std::time::Instant::now();
    let built = dimensions::build_hours(db, hour_from, hour_to).await?;
    let (closed, open) = built.split_before(day_to);
    let daily = db.collection::<Document>(dimensions::DIMENSIONS);
    if day_to > day_from {
        let earlier = dimensions::stored_hours(db, day_from, hour_from.min(day_to)).await?;
        let documents = dimensions::days([earlier, closed]);
        daily
            .delete_many(doc! { "at": { "$gte": day_from, "$lt": day_to } })
            .await?;
        insert_all(&daily, documents).await?;
    }
    hourly
        .delete_many(doc! { "at": { "$gte": hour_from, "$lt": hour_to } })
        .await?;
    insert_all(&hourly, open.documents()).await?;
    if crash == CrashAfter::Dimensions {
        return Err(DbError::Invalid(
            "roll-up stopped after the dimension documents (test)".into(),
        ));
    }
    let mut set = doc! { "hours": hour_to };
    if day_to > day_from {
        set.insert("upto", day_to);
    }
    set_watermark(db, dimensions::WATERMARK, set).await?;
    let took = started.elapsed();
    widen(&mut report.dimension_hours, hour_from, hour_to, took);
    if day_to > day_from {
        widen(&mut report.dimensions, day_from, day_to, took);
    }
    Ok(())
}

/// How far the daily and the hourly dimension documents are built (`upto` and `hours` of the
/// [`dimensions::WATERMARK`] watermark).
pub async fn dimension_watermarks(
    db: &Db,
) -> Result<(Option<DateTime>, Option<DateTime>), DbError> {
    let found = db
        .collection::<Document>(WATERMARKS)
        .find_one(doc! { "_id": dimensions::WATERMARK })
        .await?;
    let at = |field: &str| {
        found
            .as_ref()
            .and_then(|d| d.get_datetime(field).ok().copied())
    };
    Ok((at("upto"), at("hours")))
}

/// [`roll_up`] by whichever instance holds the roll-up lease; `None` when another holds it.
pub async fn roll_up_under_lease(db: &Db) -> Result<Option<RollupReport>, DbError> {
    roll_up_under_lease_at(db, db.now()).await
}

/// [`roll_up_under_lease`] as of `now` (`bazaar traffic-rollup --now`).
pub(crate) async fn roll_up_under_lease_at(
    db: &Db,
    now: DateTime,
) -> Result<Option<RollupReport>, DbError> {
    // Handles of one process share its lease (the owner is the process), so runs of one process
    // take turns here: a run never reads the hours another run of this process is replacing.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(mut lease) = crate::db::lease::try_take_here(db, LEASE, LEASE_FOR).await? else {
        return Ok(None);
    };
    let report = run(db, now, CrashAfter::Never, Some(&mut lease)).await;
    lease.release(db).await?;
    report.map(Some)
}

/// How far `level` is built (the end of its last built period).
pub async fn watermark(db: &Db, level: Level) -> Result<Option<DateTime>, DbError> {
    named_watermark(db, level.unit()).await
}

/// The watermark kept under `_id` `name` (a level's unit, or [`dimensions::WATERMARK`]).
pub async fn named_watermark(db: &Db, name: &str) -> Result<Option<DateTime>, DbError> {
    let found = db
        .collection::<Document>(WATERMARKS)
        .find_one(doc! { "_id": name })
        .await?;
    Ok(found.and_then(|d| d.get_datetime("upto").ok().copied()))
}

/// One period of a level being built: its counts, by [`KINDS`] order, and its visitors' packed
/// sketch values (any number, repeats and lower ranks included, until compacted).
#[derive(Default)]
struct Period {
    counts: [i64; KINDS.len()],
    values: Vec<i32>,
}

/// The `$dateTrunc` of `at` to `unit`'s periods.
fn truncated(unit: &str) -> Document {
    let mut trunc = doc! { "date": "$at", "unit": unit };
    if unit == "week" {
        trunc.insert("startOfWeek", "monday");
    }
    doc! { "$dateTrunc": trunc }
}

/// Push the packed values of `value` (a number, or arrays of them at any depth) onto `out`.
fn push_values(value: &Bson, out: &mut Vec<i32>) {
    match value {
        Bson::Array(items) => items.iter().for_each(|v| push_values(v, out)),
        other => {
            if let Ok(p) = i32::try_from(number(Some(other))) {
                out.push(p);
            }
        }
    }
}

/// The periods of `level` in `[from, to)`, by (period start, page; `None` for the site).
async fn build(
    db: &Db,
    level: Level,
    from: DateTime,
    to: DateTime,
) -> Result<HashMap<(DateTime, Option<String>), Period>, DbError> {
    let mut periods: HashMap<(DateTime, Option<String>), Period> = HashMap::new();
    let mut add = |at: DateTime, path: Option<String>, counts: &[(usize, i64)], values: &[i32]| {
        for key in [(at, None), (at, path)] {
            let period = periods.entry(key).or_default();
            for &(kind, n) in counts {
                period.counts[kind] += n;
            }
            period.values.extend_from_slice(values);
        }
    };
    // Hours from the events: one row per hour, page and kind. Other levels from the level
    // below's pages (the site's periods are their sum): one row per period and page.
    let (collection, pipeline) = match level.source() {
        None => (
            EVENTS,
            vec![
                doc! { "$match": { "at": { "$gte": from, "$lt": to }, "bot": false } },
                doc! { "$group": {
                    "_id": { "at": truncated("hour"), "path": "$path", "kind": "$kind" },
                    "n": { "$sum": 1 },
                    "hll": { "$push": "$hll" },
                } },
            ],
        ),
        Some(source) => {
            let mut group = doc! {
                "_id": { "at": truncated(level.unit()), "path": "$path" },
                "hll": { "$push": "$hll" },
            };
            for kind in KINDS {
                group.insert(kind, doc! { "$sum": format!("${kind}") });
            }
            (
                source.collection(),
                vec![
                    doc! { "$match": {
                        "at": { "$gte": from, "$lt": to },
                        "path": { "$ne": Bson::Null },
                    } },
                    doc! { "$group": group },
                ],
            )
        }
    };
    let mut rows = db
        .collection::<Document>(collection)
        .aggregate(pipeline)
        .await?;
    let mut values = Vec::new();
    while let Some(row) = rows.try_next().await? {
        let Ok(id) = row.get_document("_id") else {
            continue;
        };
        let (Ok(at), Ok(path)) = (id.get_datetime("at"), id.get_str("path")) else {
            continue;
        };
        let counts: Vec<(usize, i64)> = match id.get_str("kind") {
            // An hour's row counts one kind of event.
            Ok(kind) => KINDS
                .iter()
                .position(|k| *k == kind)
                .map(|i| (i, number(row.get("n"))))
                .into_iter()
                .collect(),
            // A period's row carries every kind's sum.
            Err(_) => KINDS
                .iter()
                .enumerate()
                .map(|(i, kind)| (i, number(row.get(*kind))))
                .collect(),
        };
        values.clear();
        if let Some(hll) = row.get("hll") {
            push_values(hll, &mut values);
        }
        add(*at, Some(path.to_string()), &counts, &values);
    }
    Ok(periods)
}

/// A count as `$sum` stores it: a 32-bit integer when it fits.
fn count(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

/// Replace `level`'s documents in `[from, to)` with `periods`. Before the watermark moves the
/// range holds nothing but what a crashed run wrote, so this is a delete of that and an insert.
async fn replace(
    db: &Db,
    level: Level,
    from: DateTime,
    to: DateTime,
    periods: HashMap<(DateTime, Option<String>), Period>,
) -> Result<(), DbError> {
    let collection = db.collection::<Document>(level.collection());
    collection
        .delete_many(doc! { "at": { "$gte": from, "$lt": to } })
        .await?;
    let documents: Vec<Document> = periods
        .into_iter()
        .map(|((at, path), period)| {
            let path = path.map_or(Bson::Null, Bson::String);
            let mut d = doc! { "_id": { "at": at, "path": path.clone() }, "at": at, "path": path };
            for (kind, n) in KINDS.iter().zip(period.counts) {
                d.insert(*kind, count(n));
            }
            d.insert("hll", hll::compact(period.values));
            d
        })
        .collect();
    insert_all(&collection, documents).await
}

/// Insert `documents` in period order (so the documents and the indexes grow at their end),
/// in batches, unordered; a duplicate `_id` is left as it is (see below).
async fn insert_all(
    collection: &mongodb::Collection<Document>,
    mut documents: Vec<Document>,
) -> Result<(), DbError> {
    documents.sort_by_key(|d| d.get_datetime("at").map(|at| at.timestamp_millis()).ok());
    while !documents.is_empty() {
        let rest = documents.split_off(documents.len().min(INSERT_BATCH));
        let inserted = collection
            .insert_many(std::mem::replace(&mut documents, rest))
            .ordered(false)
            .await;
        match inserted {
            Ok(_) => {}
            // Another run of the same range (handles of one process share the lease) inserted
            // the same period first: the document is the one this run computed from the same
            // sources, and every run inserts all of its range after its delete, so whichever
            // deletes last leaves the range complete.
            Err(e) if only_duplicates(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Whether every write error of an insert is a duplicate `_id`.
fn only_duplicates(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        mongodb::error::ErrorKind::InsertMany(failure) => {
            failure.write_concern_error.is_none()
                && failure
                    .write_errors
                    .as_ref()
                    .is_some_and(|errors| errors.iter().all(|w| w.code == 11000))
        }
        _ => false,
    }
}

/// Roll-up documents written per `insert` command.
const INSERT_BATCH: usize = 10_000;

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
