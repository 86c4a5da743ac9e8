//! GeoJSON objects (`Point`, `LineString`, `Polygon` with holes, `MultiPoint`,
//! `MultiLineString`, `MultiPolygon`, `GeometryCollection`) and legacy coordinate pairs
//! (`[x, y]`, `{lng: x, lat: y}`) parsed into `geo` geometries, with mongod's checks and
//! reasons for refusing malformed ones.

use bson::{Bson, Document};
use geo::{Coord, Geometry, LineString, Point, Polygon, Validation};

/// One location a document holds: a GeoJSON geometry, or a legacy coordinate pair.
#[derive(Debug, Clone)]
pub(crate) struct Location {
    pub geometry: Geometry<f64>,
    /// Written as a legacy coordinate pair (flat queries and `2d` indexes read only those).
    pub legacy: bool,
}

impl Location {
    /// The location as one point (a legacy pair or a GeoJSON `Point`); the first vertex of any
    /// other geometry.
    pub(crate) fn point(&self) -> Coord<f64> {
        use geo::CoordsIter;
        self.geometry
            .coords_iter()
            .next()
            .unwrap_or(Coord { x: 0.0, y: 0.0 })
    }

    /// Whether every coordinate is a longitude in [-180, 180] and a latitude in [-90, 90]
    /// (what a `2dsphere` index and spherical queries need).
    pub(crate) fn check_on_sphere(&self) -> Result<(), String> {
        use geo::CoordsIter;
        for c in self.geometry.coords_iter() {
            if !(-180.0..=180.0).contains(&c.x) || !(-90.0..=90.0).contains(&c.y) {
                return Err(format!(
                    "longitude/latitude is out of bounds, lng: {} lat: {}",
                    crate::printing::fmt_double(c.x),
                    crate::printing::fmt_double(c.y)
                ));
            }
        }
        Ok(())
    }
}

/// Every location in a stored value: a GeoJSON object, a legacy pair, or an array of either
/// (a multi-location document). Errors say why a value is not a location.
pub(super) fn locations(value: &Bson) -> Result<Vec<Location>, String> {
    match value {
        Bson::Document(d) if d.contains_key("type") => Ok(vec![Location {
            geometry: parse_geojson(d)?,
            legacy: false,
        }]),
        Bson::Document(d) => Ok(vec![Location {
            geometry: Geometry::Point(Point(legacy_pair(d.values())?)),
            legacy: true,
        }]),
        Bson::Array(items) if items.first().is_some_and(is_number) => Ok(vec![Location {
            geometry: Geometry::Point(Point(legacy_pair(items.iter())?)),
            legacy: true,
        }]),
        Bson::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Bson::Document(_) | Bson::Array(_) => out.extend(locations(item)?),
                    other => {
                        return Err(format!(
                            "geo element must be an array or object: {}",
                            crate::keystring::render(other)
                        ))
                    }
                }
            }
            Ok(out)
        }
        other => Err(format!(
            "geo element must be an array or object: {}",
            crate::keystring::render(other)
        )),
    }
}

/// The legacy pairs in a value (`[x, y]`, `{a: x, b: y}`, or an array of them), or `None` when
/// it holds anything else (what a `2d` index refuses).
pub(super) fn legacy_locations(value: &Bson) -> Option<Vec<Location>> {
    let found = locations(value).ok()?;
    found.iter().all(|l| l.legacy).then_some(found)
}

fn is_number(v: &Bson) -> bool {
    crate::value::is_number(v)
}

/// A legacy pair: exactly two numbers.
fn legacy_pair<'a>(mut values: impl Iterator<Item = &'a Bson>) -> Result<Coord<f64>, String> {
    let number = |values: &mut dyn Iterator<Item = &'a Bson>| match values.next() {
        Some(v) => crate::value::to_f64(v)
            .filter(|n| n.is_finite())
            .ok_or_else(|| "Point must only contain numeric elements".to_string()),
        None => Err("Point must only contain numeric elements".to_string()),
    };
    let x = number(&mut values)?;
    let y = number(&mut values)?;
    if values.next().is_some() {
        return Err("Point must only contain two numeric elements".into());
    }
    Ok(Coord { x, y })
}

