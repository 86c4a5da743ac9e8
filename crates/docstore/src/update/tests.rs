//! Unit tests of the update language, asserting mongod 7.0's results and error messages.

use super::*;
use bson::{doc, Bson, Document, Timestamp};

fn parse(update: Document) -> UpdateSpec {
    UpdateSpec::parse(&Bson::Document(update), None).expect("update parses")
}

fn parse_with_filters(update: Document, filters: Vec<Document>) -> UpdateSpec {
    UpdateSpec::parse(&Bson::Document(update), Some(&filters)).expect("update parses")
}

fn parse_error(update: Document) -> Error {
    UpdateSpec::parse(&Bson::Document(update), None).expect_err("update is refused")
}

/// Applies `update` to `doc`; returns the result and whether it changed.
fn run(doc: Document, update: Document) -> (Document, bool) {
    run_ctx(doc, update, &ApplyContext::default())
}

fn run_ctx(mut doc: Document, update: Document, ctx: &ApplyContext) -> (Document, bool) {
    let changed = parse(update).apply(&mut doc, ctx).expect("update applies");
    (doc, changed)
}

/// Applies `update`, expects an error, and checks that the document was left as it was.
fn apply_error(doc: Document, update: Document) -> Error {
    apply_error_ctx(doc, update, &ApplyContext::default())
}

fn apply_error_ctx(doc: Document, update: Document, ctx: &ApplyContext) -> Error {
    let mut copy = doc.clone();
    let e = parse(update)
        .apply(&mut copy, ctx)
        .expect_err("update fails");
    assert_same(&copy, &doc);
    e
}

/// Field order and types matter, as they do on the wire.
fn assert_same(actual: &Document, expected: &Document) {
    assert!(
        ops::identical_documents(actual, expected),
        "\n  actual: {actual:?}\nexpected: {expected:?}"
    );
}

fn assert_error(e: &Error, code: i32, message: &str) {
    assert_eq!(e.code_number(), code, "code of {e}");
    assert_eq!(e.message, message);
}

// ---- $set -------------------------------------------------------------------------------------

#[test]
fn set_replaces_a_field_in_place_and_appends_new_fields() {
    let (d, changed) = run(
        doc! { "_id": 1, "a": 1, "z": 0 },
        doc! { "$set": { "a": 2, "b": 3 } },
    );
    assert!(changed);
    assert_same(&d, &doc! { "_id": 1, "a": 2, "z": 0, "b": 3 });
}

#[test]
fn set_creates_new_fields_in_lexicographic_order() {
    let (d, _) = run(doc! { "_id": 1 }, doc! { "$set": { "b": 1, "a": 1 } });
    assert_same(&d, &doc! { "_id": 1, "a": 1, "b": 1 });
}

#[test]
fn numeric_path_parts_are_applied_in_numeric_order() {
    let (d, _) = run(
        doc! { "_id": 1, "x": {} },
        doc! { "$set": { "x.10": 1, "x.2": 1, "x.b": 1, "x.B": 1 } },
    );
    assert_same(
        &d,
        &doc! { "_id": 1, "x": { "2": 1, "10": 1, "B": 1, "b": 1 } },
    );
}

