//! Schema validation: `create`/`collMod` validators (query expressions, `$expr`, `$jsonSchema`),
//! `validationLevel`, `validationAction`, `bypassDocumentValidation`, the `$jsonSchema` query
//! operator, and `validate`'s count of documents that fail the validator.

use crate::common::{assert_code, client_for, is_docstore, test_db};
use bson::{doc, Bson, Document};
use docstore::{Config, Server};
use futures::TryStreamExt;
use mongodb::Database;

/// The product schema the tests validate against.
fn product_schema() -> Document {
    doc! {
        "$jsonSchema": {
            "bsonType": "object",
            "required": ["name", "price"],
            "properties": {
                "name": { "bsonType": "string", "description": "must be a string" },
                "price": { "bsonType": ["int", "double"], "minimum": 0 },
            },
        }
    }
}

async fn run(db: &Database, cmd: Document) -> Document {
    db.run_command(cmd).await.unwrap()
}

/// The `writeErrors` of a write command's reply (empty when it has none).
fn write_errors(reply: &Document) -> Vec<Document> {
    reply
        .get_array("writeErrors")
        .map(|errors| {
            errors
                .iter()
                .filter_map(|e| e.as_document().cloned())
                .collect()
        })
        .unwrap_or_default()
}

async fn ids(db: &Database, coll: &str, filter: Document) -> Vec<i32> {
    let mut ids: Vec<i32> = db
        .collection::<Document>(coll)
        .find(filter)
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .filter_map(|d| d.get_i32("_id").ok())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn an_insert_failing_a_json_schema_validator_answers_121_with_the_rules_not_satisfied() {
    let t = test_db().await;
    run(
        &t.db,
        doc! { "create": "products", "validator": product_schema() },
    )
    .await;
    let reply = run(
        &t.db,
        doc! { "insert": "products", "documents": [
            { "_id": 1, "name": "lamp", "price": 12 },
            { "_id": 2, "name": "chair", "price": -3 },
            { "_id": 3, "name": 7 },
        ], "ordered": false },
    )
    .await;
    assert_eq!(reply.get_i32("n").unwrap(), 1);
    let errors = write_errors(&reply);
    assert_eq!(errors.len(), 2, "{reply}");
    assert_eq!(errors[0].get_i32("code").unwrap(), 121);
    assert_eq!(
        errors[0].get_str("errmsg").unwrap(),
        "Document failed validation"
    );
    let info = errors[0].get_document("errInfo").unwrap();
    assert_eq!(info.get_i32("failingDocumentId").unwrap(), 2);
    let details = info.get_document("details").unwrap();
    assert_eq!(details.get_str("operatorName").unwrap(), "$jsonSchema");
    let rules = details.get_array("schemaRulesNotSatisfied").unwrap();
    let properties = rules[0].as_document().unwrap();
    assert_eq!(properties.get_str("operatorName").unwrap(), "properties");
    let failing = properties.get_array("propertiesNotSatisfied").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(failing.get_str("propertyName").unwrap(), "price");
    let why = failing.get_array("details").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(why.get_str("operatorName").unwrap(), "minimum");
    assert_eq!(why.get_str("reason").unwrap(), "comparison failed");

    // The third document lacks `price` and has a name that is not a string: two rules.
    let info = errors[1].get_document("errInfo").unwrap();
    let rules = info
        .get_document("details")
        .unwrap()
        .get_array("schemaRulesNotSatisfied")
        .unwrap();
    let names: Vec<&str> = rules
        .iter()
        .map(|r| r.as_document().unwrap().get_str("operatorName").unwrap())
        .collect();
    assert!(
        names.contains(&"required") && names.contains(&"properties"),
        "{names:?}"
    );
    let required = rules
        .iter()
        .map(|r| r.as_document().unwrap())
        .find(|r| r.get_str("operatorName") == Ok("required"))
        .unwrap();
    assert_eq!(
        required.get_array("missingProperties").unwrap(),
        &vec![Bson::String("price".into())]
    );
    assert_eq!(ids(&t.db, "products", doc! {}).await, vec![1]);
}

#[tokio::test]
async fn query_validators_including_expr_check_inserts_and_updates() {
    let t = test_db().await;
    run(
        &t.db,
        doc! { "create": "ranges", "validator": {
            "low": { "$type": "number" },
            "$expr": { "$lt": ["$low", "$high"] },
        } },
    )
    .await;
    let ok = run(
        &t.db,
        doc! { "insert": "ranges", "documents": [{ "_id": 1, "low": 1, "high": 5 }] },
    )
    .await;
    assert!(write_errors(&ok).is_empty());
    let bad = run(
        &t.db,
        doc! { "insert": "ranges", "documents": [{ "_id": 2, "low": 9, "high": 5 }] },
    )
    .await;
    let errors = write_errors(&bad);
    assert_eq!(errors[0].get_i32("code").unwrap(), 121);
    let details = errors[0]
        .get_document("errInfo")
        .unwrap()
        .get_document("details")
        .unwrap();
    assert_eq!(details.get_str("operatorName").unwrap(), "$and");
    let update = run(
        &t.db,
        doc! { "update": "ranges", "updates": [{ "q": { "_id": 1 }, "u": { "$set": { "low": 7 } } }] },
    )
    .await;
    assert_eq!(write_errors(&update)[0].get_i32("code").unwrap(), 121);
    assert_eq!(update.get_i32("nModified").unwrap(), 0);
    // findAndModify answers the failure as a command error.
    assert_code(
        t.db.run_command(doc! { "findAndModify": "ranges", "query": { "_id": 1 }, "update": { "$set": { "high": 0 } } })
            .await,
        121,
    );
    // An upsert's new document is checked like an insert.
    let upsert = run(
        &t.db,
        doc! { "update": "ranges", "updates": [{ "q": { "_id": 3 }, "u": { "$set": { "low": "a" } }, "upsert": true }] },
    )
    .await;
    assert_eq!(write_errors(&upsert)[0].get_i32("code").unwrap(), 121);
    assert_eq!(ids(&t.db, "ranges", doc! {}).await, vec![1]);
}

#[tokio::test]
async fn json_schema_keywords_select_documents_as_a_query_operator() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("things");
    c.insert_many(vec![
        doc! { "_id": 1, "kind": "a", "code": "AB-12", "tags": ["x", "y"], "n": 5 },
        doc! { "_id": 2, "kind": "z", "code": "AB-12", "tags": ["x"], "n": 5 },
        doc! { "_id": 3, "kind": "a", "code": "ab", "tags": ["x", "x"], "n": 5 },
        doc! { "_id": 4, "kind": "a", "code": "AB-12", "tags": [], "n": 10 },
        doc! { "_id": 5, "kind": "a", "code": "AB-12", "tags": ["x"], "n": 5, "extra": true },
        doc! { "_id": 6, "kind": "a", "code": "AB-12", "tags": ["x"], "n": 5, "card": 1 },
    ])
    .await
    .unwrap();
    let schema = |s: Document| doc! { "$jsonSchema": s };
    let cases: Vec<(Document, Vec<i32>)> = vec![
        (
            doc! { "properties": { "kind": { "enum": ["a", "b"] } } },
            vec![1, 3, 4, 5, 6],
        ),
        (
            doc! { "properties": { "code": { "pattern": "^[A-Z]+-[0-9]+$", "minLength": 3, "maxLength": 5 } } },
            vec![1, 2, 4, 5, 6],
        ),
        (
            doc! { "properties": { "tags": { "minItems": 1, "maxItems": 2, "uniqueItems": true, "items": { "bsonType": "string" } } } },
            vec![1, 2, 5, 6],
        ),
        (
            doc! { "properties": { "n": { "minimum": 5, "exclusiveMinimum": true } } },
            vec![4],
        ),
        (
            doc! { "properties": { "n": { "maximum": 5 } } },
            vec![1, 2, 3, 5, 6],
        ),
        (
            doc! { "properties": { "n": { "multipleOf": 10 } } },
            vec![4],
        ),
        (doc! { "minProperties": 6 }, vec![5, 6]),
        (doc! { "maxProperties": 5 }, vec![1, 2, 3, 4]),
        (
            doc! { "properties": { "_id": {}, "kind": {}, "code": {}, "tags": {}, "n": {} }, "additionalProperties": false },
            vec![1, 2, 3, 4],
        ),
        (
            doc! { "patternProperties": { "^ca": { "bsonType": "string" } } },
            vec![1, 2, 3, 4, 5],
        ),
        (
            doc! { "dependencies": { "card": ["extra"] } },
            vec![1, 2, 3, 4, 5],
        ),
        (doc! { "required": ["extra"] }, vec![5]),
        (
            doc! { "allOf": [{ "properties": { "kind": { "enum": ["a"] } } }, { "required": ["card"] }] },
            vec![6],
        ),
        (
            doc! { "anyOf": [{ "required": ["card"] }, { "required": ["extra"] }] },
            vec![5, 6],
        ),
        (
            doc! { "oneOf": [{ "properties": { "n": { "minimum": 6 } } }, { "properties": { "kind": { "enum": ["z"] } } }] },
            vec![2, 4],
        ),
        (
            doc! { "not": { "required": ["extra"] } },
            vec![1, 2, 3, 4, 6],
        ),
        (
            doc! { "properties": { "kind": { "type": "string" }, "n": { "type": "number" } }, "description": "d", "title": "t" },
            vec![1, 2, 3, 4, 5, 6],
        ),
    ];
    for (s, expected) in cases {
        assert_eq!(
            ids(&t.db, "things", schema(s.clone())).await,
            expected,
            "{s}"
        );
    }
    // $jsonSchema combines with other conditions.
    let combined = doc! { "$jsonSchema": { "required": ["card"] }, "n": 5 };
    assert_eq!(ids(&t.db, "things", combined).await, vec![6]);
}

