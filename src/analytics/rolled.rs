//! The traffic report read from the roll-ups for the complete periods of a range and from the
//! events only for the rest (after the watermarks, or a partial period at a range's edge): the
//! time series and the visitors over the range from the level roll-ups ([`super::rollup`]),
//! the tables from the dimension documents ([`super::dimensions`]: days, then the open day's
//! hours). What the events alone give ([`super::traffic`]) is the reference: counts, page
//! views, ranks and (below 128 ms) response-time quantiles are equal; visitors are estimated by
//! merging the sketches of the documents read with the sketch of the events read (1.6 %
//! standard error), since distinct visitors cannot be summed. A range's cost so no longer grows
//! with its events: 30 days read
//! 30 documents per key (and one per hour of the open day), and the events of at most the last
//! hour.
//!
//! Events that reach the log after their period was rolled up are counted by the events-only
//! queries but not here (see [`super::rollup`]).

use std::collections::{BTreeMap, HashMap};

use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;

use super::dimensions::{self, Dim, DIMENSIONS};
use super::events::FUNNEL;
use super::events::{EVENTS, VIEW};
use super::hll;
use super::number;
use super::rollup::{dimension_watermarks, watermark, Level};
use super::traffic::{next_period, sketch, Point, Range, Row, Step, Timing};
use crate::db::{Db, DbError};

/// A part of a range and where it is read from: a level's roll-ups (for the dimension
/// documents, [`Level::Day`]) or, `None`, the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    from: DateTime,
    to: DateTime,
    source: Option<Level>,
}

/// The start of the first period of `level` at or after `at`.
fn ceil(level: Level, at: DateTime) -> DateTime {
    let start = level.truncate(at);
    if start == at {
        at
    } else {
        next_period(level, start)
    }
}

/// Split `[from, to)` among `sources` (each with how far it is built), coarsest first: each
/// takes the whole periods of the parts still uncovered that lie before its watermark; what no
/// source covers is read from the events.
fn plan(from: DateTime, to: DateTime, sources: &[(Level, Option<DateTime>)]) -> Vec<Piece> {
    let mut gaps = vec![(from, to)];
    let mut pieces = Vec::new();
    for &(level, upto) in sources {
        let Some(upto) = upto else { continue };
        let mut left = Vec::new();
        for (a, b) in gaps {
            let start = ceil(level, a);
            let end = level.truncate(b).min(upto);
            if start < end {
                pieces.push(Piece {
                    from: start,
                    to: end,
                    source: Some(level),
                });
                left.push((a, start));
                left.push((end, b));
            } else {
                left.push((a, b));
            }
        }
        gaps = left.into_iter().filter(|(a, b)| a < b).collect();
    }
    pieces.extend(gaps.into_iter().map(|(from, to)| Piece {
        from,
        to,
        source: None,
    }));
    pieces
}

/// The level roll-ups a series of `level` reads, coarsest first, with their watermarks.
async fn level_sources(db: &Db, level: Level) -> Result<Vec<(Level, Option<DateTime>)>, DbError> {
    let levels: &[Level] = match level {
        Level::Hour => &[Level::Hour],
        Level::Day => &[Level::Day, Level::Hour],
        Level::Week => &[Level::Week, Level::Day, Level::Hour],
        Level::Month => &[Level::Month, Level::Day, Level::Hour],
    };
    let mut out = Vec::with_capacity(levels.len());
    for &l in levels {
        out.push((l, watermark(db, l).await?));
    }
    Ok(out)
}

fn range_of(piece: &Piece) -> Document {
    doc! { "$gte": piece.from, "$lt": piece.to }
}

/// Packed sketch values of a row (`$addToSet` / stored arrays).
fn values(row: &Document, field: &str) -> Vec<i32> {
    row.get_array(field)
        .map(|a| a.iter().map(|v| number(Some(v)) as i32).collect())
        .unwrap_or_default()
}

