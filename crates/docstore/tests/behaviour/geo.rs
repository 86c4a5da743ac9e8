//! Geospatial indexes and queries, as MongoDB 7.0 documents them: `2dsphere` indexes on GeoJSON
//! objects (invalid geometries refused, documents without a location left out), `2d` indexes on
//! legacy pairs, `$geoWithin`, `$geoIntersects`, `$near`/`$nearSphere` (nearest first, the
//! index they need, where they may stand), the `$geoNear` stage and `explain`. The places are the
//! manual's New York examples; distances are checked against the haversine distance on MongoDB's
//! sphere (radius 6 378 100 m).

use crate::common::{assert_code, find_stage, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::Hint;
use mongodb::{Collection, IndexModel};

const EARTH_RADIUS: f64 = 6_378_100.0;

/// The haversine distance in meters between two (longitude, latitude) points.
fn haversine(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (lat1, lat2) = (a.1.to_radians(), b.1.to_radians());
    let dlat = lat2 - lat1;
    let dlng = (b.0 - a.0).to_radians();
    let h = (dlat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (dlng / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS * h.sqrt().asin()
}

fn point(lng: f64, lat: f64) -> Document {
    doc! { "type": "Point", "coordinates": [lng, lat] }
}

const CENTRAL_PARK: (f64, f64) = (-73.97, 40.77);
const SARA_D_ROOSEVELT: (f64, f64) = (-73.9928, 40.7193);
const POLO_GROUNDS: (f64, f64) = (-73.9375, 40.8303);
const LA_GUARDIA: (f64, f64) = (-73.88, 40.78);

async fn places(db: &mongodb::Database) -> Collection<Document> {
    let c = db.collection::<Document>("places");
    c.insert_many([
        doc! { "_id": 1, "name": "Central Park", "location": point(CENTRAL_PARK.0, CENTRAL_PARK.1), "category": "Parks" },
        doc! { "_id": 2, "name": "Sara D. Roosevelt Park", "location": point(SARA_D_ROOSEVELT.0, SARA_D_ROOSEVELT.1), "category": "Parks" },
        doc! { "_id": 3, "name": "Polo Grounds", "location": point(POLO_GROUNDS.0, POLO_GROUNDS.1), "category": "Stadiums" },
        doc! { "_id": 4, "name": "La Guardia Airport", "location": point(LA_GUARDIA.0, LA_GUARDIA.1), "category": "Airport" },
    ])
    .await
    .unwrap();
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "location": "2dsphere" })
            .build(),
    )
    .await
    .unwrap();
    c
}

async fn ids(c: &Collection<Document>, filter: Document) -> Vec<i32> {
    c.find(filter)
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect()
}

async fn sorted_ids(c: &Collection<Document>, filter: Document) -> Vec<i32> {
    let mut found = ids(c, filter).await;
    found.sort();
    found
}

#[tokio::test]
async fn near_returns_places_within_the_distance_nearest_first() {
    let t = test_db().await;
    let c = places(&t.db).await;
    // From the $near page: between 1 km and 5 km of (-73.9667, 40.78).
    let found = ids(
        &c,
        doc! { "location": { "$near": {
            "$geometry": point(-73.9667, 40.78), "$minDistance": 1000, "$maxDistance": 5000,
        } } },
    )
    .await;
    assert_eq!(found, vec![1]);
    // Every place, nearest to Central Park first.
    let all = ids(
        &c,
        doc! { "location": { "$nearSphere": { "$geometry": point(CENTRAL_PARK.0, CENTRAL_PARK.1) } } },
    )
    .await;
    assert_eq!(all, vec![1, 2, 3, 4]);
    // Within 1 km of Central Park: only the park itself.
    let close = ids(
        &c,
        doc! { "location": { "$near": {
            "$geometry": point(CENTRAL_PARK.0, CENTRAL_PARK.1), "$maxDistance": 1000,
        } } },
    )
    .await;
    assert_eq!(close, vec![1]);
}

#[tokio::test]
async fn near_with_a_legacy_point_and_near_sphere_measure_in_radians() {
    let t = test_db().await;
    let c = places(&t.db).await;
    let km_5 = 5000.0 / EARTH_RADIUS;
    let found = ids(
        &c,
        doc! { "location": { "$nearSphere": [CENTRAL_PARK.0, CENTRAL_PARK.1], "$maxDistance": km_5 } },
    )
    .await;
    assert_eq!(found, vec![1]);
}

