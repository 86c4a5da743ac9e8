//! Pipeline tests: each stage, stage combinations and the stage-level error codes.

use super::terminal::Target;
use super::*;
use bson::{bson, doc, Bson, Document};
use std::collections::HashMap;

/// Collections for `$lookup`; the pipeline aggregates `test.c` (for `$collStats`).
#[derive(Default)]
struct Collections(HashMap<String, Vec<Document>>);

impl PipelineContext for Collections {
    fn collection_documents(&self, collection: &str) -> Result<Vec<Document>> {
        Ok(self.0.get(collection).cloned().unwrap_or_default())
    }

    fn aggregated_collection(&self) -> Result<AggregatedCollection> {
        // Figures shaped like `Collection::stats`, only when the test created `c`.
        let stats = self.0.get("c").map(|docs| {
            let count = docs.len() as i64;
            doc! {
                "count": count,
                "size": count * 100,
                "avgObjSize": 100i64,
                "storageSize": count * 100,
                "nindexes": 1,
                "totalIndexSize": count * 32,
                "totalSize": count * 132,
                "indexSizes": { "_id_": count * 32 },
            }
        });
        Ok(AggregatedCollection {
            namespace: "test.c".into(),
            host: "testhost".into(),
            stats,
        })
    }
}

fn run_in(ctx: &Collections, stages: Vec<Document>, input: Vec<Document>) -> Result<Vec<Document>> {
    Pipeline::parse(&stages, &doc! {})?.run(input, ctx)
}

fn run(stages: Vec<Document>, input: Vec<Document>) -> Vec<Document> {
    run_in(&Collections::default(), stages, input)
        .unwrap_or_else(|e| panic!("pipeline failed: {e}"))
}

