//! Geospatial support: GeoJSON and legacy coordinate pairs parsed into the `geo` crate's
//! geometries (`shape.rs`), the query operators `$geoWithin`, `$geoIntersects`, `$near` and
//! `$nearSphere` and the `$geoNear` stage's options (`query.rs`), and what `2dsphere` and `2d`
//! indexes accept as a document's location (here).
//!
//! Predicates and distances come from the `geo` crate: containment and intersection are
//! computed in the plane of (longitude, latitude), which treats a polygon's edges as straight
//! lines on an equirectangular map rather than as geodesics (see the crate README for what that
//! changes); distances on the sphere are the crate's haversine distances on a sphere of
//! MongoDB's radius, 6 378 100 m.

mod query;
mod shape;

pub(crate) use query::{GeoNearSpec, GeoPredicate, NearQuery};
pub(crate) use shape::Location;

use bson::{Bson, Document};

/// The radius of the earth MongoDB's spherical distances use (`kRadiusOfEarthInMeters`).
pub(crate) const EARTH_RADIUS_METERS: f64 = 6_378_100.0;

/// The kind of a geospatial index field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum IndexKind {
    /// `"2dsphere"`: GeoJSON objects and legacy pairs on the sphere.
    Sphere,
    /// `"2d"`: legacy coordinate pairs on a flat plane bounded by `[min, max)`.
    Flat { min: f64, max: f64 },
}

impl IndexKind {
    /// The kind a key pattern value names, with a `2d` index's bounds.
    pub(crate) fn of(direction: &Bson, min: f64, max: f64) -> Option<IndexKind> {
        match direction {
            Bson::String(s) if s == "2dsphere" => Some(IndexKind::Sphere),
            Bson::String(s) if s == "2d" => Some(IndexKind::Flat { min, max }),
            _ => None,
        }
    }
}

/// What a document holds at an indexed geo field: the locations to index, or nothing (the
/// field is missing, null or an empty array, and the document is left out of the index).
/// An error is mongod's reason for refusing the document (the caller adds the code and the
/// document).
pub(crate) fn index_locations(
    values: &[Bson],
    kind: IndexKind,
) -> Result<Vec<Location>, IndexRefusal> {
    let mut out = Vec::new();
    for value in values {
        match value {
            Bson::Null | Bson::Undefined => {}
            Bson::Array(items) if items.is_empty() => {}
            _ => match kind {
                IndexKind::Sphere => {
                    let found = shape::locations(value).map_err(IndexRefusal::Sphere)?;
                    for location in &found {
                        location.check_on_sphere().map_err(IndexRefusal::Sphere)?;
                    }
                    out.extend(found);
                }
                IndexKind::Flat { min, max } => {
                    let found = shape::legacy_locations(value).ok_or(IndexRefusal::FlatFormat)?;
                    for location in &found {
                        let p = location.point();
                        if !(min..max).contains(&p.x) || !(min..max).contains(&p.y) {
                            return Err(IndexRefusal::FlatBounds { min, max });
                        }
                    }
                    out.extend(found);
                }
            },
        }
    }
    Ok(out)
}

/// Why an index refuses a document's location.
#[derive(Debug, Clone)]
pub(crate) enum IndexRefusal {
    /// 16755: a `2dsphere` index cannot extract keys (the reason).
    Sphere(String),
    /// 13026: a `2d` index needs legacy coordinate pairs.
    FlatFormat,
    /// 13027: a `2d` point lies outside the index's `[min, max)`.
    FlatBounds { min: f64, max: f64 },
}

impl IndexRefusal {
    /// mongod's code and message for `doc` (as the index saw it).
    pub(crate) fn code_and_message(&self, doc: &Document) -> (i32, String) {
        let shown = crate::keystring::render_document(doc);
        match self {
            IndexRefusal::Sphere(reason) => {
                (16755, format!("Can't extract geo keys: {shown}  {reason}"))
            }
            IndexRefusal::FlatFormat => (
                13026,
                format!(
                    "geo values must be 'legacy coordinate pairs' for 2d indexes :: caused by \
                     :: {shown}"
                ),
            ),
            IndexRefusal::FlatBounds { min, max } => (
                13027,
                format!(
                    "point not in interval of [ {}, {} ) :: caused by :: {shown}",
                    crate::printing::fmt_double(*min),
                    crate::printing::fmt_double(*max)
                ),
            ),
        }
    }
}
