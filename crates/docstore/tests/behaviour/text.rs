//! Text indexes and `$text`, as MongoDB 7.0 documents them: the normalised index definition,
//! English stemming and stop words, phrases and negation, weights, the text score (values
//! computed by hand from MongoDB's formula), compound text indexes, `language_override`, the
//! misuse errors, aggregation and `explain`.

use crate::common::{assert_code, find_stage, is_docstore, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

async fn text_index(c: &Collection<Document>, keys: Document, options: Option<Document>) {
    let mut spec = doc! { "key": keys.clone(), "name": "search" };
    if let Some(options) = options {
        spec.extend(options);
    }
    c.client()
        .database(&c.namespace().db)
        .run_command(doc! { "createIndexes": c.name(), "indexes": [spec] })
        .await
        .unwrap();
}

async fn search(c: &Collection<Document>, text: &str) -> Vec<i32> {
    ids(c, doc! { "$text": { "$search": text } }).await
}

async fn ids(c: &Collection<Document>, filter: Document) -> Vec<i32> {
    let mut found: Vec<i32> = c
        .find(filter)
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    found.sort();
    found
}

/// `(_id, score)` pairs, best first.
async fn scored(c: &Collection<Document>, text: &str) -> Vec<(i32, f64)> {
    c.find(doc! { "$text": { "$search": text } })
        .projection(doc! { "score": { "$meta": "textScore" } })
        .sort(doc! { "score": { "$meta": "textScore" }, "_id": 1 })
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|d| (d.get_i32("_id").unwrap(), d.get_f64("score").unwrap()))
        .collect()
}

async fn lines(db: &Database) -> Collection<Document> {
    let c = db.collection::<Document>("lines");
    c.insert_many([
        doc! { "_id": 1, "text": "I love this record" },
        doc! { "_id": 2, "text": "She loves jazz" },
        doc! { "_id": 3, "text": "Loving the blue sky" },
        doc! { "_id": 4, "text": "The sky is grey" },
        doc! { "_id": 5, "text": "Hate mail", "n": 1 },
    ])
    .await
    .unwrap();
    text_index(&c, doc! { "text": "text" }, None).await;
    c
}

#[tokio::test]
async fn list_indexes_shows_the_normalised_text_index() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    text_index(
        &c,
        doc! { "title": "text", "body": "text" },
        Some(doc! { "weights": { "title": 10 } }),
    )
    .await;
    let specs: Vec<Document> = c
        .list_indexes()
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .map(|m| bson::to_document(&m).unwrap())
        .collect();
    let raw = t.db.run_command(doc! { "listIndexes": "c" }).await.unwrap();
    let batch = raw
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let spec = batch
        .iter()
        .filter_map(Bson::as_document)
        .find(|d| d.get_str("name") == Ok("search"))
        .expect("the text index is listed");
    assert_eq!(
        spec.get_document("key").unwrap(),
        &doc! { "_fts": "text", "_ftsx": 1 }
    );
    let weights = spec.get_document("weights").unwrap();
    assert_eq!(weights.get("title").and_then(Bson::as_i32), Some(10));
    assert_eq!(weights.get("body").and_then(Bson::as_i32), Some(1));
    assert_eq!(spec.get_str("default_language"), Ok("english"));
    assert_eq!(spec.get_str("language_override"), Ok("language"));
    assert_eq!(spec.get_i32("textIndexVersion"), Ok(3));
    assert_eq!(specs.len(), 2);
}

#[tokio::test]
async fn stemming_finds_other_forms_of_a_word() {
    let t = test_db().await;
    let c = lines(&t.db).await;
    assert_eq!(search(&c, "loves").await, vec![1, 2, 3]);
    assert_eq!(search(&c, "LOVED").await, vec![1, 2, 3]);
    assert_eq!(search(&c, "records").await, vec![1]);
    assert_eq!(search(&c, "skies").await, vec![3, 4]);
    assert_eq!(search(&c, "nothing").await, Vec::<i32>::new());
}

#[tokio::test]
async fn stop_words_are_not_searched() {
    let t = test_db().await;
    let c = lines(&t.db).await;
    assert_eq!(search(&c, "the").await, Vec::<i32>::new());
    assert_eq!(search(&c, "the is this").await, Vec::<i32>::new());
    assert_eq!(search(&c, "the jazz").await, vec![2]);
}

