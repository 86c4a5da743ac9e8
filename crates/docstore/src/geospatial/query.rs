//! The geospatial query operators: `$geoWithin` (`$geometry`, `$box`, `$polygon`, `$center`,
//! `$centerSphere`), `$geoIntersects` (`$geometry`), `$near`/`$nearSphere` (GeoJSON point with
//! distances in meters, or a legacy pair with flat or radian distances), and the options of the
//! `$geoNear` stage. Parsed once; matched against the value a field path reaches.

use super::shape::{self, Location};
use super::EARTH_RADIUS_METERS;
use crate::error::{Error, Result};
use bson::{Bson, Document};
use geo::{
    Closest, Coord, Covers, Distance, Euclidean, Geometry, HaversineClosestPoint, HaversineMeasure,
    Intersects, LineString, Point, Polygon, Rect,
};

/// The sphere MongoDB measures on.
const SPHERE: HaversineMeasure = HaversineMeasure::new(EARTH_RADIUS_METERS);

/// The region of a `$geoWithin`.
#[derive(Debug, Clone)]
pub(crate) enum Region {
    /// `$geometry`: a GeoJSON Polygon or MultiPolygon.
    Geometry(Geometry<f64>),
    /// `$box`: flat, corners included.
    Box(Rect<f64>),
    /// `$polygon`: flat, edges included.
    Polygon(Polygon<f64>),
    /// `$center`: flat disc of a radius in coordinate units.
    Center(Coord<f64>, f64),
    /// `$centerSphere`: spherical cap of a radius in radians.
    CenterSphere(Coord<f64>, f64),
}

/// `$geoWithin` or `$geoIntersects` on a field.
#[derive(Debug, Clone)]
pub(crate) enum GeoPredicate {
    Within(Box<Region>),
    Intersects(Box<Geometry<f64>>),
}

impl GeoPredicate {
    /// Parse `{<op>: arg}` for `$geoWithin` (or its old name `$within`) and `$geoIntersects`.
    pub(crate) fn parse(op: &str, arg: &Bson) -> Result<GeoPredicate> {
        let Bson::Document(shape) = arg else {
            return Err(Error::bad_value(format!("{op} must be an object")));
        };
        let Some((name, value)) = shape.iter().next() else {
            return Err(Error::bad_value(format!("{op} must contain a shape")));
        };
        if shape.len() != 1 {
            return Err(Error::bad_value(format!(
                "{op} must contain exactly one shape, found {}",
                crate::keystring::render_document(shape)
            )));
        }
        if op == "$geoIntersects" {
            if name != "$geometry" {
                return Err(Error::bad_value(format!(
                    "$geoIntersects expects a $geometry, found {name}"
                )));
            }
            return Ok(GeoPredicate::Intersects(Box::new(geometry_argument(
                value,
            )?)));
        }
        let region = match name.as_str() {
            "$geometry" => {
                let geometry = geometry_argument(value)?;
                if !matches!(geometry, Geometry::Polygon(_) | Geometry::MultiPolygon(_)) {
                    return Err(Error::bad_value(format!(
                        "$geoWithin not supported with provided geometry: {}",
                        crate::keystring::render(value)
                    )));
                }
                Region::Geometry(geometry)
            }
            "$box" => {
                let corners = points_argument(value, "$box")?;
                let [a, b] = corners.as_slice() else {
                    return Err(Error::bad_value("Point must only contain numeric elements"));
                };
                Region::Box(Rect::new(*a, *b))
            }
            "$polygon" => {
                let mut vertices = points_argument(value, "$polygon")?;
                if vertices.len() < 3 {
                    return Err(Error::bad_value("Polygon must have at least 3 points"));
                }
                vertices.push(vertices[0]);
                Region::Polygon(Polygon::new(LineString(vertices), Vec::new()))
            }
            "$center" | "$centerSphere" => {
                let (center, radius) = circle_argument(value, name)?;
                if name == "$center" {
                    Region::Center(center, radius)
                } else {
                    Region::CenterSphere(center, radius)
                }
            }
            other => {
                return Err(Error::bad_value(format!(
                    "unknown geo specifier: {other}: {}",
                    crate::keystring::render(value)
                )))
            }
        };
        Ok(GeoPredicate::Within(Box::new(region)))
    }

    /// Whether the value a path reaches (arrays not traversed) has a location that is
    /// within the region / intersects the geometry. Values that are not locations never match.
    pub(crate) fn matches(&self, value: Option<&Bson>) -> bool {
        let Some(found) = value.and_then(|v| shape::locations(v).ok()) else {
            return false;
        };
        found.iter().any(|location| match self {
            GeoPredicate::Intersects(g) => {
                across_antimeridian(g, &location.geometry, |a, b| a.intersects(b))
            }
            GeoPredicate::Within(region) => region.holds(location),
        })
    }
}