fn error(stages: Vec<Document>, input: Vec<Document>) -> Error {
    match run_in(&Collections::default(), stages, input) {
        Err(e) => e,
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

fn parse_code(stages: Vec<Document>) -> i32 {
    match Pipeline::parse(&stages, &doc! {}) {
        Err(e) => e.code_number(),
        Ok(p) => panic!("expected a parse error, got {p:?}"),
    }
}

fn sales() -> Vec<Document> {
    vec![
        doc! { "_id": 1, "item": "a", "price": 10, "qty": 2, "tags": ["x", "y"] },
        doc! { "_id": 2, "item": "b", "price": 20, "qty": 1, "tags": ["y"] },
        doc! { "_id": 3, "item": "a", "price": 10, "qty": 5, "tags": [] },
        doc! { "_id": 4, "item": "c", "price": 5, "qty": 10 },
    ]
}

#[test]
fn stage_documents_need_exactly_one_known_field() {
    let e = error(vec![doc! { "$bogus": {} }], vec![]);
    assert_eq!(e.code_number(), 40324);
    assert_eq!(e.message, "Unrecognized pipeline stage name: '$bogus'");
    let e = error(vec![doc! { "$skip": 1, "$limit": 1 }], vec![]);
    assert_eq!(e.code_number(), 40323);
    assert_eq!(
        e.message,
        "A pipeline stage specification object must contain exactly one field."
    );
    assert_eq!(parse_code(vec![doc! {}]), 40323);
}

#[test]
fn unsupported_stages_are_refused_by_name() {
    for stage in ["$unionWith", "$setWindowFields"] {
        let mut d = Document::new();
        d.insert(stage, "x");
        let e = error(vec![d], vec![]);
        assert_eq!(e.code_number(), 115, "{stage}");
        assert!(e.message.contains(stage), "{}", e.message);
    }
}

#[test]
fn out_and_merge_parse_only_as_the_final_stage() {
    let p = Pipeline::parse(
        &[doc! { "$match": { "a": 1 } }, doc! { "$out": "dest" }],
        &doc! {},
    )
    .unwrap();
    assert_eq!(p.len(), 1);
    match p.terminal_write() {
        Some(TerminalWrite::Out(t)) => {
            assert_eq!(
                t,
                &Target {
                    db: None,
                    coll: "dest".into()
                }
            )
        }
        other => panic!("expected $out, got {other:?}"),
    }
    let p = Pipeline::parse(
        &[
            doc! { "$merge": { "into": { "db": "x", "coll": "y" }, "on": ["k"],
            "whenMatched": [{ "$set": { "n": "$$new.n" } }], "whenNotMatched": "discard" } },
        ],
        &doc! {},
    )
    .unwrap();
    let Some(TerminalWrite::Merge(m)) = p.terminal_write() else {
        panic!("expected $merge")
    };
    assert_eq!(m.into.db.as_deref(), Some("x"));
    assert_eq!(m.on, vec!["k".to_string()]);
    assert!(matches!(m.when_matched, WhenMatched::Pipeline(_)));
    assert_eq!(m.when_not_matched, WhenNotMatched::Discard);
    assert_eq!(m.vars, doc! { "new": "$$ROOT" });

    assert_eq!(
        parse_code(vec![doc! { "$out": "a" }, doc! { "$match": {} }]),
        40601
    );
    assert_eq!(parse_code(vec![doc! { "$out": 1 }]), 16990);
    assert_eq!(
        parse_code(vec![
            doc! { "$merge": { "into": "a", "whenMatched": "nope" } }
        ]),
        2
    );
    assert_eq!(
        parse_code(vec![
            doc! { "$merge": { "into": "a", "whenMatched": "fail", "whenNotMatched": "discard" } }
        ]),
        51189
    );
    assert_eq!(
        parse_code(vec![
            doc! { "$merge": { "into": "a", "whenMatched": [{ "$match": {} }] } }
        ]),
        72
    );
    assert_eq!(parse_code(vec![doc! { "$merge": { "on": "_id" } }]), 40414);
}

#[test]
fn group_computes_every_accumulator() {
    let out = run(
        vec![doc! { "$group": {
            "_id": "$item",
            "revenue": { "$sum": { "$multiply": ["$price", "$qty"] } },
            "avgQty": { "$avg": "$qty" },
            "maxQty": { "$max": "$qty" },
            "minQty": { "$min": "$qty" },
            "n": { "$sum": 1 },
            "c": { "$count": {} },
            "ids": { "$push": "$_id" },
            "prices": { "$addToSet": "$price" },
            "first": { "$first": "$_id" },
            "last": { "$last": "$_id" },
            "noSuchField": { "$first": "$nope" },
            "avgNone": { "$avg": "$nope" },
            "sumStrings": { "$sum": "$item" },
        } }],
        sales(),
    );
    assert_eq!(
        out[0],
        doc! {
            "_id": "a", "revenue": 70, "avgQty": 3.5, "maxQty": 5, "minQty": 2, "n": 2, "c": 2,
            "ids": [1, 3], "prices": [10], "first": 1, "last": 3, "noSuchField": null,
            "avgNone": null, "sumStrings": 0,
        }
    );
    assert_eq!(out.len(), 3);
}

#[test]
fn group_keys_can_be_documents_and_numbers_group_across_types() {
    let input = vec![
        doc! { "a": 1, "b": "x" },
        doc! { "a": 1.0, "b": "x" },
        doc! { "a": 2i64, "b": "x" },
        doc! { "b": "x" },
    ];
    let out = run(
        vec![doc! { "$group": { "_id": { "a": "$a", "b": "$b" }, "n": { "$sum": 1 } } }],
        input.clone(),
    );
    assert_eq!(
        out,
        vec![
            doc! { "_id": { "a": 1, "b": "x" }, "n": 2 },
            doc! { "_id": { "a": 2i64, "b": "x" }, "n": 1 },
            doc! { "_id": { "b": "x" }, "n": 1 },
        ]
    );
    let out = run(
        vec![doc! { "$group": { "_id": "$a", "n": { "$sum": 1 } } }],
        input,
    );
    assert_eq!(out.len(), 3);
    assert_eq!(out[2], doc! { "_id": null, "n": 1 });
}

#[test]
fn group_errors_use_mongodb_codes() {
    assert_eq!(
        parse_code(vec![doc! { "$group": { "n": { "$sum": 1 } } }]),
        15955
    );
    let e = Pipeline::parse(
        &[doc! { "$group": { "_id": null, "n": { "$bogus": 1 } } }],
        &doc! {},
    )
    .unwrap_err();
    assert_eq!(e.code_number(), 15952);
    assert_eq!(e.message, "unknown group operator '$bogus'");
    assert_eq!(
        parse_code(vec![doc! { "$group": { "_id": null, "n": 1 } }]),
        40234
    );
    assert_eq!(
        parse_code(vec![
            doc! { "$group": { "_id": null, "n": { "$sum": 1, "$avg": 1 } } }
        ]),
        40238
    );
    assert_eq!(
        parse_code(vec![
            doc! { "$group": { "_id": null, "a.b": { "$sum": 1 } } }
        ]),
        40235
    );
    assert_eq!(parse_code(vec![doc! { "$group": 1 }]), 15947);
    assert_eq!(
        parse_code(vec![
            doc! { "$group": { "_id": null, "n": { "$sum": [1, 2] } } }
        ]),
        40237
    );
    assert_eq!(
        parse_code(vec![
            doc! { "$group": { "_id": null, "n": { "$topN": {} } } }
        ]),
        115
    );
}

#[test]
fn the_count_documents_pipeline_counts() {
    let out = run(
        vec![
            doc! { "$skip": 1 },
            doc! { "$limit": 2 },
            doc! { "$group": { "_id": 1, "n": { "$sum": 1 } } },
        ],
        sales(),
    );
    assert_eq!(out, vec![doc! { "_id": 1, "n": 2 }]);
    let none = run(
        vec![doc! { "$group": { "_id": 1, "n": { "$sum": 1 } } }],
        vec![],
    );
    assert!(none.is_empty());
}

#[test]
fn skip_and_limit_validate_their_arguments() {
    let out = run(vec![doc! { "$skip": 3 }], sales());
    assert_eq!(out.len(), 1);
    let out = run(vec![doc! { "$limit": 2i64 }], sales());
    assert_eq!(out.len(), 2);
    let out = run(vec![doc! { "$skip": 2.0 }], sales());
    assert_eq!(out.len(), 2);
    let e = error(vec![doc! { "$skip": -1 }], vec![]);
    assert_eq!(e.code_number(), 5107200);
    assert_eq!(
        e.message,
        "invalid argument to $skip stage: Expected a non-negative number in: $skip: -1"
    );
    let e = error(vec![doc! { "$limit": "x" }], vec![]);
    assert_eq!(e.code_number(), 5107201);
    assert_eq!(
        e.message,
        "invalid argument to $limit stage: Expected a number in: $limit: \"x\""
    );
    assert_eq!(
        error(vec![doc! { "$limit": 1.5 }], vec![]).message,
        "invalid argument to $limit stage: Expected an integer: $limit: 1.5"
    );
    let e = error(vec![doc! { "$limit": 0 }], vec![]);
    assert_eq!(e.code_number(), 15958);
    assert_eq!(e.message, "the limit must be positive");
}

#[test]
fn unwind_emits_one_document_per_element() {
    let out = run(vec![doc! { "$unwind": "$tags" }], sales());
    let ids: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![1, 1, 2]);
    assert_eq!(out[1].get_str("tags").unwrap(), "y");

    let input = vec![
        doc! { "_id": 1, "v": [10, 20] },
        doc! { "_id": 2, "v": [] },
        doc! { "_id": 3, "v": null },
        doc! { "_id": 4 },
        doc! { "_id": 5, "v": "scalar" },
    ];
    let out = run(
        vec![
            doc! { "$unwind": { "path": "$v", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true } },
        ],
        input.clone(),
    );
    assert_eq!(
        out,
        vec![
            doc! { "_id": 1, "v": 10, "i": 0i64 },
            doc! { "_id": 1, "v": 20, "i": 1i64 },
            doc! { "_id": 2, "i": null },
            doc! { "_id": 3, "v": null, "i": null },
            doc! { "_id": 4, "i": null },
            doc! { "_id": 5, "v": "scalar", "i": null },
        ]
    );
    let out = run(vec![doc! { "$unwind": { "path": "$v" } }], input);
    let ids: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![1, 1, 5]);
}

