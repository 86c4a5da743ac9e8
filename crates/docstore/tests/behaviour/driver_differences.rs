//! Differences from MongoDB 7.0 that the Python driver's own test suites and a MongoEngine
//! application found, kept as regressions. Each test states MongoDB's documented answer.

use crate::common::{assert_code, message_of, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::ReturnDocument;

// ---- `let` values are expressions ----

/// MongoDB evaluates every `let` value as an expression before the command looks at any
/// document: `{$literal: "bar"}` is the string "bar", `{$concat: ["a", "b"]}` is "ab".
#[tokio::test]
async fn let_values_are_evaluated_in_pipeline_updates() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many(vec![doc! { "_id": 1 }, doc! { "_id": 2 }])
        .await
        .unwrap();
    c.update_many(doc! {}, vec![doc! { "$set": { "y": "$$y" } }])
        .let_vars(doc! { "y": { "$literal": "bar" } })
        .await
        .unwrap();
    let all: Vec<Document> = c.find(doc! {}).await.unwrap().try_collect().await.unwrap();
    assert_eq!(
        all,
        vec![doc! { "_id": 1, "y": "bar" }, doc! { "_id": 2, "y": "bar" }]
    );
    // A `$literal` keeps a `$`-string from being read as a field path.
    c.update_one(doc! { "_id": 1 }, vec![doc! { "$set": { "z": "$$v" } }])
        .let_vars(doc! { "v": { "$literal": "$notAPath" } })
        .await
        .unwrap();
    let one = c.find_one(doc! { "_id": 1 }).await.unwrap().unwrap();
    assert_eq!(one.get_str("z").unwrap(), "$notAPath");
}

#[tokio::test]
async fn let_values_are_evaluated_in_aggregate_and_find() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many(vec![doc! { "_id": 1, "x": 11 }, doc! { "_id": 2, "x": 3 }])
        .await
        .unwrap();
    let out: Vec<Document> = c
        .aggregate(vec![
            doc! { "$match": { "_id": 1 } },
            doc! { "$project": { "_id": 0, "s": "$$s" } },
        ])
        .let_vars(doc! { "s": { "$concat": ["a", "b"] } })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(out, vec![doc! { "s": "ab" }]);
    let found: Vec<Document> = c
        .find(doc! { "$expr": { "$eq": ["$x", "$$v"] } })
        .let_vars(doc! { "v": { "$add": [10, 1] } })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found, vec![doc! { "_id": 1, "x": 11 }]);
    // A value that evaluates to "missing" is a defined variable holding missing: it equals a
    // missing field (MongoDB's jstests/core/command_let_variables_expressions.js).
    let found: Vec<Document> = c
        .find(doc! { "$expr": { "$eq": ["$nothere", "$$m"] } })
        .let_vars(doc! { "m": "$$REMOVE" })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    // A `let` value may not read a document: it runs before any is examined (4890500).
    assert_code(c.find(doc! {}).let_vars(doc! { "v": "$x" }).await, 4890500);
}

#[tokio::test]
async fn let_values_are_evaluated_in_delete_and_find_and_modify() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many(vec![
        doc! { "_id": 1, "x": 4 },
        doc! { "_id": 2, "x": 5 },
        doc! { "_id": 3, "x": 6 },
    ])
    .await
    .unwrap();
    let r = c
        .delete_many(doc! { "$expr": { "$eq": ["$x", "$$v"] } })
        .let_vars(doc! { "v": { "$multiply": [2, 2] } })
        .await
        .unwrap();
    assert_eq!(r.deleted_count, 1);
    let after = c
        .find_one_and_update(
            doc! { "$expr": { "$eq": ["$x", "$$v"] } },
            vec![doc! { "$set": { "tag": "$$t" } }],
        )
        .let_vars(doc! { "v": { "$subtract": [6, 1] }, "t": { "$toUpper": "hit" } })
        .return_document(ReturnDocument::After)
        .await
        .unwrap();
    assert_eq!(after, Some(doc! { "_id": 2, "x": 5, "tag": "HIT" }));
    let removed = c
        .find_one_and_delete(doc! { "$expr": { "$gt": ["$x", "$$v"] } })
        .let_vars(doc! { "v": { "$add": [5, 0] } })
        .await
        .unwrap();
    assert_eq!(removed, Some(doc! { "_id": 3, "x": 6 }));
}

// ---- `$`-prefixed field names ----

