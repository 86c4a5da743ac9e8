//! `find`'s index-level options: `min`/`max` (bounds on the hinted index's keys, inclusive
//! and exclusive), `returnKey` (the index key instead of the document) and `showRecordId`
//! (the record id as `$recordId`).

use super::args::Args;
use super::read_spec::ReadSpec;
use crate::collection::{Collection, Hit};
use crate::error::{Error, Result};
use crate::index::planner::Plan;
use crate::index::Index;
use crate::query::Projection;
use bson::{Bson, Document};

/// The options as given; all absent is an ordinary find.
#[derive(Debug, Default)]
pub(crate) struct FindExtras {
    min: Option<Document>,
    max: Option<Document>,
    return_key: bool,
    show_record_id: bool,
}

impl FindExtras {
    pub(crate) fn parse(args: &Args<'_>) -> Result<FindExtras> {
        Ok(FindExtras {
            min: args.document("min")?.filter(|d| !d.is_empty()).cloned(),
            max: args.document("max")?.filter(|d| !d.is_empty()).cloned(),
            return_key: args.bool("returnKey", false)?,
            show_record_id: args.bool("showRecordId", false)?,
        })
    }

    /// True when none of the options is set.
    pub(crate) fn is_plain(&self) -> bool {
        self.min.is_none() && self.max.is_none() && !self.return_key && !self.show_record_id
    }

    /// Run `read` over `c` with these options, returning the documents to send.
    pub(crate) fn run(
        &self,
        c: &Collection,
        read: &ReadSpec,
        projection: Option<&Projection>,
    ) -> Result<Vec<Document>> {
        let bounded = self.min.is_some() || self.max.is_some();
        // With min/max the skip and limit apply after the bounds, so the query runs without.
        let unlimited = ReadSpec {
            filter: read.filter.clone(),
            filter_doc: read.filter_doc.clone(),
            sort: read.sort.clone(),
            sort_doc: read.sort_doc.clone(),
            hint: read.hint.clone(),
            skip: 0,
            limit: None,
        };
        let spec = if bounded { &unlimited } else { read };
        let plan = c.plan(&spec.query_spec())?;
        let index = match plan {
            Plan::IndexScan { index, .. } => c.indexes().get(index),
            Plan::CollScan => None,
        };
        let (mut hits, _) = c.query(&spec.query_spec())?;
        if bounded {
            hits = self.within_bounds(hits, index, read.hint.is_some())?;
            let taken = hits.into_iter().skip(read.skip);
            hits = match read.limit {
                Some(n) => taken.take(n).collect(),
                None => taken.collect(),
            };
        }
        let fields = projection.and_then(Projection::top_level_fields);
        hits.into_iter()
            .map(|hit| {
                let mut out = if self.return_key {
                    match index {
                        Some(idx) => idx.key_document(&hit.doc.to_document()?)?,
                        // Without an index there is no key: MongoDB returns empty documents.
                        None => Document::new(),
                    }
                } else {
                    match projection {
                        Some(p) => p.apply(&hit.doc.select(fields.as_deref())?, hit.position)?,
                        None => hit.doc.to_document()?,
                    }
                };
                // With `returnKey`, mongod returns the key alone: `showRecordId` adds nothing.
                if self.show_record_id && !self.return_key {
                    out.insert("$recordId", Bson::Int64(hit.record as i64));
                }
                Ok(out)
            })
            .collect()
    }

    /// The hits whose key in `index` lies in `[min, max)`.
    fn within_bounds(
        &self,
        hits: Vec<Hit>,
        index: Option<&Index>,
        hinted: bool,
    ) -> Result<Vec<Hit>> {
        if !hinted {
            return Err(Error::location(
                51173,
                "When using min()/max() a hint of which index to use must be provided",
            ));
        }
        let Some(idx) = index else {
            return Err(Error::location(
                51174,
                "The index chosen is not consistent with min/max",
            ));
        };
        let paths: Vec<&str> = idx.key_fields().map(|(p, _)| p).collect();
        let bound = |d: &Option<Document>| -> Result<Option<Vec<u8>>> {
            let Some(d) = d else { return Ok(None) };
            let names: Vec<&str> = d.keys().map(String::as_str).collect();
            if names != paths {
                return Err(Error::location(
                    51174,
                    "The index chosen is not consistent with min/max",
                ));
            }
            let values: Vec<Bson> = d.values().cloned().collect();
            Ok(Some(idx.encode_values(&values)))
        };
        let (min, max) = (bound(&self.min)?, bound(&self.max)?);
        let mut out = Vec::with_capacity(hits.len());
        for hit in hits {
            let keys = idx.keys_for_stored(&hit.doc)?;
            let inside = keys.iter().any(|k| {
                min.as_ref().is_none_or(|m| k.as_slice() >= m.as_slice())
                    && max.as_ref().is_none_or(|m| k.as_slice() < m.as_slice())
            });
            if inside {
                out.push(hit);
            }
        }
        Ok(out)
    }
}
