//! Collations (MongoDB 7.0's "Collation" page): per-command collations on reads and writes,
//! collection defaults, collated indexes (uniqueness, and the planner using one only for
//! queries of its collation), language orders, the resolved collation documents listed, the
//! refusals of invalid collations, and persistence across a restart.

use crate::common::{assert_code, find_stage, is_docstore, message_of, test_db};
use bson::{doc, Bson, Document};
use mongodb::Database;

async fn run(db: &Database, command: Document) -> Document {
    db.run_command(command).await.unwrap()
}

/// The `_id`s of a find's first batch, in order.
async fn ids(db: &Database, find: Document) -> Vec<Bson> {
    let reply = run(db, find).await;
    reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().get("_id").unwrap().clone())
        .collect()
}

/// The `name`s of a find's first batch, in order.
async fn names(db: &Database, find: Document) -> Vec<String> {
    let reply = run(db, find).await;
    reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| {
            d.as_document()
                .unwrap()
                .get_str("name")
                .unwrap()
                .to_string()
        })
        .collect()
}

async fn insert_names(db: &Database, coll: &str, names: &[&str]) {
    let docs: Vec<Document> = names
        .iter()
        .enumerate()
        .map(|(i, n)| doc! { "_id": i as i32, "name": *n })
        .collect();
    run(db, doc! { "insert": coll, "documents": docs }).await;
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn a_strength_two_collation_matches_strings_whatever_their_case() {
    let t = test_db().await;
    insert_names(&t.db, "c", &["ABC", "abc", "Abc", "abd", "abç"]).await;
    let found = ids(
        &t.db,
        doc! { "find": "c", "filter": { "name": "abc" }, "sort": { "_id": 1 },
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(found, vec![Bson::Int32(0), Bson::Int32(1), Bson::Int32(2)]);
    // Without a collation the comparison is binary.
    let found = ids(&t.db, doc! { "find": "c", "filter": { "name": "abc" } }).await;
    assert_eq!(found, vec![Bson::Int32(1)]);
    // count, distinct and the comparison operators use it too.
    let count = run(
        &t.db,
        doc! { "count": "c", "query": { "name": { "$in": ["ABD", "aBc"] } },
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(
        count.get_i64("n").or(count.get_i32("n").map(i64::from)),
        Ok(4)
    );
    let ne = ids(
        &t.db,
        doc! { "find": "c", "filter": { "name": { "$ne": "ABC" } }, "sort": { "_id": 1 },
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(ne, vec![Bson::Int32(3), Bson::Int32(4)]);
    let distinct = run(
        &t.db,
        doc! { "distinct": "c", "key": "name", "query": { "name": { "$lte": "abc" } },
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(distinct.get_array("values").unwrap().len(), 1);
}

#[tokio::test]
async fn a_strength_one_collation_also_ignores_diacritics() {
    let t = test_db().await;
    insert_names(&t.db, "c", &["café", "cafe", "CAFE", "Cafè", "cafes"]).await;
    let primary = ids(
        &t.db,
        doc! { "find": "c", "filter": { "name": "cafe" }, "sort": { "_id": 1 },
        "collation": { "locale": "fr", "strength": 1 } },
    )
    .await;
    assert_eq!(primary.len(), 4);
    let secondary = ids(
        &t.db,
        doc! { "find": "c", "filter": { "name": "cafe" }, "sort": { "_id": 1 },
        "collation": { "locale": "fr", "strength": 2 } },
    )
    .await;
    assert_eq!(secondary, vec![Bson::Int32(1), Bson::Int32(2)]);
}

#[tokio::test]
async fn regular_expressions_stay_binary_under_a_collation() {
    let t = test_db().await;
    insert_names(&t.db, "c", &["abc", "ABC"]).await;
    let found = ids(
        &t.db,
        doc! { "find": "c", "filter": { "name": { "$regex": "^ab" } },
        "collation": { "locale": "en", "strength": 1 } },
    )
    .await;
    assert_eq!(found, vec![Bson::Int32(0)]);
}

#[tokio::test]
async fn numeric_ordering_sorts_digit_strings_by_their_value() {
    let t = test_db().await;
    insert_names(&t.db, "c", &["10", "2", "1", "20", "100"]).await;
    let numeric = names(
        &t.db,
        doc! { "find": "c", "sort": { "name": 1 },
        "collation": { "locale": "en", "numericOrdering": true } },
    )
    .await;
    assert_eq!(numeric, strings(&["1", "2", "10", "20", "100"]));
    let plain = names(&t.db, doc! { "find": "c", "sort": { "name": 1 } }).await;
    assert_eq!(plain, strings(&["1", "10", "100", "2", "20"]));
    // $gt compares by value too: "10" and "100" and "20" are above "9".
    let above = ids(
        &t.db,
        doc! { "find": "c", "filter": { "name": { "$gt": "9" } },
        "collation": { "locale": "en", "numericOrdering": true } },
    )
    .await;
    assert_eq!(above.len(), 3);
}

#[tokio::test]
async fn german_french_and_swedish_collations_sort_as_those_languages_do() {
    let t = test_db().await;
    insert_names(
        &t.db,
        "c",
        &["zebra", "äpfel", "apfel", "ödla", "ost", "bär"],
    )
    .await;
    let sorted = |locale: &str| {
        doc! { "find": "c", "sort": { "name": 1 }, "collation": { "locale": locale } }
    };
    // German: ä and ö sort with a and o.
    assert_eq!(
        names(&t.db, sorted("de")).await,
        strings(&["apfel", "äpfel", "bär", "ödla", "ost", "zebra"])
    );
    // Swedish: å, ä and ö are letters of their own after z.
    assert_eq!(
        names(&t.db, sorted("sv")).await,
        strings(&["apfel", "bär", "ost", "zebra", "äpfel", "ödla"])
    );
    // German phone books sort ä as "ae": "äpfel" comes after "adler" and before "af".
    run(
        &t.db,
        doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 0 }] },
    )
    .await;
    insert_names(&t.db, "c", &["af", "äpfel", "adler"]).await;
    assert_eq!(
        names(&t.db, sorted("de@collation=phonebook")).await,
        strings(&["adler", "äpfel", "af"])
    );
    assert_eq!(
        names(&t.db, sorted("de")).await,
        strings(&["adler", "af", "äpfel"])
    );
    // French Canadian compares accents from the end of the word (backwards: true).
    run(
        &t.db,
        doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 0 }] },
    )
    .await;
    insert_names(&t.db, "c", &["côté", "coté", "côte", "cote"]).await;
    assert_eq!(
        names(&t.db, sorted("fr_CA")).await,
        strings(&["cote", "côte", "coté", "côté"])
    );
    assert_eq!(
        names(&t.db, sorted("fr")).await,
        strings(&["cote", "coté", "côte", "côté"])
    );
}

#[tokio::test]
async fn aggregation_groups_and_matches_under_the_collation() {
    let t = test_db().await;
    insert_names(&t.db, "c", &["Jazz", "jazz", "JAZZ", "rock"]).await;
    let reply = run(
        &t.db,
        doc! { "aggregate": "c", "cursor": {},
        "pipeline": [
            { "$match": { "name": { "$in": ["jazz", "rock"] } } },
            { "$group": { "_id": "$name", "n": { "$sum": 1 } } },
            { "$sort": { "n": -1 } },
        ],
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let counts: Vec<i32> = batch
        .iter()
        .map(|d| d.as_document().unwrap().get_i32("n").unwrap())
        .collect();
    assert_eq!(counts, vec![3, 1]);
}

#[tokio::test]
async fn updates_and_deletes_select_documents_under_their_collation() {
    let t = test_db().await;
    insert_names(&t.db, "c", &["ABC", "abc", "xyz"]).await;
    let updated = run(
        &t.db,
        doc! { "update": "c", "updates": [{
        "q": { "name": "Abc" }, "u": { "$set": { "seen": true } }, "multi": true,
        "collation": { "locale": "en", "strength": 2 } }] },
    )
    .await;
    assert_eq!(updated.get_i32("n").unwrap(), 2);
    let modified = run(
        &t.db,
        doc! { "findAndModify": "c", "query": { "name": "XYZ" }, "update": { "$set": { "seen": true } },
               "new": true, "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(
        modified.get_document("value").unwrap().get_str("name"),
        Ok("xyz")
    );
    let deleted = run(
        &t.db,
        doc! { "delete": "c", "deletes": [{
        "q": { "name": "aBc" }, "limit": 0, "collation": { "locale": "en", "strength": 2 } }] },
    )
    .await;
    assert_eq!(deleted.get_i32("n").unwrap(), 2);
}

#[tokio::test]
async fn a_unique_index_with_strength_two_refuses_strings_differing_only_in_case() {
    let t = test_db().await;
    run(
        &t.db,
        doc! { "createIndexes": "users", "indexes": [{
        "key": { "name": 1 }, "name": "name_1", "unique": true,
        "collation": { "locale": "en", "strength": 2 } }] },
    )
    .await;
    run(
        &t.db,
        doc! { "insert": "users", "documents": [{ "_id": 1, "name": "ABC" }] },
    )
    .await;
    let reply = run(
        &t.db,
        doc! { "insert": "users", "documents": [{ "_id": 2, "name": "abc" }] },
    )
    .await;
    let errors = reply.get_array("writeErrors").expect("a duplicate key");
    assert_eq!(
        errors[0].as_document().unwrap().get_i32("code").unwrap(),
        11000
    );
    // "abd" differs at the primary level and is accepted.
    let reply = run(
        &t.db,
        doc! { "insert": "users", "documents": [{ "_id": 3, "name": "abd" }] },
    )
    .await;
    assert!(reply.get_array("writeErrors").is_err());
}

#[tokio::test]
async fn list_indexes_shows_the_whole_resolved_collation() {
    let t = test_db().await;
    run(
        &t.db,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "name": 1 }, "name": "name_ci", "collation": { "locale": "en_US", "strength": 2 } },
            { "key": { "name": 1 }, "name": "name_simple", "collation": { "locale": "simple" } },
        ] },
    )
    .await;
    let reply = run(&t.db, doc! { "listIndexes": "c" }).await;
    let specs = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .clone();
    let collated = specs
        .iter()
        .map(|s| s.as_document().unwrap())
        .find(|s| s.get_str("name") == Ok("name_ci"))
        .unwrap();
    assert_eq!(
        collated.get_document("collation").unwrap(),
        &doc! {
            "locale": "en_US", "caseLevel": false, "caseFirst": "off", "strength": 2,
            "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
            "normalization": false, "backwards": false, "version": "57.1",
        }
    );
    let simple = specs
        .iter()
        .map(|s| s.as_document().unwrap())
        .find(|s| s.get_str("name") == Ok("name_simple"))
        .unwrap();
    assert!(!simple.contains_key("collation"));
}

#[tokio::test]
async fn a_collection_default_collation_is_inherited_by_commands_and_indexes() {
    let t = test_db().await;
    run(
        &t.db,
        doc! { "create": "people", "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    insert_names(&t.db, "people", &["Émile", "emile", "EMILE", "zoé"]).await;
    // Inherited by a find without its own collation...
    let found = ids(
        &t.db,
        doc! { "find": "people", "filter": { "name": "emile" } },
    )
    .await;
    assert_eq!(found.len(), 2);
    // ...and overridden by an explicit simple collation.
    let found = ids(
        &t.db,
        doc! { "find": "people", "filter": { "name": "emile" }, "collation": { "locale": "simple" } },
    )
    .await;
    assert_eq!(found, vec![Bson::Int32(1)]);
    // listCollections shows the resolved default.
    let reply = run(
        &t.db,
        doc! { "listCollections": 1, "filter": { "name": "people" } },
    )
    .await;
    let entry = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let options = entry.get_document("options").unwrap();
    assert_eq!(
        options
            .get_document("collation")
            .unwrap()
            .get_i32("strength"),
        Ok(2)
    );
    // An index created without a collation takes the collection's.
    run(
        &t.db,
        doc! { "createIndexes": "people", "indexes": [{ "key": { "name": 1 }, "name": "name_1" }] },
    )
    .await;
    let reply = run(&t.db, doc! { "listIndexes": "people" }).await;
    let specs = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    for spec in specs {
        let spec = spec.as_document().unwrap();
        assert_eq!(
            spec.get_document("collation").unwrap().get_str("locale"),
            Ok("en"),
            "{spec}"
        );
    }
    // A text index needs the simple collation named on such a collection.
    assert_code(
        t.db.run_command(doc! { "createIndexes": "people", "indexes": [{
        "key": { "name": "text" }, "name": "name_text" }] })
            .await,
        67,
    );
    run(
        &t.db,
        doc! { "createIndexes": "people", "indexes": [{
        "key": { "name": "text" }, "name": "name_text", "collation": { "locale": "simple" } }] },
    )
    .await;
}

#[tokio::test]
async fn an_index_serves_string_queries_and_sorts_only_of_its_own_collation() {
    let t = test_db().await;
    insert_names(&t.db, "c", &["b", "A", "a", "B", "c"]).await;
    run(
        &t.db,
        doc! { "createIndexes": "c", "indexes": [{
            "key": { "name": 1 }, "name": "name_ci", "collation": { "locale": "en", "strength": 2 } }] },
    )
    .await;
    let explain = |find: Document| async {
        Bson::Document(
            run(
                &t.db,
                doc! { "explain": find, "verbosity": "executionStats" },
            )
            .await,
        )
    };
    let same = explain(doc! { "find": "c", "filter": { "name": "a" },
    "collation": { "locale": "en", "strength": 2 } })
    .await;
    let scan = find_stage(&same, "IXSCAN").expect("the collated index");
    assert_eq!(scan.get_str("indexName"), Ok("name_ci"));
    let simple = explain(doc! { "find": "c", "filter": { "name": "a" } }).await;
    assert!(find_stage(&simple, "IXSCAN").is_none());
    assert!(find_stage(&simple, "COLLSCAN").is_some());
    let other = explain(doc! { "find": "c", "filter": { "name": "a" },
    "collation": { "locale": "en", "strength": 1 } })
    .await;
    assert!(find_stage(&other, "IXSCAN").is_none());
    // The index walks in collation order.
    let sorted = names(
        &t.db,
        doc! { "find": "c", "filter": { "name": { "$gte": "A" } }, "sort": { "name": 1, "_id": 1 },
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(sorted, strings(&["A", "a", "b", "B", "c"]));
    let found = ids(
        &t.db,
        doc! { "find": "c", "filter": { "name": "B" }, "sort": { "_id": 1 },
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    assert_eq!(found, vec![Bson::Int32(0), Bson::Int32(3)]);
}

#[tokio::test]
async fn invalid_collations_are_refused_as_mongod_refuses_them() {
    let t = test_db().await;
    let find = |collation: Document| doc! { "find": "c", "collation": collation };
    let e = assert_code(
        t.db.run_command(find(doc! { "locale": "xx_nowhere" }))
            .await,
        2,
    );
    assert!(
        message_of(&e).starts_with("Field 'locale' is invalid in:"),
        "{}",
        message_of(&e)
    );
    assert_code(
        t.db.run_command(find(doc! { "locale": "simple", "strength": 2 }))
            .await,
        9,
    );
    assert_code(
        t.db.run_command(find(doc! { "locale": "en", "strength": 6 }))
            .await,
        9,
    );
    assert_code(
        t.db.run_command(find(doc! { "locale": "en", "caseFirst": "sideways" }))
            .await,
        9,
    );
    assert_code(
        t.db.run_command(find(doc! { "locale": "en", "colour": "blue" }))
            .await,
        9,
    );
    assert_code(
        t.db.run_command(find(doc! { "locale": "en", "caseLevel": "yes" }))
            .await,
        14,
    );
    assert_code(t.db.run_command(find(doc! { "strength": 2 })).await, 9);
    assert_code(
        t.db.run_command(doc! { "create": "d", "collation": { "locale": "nope" } })
            .await,
        2,
    );
}

#[tokio::test]
async fn collations_survive_a_restart() {
    // Journal replay and snapshots are docstore's own; a real MongoDB is not restarted here.
    if !is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let server = docstore::Server::start(docstore::Config::persistent(dir.path()))
            .await
            .unwrap();
        let client = crate::common::client_for(&server.uri()).await;
        let db = client.database("d");
        if round == 0 {
            run(
                &db,
                doc! { "create": "people", "collation": { "locale": "de", "strength": 2 } },
            )
            .await;
            run(
                &db,
                doc! { "createIndexes": "people", "indexes": [{
                "key": { "name": 1 }, "name": "name_1", "unique": true }] },
            )
            .await;
            insert_names(&db, "people", &["Müller", "Zander"]).await;
        }
        let found = ids(
            &db,
            doc! { "find": "people", "filter": { "name": "MÜLLER" } },
        )
        .await;
        assert_eq!(found, vec![Bson::Int32(0)], "round {round}");
        let reply = run(
            &db,
            doc! { "insert": "people", "documents": [{ "_id": 9, "name": "müller" }] },
        )
        .await;
        assert!(reply.get_array("writeErrors").is_ok(), "round {round}");
        let reply = run(&db, doc! { "listIndexes": "people" }).await;
        let specs = reply
            .get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap();
        let name_index = specs
            .iter()
            .map(|s| s.as_document().unwrap())
            .find(|s| s.get_str("name") == Ok("name_1"))
            .unwrap();
        assert_eq!(
            name_index
                .get_document("collation")
                .unwrap()
                .get_str("locale"),
            Ok("de"),
            "round {round}"
        );
        let explain = Bson::Document(
            run(
                &db,
                doc! { "explain": { "find": "people", "filter": { "name": "zander" } } },
            )
            .await,
        );
        assert!(find_stage(&explain, "IXSCAN").is_some(), "round {round}");
        drop(client);
        server.shutdown().await;
    }
}

#[tokio::test]
async fn the_id_index_of_a_collection_with_a_default_collation_compares_ids_under_it() {
    let t = test_db().await;
    run(
        &t.db,
        doc! { "create": "tags", "collation": { "locale": "en", "strength": 2 } },
    )
    .await;
    run(
        &t.db,
        doc! { "insert": "tags", "documents": [{ "_id": "Jazz" }] },
    )
    .await;
    let reply = run(
        &t.db,
        doc! { "insert": "tags", "documents": [{ "_id": "jazz" }] },
    )
    .await;
    let errors = reply.get_array("writeErrors").expect("a duplicate _id");
    assert_eq!(
        errors[0].as_document().unwrap().get_i32("code").unwrap(),
        11000
    );
    let reply = run(
        &t.db,
        doc! { "listCollections": 1, "filter": { "name": "tags" } },
    )
    .await;
    let entry = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(
        entry
            .get_document("idIndex")
            .unwrap()
            .get_document("collation")
            .unwrap()
            .get_i32("strength"),
        Ok(2)
    );
}