impl Region {
    fn holds(&self, location: &Location) -> bool {
        use geo::CoordsIter;
        let g = &location.geometry;
        match self {
            Region::Geometry(region) => across_antimeridian(region, g, |a, b| a.covers(b)),
            Region::Box(rect) => g.coords_iter().all(|c| {
                rect.min().x <= c.x
                    && c.x <= rect.max().x
                    && rect.min().y <= c.y
                    && c.y <= rect.max().y
            }),
            Region::Polygon(polygon) => polygon.covers(g),
            Region::Center(center, radius) => g
                .coords_iter()
                .all(|c| Euclidean.distance(Point(c), Point(*center)) <= *radius),
            Region::CenterSphere(center, radius) => g.coords_iter().all(|c| {
                SPHERE.distance(Point(c), Point(*center)) / EARTH_RADIUS_METERS <= *radius
            }),
        }
    }
}

/// `test(a, b)` on the sphere's longitudes: an edge whose ends are more than 180° of longitude
/// apart goes the short way round, across the antimeridian (a line from 178° to -178° is 4°
/// long, not 356°), as edges do in mongod. Geometries without such an edge are tested as they
/// are; otherwise each line and ring is made continuous (its far ends moved by 360°) and `b`
/// is tried at its place and one turn either side.
fn across_antimeridian(
    a: &Geometry<f64>,
    b: &Geometry<f64>,
    test: impl Fn(&Geometry<f64>, &Geometry<f64>) -> bool,
) -> bool {
    if !crosses_antimeridian(a) && !crosses_antimeridian(b) {
        return test(a, b);
    }
    use geo::MapCoords;
    let (a, b) = (continuous(a), continuous(b));
    [0.0, -360.0, 360.0].into_iter().any(|turn| {
        let moved = b.map_coords(|c| Coord {
            x: c.x + turn,
            y: c.y,
        });
        test(&a, &moved)
    })
}

/// Whether any line or ring of `g` has an edge spanning more than 180° of longitude.
fn crosses_antimeridian(g: &Geometry<f64>) -> bool {
    fn line(l: &LineString<f64>) -> bool {
        l.lines().any(|e| (e.end.x - e.start.x).abs() > 180.0)
    }
    fn polygon(p: &Polygon<f64>) -> bool {
        line(p.exterior()) || p.interiors().iter().any(line)
    }
    match g {
        Geometry::LineString(l) => line(l),
        Geometry::Polygon(p) => polygon(p),
        Geometry::MultiLineString(m) => m.iter().any(line),
        Geometry::MultiPolygon(m) => m.iter().any(polygon),
        Geometry::GeometryCollection(c) => c.iter().any(crosses_antimeridian),
        _ => false,
    }
}

/// `g` with each line's and ring's longitudes made continuous (see [`across_antimeridian`]).
fn continuous(g: &Geometry<f64>) -> Geometry<f64> {
    fn line(l: &LineString<f64>) -> LineString<f64> {
        let mut previous: Option<f64> = None;
        let mut turn = 0.0;
        l.coords()
            .map(|c| {
                let mut x = c.x + turn;
                if let Some(p) = previous {
                    while x - p > 180.0 {
                        turn -= 360.0;
                        x -= 360.0;
                    }
                    while p - x > 180.0 {
                        turn += 360.0;
                        x += 360.0;
                    }
                }
                previous = Some(x);
                Coord { x, y: c.y }
            })
            .collect()
    }
    fn polygon(p: &Polygon<f64>) -> Polygon<f64> {
        Polygon::new(line(p.exterior()), p.interiors().iter().map(line).collect())
    }
    match g {
        Geometry::LineString(l) => Geometry::LineString(line(l)),
        Geometry::Polygon(p) => Geometry::Polygon(polygon(p)),
        Geometry::MultiLineString(m) => Geometry::MultiLineString(m.iter().map(line).collect()),
        Geometry::MultiPolygon(m) => Geometry::MultiPolygon(m.iter().map(polygon).collect()),
        Geometry::GeometryCollection(c) => {
            Geometry::GeometryCollection(c.iter().map(continuous).collect())
        }
        other => other.clone(),
    }
}

/// `$geometry: {type, coordinates}` of a query.
fn geometry_argument(value: &Bson) -> Result<Geometry<f64>> {
    match value {
        Bson::Document(d) => shape::parse_geojson(d).map_err(Error::bad_value),
        _ => Err(Error::bad_value("$geometry must be an object")),
    }
}