#[test]
fn unwind_reaches_into_embedded_documents() {
    let out = run(
        vec![doc! { "$unwind": "$a.b" }],
        vec![doc! { "a": { "b": [1, 2], "c": 0 } }],
    );
    assert_eq!(
        out,
        vec![
            doc! { "a": { "b": 1, "c": 0 } },
            doc! { "a": { "b": 2, "c": 0 } }
        ]
    );
}

#[test]
fn unwind_errors_use_mongodb_codes() {
    let e = error(vec![doc! { "$unwind": "tags" }], vec![]);
    assert_eq!(e.code_number(), 28818);
    assert_eq!(
        e.message,
        "path option to $unwind stage should be prefixed with a '$': tags"
    );
    assert_eq!(parse_code(vec![doc! { "$unwind": 1 }]), 15981);
    assert_eq!(parse_code(vec![doc! { "$unwind": {} }]), 28812);
    assert_eq!(parse_code(vec![doc! { "$unwind": { "path": 1 } }]), 28808);
    assert_eq!(
        parse_code(vec![
            doc! { "$unwind": { "path": "$a", "preserveNullAndEmptyArrays": 1 } }
        ]),
        28809
    );
    assert_eq!(
        parse_code(vec![
            doc! { "$unwind": { "path": "$a", "includeArrayIndex": "$i" } }
        ]),
        28822
    );
    assert_eq!(
        parse_code(vec![doc! { "$unwind": { "path": "$a", "x": 1 } }]),
        28811
    );
}