/// Since MongoDB 5.0, `$`-prefixed field names are stored on insert, top-level ones included;
/// inside `_id` they are refused with 52 DollarPrefixedFieldName.
#[tokio::test]
async fn dollar_prefixed_top_level_fields_are_stored_but_not_inside_id() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_one(doc! { "_id": 2, "$schema": "http://x", "nested": { "$ref": 1 } })
        .await
        .unwrap();
    let back = c.find_one(doc! { "_id": 2 }).await.unwrap().unwrap();
    assert_eq!(
        back,
        doc! { "_id": 2, "$schema": "http://x", "nested": { "$ref": 1 } }
    );
    let e = assert_code(c.insert_one(doc! { "_id": { "$a": 1 } }).await, 52);
    assert!(message_of(&e).contains("$a"), "{e}");
    assert_code(c.insert_one(doc! { "_id": { "a": 1, "$b": 1 } }).await, 52);
    assert_code(c.insert_one(doc! { "_id": { "a": { "$b": 1 } } }).await, 52);
    // Upserts are inserts for this rule; an `_id` with a `$` name is refused there too.
    assert_code(
        c.update_one(doc! { "k": 1 }, doc! { "$set": { "_id": { "$x": 1 } } })
            .upsert(true)
            .await,
        52,
    );
    // A replacement may hold nested `$` names.
    c.replace_one(doc! { "_id": 2 }, doc! { "a": { "$c": 1 } })
        .await
        .unwrap();
    assert_eq!(
        c.find_one(doc! { "_id": 2 }).await.unwrap().unwrap(),
        doc! { "_id": 2, "a": { "$c": 1 } }
    );
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
    // A replacement may not hold a top-level `$` name, nor may `$set` add one to an existing
    // document (52); an upsert that inserts is an insert, so there `$set` may.
    let write_error_code = |r: Document| {
        r.get_array("writeErrors")
            .ok()
            .and_then(|e| match e.first() {
                Some(Bson::Document(w)) => w.get_i32("code").ok(),
                _ => None,
            })
    };
    let r =
        t.db.run_command(doc! { "update": "c", "updates": [
            { "q": { "_id": 2 }, "u": { "a": 1, "$c": 1 } },
        ] })
        .await
        .unwrap();
    assert_eq!(write_error_code(r), Some(52));
    let r =
        t.db.run_command(doc! { "update": "c", "updates": [
            { "q": { "_id": 2 }, "u": { "$set": { "$hotel": 320 } } },
        ] })
        .await
        .unwrap();
    assert_eq!(write_error_code(r), Some(52));
    c.update_one(doc! { "_id": 3 }, doc! { "$set": { "$hotel": 320 } })
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(
        c.find_one(doc! { "_id": 3 }).await.unwrap().unwrap(),
        doc! { "_id": 3, "$hotel": 320 }
    );
}

// ---- unknown fields in write statements ----

/// MongoDB parses the whole command first: an unknown field in one statement fails the command
/// (`ok: 0`, 40415), and nothing is written, not even by the statements before it.
#[tokio::test]
async fn an_unknown_field_in_an_update_or_delete_statement_fails_the_command() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_one(doc! { "_id": 1, "a": 1 }).await.unwrap();
    let e = assert_code(
        t.db.run_command(doc! {
            "update": "c",
            "updates": [
                { "q": { "_id": 1 }, "u": { "$set": { "a": 2 } } },
                { "q": {}, "u": { "$set": { "a": 3 } }, "sort": { "a": 1 } },
            ],
        })
        .await,
        40415,
    );
    assert!(message_of(&e).contains("sort"), "{e}");
    assert_eq!(
        c.find_one(doc! {}).await.unwrap().unwrap(),
        doc! { "_id": 1, "a": 1 }
    );
    assert_code(
        t.db.run_command(doc! {
            "delete": "c",
            "deletes": [{ "q": {}, "limit": 0 }, { "q": {}, "limit": 0, "bogus": 1 }],
        })
        .await,
        40415,
    );
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
}

// ---- empty collation ----

