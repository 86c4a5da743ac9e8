//! Bounded property-based fuzzing (stable Rust, no cargo-fuzz) of the wire decoder, the query
//! matcher, the update engine and the index key encoding. `PROPTEST_CASES` sets the case count.

use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{
    doc, Binary, Bson, Decimal128, Document, JavaScriptCodeWithScope, RawDocument, Regex, Timestamp,
};
use docstore::internals::wire::{self, Message, CHECKSUM_PRESENT, MORE_TO_COME, OP_MSG, OP_QUERY};
use docstore::internals::{canonical_rank, compare, keystring, values_equal};
use docstore::internals::{ApplyContext, Filter, UpdateSpec};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use std::cmp::Ordering;

/// Cases per property: `PROPTEST_CASES` (proptest reads it), 256 by default so `cargo test`
/// stays fast. Failures are kept as named regression tests below, not in files.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Value generators
// ---------------------------------------------------------------------------------------------

fn small_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['a', 'b', 'B', '\0', 'é', '.', '$']),
        0..4,
    )
    .prop_map(String::from_iter)
}

/// Strings usable where BSON needs a C string (keys, regex parts): no NUL.
fn cstring() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['a', 'b', 'B', 'é', '.', '^', '(']),
        0..4,
    )
    .prop_map(String::from_iter)
}

fn int64() -> impl Strategy<Value = i64> {
    prop_oneof![
        -5i64..5,
        prop::sample::select(vec![
            i64::MIN,
            i64::MAX,
            i64::MIN + 1,
            i64::MAX - 1,
            (1 << 53) + 1,
            -(1 << 53) - 1,
            1 << 53,
            i32::MAX as i64 + 1,
            i32::MIN as i64 - 1,
        ]),
        any::<i64>(),
    ]
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-5i32..5).prop_map(f64::from),
        prop::sample::select(vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.5,
            -2.5,
            9_007_199_254_740_992.0,
            9_007_199_254_740_993.0,
            9.223_372_036_854_776e18,
            -9.223_372_036_854_776e18,
            1e300,
            f64::MIN_POSITIVE,
            f64::EPSILON,
        ]),
        any::<f64>(),
    ]
}

/// A Decimal128 from sign, exponent and coefficient (BID layout), or from raw bits.
fn decimal() -> impl Strategy<Value = Decimal128> {
    prop_oneof![
        (any::<bool>(), -12i32..12, 0u128..2000).prop_map(|(neg, exp, coeff)| {
            let bits = (u128::from(neg) << 127) | (((exp + 6176) as u128) << 113) | coeff;
            Decimal128::from_bytes(bits.to_le_bytes())
        }),
        any::<[u8; 16]>().prop_map(Decimal128::from_bytes),
    ]
}

fn scalar() -> BoxedStrategy<Bson> {
    prop_oneof![
        Just(Bson::Null),
        any::<bool>().prop_map(Bson::Boolean),
        prop_oneof![
            -5i32..5,
            prop::sample::select(vec![i32::MIN, i32::MAX]),
            any::<i32>()
        ]
        .prop_map(Bson::Int32),
        int64().prop_map(Bson::Int64),
        double().prop_map(Bson::Double),
        decimal().prop_map(Bson::Decimal128),
        small_string().prop_map(Bson::String),
        prop::sample::select(vec![[0u8; 12], [1u8; 12], [0xFF; 12]])
            .prop_map(|b| Bson::ObjectId(ObjectId::from_bytes(b))),
        int64().prop_map(|ms| Bson::DateTime(bson::DateTime::from_millis(ms))),
        (0u32..3, 0u32..3)
            .prop_map(|(time, increment)| Bson::Timestamp(Timestamp { time, increment })),
        (
            prop::sample::select(vec![0u8, 4, 0x80]),
            prop::collection::vec(any::<u8>(), 0..3)
        )
            .prop_map(|(subtype, bytes)| Bson::Binary(Binary {
                subtype: BinarySubtype::from(subtype),
                bytes
            })),
        (
            cstring(),
            prop::sample::select(vec!["", "i", "ms", "x", "z"])
        )
            .prop_map(|(pattern, options)| Bson::RegularExpression(Regex {
                pattern,
                options: options.to_string()
            })),
        Just(Bson::MinKey),
        Just(Bson::MaxKey),
        Just(Bson::Undefined),
        small_string().prop_map(Bson::Symbol),
        small_string().prop_map(Bson::JavaScriptCode),
        (small_string(), any::<i32>()).prop_map(|(code, x)| Bson::JavaScriptCodeWithScope(
            JavaScriptCodeWithScope {
                code,
                scope: doc! { "x": x }
            }
        )),
    ]
    .boxed()
}