#[tokio::test]
async fn near_needs_a_geospatial_index() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_one(doc! { "loc": point(0.0, 0.0) }).await.unwrap();
    let e = assert_code(
        c.find(doc! { "loc": { "$near": { "$geometry": point(0.0, 0.0) } } })
            .await,
        291,
    );
    assert!(e
        .to_string()
        .contains("unable to find index for $geoNear query"));
}

#[tokio::test]
async fn near_is_refused_under_or_and_twice() {
    let t = test_db().await;
    let c = places(&t.db).await;
    let near = doc! { "$near": { "$geometry": point(0.0, 0.0) } };
    assert_code(
        c.find(doc! { "$or": [{ "location": near.clone() }, { "name": "x" }] })
            .await,
        2,
    );
    assert_code(
        c.find(doc! { "$and": [{ "location": near.clone() }, { "location": near.clone() }] })
            .await,
        2,
    );
}

#[tokio::test]
async fn an_explicit_sort_reorders_the_near_results() {
    let t = test_db().await;
    let c = places(&t.db).await;
    let found: Vec<i32> = c
        .find(doc! { "location": { "$near": { "$geometry": point(CENTRAL_PARK.0, CENTRAL_PARK.1) } } })
        .sort(doc! { "name": 1 })
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(found, vec![1, 4, 3, 2]);
}

#[tokio::test]
async fn geo_within_a_polygon_with_a_hole_leaves_out_the_hole() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many([
        doc! { "_id": 1, "loc": point(1.0, 1.0) },
        doc! { "_id": 2, "loc": point(5.0, 5.0) },
        doc! { "_id": 3, "loc": point(20.0, 20.0) },
        doc! { "_id": 4, "loc": [9.0, 1.0] },
    ])
    .await
    .unwrap();
    let with_hole = doc! { "type": "Polygon", "coordinates": [
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]],
    ] };
    // No index is needed for $geoWithin.
    let found = sorted_ids(
        &c,
        doc! { "loc": { "$geoWithin": { "$geometry": with_hole.clone() } } },
    )
    .await;
    assert_eq!(found, vec![1, 4]);
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "loc": "2dsphere" })
            .build(),
    )
    .await
    .unwrap();
    let found = sorted_ids(
        &c,
        doc! { "loc": { "$geoWithin": { "$geometry": with_hole } } },
    )
    .await;
    assert_eq!(found, vec![1, 4]);
}

#[tokio::test]
async fn a_line_string_intersecting_a_polygon_matches_geo_intersects() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("roads");
    c.insert_many([
        doc! { "_id": 1, "path": { "type": "LineString", "coordinates": [[-5, 5], [15, 5]] } },
        doc! { "_id": 2, "path": { "type": "LineString", "coordinates": [[20, 20], [30, 30]] } },
        doc! { "_id": 3, "path": { "type": "Polygon", "coordinates": [[[8, 8], [12, 8], [12, 12], [8, 12], [8, 8]]] } },
        doc! { "_id": 4, "path": { "type": "MultiPoint", "coordinates": [[50, 50], [5, 5]] } },
    ])
    .await
    .unwrap();
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "path": "2dsphere" })
            .build(),
    )
    .await
    .unwrap();
    let square =
        doc! { "type": "Polygon", "coordinates": [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]] };
    let found = sorted_ids(
        &c,
        doc! { "path": { "$geoIntersects": { "$geometry": square } } },
    )
    .await;
    assert_eq!(found, vec![1, 3, 4]);
}

#[tokio::test]
async fn a_city_scale_polygon_classifies_points_fifty_meters_from_its_edge() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    // About 10 km by 6 km over Manhattan; 0.00045 degrees of latitude is 50 m.
    let area = doc! { "type": "Polygon", "coordinates": [[
        [-74.02, 40.74], [-73.90, 40.74], [-73.90, 40.80], [-74.02, 40.80], [-74.02, 40.74],
    ]] };
    c.insert_many([
        doc! { "_id": 1, "loc": point(-73.96, 40.80 - 0.00045) },
        doc! { "_id": 2, "loc": point(-73.96, 40.80 + 0.00045) },
        doc! { "_id": 3, "loc": point(-73.90 - 0.0006, 40.77) },
        doc! { "_id": 4, "loc": point(-73.90 + 0.0006, 40.77) },
    ])
    .await
    .unwrap();
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "loc": "2dsphere" })
            .build(),
    )
    .await
    .unwrap();
    let found = sorted_ids(&c, doc! { "loc": { "$geoWithin": { "$geometry": area } } }).await;
    assert_eq!(found, vec![1, 3]);
}

