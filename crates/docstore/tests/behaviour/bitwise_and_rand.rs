//! The bitwise query operators (`$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear`,
//! `$bitsAnyClear`) on the manual's own examples, and the `$rand` expression.

use crate::common::{assert_code, test_db, TestDb};
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use futures::TryStreamExt;
use mongodb::Collection;

/// The manual's `collection`: `a` holds 54 (0b110110), 20 (0b10100), 20.0 and BinData
/// 0b01100110 (`Zg==`).
async fn manual_collection(t: &TestDb) -> Collection<Document> {
    let c = t.db.collection::<Document>("collection");
    c.insert_many([
        doc! { "_id": 1, "a": 54, "binaryValueofA": "00110110" },
        doc! { "_id": 2, "a": 20, "binaryValueofA": "00010100" },
        doc! { "_id": 3, "a": 20.0, "binaryValueofA": "00010100" },
        doc! { "_id": 4, "a": Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: vec![0b0110_0110] }),
               "binaryValueofA": "01100110" },
    ])
    .await
    .unwrap();
    c
}

async fn ids(c: &Collection<Document>, filter: Document) -> Vec<i32> {
    let docs: Vec<Document> = c
        .find(filter)
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

fn bindata(bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

#[tokio::test]
async fn bits_all_set_matches_when_every_given_bit_is_set_by_positions_mask_or_bindata() {
    let t = test_db().await;
    let c = manual_collection(&t).await;
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAllSet": [1, 5] } }).await,
        [1, 4]
    );
    assert_eq!(ids(&c, doc! { "a": { "$bitsAllSet": 50 } }).await, [1]);
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAllSet": bindata(&[48]) } }).await,
        [1]
    );
}

#[tokio::test]
async fn bits_any_set_matches_when_one_given_bit_is_set() {
    let t = test_db().await;
    let c = manual_collection(&t).await;
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAnySet": [1, 5] } }).await,
        [1, 4]
    );
    assert_eq!(ids(&c, doc! { "a": { "$bitsAnySet": 35 } }).await, [1, 4]);
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAnySet": bindata(&[48]) } }).await,
        [1, 2, 3, 4]
    );
}

#[tokio::test]
async fn bits_all_clear_matches_when_every_given_bit_is_clear() {
    let t = test_db().await;
    let c = manual_collection(&t).await;
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAllClear": [1, 5] } }).await,
        [2, 3]
    );
    assert_eq!(ids(&c, doc! { "a": { "$bitsAllClear": 35 } }).await, [2, 3]);
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAllClear": bindata(&[0x20]) } }).await,
        [2, 3]
    );
}

#[tokio::test]
async fn bits_any_clear_matches_when_one_given_bit_is_clear() {
    let t = test_db().await;
    let c = manual_collection(&t).await;
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAnyClear": [1, 5] } }).await,
        [2, 3]
    );
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAnyClear": 35 } }).await,
        [1, 2, 3, 4]
    );
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAnyClear": bindata(&[0x30]) } }).await,
        [2, 3, 4]
    );
}

#[tokio::test]
async fn bit_tests_see_negative_numbers_sign_extended_and_skip_fractions_and_strings() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many([
        doc! { "_id": 1, "a": -1_i64 },
        doc! { "_id": 2, "a": 2.5 },
        doc! { "_id": 3, "a": "3" },
        doc! { "_id": 4, "a": [8, 1] },
    ])
    .await
    .unwrap();
    assert_eq!(
        ids(&c, doc! { "a": { "$bitsAllSet": [0, 100] } }).await,
        [1]
    );
    // An array matches when one element does.
    assert_eq!(ids(&c, doc! { "a": { "$bitsAllSet": [3] } }).await, [1, 4]);
    assert_eq!(ids(&c, doc! { "a": { "$bitsAllClear": [0] } }).await, [4]);
}

#[tokio::test]
async fn bit_test_arguments_must_be_non_negative_integers_or_bindata() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    for arg in [
        Bson::Int32(-1),
        Bson::Double(1.5),
        bson::bson!([-1]),
        bson::bson!([0.5]),
        bson::bson!(["a"]),
        Bson::String("x".into()),
    ] {
        assert_code(c.find(doc! { "a": { "$bitsAllSet": arg } }).await, 2);
    }
}

#[tokio::test]
async fn rand_returns_a_double_from_zero_up_to_one_drawn_anew_for_each_document() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many((0..20).map(|i| doc! { "_id": i }))
        .await
        .unwrap();
    let out: Vec<Document> = c
        .aggregate([doc! { "$project": { "r": { "$rand": {} } } }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let values: Vec<f64> = out.iter().map(|d| d.get_f64("r").unwrap()).collect();
    assert!(values.iter().all(|r| (0.0..1.0).contains(r)), "{values:?}");
    let mut distinct = values.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    assert!(distinct.len() > 10, "{values:?}");
    // In a find's `$expr`: about half of the documents (all 20 only once in a million runs).
    let kept = c
        .count_documents(doc! { "$expr": { "$lt": [{ "$rand": {} }, 0.5] } })
        .await
        .unwrap();
    assert!(kept < 20, "{kept}");
    assert_code(
        c.aggregate([doc! { "$project": { "r": { "$rand": { "seed": 1 } } } }])
            .await,
        3040501,
    );
}