/// Field names of generated documents: a few, so filters and updates hit them.
fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c", "0", "1", "x"]).prop_map(str::to_string)
}

/// Any value, nested up to a few levels of arrays and documents.
fn value() -> BoxedStrategy<Bson> {
    scalar()
        .prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
                prop::collection::vec((key(), inner), 0..4)
                    .prop_map(|fields| Bson::Document(fields.into_iter().collect())),
            ]
        })
        .boxed()
}

/// A stored document: an `_id` that is not an array, regex or undefined, and a few fields.
fn document() -> impl Strategy<Value = Document> {
    let id = scalar().prop_filter("valid _id", |v| {
        !matches!(
            v,
            Bson::RegularExpression(_) | Bson::Undefined | Bson::Array(_)
        )
    });
    (id, prop::collection::vec((key(), value()), 0..5)).prop_map(|(id, fields)| {
        let mut d = doc! { "_id": id };
        for (k, v) in fields {
            d.insert(k, v);
        }
        d
    })
}

fn bytes_of(d: &Document) -> Vec<u8> {
    let mut out = Vec::new();
    d.to_writer(&mut out).expect("generated documents encode");
    out
}

// ---------------------------------------------------------------------------------------------
// (a) wire decoder
// ---------------------------------------------------------------------------------------------

