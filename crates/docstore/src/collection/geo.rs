//! Proximity queries: a find with `$near`/`$nearSphere` and the `$geoNear` stage. Both need a
//! geo index on the searched field (mongod's errors otherwise), read the documents it holds,
//! check the rest of the filter, measure each document's distance in the units the index and
//! the query imply, and return the documents nearest first.

use super::{sort_hits, Collection, ExecStats, Hit, QuerySpec};
use crate::error::{Error, ErrorCode, Result};
use crate::geospatial::{GeoNearSpec, IndexKind, NearQuery};
use crate::index::planner::IndexBounds;
use crate::query::Filter;
use bson::{doc, Bson, Document};
use std::collections::HashSet;

/// A match of a proximity query: the hit, its distance and the location measured.
struct Near {
    hit: Hit,
    distance: f64,
    location: Bson,
}

impl Collection {
    /// A find whose filter has `$near` on `path`: nearest first (an explicit sort reorders),
    /// then skip and limit.
    pub(super) fn execute_near(
        &self,
        query: &QuerySpec<'_>,
        explain: bool,
        path: &str,
        near: &NearQuery,
    ) -> Result<(Vec<Hit>, ExecStats)> {
        let rest = query.filter.without_near();
        let (found, mut stats) = self.nearest(&rest, path, near, explain)?;
        let mut hits: Vec<Hit> = found.into_iter().map(|n| n.hit).collect();
        if let Some(sort) = query.sort.filter(|s| !s.keys.is_empty()) {
            if explain {
                let input = std::mem::take(&mut stats.winning_plan);
                stats.winning_plan = doc! {
                    "stage": "SORT",
                    "sortPattern": query.sort_doc.cloned().unwrap_or_default(),
                    "inputStage": input,
                };
            }
            sort_hits(&mut hits, sort, None)?;
        }
        let hits: Vec<Hit> = match query.limit {
            Some(limit) => hits.into_iter().skip(query.skip).take(limit).collect(),
            None => hits.into_iter().skip(query.skip).collect(),
        };
        stats.returned = hits.len() as u64;
        Ok((hits, stats))
    }

    /// The documents a `$geoNear` stage produces, nearest first, each with its distance (times
    /// `distanceMultiplier`) in `distanceField` and, with `includeLocs`, the location measured.
    pub(crate) fn geo_near(
        &self,
        spec: &GeoNearSpec,
        explain: bool,
    ) -> Result<(Vec<Document>, ExecStats)> {
        let path = match &spec.key {
            Some(key) => key.clone(),
            None => self.geo_near_key()?,
        };
        let filter = Filter::parse(&spec.query)?;
        if filter.near().is_some() {
            return Err(Error::bad_value(
                "$geoNear does not accept $near or $nearSphere in its query",
            ));
        }
        let (found, mut stats) = self.nearest(&filter, &path, &spec.near, explain)?;
        let mut out = Vec::with_capacity(found.len());
        for near in found {
            let mut d = near.hit.doc.to_document()?;
            set_dotted(
                &mut d,
                &spec.distance_field,
                Bson::Double(near.distance * spec.distance_multiplier),
            );
            if let Some(field) = &spec.include_locs {
                set_dotted(&mut d, field, near.location);
            }
            out.push(d);
        }
        stats.returned = out.len() as u64;
        Ok((out, stats))
    }

    /// The field a `$geoNear` without `key` searches: that of the one `2d` index, else of the
    /// one `2dsphere` index (mongod's IndexNotFound otherwise).
    fn geo_near_key(&self) -> Result<String> {
        let ns = self.namespace();
        for flat in [true, false] {
            let fields: Vec<&str> = self
                .indexes
                .iter()
                .filter_map(|idx| {
                    idx.geo_fields()
                        .find(|(_, kind)| matches!(kind, IndexKind::Flat { .. }) == flat)
                        .map(|(path, _)| path)
                })
                .collect();
            let name = if flat { "2d" } else { "2dsphere" };
            match fields.as_slice() {
                [] => continue,
                [only] => return Ok(only.to_string()),
                _ => {
                    return Err(Error::new(
                        ErrorCode::IndexNotFound,
                        format!(
                            "There is more than one {name} index on {ns}; unsure which to use \
                             for $geoNear"
                        ),
                    ))
                }
            }
        }
        Err(Error::new(
            ErrorCode::IndexNotFound,
            "$geoNear requires a 2d or 2dsphere index, but none were found",
        ))
    }

