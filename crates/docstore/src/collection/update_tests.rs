//! Index maintenance on update: an update changes only the entries whose keys changed and
//! skips indexes it cannot affect, so after any sequence of updates every index must hold
//! exactly the entries a rebuild from the documents gives (unique, multikey, partial, sparse and
//! text indexes alike), and an update refused for a duplicate key must change nothing.

use super::Collection;
use crate::index::{Index, IndexSpec, RecordId};
use crate::update::{ApplyContext, UpdateSpec};
use bson::{doc, Bson, Document};
use proptest::prelude::*;

/// The collection under test: one index of each kind an update has to keep right.
fn collection() -> Collection {
    let mut c = Collection::new("db", "c", Document::new());
    for spec in [
        doc! { "key": { "u": 1 }, "name": "u_1", "unique": true, "sparse": true },
        doc! { "key": { "carted.cart_id": 1 }, "name": "carted.cart_id_1" },
        doc! { "key": { "carted.ts": 1, "n": -1 }, "name": "carted.ts_1_n_-1" },
        doc! { "key": { "title": "text", "body": "text" }, "name": "text", "weights": { "title": 3 } },
        doc! {
            "key": { "n": 1 }, "name": "n_partial",
            "partialFilterExpression": { "on": true },
        },
        doc! { "key": { "meta.tag": 1 }, "name": "meta.tag_1" },
    ] {
        c.create_index(IndexSpec::parse(&spec).unwrap()).unwrap();
    }
    c
}

/// Every index's entries as a rebuild from the stored documents gives them.
fn assert_indexes_match_a_rebuild(c: &Collection, context: &str) {
    for index in c.indexes() {
        let mut fresh = [Index::new(index.spec.clone()).unwrap()];
        let docs: Vec<_> = c.records().collect();
        for built in crate::index::build_all(&mut fresh, &docs, "db.c", 1) {
            built.unwrap();
        }
        let [fresh] = fresh;
        let kept: Vec<(Vec<u8>, RecordId)> =
            index.entries().map(|(k, r)| (k.to_vec(), r)).collect();
        let rebuilt: Vec<(Vec<u8>, RecordId)> =
            fresh.entries().map(|(k, r)| (k.to_vec(), r)).collect();
        assert_eq!(kept, rebuilt, "index {} after {context}", index.spec.name);
    }
}

/// Apply `update` to the document with `_id: id` as the update command does: the old and new
/// versions and the paths the update touched go to [`Collection::update_record`].
fn update(c: &mut Collection, id: i32, update: &Document) -> crate::error::Result<bool> {
    let record = c.find_by_id(&Bson::Int32(id)).expect("the document exists");
    let old = c.get(record).unwrap().to_document()?;
    let spec = UpdateSpec::parse(&Bson::Document(update.clone()), None)?;
    let ctx = ApplyContext {
        matched_position: Some(0),
        ..ApplyContext::default()
    };
    match spec.apply_to(&old, &ctx)? {
        Some(new) => {
            c.update_record(record, &old, &new, spec.touched_paths().as_deref())?;
            Ok(true)
        }
        None => Ok(false),
    }
}

fn snapshot(c: &Collection) -> Vec<(RecordId, Document)> {
    c.records()
        .map(|(r, d)| (r, d.to_document().unwrap()))
        .collect()
}

fn seeded() -> Collection {
    let mut c = collection();
    for id in 0..4 {
        c.insert(doc! {
            "_id": id, "u": id, "n": id, "on": id % 2 == 0, "title": "river lantern",
            "body": "blue meadow", "carted": [], "meta": { "tag": "a" },
        })
        .unwrap();
    }
    c
}

#[test]
fn pushing_and_pulling_reservations_adds_and_removes_only_their_multikey_entries() {
    let mut c = seeded();
    let cart_index = |c: &Collection| {
        c.indexes()
            .iter()
            .find(|i| i.spec.name == "carted.cart_id_1")
            .unwrap()
            .entry_count()
    };
    let before = cart_index(&c);
    for cart in ["x", "y", "z"] {
        update(
            &mut c,
            1,
            &doc! { "$inc": { "n": -1 }, "$push": { "carted": { "cart_id": cart, "ts": 1 } } },
        )
        .unwrap();
    }
    // The three empty arrays' entries of document 1 became three cart ids.
    assert_eq!(cart_index(&c), before - 1 + 3);
    assert_indexes_match_a_rebuild(&c, "three pushes");
    update(
        &mut c,
        1,
        &doc! { "$pull": { "carted": { "cart_id": "y" } } },
    )
    .unwrap();
    update(&mut c, 1, &doc! { "$set": { "carted.0.ts": 9 } }).unwrap();
    assert_eq!(cart_index(&c), before - 1 + 2);
    assert_indexes_match_a_rebuild(&c, "a pull and a positional set");
    let found = c.indexes()[2].lookup_exact(&[Bson::String("y".into())]);
    assert!(found.is_empty(), "the pulled cart is still indexed");
}