/// A message with a correct header around `payload`.
fn frame(op_code: i32, request_id: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + payload.len());
    out.extend_from_slice(&((16 + payload.len()) as i32).to_le_bytes());
    out.extend_from_slice(&request_id.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&op_code.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// A valid OP_MSG: body, optional document sequences, optional checksum.
fn op_msg_bytes(
    body: &Document,
    sequences: &[(String, Vec<Document>)],
    checksum: bool,
    more_to_come: bool,
) -> Vec<u8> {
    let mut flags = 0u32;
    if checksum {
        flags |= CHECKSUM_PRESENT;
    }
    if more_to_come {
        flags |= MORE_TO_COME;
    }
    let mut payload = flags.to_le_bytes().to_vec();
    payload.push(0);
    payload.extend_from_slice(&bytes_of(body));
    for (identifier, docs) in sequences {
        payload.push(1);
        let mut section = Vec::new();
        section.extend_from_slice(identifier.as_bytes());
        section.push(0);
        for d in docs {
            section.extend_from_slice(&bytes_of(d));
        }
        payload.extend_from_slice(&((section.len() + 4) as i32).to_le_bytes());
        payload.extend_from_slice(&section);
    }
    if checksum {
        payload.extend_from_slice(&[0; 4]);
    }
    let mut out = frame(OP_MSG, 7, &payload);
    if checksum {
        let end = out.len() - 4;
        let crc = crc32c_of(&out[..end]);
        out[end..].copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// CRC-32C (Castagnoli), bit by bit: the test does not depend on the crate under test for it.
fn crc32c_of(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn op_query_bytes(ns: &str, query: &Document, selector: Option<&Document>) -> Vec<u8> {
    let mut payload = 0i32.to_le_bytes().to_vec();
    payload.extend_from_slice(ns.as_bytes());
    payload.push(0);
    payload.extend_from_slice(&0i32.to_le_bytes());
    payload.extend_from_slice(&(-1i32).to_le_bytes());
    payload.extend_from_slice(&bytes_of(query));
    if let Some(s) = selector {
        payload.extend_from_slice(&bytes_of(s));
    }
    frame(OP_QUERY, 9, &payload)
}

/// Command bodies: fields that never collide with the sequence identifiers below.
fn body() -> impl Strategy<Value = Document> {
    prop::collection::vec((key(), value()), 0..4).prop_map(|fields| {
        let mut d = doc! { "insert": "c" };
        for (k, v) in fields {
            d.insert(k, v);
        }
        d.insert("$db", "test");
        d
    })
}

fn sequences() -> impl Strategy<Value = Vec<(String, Vec<Document>)>> {
    prop::collection::vec(prop::collection::vec(document(), 0..3), 0..3).prop_map(|seqs| {
        seqs.into_iter()
            .enumerate()
            .map(|(i, docs)| (["documents", "updates", "deletes"][i].to_string(), docs))
            .collect()
    })
}

/// One structural damage to a message.
#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, mask: u8 },
    Truncate(usize),
    Length(i32),
    SectionKind(u8),
    Insert { at: usize, bytes: Vec<u8> },
    DocumentLength { section: usize, len: i32 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        any::<usize>().prop_map(Mutation::Truncate),
        prop_oneof![
            Just(0),
            Just(-1),
            Just(15),
            Just(16),
            Just(i32::MAX),
            any::<i32>()
        ]
        .prop_map(Mutation::Length),
        any::<u8>().prop_map(Mutation::SectionKind),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (
            0usize..3,
            prop_oneof![
                Just(0),
                Just(4),
                Just(5),
                Just(-1),
                Just(i32::MAX),
                any::<i32>()
            ]
        )
            .prop_map(|(section, len)| Mutation::DocumentLength { section, len }),
    ]
}

/// Applies `m` to a message; one too short to hold a section is left alone.
fn mutate(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    if n <= 21 {
        return;
    }
    match m {
        Mutation::Flip { at, mask } => bytes[at % n] ^= mask,
        Mutation::Truncate(len) => bytes.truncate(len % n),
        Mutation::Length(len) => bytes[..4].copy_from_slice(&len.to_le_bytes()),
        Mutation::SectionKind(kind) => bytes[20] = *kind,
        Mutation::Insert { at, bytes: extra } => {
            let at = at % (n + 1);
            bytes.splice(at..at, extra.iter().copied());
            // Keep the header honest so the damage reaches the section parser.
            let len = bytes.len() as i32;
            bytes[..4].copy_from_slice(&len.to_le_bytes());
        }
        Mutation::DocumentLength { section, len } => {
            // Section 0 is the body at offset 21; others are sequence sizes after it.
            let mut at = 21;
            for _ in 0..*section {
                let Some(size) = bytes.get(at..at + 4) else {
                    return;
                };
                let size = i32::from_le_bytes(size.try_into().unwrap_or([0; 4]));
                at = at.saturating_add(size.max(0) as usize).saturating_add(1);
            }
            if at + 4 <= n {
                bytes[at..at + 4].copy_from_slice(&len.to_le_bytes());
            }
        }
    }
}

/// The body the server should see: the sequences merged in as array fields.
fn merged(body: &Document, sequences: &[(String, Vec<Document>)]) -> Document {
    let mut d = body.clone();
    for (id, docs) in sequences {
        d.insert(
            id.clone(),
            Bson::Array(docs.iter().cloned().map(Bson::Document).collect()),
        );
    }
    d
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = wire::parse_message(&bytes);
    }

    #[test]
    fn arbitrary_payloads_behind_a_valid_header_never_panic_the_decoder(
        op in prop::sample::select(vec![OP_MSG, OP_QUERY, 2012, 1]),
        payload in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let _ = wire::parse_message(&frame(op, 1, &payload));
    }

    #[test]
    fn valid_op_msg_round_trips(
        body in body(),
        sequences in sequences(),
        checksum in any::<bool>(),
        more_to_come in any::<bool>(),
    ) {
        let bytes = op_msg_bytes(&body, &sequences, checksum, more_to_come);
        let parsed = wire::parse_message(&bytes);
        let Ok(Message::Msg(msg)) = parsed else {
            return Err(TestCaseError::fail(format!("valid OP_MSG refused: {parsed:?}")));
        };
        prop_assert_eq!(msg.checksum_present(), checksum);
        prop_assert_eq!(msg.more_to_come(), more_to_come);
        prop_assert_eq!(msg.header.request_id, 7);
        prop_assert_eq!(bytes_of(&msg.body), bytes_of(&merged(&body, &sequences)));
    }

    #[test]
    fn encoded_replies_parse_back_to_the_same_body(body in body(), checksum in any::<bool>()) {
        let bytes = wire::encode_op_msg(3, &body, checksum);
        let parsed = wire::parse_message(&bytes);
        let Ok(Message::Msg(msg)) = parsed else {
            return Err(TestCaseError::fail(format!("reply does not parse: {parsed:?}")));
        };
        prop_assert_eq!(msg.header.response_to, 3);
        prop_assert_eq!(bytes_of(&msg.body), bytes_of(&body));
    }

    #[test]
    fn valid_op_query_round_trips(query in body(), selector in prop::option::of(document())) {
        let bytes = op_query_bytes("admin.$cmd", &query, selector.as_ref());
        let parsed = wire::parse_message(&bytes);
        let Ok(Message::Query(q)) = parsed else {
            return Err(TestCaseError::fail(format!("valid OP_QUERY refused: {parsed:?}")));
        };
        prop_assert_eq!(q.command_database(), Some("admin"));
        prop_assert_eq!(bytes_of(&q.query), bytes_of(&query));
        prop_assert_eq!(q.return_fields_selector.as_ref().map(bytes_of), selector.as_ref().map(bytes_of));
    }

    #[test]
    fn damaged_op_msg_never_panics_the_decoder(
        body in body(),
        sequences in sequences(),
        checksum in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = op_msg_bytes(&body, &sequences, checksum, false);
        for m in &mutations {
            mutate(&mut bytes, m);
        }
        let _ = wire::parse_message(&bytes);
    }

    #[test]
    fn damaged_op_query_never_panics_the_decoder(
        query in body(),
        selector in prop::option::of(document()),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = op_query_bytes("admin.$cmd", &query, selector.as_ref());
        for m in &mutations {
            mutate(&mut bytes, m);
        }
        let _ = wire::parse_message(&bytes);
    }

    #[test]
    fn any_single_flipped_byte_in_a_checksummed_op_msg_is_refused(
        body in body(),
        sequences in sequences(),
        at in any::<usize>(),
        mask in 1u8..=255,
    ) {
        let mut bytes = op_msg_bytes(&body, &sequences, true, false);
        let n = bytes.len();
        bytes[at % n] ^= mask;
        // The checksum covers the header too, and a flip in the checksum itself is a mismatch.
        let parsed = wire::parse_message(&bytes);
        prop_assert!(parsed.is_err(), "flipped byte {} accepted: {:?}", at % n, parsed);
    }
}

// ---------------------------------------------------------------------------------------------
// (b) query matcher
// ---------------------------------------------------------------------------------------------

fn path() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a", "b", "c", "_id", "a.b", "a.0", "a.0.b", "b.1", "a.b.c", "x.0.0", "1", "a.$", "",
        "a..b",
    ])
    .prop_map(str::to_string)
}