#[tokio::test]
async fn malformed_schemas_and_validation_options_are_refused() {
    let t = test_db().await;
    // Unknown keywords: FailedToParse.
    assert_code(
        t.db.run_command(doc! { "find": "c", "filter": { "$jsonSchema": { "bogus": 1 } } })
            .await,
        9,
    );
    assert_code(
        t.db.run_command(
            doc! { "create": "c", "validator": { "$jsonSchema": { "minimum": "x" } } },
        )
        .await,
        14,
    );
    assert_code(
        t.db.run_command(
            doc! { "create": "c", "validator": { "a": 1 }, "validationLevel": "sometimes" },
        )
        .await,
        2,
    );
    assert_code(
        t.db.run_command(
            doc! { "create": "c", "validator": { "a": 1 }, "validationAction": "shout" },
        )
        .await,
        2,
    );
    assert_code(
        t.db.run_command(doc! { "collMod": "missing", "validator": { "a": 1 } })
            .await,
        26,
    );
}

#[tokio::test]
async fn moderate_validation_lets_documents_already_invalid_be_updated() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("people");
    c.insert_many(vec![
        doc! { "_id": 1, "age": 30 },
        doc! { "_id": 2, "age": -4 },
    ])
    .await
    .unwrap();
    run(
        &t.db,
        doc! { "collMod": "people", "validator": { "age": { "$gte": 0 } }, "validationLevel": "moderate" },
    )
    .await;
    // The invalid document may change and stay invalid; the valid one may not become invalid.
    let r = run(&t.db, doc! { "update": "people", "updates": [{ "q": { "_id": 2 }, "u": { "$set": { "age": -5 } } }] }).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = run(&t.db, doc! { "update": "people", "updates": [{ "q": { "_id": 1 }, "u": { "$set": { "age": -1 } } }] }).await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
    // Inserts are always checked.
    let r = run(
        &t.db,
        doc! { "insert": "people", "documents": [{ "_id": 3, "age": -1 }] },
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
    // Level off checks nothing.
    run(
        &t.db,
        doc! { "collMod": "people", "validationLevel": "off" },
    )
    .await;
    let r = run(
        &t.db,
        doc! { "insert": "people", "documents": [{ "_id": 3, "age": -1 }] },
    )
    .await;
    assert!(write_errors(&r).is_empty(), "{r}");
}

