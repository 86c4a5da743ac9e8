//! Daily roll-ups of what the traffic report's tables group by: pages, referrer hosts, UTM
//! campaigns and sources, devices, browsers, searches (and those without results), the funnel's
//! steps and each page template's response times. One document per day, dimension and key in
//! `traffic.dimensions`, built from the events of complete days by [`super::rollup`] after the
//! four levels, with a watermark of its own (`dimensions`) and the same replace-then-advance
//! steps, so a re-run or a crash before the watermark moves leaves the same documents.
//!
//! A document: `{ _id: { at, dim, key }, at, dim, key, count, hll: [packed], ms?, n?, keys? }`:
//! `count` is exact (bots excluded), `hll` the sketch of the key's visitors that day (mergeable
//! over any days, [`super::hll`]); a `template` document adds its response-time histogram, `ms`
//! (bucket lower bounds, ascending, [`bucket`]) and `n` (views in each), which merge by adding.
//!
//! **Bounded.** A day keeps at most [`CAP`] keys per dimension, the most counted; the others are
//! summed into one document with `key: null` and `keys` (how many were folded). The reports
//! leave that bucket out, so a key's total over a range misses its counts on the days it ranked
//! below [`CAP`] that day: exact whenever no day had more than [`CAP`] distinct keys of the
//! dimension (a shop's pages, sources, devices and templates; only searches can exceed it, by
//! one-off queries that no top-20 table would show). Per-hour top-N lists would not merge
//! exactly; full per-day counts under a cap do.
//!
//! Why days, not hours: a report reads one document per key and day for the complete days and
//! the events only after the watermark (at most a day and an hour, ~100 000 events at the
//! issue's load: tens of milliseconds); hourly documents would be 24 times as many to build and
//! to read for every range.

use std::collections::{BTreeMap, HashMap};

use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use mongodb::IndexModel;

use super::events::{EVENTS, FUNNEL, VIEW};
use super::hll;
use super::number;
use crate::db::{Db, DbError};

/// The daily dimension documents.
pub const DIMENSIONS: &str = "traffic.dimensions";
/// Their watermark's `_id` in [`super::rollup::WATERMARKS`].
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

/// Indexes of [`DIMENSIONS`]: a dimension's days of a range (the counts), one key's days (its
/// visitors), and a range of days (a run's replace).
pub fn indexes() -> (&'static str, Vec<IndexModel>) {
    (
        DIMENSIONS,
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

/// One key's day while a run builds it.
#[derive(Default)]
struct Entry {
    count: i64,
    values: Vec<i32>,
    ms: BTreeMap<i64, i64>,
}

/// The dimension documents of every complete day in `[from, to)` (both midnights), computed
/// from the events: one pipeline per dimension (per step for the funnel) grouping the range's
/// events by day and key (and response time for templates), each on the `kind, at` index.
pub(crate) async fn build(db: &Db, from: DateTime, to: DateTime) -> Result<Vec<Document>, DbError> {
    let mut documents = Vec::new();
    for dim in Dim::ALL {
        let mut days: HashMap<DateTime, HashMap<String, Entry>> = HashMap::new();
        for (mut filter, key) in dim.queries() {
            filter.insert("at", doc! { "$gte": from, "$lt": to });
            let mut id = doc! {
                "at": { "$dateTrunc": { "date": "$at", "unit": "day" } },
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
                let entry = days
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
        for (at, keys) in days {
            documents.extend(day_documents(at, dim, keys));
        }
    }
    Ok(documents)
}

/// One day's documents of `dim`: the [`CAP`] most counted keys, then the rest summed.
fn day_documents(at: DateTime, dim: Dim, keys: HashMap<String, Entry>) -> Vec<Document> {
    let mut keys: Vec<(String, Entry)> = keys.into_iter().collect();
    keys.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(&b.0)));
    let folded = keys.split_off(keys.len().min(CAP));
    let mut out: Vec<Document> = keys
        .into_iter()
        .map(|(key, entry)| document(at, dim, Bson::String(key), entry))
        .collect();
    if !folded.is_empty() {
        let mut other = Entry::default();
        let n = folded.len();
        for (_, entry) in folded {
            other.count += entry.count;
            other.values.extend(entry.values);
        }
        let mut d = document(at, dim, Bson::Null, other);
        d.insert("keys", count(n as i64));
        out.push(d);
    }
    out
}

fn document(at: DateTime, dim: Dim, key: Bson, entry: Entry) -> Document {
    let mut d = doc! {
        "_id": { "at": at, "dim": dim.name(), "key": key.clone() },
        "at": at,
        "dim": dim.name(),
        "key": key,
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

    #[test]
    fn a_day_keeps_the_most_counted_keys_and_sums_the_rest_into_one_bucket() {
        let keys: HashMap<String, Entry> = (0..CAP as i64 + 3)
            .map(|i| {
                (
                    format!("k{i}"),
                    Entry {
                        count: i + 1,
                        values: vec![64 + 1],
                        ms: BTreeMap::new(),
                    },
                )
            })
            .collect();
        let docs = day_documents(DateTime::from_millis(0), Dim::Search, keys);
        assert_eq!(docs.len(), CAP + 1);
        let other = docs.last().expect("other");
        assert_eq!(other.get("key"), Some(&Bson::Null));
        assert_eq!(number(other.get("keys")), 3);
        assert_eq!(number(other.get("count")), 1 + 2 + 3);
        assert_eq!(
            docs[0].get_str("key").ok(),
            Some(format!("k{}", CAP + 2).as_str())
        );
    }
}