fn comparison_op() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])
}

/// Aggregation expressions for `$expr`: literals, field paths and operators with random args.
fn expression() -> BoxedStrategy<Bson> {
    let leaf = prop_oneof![
        scalar(),
        prop::sample::select(vec![
            "$a",
            "$b",
            "$a.b",
            "$c.0",
            "$$ROOT",
            "$$CURRENT",
            "$$REMOVE",
            "$$NOW",
            "$$x",
            "$",
        ])
        .prop_map(|s| Bson::String(s.to_string())),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        let op = prop::sample::select(vec![
            "$add",
            "$subtract",
            "$multiply",
            "$divide",
            "$mod",
            "$eq",
            "$ne",
            "$gt",
            "$lt",
            "$cmp",
            "$and",
            "$or",
            "$not",
            "$cond",
            "$ifNull",
            "$concat",
            "$substr",
            "$substrBytes",
            "$substrCP",
            "$strLenCP",
            "$strLenBytes",
            "$toUpper",
            "$toLower",
            "$size",
            "$arrayElemAt",
            "$slice",
            "$concatArrays",
            "$in",
            "$indexOfArray",
            "$indexOfBytes",
            "$indexOfCP",
            "$abs",
            "$ceil",
            "$floor",
            "$pow",
            "$sqrt",
            "$exp",
            "$ln",
            "$log",
            "$log10",
            "$round",
            "$trunc",
            "$toString",
            "$toInt",
            "$toLong",
            "$toDouble",
            "$toDecimal",
            "$toBool",
            "$toDate",
            "$toObjectId",
            "$type",
            "$isArray",
            "$isNumber",
            "$max",
            "$min",
            "$sum",
            "$avg",
            "$literal",
            "$split",
            "$strcasecmp",
            "$year",
            "$month",
            "$dayOfWeek",
            "$mergeObjects",
            "$objectToArray",
            "$arrayToObject",
            "$reverseArray",
            "$allElementsTrue",
            "$anyElementTrue",
            "$setUnion",
            "$setIntersection",
            "$setDifference",
            "$first",
            "$last",
            "$bitAnd",
            "$bitOr",
            "$bitNot",
            "$trim",
            "$ltrim",
            "$getField",
            "$zip",
            "$switch",
            "$regexMatch",
            "$replaceAll",
            "$dateToString",
            "$dateFromParts",
            "$let",
            "$map",
            "$filter",
            "$sortArray",
            "$unknownOp",
        ]);
        prop_oneof![
            (op.clone(), prop::collection::vec(inner.clone(), 0..4))
                .prop_map(|(op, args)| Bson::Document(doc! { op: Bson::Array(args) })),
            (op, inner.clone()).prop_map(|(op, arg)| Bson::Document(doc! { op: arg })),
            prop::collection::vec((key(), inner.clone()), 0..3)
                .prop_map(|fields| Bson::Document(fields.into_iter().collect())),
            prop::collection::vec(inner, 0..3).prop_map(Bson::Array),
        ]
    })
    .boxed()
}