/// The site's roll-up documents of `level` in `piece` (the `path, at` index).
async fn site_documents(db: &Db, level: Level, piece: &Piece) -> Result<Vec<Document>, DbError> {
    Ok(db
        .collection::<Document>(level.collection())
        .find(doc! { "path": Bson::Null, "at": range_of(piece) })
        .projection(doc! { "at": 1, VIEW: 1, "hll": 1 })
        .await?
        .try_collect()
        .await?)
}

/// Page views and visitors per period of `level` over `range`.
pub async fn series(db: &Db, range: Range, level: Level) -> Result<Vec<Point>, DbError> {
    let (from, to) = range.bounds();
    let mut found: HashMap<DateTime, (i64, Vec<i32>)> = HashMap::new();
    for piece in plan(from, to, &level_sources(db, level).await?) {
        match piece.source {
            Some(source) => {
                for d in site_documents(db, source, &piece).await? {
                    if let Ok(at) = d.get_datetime("at") {
                        let period = found.entry(level.truncate(*at)).or_default();
                        period.0 += number(d.get(VIEW));
                        period.1.extend(sketch(&d));
                    }
                }
            }
            None => {
                let mut trunc = doc! { "date": "$at", "unit": level.unit() };
                if level == Level::Week {
                    trunc.insert("startOfWeek", "monday");
                }
                let rows = aggregate(
                    db,
                    EVENTS,
                    vec![
                        doc! { "$match": { "at": range_of(&piece), "bot": false } },
                        doc! { "$group": {
                            "_id": { "$dateTrunc": trunc },
                            "views": { "$sum": { "$cond": [{ "$eq": ["$kind", VIEW] }, 1, 0] } },
                            "hll": { "$addToSet": "$hll" },
                        } },
                    ],
                )
                .await?;
                for row in rows {
                    if let Ok(at) = row.get_datetime("_id") {
                        let period = found.entry(*at).or_default();
                        period.0 += number(row.get("views"));
                        period.1.extend(values(&row, "hll"));
                    }
                }
            }
        }
    }
    Ok(super::traffic::periods(range, level)
        .into_iter()
        .map(|at| {
            let (views, values) = found.remove(&at).unwrap_or_default();
            Point {
                at,
                views,
                visitors: hll::estimate(&values),
            }
        })
        .collect())
}

/// Visitors over the whole range: the sketches of its complete days and hours merged with the
/// events' after the hours' watermark.
pub async fn visitors(db: &Db, range: Range) -> Result<u64, DbError> {
    let (from, to) = range.bounds();
    let sources = [
        (Level::Day, watermark(db, Level::Day).await?),
        (Level::Hour, watermark(db, Level::Hour).await?),
    ];
    let mut all: Vec<i32> = Vec::new();
    for piece in plan(from, to, &sources) {
        match piece.source {
            Some(source) => {
                for d in site_documents(db, source, &piece).await? {
                    all.extend(sketch(&d));
                }
                all = hll::compact(all);
            }
            None => {
                let rows = aggregate(
                    db,
                    EVENTS,
                    vec![
                        doc! { "$match": { "at": range_of(&piece), "bot": false } },
                        doc! { "$group": { "_id": Bson::Null, "hll": { "$addToSet": "$hll" } } },
                    ],
                )
                .await?;
                for row in rows {
                    all.extend(values(&row, "hll"));
                }
            }
        }
    }
    Ok(hll::estimate(&all))
}

async fn aggregate(
    db: &Db,
    collection: &str,
    pipeline: Vec<Document>,
) -> Result<Vec<Document>, DbError> {
    Ok(db
        .collection::<Document>(collection)
        .aggregate(pipeline)
        .await?
        .try_collect()
        .await?)
}