#[test]
fn an_update_to_a_taken_unique_value_fails_and_changes_nothing() {
    let mut c = seeded();
    let before = snapshot(&c);
    let err = update(
        &mut c,
        2,
        &doc! { "$set": { "u": 3, "title": "changed words" }, "$push": { "carted": { "cart_id": "q" } } },
    )
    .unwrap_err();
    assert_eq!(err.code, crate::error::ErrorCode::DuplicateKey, "{err:?}");
    assert_eq!(snapshot(&c), before);
    assert_indexes_match_a_rebuild(&c, "a refused update");
    // Setting a unique field to the value the document already has is no conflict.
    assert!(update(&mut c, 3, &doc! { "$set": { "u": 3, "n": 30 } }).unwrap());
    // Nor is taking a value just given up by another document.
    update(&mut c, 0, &doc! { "$unset": { "u": "" } }).unwrap();
    update(&mut c, 1, &doc! { "$set": { "u": 0 } }).unwrap();
    assert_indexes_match_a_rebuild(&c, "unique values moved");
}

#[test]
fn text_entries_follow_changed_words_and_renamed_fields() {
    let mut c = seeded();
    update(&mut c, 0, &doc! { "$set": { "title": "zeppelin harbour" } }).unwrap();
    update(&mut c, 1, &doc! { "$rename": { "body": "old_body" } }).unwrap();
    update(&mut c, 2, &doc! { "$rename": { "meta": "title" } }).unwrap();
    update(&mut c, 3, &doc! { "$inc": { "n": 1 } }).unwrap();
    assert_indexes_match_a_rebuild(&c, "text changes");
}

#[test]
fn an_update_names_the_paths_it_touches_up_to_the_first_positional_part() {
    let touched = |u: Document| {
        UpdateSpec::parse(&Bson::Document(u), None)
            .unwrap()
            .touched_paths()
    };
    assert_eq!(
        touched(doc! {
            "$inc": { "qty": -1, "carted.$.qty": 1 },
            "$push": { "log": { "cart_id": "c" } },
            "$set": { "a.b.2.c": 1, "x.$[].y": 1 },
            "$rename": { "from.f": "to" },
        }),
        Some(
            ["qty", "carted", "log", "a.b", "x", "to", "from.f"]
                .map(String::from)
                .to_vec()
        )
    );
    assert_eq!(touched(doc! { "whole": "replacement" }), None);
}

/// One update of the kinds a shop makes (stock moves, reservations, edits) and some it rarely
/// does (renames, unsets, replacements, whole-array sets).
fn an_update() -> impl Strategy<Value = Document> {
    let cart = prop::sample::select(vec!["a", "b", "c", "d"]);
    let word = prop::sample::select(vec!["river", "lantern", "café", "the", "meadow", "blue"]);
    prop_oneof![
        (cart.clone(), 0..3i32).prop_map(|(c, ts)| doc! {
            "$inc": { "n": -1 }, "$push": { "carted": { "cart_id": c, "ts": ts } },
        }),
        cart.clone()
            .prop_map(|c| doc! { "$pull": { "carted": { "cart_id": c } } }),
        (0..3i32).prop_map(|ts| doc! { "$set": { "carted.0.ts": ts } }),
        (0..4i32).prop_map(|u| doc! { "$set": { "u": u } }),
        Just(doc! { "$unset": { "u": "" } }),
        (word.clone(), word.clone())
            .prop_map(|(a, b)| doc! { "$set": { "title": format!("{a} {b}") } }),
        word.clone().prop_map(|w| doc! { "$set": { "body": w } }),
        any::<bool>().prop_map(|on| doc! { "$set": { "on": on } }),
        (0..3i32).prop_map(|n| doc! { "$set": { "n": n } }),
        word.clone()
            .prop_map(|w| doc! { "$set": { "meta.tag": w } }),
        Just(doc! { "$rename": { "meta": "title" } }),
        Just(doc! { "$rename": { "title": "body" } }),
        Just(doc! { "$set": { "carted": [] } }),
        (0..4i32, word).prop_map(
            |(u, w)| doc! { "u": u, "title": w, "carted": [{ "cart_id": "a", "ts": 1 }] }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// After any sequence of updates (some refused for a duplicate key or a bad path) every
    /// index holds what a rebuild gives, and a refused update changed no document.
    #[test]
    fn indexes_after_any_updates_equal_a_rebuild(
        steps in prop::collection::vec((0..4i32, an_update()), 1..24),
    ) {
        let mut c = seeded();
        for (id, u) in &steps {
            let before = snapshot(&c);
            if update(&mut c, *id, u).is_err() {
                prop_assert_eq!(snapshot(&c), before, "a refused {} changed documents", u);
            }
        }
        assert_indexes_match_a_rebuild(&c, &format!("{steps:?}"));
    }
}