#[test]
fn count_names_a_field_and_validates_it() {
    assert_eq!(
        run(vec![doc! { "$count": "n" }], sales()),
        vec![doc! { "n": 4 }]
    );
    assert!(run(vec![doc! { "$count": "n" }], vec![]).is_empty());
    assert_eq!(parse_code(vec![doc! { "$count": 1 }]), 40156);
    assert_eq!(parse_code(vec![doc! { "$count": "" }]), 40157);
    assert_eq!(parse_code(vec![doc! { "$count": "$n" }]), 40158);
    assert_eq!(parse_code(vec![doc! { "$count": "a.b" }]), 40160);
}

#[test]
fn project_add_fields_set_and_unset_as_stages() {
    let out = run(
        vec![
            doc! { "$project": { "item": 1, "total": { "$multiply": ["$price", "$qty"] } } },
            doc! { "$set": { "big": { "$gt": ["$total", 25] } } },
            doc! { "$addFields": { "k": "$$ROOT._id" } },
            doc! { "$unset": "item" },
        ],
        sales(),
    );
    assert_eq!(out[0], doc! { "_id": 1, "total": 20, "big": false, "k": 1 });
    assert_eq!(out[3], doc! { "_id": 4, "total": 50, "big": true, "k": 4 });
    assert_eq!(parse_code(vec![doc! { "$project": 1 }]), 15969);
    assert_eq!(parse_code(vec![doc! { "$addFields": 1 }]), 40272);
    assert_eq!(
        parse_code(vec![doc! { "$project": { "a": { "$bogus": 1 } } }]),
        168
    );
}

#[test]
fn replace_root_and_replace_with_need_documents() {
    let input = vec![doc! { "_id": 1, "inner": { "a": 1 }, "n": 5 }];
    assert_eq!(
        run(
            vec![doc! { "$replaceRoot": { "newRoot": "$inner" } }],
            input.clone()
        ),
        vec![doc! { "a": 1 }]
    );
    assert_eq!(
        run(vec![doc! { "$replaceWith": { "x": "$n" } }], input.clone()),
        vec![doc! { "x": 5 }]
    );
    let e = error(
        vec![doc! { "$replaceRoot": { "newRoot": "$n" } }],
        input.clone(),
    );
    assert_eq!(e.code_number(), 40228);
    assert!(e
        .message
        .starts_with("'newRoot' expression must evaluate to an object, but resulting value was: 5. Type of resulting value: 'int'."));
    let e = error(vec![doc! { "$replaceWith": "$missing" }], input);
    assert_eq!(e.code_number(), 40228);
    assert!(e.message.contains("MISSING"), "{}", e.message);
    assert_eq!(parse_code(vec![doc! { "$replaceRoot": {} }]), 40414);
}