/// The pieces of `range` for the dimension documents: their complete days, then their hours
/// (of the day not yet closed), then the events (at most the hour since).
async fn dimension_pieces(db: &Db, range: Range) -> Result<Vec<Piece>, DbError> {
    let (from, to) = range.bounds();
    let (days, hours) = dimension_watermarks(db).await?;
    let pieces = plan(from, to, &[(Level::Day, days), (Level::Hour, hours)]);
    Ok(hours_from(pieces, days))
}

/// `pieces` with the hours before `days` (the days' watermark) read from the events instead:
/// the hourly documents are kept only from there on. Ranges of whole UTC days never plan such
/// hours (the days cover them); this keeps a range starting mid-day from reading nothing.
fn hours_from(pieces: Vec<Piece>, days: Option<DateTime>) -> Vec<Piece> {
    let start = days.unwrap_or(DateTime::from_millis(i64::MIN));
    let mut out = Vec::with_capacity(pieces.len() + 1);
    for piece in pieces {
        if piece.source == Some(Level::Hour) && piece.from < start {
            let split = start.min(piece.to);
            out.push(Piece {
                source: None,
                to: split,
                ..piece
            });
            if split < piece.to {
                out.push(Piece {
                    from: split,
                    ..piece
                });
            }
        } else {
            out.push(piece);
        }
    }
    out
}

/// Where a piece read from dimension documents finds them: days or hours.
fn dimension_collection(piece: &Piece) -> &'static str {
    match piece.source {
        Some(Level::Hour) => dimensions::HOURLY,
        _ => DIMENSIONS,
    }
}

/// Per key of `dim` over `range`: its count and the packed sketch values of the events read
/// (the documents' sketches are fetched only for the keys shown, [`key_sketches`]).
async fn counts(
    db: &Db,
    dim: Dim,
    pieces: &[Piece],
) -> Result<HashMap<String, (i64, Vec<i32>)>, DbError> {
    let mut found: HashMap<String, (i64, Vec<i32>)> = HashMap::new();
    for piece in pieces {
        if piece.source.is_some() {
            let rows = aggregate(
                db,
                dimension_collection(piece),
                vec![
                    doc! { "$match": {
                        "dim": dim.name(),
                        "at": range_of(piece),
                        "key": { "$ne": Bson::Null },
                    } },
                    doc! { "$group": { "_id": "$key", "count": { "$sum": "$count" } } },
                ],
            )
            .await?;
            for row in rows {
                found
                    .entry(dimensions::label(row.get("_id")))
                    .or_default()
                    .0 += number(row.get("count"));
            }
            continue;
        }
        for (mut filter, key) in dim.queries() {
            filter.insert("at", range_of(piece));
            let rows = aggregate(
                db,
                EVENTS,
                vec![
                    doc! { "$match": filter },
                    doc! { "$group": {
                        "_id": key,
                        "count": { "$sum": 1 },
                        "hll": { "$addToSet": "$hll" },
                    } },
                ],
            )
            .await?;
            for row in rows {
                let entry = found.entry(dimensions::label(row.get("_id"))).or_default();
                entry.0 += number(row.get("count"));
                entry.1.extend(values(&row, "hll"));
            }
        }
    }
    Ok(found)
}

/// The stored sketch values of each of `keys` of `dim` over the documents' pieces: one query
/// (the `dim, key, at` index: one document per key and day).
async fn key_sketches(
    db: &Db,
    dim: Dim,
    keys: &[&str],
    pieces: &[Piece],
) -> Result<HashMap<String, Vec<i32>>, DbError> {
    let mut out: HashMap<String, Vec<i32>> = HashMap::new();
    if keys.is_empty() {
        return Ok(out);
    }
    for piece in pieces.iter().filter(|p| p.source.is_some()) {
        let docs: Vec<Document> = db
            .collection::<Document>(dimension_collection(piece))
            .find(doc! { "dim": dim.name(), "key": { "$in": keys }, "at": range_of(piece) })
            .projection(doc! { "key": 1, "hll": 1 })
            .await?
            .try_collect()
            .await?;
        for d in docs {
            out.entry(dimensions::label(d.get("key")))
                .or_default()
                .extend(sketch(&d));
        }
    }
    Ok(out)
}