#[tokio::test]
async fn terms_are_or_phrases_are_and_and_minus_negates() {
    let t = test_db().await;
    let c = lines(&t.db).await;
    assert_eq!(search(&c, "jazz hate").await, vec![2, 5]);
    assert_eq!(search(&c, "\"blue sky\"").await, vec![3]);
    assert_eq!(search(&c, "sky \"is grey\"").await, vec![4]);
    assert_eq!(search(&c, "sky -grey").await, vec![3]);
    assert_eq!(search(&c, "love -\"blue sky\"").await, vec![1, 2]);
    // Only negations select nothing.
    assert_eq!(search(&c, "-sky").await, Vec::<i32>::new());
    // A hyphen inside a word is not a negation.
    assert_eq!(search(&c, "hate-jazz").await, vec![2, 5]);
    // $text combines with other conditions.
    assert_eq!(
        ids(&c, doc! { "$text": { "$search": "hate jazz" }, "n": 1 }).await,
        vec![5]
    );
}

/// `(_id, score)` pairs of a sorted, limited and skipped search, best first.
async fn scored_page(
    c: &Collection<Document>,
    filter: Document,
    skip: u64,
    limit: i64,
) -> Vec<(i32, f64)> {
    c.find(filter)
        .projection(doc! { "score": { "$meta": "textScore" } })
        .sort(doc! { "score": { "$meta": "textScore" }, "_id": 1 })
        .skip(skip)
        .limit(limit)
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|d| (d.get_i32("_id").unwrap(), d.get_f64("score").unwrap()))
        .collect()
}

#[tokio::test]
async fn limited_pages_of_a_score_sorted_search_are_slices_of_the_whole_ranking() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    // Many equal scores (ties ordered by `_id`), negations, phrases and a second condition,
    // so a page cut at any point must still be the whole ranking's slice.
    let docs: Vec<Document> = (0..60)
        .map(|i| {
            let mut text = vec!["jazz"; 1 + (i % 3) as usize].join(" ");
            if i % 4 == 0 {
                text.push_str(" kind of blue");
            }
            if i % 5 == 0 {
                text.push_str(" blue");
            }
            if i % 7 == 0 {
                text.push_str(" unkind of bluest");
            }
            doc! { "_id": i, "text": text, "n": i % 2 }
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    text_index(&c, doc! { "text": "text" }, None).await;
    for search in [
        "jazz",
        "jazz -blue",
        "\"kind of blue\"",
        "jazz -\"kind of blue\"",
        "bluest",
    ] {
        for filter in [
            doc! { "$text": { "$search": search } },
            doc! { "$text": { "$search": search }, "n": 1 },
        ] {
            let all = scored_page(&c, filter.clone(), 0, 0).await;
            for (skip, limit) in [(0, 1), (0, 5), (3, 4), (10, 10), (0, 100)] {
                let page = scored_page(&c, filter.clone(), skip, limit).await;
                let expected: Vec<(i32, f64)> = all
                    .iter()
                    .skip(skip as usize)
                    .take(limit as usize)
                    .copied()
                    .collect();
                assert_eq!(
                    page, expected,
                    "{search} {filter} skip {skip} limit {limit}"
                );
            }
        }
    }
    // A phrase is a substring of one indexed string (case-insensitively), as in mongod: "kind
    // of blue" is in "unkind of bluest", but that document holds neither term, so it is found
    // only by a search that also has one of its own terms (or with a plain "blue" beside it).
    let phrase = scored_page(
        &c,
        doc! { "$text": { "$search": "\"kind of blue\"" } },
        0,
        0,
    )
    .await;
    let mut ids: Vec<i32> = phrase.iter().map(|(id, _)| *id).collect();
    ids.sort();
    let expected: Vec<i32> = (0..60)
        .filter(|i| i % 4 == 0 || (i % 7 == 0 && i % 5 == 0))
        .collect();
    assert_eq!(ids, expected);
    let with_term = scored_page(
        &c,
        doc! { "$text": { "$search": "bluest \"kind of blue\"" } },
        0,
        0,
    )
    .await;
    assert!(with_term.iter().any(|(id, _)| id % 7 == 0 && id % 4 != 0));
}

#[tokio::test]
async fn case_and_diacritic_sensitivity_are_options() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many([
        doc! { "_id": 1, "s": "Café Jazz" },
        doc! { "_id": 2, "s": "cafe jazz" },
    ])
    .await
    .unwrap();
    text_index(&c, doc! { "s": "text" }, None).await;
    assert_eq!(search(&c, "CAFE").await, vec![1, 2]);
    let sensitive = |extra: Document| {
        let mut text = doc! { "$search": "Café" };
        text.extend(extra);
        doc! { "$text": text }
    };
    assert_eq!(
        ids(&c, sensitive(doc! { "$diacriticSensitive": true })).await,
        vec![1]
    );
    assert_eq!(
        ids(&c, sensitive(doc! { "$caseSensitive": true })).await,
        vec![1]
    );
}