#[tokio::test]
async fn geo_within_center_sphere_selects_points_within_the_radius_in_radians() {
    let t = test_db().await;
    let c = places(&t.db).await;
    // The manual's example radius: miles divided by the earth's radius in miles.
    let found = sorted_ids(
        &c,
        doc! { "location": { "$geoWithin": { "$centerSphere": [[CENTRAL_PARK.0, CENTRAL_PARK.1], 5.0 / 3963.2] } } },
    )
    .await;
    assert_eq!(found, vec![1, 2, 3, 4]);
    let found = sorted_ids(
        &c,
        doc! { "location": { "$geoWithin": { "$centerSphere": [[CENTRAL_PARK.0, CENTRAL_PARK.1], 2000.0 / EARTH_RADIUS] } } },
    )
    .await;
    assert_eq!(found, vec![1]);
}

#[tokio::test]
async fn an_invalid_geometry_in_a_2dsphere_field_is_refused_with_16755() {
    let t = test_db().await;
    let c = places(&t.db).await;
    let e = assert_code(
        c.insert_one(doc! { "location": point(200.0, 0.0) }).await,
        16755,
    );
    assert!(e.to_string().contains("Can't extract geo keys"));
    let bow_tie =
        doc! { "type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]] };
    assert_code(c.insert_one(doc! { "location": bow_tie }).await, 16755);
    assert_code(c.insert_one(doc! { "location": "downtown" }).await, 16755);
    // Building the index over such a document fails too.
    let other = t.db.collection::<Document>("other");
    other.insert_one(doc! { "loc": [500, 500] }).await.unwrap();
    assert_code(
        other
            .create_index(
                IndexModel::builder()
                    .keys(doc! { "loc": "2dsphere" })
                    .build(),
            )
            .await,
        16755,
    );
}

#[tokio::test]
async fn documents_without_a_location_are_not_in_a_2dsphere_index() {
    let t = test_db().await;
    let c = places(&t.db).await;
    c.insert_many([
        doc! { "_id": 10, "name": "nowhere" },
        doc! { "_id": 11, "location": null },
        doc! { "_id": 12, "location": [] },
    ])
    .await
    .unwrap();
    // Walking the index reads only the documents that have a location.
    let found: Vec<Document> = c
        .find(doc! {})
        .hint(Hint::Name("location_2dsphere".into()))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 4);
    let indexes: Vec<Document> =
        t.db.run_command(doc! { "listIndexes": "places" })
            .await
            .unwrap()
            .get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .iter()
            .filter_map(|i| i.as_document().cloned())
            .collect();
    let geo = indexes
        .iter()
        .find(|i| i.get_str("name") == Ok("location_2dsphere"))
        .unwrap();
    assert_eq!(geo.get_i32("2dsphereIndexVersion"), Ok(3));
}

#[tokio::test]
async fn a_compound_2dsphere_index_answers_near_with_other_conditions() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("places");
    c.insert_many([
        doc! { "_id": 1, "location": point(CENTRAL_PARK.0, CENTRAL_PARK.1), "category": "Parks" },
        doc! { "_id": 2, "location": point(SARA_D_ROOSEVELT.0, SARA_D_ROOSEVELT.1), "category": "Parks" },
        doc! { "_id": 3, "location": point(POLO_GROUNDS.0, POLO_GROUNDS.1), "category": "Stadiums" },
        doc! { "_id": 4, "category": "Parks" },
    ])
    .await
    .unwrap();
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "location": "2dsphere", "category": -1, "name": 1 })
            .build(),
    )
    .await
    .unwrap();
    let found = ids(
        &c,
        doc! {
            "location": { "$near": { "$geometry": point(SARA_D_ROOSEVELT.0, SARA_D_ROOSEVELT.1) } },
            "category": "Parks",
        },
    )
    .await;
    assert_eq!(found, vec![2, 1]);
}