    /// The geo index answering a proximity search on `path` and whether it is a `2dsphere`
    /// one: a GeoJSON point needs `2dsphere`; a legacy pair takes a `2d` index first.
    fn near_index(&self, path: &str, near: &NearQuery) -> Result<(usize, bool)> {
        let mut sphere = None;
        for (position, idx) in self.indexes.iter().enumerate() {
            if idx.spec.partial_filter.is_some() {
                continue;
            }
            for (field, kind) in idx.geo_fields() {
                if field != path {
                    continue;
                }
                match kind {
                    IndexKind::Flat { .. } if near.geojson => {}
                    IndexKind::Flat { .. } => return Ok((position, false)),
                    IndexKind::Sphere => {
                        sphere.get_or_insert(position);
                    }
                }
            }
        }
        sphere.map(|position| (position, true)).ok_or_else(|| {
            Error::location(
                291,
                format!(
                    "error processing query: ns={} planner returned error :: caused by :: \
                     unable to find index for $geoNear query",
                    self.namespace()
                ),
            )
        })
    }

    /// Every document of the geo index on `path` that matches `filter` and lies within the
    /// query's distances, nearest first (equal distances in index order).
    fn nearest(
        &self,
        filter: &Filter,
        path: &str,
        near: &NearQuery,
        explain: bool,
    ) -> Result<(Vec<Near>, ExecStats)> {
        let (position, sphere) = self.near_index(path, near)?;
        let units = near.units(sphere);
        let index = &self.indexes[position];
        let mut stats = ExecStats {
            winning_plan: Document::new(),
            keys_examined: 0,
            docs_examined: 0,
            returned: 0,
        };
        if explain {
            stats.winning_plan = doc! {
                "stage": if sphere { "GEO_NEAR_2DSPHERE" } else { "GEO_NEAR_2D" },
                "keyPattern": index.spec.key.clone(),
                "indexName": index.spec.name.clone(),
                "indexVersion": 2,
            };
        }
        let bounds = IndexBounds::default();
        let mut seen = HashSet::new();
        let mut found = Vec::new();
        let mut clock = crate::deadline::Ticker::start();
        for record in index.scan(&bounds, false) {
            clock.tick()?;
            stats.keys_examined += 1;
            if !seen.insert(record) {
                continue;
            }
            let Some(stored) = self.docs.get(&record) else {
                continue;
            };
            stats.docs_examined += 1;
            let d = stored.to_document()?;
            let Some(position) = filter.try_matches_with_position(&d)? else {
                continue;
            };
            let closest =
                crate::path::collect_path_values(&d, path, crate::path::LeafArrays::NoTraversal)
                    .iter()
                    .filter_map(|value| near.closest(value, units))
                    .min_by(|a, b| a.0.total_cmp(&b.0));
            let Some((distance, location)) = closest else {
                continue;
            };
            if !near.in_range(distance) {
                continue;
            }
            found.push(Near {
                hit: Hit {
                    record,
                    doc: stored.clone(),
                    position,
                    score: None,
                },
                distance,
                location,
            });
        }
        found.sort_by(|a, b| a.distance.total_cmp(&b.distance));
        Ok((found, stats))
    }
}

/// Set `path` (dotted) in `doc`, creating embedded documents on the way (a non-document in
/// the way is replaced, as `$geoNear`'s output fields overwrite).
fn set_dotted(doc: &mut Document, path: &str, value: Bson) {
    match path.split_once('.') {
        None => {
            doc.insert(path, value);
        }
        Some((head, rest)) => {
            if !matches!(doc.get(head), Some(Bson::Document(_))) {
                doc.insert(head, Document::new());
            }
            if let Some(Bson::Document(inner)) = doc.get_mut(head) {
                set_dotted(inner, rest, value);
            }
        }
    }
}