#[tokio::test]
async fn scores_follow_mongodbs_formula() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many([
        doc! { "_id": 1, "title": "Blue Moon", "body": "blue blue sky" },
        doc! { "_id": 2, "title": "Sky", "body": "Blue" },
    ])
    .await
    .unwrap();
    text_index(
        &c,
        doc! { "title": "text", "body": "text" },
        Some(doc! { "weights": { "title": 3 } }),
    )
    .await;
    // Per field: weight × freq × (0.5 × count / terms + 0.5), × 1.1 when the field is exactly
    // the term; freq is 1 + 1/2 + … over the repeats.
    // _id 1, "blue": title 3 × 1 × 0.75 = 2.25; body 1 × 1.5 × (0.5 × 2/3 + 0.5) = 1.25.
    // _id 2, "blue": body 1 × 1 × 1 × 1.1 = 1.1.
    let blue = scored(&c, "blue").await;
    assert_eq!(
        blue.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert!((blue[0].1 - 3.5).abs() < 1e-9, "{blue:?}");
    assert!((blue[1].1 - 1.1).abs() < 1e-9, "{blue:?}");
    // "blue sky": _id 1 adds sky in body, 1 × 1 × (0.5 × 1/3 + 0.5); _id 2 adds the title
    // "Sky", 3 × 1 × 1 × 1.1 = 3.3, and now ranks first.
    let both = scored(&c, "blue sky").await;
    assert_eq!(
        both.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![2, 1]
    );
    assert!((both[0].1 - 4.4).abs() < 1e-9, "{both:?}");
    assert!(
        (both[1].1 - (3.5 + 0.5 / 3.0 + 0.5)).abs() < 1e-9,
        "{both:?}"
    );
}

#[tokio::test]
async fn weights_change_the_order() {
    let t = test_db().await;
    let docs = [
        doc! { "_id": 1, "title": "jazz", "body": "rock and roll" },
        doc! { "_id": 2, "title": "rock", "body": "jazz and blues" },
    ];
    for (name, weights, first) in [
        ("by_title", doc! { "title": 10 }, 1),
        ("by_body", doc! { "body": 10 }, 2),
    ] {
        let c = t.db.collection::<Document>(name);
        c.insert_many(docs.clone()).await.unwrap();
        text_index(
            &c,
            doc! { "title": "text", "body": "text" },
            Some(doc! { "weights": weights }),
        )
        .await;
        let ranked = scored(&c, "jazz").await;
        assert_eq!(ranked.len(), 2);
        assert_eq!(ranked[0].0, first, "{name}: {ranked:?}");
    }
}

#[tokio::test]
async fn compound_text_index_needs_equality_on_its_prefix() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many([
        doc! { "_id": 1, "shop": "a", "s": "blue guitar" },
        doc! { "_id": 2, "shop": "b", "s": "blue piano" },
        doc! { "_id": 3, "shop": "a", "s": "red piano" },
    ])
    .await
    .unwrap();
    text_index(&c, doc! { "shop": 1, "s": "text" }, None).await;
    assert_eq!(
        ids(
            &c,
            doc! { "shop": "a", "$text": { "$search": "blue piano" } }
        )
        .await,
        vec![1, 3]
    );
    assert_eq!(
        ids(
            &c,
            doc! { "shop": { "$eq": "b" }, "$text": { "$search": "blue" } }
        )
        .await,
        vec![2]
    );
    let e = assert_code(c.find(doc! { "$text": { "$search": "blue" } }).await, 291);
    assert!(e.to_string().contains("prefix"), "{e}");
    assert_code(
        c.find(doc! { "shop": { "$gt": "a" }, "$text": { "$search": "blue" } })
            .await,
        291,
    );
}