#[test]
fn lookup_matches_scalars_arrays_and_missing_like_mongodb() {
    let mut ctx = Collections::default();
    ctx.0.insert(
        "items".into(),
        vec![
            doc! { "_id": "a", "name": "Apple" },
            doc! { "_id": "b", "name": "Banana", "tags": ["fruit", "yellow"] },
            doc! { "_id": "n", "name": "Nothing", "code": null },
            doc! { "_id": "m", "name": "Missing" },
        ],
    );
    let out = run_in(
        &ctx,
        vec![doc! { "$lookup": { "from": "items", "localField": "item", "foreignField": "_id", "as": "info" } }],
        vec![
            doc! { "_id": 1, "item": "a" },
            doc! { "_id": 2, "item": ["a", "b", "zzz"] },
            doc! { "_id": 3, "item": "zzz" },
        ],
    )
    .unwrap();
    let names = |d: &Document| -> Vec<String> {
        d.get_array("info")
            .unwrap()
            .iter()
            .map(|i| {
                i.as_document()
                    .unwrap()
                    .get_str("name")
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(names(&out[0]), vec!["Apple"]);
    assert_eq!(names(&out[1]), vec!["Apple", "Banana"]);
    assert!(names(&out[2]).is_empty());

    // A missing local field matches foreign documents whose field is null or missing.
    let out = run_in(
        &ctx,
        vec![doc! { "$lookup": { "from": "items", "localField": "code", "foreignField": "code", "as": "info" } }],
        vec![doc! { "_id": 1 }],
    )
    .unwrap();
    assert_eq!(
        names(&out[0]),
        vec!["Apple", "Banana", "Nothing", "Missing"]
    );

    // Foreign arrays match on any element.
    let out = run_in(
        &ctx,
        vec![doc! { "$lookup": { "from": "items", "localField": "t", "foreignField": "tags", "as": "info" } }],
        vec![doc! { "_id": 1, "t": "yellow" }],
    )
    .unwrap();
    assert_eq!(names(&out[0]), vec!["Banana"]);

    // An unknown collection joins nothing.
    let out = run_in(
        &ctx,
        vec![doc! { "$lookup": { "from": "nope", "localField": "t", "foreignField": "t", "as": "info.list" } }],
        vec![doc! { "_id": 1 }],
    )
    .unwrap();
    assert_eq!(out, vec![doc! { "_id": 1, "info": { "list": [] } }]);
}

#[test]
fn lookup_options_are_validated() {
    let code = |spec: Document| parse_code(vec![doc! { "$lookup": spec }]);
    assert_eq!(
        code(doc! { "from": "x", "localField": "a", "foreignField": "b" }),
        9
    );
    assert_eq!(code(doc! { "from": "x", "localField": "a", "as": "o" }), 9);
    assert_eq!(code(doc! { "from": "x", "as": "o" }), 9);
    assert_eq!(
        code(doc! { "from": "x", "as": "o", "bogus": 1, "localField": "a", "foreignField": "b" }),
        9
    );
    assert_eq!(parse_code(vec![doc! { "$lookup": "x" }]), 9);
}

#[test]
fn lookup_with_let_and_pipeline_sees_the_outer_document() {
    let mut ctx = Collections::default();
    ctx.0.insert(
        "stock".into(),
        vec![
            doc! { "_id": 1, "item": "a", "n": 3 },
            doc! { "_id": 2, "item": "a", "n": 0 },
            doc! { "_id": 3, "item": "b", "n": 7 },
        ],
    );
    let out = run_in(
        &ctx,
        vec![doc! { "$lookup": {
            "from": "stock",
            "let": { "wanted": "$item" },
            "pipeline": [
                { "$project": { "_id": 1, "same": { "$eq": ["$item", "$$wanted"] }, "n": 1 } },
                { "$group": { "_id": "$same", "total": { "$sum": "$n" } } },
            ],
            "as": "totals",
        } }],
        vec![doc! { "_id": "x", "item": "a" }],
    )
    .unwrap();
    assert_eq!(
        out[0].get_array("totals").unwrap(),
        &vec![
            bson!({ "_id": true, "total": 3 }),
            bson!({ "_id": false, "total": 7 }),
        ]
    );
}

#[test]
fn facet_runs_each_sub_pipeline_on_the_same_input() {
    let out = run(
        vec![doc! { "$facet": {
            "count": [{ "$count": "n" }],
            "items": [{ "$group": { "_id": null, "items": { "$addToSet": "$item" } } }, { "$project": { "_id": 0 } }],
        } }],
        sales(),
    );
    assert_eq!(
        out,
        vec![doc! { "count": [{ "n": 4 }], "items": [{ "items": ["a", "b", "c"] }] }]
    );
    assert_eq!(parse_code(vec![doc! { "$facet": {} }]), 40169);
    assert_eq!(
        parse_code(vec![doc! { "$facet": { "x": [{ "$out": "c" }] } }]),
        40600
    );
}

#[test]
fn sort_by_count_orders_groups_by_descending_count() {
    let out = run(vec![doc! { "$sortByCount": "$item" }], sales());
    assert_eq!(out[0], doc! { "_id": "a", "count": 2 });
    assert_eq!(out.len(), 3);
    assert_eq!(parse_code(vec![doc! { "$sortByCount": "item" }]), 40147);
}

#[test]
fn bucket_groups_by_boundaries_with_a_default() {
    let out = run(
        vec![doc! { "$bucket": {
            "groupBy": "$price",
            "boundaries": [0, 10, 20],
            "default": "other",
            "output": { "n": { "$sum": 1 }, "ids": { "$push": "$_id" } },
        } }],
        sales(),
    );
    assert_eq!(
        out,
        vec![
            doc! { "_id": 0, "n": 1, "ids": [4] },
            doc! { "_id": 10, "n": 2, "ids": [1, 3] },
            doc! { "_id": "other", "n": 1, "ids": [2] },
        ]
    );
    let counts = run(
        vec![doc! { "$bucket": { "groupBy": "$qty", "boundaries": [0, 5, 100] } }],
        sales(),
    );
    assert_eq!(
        counts,
        vec![doc! { "_id": 0, "count": 2 }, doc! { "_id": 5, "count": 2 }]
    );
    let e = error(
        vec![doc! { "$bucket": { "groupBy": "$price", "boundaries": [0, 10] } }],
        sales(),
    );
    assert_eq!(e.code_number(), 40066);
    assert_eq!(
        parse_code(vec![
            doc! { "$bucket": { "groupBy": "$p", "boundaries": [10, 0] } }
        ]),
        40194
    );
}

#[test]
fn sample_returns_at_most_size_distinct_documents() {
    let out = run(vec![doc! { "$sample": { "size": 2 } }], sales());
    assert_eq!(out.len(), 2);
    assert_ne!(out[0], out[1]);
    assert_eq!(
        run(vec![doc! { "$sample": { "size": 10 } }], sales()).len(),
        4
    );
    assert_eq!(parse_code(vec![doc! { "$sample": { "size": -1 } }]), 28747);
    assert_eq!(parse_code(vec![doc! { "$sample": {} }]), 28749);
}

#[test]
fn let_variables_of_the_command_reach_expressions() {
    let p = Pipeline::parse(
        &[doc! { "$project": { "_id": 0, "x": { "$multiply": ["$qty", "$$factor"] } } }],
        &doc! { "factor": 10 },
    )
    .unwrap();
    let out = p.run(sales(), &Collections::default()).unwrap();
    assert_eq!(out[0], doc! { "x": 20 });
    assert_eq!(
        Pipeline::parse(&[], &doc! { "Bad": 1 })
            .unwrap_err()
            .code_number(),
        16870
    );
}

#[test]
fn now_is_the_same_instant_for_every_document() {
    let out = run(vec![doc! { "$project": { "t": "$$NOW" } }], sales());
    let first = out[0].get("t").cloned();
    assert!(matches!(first, Some(Bson::DateTime(_))));
    assert!(out.iter().all(|d| d.get("t").cloned() == first));
}

// Stages built on the query module's Filter and SortSpec.

#[test]
fn match_filters_with_the_query_language() {
    let out = run(
        vec![doc! { "$match": { "price": { "$gte": 10 }, "tags": "y" } }],
        sales(),
    );
    let ids: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![1, 2]);
    assert_eq!(parse_code(vec![doc! { "$match": 1 }]), 15959);
}

#[test]
fn leading_match_is_exposed_for_index_selection() {
    let p = Pipeline::parse(
        &[doc! { "$match": { "item": "a" } }, doc! { "$count": "n" }],
        &doc! {},
    )
    .unwrap();
    assert_eq!(p.leading_match(), Some(&doc! { "item": "a" }));
    let rest = p.without_leading_match();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest.leading_match(), None);
    assert_eq!(p.stage_names(), ["$match", "$count"]);
    assert_eq!(rest.stage_names(), ["$count"]);
    let out = rest
        .run(vec![sales()[0].clone()], &Collections::default())
        .unwrap();
    assert_eq!(out, vec![doc! { "n": 1 }]);
}

#[test]
fn sort_orders_by_several_keys_and_is_stable() {
    let out = run(vec![doc! { "$sort": { "price": -1, "qty": 1 } }], sales());
    let ids: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![2, 1, 3, 4]);
    assert_eq!(parse_code(vec![doc! { "$sort": 1 }]), 15973);
    assert_eq!(parse_code(vec![doc! { "$sort": {} }]), 15976);
}

