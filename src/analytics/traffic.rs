//! The traffic reports over the events themselves: visitors and page views over time, sources
//! (referrer hosts, UTM campaigns), top pages, devices and browsers, top searches and searches
//! without results, the product funnel and the slowest pages, with exact distinct visitors.
//! They scan every event of their range, so Admin → Analytics reads the same numbers from the
//! roll-ups instead ([`super::rolled`], which uses these queries' filters and keys for the part
//! not yet rolled up); these are its reference in the tests and the benchmark. The time series
//! and the visitors can also be read from the roll-ups alone ([`Source::Rollups`]). Bots are
//! never counted. Every events query filters `kind` and a time range, the `kind, at` index.

use std::collections::HashMap;

use bson::{doc, Bson, Document};
use chrono::{Datelike, Duration, NaiveDate};
use futures::TryStreamExt;

use super::dimensions::quantile_of_buckets;
use super::events::FUNNEL;
use super::events::{EVENTS, VIEW};
use super::number;
use super::rollup::Level;
use super::{hll, Day};
use crate::db::{Db, DbError};

/// A report's days, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub(crate) from: Day,
    pub(crate) to: Day,
}

impl Range {
    /// `from` to `to`, or `None` when `to` is before `from` or the range is absurdly long.
    pub fn new(from: Day, to: Day) -> Option<Range> {
        let days = (to.date() - from.date()).num_days();
        (0..=3_660).contains(&days).then_some(Range { from, to })
    }

    pub(crate) fn days(&self) -> i64 {
        (self.to.date() - self.from.date()).num_days() + 1
    }

    /// The range's start and its end (midnight after `to`).
    pub(crate) fn bounds(&self) -> (bson::DateTime, bson::DateTime) {
        let end = self
            .to
            .next()
            .map_or_else(|| self.to.start(), |d| d.start());
        (self.from.start(), end)
    }

    /// The granularity of its charts: hours up to two days, days up to ten weeks, weeks up to
    /// a year, months beyond.
    pub(crate) fn granularity(&self) -> Level {
        match self.days() {
            ..=2 => Level::Hour,
            3..=70 => Level::Day,
            71..=366 => Level::Week,
            _ => Level::Month,
        }
    }

    /// Whether the events still hold the whole range, `retention_days` being kept.
    #[cfg(test)]
    pub(crate) fn within(&self, retention_days: u32, today: Day) -> bool {
        let oldest = today.date() - Duration::days(i64::from(retention_days) - 1);
        self.from.date() >= oldest
    }
}

/// Where a report's numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The raw events (exact).
    Events,
    /// The roll-ups (visitors estimated).
    Rollups,
}

/// One period of the time series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    pub at: bson::DateTime,
    pub views: i64,
    pub visitors: u64,
}

/// One row of a ranked table: a label, its page views (or events) and its visitors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub label: String,
    pub count: i64,
    pub visitors: i64,
}

/// A step of the product funnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub name: &'static str,
    pub visitors: i64,
    pub events: i64,
}

/// A page's response times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    pub(crate) template: String,
    pub(crate) views: i64,
    pub(crate) p95_ms: i64,
    pub(crate) median_ms: i64,
}

/// The events of `kind` in `range`, bots left out: served by the `kind, at` index.
pub fn events_query(kind: &str, range: Range) -> Document {
    let (from, to) = range.bounds();
    doc! { "kind": kind, "at": { "$gte": from, "$lt": to }, "bot": false }
}

async fn aggregate(db: &Db, pipeline: Vec<Document>) -> Result<Vec<Document>, DbError> {
    Ok(db
        .collection::<Document>(EVENTS)
        .aggregate(pipeline)
        .await?
        .try_collect()
        .await?)
}

/// Every period start of `level` in `range`.
pub(crate) fn periods(range: Range, level: Level) -> Vec<bson::DateTime> {
    let (from, to) = range.bounds();
    let mut at = level.truncate(from);
    let mut out = Vec::new();
    while at < to && out.len() < 10_000 {
        out.push(at);
        at = next_period(level, at);
    }
    out
}