/// An operator with an argument of (mostly) the right shape, or of any shape.
fn operator(sub: BoxedStrategy<Document>) -> BoxedStrategy<(String, Bson)> {
    let ints = prop_oneof![
        -3i64..70,
        prop::sample::select(vec![i64::MIN, i64::MAX, -1, 0])
    ]
    .prop_map(Bson::Int64);
    let numbers = prop_oneof![ints.clone(), double().prop_map(Bson::Double), scalar()];
    prop_oneof![
        (comparison_op(), value()).prop_map(|(op, v)| (op.to_string(), v)),
        (
            prop::sample::select(vec!["$in", "$nin", "$all"]),
            prop::collection::vec(value(), 0..4)
        )
            .prop_map(|(op, v)| (op.to_string(), Bson::Array(v))),
        value().prop_map(|v| ("$exists".to_string(), v)),
        prop_oneof![
            prop::sample::select(vec!["string", "number", "array", "null", "missing", "long"])
                .prop_map(|s| Bson::String(s.to_string())),
            numbers.clone(),
            prop::collection::vec(numbers.clone(), 0..3).prop_map(Bson::Array),
        ]
        .prop_map(|v| ("$type".to_string(), v)),
        numbers.clone().prop_map(|v| ("$size".to_string(), v)),
        prop::collection::vec(numbers.clone(), 0..4)
            .prop_map(|v| ("$mod".to_string(), Bson::Array(v))),
        prop::sample::select(vec![
            "a", "^b", "(", "a(?=b)", "\\d+", "^$", "(a)\\1", "é", "."
        ])
        .prop_map(|p| ("$regex".to_string(), Bson::String(p.to_string()))),
        prop::sample::select(vec!["i", "m", "x", "s", "q", ""])
            .prop_map(|o| ("$options".to_string(), Bson::String(o.to_string()))),
        sub.clone()
            .prop_map(|d| ("$elemMatch".to_string(), Bson::Document(d))),
        (comparison_op(), value())
            .prop_map(|(op, v)| ("$not".to_string(), Bson::Document(doc! { op: v }))),
        (
            prop::sample::select(vec![
                "$bitsAllSet",
                "$bitsAnySet",
                "$bitsAllClear",
                "$bitsAnyClear"
            ]),
            prop_oneof![
                numbers.clone(),
                prop::collection::vec(numbers, 0..4).prop_map(Bson::Array)
            ]
        )
            .prop_map(|(op, v)| (op.to_string(), v)),
        (
            prop::sample::select(vec![
                "$eq",
                "$in",
                "$all",
                "$size",
                "$not",
                "$elemMatch",
                "$regex",
                "$mod",
                "$type",
                "$exists",
                "$where",
                "$near",
                "$text",
                "$foo",
                "$expr",
                "$and",
            ]),
            value()
        )
            .prop_map(|(op, v)| (op.to_string(), v)),
    ]
    .boxed()
}

/// A filter document: equalities, operator conditions, logical operators, `$expr`.
fn filter() -> BoxedStrategy<Document> {
    let leaf = prop::collection::vec((path(), value()), 0..3)
        .prop_map(|fields| fields.into_iter().collect::<Document>())
        .boxed();
    leaf.prop_recursive(3, 24, 3, |sub| {
        let entry = prop_oneof![
            (path(), value()).prop_map(|(p, v)| (p, v)),
            (path(), prop::collection::vec(operator(sub.clone()), 1..3)).prop_map(|(p, ops)| {
                (p, Bson::Document(ops.into_iter().collect::<Document>()))
            }),
            (
                prop::sample::select(vec!["$and", "$or", "$nor"]),
                prop::collection::vec(sub.clone(), 0..3)
            )
                .prop_map(|(op, subs)| (
                    op.to_string(),
                    Bson::Array(subs.into_iter().map(Bson::Document).collect())
                )),
            (prop::sample::select(vec!["$and", "$or", "$not"]), value())
                .prop_map(|(op, v)| (op.to_string(), v)),
            expression().prop_map(|e| ("$expr".to_string(), e)),
            value().prop_map(|v| ("$comment".to_string(), v)),
        ];
        prop::collection::vec(entry, 1..3)
            .prop_map(|fields| fields.into_iter().collect::<Document>())
            .boxed()
    })
    .boxed()
}

/// Values the reference comparison covers: one type bracket each, no NaN, no MinKey/MaxKey
/// (which compare across brackets) and no null (which also matches a missing field).
fn comparable_scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        (-3i32..3).prop_map(Bson::Int32),
        (-3i64..3).prop_map(Bson::Int64),
        prop::sample::select(vec![-2.5f64, -1.0, 0.0, 0.5, 1.0, 2.0, f64::INFINITY])
            .prop_map(Bson::Double),
        prop::sample::select(vec!["", "a", "ab", "b"]).prop_map(|s| Bson::String(s.to_string())),
        any::<bool>().prop_map(Bson::Boolean),
        (-2i64..2).prop_map(|ms| Bson::DateTime(bson::DateTime::from_millis(ms))),
        prop::sample::select(vec![[0u8; 12], [1u8; 12]])
            .prop_map(|b| Bson::ObjectId(ObjectId::from_bytes(b))),
    ]
}