/// The `limit` most counted keys of `dim` in `range` with their visitors: the rows
/// [`super::traffic::top`] and [`super::traffic::searches`] give from the events.
pub async fn top(db: &Db, range: Range, dim: Dim, limit: i64) -> Result<Vec<Row>, DbError> {
    let pieces = dimension_pieces(db, range).await?;
    let mut keys: Vec<(String, (i64, Vec<i32>))> =
        counts(db, dim, &pieces).await?.into_iter().collect();
    keys.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    keys.truncate(usize::try_from(limit).unwrap_or(0));
    let labels: Vec<&str> = keys.iter().map(|(label, _)| label.as_str()).collect();
    let mut stored = key_sketches(db, dim, &labels, &pieces).await?;
    Ok(keys
        .into_iter()
        .map(|(label, (count, mut values))| {
            values.extend(stored.remove(&label).unwrap_or_default());
            Row {
                visitors: hll::estimate(&values) as i64,
                label,
                count,
            }
        })
        .collect())
}

/// The product funnel's steps over `range` ([`super::traffic::funnel`]).
pub async fn funnel(db: &Db, range: Range) -> Result<Vec<Step>, DbError> {
    let pieces = dimension_pieces(db, range).await?;
    let mut found = counts(db, Dim::Funnel, &pieces).await?;
    let kinds: Vec<&str> = FUNNEL.iter().map(|(kind, _)| *kind).collect();
    let mut stored = key_sketches(db, Dim::Funnel, &kinds, &pieces).await?;
    let mut steps = Vec::with_capacity(FUNNEL.len());
    for (kind, name) in FUNNEL {
        let (events, mut values) = found.remove(kind).unwrap_or_default();
        values.extend(stored.remove(kind).unwrap_or_default());
        steps.push(Step {
            name,
            visitors: hll::estimate(&values) as i64,
            events,
        });
    }
    Ok(steps)
}