/// The start of the period of `level` after the one starting at `at`.
pub fn next_period(level: Level, at: bson::DateTime) -> bson::DateTime {
    let t = at.to_chrono();
    let next = match level {
        Level::Hour => t + Duration::hours(1),
        Level::Day => t + Duration::days(1),
        Level::Week => t + Duration::days(7),
        Level::Month => {
            let d = t.date_naive();
            let (y, m) = if d.month0() == 11 {
                (d.year() + 1, 1)
            } else {
                (d.year(), d.month() + 1)
            };
            NaiveDate::from_ymd_opt(y, m, 1)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map_or(t, |n| n.and_utc())
        }
    };
    bson::DateTime::from_chrono(next)
}

/// Page views and visitors per period of `level` over `range`.
pub async fn series(
    db: &Db,
    range: Range,
    level: Level,
    source: Source,
) -> Result<Vec<Point>, DbError> {
    let mut found: HashMap<bson::DateTime, (i64, u64)> = HashMap::new();
    match source {
        Source::Events => {
            let (from, to) = range.bounds();
            let mut trunc = doc! { "date": "$at", "unit": level.unit() };
            if level == Level::Week {
                trunc.insert("startOfWeek", "monday");
            }
            let rows = aggregate(
                db,
                vec![
                    doc! { "$match": { "at": { "$gte": from, "$lt": to }, "bot": false } },
                    doc! { "$group": {
                        "_id": { "$dateTrunc": trunc },
                        "views": { "$sum": { "$cond": [{ "$eq": ["$kind", VIEW] }, 1, 0] } },
                        "visitors": { "$addToSet": "$visitor" },
                    } },
                    doc! { "$project": { "views": 1, "visitors": { "$size": "$visitors" } } },
                ],
            )
            .await?;
            for row in rows {
                if let Ok(at) = row.get_datetime("_id") {
                    found.insert(
                        *at,
                        (number(row.get("views")), number(row.get("visitors")) as u64),
                    );
                }
            }
        }
        Source::Rollups => {
            let (from, to) = range.bounds();
            let docs: Vec<Document> = db
                .collection::<Document>(level.collection())
                .find(
                    doc! { "path": Bson::Null, "at": { "$gte": level.truncate(from), "$lt": to } },
                )
                .await?
                .try_collect()
                .await?;
            for d in docs {
                if let Ok(at) = d.get_datetime("at") {
                    found.insert(*at, (number(d.get(VIEW)), hll::estimate(&sketch(&d))));
                }
            }
        }
    }
    Ok(periods(range, level)
        .into_iter()
        .map(|at| {
            let (views, visitors) = found.get(&at).copied().unwrap_or_default();
            Point {
                at,
                views,
                visitors,
            }
        })
        .collect())
}

/// A roll-up document's sketch.
pub(crate) fn sketch(d: &Document) -> Vec<i32> {
    d.get_array("hll")
        .map(|a| a.iter().map(|v| number(Some(v)) as i32).collect())
        .unwrap_or_default()
}

/// Visitors over the whole range: exact from the events, else the roll-ups' sketches of the
/// days merged.
pub async fn visitors(db: &Db, range: Range, source: Source) -> Result<u64, DbError> {
    let (from, to) = range.bounds();
    match source {
        Source::Events => {
            // One set of the visitors, not a group per visitor: the store keeps a set of
            // integers in a hash set, and its groups in an ordered map of any value.
            let rows = aggregate(
                db,
                vec![
                    doc! { "$match": { "at": { "$gte": from, "$lt": to }, "bot": false } },
                    doc! { "$group": { "_id": Bson::Null, "visitors": { "$addToSet": "$visitor" } } },
                    doc! { "$project": { "n": { "$size": "$visitors" } } },
                ],
            )
            .await?;
            Ok(rows.first().map_or(0, |r| number(r.get("n"))) as u64)
        }
        Source::Rollups => {
            let docs: Vec<Document> = db
                .collection::<Document>(Level::Day.collection())
                .find(doc! { "path": Bson::Null, "at": { "$gte": from, "$lt": to } })
                .projection(doc! { "hll": 1 })
                .await?
                .try_collect()
                .await?;
            let sketches: Vec<Vec<i32>> = docs.iter().map(sketch).collect();
            Ok(hll::estimate(&hll::merge(
                sketches.iter().map(Vec::as_slice),
            )))
        }
    }
}

