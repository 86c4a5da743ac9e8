//! The wire layer under real and hostile clients: the official driver, the legacy OP_QUERY
//! handshake, document sequences, checksums, and malformed frames that must close only their own
//! connection while everyone else keeps being served.

use bson::{doc, Document};
use docstore::{Config, Server, ServerHandle};
use mongodb::Client;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const OP_REPLY: i32 = 1;
const OP_INSERT: i32 = 2002;
const OP_QUERY: i32 = 2004;
const OP_MSG: i32 = 2013;
const CHECKSUM_PRESENT: u32 = 1;
const MORE_TO_COME: u32 = 2;
const WAIT: Duration = Duration::from_secs(10);

async fn start() -> ServerHandle {
    Server::start(Config::in_memory())
        .await
        .expect("an in-memory server starts")
}

async fn driver(server: &ServerHandle) -> Client {
    Client::with_uri_str(server.uri())
        .await
        .expect("the driver accepts the URI")
}

async fn driver_ping(client: &Client) {
    let reply = tokio::time::timeout(
        WAIT,
        client.database("admin").run_command(doc! { "ping": 1 }),
    )
    .await
    .expect("ping answered in time")
    .expect("ping succeeds");
    assert_eq!(reply.get_f64("ok").ok(), Some(1.0), "{reply:?}");
}

fn bson_bytes(d: &Document) -> Vec<u8> {
    let mut v = Vec::new();
    d.to_writer(&mut v).expect("test document encodes");
    v
}

