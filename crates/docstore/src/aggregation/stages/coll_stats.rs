//! `$collStats`: one document about the aggregated collection (`storageStats` and `count` as
//! MongoDB 7.0 reports them, what mongosh's `db.coll.stats()` and `dataSize()` read), which the
//! rest of the pipeline runs over. It ignores its input, so it may only open a top-level
//! pipeline. docstore keeps no latency or query-execution counters: `latencyStats` and
//! `queryExecStats` are refused rather than answered with made-up zeros.

use crate::aggregation::PipelineContext;
use crate::error::{Error, ErrorCode, Result};
use crate::stats::{int_or_long, scale_factor, storage_stats};
use bson::{doc, Bson, Document};

/// The options `$collStats.storageStats` accepts (only `scale` changes the figures).
const STORAGE_STATS_OPTIONS: &[&str] = &["scale", "verbose", "waitForLock", "numericOnly"];

/// A parsed `$collStats`: the sections asked for, in the order asked.
#[derive(Debug, Clone)]
pub(crate) struct CollStats {
    sections: Vec<Section>,
}

#[derive(Debug, Clone)]
enum Section {
    /// `storageStats`, sizes divided by `scale`.
    StorageStats { scale: i64 },
    /// `count`: the number of documents.
    Count,
}

impl CollStats {
    pub(crate) fn parse(spec: &Bson) -> Result<CollStats> {
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                5447000,
                format!("$collStats must take a nested object but found: $collStats: {spec}"),
            ));
        };
        let mut sections = Vec::new();
        for (field, value) in spec {
            match field.as_str() {
                "storageStats" => {
                    let Bson::Document(options) = value else {
                        return Err(Error::type_mismatch(format!(
                            "BSON field '$collStats.storageStats' is the wrong type '{}', \
                             expected type 'object'",
                            crate::value::type_name(value)
                        )));
                    };
                    if let Some(unknown) = options
                        .keys()
                        .find(|k| !STORAGE_STATS_OPTIONS.contains(&k.as_str()))
                    {
                        return Err(Error::location(
                            40415,
                            format!("BSON field '$collStats.storageStats.{unknown}' is an unknown field."),
                        ));
                    }
                    let scale =
                        scale_factor(options.get("scale"), "$collStats.storageStats.scale")?;
                    sections.push(Section::StorageStats { scale });
                }
                "count" => sections.push(Section::Count),
                "latencyStats" | "queryExecStats" => {
                    return Err(Error::not_supported(format!("$collStats {field}")))
                }
                other => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field '$collStats.{other}' is an unknown field."),
                    ))
                }
            }
        }
        Ok(CollStats { sections })
    }

    /// The report: `ns`, `host` and `localTime`, then each section asked for.
    pub(crate) fn run(&self, ctx: &dyn PipelineContext) -> Result<Document> {
        let collection = ctx.aggregated_collection()?;
        let missing = |what: &str| {
            Error::new(
                ErrorCode::NamespaceNotFound,
                format!(
                    "Unable to retrieve {what} in $collStats stage :: caused by :: Collection [{}] \
                     not found.",
                    collection.namespace
                ),
            )
        };
        let mut out = doc! {
            "ns": collection.namespace.clone(),
            "host": collection.host.clone(),
            "localTime": bson::DateTime::now(),
        };
        for section in &self.sections {
            match section {
                Section::StorageStats { scale } => {
                    let stats = collection
                        .stats
                        .as_ref()
                        .ok_or_else(|| missing("storageStats"))?;
                    out.insert("storageStats", storage_stats(stats, *scale));
                }
                Section::Count => {
                    let stats = collection.stats.as_ref().ok_or_else(|| missing("count"))?;
                    out.insert("count", int_or_long(stats.get_i64("count").unwrap_or(0)));
                }
            }
        }
        Ok(out)
    }
}