/// A GeoJSON object, checked as mongod checks it (positions in range, rings closed and
/// simple, holes inside the shell).
pub(super) fn parse_geojson(d: &Document) -> Result<Geometry<f64>, String> {
    let kind = match d.get("type") {
        Some(Bson::String(s)) => s.as_str(),
        _ => {
            return Err(format!(
                "unknown GeoJSON type: {}",
                crate::keystring::render_document(d)
            ))
        }
    };
    if let Some(crs) = d.get("crs") {
        check_crs(crs)?;
    }
    if kind == "GeometryCollection" {
        let Some(Bson::Array(items)) = d.get("geometries") else {
            return Err("GeometryCollection geometries must be an array".into());
        };
        let mut parts = Vec::with_capacity(items.len());
        for item in items {
            let Bson::Document(sub) = item else {
                return Err("Element 0 of \"geometries\" is not an object".into());
            };
            parts.push(parse_geojson(sub)?);
        }
        return Ok(Geometry::GeometryCollection(geo::GeometryCollection(parts)));
    }
    let coordinates = match d.get("coordinates") {
        Some(Bson::Array(items)) => items,
        _ => return Err(format!("{kind} coordinates must be an array")),
    };
    let geometry = match kind {
        "Point" => Geometry::Point(Point(position(coordinates)?)),
        "LineString" => Geometry::LineString(line_string(coordinates)?),
        "Polygon" => Geometry::Polygon(polygon(coordinates)?),
        "MultiPoint" => {
            if coordinates.is_empty() {
                return Err("MultiPoint coordinates must have at least 1 element".into());
            }
            let points = arrays(coordinates, "MultiPoint")?
                .into_iter()
                .map(|p| position(p).map(Point))
                .collect::<Result<Vec<_>, _>>()?;
            Geometry::MultiPoint(geo::MultiPoint(points))
        }
        "MultiLineString" => {
            if coordinates.is_empty() {
                return Err("MultiLineString coordinates must have at least 1 element".into());
            }
            let lines = arrays(coordinates, "MultiLineString")?
                .into_iter()
                .map(line_string)
                .collect::<Result<Vec<_>, _>>()?;
            Geometry::MultiLineString(geo::MultiLineString(lines))
        }
        "MultiPolygon" => {
            if coordinates.is_empty() {
                return Err("MultiPolygon coordinates must have at least 1 element".into());
            }
            let polygons = arrays(coordinates, "MultiPolygon")?
                .into_iter()
                .map(polygon)
                .collect::<Result<Vec<_>, _>>()?;
            Geometry::MultiPolygon(geo::MultiPolygon(polygons))
        }
        other => return Err(format!("unknown GeoJSON type: {other}")),
    };
    let location = Location {
        geometry,
        legacy: false,
    };
    location.check_on_sphere()?;
    Ok(location.geometry)
}

/// Only the default coordinate reference system (WGS84 longitude/latitude) is read here; the
/// "strict winding" big-polygon system changes what a polygon encloses and is refused.
fn check_crs(crs: &Bson) -> Result<(), String> {
    let name = match crs {
        Bson::Document(c) => match c.get("properties") {
            Some(Bson::Document(p)) => p.get_str("name").ok(),
            _ => None,
        },
        _ => None,
    };
    match name {
        Some("EPSG:4326" | "urn:ogc:def:crs:OGC:1.3:CRS84" | "urn:ogc:def:crs:EPSG::4326") => {
            Ok(())
        }
        Some(other) => Err(format!(
            "unknown CRS name: {other} (the strict-winding big polygon CRS is not supported by \
             docstore)"
        )),
        None => Err("GeoJSON CRS must be an object with properties.name".into()),
    }
}

fn arrays<'a>(items: &'a [Bson], kind: &str) -> Result<Vec<&'a [Bson]>, String> {
    items
        .iter()
        .map(|item| match item {
            Bson::Array(inner) => Ok(inner.as_slice()),
            _ => Err(format!("{kind} coordinates must be an array of arrays")),
        })
        .collect()
}

