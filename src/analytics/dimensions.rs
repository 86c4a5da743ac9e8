//! Roll-ups of what the traffic report's tables group by: pages, referrer hosts, UTM campaigns
//! and sources, devices, browsers, searches (and those without results), the funnel's steps and
//! each page template's response times. Two levels, built by [`super::rollup`] after the four
//! traffic levels, each up to its own watermark (`upto` and `hours` of the `dimensions`
//! watermark): one document per hour, dimension and key in `traffic.dimensions.hourly` for the
//! day not yet closed, built from the events; one per day, dimension and key in
//! `traffic.dimensions` for the closed days, each the sum of its hours (hierarchical, as
//! `traffic.hourly` → `traffic.daily`). A run replaces the documents of its range, then moves
//! both watermarks in one write, so a re-run or a crash before that leaves the same documents;
//! the run after the one that closed a day deletes its hours (nothing reads them: the reports
//! take whole days from the daily documents).
//!
//! A document: `{ _id: { at, dim, key }, at, dim, key, count, hll: [packed], ms?, n?, keys? }`:
//! `count` is exact (bots excluded), `hll` the sketch of the key's visitors in the period
//! (mergeable over any periods, [`super::hll`]); a `template` document adds its response-time
//! histogram, `ms` (bucket lower bounds, ascending, [`bucket`]) and `n` (views in each), which
//! merge by adding.
//!
//! **Bounded.** An hour, and a day summed from its hours, keeps at most [`CAP`] keys per
//! dimension, the most counted; the others are summed into one document with `key: null` and
//! `keys` (how many were folded: a day's adds its hours', so a key folded in two hours counts
//! twice). The reports leave that bucket out, so a key's total over a range misses its counts
//! in the periods it ranked below [`CAP`]: exact whenever no day had more than [`CAP`] distinct
//! keys of the dimension (then none of its hours had either: a shop's pages, sources, devices
//! and templates; only searches can exceed it, by one-off queries that no top-20 table would
//! show). Per-hour top-N lists would not merge exactly; full per-period counts under a cap do.
//!
//! Why hours only for the open day: a report reads one document per key and day for the closed
//! days, one per key and hour for the open day, and the events only after the hours' watermark
//! (at most an hour and [`super::rollup`]'s grace, ~4 000 events at the 100 000 a day);
//! with days alone it grouped the whole open day's events with their sketches (~100 000 at
//! 00:01: 150–350 ms of the reports' time). Keeping every hour would make 24 times as many
//! documents for ranges the days already serve.

use std::collections::{BTreeMap, HashMap};

use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use mongodb::IndexModel;

use super::events::{EVENTS, FUNNEL, VIEW};
use super::hll;
use super::{number, Day};
use crate::db::{Db, DbError};

/// The daily dimension documents.
pub const DIMENSIONS: &str = "traffic.dimensions";
/// The hourly dimension documents of the days not yet closed (same shape).
pub const HOURLY: &str = "traffic.dimensions.hourly";
/// Their watermarks' `_id` in [`super::rollup::WATERMARKS`]: `upto` for the daily documents,
/// `hours` for the hourly ones.
pub const WATERMARK: &str = "dimensions";
/// Keys kept per day and dimension; the rest are summed into the `key: null` document.
pub const CAP: usize = 2_000;
/// Response times below this many milliseconds keep their own histogram bucket.
const EXACT_MS: i64 = 128;

/// What a table groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dim {
    /// Page views by path.
    Path,
    /// Page views by referrer host.
    Referrer,
    UtmCampaign,
    UtmSource,
    Device,
    Browser,
    /// Searches by query in lower case.
    Search,
    /// Searches that found nothing, by query in lower case.
    NoResults,
    /// Events of each funnel step, by kind.
    Funnel,
    /// Page views by route template, with their response times.
    Template,
}

impl Dim {
    pub const ALL: [Dim; 10] = [
        Dim::Path,
        Dim::Referrer,
        Dim::UtmCampaign,
        Dim::UtmSource,
        Dim::Device,
        Dim::Browser,
        Dim::Search,
        Dim::NoResults,
        Dim::Funnel,
        Dim::Template,
    ];