#[tokio::test]
async fn a_2d_index_answers_flat_near_and_legacy_shapes() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("grid");
    c.insert_many([
        doc! { "_id": 1, "loc": [0, 0] },
        doc! { "_id": 2, "loc": [3, 4] },
        doc! { "_id": 3, "loc": { "x": 10, "y": 10 } },
        doc! { "_id": 4, "loc": [-20, 5] },
    ])
    .await
    .unwrap();
    c.create_index(IndexModel::builder().keys(doc! { "loc": "2d" }).build())
        .await
        .unwrap();
    let nearest = ids(&c, doc! { "loc": { "$near": [2.5, 3.5] } }).await;
    assert_eq!(nearest, vec![2, 1, 3, 4]);
    let within_5 = ids(&c, doc! { "loc": { "$near": [0, 0], "$maxDistance": 5 } }).await;
    assert_eq!(within_5, vec![1, 2]);
    let boxed = sorted_ids(
        &c,
        doc! { "loc": { "$geoWithin": { "$box": [[0, 0], [10, 10]] } } },
    )
    .await;
    assert_eq!(boxed, vec![1, 2, 3]);
    let triangle = sorted_ids(
        &c,
        doc! { "loc": { "$geoWithin": { "$polygon": [[-1, -1], [12, -1], [-1, 12]] } } },
    )
    .await;
    assert_eq!(triangle, vec![1, 2]);
    let disc = sorted_ids(
        &c,
        doc! { "loc": { "$geoWithin": { "$center": [[0, 0], 5] } } },
    )
    .await;
    assert_eq!(disc, vec![1, 2]);
    // A 2d index holds legacy pairs inside [-180, 180).
    assert_code(c.insert_one(doc! { "loc": point(1.0, 1.0) }).await, 13026);
    assert_code(c.insert_one(doc! { "loc": [180, 0] }).await, 13027);
}