/// Page views and visitors per value of `field` (`referrer`, `utm_campaign`, `device`,
/// `browser`, `path` …) in `range`, most first; events without the field are left out.
pub async fn top(
    db: &Db,
    range: Range,
    kind: &str,
    field: &str,
    limit: i64,
) -> Result<Vec<Row>, DbError> {
    let mut filter = events_query(kind, range);
    filter.insert(field, doc! { "$exists": true, "$ne": Bson::Null });
    ranked(db, filter, Bson::String(format!("${field}")), limit).await
}

/// Events matching `filter` grouped by the value of `key` (an expression), with each group's
/// count and distinct visitors, most first, at most `limit`: the shape of every "top" table.
async fn ranked(db: &Db, filter: Document, key: Bson, limit: i64) -> Result<Vec<Row>, DbError> {
    let rows = aggregate(
        db,
        vec![
            doc! { "$match": filter },
            doc! { "$group": {
                "_id": key,
                "count": { "$sum": 1 },
                "visitors": { "$addToSet": "$visitor" },
            } },
            doc! { "$project": { "count": 1, "visitors": { "$size": "$visitors" } } },
            doc! { "$sort": { "count": -1, "_id": 1 } },
            doc! { "$limit": limit },
        ],
    )
    .await?;
    Ok(rows
        .iter()
        .map(|r| Row {
            label: match r.get("_id") {
                Some(Bson::String(s)) => s.clone(),
                Some(Bson::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
            count: number(r.get("count")),
            visitors: number(r.get("visitors")),
        })
        .collect())
}

/// The most frequent searches (queries compared in lower case); with `without_results`, only
/// those that found nothing.
pub async fn searches(
    db: &Db,
    range: Range,
    without_results: bool,
    limit: i64,
) -> Result<Vec<Row>, DbError> {
    let mut filter = events_query("search", range);
    if without_results {
        filter.insert("results", 0);
    }
    ranked(db, filter, doc! { "$toLower": "$query" }.into(), limit).await
}

/// Visitors (and events) at each step of the funnel in `range`.
pub async fn funnel(db: &Db, range: Range) -> Result<Vec<Step>, DbError> {
    let mut steps = Vec::with_capacity(FUNNEL.len());
    for (kind, name) in FUNNEL {
        let rows = aggregate(
            db,
            vec![
                doc! { "$match": events_query(kind, range) },
                doc! { "$group": {
                    "_id": Bson::Null,
                    "events": { "$sum": 1 },
                    "visitors": { "$addToSet": "$visitor" },
                } },
                doc! { "$project": { "events": 1, "visitors": { "$size": "$visitors" } } },
            ],
        )
        .await?;
        let row = rows.first();
        steps.push(Step {
            name,
            visitors: row.map_or(0, |r| number(r.get("visitors"))),
            events: row.map_or(0, |r| number(r.get("events"))),
        });
    }
    Ok(steps)
}

/// `part` of `whole` as a percentage with one decimal (`—` when `whole` is zero).
pub(crate) fn rate(part: i64, whole: i64) -> String {
    if whole <= 0 {
        return "—".to_string();
    }
    format!("{:.1} %", part as f64 * 100.0 / whole as f64)
}

/// The `q`-quantile (0–1) of sorted `values`, by the nearest-rank method: the reference the
/// histogram's (`dimensions::quantile_of_buckets`) is tested against.
#[cfg(test)]
pub(crate) fn quantile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The page templates (`/products/{slug}`) with the slowest 95th-percentile response time in
/// `range`, among those viewed at least `min_views` times.
pub async fn slowest(
    db: &Db,
    range: Range,
    min_views: i64,
    limit: usize,
) -> Result<Vec<Timing>, DbError> {
    // Each template's histogram of response times (one row per template and millisecond
    // value), not every view's time pushed into one array per template: the same quantiles,
    // from a few thousand rows instead of an array of every view (millions over 30 days).
    let rows = aggregate(
        db,
        vec![
            doc! { "$match": events_query(VIEW, range) },
            doc! { "$group": {
                "_id": { "template": "$template", "ms": "$response_ms" },
                "n": { "$sum": 1 },
            } },
        ],
    )
    .await?;
    let mut histograms: HashMap<String, Vec<(i64, i64)>> = HashMap::new();
    for r in &rows {
        let Ok(id) = r.get_document("_id") else {
            continue;
        };
        let template = id.get_str("template").unwrap_or_default().to_string();
        histograms
            .entry(template)
            .or_default()
            .push((number(id.get("ms")), number(r.get("n"))));
    }
    let mut timings: Vec<Timing> = histograms
        .into_iter()
        .filter_map(|(template, mut histogram)| {
            histogram.sort_unstable();
            let views: i64 = histogram.iter().map(|(_, n)| n).sum();
            (views >= min_views).then(|| Timing {
                template,
                views,
                p95_ms: quantile_of_buckets(&histogram, views, 0.95),
                median_ms: quantile_of_buckets(&histogram, views, 0.5),
            })
        })
        .collect();
    timings.sort_by(|a, b| b.p95_ms.cmp(&a.p95_ms).then(a.template.cmp(&b.template)));
    timings.truncate(limit);
    Ok(timings)
}

/// A CSV field: quoted when it holds a separator, a quote or a line break, and prefixed with
/// `'` when a spreadsheet would read it as a formula (search queries are typed by anyone).
pub(crate) fn csv_field(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_string()
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

/// Rows as CSV text (CRLF line ends, as RFC 4180 has them).
pub(crate) fn csv(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let line = |fields: Vec<String>| fields.join(",") + "\r\n";
    out.push_str(&line(header.iter().map(|h| csv_field(h)).collect()));
    for row in rows {
        out.push_str(&line(row.iter().map(|f| csv_field(f)).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> Day {
        Day::parse(s).expect("valid")
    }

    #[test]
    fn the_range_chooses_the_granularity_and_whether_the_events_still_hold_it() {
        let range = |a, b| Range::new(day(a), day(b)).expect("range");
        assert_eq!(range("2026-11-28", "2026-11-29").granularity(), Level::Hour);
        assert_eq!(range("2026-11-01", "2026-11-30").granularity(), Level::Day);
        assert_eq!(range("2026-06-01", "2026-11-30").granularity(), Level::Week);
        assert_eq!(
            range("2024-06-01", "2026-11-30").granularity(),
            Level::Month
        );
        assert!(Range::new(day("2026-11-30"), day("2026-11-01")).is_none());
        let today = day("2026-11-30");
        assert!(range("2026-11-01", "2026-11-30").within(30, today));
        assert!(!range("2026-10-31", "2026-11-30").within(30, today));
        assert_eq!(
            periods(range("2026-11-30", "2026-12-06"), Level::Week).len(),
            1
        );
        assert_eq!(
            periods(range("2026-11-28", "2026-12-01"), Level::Month).len(),
            2
        );
    }

    #[test]
    fn quantiles_use_the_nearest_rank_and_csv_fields_are_quoted_and_defused() {
        let ms: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&ms, 0.95), 95);
        assert_eq!(quantile(&ms, 0.5), 50);
        assert_eq!(quantile(&[7], 0.95), 7);
        assert_eq!(quantile(&[], 0.95), 0);
        // The histogram of the same values gives the same quantiles.
        let mut histogram: Vec<(i64, i64)> = Vec::new();
        let values = [3, 3, 3, 7, 7, 9, 12, 12, 12, 12, 40, 41];
        for v in values {
            match histogram.last_mut() {
                Some((last, n)) if *last == v => *n += 1,
                _ => histogram.push((v, 1)),
            }
        }
        for q in [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0] {
            assert_eq!(
                quantile_of_buckets(&histogram, values.len() as i64, q),
                quantile(&values, q),
                "{q}"
            );
        }
        assert_eq!(quantile_of_buckets(&[], 0, 0.95), 0);
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
        assert_eq!(
            csv(&["q", "n"], &[vec!["x".into(), "1".into()]]),
            "q,n\r\nx,1\r\n"
        );
    }
}