/// What `{f: {op: v}}` should match on a document whose `f` is a scalar (or missing).
fn reference_matches(op: &str, field: Option<&Bson>, v: &Bson) -> bool {
    let Some(field) = field else {
        return false;
    };
    let same_bracket = canonical_rank(field) == canonical_rank(v);
    let ord = compare(field, v);
    match op {
        "$eq" => same_bracket && ord == Ordering::Equal,
        "$gt" => same_bracket && ord == Ordering::Greater,
        "$gte" => same_bracket && ord != Ordering::Less,
        "$lt" => same_bracket && ord == Ordering::Less,
        "$lte" => same_bracket && ord != Ordering::Greater,
        _ => false,
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn generated_filters_never_panic_the_matcher(filter in filter(), docs in prop::collection::vec(document(), 1..4)) {
        if let Ok(f) = Filter::parse(&filter) {
            for d in &docs {
                let plain = f.matches(d);
                let positional = f.matches_with_position(d);
                prop_assert_eq!(plain, positional.is_some(), "matches and matches_with_position disagree");
            }
        }
    }

    #[test]
    fn comparison_operators_on_scalars_agree_with_value_compare(
        op in prop::sample::select(vec!["$eq", "$gt", "$gte", "$lt", "$lte"]),
        v in comparable_scalar(),
        field in prop::option::of(comparable_scalar()),
    ) {
        let mut d = doc! { "_id": 1 };
        if let Some(f) = &field {
            d.insert("f", f.clone());
        }
        let filter = Filter::parse(&doc! { "f": { op: v.clone() } }).expect("valid filter");
        prop_assert_eq!(filter.matches(&d), reference_matches(op, field.as_ref(), &v));
    }

    #[test]
    fn in_on_scalars_agrees_with_value_equality(
        list in prop::collection::vec(comparable_scalar(), 0..4),
        field in prop::option::of(comparable_scalar()),
    ) {
        let mut d = doc! { "_id": 1 };
        if let Some(f) = &field {
            d.insert("f", f.clone());
        }
        let expected = field.as_ref().is_some_and(|f| list.iter().any(|v| values_equal(f, v)));
        let filter = Filter::parse(&doc! { "f": { "$in": list.clone() } }).expect("valid filter");
        prop_assert_eq!(filter.matches(&d), expected);
        let filter = Filter::parse(&doc! { "f": { "$nin": list } }).expect("valid filter");
        prop_assert_eq!(filter.matches(&d), !expected);
    }
}

// ---------------------------------------------------------------------------------------------
// (c) update engine
// ---------------------------------------------------------------------------------------------

fn update_path() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a", "b", "c", "_id", "a.b", "a.0", "a.5", "b.1.c", "a.$", "a.$[]", "a.$[x]", "a.$[].b",
        "a.$[x].b", "x.y.z", "_id.a", "", "a..b", "$", "a.$[y]", "c.10",
    ])
    .prop_map(str::to_string)
}

fn update_operator_arg(op: &'static str) -> BoxedStrategy<Bson> {
    let numeric = prop_oneof![
        (-3i32..3).prop_map(Bson::Int32),
        int64().prop_map(Bson::Int64),
        double().prop_map(Bson::Double),
        decimal().prop_map(Bson::Decimal128),
    ];
    match op {
        "$inc" | "$mul" => prop_oneof![numeric, value()].boxed(),
        "$push" | "$addToSet" => prop_oneof![
            value(),
            (
                prop::collection::vec(value(), 0..3),
                prop::option::of(-3i32..3),
                prop::option::of(-3i32..3),
                prop::option::of(prop_oneof![
                    Just(Bson::Int32(1)),
                    Just(Bson::Int32(-1)),
                    Just(Bson::Document(doc! { "b": 1 })),
                    value()
                ])
            )
                .prop_map(|(each, slice, position, sort)| {
                    let mut d = doc! { "$each": each };
                    if let Some(s) = slice {
                        d.insert("$slice", s);
                    }
                    if let Some(p) = position {
                        d.insert("$position", p);
                    }
                    if let Some(s) = sort {
                        d.insert("$sort", s);
                    }
                    Bson::Document(d)
                }),
        ]
        .boxed(),
        "$pop" => prop_oneof![Just(Bson::Int32(1)), Just(Bson::Int32(-1)), value()].boxed(),
        "$pull" => prop_oneof![
            value(),
            (comparison_op(), value()).prop_map(|(op, v)| Bson::Document(doc! { op: v })),
        ]
        .boxed(),
        "$pullAll" => prop::collection::vec(value(), 0..3)
            .prop_map(Bson::Array)
            .boxed(),
        "$rename" => prop_oneof![update_path().prop_map(Bson::String), value()].boxed(),
        "$bit" => (
            prop::sample::select(vec!["and", "or", "xor", "nand"]),
            prop_oneof![
                (-3i32..3).prop_map(Bson::Int32),
                int64().prop_map(Bson::Int64),
                value()
            ],
        )
            .prop_map(|(op, v)| Bson::Document(doc! { op: v }))
            .boxed(),
        "$currentDate" => prop_oneof![
            Just(Bson::Boolean(true)),
            Just(Bson::Document(doc! { "$type": "timestamp" })),
            Just(Bson::Document(doc! { "$type": "date" })),
            value()
        ]
        .boxed(),
        _ => value(),
    }
}