/// A whole message: header with the final length, then `payload`.
fn frame(request_id: i32, op_code: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + payload.len());
    out.extend(((16 + payload.len()) as i32).to_le_bytes());
    out.extend(request_id.to_le_bytes());
    out.extend(0i32.to_le_bytes());
    out.extend(op_code.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn body_section(d: &Document) -> Vec<u8> {
    let mut s = vec![0u8];
    s.extend(bson_bytes(d));
    s
}

fn sequence_section(id: &str, docs: &[Document]) -> Vec<u8> {
    let mut payload = id.as_bytes().to_vec();
    payload.push(0);
    for d in docs {
        payload.extend(bson_bytes(d));
    }
    let mut s = vec![1u8];
    s.extend(((payload.len() + 4) as i32).to_le_bytes());
    s.extend(payload);
    s
}

/// An OP_MSG with the given flags and sections; a correct checksum is appended when the flag
/// says so.
fn op_msg(request_id: i32, flags: u32, sections: &[u8]) -> Vec<u8> {
    let mut payload = flags.to_le_bytes().to_vec();
    payload.extend_from_slice(sections);
    if flags & CHECKSUM_PRESENT == 0 {
        return frame(request_id, OP_MSG, &payload);
    }
    payload.extend([0u8; 4]);
    let mut m = frame(request_id, OP_MSG, &payload);
    let end = m.len() - 4;
    let crc = crc32c::crc32c(&m[..end]);
    m[end..].copy_from_slice(&crc.to_le_bytes());
    m
}

fn command(request_id: i32, cmd: &Document) -> Vec<u8> {
    op_msg(request_id, 0, &body_section(cmd))
}

fn op_query(request_id: i32, namespace: &str, query: &Document) -> Vec<u8> {
    let mut payload = 0i32.to_le_bytes().to_vec();
    payload.extend(namespace.as_bytes());
    payload.push(0);
    payload.extend(0i32.to_le_bytes());
    payload.extend((-1i32).to_le_bytes());
    payload.extend(bson_bytes(query));
    frame(request_id, OP_QUERY, &payload)
}

struct Reply {
    request_id: i32,
    response_to: i32,
    op_code: i32,
    flags: u32,
    doc: Document,
}

fn le_i32(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Reads one reply (OP_MSG or OP_REPLY) and checks its framing.
async fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut len = [0u8; 4];
    tokio::time::timeout(WAIT, stream.read_exact(&mut len))
        .await
        .expect("a reply arrives in time")
        .expect("the connection is open");
    let total = i32::from_le_bytes(len) as usize;
    assert!((16..48_000_000).contains(&total));
    let mut m = len.to_vec();
    m.resize(total, 0);
    tokio::time::timeout(WAIT, stream.read_exact(&mut m[4..]))
        .await
        .expect("the rest of the reply arrives in time")
        .expect("the connection stays open");
    let request_id = le_i32(&m, 4);
    let response_to = le_i32(&m, 8);
    let op_code = le_i32(&m, 12);
    match op_code {
        OP_MSG => {
            let flags = le_i32(&m, 16) as u32;
            let mut end = m.len();
            if flags & CHECKSUM_PRESENT != 0 {
                end -= 4;
                let crc = u32::from_le_bytes(m[end..].try_into().unwrap());
                assert_eq!(crc, crc32c::crc32c(&m[..end]), "reply checksum");
            }
            assert_eq!(m[20], 0, "a reply is one body section");
            let doc = Document::from_reader(&m[21..end]).expect("reply body is BSON");
            assert_eq!(21 + bson_bytes(&doc).len(), end, "nothing after the body");
            Reply {
                request_id,
                response_to,
                op_code,
                flags,
                doc,
            }
        }
        OP_REPLY => {
            assert_eq!(le_i32(&m, 32), 1, "numberReturned");
            let doc = Document::from_reader(&m[36..]).expect("reply document is BSON");
            Reply {
                request_id,
                response_to,
                op_code,
                flags: le_i32(&m, 16) as u32,
                doc,
            }
        }
        other => panic!("unexpected reply opcode {other}"),
    }
}

async fn connect(server: &ServerHandle) -> TcpStream {
    TcpStream::connect(server.local_addr())
        .await
        .expect("the server accepts connections")
}

/// Waits for the server to close the connection, discarding anything it sends first.
/// Returns how many bytes it sent before closing.
async fn expect_closed(stream: &mut TcpStream, what: &str) -> usize {
    let mut sink = [0u8; 4096];
    let mut received = 0;
    loop {
        match tokio::time::timeout(WAIT, stream.read(&mut sink)).await {
            Err(_) => panic!("{what}: the server kept the connection open"),
            Ok(Ok(0)) | Ok(Err(_)) => return received,
            Ok(Ok(n)) => received += n,
        }
    }
}

#[tokio::test]
async fn the_driver_can_ping_and_run_hello() {
    let server = start().await;
    let client = driver(&server).await;
    driver_ping(&client).await;
    let hello = client
        .database("admin")
        .run_command(doc! { "hello": 1 })
        .await
        .expect("hello succeeds");
    assert_eq!(hello.get_bool("isWritablePrimary").ok(), Some(true));
    assert_eq!(hello.get_i32("maxWireVersion").ok(), Some(21));
    assert_eq!(hello.get_i32("maxBsonObjectSize").ok(), Some(16_777_216));
    let err = client
        .database("admin")
        .run_command(doc! { "noSuchCommand": 1 })
        .await
        .expect_err("unknown commands fail");
    match *err.kind {
        mongodb::error::ErrorKind::Command(ref c) => assert_eq!(c.code, 59),
        ref other => panic!("unexpected error {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_legacy_op_query_handshake_gets_an_op_reply() {
    let server = start().await;
    let mut s = connect(&server).await;
    s.write_all(&op_query(
        41,
        "admin.$cmd",
        &doc! { "isMaster": 1, "helloOk": true, "client": { "application": { "name": "t" } } },
    ))
    .await
    .unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!((r.op_code, r.response_to), (OP_REPLY, 41));
    assert_eq!(r.doc.get_bool("ismaster").ok(), Some(true));
    assert_eq!(r.doc.get_f64("ok").ok(), Some(1.0));

    // A wrapped query on another database works the same way.
    s.write_all(&op_query(
        42,
        "test.$cmd",
        &doc! { "$query": { "hello": 1 }, "$readPreference": { "mode": "primary" } },
    ))
    .await
    .unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!((r.op_code, r.response_to), (OP_REPLY, 42));
    assert_eq!(r.doc.get_bool("isWritablePrimary").ok(), Some(true));

    // Other commands over OP_QUERY get MongoDB 7.0's error, and the connection stays usable.
    s.write_all(&op_query(43, "admin.$cmd", &doc! { "ping": 1 }))
        .await
        .unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!(r.doc.get_i32("code").ok(), Some(352));
    assert_eq!(
        r.doc.get_str("codeName").ok(),
        Some("UnsupportedOpQueryCommand")
    );
    s.write_all(&command(44, &doc! { "ping": 1, "$db": "admin" }))
        .await
        .unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!((r.op_code, r.response_to), (OP_MSG, 44));
    assert_eq!(r.doc.get_f64("ok").ok(), Some(1.0));
    server.shutdown().await;
}

#[tokio::test]
async fn an_op_msg_with_a_document_sequence_and_checksum_is_answered() {
    let server = start().await;
    let mut s = connect(&server).await;
    // getParameter finds the parameter only if the sequence was merged into the command.
    let mut sections = body_section(&doc! { "getParameter": 1, "$db": "admin" });
    sections.extend(sequence_section(
        "featureCompatibilityVersion",
        &[doc! { "x": 1 }],
    ));
    s.write_all(&op_msg(7, CHECKSUM_PRESENT, &sections))
        .await
        .unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!((r.op_code, r.response_to), (OP_MSG, 7));
    assert_eq!(r.flags & CHECKSUM_PRESENT, CHECKSUM_PRESENT);
    assert_eq!(
        r.doc.get_document("featureCompatibilityVersion").ok(),
        Some(&doc! { "version": "7.0" }),
        "{:?}",
        r.doc
    );
    server.shutdown().await;
}

/// A BSON document of `(type, name, value bytes)` elements, written by hand: what a client may
/// send that a `Document` cannot hold (a field name twice, array keys out of order).
fn raw_document(elements: &[(u8, &str, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (kind, name, value) in elements {
        body.push(*kind);
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.extend_from_slice(value);
    }
    let mut out = ((body.len() + 5) as i32).to_le_bytes().to_vec();
    out.extend(body);
    out.push(0);
    out
}

#[tokio::test]
async fn an_inserts_document_sequence_is_stored_as_decoding_it_would_store_it() {
    let server = start().await;
    let mut s = connect(&server).await;
    let int = |n: i32| n.to_le_bytes().to_vec();
    let string = |v: &str| {
        let mut b = ((v.len() + 1) as i32).to_le_bytes().to_vec();
        b.extend(v.as_bytes());
        b.push(0);
        b
    };
    let odd_keys = raw_document(&[(0x10, "7", &int(1)), (0x10, "x", &int(2))]);
    let signed_keys = raw_document(&[(0x10, "+0", &int(1)), (0x10, "+1", &int(2))]);
    let sent = [
        // Kept as sent.
        bson_bytes(&doc! { "_id": 1, "kind": "view", "at": bson::DateTime::from_millis(5) }),
        // Decoded: the last of a repeated name wins, in the first one's place.
        raw_document(&[
            (0x10, "_id", &int(2)),
            (0x10, "a", &int(1)),
            (0x10, "a", &int(9)),
        ]),
        // Decoded: array keys become 0, 1 ….
        raw_document(&[(0x10, "_id", &int(3)), (0x04, "list", &odd_keys)]),
        // `_id` moved first.
        raw_document(&[(0x02, "s", &string("x")), (0x10, "_id", &int(4))]),
        // A regular expression's options are sorted.
        bson_bytes(
            &doc! { "_id": 5, "re": bson::Regex { pattern: "a".into(), options: "mi".into() } },
        ),
        // Decoded: `+0`, `+1` are not array keys either.
        raw_document(&[(0x10, "_id", &int(7)), (0x04, "list", &signed_keys)]),
    ];
    let mut payload = b"documents\0".to_vec();
    for d in &sent {
        payload.extend(d);
    }
    let mut sections = body_section(&doc! { "insert": "c", "$db": "t" });
    sections.push(1);
    sections.extend(((payload.len() + 4) as i32).to_le_bytes());
    sections.extend(payload);
    s.write_all(&op_msg(9, 0, &sections)).await.unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!(r.doc.get_i32("n").ok(), Some(6), "{:?}", r.doc);
    let client = driver(&server).await;
    // Compared as bytes: a driver decoding them would hide array keys and option order.
    let stored: Vec<bson::RawDocumentBuf> = {
        use futures::TryStreamExt;
        client
            .database("t")
            .collection::<bson::RawDocumentBuf>("c")
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    };
    let expected = [
        doc! { "_id": 1, "kind": "view", "at": bson::DateTime::from_millis(5) },
        doc! { "_id": 2, "a": 9 },
        doc! { "_id": 3, "list": [1, 2] },
        doc! { "_id": 4, "s": "x" },
        doc! { "_id": 5, "re": bson::Regex { pattern: "a".into(), options: "im".into() } },
        doc! { "_id": 7, "list": [1, 2] },
    ];
    assert_eq!(
        stored
            .iter()
            .map(|d| d.as_bytes().to_vec())
            .collect::<Vec<_>>(),
        expected.iter().map(bson_bytes).collect::<Vec<_>>(),
        "{stored:?}"
    );
    // A document nested too deep in the sequence is refused like one in the body.
    let mut deep = doc! { "x": 1 };
    for _ in 0..300 {
        deep = doc! { "x": deep };
    }
    let mut sections = body_section(&doc! { "insert": "c", "$db": "t" });
    sections.extend(sequence_section(
        "documents",
        &[doc! { "_id": 6, "deep": deep }],
    ));
    s.write_all(&op_msg(10, 0, &sections)).await.unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!((r.response_to, r.doc.get_i32("code").ok()), (10, Some(15)));
    server.shutdown().await;
}

#[tokio::test]
async fn a_command_without_db_gets_error_40571() {
    let server = start().await;
    let mut s = connect(&server).await;
    s.write_all(&command(3, &doc! { "ping": 1 })).await.unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!(r.doc.get_i32("code").ok(), Some(40571));
    assert_eq!(r.doc.get_f64("ok").ok(), Some(0.0));
    server.shutdown().await;
}

#[tokio::test]
async fn a_too_deeply_nested_command_gets_an_error_and_the_connection_stays_open() {
    let server = start().await;
    let mut s = connect(&server).await;
    let mut deep = doc! { "x": 1 };
    for _ in 0..300 {
        deep = doc! { "x": deep };
    }
    s.write_all(&command(
        5,
        &doc! { "ping": 1, "$db": "admin", "deep": deep },
    ))
    .await
    .unwrap();
    let r = read_reply(&mut s).await;
    assert_eq!(r.response_to, 5);
    assert_eq!(r.doc.get_i32("code").ok(), Some(15));
    s.write_all(&command(6, &doc! { "ping": 1, "$db": "admin" }))
        .await
        .unwrap();
    assert_eq!(read_reply(&mut s).await.response_to, 6);
    server.shutdown().await;
}

#[tokio::test]
async fn more_to_come_requests_get_no_reply() {
    let server = start().await;
    let mut s = connect(&server).await;
    let ping = body_section(&doc! { "ping": 1, "$db": "admin" });
    s.write_all(&op_msg(100, MORE_TO_COME, &ping))
        .await
        .unwrap();
    s.write_all(&op_msg(101, MORE_TO_COME | CHECKSUM_PRESENT, &ping))
        .await
        .unwrap();
    s.write_all(&command(102, &doc! { "ping": 1, "$db": "admin" }))
        .await
        .unwrap();
    // The first thing that comes back answers the acknowledged request.
    assert_eq!(read_reply(&mut s).await.response_to, 102);
    server.shutdown().await;
}

/// OP_MSG's `exhaustAllowed` (bit 16) on a getMore: the server streams the rest of the cursor,
/// each batch answering the one before it, with `moreToCome` on all but the last.
#[tokio::test]
async fn an_exhaust_get_more_streams_every_batch_until_the_cursor_is_exhausted() {
    const EXHAUST_ALLOWED: u32 = 1 << 16;
    let server = start().await;
    let client = driver(&server).await;
    let docs: Vec<Document> = (0..7).map(|i| doc! { "_id": i }).collect();
    client
        .database("wire")
        .collection::<Document>("exhaust")
        .insert_many(docs)
        .await
        .unwrap();
    let mut s = connect(&server).await;
    let find = doc! { "find": "exhaust", "batchSize": 2, "sort": { "_id": 1 }, "$db": "wire" };
    s.write_all(&command(1, &find)).await.unwrap();
    let first = read_reply(&mut s).await;
    let cursor = first.doc.get_document("cursor").unwrap();
    let id = cursor.get_i64("id").unwrap();
    assert_ne!(id, 0);
    let get_more = doc! { "getMore": id, "collection": "exhaust", "batchSize": 2, "$db": "wire" };
    s.write_all(&op_msg(2, EXHAUST_ALLOWED, &body_section(&get_more)))
        .await
        .unwrap();
    let mut seen = vec![];
    let mut answers = 2;
    loop {
        let reply = read_reply(&mut s).await;
        assert_eq!(
            reply.response_to, answers,
            "each batch answers the one before"
        );
        answers = reply.request_id;
        let cursor = reply.doc.get_document("cursor").unwrap();
        for d in cursor.get_array("nextBatch").unwrap() {
            seen.push(d.as_document().unwrap().get_i32("_id").unwrap());
        }
        let open = cursor.get_i64("id").unwrap() != 0;
        assert_eq!(
            reply.flags & MORE_TO_COME != 0,
            open,
            "moreToCome while open"
        );
        if !open {
            break;
        }
    }
    assert_eq!(seen, vec![2, 3, 4, 5, 6]);
    // The connection is the client's again.
    s.write_all(&command(3, &doc! { "ping": 1, "$db": "admin" }))
        .await
        .unwrap();
    assert_eq!(read_reply(&mut s).await.response_to, 3);
    server.shutdown().await;
}

/// Frames that are wrong in one specific way each.
fn malformed_frames() -> Vec<(&'static str, Vec<u8>)> {
    let ping = doc! { "ping": 1, "$db": "admin" };
    let good = command(1, &ping);
    let mut frames = Vec::new();

    let mut m = good.clone();
    m[..4].copy_from_slice(&5i32.to_le_bytes());
    frames.push(("length below the header size", m));
    let mut m = good.clone();
    m[..4].copy_from_slice(&(-20i32).to_le_bytes());
    frames.push(("negative length", m));
    frames.push((
        "length above maxMessageSizeBytes",
        48_000_001i32.to_le_bytes().to_vec(),
    ));

    let mut m = op_msg(1, CHECKSUM_PRESENT, &body_section(&ping));
    let last = m.len() - 1;
    m[last] ^= 0x5a;
    frames.push(("bad checksum", m));

    frames.push(("unknown opcode", frame(1, 4242, &[0u8; 24])));
    frames.push((
        "legacy OP_INSERT",
        frame(
            1,
            OP_INSERT,
            &[0, 0, 0, 0, b'a', b'.', b'b', 0, 5, 0, 0, 0, 0],
        ),
    ));
    frames.push((
        "OP_QUERY on a collection",
        op_query(1, "shop.items", &doc! {}),
    ));

    let two = [body_section(&ping), body_section(&ping)].concat();
    frames.push(("two body sections", op_msg(1, 0, &two)));
    frames.push((
        "no body section",
        op_msg(1, 0, &sequence_section("documents", &[doc! {}])),
    ));
    frames.push((
        "unknown required flag bit",
        op_msg(1, 1 << 5, &body_section(&ping)),
    ));
    let mut sections = body_section(&ping);
    sections.extend([9u8, 5, 0, 0, 0, 0]);
    frames.push(("unknown section kind", op_msg(1, 0, &sections)));

    // The body claims more bytes than the message holds.
    let mut m = good.clone();
    let doc_len = le_i32(&m, 21);
    m[21..25].copy_from_slice(&(doc_len + 50).to_le_bytes());
    frames.push(("body document overruns the message", m));

    // Valid framing, broken BSON: an int32 element without its value.
    let bad_bson = [11u8, 0, 0, 0, 0x10, b'a', 0, 1, 0, 0, 0];
    let mut sections = vec![0u8];
    sections.extend(bad_bson);
    frames.push(("invalid BSON in the body", op_msg(1, 0, &sections)));
    frames
}

#[tokio::test]
async fn malformed_frames_close_only_their_own_connection() {
    let server = start().await;
    let client = driver(&server).await;
    driver_ping(&client).await;
    // A connection opened before the bad ones must survive them all.
    let mut bystander = connect(&server).await;
    for (i, (what, bytes)) in malformed_frames().into_iter().enumerate() {
        let mut s = connect(&server).await;
        s.write_all(&bytes).await.unwrap();
        let got = expect_closed(&mut s, what).await;
        assert_eq!(got, 0, "{what}: no reply is sent before closing");
        driver_ping(&client).await;
        bystander
            .write_all(&command(i as i32, &doc! { "ping": 1, "$db": "admin" }))
            .await
            .unwrap();
        assert_eq!(read_reply(&mut bystander).await.response_to, i as i32);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_truncated_message_closes_the_connection_when_the_client_stops_sending() {
    let server = start().await;
    let client = driver(&server).await;
    let good = command(1, &doc! { "ping": 1, "$db": "admin" });
    for cut in [1, 3, 4, 10, 16, 20, good.len() - 1] {
        let mut s = connect(&server).await;
        s.write_all(&good[..cut]).await.unwrap();
        s.shutdown().await.unwrap();
        assert_eq!(expect_closed(&mut s, "truncated").await, 0, "cut at {cut}");
    }
    driver_ping(&client).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_body_over_the_internal_document_limit_closes_the_connection() {
    let server = start().await;
    let client = driver(&server).await;
    let big = doc! { "ping": 1, "$db": "admin", "blob": "x".repeat(16 * 1024 * 1024 + 16 * 1024) };
    let mut s = connect(&server).await;
    // The server may close before reading everything; a failed write is fine then.
    let _ = s.write_all(&command(1, &big)).await;
    expect_closed(&mut s, "oversized body").await;
    driver_ping(&client).await;
    server.shutdown().await;
}

#[tokio::test]
async fn random_bytes_of_many_lengths_never_disturb_other_clients() {
    let server = start().await;
    let client = driver(&server).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(20_240_613);
    let mut lengths: Vec<usize> = (0..40).collect();
    lengths.extend([64, 100, 255, 256, 1000, 4096, 65_536]);
    for len in lengths {
        for variant in 0..3 {
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            // Also make frames that pass the length check, so the parsers see the noise.
            if variant > 0 && len >= 16 {
                bytes[..4].copy_from_slice(&(len as i32).to_le_bytes());
                let op = if variant == 1 { OP_MSG } else { OP_QUERY };
                bytes[12..16].copy_from_slice(&op.to_le_bytes());
            }
            let mut s = connect(&server).await;
            let _ = s.write_all(&bytes).await;
            let _ = s.shutdown().await;
            expect_closed(&mut s, "random bytes").await;
        }
        driver_ping(&client).await;
    }
    server.shutdown().await;
}

#[tokio::test]
async fn two_hundred_concurrent_connections_are_all_served() {
    let server = start().await;
    let mut streams = Vec::new();
    for _ in 0..200 {
        streams.push(connect(&server).await);
    }
    // Every connection is counted while open.
    let mut probe = connect(&server).await;
    probe
        .write_all(&command(1, &doc! { "serverStatus": 1, "$db": "admin" }))
        .await
        .unwrap();
    let status = read_reply(&mut probe).await.doc;
    let current = status
        .get_document("connections")
        .and_then(|c| c.get_i32("current"))
        .expect("connections.current");
    assert!(current >= 201, "{status:?}");

    let tasks: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            tokio::spawn(async move {
                for round in 0..5 {
                    let id = (i * 10 + round) as i32;
                    s.write_all(&command(id, &doc! { "ping": 1, "$db": "admin" }))
                        .await
                        .unwrap();
                    let r = read_reply(&mut s).await;
                    assert_eq!(r.response_to, id);
                    assert_eq!(r.doc.get_f64("ok").ok(), Some(1.0));
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("every connection is served");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_open_connections_and_stops_listening() {
    let server = start().await;
    let addr = server.local_addr();
    let mut idle = connect(&server).await;
    idle.write_all(&command(1, &doc! { "ping": 1, "$db": "admin" }))
        .await
        .unwrap();
    read_reply(&mut idle).await;
    tokio::time::timeout(WAIT, server.shutdown())
        .await
        .expect("shutdown finishes promptly");
    expect_closed(&mut idle, "idle connection at shutdown").await;
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn dropping_the_handle_stops_the_server_without_panicking() {
    let server = start().await;
    let addr = server.local_addr();
    let mut s = connect(&server).await;
    drop(server);
    expect_closed(&mut s, "connection after the handle was dropped").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while TcpStream::connect(addr).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "still listening");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