#[tokio::test]
async fn validation_action_warn_stores_invalid_documents() {
    let t = test_db().await;
    run(
        &t.db,
        doc! { "create": "w", "validator": { "a": { "$exists": true } }, "validationAction": "warn" },
    )
    .await;
    let r = run(&t.db, doc! { "insert": "w", "documents": [{ "_id": 1 }] }).await;
    assert!(write_errors(&r).is_empty(), "{r}");
    assert_eq!(ids(&t.db, "w", doc! {}).await, vec![1]);
}

#[tokio::test]
async fn bypass_document_validation_skips_the_validator_for_every_write() {
    let t = test_db().await;
    run(
        &t.db,
        doc! { "create": "strict", "validator": { "ok": true } },
    )
    .await;
    let r = run(
        &t.db,
        doc! { "insert": "strict", "documents": [{ "_id": 1, "ok": false }], "bypassDocumentValidation": true },
    )
    .await;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = run(
        &t.db,
        doc! { "update": "strict", "updates": [{ "q": { "_id": 1 }, "u": { "$set": { "n": 1 } } }], "bypassDocumentValidation": true },
    )
    .await;
    assert_eq!(r.get_i32("nModified").unwrap(), 1, "{r}");
    run(
        &t.db,
        doc! { "findAndModify": "strict", "query": { "_id": 1 }, "update": { "$set": { "n": 2 } }, "bypassDocumentValidation": true },
    )
    .await;
    // $out and $merge into a validated collection: refused, unless bypassed.
    t.db.collection::<Document>("src")
        .insert_many(vec![doc! { "_id": 5, "ok": false }])
        .await
        .unwrap();
    for stage in [
        doc! { "$merge": { "into": "strict" } },
        doc! { "$out": "strict" },
    ] {
        let pipeline = vec![Bson::Document(stage.clone())];
        assert_code(
            t.db.run_command(
                doc! { "aggregate": "src", "pipeline": pipeline.clone(), "cursor": {} },
            )
            .await,
            121,
        );
        run(
            &t.db,
            doc! { "aggregate": "src", "pipeline": pipeline, "cursor": {}, "bypassDocumentValidation": true },
        )
        .await;
    }
    assert_eq!(ids(&t.db, "strict", doc! {}).await, vec![5]);
}