/// An empty `collation: {}` is no collation (the simple binary comparison) in MongoDB, in every
/// command that takes one.
#[tokio::test]
async fn an_empty_collation_means_no_collation_everywhere() {
    let t = test_db().await;
    t.db.collection::<Document>("c")
        .insert_many(vec![
            doc! { "_id": 1, "s": "a" },
            doc! { "_id": 2, "s": "B" },
        ])
        .await
        .unwrap();
    let commands = [
        doc! { "find": "c", "filter": {}, "collation": {} },
        doc! { "aggregate": "c", "pipeline": [], "cursor": {}, "collation": {} },
        doc! { "count": "c", "collation": {} },
        doc! { "distinct": "c", "key": "s", "collation": {} },
        doc! { "findAndModify": "c", "query": { "_id": 1 }, "update": { "$set": { "t": 1 } }, "collation": {} },
        doc! { "update": "c", "updates": [{ "q": { "_id": 2 }, "u": { "$set": { "t": 2 } }, "collation": {} }] },
        doc! { "delete": "c", "deletes": [{ "q": { "_id": 9 }, "limit": 1, "collation": {} }] },
    ];
    for cmd in commands {
        let r = t.db.run_command(cmd.clone()).await;
        let r = r.unwrap_or_else(|e| panic!("{cmd} failed: {e}"));
        assert!(r.get("writeErrors").is_none(), "{cmd}: {r}");
    }
    // Simple binary order: "B" sorts before "a".
    let sorted: Vec<Document> =
        t.db.collection::<Document>("c")
            .find(doc! {})
            .sort(doc! { "s": 1 })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
    assert_eq!(sorted[0].get_i32("_id").unwrap(), 2);
}

// ---- index options and drop ----

/// mongod keeps the options it accepts in the index spec it lists, `background` and the
/// ignored `dropDups` included.
#[tokio::test]
async fn index_options_are_listed_as_given_and_drop_dups_is_ignored() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many(vec![doc! { "_id": 1, "a": 1 }, doc! { "_id": 2, "a": 2 }])
        .await
        .unwrap();
    t.db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [
            { "key": { "a": 1 }, "name": "a_1", "background": true },
            { "key": { "b": 1 }, "name": "b_1", "dropDups": true, "sparse": true },
        ],
    })
    .await
    .unwrap();
    let specs: Vec<Document> =
        t.db.run_cursor_command(doc! { "listIndexes": "c" })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
    let a = specs
        .iter()
        .find(|s| s.get_str("name") == Ok("a_1"))
        .unwrap();
    assert_eq!(a.get_bool("background").ok(), Some(true), "{a}");
    let b = specs
        .iter()
        .find(|s| s.get_str("name") == Ok("b_1"))
        .unwrap();
    assert_eq!(b.get_bool("sparse").ok(), Some(true), "{b}");
    assert_eq!(b.get_bool("dropDups").ok(), Some(true), "{b}");
    // Asking again with `background` and `dropDups` changed is the same index (they are not
    // part of an index's identity).
    t.db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [{ "key": { "a": 1 }, "name": "a_1", "background": false, "dropDups": true }],
    })
    .await
    .unwrap();
}

/// `drop` of an existing collection answers `nIndexesWas` (the `_id` index counts) and `ns`.
#[tokio::test]
async fn drop_reports_how_many_indexes_the_collection_had() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_one(doc! { "a": 1 }).await.unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await
        .unwrap();
    let r = t.db.run_command(doc! { "drop": "c" }).await.unwrap();
    let n = match r.get("nIndexesWas") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("nIndexesWas: {other:?} in {r}"),
    };
    assert_eq!(n, 2);
    assert_eq!(r.get_str("ns").unwrap(), format!("{}.c", t.db.name()));
}

// ---- getParameter ----

/// A production mongod answers `enableTestCommands: false`, alone or in `getParameter: "*"`.
#[tokio::test]
async fn get_parameter_reports_enable_test_commands_false() {
    let t = test_db().await;
    let admin = t.client.database("admin");
    let one = admin
        .run_command(doc! { "getParameter": 1, "enableTestCommands": 1 })
        .await
        .unwrap();
    assert_eq!(
        one.get_bool("enableTestCommands").ok(),
        Some(false),
        "{one}"
    );
    let all = admin
        .run_command(doc! { "getParameter": "*" })
        .await
        .unwrap();
    assert_eq!(all.get_bool("enableTestCommands").ok(), Some(false));
}

// ---- $getField, $setField, $unsetField ----