/// A legacy point of a query: `[x, y]` or `{x: .., y: ..}`.
fn point_argument(value: &Bson) -> Result<Coord<f64>> {
    match shape::legacy_locations(value).as_deref() {
        Some([only]) => Ok(only.point()),
        _ => Err(Error::bad_value("Point must only contain numeric elements")),
    }
}

fn points_argument(value: &Bson, op: &str) -> Result<Vec<Coord<f64>>> {
    let Bson::Array(items) = value else {
        return Err(Error::bad_value(format!("{op} must be an array of points")));
    };
    items.iter().map(point_argument).collect()
}

/// `[[x, y], radius]` of `$center` and `$centerSphere`.
fn circle_argument(value: &Bson, op: &str) -> Result<(Coord<f64>, f64)> {
    let malformed = || Error::bad_value(format!("{op} requires [[x, y], radius]: {value}"));
    let Bson::Array(items) = value else {
        return Err(malformed());
    };
    let [center, radius] = items.as_slice() else {
        return Err(malformed());
    };
    let center = point_argument(center)?;
    let radius = crate::value::to_f64(radius).ok_or_else(malformed)?;
    if radius.is_nan() || radius < 0.0 {
        return Err(Error::bad_value("radius must be a non-negative number"));
    }
    Ok((center, radius))
}

/// What distances a near query measures in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Units {
    /// Meters on the sphere (a GeoJSON point).
    Meters,
    /// Radians on the sphere (a legacy pair with `$nearSphere`, or on a `2dsphere` index).
    Radians,
    /// Coordinate units in the plane (a legacy pair with `$near` on a `2d` index).
    Flat,
}