#[test]
fn sort_then_limit_keeps_the_top_k_in_order() {
    let input: Vec<Document> = (0..50)
        .map(|i| doc! { "_id": i, "k": (i * 37) % 50 })
        .collect();
    let out = run(
        vec![doc! { "$sort": { "k": 1 } }, doc! { "$limit": 3 }],
        input.clone(),
    );
    let ks: Vec<i32> = out.iter().map(|d| d.get_i32("k").unwrap()).collect();
    assert_eq!(ks, vec![0, 1, 2]);
    let out = run(
        vec![
            doc! { "$sort": { "k": -1 } },
            doc! { "$skip": 2 },
            doc! { "$limit": 2 },
        ],
        input,
    );
    let ks: Vec<i32> = out.iter().map(|d| d.get_i32("k").unwrap()).collect();
    assert_eq!(ks, vec![47, 46]);
    // Ties keep input order.
    let tied = vec![
        doc! { "_id": 1, "k": 0 },
        doc! { "_id": 2, "k": 0 },
        doc! { "_id": 3, "k": 0 },
    ];
    let out = run(
        vec![doc! { "$sort": { "k": 1 } }, doc! { "$limit": 2 }],
        tied,
    );
    let ids: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![1, 2]);
}

#[test]
fn a_full_pipeline_like_the_behaviour_suite() {
    let out = run(
        vec![
            doc! { "$match": { "price": { "$gte": 10 } } },
            doc! { "$unwind": "$tags" },
            doc! { "$project": { "_id": 0, "item": 1, "tag": "$tags", "total": { "$multiply": ["$price", "$qty"] } } },
            doc! { "$sort": { "total": -1, "tag": 1, "item": -1 } },
            doc! { "$skip": 1 },
            doc! { "$limit": 2 },
        ],
        sales(),
    );
    assert_eq!(
        out,
        vec![
            doc! { "item": "b", "tag": "y", "total": 20 },
            doc! { "item": "a", "tag": "y", "total": 20 },
        ]
    );
}