/// `$getField` reads a field by its literal name (dots and `$` included); `$setField` and
/// `$unsetField` return a copy of an object with one such field set or removed; a null or
/// missing `input` gives null (MongoDB 5.0+).
#[tokio::test]
async fn get_set_and_unset_field_reach_fields_paths_cannot() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_one(doc! { "_id": 1, "price.usd": 5, "$qty": 2, "sub": { "a.b": "x" } })
        .await
        .unwrap();
    let out: Vec<Document> = c
        .aggregate(vec![doc! { "$project": {
            "_id": 0,
            "usd": { "$getField": "price.usd" },
            "qty": { "$getField": { "$literal": "$qty" } },
            "ab": { "$getField": { "field": "a.b", "input": "$sub" } },
            "none": { "$getField": { "field": "a", "input": null } },
            "set": { "$setField": { "field": { "$literal": "$new" }, "input": "$sub", "value": 1 } },
            "unset": { "$unsetField": { "field": "a.b", "input": "$sub" } },
            "removed": { "$setField": { "field": "a.b", "input": "$sub", "value": "$$REMOVE" } },
        } }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![doc! {
            "usd": 5,
            "qty": 2,
            "ab": "x",
            "none": Bson::Null,
            "set": { "a.b": "x", "$new": 1 },
            "unset": {},
            "removed": {},
        }]
    );
    // Replacing a top-level `$` field is done with $setField in a pipeline update.
    c.update_one(
        doc! { "_id": 1 },
        vec![doc! { "$replaceWith": { "$setField": {
            "field": { "$literal": "$qty" }, "input": "$$ROOT", "value": 3
        } } }],
    )
    .await
    .unwrap();
    let back = c.find_one(doc! {}).await.unwrap().unwrap();
    assert_eq!(back.get_i32("$qty").unwrap(), 3);
    // The field name must be a constant string: a `$` name is written inside `$literal`.
    let bad = c
        .aggregate(vec![doc! { "$project": { "x": { "$getField": "$sub" } } }])
        .await;
    assert!(bad.is_err());
}

// ---- database-level aggregate with $documents ----

/// `db.aggregate([{$documents: [...]}, ...])` runs a pipeline over literal documents (no
/// collection); its cursor namespace is `<db>.$cmd.aggregate`. Other first stages need a
/// collection (73 InvalidNamespace).
#[tokio::test]
async fn database_aggregate_runs_over_documents() {
    let t = test_db().await;
    let out: Vec<Document> =
        t.db.aggregate(vec![
            doc! { "$documents": [{ "x": 1 }, { "x": 2 }, { "x": 3 }] },
            doc! { "$match": { "x": { "$gte": 2 } } },
            doc! { "$project": { "_id": 0, "y": { "$multiply": ["$x", 10] } } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(out, vec![doc! { "y": 20 }, doc! { "y": 30 }]);
    // The documents are an expression: let variables are visible.
    let out: Vec<Document> =
        t.db.aggregate(vec![doc! { "$documents": "$$docs" }])
            .let_vars(doc! { "docs": [{ "k": "a" }] })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
    assert_eq!(out, vec![doc! { "k": "a" }]);
    // More results than a batch: getMore continues the collection-less cursor.
    let many: Vec<Bson> = (0..250).map(|i| Bson::Document(doc! { "i": i })).collect();
    let n =
        t.db.aggregate(vec![doc! { "$documents": many }])
            .batch_size(100)
            .await
            .unwrap()
            .try_collect::<Vec<Document>>()
            .await
            .unwrap()
            .len();
    assert_eq!(n, 250);
    assert_code(t.db.aggregate(vec![doc! { "$match": {} }]).await, 73);
}

// ---- find: min, max, returnKey, showRecordId ----

/// `min` (inclusive) and `max` (exclusive) bound the hinted index's keys, and need a hint;
/// `returnKey` returns the index key instead of the document (empty documents without an
/// index); `showRecordId` adds `$recordId`.
#[tokio::test]
async fn find_min_max_return_key_and_show_record_id() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many((1..=6).map(|i| doc! { "_id": i, "a": i * 10, "b": "x" }))
        .await
        .unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await
        .unwrap();
    let hint = mongodb::options::Hint::Keys(doc! { "a": 1 });
    let ids = |docs: Vec<Document>| -> Vec<i32> {
        docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
    };
    let found: Vec<Document> = c
        .find(doc! {})
        .min(doc! { "a": 20 })
        .max(doc! { "a": 50 })
        .hint(hint.clone())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(found), vec![2, 3, 4]);
    let found: Vec<Document> = c
        .find(doc! { "_id": { "$ne": 5 } })
        .min(doc! { "a": 40 })
        .hint(hint.clone())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(found), vec![4, 6]);
    assert_code(c.find(doc! {}).min(doc! { "a": 20 }).await, 51173);
    let keys: Vec<Document> = c
        .find(doc! { "a": { "$gte": 50 } })
        .return_key(true)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys, vec![doc! { "a": 50 }, doc! { "a": 60 }]);
    let keys: Vec<Document> = c
        .find(doc! { "b": "x" })
        .return_key(true)
        .limit(2)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys, vec![doc! {}, doc! {}]);
    let with_ids: Vec<Document> = c
        .find(doc! { "_id": 1 })
        .show_record_id(true)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(with_ids.len(), 1);
    assert_eq!(with_ids[0].get_i32("a").unwrap(), 10);
    assert!(
        matches!(with_ids[0].get("$recordId"), Some(Bson::Int64(_))),
        "{:?}",
        with_ids[0]
    );
}