#[tokio::test]
async fn language_override_and_default_language_choose_the_stemmer() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many([
        doc! { "_id": 1, "s": "las canciones", "idioma": "spanish" },
        doc! { "_id": 2, "s": "the songs" },
        doc! { "_id": 3, "s": "the songs", "idioma": "none" },
    ])
    .await
    .unwrap();
    text_index(
        &c,
        doc! { "s": "text" },
        Some(doc! { "language_override": "idioma" }),
    )
    .await;
    // Spanish stemming: "cancion" finds "canciones".
    assert_eq!(
        ids(
            &c,
            doc! { "$text": { "$search": "cancion", "$language": "es" } }
        )
        .await,
        vec![1]
    );
    // English stems "songs"; the "none" document keeps its words (and its stop words) as is.
    assert_eq!(search(&c, "song").await, vec![2]);
    assert_eq!(
        ids(
            &c,
            doc! { "$text": { "$search": "the", "$language": "none" } }
        )
        .await,
        vec![3]
    );
    let e = assert_code(
        c.insert_one(doc! { "_id": 4, "s": "x", "idioma": 5 }).await,
        17261,
    );
    drop(e);
    assert_code(
        c.insert_one(doc! { "_id": 5, "s": "x", "idioma": "klingon" })
            .await,
        17262,
    );
}

#[tokio::test]
async fn the_index_follows_updates_and_deletes() {
    let t = test_db().await;
    let c = lines(&t.db).await;
    c.update_one(
        doc! { "_id": 2 },
        doc! { "$set": { "text": "She hates rock" } },
    )
    .await
    .unwrap();
    assert_eq!(search(&c, "jazz").await, Vec::<i32>::new());
    assert_eq!(search(&c, "hate").await, vec![2, 5]);
    c.delete_one(doc! { "_id": 5 }).await.unwrap();
    assert_eq!(search(&c, "hate").await, vec![2]);
    c.insert_one(doc! { "_id": 6, "text": ["hateful", { "nested": "no" }] })
        .await
        .unwrap();
    assert_eq!(search(&c, "hate").await, vec![2, 6]);
    // Wildcard text indexes cover every string field.
    let w = t.db.collection::<Document>("wild");
    w.insert_many([
        doc! { "_id": 1, "a": "blue", "b": { "c": "red" } },
        doc! { "_id": 2, "z": ["red"] },
    ])
    .await
    .unwrap();
    text_index(&w, doc! { "$**": "text" }, None).await;
    assert_eq!(search(&w, "red").await, vec![1, 2]);
}

#[tokio::test]
async fn misuse_gets_mongodbs_errors() {
    let t = test_db().await;
    let plain = t.db.collection::<Document>("plain");
    plain.insert_one(doc! { "_id": 1, "s": "x" }).await.unwrap();
    let e = assert_code(plain.find(doc! { "$text": { "$search": "x" } }).await, 27);
    assert!(
        e.to_string()
            .contains("text index required for $text query"),
        "{e}"
    );

    let c = lines(&t.db).await;
    let text = doc! { "$search": "love" };
    assert_code(
        c.find(doc! { "$and": [{ "$text": text.clone() }, { "$text": text.clone() }] })
            .await,
        2,
    );
    assert_code(
        c.find(doc! { "$nor": [{ "$text": text.clone() }] }).await,
        2,
    );
    assert!(c
        .find(doc! { "a": { "$elemMatch": { "$text": text.clone() } } })
        .await
        .is_err());
    // $or with $text needs every other branch indexed.
    assert_code(
        c.find(doc! { "$or": [{ "$text": text.clone() }, { "n": 1 }] })
            .await,
        291,
    );
    c.create_index(IndexModel::builder().keys(doc! { "n": 1 }).build())
        .await
        .unwrap();
    assert_eq!(
        ids(&c, doc! { "$or": [{ "$text": text.clone() }, { "n": 1 }] }).await,
        vec![1, 2, 3, 5]
    );
    // The score exists only with $text.
    assert_code(
        c.find(doc! {})
            .projection(doc! { "score": { "$meta": "textScore" } })
            .await,
        40218,
    );
    assert_code(
        c.find(doc! {})
            .sort(doc! { "score": { "$meta": "textScore" } })
            .await,
        40218,
    );
    // Bad $text arguments.
    assert_code(c.find(doc! { "$text": { "$search": 1 } }).await, 14);
    assert_code(
        c.find(doc! { "$text": { "$search": "x", "$bogus": 1 } })
            .await,
        2,
    );
    // One text index per collection.
    let again = c
        .create_index(
            IndexModel::builder()
                .keys(doc! { "other": "text" })
                .options(IndexOptions::builder().name("other".to_string()).build())
                .build(),
        )
        .await;
    assert_code(again, 85);
    // A text index on an ordinary field: fine together with the text index.
    c.create_index(IndexModel::builder().keys(doc! { "text": 1 }).build())
        .await
        .unwrap();
}