/// The page templates with the slowest 95th-percentile response time in `range`, among those
/// viewed at least `min_views` times ([`super::traffic::slowest`]; quantiles from the merged
/// histograms: equal below 128 ms, above it at most a 64th under).
pub async fn slowest(
    db: &Db,
    range: Range,
    min_views: i64,
    limit: usize,
) -> Result<Vec<Timing>, DbError> {
    let mut histograms: HashMap<String, BTreeMap<i64, i64>> = HashMap::new();
    for piece in dimension_pieces(db, range).await? {
        if piece.source.is_some() {
            let docs: Vec<Document> = db
                .collection::<Document>(dimension_collection(&piece))
                .find(doc! {
                    "dim": Dim::Template.name(),
                    "at": range_of(&piece),
                    "key": { "$ne": Bson::Null },
                })
                .projection(doc! { "key": 1, "ms": 1, "n": 1 })
                .await?
                .try_collect()
                .await?;
            for d in docs {
                let histogram = histograms
                    .entry(dimensions::label(d.get("key")))
                    .or_default();
                let (Ok(ms), Ok(n)) = (d.get_array("ms"), d.get_array("n")) else {
                    continue;
                };
                for (ms, n) in ms.iter().zip(n) {
                    *histogram.entry(number(Some(ms))).or_default() += number(Some(n));
                }
            }
            continue;
        }
        let mut filter = doc! { "kind": VIEW, "bot": false };
        filter.insert("at", range_of(&piece));
        let rows = aggregate(
            db,
            EVENTS,
            vec![
                doc! { "$match": filter },
                doc! { "$group": {
                    "_id": { "template": "$template", "ms": "$response_ms" },
                    "n": { "$sum": 1 },
                } },
            ],
        )
        .await?;
        for row in rows {
            let Ok(id) = row.get_document("_id") else {
                continue;
            };
            *histograms
                .entry(dimensions::label(id.get("template")))
                .or_default()
                .entry(dimensions::bucket(number(id.get("ms"))))
                .or_default() += number(row.get("n"));
        }
    }
    let mut timings: Vec<Timing> = histograms
        .into_iter()
        .filter_map(|(template, histogram)| {
            let views: i64 = histogram.values().sum();
            (views >= min_views).then(|| Timing {
                template,
                views,
                p95_ms: dimensions::histogram_quantile(&histogram, 0.95),
                median_ms: dimensions::histogram_quantile(&histogram, 0.5),
            })
        })
        .collect();
    timings.sort_by(|a, b| b.p95_ms.cmp(&a.p95_ms).then(a.template.cmp(&b.template)));
    timings.truncate(limit);
    Ok(timings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn at(d: u32, h: u32) -> DateTime {
        DateTime::from_chrono(
            Utc.with_ymd_and_hms(2026, 11, d, h, 0, 0)
                .single()
                .expect("t"),
        )
    }

    #[test]
    fn dimension_hours_before_the_days_watermark_are_read_from_the_events() {
        // Days built to the 20th, hours to 13:00 on the 21st; a range from 06:00 on the 19th:
        // the hours of the 19th are no longer kept, so they come from the events.
        let days = Some(at(20, 0));
        let pieces = plan(
            at(19, 6),
            at(22, 0),
            &[(Level::Day, days), (Level::Hour, Some(at(21, 13)))],
        );
        let piece = |from, to, source| Piece { from, to, source };
        assert_eq!(
            hours_from(pieces, days),
            [
                piece(at(19, 6), at(20, 0), None),
                piece(at(20, 0), at(21, 13), Some(Level::Hour)),
                piece(at(21, 13), at(22, 0), None),
            ]
        );
    }

    #[test]
    fn a_range_is_read_from_whole_periods_before_each_watermark_and_the_events_after() {
        // Days built to the 20th, hours to 13:00 on the 21st: 1st–19th from days, the 20th's
        // and the 21st's morning from hours, the rest from the events.
        let pieces = plan(
            at(1, 0),
            at(23, 0),
            &[
                (Level::Day, Some(at(20, 0))),
                (Level::Hour, Some(at(21, 13))),
            ],
        );
        assert_eq!(
            pieces,
            [
                Piece {
                    from: at(1, 0),
                    to: at(20, 0),
                    source: Some(Level::Day)
                },
                Piece {
                    from: at(20, 0),
                    to: at(21, 13),
                    source: Some(Level::Hour)
                },
                Piece {
                    from: at(21, 13),
                    to: at(23, 0),
                    source: None
                },
            ]
        );
        // Nothing rolled up: all from the events.
        assert_eq!(
            plan(at(1, 0), at(2, 0), &[(Level::Day, None)]),
            [Piece {
                from: at(1, 0),
                to: at(2, 0),
                source: None
            }]
        );
        // A month series over a range starting mid-month: the partial month from days.
        let pieces = plan(
            at(15, 0),
            DateTime::from_chrono(
                Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0)
                    .single()
                    .expect("t"),
            ),
            &[
                (
                    Level::Month,
                    Some(DateTime::from_chrono(
                        Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0)
                            .single()
                            .expect("t"),
                    )),
                ),
                (Level::Day, Some(at(30, 0))),
            ],
        );
        assert_eq!(pieces[0].source, Some(Level::Month));
        assert_eq!(
            pieces[0].from.to_chrono().to_rfc3339(),
            "2026-12-01T00:00:00+00:00"
        );
        assert_eq!(
            pieces[1],
            Piece {
                from: at(15, 0),
                to: at(30, 0),
                source: Some(Level::Day)
            }
        );
        assert_eq!(pieces[2].source, None);
        assert_eq!(pieces[2].from, at(30, 0));
    }
}
