//! A collection's storage figures in the shape MongoDB 7.0 reports them, shared by the
//! `collStats` command and the `$collStats` stage. A leaf: it depends on `bson`, `error` and
//! `value` only, so both the command layer and the aggregation engine can use it.

use crate::error::{Error, Result};
use bson::{doc, Bson, Document};

/// MongoDB sends small counters as int32 and switches to int64 only when needed.
pub(crate) fn int_or_long(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

/// `scale` of collStats and `$collStats.storageStats`: a number of at least 1 (default 1).
/// `field` names the option in the type-mismatch message.
pub(crate) fn scale_factor(value: Option<&Bson>, field: &str) -> Result<i64> {
    let scale = match value {
        None => return Ok(1),
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        // MongoDB truncates a fractional scale.
        Some(Bson::Double(d)) if d.is_finite() => *d as i64,
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field '{field}' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                crate::value::type_name(other)
            )))
        }
    };
    if scale < 1 {
        return Err(Error::location(
            51024,
            format!("BSON field 'scale' value must be >= 1, actual value '{scale}'"),
        ));
    }
    Ok(scale)
}

/// The storage figures MongoDB 7.0 reports for a collection (`collStats` and
/// `$collStats.storageStats`), sizes divided by `scale` as MongoDB does (integer division;
/// `avgObjSize` is never scaled). `stats` is `Collection::stats`.
pub(crate) fn storage_stats(stats: &Document, scale: i64) -> Document {
    // MongoDB sends each figure as an int32 while it fits, as an int64 beyond.
    let int = int_or_long;
    let figure = |name: &str| stats.get_i64(name).unwrap_or(0);
    let mut index_sizes = Document::new();
    if let Ok(sizes) = stats.get_document("indexSizes") {
        for (name, bytes) in sizes {
            let bytes = match bytes {
                Bson::Int64(n) => *n,
                Bson::Int32(n) => i64::from(*n),
                _ => 0,
            };
            index_sizes.insert(name.clone(), int(bytes / scale));
        }
    }
    let mut out = doc! {
        "size": int(figure("size") / scale),
        "count": int(figure("count")),
        "avgObjSize": int(figure("avgObjSize")),
        "numOrphanDocs": 0,
        "storageSize": int(figure("storageSize") / scale),
        "freeStorageSize": 0,
        "capped": false,
        "nindexes": stats.get_i32("nindexes").unwrap_or(0),
        "indexBuilds": [],
        "totalIndexSize": int(figure("totalIndexSize") / scale),
        "totalSize": int(figure("totalSize") / scale),
        "indexSizes": index_sizes,
        "scaleFactor": int(scale),
    };
    // A capped collection's limits, as mongod reports them (`maxSize` scaled, `max` not).
    if stats.get_bool("capped") == Ok(true) {
        out.insert("capped", true);
        out.insert("max", int(figure("max")));
        out.insert("maxSize", int(figure("maxSize") / scale));
    }
    out
}