#[tokio::test]
async fn aggregation_reads_the_score_after_a_leading_text_match() {
    let t = test_db().await;
    let c = lines(&t.db).await;
    let out: Vec<Document> = c
        .aggregate([
            doc! { "$match": { "$text": { "$search": "sky blue" } } },
            doc! { "$project": { "text": 1 } },
            doc! { "$addFields": { "score": { "$meta": "textScore" } } },
            doc! { "$sort": { "score": { "$meta": "textScore" } } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ids: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![3, 4]);
    assert!(out[0].get_f64("score").unwrap() > out[1].get_f64("score").unwrap());
    assert_eq!(
        out[1].keys().collect::<Vec<_>>(),
        vec!["_id", "text", "score"]
    );
    assert_code(
        c.aggregate([
            doc! { "$match": { "n": 1 } },
            doc! { "$match": { "$text": { "$search": "sky" } } },
        ])
        .await,
        17313,
    );
    assert_code(
        c.aggregate([doc! { "$project": { "s": { "$meta": "textScore" } } }])
            .await,
        40218,
    );
    let counted: Vec<Document> = c
        .aggregate([
            doc! { "$match": { "$text": { "$search": "love" } } },
            doc! { "$group": { "_id": null, "docs": { "$push": "$$ROOT" } } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let docs = counted[0].get_array("docs").unwrap();
    assert_eq!(docs.len(), 3);
    // The score is metadata, never a stored field.
    for d in docs {
        assert_eq!(d.as_document().unwrap().len(), 2);
    }
}

#[tokio::test]
async fn explain_shows_the_text_stages() {
    let t = test_db().await;
    lines(&t.db).await;
    let e =
        t.db.run_command(doc! {
            "explain": {
                "find": "lines",
                "filter": { "$text": { "$search": "love -grey \"blue sky\"" } },
                "projection": { "score": { "$meta": "textScore" } },
            },
            "verbosity": "executionStats",
        })
        .await
        .unwrap();
    let plan = Bson::Document(e);
    let matched = find_stage(&plan, "TEXT_MATCH").expect("a TEXT_MATCH stage");
    assert_eq!(matched.get_str("indexName"), Ok("search"));
    let parsed = matched.get_document("parsedTextQuery").unwrap();
    let strings = |field: &str| -> Vec<String> {
        parsed
            .get_array(field)
            .unwrap()
            .iter()
            .map(|b| b.as_str().unwrap().to_string())
            .collect()
    };
    let mut terms = strings("terms");
    terms.sort();
    assert_eq!(terms, vec!["blue", "love", "sky"]);
    assert_eq!(strings("negatedTerms"), vec!["grey"]);
    assert_eq!(strings("phrases"), vec!["blue sky"]);
    assert!(find_stage(&plan, "TEXT_OR").is_some());
    let scan = find_stage(&plan, "IXSCAN").expect("index scans");
    assert_eq!(
        scan.get_document("keyPattern").unwrap(),
        &doc! { "_fts": "text", "_ftsx": 1 }
    );
    assert!(find_stage(&plan, "COLLSCAN").is_none());
}

#[tokio::test]
async fn text_indexes_survive_a_restart() {
    if !is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let server = docstore::Server::start(docstore::Config::persistent(dir.path()))
            .await
            .unwrap();
        let client = crate::common::client_for(&server.uri()).await;
        let c = client.database("d").collection::<Document>("c");
        if round == 0 {
            c.insert_one(doc! { "_id": 1, "s": "loving jazz" })
                .await
                .unwrap();
            text_index(
                &c,
                doc! { "s": "text" },
                Some(doc! { "weights": { "s": 2 } }),
            )
            .await;
            c.insert_one(doc! { "_id": 2, "s": "loves rock" })
                .await
                .unwrap();
        }
        assert_eq!(search(&c, "love").await, vec![1, 2], "round {round}");
        let best = scored(&c, "jazz").await;
        assert_eq!(best.len(), 1);
        assert!((best[0].1 - 2.0 * 0.75).abs() < 1e-9, "{best:?}");
        drop(client);
        server.shutdown().await;
    }
}

#[tokio::test]
async fn tied_scores_page_by_the_later_sort_keys_and_a_capped_count_stops_at_its_cap() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("tied");
    // Every document scores the same for "blue"; only the even ones hold the phrase. Inserted
    // in an order unlike their _id order.
    let docs: Vec<Document> = (0..40)
        .map(|i| (i * 7) % 40)
        .map(|n: i32| {
            let text = if n % 2 == 0 {
                "kind of blue"
            } else {
                "blue of kind"
            };
            doc! { "_id": n, "t": text }
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    text_index(&c, doc! { "t": "text" }, None).await;
    let page = |filter: Document, skip: u64| {
        let c = c.clone();
        async move {
            c.find(filter)
                .projection(doc! { "score": { "$meta": "textScore" } })
                .sort(doc! { "score": { "$meta": "textScore" }, "_id": -1 })
                .skip(skip)
                .limit(5)
                .await
                .unwrap()
                .try_collect::<Vec<_>>()
                .await
                .unwrap()
                .iter()
                .map(|d| d.get_i32("_id").unwrap())
                .collect::<Vec<i32>>()
        }
    };
    let words = doc! { "$text": { "$search": "blue" } };
    assert_eq!(page(words.clone(), 0).await, vec![39, 38, 37, 36, 35]);
    assert_eq!(page(words.clone(), 5).await, vec![34, 33, 32, 31, 30]);
    let phrase = doc! { "$text": { "$search": "\"kind of blue\"" } };
    assert_eq!(page(phrase.clone(), 0).await, vec![38, 36, 34, 32, 30]);
    assert_eq!(page(phrase.clone(), 15).await, vec![8, 6, 4, 2, 0]);
    let capped = c.count_documents(phrase.clone()).limit(7).await.unwrap();
    assert_eq!(capped, 7);
    assert_eq!(c.count_documents(phrase).await.unwrap(), 20);
    assert_eq!(c.count_documents(words).skip(35).await.unwrap(), 5);
}

#[tokio::test]
async fn pages_walked_best_first_equal_the_full_ranking_on_random_documents() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("random");
    // Random titles and bodies over a small vocabulary (many shared terms, many tied scores),
    // deterministic (xorshift) so a failure repeats.
    let words = [
        "jazz", "blue", "kind", "of", "piano", "note", "session", "love", "notes", "loving",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut below = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut docs = Vec::new();
    for i in 0..400 {
        let mut text = |most: u64| {
            (0..1 + below(most))
                .map(|_| words[below(words.len() as u64) as usize])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let title = text(3);
        let body = text(8);
        docs.push(doc! { "_id": i, "title": title, "body": body, "n": i % 3 });
    }
    c.insert_many(docs).await.unwrap();
    text_index(
        &c,
        doc! { "title": "text", "body": "text" },
        Some(doc! { "weights": { "title": 3 } }),
    )
    .await;
    for search in [
        "jazz",
        "jazz blue",
        "blue piano session",
        "jazz -blue",
        "love -jazz -piano",
        "\"kind of blue\"",
        "piano \"blue note\"",
        "notes loving",
    ] {
        for filter in [
            doc! { "$text": { "$search": search } },
            doc! { "$text": { "$search": search }, "n": { "$ne": 1 } },
        ] {
            let all = scored_page(&c, filter.clone(), 0, 0).await;
            for (skip, limit) in [(0, 1), (0, 20), (7, 13), (50, 25), (0, 400)] {
                let page = scored_page(&c, filter.clone(), skip, limit).await;
                let expected: Vec<(i32, f64)> = all
                    .iter()
                    .skip(skip as usize)
                    .take(limit as usize)
                    .copied()
                    .collect();
                assert_eq!(
                    page, expected,
                    "{search} {filter} skip {skip} limit {limit}"
                );
            }
            let capped = c.count_documents(filter.clone()).limit(30).await.unwrap();
            assert_eq!(capped, all.len().min(30) as u64, "{search} {filter}");
            // Unsorted, in record (insertion) order: the same set as the ranking.
            let mut unsorted = ids(&c, filter.clone()).await;
            let mut ranked: Vec<i32> = all.iter().map(|(id, _)| *id).collect();
            unsorted.sort();
            ranked.sort();
            assert_eq!(unsorted, ranked, "{search} {filter}");
        }
    }
}

#[tokio::test]
async fn a_huge_tie_pages_in_id_order_both_ways() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("huge_tie");
    // Thousands of documents with the same text score, inserted out of `_id` order, a few
    // with a better score and some filtered out: a page is walked through the `_id` index.
    // Words in a second field leave the score of `blue` alone: `jazz` is held by a fifth of
    // the tie (a negation looked up as the walk meets the records), `common` by four fifths
    // (a negation applied to the whole tie first).
    let docs: Vec<Document> = (0..5000)
        .map(|i| (i * 7919) % 5000)
        .map(|n: i32| {
            let text = if n % 1000 == 3 {
                "blue blue note"
            } else {
                "blue note"
            };
            let other = match n % 5 {
                0 => "rare",
                1 => "jazz common",
                _ => "common",
            };
            doc! { "_id": n, "t": text, "u": other, "n": n % 3 }
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    text_index(&c, doc! { "t": "text", "u": "text" }, None).await;
    for direction in [1, -1] {
        for filter in [
            doc! { "$text": { "$search": "blue" } },
            doc! { "$text": { "$search": "blue -nowhere" }, "n": { "$ne": 1 } },
            doc! { "$text": { "$search": "blue -jazz" } },
            doc! { "$text": { "$search": "blue -jazz" }, "n": { "$ne": 1 } },
            doc! { "$text": { "$search": "blue -common" } },
        ] {
            let page = |skip: u64, limit: i64| {
                let (c, filter) = (c.clone(), filter.clone());
                async move {
                    c.find(filter)
                        .projection(doc! { "score": { "$meta": "textScore" } })
                        .sort(doc! { "score": { "$meta": "textScore" }, "_id": direction })
                        .skip(skip)
                        .limit(limit)
                        .await
                        .unwrap()
                        .try_collect::<Vec<_>>()
                        .await
                        .unwrap()
                        .iter()
                        .map(|d| (d.get_i32("_id").unwrap(), d.get_f64("score").unwrap()))
                        .collect::<Vec<_>>()
                }
            };
            let all = page(0, 0).await;
            assert!(all.len() >= 900, "{filter}: {}", all.len());
            for (skip, limit) in [(0, 21), (3, 10), (200, 21)] {
                let expected: Vec<(i32, f64)> = all
                    .iter()
                    .skip(skip as usize)
                    .take(limit as usize)
                    .copied()
                    .collect();
                assert_eq!(
                    page(skip, limit).await,
                    expected,
                    "{filter} {direction} {skip}"
                );
            }
        }
    }
}

#[tokio::test]
async fn phrases_fold_case_and_diacritics_in_ascii_and_other_text_alike() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("phrases");
    c.insert_many([
        doc! { "_id": 1, "t": "KIND OF BLUE" },
        doc! { "_id": 2, "t": "Kínd of Blüe" },
        doc! { "_id": 3, "t": ["other", "a kind of bluegrass"] },
        doc! { "_id": 4, "t": "kind blue" },
        doc! { "_id": 5, "t": "blue", "x": "kind of blue" },
    ])
    .await
    .unwrap();
    text_index(&c, doc! { "t": "text" }, None).await;
    assert_eq!(search(&c, "\"kind of blue\"").await, vec![1, 2, 3]);
    assert_eq!(search(&c, "blue -\"kind of blue\"").await, vec![4, 5]);
}