fn update() -> impl Strategy<Value = Bson> {
    let op = prop::sample::select(vec![
        "$set",
        "$unset",
        "$inc",
        "$mul",
        "$min",
        "$max",
        "$push",
        "$addToSet",
        "$pop",
        "$pull",
        "$pullAll",
        "$rename",
        "$bit",
        "$currentDate",
        "$setOnInsert",
        "$unknown",
    ]);
    let entry = op.prop_flat_map(|op| {
        (
            Just(op),
            prop::collection::vec((update_path(), update_operator_arg(op)), 0..3),
        )
    });
    prop_oneof![
        4 => prop::collection::vec(entry, 1..3).prop_map(|ops| {
            let mut d = Document::new();
            for (op, fields) in ops {
                d.insert(op, fields.into_iter().collect::<Document>());
            }
            Bson::Document(d)
        }),
        1 => prop::collection::vec((key(), value()), 0..3)
            .prop_map(|fields| Bson::Document(fields.into_iter().collect())),
        1 => (scalar(), prop::collection::vec((key(), value()), 0..2)).prop_map(|(id, fields)| {
            let mut d = doc! { "_id": id };
            for (k, v) in fields {
                d.insert(k, v);
            }
            Bson::Document(d)
        }),
        1 => value(),
    ]
}

fn array_filters() -> impl Strategy<Value = Option<Vec<Document>>> {
    prop::option::of(prop::collection::vec(
        prop_oneof![
            value().prop_map(|v| doc! { "x": v }),
            (comparison_op(), value()).prop_map(|(op, v)| doc! { "x": { op: v } }),
            (comparison_op(), value()).prop_map(|(op, v)| doc! { "x.b": { op: v } }),
            value().prop_map(|v| doc! { "y": v }),
            filter(),
        ],
        0..3,
    ))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn generated_updates_never_panic_and_keep_the_id(
        original in document(),
        update in update(),
        filters in array_filters(),
        matched_position in prop::option::of(0usize..4),
        is_insert in any::<bool>(),
    ) {
        let Ok(spec) = UpdateSpec::parse(&update, filters.as_deref()) else {
            return Ok(());
        };
        let ctx = ApplyContext {
            matched_position,
            is_insert,
            now: Some(bson::DateTime::from_millis(1_700_000_000_000)),
        };
        let mut doc = original.clone();
        match spec.apply(&mut doc, &ctx) {
            Ok(_) => {
                let (Some(before), Some(after)) = (original.get("_id"), doc.get("_id")) else {
                    return Err(TestCaseError::fail(format!("_id lost: {doc:?}")));
                };
                prop_assert!(
                    values_equal(before, after) && canonical_rank(before) == canonical_rank(after),
                    "_id changed from {:?} to {:?}", before, after
                );
                let mut bytes = Vec::new();
                let encoded = doc.to_writer(&mut bytes);
                prop_assert!(encoded.is_ok(), "updated document does not encode: {:?} ({:?})", doc, encoded);
                prop_assert!(RawDocument::from_bytes(&bytes).is_ok());
                let back = Document::from_reader(bytes.as_slice());
                prop_assert!(back.is_ok(), "updated document does not decode: {:?}", back);
            }
            Err(_) => prop_assert_eq!(bytes_of(&doc), bytes_of(&original), "failed update changed the document"),
        }
        // Upsert seeding must not panic either (its errors are fine).
        let _ = spec.upsert_document(&original, &ctx);
    }
}