#[tokio::test]
async fn list_collections_shows_the_validator_with_its_level_and_action() {
    let t = test_db().await;
    run(&t.db, doc! { "create": "v", "validator": { "a": 1 } }).await;
    let options = collection_options(&t.db, "v").await;
    assert_eq!(
        options,
        doc! { "validator": { "a": 1 }, "validationLevel": "strict", "validationAction": "error" }
    );
    run(
        &t.db,
        doc! { "collMod": "v", "validator": { "b": 2 }, "validationAction": "warn" },
    )
    .await;
    let options = collection_options(&t.db, "v").await;
    assert_eq!(
        options,
        doc! { "validator": { "b": 2 }, "validationLevel": "strict", "validationAction": "warn" }
    );
}

async fn collection_options(db: &Database, name: &str) -> Document {
    let reply = run(
        db,
        doc! { "listCollections": 1, "filter": { "name": name } },
    )
    .await;
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    batch[0]
        .as_document()
        .unwrap()
        .get_document("options")
        .unwrap()
        .clone()
}

#[tokio::test]
async fn validate_counts_the_documents_that_fail_the_validator() {
    let t = test_db().await;
    t.db.collection::<Document>("n")
        .insert_many(vec![
            doc! { "_id": 1, "a": 1 },
            doc! { "_id": 2 },
            doc! { "_id": 3 },
        ])
        .await
        .unwrap();
    run(
        &t.db,
        doc! { "collMod": "n", "validator": { "a": { "$exists": true } } },
    )
    .await;
    let report = run(&t.db, doc! { "validate": "n" }).await;
    assert_eq!(report.get_i64("nNonCompliantDocuments").unwrap(), 2);
    assert!(report.get_bool("valid").unwrap());
    assert!(!report.get_array("warnings").unwrap().is_empty());
}

#[tokio::test]
async fn a_validator_survives_a_restart() {
    if !is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Config::persistent(dir.path())).await.unwrap();
    let db = client_for(&server.uri()).await.database("shop");
    run(
        &db,
        doc! { "create": "items", "validator": product_schema() },
    )
    .await;
    run(&db, doc! { "create": "later" }).await;
    run(
        &db,
        doc! { "collMod": "later", "validator": { "x": 1 }, "validationLevel": "moderate" },
    )
    .await;
    server.shutdown().await;

    let server = Server::start(Config::persistent(dir.path())).await.unwrap();
    let db = client_for(&server.uri()).await.database("shop");
    let r = run(
        &db,
        doc! { "insert": "items", "documents": [{ "_id": 1, "name": "x" }] },
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
    let r = run(
        &db,
        doc! { "insert": "later", "documents": [{ "_id": 1, "x": 2 }] },
    )
    .await;
    assert_eq!(write_errors(&r)[0].get_i32("code").unwrap(), 121);
    assert_eq!(
        collection_options(&db, "later").await,
        doc! { "validator": { "x": 1 }, "validationLevel": "moderate", "validationAction": "error" }
    );
    server.shutdown().await;
}
