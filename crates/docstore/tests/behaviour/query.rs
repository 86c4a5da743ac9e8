//! The query language end to end: array matching, null vs missing, type brackets, numeric
//! comparison across types, logical operators, `$expr`; sort and projection.

use crate::common::{assert_code, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::Collection;

async fn fixture() -> (crate::common::TestDb, Collection<Document>) {
    let t = test_db().await;
    let c = t.db.collection::<Document>("q");
    c.insert_many(vec![
        doc! { "_id": 1, "a": 1 },
        doc! { "_id": 2, "a": [1, 2, 3] },
        doc! { "_id": 3, "a": Bson::Null },
        doc! { "_id": 4 },
        doc! { "_id": 5, "a": "1" },
        doc! { "_id": 6, "a": { "b": 1 } },
        doc! { "_id": 7, "a": [{ "b": 1 }, { "b": 2 }] },
        doc! { "_id": 8, "a": 2.5 },
        doc! { "_id": 9, "a": 3i64 },
        doc! { "_id": 10, "a": [] },
        doc! { "_id": 11, "a": [[1, 2]] },
    ])
    .await
    .unwrap();
    (t, c)
}

async fn ids_result(
    c: &Collection<Document>,
    filter: Document,
) -> mongodb::error::Result<Vec<Document>> {
    c.find(filter)
        .sort(doc! { "_id": 1 })
        .await?
        .try_collect()
        .await
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

#[tokio::test]
async fn filters_follow_mongodb_matching_rules() {
    let (_t, c) = fixture().await;
    let cases: Vec<(Document, Vec<i32>)> = vec![
        (doc! { "a": 1 }, vec![1, 2]),
        (doc! { "a": { "$gt": 1 } }, vec![2, 8, 9]),
        (doc! { "a": { "$lte": 1 } }, vec![1, 2]),
        (doc! { "a": Bson::Null }, vec![3, 4]),
        (doc! { "a": { "$exists": false } }, vec![4]),
        (
            doc! { "a": { "$ne": 1 } },
            vec![3, 4, 5, 6, 7, 8, 9, 10, 11],
        ),
        (doc! { "a": { "$in": [2, "1"] } }, vec![2, 5]),
        (
            doc! { "a": { "$nin": [1, Bson::Null] } },
            vec![5, 6, 7, 8, 9, 10, 11],
        ),
        (doc! { "a.b": 1 }, vec![6, 7]),
        (doc! { "a.b": { "$gte": 2 } }, vec![7]),
        (doc! { "a": { "$size": 0 } }, vec![10]),
        (doc! { "a": { "$size": 3 } }, vec![2]),
        (doc! { "a": { "$type": "array" } }, vec![2, 7, 10, 11]),
        (doc! { "a": { "$type": "number" } }, vec![1, 2, 8, 9]),
        (doc! { "a": { "$type": "string" } }, vec![5]),
        (
            doc! { "a": { "$elemMatch": { "$gte": 2, "$lt": 3 } } },
            vec![2],
        ),
        (doc! { "a": { "$elemMatch": { "b": 2 } } }, vec![7]),
        (doc! { "a": { "$all": [1, 3] } }, vec![2]),
        (doc! { "a": [1, 2] }, vec![11]),
        (doc! { "a.1": 2 }, vec![2]),
        (doc! { "$or": [{ "a": 1 }, { "a": "1" }] }, vec![1, 2, 5]),
        (
            doc! { "$and": [{ "a": { "$gt": 1 } }, { "a": { "$lt": 3 } }] },
            vec![2, 8],
        ),
        (doc! { "$nor": [{ "a": { "$exists": true } }] }, vec![4]),
        (
            doc! { "a": { "$not": { "$gt": 1 } } },
            vec![1, 3, 4, 5, 6, 7, 10, 11],
        ),
        (doc! { "a": { "$regex": "^1" } }, vec![5]),
        (doc! { "a": { "$mod": [2, 1] } }, vec![1, 2, 9]),
        (doc! { "a": 3 }, vec![2, 9]),
        (doc! { "a": 2.5 }, vec![8]),
    ];
    for (filter, expected) in cases {
        assert_eq!(ids(&c, filter.clone()).await, expected, "filter {filter}");
    }
}

#[tokio::test]
async fn expr_compares_across_types_in_bson_order() {
    let (_t, c) = fixture().await;
    assert_eq!(
        ids(&c, doc! { "$expr": { "$gt": ["$a", 2] } }).await,
        vec![2, 5, 6, 7, 8, 9, 10, 11]
    );
}

#[tokio::test]
async fn regex_options_and_bson_regex_values_work() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("r");
    c.insert_many(vec![
        doc! { "_id": 1, "s": "Apple" },
        doc! { "_id": 2, "s": "banana\nApple" },
        doc! { "_id": 3, "s": 5 },
    ])
    .await
    .unwrap();
    assert_eq!(
        ids(&c, doc! { "s": { "$regex": "^apple", "$options": "i" } }).await,
        vec![1]
    );
    assert_eq!(
        ids(&c, doc! { "s": { "$regex": "^Apple", "$options": "m" } }).await,
        vec![1, 2]
    );
    let re = Bson::RegularExpression(bson::Regex {
        pattern: "an".into(),
        options: String::new(),
    });
    assert_eq!(ids(&c, doc! { "s": re.clone() }).await, vec![2]);
    assert_eq!(ids(&c, doc! { "s": { "$in": [re, 5] } }).await, vec![2, 3]);
}

#[tokio::test]
async fn look_around_and_backreferences_match_as_in_pcre() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("pcre");
    c.insert_many(vec![
        doc! { "_id": 1, "s": "users" },
        doc! { "_id": 2, "s": "system.views" },
        doc! { "_id": 3, "s": "hey hey" },
    ])
    .await
    .unwrap();
    // The filter pymongo's `list_collection_names` tests use to skip system collections.
    assert_eq!(
        ids(&c, doc! { "s": { "$regex": "^(?!system\\.)" } }).await,
        vec![1, 3]
    );
    assert_eq!(
        ids(&c, doc! { "s": { "$regex": "^(\\w+) \\1$" } }).await,
        vec![3]
    );
    let found: Vec<Document> = c
        .aggregate(vec![doc! { "$match": { "$expr": {
        "$regexMatch": { "input": "$s", "regex": "(?<=sys)tem" } } } }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    // A pattern that backtracks without end is refused by name, never a silent non-match.
    c.insert_one(doc! { "_id": 4, "s": format!("{}b", "a".repeat(60)) })
        .await
        .unwrap();
    let err = ids_result(&c, doc! { "s": { "$regex": "^(a|aa)+(\\1)*$" } }).await;
    assert_code(err, 2);
}

#[tokio::test]
async fn bad_filters_are_bad_value_errors() {
    let (_t, c) = fixture().await;
    assert_code(c.find_one(doc! { "a": { "$bogus": 1 } }).await, 2);
    assert_code(c.find_one(doc! { "$bogus": [] }).await, 2);
    assert_code(c.find_one(doc! { "$and": [] }).await, 2);
    assert_code(c.find_one(doc! { "a": { "$in": 5 } }).await, 2);
}

#[tokio::test]
async fn sort_orders_across_types_and_uses_array_extremes() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("s");
    c.insert_many(vec![
        doc! { "_id": 1, "x": 3 },
        doc! { "_id": 2, "x": [1, 5] },
        doc! { "_id": 3, "x": 2 },
        doc! { "_id": 4 },
        doc! { "_id": 5, "x": "text" },
    ])
    .await
    .unwrap();
    let order = |docs: Vec<Document>| {
        docs.iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect::<Vec<_>>()
    };
    let asc: Vec<Document> = c
        .find(doc! {})
        .sort(doc! { "x": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(order(asc), vec![4, 2, 3, 1, 5]);
    let desc: Vec<Document> = c
        .find(doc! {})
        .sort(doc! { "x": -1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(order(desc), vec![5, 2, 1, 3, 4]);
}

#[tokio::test]
async fn sort_ties_keep_a_stable_order_and_compound_keys_apply() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("s");
    c.insert_many((0..20).map(|i| doc! { "_id": i, "g": i % 3, "v": -i }))
        .await
        .unwrap();
    let docs: Vec<Document> = c
        .find(doc! {})
        .sort(doc! { "g": 1, "v": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let got: Vec<(i32, i32)> = docs
        .iter()
        .map(|d| (d.get_i32("g").unwrap(), d.get_i32("v").unwrap()))
        .collect();
    let mut expected = got.clone();
    expected.sort();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn projections_include_exclude_slice_and_elem_match() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("p");
    c.insert_one(doc! {
        "_id": 1,
        "name": "x",
        "meta": { "a": 1, "b": 2 },
        "list": [1, 2, 3, 4, 5],
        "grades": [{ "g": 70 }, { "g": 90 }, { "g": 95 }],
    })
    .await
    .unwrap();
    let one = |p: Document| {
        let c = c.clone();
        async move { c.find_one(doc! {}).projection(p).await.unwrap().unwrap() }
    };
    assert_eq!(
        one(doc! { "name": 1 }).await,
        doc! { "_id": 1, "name": "x" }
    );
    assert_eq!(
        one(doc! { "meta.b": 1, "_id": 0 }).await,
        doc! { "meta": { "b": 2 } }
    );
    assert_eq!(
        one(doc! { "list": 0, "grades": 0, "meta": 0 }).await,
        doc! { "_id": 1, "name": "x" }
    );
    assert_eq!(
        one(doc! { "list": { "$slice": 2 }, "_id": 0, "name": 1 })
            .await
            .get_array("list")
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        one(doc! { "list": { "$slice": [-2, 1] } })
            .await
            .get_array("list")
            .unwrap(),
        &vec![Bson::Int32(4)]
    );
    assert_eq!(
        one(doc! { "grades": { "$elemMatch": { "g": { "$gt": 80 } } } }).await,
        doc! { "_id": 1, "grades": [{ "g": 90 }] }
    );
    let positional = c
        .find_one(doc! { "grades.g": { "$gte": 95 } })
        .projection(doc! { "grades.$": 1 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(positional, doc! { "_id": 1, "grades": [{ "g": 95 }] });
    assert_code(
        c.find_one(doc! {})
            .projection(doc! { "name": 1, "list": 0 })
            .await,
        31254,
    );
}

#[tokio::test]
async fn an_expr_that_fails_to_evaluate_fails_the_query() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("e");
    c.insert_many(vec![
        doc! { "_id": 1, "a": "text" },
        doc! { "_id": 2, "a": 5 },
    ])
    .await
    .unwrap();
    // $add of a string is a type error in MongoDB, not a non-match.
    let r = c
        .find_one(doc! { "$expr": { "$gt": [{ "$add": ["$a", 1] }, 0] } })
        .await;
    assert!(r.is_err(), "{r:?}");
    assert_eq!(
        ids(&c, doc! { "$expr": { "$gt": ["$a", 1] } }).await,
        vec![1, 2]
    );
}

/// A count the store answers from index keys alone gives what matching the documents gives:
/// a multikey field after the equality prefix (a document with two tags is one document, not two
/// keys), two paths under one array (bounds on only one of them), and an index whose collation
/// is not the query's (its string bounds cannot be used).
#[tokio::test]
async fn counts_answered_from_index_keys_match_counts_of_the_documents() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("counted");
    c.insert_many(vec![
        doc! { "_id": 1, "n": 5, "tags": ["a", "b"], "cat": "A", "arr": [{ "x": 1, "y": 2 }, { "x": 3, "y": 4 }] },
        doc! { "_id": 2, "n": 5, "tags": ["a"], "cat": "a", "arr": [{ "x": 1, "y": 4 }] },
        doc! { "_id": 3, "n": 6, "tags": [], "cat": "b", "arr": [] },
    ])
    .await
    .unwrap();
    for (name, keys, collation) in [
        ("n_tags", doc! { "n": 1, "tags": 1 }, None),
        ("arr_x_y", doc! { "arr.x": 1, "arr.y": 1 }, None),
        (
            "n_cat_ci",
            doc! { "n": 1, "cat": 1 },
            Some(doc! { "locale": "en", "strength": 2 }),
        ),
    ] {
        let mut index = doc! { "key": keys, "name": name };
        if let Some(collation) = collation {
            index.insert("collation", collation);
        }
        t.db.run_command(doc! { "createIndexes": "counted", "indexes": [index] })
            .await
            .unwrap();
    }
    for filter in [
        doc! { "n": 5 },
        doc! { "n": 5, "tags": "a" },
        doc! { "arr.x": 1, "arr.y": 4 },
        doc! { "arr.x": 3, "arr.y": 2 },
        doc! { "n": 5, "cat": "a" },
    ] {
        let found: Vec<Document> = c
            .find(filter.clone())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let counted = c.count_documents(filter.clone()).await.unwrap();
        assert_eq!(counted as usize, found.len(), "countDocuments {filter}");
        // The `count` command, left to plan and with each index as its hint.
        for hint in [None, Some("n_tags"), Some("arr_x_y"), Some("n_cat_ci")] {
            let mut command = doc! { "count": "counted", "query": filter.clone() };
            if let Some(hint) = hint {
                command.insert("hint", hint);
            }
            let reply = t.db.run_command(command).await.unwrap();
            let n = reply
                .get_i32("n")
                .map(i64::from)
                .or_else(|_| reply.get_i64("n"))
                .unwrap();
            assert_eq!(n as usize, found.len(), "count {filter} hint {hint:?}");
        }
    }
    // A skip walked over the keys of an index of another collation skips only matches too.
    let after_skip: Vec<Document> = c
        .find(doc! { "n": 5, "cat": "a" })
        .hint(mongodb::options::Hint::Name("n_cat_ci".into()))
        .skip(1)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(after_skip.is_empty(), "{after_skip:?}");
}

/// A find whose projection the index keys answer is explained over the wire as mongod explains
/// it: `PROJECTION_COVERED` over the `IXSCAN`, no document examined; one whose values the keys
/// do not give back (strings) reads its documents and is explained as a `FETCH`. Both return
/// what the same find without the index does.
#[tokio::test]
async fn explain_shows_a_covered_find_as_covered_and_one_that_reads_documents_as_a_fetch() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("covered");
    let docs: Vec<Document> = (0..20)
        .map(|i| {
            doc! {
                "_id": bson::oid::ObjectId::from_bytes([i as u8; 12]),
                "at": bson::DateTime::from_millis(i * 1000),
                "name": format!("n{i:02}"),
            }
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    t.db.run_command(doc! { "createIndexes": "covered", "indexes": [
        { "key": { "at": 1, "_id": 1 }, "name": "at_id" },
        { "key": { "name": 1, "_id": 1 }, "name": "name_id" },
    ] })
    .await
    .unwrap();
    let cases = [
        (
            "at_id",
            doc! { "at": { "$gte": bson::DateTime::from_millis(5000) } },
            "at",
            "PROJECTION_COVERED",
        ),
        (
            "name_id",
            doc! { "name": { "$gte": "n05" } },
            "name",
            "FETCH",
        ),
    ];
    for (hint, filter, field, stage) in cases {
        let projection = doc! { "_id": 1, field: 1 };
        let explained =
            t.db.run_command(doc! {
                "explain": {
                    "find": "covered", "filter": filter.clone(), "projection": projection.clone(),
                    "hint": hint,
                },
                "verbosity": "executionStats",
            })
            .await
            .unwrap();
        let plan = explained
            .get_document("queryPlanner")
            .and_then(|q| q.get_document("winningPlan"))
            .unwrap();
        assert_eq!(plan.get_str("stage"), Ok(stage), "{hint}: {plan}");
        let examined = explained
            .get_document("executionStats")
            .and_then(|s| s.get_i64("totalDocsExamined"))
            .unwrap();
        assert_eq!(
            examined == 0,
            stage == "PROJECTION_COVERED",
            "{hint}: {explained}"
        );
        let read = |hint: Option<&str>| {
            let mut find = c.find(filter.clone()).projection(projection.clone());
            if let Some(hint) = hint {
                find = find.hint(mongodb::options::Hint::Name(hint.into()));
            }
            async move {
                let mut found: Vec<Document> = find.await.unwrap().try_collect().await.unwrap();
                found.sort_by_key(|d| d.get_object_id("_id").unwrap());
                found
            }
        };
        let through_index = read(Some(hint)).await;
        assert_eq!(through_index.len(), 15, "{hint}");
        assert_eq!(through_index, read(None).await, "{hint}");
    }
}