    /// The stored `dim` (for the event-field breakdowns, the field's name).
    pub fn name(self) -> &'static str {
        match self {
            Dim::Path => "path",
            Dim::Referrer => "referrer",
            Dim::UtmCampaign => "utm_campaign",
            Dim::UtmSource => "utm_source",
            Dim::Device => "device",
            Dim::Browser => "browser",
            Dim::Search => "search",
            Dim::NoResults => "no_results",
            Dim::Funnel => "funnel",
            Dim::Template => "template",
        }
    }

    /// The dimension stored as `name`.
    pub fn named(name: &str) -> Option<Dim> {
        Dim::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The breakdown of page views by the event field `field`, if there is one.
    pub fn of_field(field: &str) -> Option<Dim> {
        Dim::ALL.into_iter().take(6).find(|d| d.name() == field)
    }

    /// The events this dimension counts (without the time range; bots left out), each with
    /// the expression of its key: the same filters and keys as the report's queries over the
    /// events ([`super::traffic`]). The funnel is one query per step, each on `kind, at`.
    pub fn queries(self) -> Vec<(Document, Bson)> {
        match self {
            Dim::Search | Dim::NoResults => {
                let mut filter = doc! { "kind": "search", "bot": false };
                if self == Dim::NoResults {
                    filter.insert("results", 0);
                }
                vec![(filter, doc! { "$toLower": "$query" }.into())]
            }
            Dim::Funnel => FUNNEL
                .iter()
                .map(|(kind, _)| {
                    (
                        doc! { "kind": *kind, "bot": false },
                        Bson::String((*kind).to_string()),
                    )
                })
                .collect(),
            Dim::Template => vec![(
                doc! { "kind": VIEW, "bot": false },
                Bson::String("$template".into()),
            )],
            field => {
                let name = field.name();
                vec![(
                    doc! { "kind": VIEW, "bot": false, name: { "$exists": true, "$ne": Bson::Null } },
                    Bson::String(format!("${name}")),
                )]
            }
        }
    }
}