#[test]
fn coll_stats_reports_the_aggregated_collection_in_place_of_its_input() {
    let ctx = Collections(HashMap::from([("c".to_string(), sales())]));
    let out = run_in(
        &ctx,
        vec![
            doc! { "$collStats": { "count": {}, "storageStats": { "scale": 2 } } },
            doc! { "$project": { "_id": 0, "ns": 1, "host": 1, "count": 1, "size": "$storageStats.size" } },
        ],
        // Ignored: the report replaces the input.
        vec![doc! { "x": 1 }, doc! { "x": 2 }],
    )
    .unwrap();
    assert_eq!(
        out,
        vec![doc! { "ns": "test.c", "host": "testhost", "count": 4, "size": 200 }]
    );
    let e = run_in(
        &Collections::default(),
        vec![doc! { "$collStats": { "count": {} } }],
        vec![],
    )
    .unwrap_err();
    assert_eq!(e.code_number(), 26);
    assert_eq!(
        e.message,
        "Unable to retrieve count in $collStats stage :: caused by :: Collection [test.c] not found."
    );
}

#[test]
fn coll_stats_only_opens_a_top_level_pipeline() {
    assert_eq!(
        parse_code(vec![doc! { "$match": {} }, doc! { "$collStats": {} }]),
        40602
    );
    // Sub-pipelines would report on the wrong collection.
    assert_eq!(
        parse_code(vec![doc! { "$facet": { "x": [{ "$collStats": {} }] } }]),
        40600
    );
    assert_eq!(
        parse_code(vec![
            doc! { "$lookup": { "from": "c", "as": "x", "pipeline": [{ "$collStats": {} }] } }
        ]),
        115
    );
    assert_eq!(
        parse_code(vec![doc! { "$collStats": {} }, doc! { "$out": "copy" }]),
        115
    );
    assert_eq!(parse_code(vec![doc! { "$collStats": 1 }]), 5447000);
    assert_eq!(
        parse_code(vec![
            doc! { "$collStats": { "storageStats": { "verbose": true, "bogus": 1 } } }
        ]),
        40415
    );
    let p = Pipeline::parse(&[doc! { "$collStats": {} }, doc! { "$limit": 1 }], &doc! {}).unwrap();
    assert!(p.ignores_input());
    assert!(!Pipeline::parse(&[doc! { "$limit": 1 }], &doc! {})
        .unwrap()
        .ignores_input());
}

#[test]
fn a_count_after_the_match_is_recognised_and_needs_no_document_contents() {
    let shape = |stages: Vec<Document>| {
        Pipeline::parse(&stages, &doc! {})
            .unwrap()
            .only_counts_after_match()
    };
    let matched = doc! { "$match": { "item": "a" } };
    // The driver's count_documents.
    let driver = vec![
        matched.clone(),
        doc! { "$skip": 1 },
        doc! { "$limit": 5 },
        doc! { "$group": { "_id": 1, "n": { "$sum": 1 } } },
    ];
    assert!(shape(driver.clone()));
    assert!(shape(vec![matched.clone(), doc! { "$count": "n" }]));
    assert!(!shape(vec![
        matched.clone(),
        doc! { "$group": { "_id": "$item", "n": { "$sum": 1 } } }
    ]));
    assert!(!shape(vec![
        matched.clone(),
        doc! { "$group": { "_id": 1, "n": { "$sum": "$qty" } } }
    ]));
    assert!(!shape(vec![doc! { "$count": "n" }]), "no leading $match");
    // Placeholders give what the documents themselves give.
    let p = Pipeline::parse(&driver, &doc! {})
        .unwrap()
        .without_leading_match();
    let real = p
        .run(
            vec![doc! { "item": "a", "qty": 3 }; 4],
            &Collections::default(),
        )
        .unwrap();
    let placeholders = p
        .run(vec![Document::new(); 4], &Collections::default())
        .unwrap();
    assert_eq!(real, placeholders);
    assert_eq!(real, vec![doc! { "_id": 1, "n": 3 }]);
}