// ---------------------------------------------------------------------------------------------
// (d) index key encoding
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn key_encoding_orders_values_like_compare(a in value(), b in value()) {
        let (ka, kb) = (keystring::encode(&a), keystring::encode(&b));
        prop_assert_eq!(ka.cmp(&kb), compare(&a, &b), "{:?} vs {:?}: {:?} vs {:?}", a, b, ka, kb);
        let (mut da, mut db) = (Vec::new(), Vec::new());
        keystring::encode_value_descending(&a, &mut da);
        keystring::encode_value_descending(&b, &mut db);
        prop_assert_eq!(da.cmp(&db), compare(&a, &b).reverse());
    }

    #[test]
    fn compound_keys_order_field_by_field(a in (value(), value()), b in (value(), value())) {
        let key = |(x, y): &(Bson, Bson)| {
            let mut out = Vec::new();
            keystring::encode_value(x, &mut out);
            keystring::encode_value_descending(y, &mut out);
            out
        };
        let expected = compare(&a.0, &b.0).then_with(|| compare(&a.1, &b.1).reverse());
        prop_assert_eq!(key(&a).cmp(&key(&b)), expected);
    }

    #[test]
    fn decoding_keys_never_panics(v in value(), junk in prop::collection::vec(any::<u8>(), 0..64)) {
        let encoded = keystring::encode(&v);
        let decoded = keystring::decode(&encoded);
        prop_assert!(decoded.is_some(), "{:?} does not decode", v);
        let _ = keystring::decode(&junk);
        let _ = keystring::decode_key(&junk, &[false, true]);
    }
}

// ---------------------------------------------------------------------------------------------
// Decimal128 values, which comparisons and index keys see through their nearest double
// ---------------------------------------------------------------------------------------------

/// A decimal `coefficient × 10^exponent` (BID layout, coefficient below 2^113).
fn make_decimal(negative: bool, exponent: i32, coefficient: u128) -> Decimal128 {
    let bits = (u128::from(negative) << 127) | (((exponent + 6176) as u128) << 113) | coefficient;
    Decimal128::from_bytes(bits.to_le_bytes())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decimals_convert_to_their_nearest_double(
        negative in any::<bool>(),
        exponent in prop_oneof![-30i32..30, -6176i32..6111],
        coefficient in prop_oneof![0u128..100_000, 0u128..10u128.pow(34)],
    ) {
        let d = make_decimal(negative, exponent, coefficient);
        let sign = if negative { "-" } else { "" };
        let nearest: f64 = format!("{sign}{coefficient}e{exponent}").parse().expect("decimal literal");
        let got = docstore::internals::decimal_to_f64(&d);
        prop_assert!(got == nearest, "{}{}e{} became {} instead of {}", sign, coefficient, exponent, got, nearest);
    }

    #[test]
    fn equal_decimals_in_different_scales_compare_equal(
        coefficient in 0u128..10u128.pow(20),
        exponent in -40i32..40,
        shift in 1u32..10,
    ) {
        let a = Bson::Decimal128(make_decimal(false, exponent, coefficient));
        let b = Bson::Decimal128(make_decimal(false, exponent - shift as i32, coefficient * 10u128.pow(shift)));
        prop_assert_eq!(compare(&a, &b), Ordering::Equal);
        prop_assert_eq!(keystring::encode(&a), keystring::encode(&b));
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: inputs the properties above once failed on
// ---------------------------------------------------------------------------------------------

/// Found by `equal_decimals_in_different_scales_compare_equal`: `3 × 0.1` and `30 × 0.01` were
/// different doubles, so `NumberDecimal("0.30")` did not find a stored `NumberDecimal("0.3")`.
#[test]
fn a_decimal_filter_matches_the_same_value_written_with_a_different_scale() {
    let stored = doc! { "_id": 1, "price": make_decimal(false, -1, 3) };
    let filter = Filter::parse(&doc! { "price": make_decimal(false, -2, 30) }).unwrap();
    assert!(filter.matches(&stored));
    assert_eq!(
        keystring::encode(&Bson::Decimal128(make_decimal(false, -1, 3))),
        keystring::encode(&Bson::Decimal128(make_decimal(false, -2, 30)))
    );
}

/// Found by `decimals_convert_to_their_nearest_double`: `0E+6111` became `0 × ∞ = NaN`.
#[test]
fn a_decimal_zero_with_a_huge_exponent_equals_zero() {
    let zero = Bson::Decimal128(make_decimal(false, 6111, 0));
    assert_eq!(compare(&zero, &Bson::Int32(0)), Ordering::Equal);
    assert_eq!(keystring::encode(&zero), keystring::encode(&Bson::Int32(0)));
}

/// Found by `decimals_convert_to_their_nearest_double`: a 16-digit coefficient times a
/// rounded power of ten missed the nearest double by one unit.
#[test]
fn a_sixteen_digit_decimal_compares_equal_to_its_nearest_double() {
    let d = Bson::Decimal128(make_decimal(false, -6, 1_629_956_023_600_788));
    assert_eq!(
        compare(&d, &Bson::Double(1_629_956_023.600_788)),
        Ordering::Equal
    );
}