/// Indexes of [`DIMENSIONS`] and of [`HOURLY`]: a dimension's periods of a range (the counts),
/// one key's periods (its visitors), and a range of periods (a run's replace).
pub fn indexes() -> [(&'static str, Vec<IndexModel>); 2] {
    [DIMENSIONS, HOURLY].map(|collection| {
        (
            collection,
            vec![
                IndexModel::builder()
                    .keys(doc! { "dim": 1, "at": 1 })
                    .build(),
                IndexModel::builder()
                    .keys(doc! { "dim": 1, "key": 1, "at": 1 })
                    .build(),
                IndexModel::builder().keys(doc! { "at": 1 }).build(),
            ],
        )
    })
}

/// The histogram bucket of a response time: the time itself below [`EXACT_MS`], above it the
/// time with all but its 7 highest bits cleared (a bucket is under 1/64 of its value wide).
/// Monotonic, so the bucket of the nearest-rank quantile is the quantile of the buckets.
pub fn bucket(ms: i64) -> i64 {
    if ms < EXACT_MS {
        return ms.max(0);
    }
    let shift = (64 - ms.leading_zeros()).saturating_sub(7);
    (ms >> shift) << shift
}

/// [`quantile_of_buckets`] of a histogram kept as bucket → count.
pub fn histogram_quantile(histogram: &BTreeMap<i64, i64>, q: f64) -> i64 {
    let total: i64 = histogram.values().sum();
    let buckets: Vec<(i64, i64)> = histogram.iter().map(|(&ms, &n)| (ms, n)).collect();
    quantile_of_buckets(&buckets, total, q)
}

/// The `q`-quantile (0–1), by the nearest-rank method, of the `total` values a sorted histogram
/// (`(value, how many)`) counts: the value the events' exact quantile (`traffic::quantile`)
/// would give when the buckets are single values.
pub(crate) fn quantile_of_buckets(histogram: &[(i64, i64)], total: i64, q: f64) -> i64 {
    if total <= 0 {
        return 0;
    }
    let rank = ((q * total as f64).ceil() as i64).clamp(1, total);
    let mut seen = 0;
    for &(value, n) in histogram {
        seen += n;
        if seen >= rank {
            return value;
        }
    }
    histogram.last().map_or(0, |&(value, _)| value)
}

/// A key as the reports label it (the events' `ranked` rule).
pub(crate) fn label(key: Option<&Bson>) -> String {
    match key {
        Some(Bson::String(s)) => s.clone(),
        Some(Bson::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// One key's hour or day while a run builds it; `keys`: how many keys a `key: null` document
/// folded.
#[derive(Default)]
struct Entry {
    count: i64,
    values: Vec<i32>,
    ms: BTreeMap<i64, i64>,
    keys: i64,
}

/// One period's documents of one dimension: `None` is the folded keys' document.
type Kept = Vec<(Option<String>, Entry)>;

/// The hourly dimension documents of `[from, to)` (both on the hour), by hour and dimension,
/// computed from the events: one pipeline per dimension (per step for the funnel) grouping the
/// range's events by hour and key (and response time for templates), each on the `kind, at`
/// index; each hour capped at [`CAP`] keys and its sketches compacted, so the hours are
/// exactly what [`stored_hours`] reads back once they are written.
pub(crate) async fn build_hours(db: &Db, from: DateTime, to: DateTime) -> Result<Hours, DbError> {
    let mut hours = Hours::default();
    for dim in Dim::ALL {
        let mut found: HashMap<DateTime, HashMap<String, Entry>> = HashMap::new();
        for (mut filter, key) in dim.queries() {
            filter.insert("at", doc! { "$gte": from, "$lt": to });
            let mut id = doc! {
                "at": { "$dateTrunc": { "date": "$at", "unit": "hour" } },
                "key": key,
            };
            if dim == Dim::Template {
                id.insert("ms", "$response_ms");
            }
            let mut rows = db
                .collection::<Document>(EVENTS)
                .aggregate(vec![
                    doc! { "$match": filter },
                    doc! { "$group": {
                        "_id": id,
                        "count": { "$sum": 1 },
                        "hll": { "$addToSet": "$hll" },
                    } },
                ])
                .await?;
            while let Some(row) = rows.try_next().await? {
                let Ok(id) = row.get_document("_id") else {
                    continue;
                };
                let Ok(at) = id.get_datetime("at") else {
                    continue;
                };
                let n = number(row.get("count"));
                let entry = found
                    .entry(*at)
                    .or_default()
                    .entry(label(id.get("key")))
                    .or_default();
                entry.count += n;
                if let Ok(values) = row.get_array("hll") {
                    entry
                        .values
                        .extend(values.iter().map(|v| number(Some(v)) as i32));
                }
                if dim == Dim::Template {
                    *entry.ms.entry(bucket(number(id.get("ms")))).or_default() += n;
                }
            }
        }
        for (at, keys) in found {
            let mut kept = capped(keys.into_iter().map(|(k, e)| (Some(k), e)));
            for (_, entry) in &mut kept {
                entry.values = hll::compact(std::mem::take(&mut entry.values));
            }
            hours.0.insert((at, dim), kept);
        }
    }
    Ok(hours)
}

/// Hourly dimension documents not yet written, by (hour, dimension).
#[derive(Default)]
pub(crate) struct Hours(HashMap<(DateTime, Dim), Kept>);

impl Hours {
    /// The hours before `at`, taken out (they go into days), and the rest (kept as hours).
    pub(crate) fn split_before(self, at: DateTime) -> (Hours, Hours) {
        let (before, after) = self.0.into_iter().partition(|((hour, _), _)| *hour < at);
        (Hours(before), Hours(after))
    }

    /// Their documents, as [`HOURLY`] keeps them.
    pub(crate) fn documents(self) -> Vec<Document> {
        self.0
            .into_iter()
            .flat_map(|((at, dim), kept)| {
                kept.into_iter()
                    .map(move |(key, entry)| document(at, dim, key, entry))
            })
            .collect()
    }
}

/// The hourly documents stored in [`HOURLY`] for `[from, to)`, as [`build_hours`] gives them.
pub(crate) async fn stored_hours(db: &Db, from: DateTime, to: DateTime) -> Result<Hours, DbError> {
    let mut hours = Hours::default();
    if to <= from {
        return Ok(hours);
    }
    let mut docs = db
        .collection::<Document>(HOURLY)
        .find(doc! { "at": { "$gte": from, "$lt": to } })
        .await?;
    while let Some(d) = docs.try_next().await? {
        let (Ok(at), Some(dim)) = (
            d.get_datetime("at"),
            d.get_str("dim").ok().and_then(Dim::named),
        ) else {
            continue;
        };
        let key = match d.get("key") {
            Some(Bson::Null) | None => None,
            key => Some(label(key)),
        };
        let mut entry = Entry {
            count: number(d.get("count")),
            values: d
                .get_array("hll")
                .map(|a| a.iter().map(|v| number(Some(v)) as i32).collect())
                .unwrap_or_default(),
            ms: BTreeMap::new(),
            keys: number(d.get("keys")),
        };
        if let (Ok(ms), Ok(n)) = (d.get_array("ms"), d.get_array("n")) {
            for (ms, n) in ms.iter().zip(n) {
                *entry.ms.entry(number(Some(ms))).or_default() += number(Some(n));
            }
        }
        hours.0.entry((*at, dim)).or_default().push((key, entry));
    }
    Ok(hours)
}

/// The daily documents of the days `hours` cover, each the sum of its hours: counts and
/// histograms added, sketches merged, the [`CAP`] most counted keys kept and the rest folded
/// into the `key: null` document with the hours' folded ones. Equal to a day built from its
/// events whenever none of its hours and not the day had more than [`CAP`] keys.
pub(crate) fn days(hours: impl IntoIterator<Item = Hours>) -> Vec<Document> {
    let mut days: HashMap<(DateTime, Dim), (HashMap<String, Entry>, Entry)> = HashMap::new();
    for part in hours {
        for ((hour, dim), kept) in part.0 {
            let (keys, folded) = days.entry((Day::of(hour).start(), dim)).or_default();
            for (key, entry) in kept {
                let into = match key {
                    Some(key) => keys.entry(key).or_default(),
                    None => &mut *folded,
                };
                into.count += entry.count;
                into.values.extend(entry.values);
                into.keys += entry.keys;
                for (ms, n) in entry.ms {
                    *into.ms.entry(ms).or_default() += n;
                }
            }
        }
    }
    let mut out = Vec::new();
    for ((at, dim), (keys, folded)) in days {
        let has_folded = folded.keys > 0 || folded.count > 0;
        let named = keys.into_iter().map(|(k, e)| (Some(k), e));
        let kept = if has_folded {
            capped(named.chain([(None, folded)]))
        } else {
            capped(named)
        };
        out.extend(
            kept.into_iter()
                .map(|(key, entry)| document(at, dim, key, entry)),
        );
    }
    out
}

/// The [`CAP`] most counted named keys, then (if any were folded, or `None` came in) the rest
/// summed into one `None` entry whose `keys` says how many it folded.
fn capped(keys: impl Iterator<Item = (Option<String>, Entry)>) -> Kept {
    let mut folded: Option<Entry> = None;
    let mut named: Vec<(String, Entry)> = Vec::new();
    for (key, entry) in keys {
        match key {
            Some(key) => named.push((key, entry)),
            None => folded = Some(entry),
        }
    }
    named.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(&b.0)));
    let rest = named.split_off(named.len().min(CAP));
    let mut out: Kept = named.into_iter().map(|(k, e)| (Some(k), e)).collect();
    if !rest.is_empty() || folded.is_some() {
        let mut other = folded.unwrap_or_default();
        // Folded keys keep no histogram: the reports leave the folded document out.
        other.ms.clear();
        other.keys += rest.len() as i64;
        for (_, entry) in rest {
            other.count += entry.count;
            other.values.extend(entry.values);
        }
        out.push((None, other));
    }
    out
}

fn document(at: DateTime, dim: Dim, key: Option<String>, entry: Entry) -> Document {
    let key = key.map_or(Bson::Null, Bson::String);
    let mut d = doc! {
        "_id": { "at": at, "dim": dim.name(), "key": key.clone() },
        "at": at,
        "dim": dim.name(),
        "key": key.clone(),
        "count": count(entry.count),
        "hll": hll::compact(entry.values),
    };
    if dim == Dim::Template {
        let (ms, n): (Vec<Bson>, Vec<Bson>) = entry
            .ms
            .into_iter()
            .map(|(ms, n)| (count(ms), count(n)))
            .unzip();
        d.insert("ms", ms);
        d.insert("n", n);
    }
    if key == Bson::Null {
        d.insert("keys", count(entry.keys));
    }
    d
}

/// A count as `$sum` stores it: a 32-bit integer when it fits.
fn count(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_time_buckets_are_exact_below_128_ms_and_within_a_64th_above() {
        for ms in 0..128 {
            assert_eq!(bucket(ms), ms);
        }
        assert_eq!(bucket(-4), 0);
        for ms in [128_i64, 129, 255, 256, 1_000, 4_321, 60_000, 1 << 40] {
            let b = bucket(ms);
            assert!(b <= ms && (ms - b) * 64 < ms.max(64), "{ms} → {b}");
            assert!(bucket(ms + 1) >= b);
        }
        let histogram: BTreeMap<i64, i64> = (1..=100).map(|ms| (ms, 1)).collect();
        assert_eq!(histogram_quantile(&histogram, 0.95), 95);
        assert_eq!(histogram_quantile(&histogram, 0.5), 50);
        assert_eq!(histogram_quantile(&BTreeMap::new(), 0.95), 0);
    }

    fn entry(count: i64) -> Entry {
        Entry {
            count,
            values: vec![64 + 1],
            ..Entry::default()
        }
    }

    #[test]
    fn an_hour_keeps_the_most_counted_keys_and_its_day_sums_the_hours_then_folds_again() {
        let midnight = DateTime::from_millis(0);
        let one = DateTime::from_millis(3_600_000);
        let first = capped((0..CAP as i64 + 3).map(|i| (Some(format!("k{i}")), entry(i + 1))));
        assert_eq!(first.len(), CAP + 1);
        let (key, other) = first.last().expect("other");
        assert_eq!((key, other.count, other.keys), (&None, 1 + 2 + 3, 3));
        assert_eq!(
            first[0].0.as_deref(),
            Some(format!("k{}", CAP + 2).as_str())
        );
        let second = capped(
            [
                (Some("k0".into()), entry(10)),
                (Some("new".into()), entry(1)),
            ]
            .into_iter(),
        );
        let hours = Hours(HashMap::from([
            ((midnight, Dim::Search), first),
            ((one, Dim::Search), second),
        ]));
        let docs = days([hours]);
        assert_eq!(docs.len(), CAP + 1);
        let count_of = |key: &str| {
            docs.iter()
                .find(|d| d.get_str("key").ok() == Some(key))
                .map(|d| number(d.get("count")))
        };
        // k0 was folded in the first hour and is named in the second: its day has the second's.
        assert_eq!(count_of("k0"), Some(10));
        // The day's two least counted keys, "new" (1) and k3 (4), fold with the hour's three.
        assert_eq!((count_of("new"), count_of("k3")), (None, None));
        let other = docs
            .iter()
            .find(|d| d.get("key") == Some(&Bson::Null))
            .expect("other");
        assert_eq!(number(other.get("count")), 6 + 1 + 4);
        assert_eq!(number(other.get("keys")), 3 + 2);
        assert!(docs.iter().all(|d| d.get_datetime("at") == Ok(&midnight)));
    }
}