/// A GeoJSON position: `[longitude, latitude]`.
fn position(items: &[Bson]) -> Result<Coord<f64>, String> {
    if items.len() < 2 {
        return Err("Point must only contain numeric elements".into());
    }
    legacy_pair(items.iter())
}

fn positions(items: &[Bson]) -> Result<Vec<Coord<f64>>, String> {
    items
        .iter()
        .map(|item| match item {
            Bson::Array(p) => position(p),
            _ => Err("GeoJSON coordinates must be an array of coordinates".into()),
        })
        .collect()
}

fn line_string(items: &[Bson]) -> Result<LineString<f64>, String> {
    let coords = positions(items)?;
    if coords.len() < 2 {
        return Err("GeoJSON LineString must have at least 2 vertices".into());
    }
    Ok(LineString(coords))
}

fn polygon(rings: &[Bson]) -> Result<Polygon<f64>, String> {
    if rings.is_empty() {
        return Err("Polygon has no loops.".into());
    }
    let mut loops = Vec::with_capacity(rings.len());
    for ring in arrays(rings, "Polygon")? {
        let coords = positions(ring)?;
        if coords.len() < 4 {
            return Err(
                "Loop must have at least 3 different vertices (and the first repeated last)".into(),
            );
        }
        if coords.first() != coords.last() {
            return Err("Loop is not closed, first vertex does not equal last vertex".into());
        }
        loops.push(LineString(coords));
    }
    let exterior = loops.remove(0);
    let polygon = Polygon::new(exterior, loops);
    if let Err(problem) = polygon.check_validation() {
        use geo::algorithm::validation::InvalidPolygon;
        return Err(match problem {
            InvalidPolygon::InteriorRingNotContainedInExteriorRing(_) => {
                "Secondary loops not contained by first exterior loop - secondary loops must be \
                 holes"
                    .into()
            }
            other => format!("Loop is not valid: {other}"),
        });
    }
    Ok(polygon)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    #[test]
    fn geojson_objects_and_legacy_pairs_are_locations() {
        let point = locations(&bson!({ "type": "Point", "coordinates": [-73.97, 40.77] })).unwrap();
        assert!(matches!(point[0].geometry, Geometry::Point(_)) && !point[0].legacy);
        let legacy = locations(&bson!([-73.97, 40.77])).unwrap();
        assert!(legacy[0].legacy);
        let embedded = locations(&bson!({ "lng": 1, "lat": 2.5 })).unwrap();
        assert_eq!(embedded[0].point(), Coord { x: 1.0, y: 2.5 });
        let many = locations(&bson!([[1, 2], { "type": "Point", "coordinates": [3, 4] }])).unwrap();
        assert_eq!(many.len(), 2);
    }

    #[test]
    fn malformed_geometries_are_refused_with_mongods_reason() {
        let reason = |d: Document| parse_geojson(&d).unwrap_err();
        assert!(reason(doc! { "type": "Point", "coordinates": [200, 0] })
            .starts_with("longitude/latitude is out of bounds"));
        assert!(
            reason(doc! { "type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1]]] })
                .starts_with("Loop must have at least 3 different vertices")
        );
        assert!(reason(
            doc! { "type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0.5]]] }
        )
        .starts_with("Loop is not closed"));
        // A bow tie crosses itself.
        assert!(reason(
            doc! { "type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]] }
        )
        .starts_with("Loop is not valid"));
        assert!(reason(doc! {
            "type": "Polygon",
            "coordinates": [
                [[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]],
                [[5, 5], [6, 5], [6, 6], [5, 6], [5, 5]],
            ],
        })
        .starts_with("Secondary loops not contained"));
        assert!(reason(doc! { "type": "Circle", "coordinates": [0, 0] })
            .starts_with("unknown GeoJSON type"));
        assert!(
            reason(doc! { "type": "LineString", "coordinates": [[0, 0]] })
                .contains("at least 2 vertices")
        );
    }
}