// ---- hashed indexes ----

/// A hashed index stores MongoDB's 64-bit hash of each value; equality and `$in` on the field
/// use it (explain shows an IXSCAN with the hash as bounds), ranges do not. Arrays cannot be
/// hashed (16766) and a hashed index cannot be unique (16764).
#[tokio::test]
async fn hashed_indexes_serve_equality() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many((0..50).map(|i| doc! { "_id": i, "k": format!("key{i}"), "n": i }))
        .await
        .unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "k": "hashed" })
            .build(),
    )
    .await
    .unwrap();
    let found: Vec<Document> = c
        .find(doc! { "k": { "$in": ["key7", "key9", "nothing"] } })
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        found
            .iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect::<Vec<_>>(),
        vec![7, 9]
    );
    let explain =
        t.db.run_command(doc! {
            "explain": { "find": "c", "filter": { "k": "key7" } },
            "verbosity": "executionStats",
        })
        .await
        .unwrap();
    let scan = crate::common::find_stage(&Bson::Document(explain.clone()), "IXSCAN")
        .unwrap_or_else(|| panic!("no IXSCAN in {explain}"));
    assert_eq!(
        scan.get_document("keyPattern").unwrap(),
        &doc! { "k": "hashed" }
    );
    let stats = explain.get_document("executionStats").unwrap();
    let examined = match stats.get("totalDocsExamined") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("totalDocsExamined {other:?}"),
    };
    assert_eq!(examined, 1, "{stats}");
    // The bounds are one point: the hash of "key7".
    let bounds = scan.get_document("indexBounds").unwrap();
    let k = bounds.get_array("k").unwrap();
    assert_eq!(k.len(), 1);
    // 1.5 is hashed as 1, which hashes to 5902408780260971510 (a test vector of mongod's).
    c.insert_one(doc! { "_id": 100, "k": 1.5 }).await.unwrap();
    let keys: Vec<Document> = c
        .find(doc! { "k": 1.5 })
        .return_key(true)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys, vec![doc! { "k": 5902408780260971510i64 }]);
    assert_code(c.insert_one(doc! { "_id": 101, "k": [1, 2] }).await, 16766);
    assert_code(
        c.create_index(
            mongodb::IndexModel::builder()
                .keys(doc! { "n": "hashed" })
                .options(
                    mongodb::options::IndexOptions::builder()
                        .unique(true)
                        .build(),
                )
                .build(),
        )
        .await,
        16764,
    );
}

// ---- validate ----

/// `validate` checks that every document is readable and every index holds exactly the keys
/// of the documents; the reply carries `valid`, `nrecords`, `nIndexes`, `keysPerIndex` and
/// `errors`. A collection that does not exist is 26 NamespaceNotFound.
#[tokio::test]
async fn validate_reports_a_consistent_collection() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many(vec![
        doc! { "_id": 1, "tags": ["a", "b"] },
        doc! { "_id": 2, "tags": ["c"] },
        doc! { "_id": 3 },
    ])
    .await
    .unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "tags": 1 })
            .build(),
    )
    .await
    .unwrap();
    let r = t.db.run_command(doc! { "validate": "c" }).await.unwrap();
    assert_eq!(r.get_bool("valid").ok(), Some(true), "{r}");
    let int = |d: &Document, k: &str| match d.get(k) {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("{k}: {other:?} in {d}"),
    };
    assert_eq!(int(&r, "nrecords"), 3);
    assert_eq!(int(&r, "nIndexes"), 2);
    let keys = r.get_document("keysPerIndex").unwrap();
    assert_eq!(int(keys, "_id_"), 3);
    // "a", "b", "c" and null for the document without tags.
    assert_eq!(int(keys, "tags_1"), 4);
    assert!(r.get_array("errors").unwrap().is_empty());
    assert_eq!(r.get_str("ns").unwrap(), format!("{}.c", t.db.name()));
    assert_code(t.db.run_command(doc! { "validate": "nothere" }).await, 26);
}