/// `$near` or `$nearSphere`: the point, and the distance limits in the query's units.
#[derive(Debug, Clone)]
pub(crate) struct NearQuery {
    pub point: Coord<f64>,
    /// The point is a GeoJSON `Point` (distances in meters; only a `2dsphere` index answers).
    pub geojson: bool,
    /// `$nearSphere` (or `spherical: true`): legacy distances in radians.
    pub spherical: bool,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl NearQuery {
    /// Parse `{$near: arg, $maxDistance: .., $minDistance: ..}`: `ops` is the whole operator
    /// document (legacy forms put the limits beside the point).
    pub(crate) fn parse(op: &str, arg: &Bson, ops: &Document) -> Result<NearQuery> {
        let spherical = op == "$nearSphere";
        let mut min = None;
        let mut max = None;
        let mut limits = |source: &Document| -> Result<()> {
            if let Some(v) = source.get("$maxDistance") {
                max = Some(distance_limit(v, "$maxDistance")?);
            }
            if let Some(v) = source.get("$minDistance") {
                min = Some(distance_limit(v, "$minDistance")?);
            }
            Ok(())
        };
        limits(ops)?;
        let (point, geojson) = match arg {
            Bson::Document(d) if d.contains_key("$geometry") => {
                limits(d)?;
                let geometry = geometry_argument(d.get("$geometry").unwrap_or(&Bson::Null))?;
                let Geometry::Point(p) = geometry else {
                    return Err(Error::bad_value(format!(
                        "$near requires a point, given {}",
                        crate::keystring::render(d.get("$geometry").unwrap_or(&Bson::Null))
                    )));
                };
                (p.0, true)
            }
            Bson::Document(d) if d.get_str("type") == Ok("Point") => {
                let geometry = shape::parse_geojson(d).map_err(Error::bad_value)?;
                let Geometry::Point(p) = geometry else {
                    return Err(Error::bad_value("$near requires a point"));
                };
                (p.0, true)
            }
            other => (point_argument(other)?, false),
        };
        Ok(NearQuery {
            point,
            geojson,
            spherical,
            min,
            max,
        })
    }

    /// The units distances are measured in when a `2dsphere` (`sphere`) or `2d` index answers.
    pub(crate) fn units(&self, sphere_index: bool) -> Units {
        if self.geojson {
            Units::Meters
        } else if self.spherical || sphere_index {
            Units::Radians
        } else {
            Units::Flat
        }
    }

    /// The distance from the point to the closest location in `value` (the value a path
    /// reaches, arrays not traversed), with that location as the document holds it.
    pub(crate) fn closest(&self, value: &Bson, units: Units) -> Option<(f64, Bson)> {
        // An array of locations (not a legacy pair): each element is measured on its own.
        if let Bson::Array(items) = value {
            if !items.first().is_some_and(crate::value::is_number) {
                return items
                    .iter()
                    .filter_map(|item| self.closest(item, units))
                    .min_by(|a, b| a.0.total_cmp(&b.0));
            }
        }
        let found = shape::locations(value).ok()?;
        found
            .iter()
            .filter_map(|l| self.distance_to(l, units))
            .min_by(f64::total_cmp)
            .map(|d| (d, value.clone()))
    }

    /// Whether a distance lies within `$minDistance` and `$maxDistance`.
    pub(crate) fn in_range(&self, distance: f64) -> bool {
        self.min.is_none_or(|m| distance >= m) && self.max.is_none_or(|m| distance <= m)
    }

    fn distance_to(&self, location: &Location, units: Units) -> Option<f64> {
        let point = Point(self.point);
        match units {
            Units::Flat => Some(Euclidean.distance(&location.geometry, &Geometry::Point(point))),
            Units::Meters | Units::Radians => {
                // A point on or inside the geometry is at distance 0; otherwise the nearest
                // point along great circles, or, where the crate finds several equally near
                // (a point equidistant from two edges), the nearest vertex.
                let meters = if location.geometry.intersects(&point) {
                    0.0
                } else {
                    match location.geometry.haversine_closest_point(&point) {
                        Closest::Intersection(_) => 0.0,
                        Closest::SinglePoint(p) => SPHERE.distance(point, p),
                        Closest::Indeterminate => {
                            use geo::CoordsIter;
                            location
                                .geometry
                                .coords_iter()
                                .map(|c| SPHERE.distance(point, Point(c)))
                                .min_by(f64::total_cmp)?
                        }
                    }
                };
                Some(if units == Units::Meters {
                    meters
                } else {
                    meters / EARTH_RADIUS_METERS
                })
            }
        }
    }
}

fn distance_limit(value: &Bson, name: &str) -> Result<f64> {
    let Some(n) = crate::value::to_f64(value) else {
        return Err(Error::bad_value(format!("{name} must be a number")));
    };
    if n.is_nan() || n < 0.0 {
        return Err(Error::bad_value(format!("{name} must be non-negative")));
    }
    Ok(n)
}

/// The options of a `$geoNear` stage.
#[derive(Debug, Clone)]
pub(crate) struct GeoNearSpec {
    pub near: NearQuery,
    pub distance_field: String,
    pub include_locs: Option<String>,
    pub distance_multiplier: f64,
    pub query: Document,
    /// The field to search (`key`); otherwise the one geo index decides.
    pub key: Option<String>,
}

impl GeoNearSpec {
    pub(crate) fn parse(spec: &Bson) -> Result<GeoNearSpec> {
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                10065,
                "invalid parameter: expected an object ($geoNear)",
            ));
        };
        let mut near = None;
        let mut spherical = false;
        let mut distance_field = None;
        let mut include_locs = None;
        let mut distance_multiplier = 1.0;
        let mut query = Document::new();
        let mut key = None;
        let mut limits = Document::new();
        let string = |name: &str, v: &Bson| match v {
            Bson::String(s) => Ok(s.clone()),
            _ => Err(Error::type_mismatch(format!(
                "$geoNear requires that '{name}' be a string"
            ))),
        };
        for (name, value) in spec {
            match name.as_str() {
                "near" => near = Some(value.clone()),
                "spherical" => spherical = crate::value::is_truthy(value),
                "distanceField" => distance_field = Some(string(name, value)?),
                "includeLocs" => include_locs = Some(string(name, value)?),
                "key" => {
                    let k = string(name, value)?;
                    if k.is_empty() {
                        return Err(Error::bad_value(
                            "$geoNear parameter 'key' cannot be the empty string",
                        ));
                    }
                    key = Some(k);
                }
                "maxDistance" | "minDistance" => {
                    distance_limit(value, name)?;
                    limits.insert(format!("${name}"), value.clone());
                }
                "distanceMultiplier" => {
                    distance_multiplier = crate::value::to_f64(value)
                        .filter(|m| *m >= 0.0)
                        .ok_or_else(|| {
                            Error::bad_value("distanceMultiplier must be a non-negative number")
                        })?;
                }
                "query" => match value {
                    Bson::Document(d) => query = d.clone(),
                    _ => return Err(Error::type_mismatch("query must be an object")),
                },
                other => {
                    return Err(Error::bad_value(format!(
                        "Unknown argument to $geoNear: {other}"
                    )))
                }
            }
        }
        let Some(near) = near else {
            return Err(Error::bad_value(
                "$geoNear requires a 'near' option as an Array",
            ));
        };
        let Some(distance_field) = distance_field else {
            return Err(Error::bad_value(
                "$geoNear requires a 'distanceField' option as a String",
            ));
        };
        let op = if spherical { "$nearSphere" } else { "$near" };
        let near = NearQuery::parse(op, &near, &limits)?;
        Ok(GeoNearSpec {
            near,
            distance_field,
            include_locs,
            distance_multiplier,
            query,
            key,
        })
    }
}