#[test]
fn set_creates_missing_intermediate_documents() {
    let (d, _) = run(
        doc! { "_id": 1 },
        doc! { "$set": { "a.b.c": 1, "a.b.d": 2 } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": { "b": { "c": 1, "d": 2 } } });
}

#[test]
fn set_with_a_numeric_part_on_an_array_pads_with_nulls() {
    let (d, _) = run(doc! { "_id": 1, "a": [1] }, doc! { "$set": { "a.3": 4 } });
    assert_same(&d, &doc! { "_id": 1, "a": [1, Bson::Null, Bson::Null, 4] });
    let (d, _) = run(
        doc! { "_id": 1, "a": [{ "b": 1 }] },
        doc! { "$set": { "a.0.b": 2 } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [{ "b": 2 }] });
}

#[test]
fn numeric_parts_under_a_missing_field_create_documents_not_arrays() {
    let (d, _) = run(doc! { "_id": 1 }, doc! { "$set": { "a.0.b": 1 } });
    assert_same(&d, &doc! { "_id": 1, "a": { "0": { "b": 1 } } });
}

#[test]
fn set_through_a_scalar_is_path_not_viable() {
    let e = apply_error(doc! { "_id": 1, "a": 1 }, doc! { "$set": { "a.b": 1 } });
    assert_error(&e, 28, "Cannot create field 'b' in element {a: 1}");
    let e = apply_error(
        doc! { "_id": 1, "a": [{ "b": 1 }] },
        doc! { "$set": { "a.b": 2 } },
    );
    assert_error(
        &e,
        28,
        "Cannot create field 'b' in element {a: [ { b: 1 } ]}",
    );
}

#[test]
fn padding_an_array_by_too_much_is_refused() {
    let e = apply_error(
        doc! { "_id": 1, "a": [] },
        doc! { "$set": { "a.2000000": 1 } },
    );
    assert_eq!(e.code_number(), 34);
}

#[test]
fn setting_a_field_to_its_current_value_is_not_a_modification() {
    let (d, changed) = run(
        doc! { "_id": 1, "a": { "b": 1, "c": [1, 2] } },
        doc! { "$set": { "a": { "b": 1, "c": [1, 2] } } },
    );
    assert!(!changed);
    assert_same(&d, &doc! { "_id": 1, "a": { "b": 1, "c": [1, 2] } });
}

#[test]
fn setting_an_equal_value_of_another_type_or_field_order_is_a_modification() {
    let (d, changed) = run(doc! { "_id": 1, "a": 1 }, doc! { "$set": { "a": 1.0 } });
    assert!(changed);
    assert_same(&d, &doc! { "_id": 1, "a": 1.0 });
    let (_, changed) = run(
        doc! { "_id": 1, "a": { "x": 1, "y": 2 } },
        doc! { "$set": { "a": { "y": 2, "x": 1 } } },
    );
    assert!(changed);
}

#[test]
fn empty_operator_arguments_are_a_no_op() {
    let (d, changed) = run(doc! { "_id": 1, "a": 1 }, doc! { "$set": {}, "$unset": {} });
    assert!(!changed);
    assert_same(&d, &doc! { "_id": 1, "a": 1 });
}

#[test]
fn dollar_prefixed_field_names_inside_set_values_are_allowed() {
    let (d, _) = run(doc! { "_id": 1 }, doc! { "$set": { "a": { "$x": 1 } } });
    assert_same(&d, &doc! { "_id": 1, "a": { "$x": 1 } });
}

// ---- $unset -----------------------------------------------------------------------------------

#[test]
fn unset_removes_fields_and_nulls_array_elements() {
    let (d, changed) = run(
        doc! { "_id": 1, "a": 1, "b": { "c": 1, "d": 2 }, "e": [1, 2, 3] },
        doc! { "$unset": { "a": "", "b.c": 1, "e.1": true } },
    );
    assert!(changed);
    assert_same(
        &d,
        &doc! { "_id": 1, "b": { "d": 2 }, "e": [1, Bson::Null, 3] },
    );
}

#[test]
fn unset_of_a_missing_field_is_not_a_modification() {
    let (_, changed) = run(
        doc! { "_id": 1, "a": 1 },
        doc! { "$unset": { "b": 1, "a.c": 1, "x.y.z": 1 } },
    );
    assert!(!changed);
}

// ---- $inc and $mul ----------------------------------------------------------------------------

#[test]
fn inc_adds_and_creates_missing_fields() {
    let (d, _) = run(
        doc! { "_id": 1, "a": 1, "b": 1.5 },
        doc! { "$inc": { "a": 2, "b": 1, "c.d": -3_i64 } },
    );
    assert_same(
        &d,
        &doc! { "_id": 1, "a": 3, "b": 2.5, "c": { "d": -3_i64 } },
    );
}

#[test]
fn inc_on_int32_overflow_widens_to_int64() {
    let (d, _) = run(
        doc! { "_id": 1, "a": i32::MAX },
        doc! { "$inc": { "a": 1 } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": i64::from(i32::MAX) + 1 });
}

#[test]
fn inc_on_int64_overflow_is_bad_value() {
    let e = apply_error(
        doc! { "_id": 1, "a": i64::MAX },
        doc! { "$inc": { "a": 1 } },
    );
    assert_error(
        &e,
        2,
        "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) \
         for document {_id: 1}",
    );
}

#[test]
fn inc_by_zero_is_not_a_modification() {
    let (_, changed) = run(doc! { "_id": 1, "a": 5 }, doc! { "$inc": { "a": 0 } });
    assert!(!changed);
}

#[test]
fn inc_on_a_non_number_is_type_mismatch() {
    let e = apply_error(doc! { "_id": 1, "a": "x" }, doc! { "$inc": { "a": 1 } });
    assert_error(
        &e,
        14,
        "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of \
         non-numeric type string",
    );
    let e = apply_error(doc! { "_id": 1, "a": "x" }, doc! { "$mul": { "a": 2 } });
    assert_eq!(e.code_number(), 14);
}

#[test]
fn inc_with_a_non_numeric_argument_is_type_mismatch() {
    let e = parse_error(doc! { "$inc": { "a": "x" } });
    assert_error(
        &e,
        14,
        "Cannot increment with non-numeric argument: {a: \"x\"}",
    );
    let e = parse_error(doc! { "$mul": { "a": true } });
    assert_error(
        &e,
        14,
        "Cannot multiply with non-numeric argument: {a: true}",
    );
}

#[test]
fn mul_multiplies_and_creates_a_zero_of_the_multiplier_type() {
    let (d, _) = run(
        doc! { "_id": 1, "a": 3 },
        doc! { "$mul": { "a": 2_i64, "b": 5, "c": 2.5 } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": 6_i64, "b": 0, "c": 0.0 });
}

// ---- $min and $max ----------------------------------------------------------------------------

#[test]
fn min_and_max_replace_only_when_beyond_the_current_value() {
    let (d, _) = run(
        doc! { "_id": 1, "lo": 5, "hi": 5, "same": 5 },
        doc! { "$min": { "lo": 3, "same": 7, "new": 1 }, "$max": { "hi": 9.5 } },
    );
    assert_same(
        &d,
        &doc! { "_id": 1, "lo": 3, "hi": 9.5, "same": 5, "new": 1 },
    );
}

#[test]
fn min_compares_across_types_in_bson_order() {
    // null sorts before numbers, strings after.
    let (d, _) = run(
        doc! { "_id": 1, "a": 5, "b": 5 },
        doc! { "$min": { "a": Bson::Null, "b": "text" } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": Bson::Null, "b": 5 });
}

// ---- $rename ----------------------------------------------------------------------------------

#[test]
fn rename_moves_a_value_to_the_destination() {
    let (d, _) = run(
        doc! { "_id": 1, "a": 1, "b": { "c": 2 }, "z": 0 },
        doc! { "$rename": { "a": "x.y", "b.c": "z" } },
    );
    assert_same(&d, &doc! { "_id": 1, "b": {}, "z": 2, "x": { "y": 1 } });
}

#[test]
fn rename_of_a_missing_field_is_a_no_op() {
    let (_, changed) = run(doc! { "_id": 1, "b": 1 }, doc! { "$rename": { "a": "b" } });
    assert!(!changed);
}

#[test]
fn rename_argument_errors_are_bad_value() {
    let e = parse_error(doc! { "$rename": { "a": 1 } });
    assert_error(&e, 2, "The 'to' field for $rename must be a string: a: 1");
    let e = parse_error(doc! { "$rename": { "a": "a" } });
    assert_error(
        &e,
        2,
        "The source and target field for $rename must differ: a: \"a\"",
    );
    let e = parse_error(doc! { "$rename": { "a": "a.b" } });
    assert_error(
        &e,
        2,
        "The source and target field for $rename must not be on the same path: a: \"a.b\"",
    );
    let e = parse_error(doc! { "$rename": { "a.$": "b" } });
    assert_error(
        &e,
        2,
        "The source field for $rename may not be dynamic: a.$",
    );
}

#[test]
fn rename_through_arrays_is_bad_value() {
    let e = apply_error(
        doc! { "_id": 1, "a": [{ "b": 1 }] },
        doc! { "$rename": { "a.0.b": "c" } },
    );
    assert_error(
        &e,
        2,
        "The source field cannot be an array element, 'a.0.b' in doc with _id: 1 has an array \
         field called 'a'",
    );
    let e = apply_error(
        doc! { "_id": 1, "a": 1, "b": [] },
        doc! { "$rename": { "a": "b.c" } },
    );
    assert_error(
        &e,
        2,
        "The destination field cannot be an array element, 'b.c' in doc with _id: 1 has an \
         array field called 'b'",
    );
}

#[test]
fn rename_conflicts_with_other_operators_on_its_source() {
    let e = parse_error(doc! { "$set": { "a": 1 }, "$rename": { "a": "b" } });
    assert_error(
        &e,
        40,
        "Updating the path 'a' would create a conflict at 'a'",
    );
}

// ---- $setOnInsert and $currentDate -----------------------------------------------------------

#[test]
fn set_on_insert_applies_only_to_inserts() {
    let update = doc! { "$setOnInsert": { "created": 1 }, "$set": { "a": 1 } };
    let (d, _) = run(doc! { "_id": 1 }, update.clone());
    assert_same(&d, &doc! { "_id": 1, "a": 1 });
    let inserted = parse(update)
        .upsert_document(&doc! { "_id": 7 }, &ApplyContext::default())
        .unwrap();
    assert_same(&inserted, &doc! { "_id": 7, "a": 1, "created": 1 });
}

#[test]
fn current_date_sets_a_date_or_timestamp_from_the_context_time() {
    let now = bson::DateTime::from_millis(1_700_000_000_123);
    let ctx = ApplyContext {
        now: Some(now),
        ..Default::default()
    };
    let (d, _) = run_ctx(
        doc! { "_id": 1 },
        doc! { "$currentDate": { "d": true, "t": { "$type": "timestamp" }, "u": { "$type": "date" } } },
        &ctx,
    );
    assert_same(
        &d,
        &doc! {
            "_id": 1,
            "d": now,
            "t": Timestamp { time: 1_700_000_000, increment: 1 },
            "u": now,
        },
    );
}

#[test]
fn current_date_refuses_other_arguments() {
    let e = parse_error(doc! { "$currentDate": { "a": 1 } });
    assert_error(
        &e,
        2,
        "int is not valid type for $currentDate. Please use a boolean ('true') or a $type \
         expression ({$type: 'timestamp/date'}).",
    );
    let e = parse_error(doc! { "$currentDate": { "a": { "$type": "string" } } });
    assert_eq!(e.code_number(), 2);
}

// ---- $push ------------------------------------------------------------------------------------

#[test]
fn push_appends_one_value_or_creates_the_array() {
    let (d, _) = run(
        doc! { "_id": 1, "a": [1] },
        doc! { "$push": { "a": [2], "b": { "c": 1 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [1, [2]], "b": [{ "c": 1 }] });
}

#[test]
fn push_each_with_position_inserts_at_the_position() {
    let (d, _) = run(
        doc! { "_id": 1, "a": [1, 2, 3] },
        doc! { "$push": { "a": { "$each": [8, 9], "$position": 1 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [1, 8, 9, 2, 3] });
    let (d, _) = run(
        doc! { "_id": 1, "a": [1, 2, 3] },
        doc! { "$push": { "a": { "$each": [9], "$position": -1 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [1, 2, 9, 3] });
    let (d, _) = run(
        doc! { "_id": 1, "a": [1, 2] },
        doc! { "$push": { "a": { "$each": [9], "$position": -5 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [9, 1, 2] });
}

#[test]
fn push_sort_and_slice_apply_after_insertion() {
    let (d, _) = run(
        doc! { "_id": 1, "a": [5, 1] },
        doc! { "$push": { "a": { "$each": [3, 4], "$sort": -1, "$slice": 3 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [5, 4, 3] });
    let (d, _) = run(
        doc! { "_id": 1, "a": [5, 1] },
        doc! { "$push": { "a": { "$each": [3], "$sort": 1, "$slice": -2 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [3, 5] });
    let (d, _) = run(
        doc! { "_id": 1, "a": [5, 1] },
        doc! { "$push": { "a": { "$each": [], "$slice": 0 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [] });
}

#[test]
fn push_sort_by_fields_orders_documents() {
    let (d, _) = run(
        doc! { "_id": 1, "q": [{ "s": 7, "n": "b" }, { "s": 9, "n": "a" }] },
        doc! { "$push": { "q": { "$each": [{ "s": 8, "n": "c" }, { "n": "d" }], "$sort": { "s": -1 } } } },
    );
    assert_same(
        &d,
        &doc! { "_id": 1, "q": [
            { "s": 9, "n": "a" }, { "s": 8, "n": "c" }, { "s": 7, "n": "b" }, { "n": "d" }
        ] },
    );
}

#[test]
fn push_on_a_non_array_is_bad_value() {
    let e = apply_error(doc! { "_id": 1, "a": "x" }, doc! { "$push": { "a": 1 } });
    assert_error(
        &e,
        2,
        "The field 'a' must be an array but is of type string in document {_id: 1}",
    );
}

#[test]
fn push_modifier_errors_are_bad_value() {
    let e = parse_error(doc! { "$push": { "a": { "$each": [1], "$foo": 1 } } });
    assert_error(&e, 2, "Unrecognized clause in $push: $foo");
    let e = parse_error(doc! { "$push": { "a": { "$each": 1 } } });
    assert_error(
        &e,
        2,
        "The argument to $each in $push must be an array but it was of type: int",
    );
    let e = parse_error(doc! { "$push": { "a": { "$each": [], "$slice": "x" } } });
    assert_error(
        &e,
        2,
        "The value for $slice must be an integer value but was given type: string",
    );
    let e = parse_error(doc! { "$push": { "a": { "$each": [], "$sort": 2 } } });
    assert_error(&e, 2, "The $sort element value must be either 1 or -1");
    let e = parse_error(doc! { "$push": { "a": { "$each": [], "$position": 1.5 } } });
    assert_error(
        &e,
        2,
        "The value for $position must be an integer value, not of type: double",
    );
}

// ---- $addToSet --------------------------------------------------------------------------------

#[test]
fn add_to_set_adds_only_missing_values() {
    let (d, changed) = run(
        doc! { "_id": 1, "a": [1, 2] },
        doc! { "$addToSet": { "a": { "$each": [2, 3, 3, 4.0, 1_i64] } } },
    );
    assert!(changed);
    assert_same(&d, &doc! { "_id": 1, "a": [1, 2, 3, 4.0] });
}

#[test]
fn add_to_set_of_a_present_value_is_not_a_modification() {
    let (_, changed) = run(
        doc! { "_id": 1, "a": [1, 2] },
        doc! { "$addToSet": { "a": 2.0 } },
    );
    assert!(!changed);
}

#[test]
fn add_to_set_creates_the_array_and_refuses_non_arrays() {
    let (d, _) = run(
        doc! { "_id": 1 },
        doc! { "$addToSet": { "a": { "$each": [1, 1] } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [1] });
    let e = apply_error(doc! { "_id": 1, "a": 1 }, doc! { "$addToSet": { "a": 1 } });
    assert_eq!(e.code_number(), 2);
}

// ---- $pop, $pull, $pullAll, $bit --------------------------------------------------------------

#[test]
fn pop_removes_the_first_or_last_element() {
    let (d, _) = run(
        doc! { "_id": 1, "a": [1, 2, 3], "b": [1, 2, 3] },
        doc! { "$pop": { "a": 1, "b": -1 } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [1, 2], "b": [2, 3] });
    let (_, changed) = run(
        doc! { "_id": 1, "a": [] },
        doc! { "$pop": { "a": 1, "m": 1 } },
    );
    assert!(!changed);
    let e = parse_error(doc! { "$pop": { "a": 2 } });
    assert_error(&e, 9, "$pop expects 1 or -1, found: 2");
}

#[test]
fn pull_of_a_value_removes_equal_elements() {
    let (d, _) = run(
        doc! { "_id": 1, "a": [1, 2.0, [2], 2_i64, 3] },
        doc! { "$pull": { "a": 2 } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [1, [2], 3] });
    let (_, changed) = run(
        doc! { "_id": 1, "a": [1] },
        doc! { "$pull": { "a": 5, "m": 1 } },
    );
    assert!(!changed);
    let e = apply_error(doc! { "_id": 1, "a": "x" }, doc! { "$pull": { "a": 1 } });
    assert_error(&e, 2, "Cannot apply $pull to a non-array value");
}

#[test]
fn pull_all_removes_every_listed_value() {
    let (d, _) = run(
        doc! { "_id": 1, "a": [0, 5, 5, 1, 2] },
        doc! { "$pullAll": { "a": [5, 1] } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [0, 2] });
    let e = parse_error(doc! { "$pullAll": { "a": 1 } });
    assert_error(
        &e,
        2,
        "$pullAll requires an array argument but was given a int",
    );
}

#[test]
fn bit_combines_integers() {
    let (d, _) = run(
        doc! { "_id": 1, "a": 13, "b": 3 },
        doc! { "$bit": { "a": { "and": 10 }, "b": { "or": 4_i64 }, "c": { "xor": 5 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": 8, "b": 7_i64, "c": 5 });
}

// ---- positional operators ---------------------------------------------------------------------

#[test]
fn positional_operator_uses_the_matched_position() {
    let ctx = ApplyContext {
        matched_position: Some(1),
        ..Default::default()
    };
    let (d, _) = run_ctx(
        doc! { "_id": 1, "a": [{ "b": 1 }, { "b": 2 }] },
        doc! { "$set": { "a.$.b": 5 } },
        &ctx,
    );
    assert_same(&d, &doc! { "_id": 1, "a": [{ "b": 1 }, { "b": 5 }] });
}

#[test]
fn positional_operator_without_a_match_is_bad_value() {
    let e = apply_error(doc! { "_id": 1, "a": [1] }, doc! { "$set": { "a.$": 5 } });
    assert_error(
        &e,
        2,
        "The positional operator did not find the match needed from the query.",
    );
}

#[test]
fn positional_path_errors_are_found_when_parsing() {
    let e = parse_error(doc! { "$set": { "a.$.b.$": 1 } });
    assert_error(
        &e,
        2,
        "Too many positional (i.e. '$') elements found in path 'a.$.b.$'",
    );
    let e = parse_error(doc! { "$set": { "$[].a": 1 } });
    assert_eq!(e.code_number(), 2);
}

#[test]
fn all_positional_updates_every_element() {
    let (d, _) = run(
        doc! { "_id": 1, "a": [{ "b": 1 }, { "b": 2 }, {}] },
        doc! { "$inc": { "a.$[].b": 10 } },
    );
    assert_same(
        &d,
        &doc! { "_id": 1, "a": [{ "b": 11 }, { "b": 12 }, { "b": 10 }] },
    );
    let (d, _) = run(
        doc! { "_id": 1, "a": [[1, 2], [3]] },
        doc! { "$inc": { "a.$[].$[]": 1 } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [[2, 3], [4]] });
}

#[test]
fn all_positional_over_a_scalar_element_cannot_create_a_field() {
    let e = apply_error(
        doc! { "_id": 1, "a": [{ "b": 1 }, 3] },
        doc! { "$inc": { "a.$[].b": 10 } },
    );
    assert_error(&e, 28, "Cannot create field 'b' in element {1: 3}");
}

#[test]
fn all_positional_needs_an_existing_array() {
    let e = apply_error(doc! { "_id": 1 }, doc! { "$set": { "a.b.$[]": 1 } });
    assert_error(
        &e,
        2,
        "The path 'a.b' must exist in the document in order to apply array updates.",
    );
    let e = apply_error(doc! { "_id": 1, "a": 5 }, doc! { "$set": { "a.$[]": 1 } });
    assert_error(
        &e,
        2,
        "Cannot apply array updates to non-array element a: 5",
    );
}

#[test]
fn filtered_positional_without_an_array_filter_is_bad_value() {
    let e = parse_error(doc! { "$set": { "a.$[x]": 1 } });
    assert_error(
        &e,
        2,
        "No array filter found for identifier 'x' in path 'a.$[x]'",
    );
}

#[test]
fn array_filter_identifiers_must_be_lowercase_alphanumeric() {
    let e = UpdateSpec::parse(
        &Bson::Document(doc! { "$set": { "a.$[X]": 1 } }),
        Some(&[doc! { "X": 1 }]),
    )
    .unwrap_err();
    assert_eq!(e.code_number(), 2);
    let e = UpdateSpec::parse(
        &Bson::Document(doc! { "$set": { "a": 1 } }),
        Some(&[doc! { "x": 1, "y": 2 }]),
    )
    .unwrap_err();
    assert_error(
        &e,
        9,
        "Error parsing array filter :: caused by :: Expected a single top-level field name, \
         found 'x' and 'y'",
    );
}

#[test]
fn filtered_positional_updates_matching_elements() {
    let spec = parse_with_filters(
        doc! { "$set": { "g.$[x].ok": true } },
        vec![doc! { "x.grade": { "$gte": 85 } }],
    );
    let mut d = doc! { "_id": 1, "g": [{ "grade": 80 }, { "grade": 90 }, { "grade": 85 }] };
    assert!(spec.apply(&mut d, &ApplyContext::default()).unwrap());
    assert_same(
        &d,
        &doc! { "_id": 1, "g": [{ "grade": 80 }, { "grade": 90, "ok": true }, { "grade": 85, "ok": true }] },
    );

    let spec = parse_with_filters(
        doc! { "$inc": { "a.$[big]": 100 } },
        vec![doc! { "big": { "$gt": 1 } }],
    );
    let mut d = doc! { "_id": 1, "a": [1, 2, 3] };
    spec.apply(&mut d, &ApplyContext::default()).unwrap();
    assert_same(&d, &doc! { "_id": 1, "a": [1, 102, 103] });
}

#[test]
fn an_unused_array_filter_is_failed_to_parse() {
    let e = UpdateSpec::parse(
        &Bson::Document(doc! { "$set": { "a.$[]": 1 } }),
        Some(&[doc! { "x": 1 }]),
    )
    .unwrap_err();
    assert_error(
        &e,
        9,
        "The array filter for identifier 'x' was not used in the update { $set: { a.$[]: 1 } }",
    );
}

#[test]
fn pull_with_a_condition_removes_matching_elements() {
    let (d, _) = run(
        doc! { "_id": 1, "a": [1, 5, 7, 2] },
        doc! { "$pull": { "a": { "$gte": 5 } } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": [1, 2] });
    let (d, _) = run(
        doc! { "_id": 1, "r": [{ "s": 8, "i": "a" }, { "s": 8, "i": "b" }, 8] },
        doc! { "$pull": { "r": { "s": 8, "i": "b" } } },
    );
    assert_same(&d, &doc! { "_id": 1, "r": [{ "s": 8, "i": "a" }, 8] });
}

// ---- conflicts and parse errors ---------------------------------------------------------------

#[test]
fn conflicting_paths_are_refused() {
    let e = parse_error(doc! { "$set": { "a": 1 }, "$inc": { "a.b": 1 } });
    assert_error(
        &e,
        40,
        "Updating the path 'a.b' would create a conflict at 'a'",
    );
    let e = parse_error(doc! { "$set": { "a.b": 1 }, "$inc": { "a": 1 } });
    assert_error(
        &e,
        40,
        "Updating the path 'a' would create a conflict at 'a'",
    );
    let e = parse_error(doc! { "$set": { "a.b.c": 1, "a.b": 1 } });
    assert_error(
        &e,
        40,
        "Updating the path 'a.b' would create a conflict at 'a.b'",
    );
    let e = parse_error(doc! { "$set": { "a.b": 1 }, "$unset": { "a.b.c": 1 } });
    assert_error(
        &e,
        40,
        "Updating the path 'a.b.c' would create a conflict at 'a.b'",
    );
}

#[test]
fn sibling_paths_do_not_conflict() {
    let (d, _) = run(
        doc! { "_id": 1 },
        doc! { "$set": { "a.b": 1 }, "$inc": { "a.c": 1, "ab": 1 } },
    );
    assert_same(&d, &doc! { "_id": 1, "a": { "b": 1, "c": 1 }, "ab": 1 });
}

#[test]
fn unknown_modifiers_are_failed_to_parse() {
    let e = parse_error(doc! { "$foo": { "a": 1 } });
    assert_error(
        &e,
        9,
        "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update \
         specified as an array",
    );
    let e = parse_error(doc! { "$set": { "a": 1 }, "b": 2 });
    assert_error(
        &e,
        9,
        "Unknown modifier: b. Expected a valid update modifier or pipeline-style update \
         specified as an array",
    );
    let e = parse_error(doc! { "$set": 1 });
    assert_error(
        &e,
        9,
        "Modifiers operate on fields but we found type int instead. For example: {$mod: \
         {<field>: ...}} not {$set: 1}",
    );
}

#[test]
fn a_replacement_with_an_operator_field_is_refused() {
    let e = apply_error(doc! { "_id": 1 }, doc! { "a": 1, "$set": { "b": 1 } });
    assert_eq!(e.code_number(), 52);
}

#[test]
fn empty_paths_are_refused() {
    let e = parse_error(doc! { "$set": { "": 1 } });
    assert_eq!(e.code_number(), 56);
}

#[test]
fn pipeline_updates_run_update_stages_with_variables_and_keep_id() {
    let ctx = ApplyContext::default();
    let empty = UpdateSpec::parse(&Bson::Array(vec![]), None).unwrap();
    let mut d = doc! { "_id": 1, "a": 1 };
    assert!(!empty.apply(&mut d, &ctx).unwrap());
    let spec = UpdateSpec::parse_with_vars(
        &Bson::Array(vec![
            Bson::Document(doc! { "$set": { "b": { "$add": ["$a", "$$k"] } } }),
            Bson::Document(doc! { "$replaceWith": { "sum": "$b" } }),
        ]),
        None,
        Some(&doc! { "k": 10 }),
    )
    .unwrap();
    assert!(!spec.is_replacement());
    assert!(spec.apply(&mut d, &ctx).unwrap());
    assert_eq!(d, doc! { "_id": 1, "sum": 11 });
    let e = UpdateSpec::parse(
        &Bson::Array(vec![Bson::Document(doc! { "$set": { "a": 1 } })]),
        Some(&[doc! { "x": 1 }]),
    )
    .unwrap_err();
    assert_eq!(e.code_number(), 9);
    let e = UpdateSpec::parse(&Bson::Array(vec![Bson::Int32(1)]), None).unwrap_err();
    assert_eq!(e.code_number(), 14);
}

// ---- _id --------------------------------------------------------------------------------------

#[test]
fn operators_may_not_change_id() {
    let e = apply_error(doc! { "_id": 1, "a": 1 }, doc! { "$set": { "_id": 2 } });
    assert_error(
        &e,
        66,
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    );
    let e = apply_error(doc! { "_id": 1 }, doc! { "$unset": { "_id": 1 } });
    assert_eq!(e.code_number(), 66);
    let e = apply_error(doc! { "_id": { "x": 1 } }, doc! { "$inc": { "_id.x": 1 } });
    assert_error(
        &e,
        66,
        "Performing an update on the path '_id.x' would modify the immutable field '_id'",
    );
    let e = apply_error(doc! { "_id": 1 }, doc! { "$rename": { "_id": "a" } });
    assert_eq!(e.code_number(), 66);
}

#[test]
fn setting_id_to_its_own_value_is_allowed() {
    let (_, changed) = run(
        doc! { "_id": 1, "a": 1 },
        doc! { "$set": { "_id": 1, "a": 1 } },
    );
    assert!(!changed);
}

#[test]
fn a_failed_update_leaves_the_document_unchanged() {
    // `a` sorts first and is applied before `b` fails.
    let e = apply_error(
        doc! { "_id": 1, "a": 1, "b": "x" },
        doc! { "$set": { "a": 2 }, "$inc": { "b": 1 } },
    );
    assert_eq!(e.code_number(), 14);
}

// ---- replacement ------------------------------------------------------------------------------

#[test]
fn replacement_keeps_id_first_and_drops_other_fields() {
    let spec = parse(doc! { "b": 2, "a": 1 });
    assert!(spec.is_replacement());
    let mut d = doc! { "x": 0, "_id": 1, "y": 1 };
    assert!(spec.apply(&mut d, &ApplyContext::default()).unwrap());
    assert_same(&d, &doc! { "_id": 1, "b": 2, "a": 1 });
}

#[test]
fn empty_replacement_keeps_only_id() {
    let (d, changed) = run(doc! { "_id": 1, "a": 1 }, doc! {});
    assert!(changed);
    assert_same(&d, &doc! { "_id": 1 });
}

#[test]
fn replacement_with_the_same_content_is_not_a_modification() {
    let (_, changed) = run(doc! { "_id": 1, "a": 1 }, doc! { "a": 1 });
    assert!(!changed);
    let (_, changed) = run(doc! { "_id": 1, "a": 1 }, doc! { "_id": 1, "a": 1 });
    assert!(!changed);
}

#[test]
fn replacement_may_not_change_id() {
    let e = apply_error(doc! { "_id": 1, "a": 1 }, doc! { "_id": 2, "a": 1 });
    assert_error(
        &e,
        66,
        "After applying the update, the (immutable) field '_id' was found to have been altered \
         to _id: 2",
    );
}

// ---- upsert -----------------------------------------------------------------------------------

#[test]
fn upsert_seeds_equality_fields_then_applies_the_update() {
    let spec = parse(doc! { "$set": { "c": 1 }, "$inc": { "n": 1 } });
    let filter = doc! {
        "b": 2,
        "$and": [{ "x.y": "deep" }, { "e": { "$eq": 5 } }],
        "g": { "$gt": 1 },
        "_id": 9,
        "h": { "$in": [7] },
    };
    let d = spec
        .upsert_document(&filter, &ApplyContext::default())
        .unwrap();
    assert_same(
        &d,
        &doc! { "_id": 9, "b": 2, "e": 5, "h": 7, "x": { "y": "deep" }, "c": 1, "n": 1 },
    );
}

#[test]
fn upsert_generates_an_object_id_first() {
    let spec = parse(doc! { "$set": { "a": 1 } });
    let d = spec
        .upsert_document(&doc! { "z": 1 }, &ApplyContext::default())
        .unwrap();
    let keys: Vec<&String> = d.keys().collect();
    assert_eq!(keys, ["_id", "z", "a"]);
    assert!(matches!(d.get("_id"), Some(Bson::ObjectId(_))));
}

#[test]
fn upsert_update_wins_over_filter_values() {
    let spec = parse(doc! { "$set": { "a": 2 }, "$inc": { "n": 5 } });
    let d = spec
        .upsert_document(&doc! { "_id": 1, "a": 1, "n": 1 }, &ApplyContext::default())
        .unwrap();
    assert_same(&d, &doc! { "_id": 1, "a": 2, "n": 6 });
}

#[test]
fn upsert_may_not_change_an_id_from_the_filter_but_may_set_one() {
    let spec = parse(doc! { "$set": { "_id": 2 } });
    let e = spec
        .upsert_document(&doc! { "_id": 1 }, &ApplyContext::default())
        .unwrap_err();
    assert_eq!(e.code_number(), 66);
    let d = spec
        .upsert_document(&doc! { "a": 1 }, &ApplyContext::default())
        .unwrap();
    assert_same(&d, &doc! { "_id": 2, "a": 1 });
}

#[test]
fn upsert_replacement_takes_only_id_from_the_filter() {
    let spec = parse(doc! { "b": 1 });
    let d = spec
        .upsert_document(&doc! { "a": 5, "_id": 3 }, &ApplyContext::default())
        .unwrap();
    assert_same(&d, &doc! { "_id": 3, "b": 1 });
    let d = spec
        .upsert_document(&doc! { "a": 5 }, &ApplyContext::default())
        .unwrap();
    let keys: Vec<&String> = d.keys().collect();
    assert_eq!(keys, ["_id", "b"]);
}

#[test]
fn upsert_refuses_ambiguous_equalities() {
    let spec = parse(doc! { "$set": { "c": 1 } });
    let e = spec
        .upsert_document(
            &doc! { "a": 1, "$and": [{ "a": 2 }] },
            &ApplyContext::default(),
        )
        .unwrap_err();
    assert_error(
        &e,
        54,
        "cannot infer query fields to set, path 'a' is matched twice",
    );
    let e = spec
        .upsert_document(&doc! { "a": 1, "a.b": 2 }, &ApplyContext::default())
        .unwrap_err();
    assert_error(
        &e,
        54,
        "cannot infer query fields to set, both paths 'a.b' and 'a' are matched",
    );
}

#[test]
fn upsert_with_the_positional_operator_fails() {
    let spec = parse(doc! { "$set": { "a.$": 1 } });
    let e = spec
        .upsert_document(&doc! { "a": 1 }, &ApplyContext::default())
        .unwrap_err();
    assert_eq!(e.code_number(), 2);
}

#[test]
fn upsert_refuses_an_array_id() {
    let spec = parse(doc! { "$set": { "_id": [1] } });
    let e = spec
        .upsert_document(&doc! { "a": 1 }, &ApplyContext::default())
        .unwrap_err();
    assert_error(&e, 53, "The '_id' value cannot be of type array");
}

#[test]
fn operators_may_not_create_top_level_dollar_fields() {
    let e = apply_error(doc! { "_id": 1 }, doc! { "$set": { "$x": 1 } });
    assert_eq!(e.code_number(), 52);
    let (d, _) = run(doc! { "_id": 1 }, doc! { "$set": { "a.$x": 1 } });
    assert_same(&d, &doc! { "_id": 1, "a": { "$x": 1 } });
}

#[test]
fn positional_paths_meeting_at_one_element_conflict_when_applied() {
    let ctx = ApplyContext {
        matched_position: Some(0),
        ..Default::default()
    };
    let e = apply_error_ctx(
        doc! { "_id": 1, "a": [1, 2] },
        doc! { "$set": { "a.$": 5, "a.0": 6 } },
        &ctx,
    );
    assert_error(&e, 40, "Update created a conflict at 'a.0'");
    let e = parse_error(doc! { "$set": { "a.$[]": 1, "a.0": 2 } });
    assert_error(
        &e,
        40,
        "Updating the path 'a.0' would create a conflict at 'a'",
    );
}