#[tokio::test]
async fn geo_near_reports_haversine_distances_nearest_first() {
    let t = test_db().await;
    let c = places(&t.db).await;
    let near = (-73.99279, 40.719296);
    let out: Vec<Document> = c
        .aggregate([doc! { "$geoNear": {
            "near": point(near.0, near.1),
            "distanceField": "dist.calculated",
            "maxDistance": 10000,
            "query": { "category": "Parks" },
            "includeLocs": "dist.location",
            "spherical": true,
        } }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let got: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(got, vec![2, 1]);
    for (d, place) in out.iter().zip([SARA_D_ROOSEVELT, CENTRAL_PARK]) {
        let dist = d.get_document("dist").unwrap();
        let calculated = dist.get_f64("calculated").unwrap();
        let expected = haversine(near, place);
        assert!(
            (calculated - expected).abs() <= expected * 0.001 + 1e-9,
            "{calculated} vs {expected}"
        );
        assert_eq!(
            dist.get_document("location").unwrap(),
            &point(place.0, place.1)
        );
    }
    // Central Park to La Guardia, in kilometres through distanceMultiplier over radians.
    let out: Vec<Document> = c
        .aggregate([
            doc! { "$geoNear": {
                "near": [CENTRAL_PARK.0, CENTRAL_PARK.1],
                "distanceField": "km",
                "spherical": true,
                "distanceMultiplier": EARTH_RADIUS / 1000.0,
            } },
            doc! { "$match": { "_id": 4 } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let km = out[0].get_f64("km").unwrap();
    let expected = haversine(CENTRAL_PARK, LA_GUARDIA) / 1000.0;
    assert!(
        (km - expected).abs() <= expected * 0.001,
        "{km} vs {expected}"
    );
}

#[tokio::test]
async fn geo_near_must_be_first_and_needs_one_geo_index_or_a_key() {
    let t = test_db().await;
    let c = places(&t.db).await;
    let stage = doc! { "$geoNear": { "near": point(0.0, 0.0), "distanceField": "d" } };
    assert_code(
        c.aggregate([doc! { "$match": {} }, stage.clone()]).await,
        40602,
    );
    let bare = t.db.collection::<Document>("bare");
    bare.insert_one(doc! { "loc": point(0.0, 0.0) })
        .await
        .unwrap();
    let e = assert_code(bare.aggregate([stage.clone()]).await, 27);
    assert!(e.to_string().contains("requires a 2d or 2dsphere index"));
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "other": "2dsphere" })
            .build(),
    )
    .await
    .unwrap();
    assert_code(c.aggregate([stage]).await, 27);
    let keyed: Vec<Document> = c
        .aggregate([doc! { "$geoNear": {
            "near": point(CENTRAL_PARK.0, CENTRAL_PARK.1),
            "distanceField": "d",
            "key": "location",
        } }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keyed.len(), 4);
    assert_eq!(keyed[0].get_i32("_id"), Ok(1));
    // $near inside $match is not allowed in a pipeline.
    assert_code(
        c.aggregate([
            doc! { "$match": { "location": { "$near": { "$geometry": point(0.0, 0.0) } } } },
        ])
        .await,
        5626500,
    );
}

#[tokio::test]
async fn explain_shows_the_geo_index_used() {
    let t = test_db().await;
    let c = places(&t.db).await;
    let near =
        t.db.run_command(doc! { "explain": {
            "find": "places",
            "filter": { "location": { "$near": { "$geometry": point(0.0, 0.0) } } },
        } })
        .await
        .unwrap();
    let stage = find_stage(&Bson::Document(near), "GEO_NEAR_2DSPHERE").expect("geo near stage");
    assert_eq!(stage.get_str("indexName"), Ok("location_2dsphere"));
    let within =
        t.db.run_command(doc! { "explain": {
            "find": "places",
            "filter": { "location": { "$geoWithin": { "$centerSphere": [[0, 0], 0.1] } } },
        } })
        .await
        .unwrap();
    let scan = find_stage(&Bson::Document(within), "IXSCAN").expect("index scan");
    assert_eq!(
        scan.get_document("keyPattern"),
        Ok(&doc! { "location": "2dsphere" })
    );
    let pipeline =
        t.db.run_command(doc! { "explain": {
            "aggregate": c.name(),
            "pipeline": [{ "$geoNear": { "near": point(0.0, 0.0), "distanceField": "d" } }],
            "cursor": {},
        } })
        .await
        .unwrap();
    let stage = find_stage(&Bson::Document(pipeline), "GEO_NEAR_2DSPHERE").expect("geo near stage");
    assert_eq!(stage.get_str("indexName"), Ok("location_2dsphere"));
}

#[tokio::test]
async fn lines_and_polygons_across_the_antimeridian_take_the_short_way_round() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("dateline");
    c.create_index(IndexModel::builder().keys(doc! { "g": "2dsphere" }).build())
        .await
        .unwrap();
    c.insert_many(vec![
        // 4° long, crossing 180°: on the sphere this line never comes near longitude 0.
        doc! { "_id": 1, "g": { "type": "LineString", "coordinates": [[-178.0, 10.0], [178.0, 10.0]] } },
        doc! { "_id": 2, "g": { "type": "LineString", "coordinates": [[-2.0, 10.0], [2.0, 10.0]] } },
        doc! { "_id": 3, "g": point(179.5, 0.5) },
        doc! { "_id": 4, "g": point(0.0, 0.5) },
    ])
    .await
    .unwrap();
    let meridian_180 = doc! { "type": "LineString", "coordinates": [[180.0, 11.0], [180.0, 9.0]] };
    assert_eq!(
        ids(
            &c,
            doc! { "g": { "$geoIntersects": { "$geometry": meridian_180 } } }
        )
        .await,
        vec![1]
    );
    let meridian_0 = doc! { "type": "LineString", "coordinates": [[0.0, 11.0], [0.0, 9.0]] };
    assert_eq!(
        ids(
            &c,
            doc! { "g": { "$geoIntersects": { "$geometry": meridian_0 } } }
        )
        .await,
        vec![2]
    );
    // A square from 179° to -179°: 2° wide around the antimeridian.
    let square = doc! { "type": "Polygon", "coordinates": [[
        [179.0, -1.0], [-179.0, -1.0], [-179.0, 1.0], [179.0, 1.0], [179.0, -1.0]
    ]] };
    assert_eq!(
        ids(&c, doc! { "g": { "$geoWithin": { "$geometry": square } } }).await,
        vec![3]
    );
}