#[test]
fn a_group_after_the_match_names_the_fields_it_reads_and_gives_the_same_groups_over_only_them() {
    let fields = |stages: Vec<Document>| {
        Pipeline::parse(&stages, &doc! {})
            .unwrap()
            .fields_after_match()
            .map(<[String]>::to_vec)
    };
    let matched = doc! { "$match": { "kind": "view" } };
    let report = vec![
        matched.clone(),
        doc! { "$group": {
            "_id": { "$dateTrunc": { "date": "$at", "unit": "day" } },
            "views": { "$sum": { "$cond": [{ "$eq": ["$kind", "view"] }, 1, 0] } },
            "visitors": { "$addToSet": "$visitor" },
            "deep": { "$max": "$a.b" },
        } },
        doc! { "$project": { "views": 1, "visitors": { "$size": "$visitors" } } },
    ];
    assert_eq!(
        fields(report.clone()),
        Some(vec![
            "a".to_string(),
            "at".into(),
            "kind".into(),
            "visitor".into()
        ])
    );
    // Whatever may read the whole document, or a field no path names, gets it whole.
    for whole in [
        doc! { "_id": "$$ROOT" },
        doc! { "_id": null, "d": { "$push": "$$CURRENT.a" } },
        doc! { "_id": { "$getField": "a.b" } },
        doc! { "_id": null, "s": { "$max": { "$meta": "textScore" } } },
    ] {
        assert_eq!(
            fields(vec![matched.clone(), doc! { "$group": whole }]),
            None
        );
    }
    assert_eq!(fields(vec![matched.clone(), doc! { "$limit": 1 }]), None);
    assert_eq!(
        fields(vec![doc! { "$group": { "_id": "$a" } }]),
        None,
        "no leading $match"
    );

    // The same results from whole documents (run) and from the named fields given one by one.
    let input: Vec<Document> = (0..40i64)
        .map(|i| {
            doc! {
                "at": bson::DateTime::from_millis(i * 3_600_000 * 7),
                "kind": if i % 3 == 0 { "search" } else { "view" },
                "visitor": i % 7,
                "a": { "b": i, "c": "unread" },
                "big": "x".repeat(100),
            }
        })
        .collect();
    let pipeline = Pipeline::parse(&report, &doc! {}).unwrap();
    let whole = pipeline
        .without_leading_match()
        .run(input.clone(), &Collections::default())
        .unwrap();
    let fields = pipeline.fields_after_match().unwrap().to_vec();
    let selected = input.iter().map(|d| {
        let mut out = Document::new();
        for (k, v) in d {
            if fields.contains(k) {
                out.insert(k.clone(), v.clone());
            }
        }
        Ok(out)
    });
    let streamed = pipeline
        .run_after_match(selected, &Collections::default())
        .unwrap();
    assert_eq!(whole, streamed);
    assert_eq!(whole.len(), 12);
}

#[test]
fn add_to_set_keeps_one_of_each_value_by_mongodb_equality_across_integer_and_other_types() {
    let input = [
        bson!(1),
        bson!(1i64),
        bson!(2i64),
        bson!(2),
        bson!(1.0),
        bson!("a"),
        bson!(3),
        bson!(3.0),
        bson!(2.5),
        bson!("a"),
        bson!(4i64),
    ]
    .into_iter()
    .map(|v| doc! { "v": v })
    .collect();
    let out = run(
        vec![doc! { "$group": { "_id": null, "s": { "$addToSet": "$v" } } }],
        input,
    );
    assert_eq!(
        out[0].get_array("s").unwrap(),
        &vec![
            bson!(1),
            bson!(2i64),
            bson!("a"),
            bson!(3),
            bson!(2.5),
            bson!(4i64)
        ]
    );
}
