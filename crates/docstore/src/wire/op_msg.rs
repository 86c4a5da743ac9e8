//! OP_MSG (opcode 2013): flag bits, the body section, document sequences merged into the command,
//! and the optional CRC-32C checksum.

use super::{
    check_request_document, decode_request_document, document_len, finish_message, next_request_id,
    read_cstring, write_document, Header, ReplyTarget, WireError, HEADER_LEN, OP_MSG,
};
use bson::{Bson, Document};
use std::sync::Arc;

/// The message ends with a CRC-32C of everything before it.
pub const CHECKSUM_PRESENT: u32 = 1 << 0;
/// The sender will not wait for a reply (unacknowledged writes).
pub const MORE_TO_COME: u32 = 1 << 1;
/// The client accepts a stream of replies (awaitable `hello`); docstore replies once anyway.
pub(super) const EXHAUST_ALLOWED: u32 = 1 << 16;

/// Bits 0-15 are "required": a receiver that does not know one must fail.
const REQUIRED_BITS: u32 = 0xFFFF;
const KNOWN_REQUIRED_BITS: u32 = CHECKSUM_PRESENT | MORE_TO_COME;

/// A parsed OP_MSG request: the body with every document sequence merged in as an array field,
/// but for an `insert`'s `documents` when the parse was asked to keep them as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg {
    pub header: Header,
    pub flags: u32,
    pub body: Document,
    /// An `insert`'s `documents` sequence, each document as the bytes the client sent (checked
    /// as fully as decoding checks them), left out of `body`: the insert command stores them
    /// without decoding ([`parse_keeping_inserts`](super::parse_keeping_inserts)).
    pub documents: Option<Vec<Arc<[u8]>>>,
}

impl OpMsg {
    pub fn checksum_present(&self) -> bool {
        self.flags & CHECKSUM_PRESENT != 0
    }

    pub fn more_to_come(&self) -> bool {
        self.flags & MORE_TO_COME != 0
    }

    pub fn exhaust_allowed(&self) -> bool {
        self.flags & EXHAUST_ALLOWED != 0
    }
}

/// Parses the OP_MSG in `bytes` (whole message, length already checked against `header`); with
/// `keep_inserts`, an `insert`'s `documents` sequence is kept as sent ([`OpMsg::documents`]).
pub(super) fn parse(header: Header, bytes: &[u8], keep_inserts: bool) -> Result<OpMsg, WireError> {
    let flags = super::read_i32(bytes, HEADER_LEN)
        .map(|f| f as u32)
        .ok_or_else(|| WireError::malformed("OP_MSG too short for its flag bits"))?;
    let unknown = flags & REQUIRED_BITS & !KNOWN_REQUIRED_BITS;
    if unknown != 0 {
        return Err(WireError::malformed(format!(
            "OP_MSG contains unknown required flag bits {unknown:#x}"
        )));
    }
    let mut end = bytes.len();
    if flags & CHECKSUM_PRESENT != 0 {
        if end < HEADER_LEN + 4 + 4 {
            return Err(WireError::malformed("OP_MSG too short for its checksum"));
        }
        end -= 4;
        let expected =
            u32::from_le_bytes([bytes[end], bytes[end + 1], bytes[end + 2], bytes[end + 3]]);
        if crc32c::crc32c(&bytes[..end]) != expected {
            return Err(WireError::malformed(
                "OP_MSG checksum does not match contents",
            ));
        }
    }
    let target = ReplyTarget {
        request_id: header.request_id,
        legacy: false,
        more_to_come: flags & MORE_TO_COME != 0,
        checksum: flags & CHECKSUM_PRESENT != 0,
    };

    let mut body: Option<Document> = None;
    // Each sequence's documents as ranges of `bytes`, checked as they are met (so errors come
    // in message order) and decoded, or kept as sent, once the body says which command it is.
    let mut sequences: Vec<(String, Vec<std::ops::Range<usize>>)> = Vec::new();
    let mut pos = HEADER_LEN + 4;
    while pos < end {
        let kind = bytes[pos];
        pos += 1;
        match kind {
            0 => {
                let len = document_len(bytes, pos, end)?;
                if body.is_some() {
                    return Err(WireError::malformed(
                        "OP_MSG has more than one body section",
                    ));
                }
                body = Some(decode_request_document(&bytes[pos..pos + len], target)?);
                pos += len;
            }
            1 => {
                let size = super::read_i32(bytes, pos)
                    .and_then(|s| usize::try_from(s).ok())
                    .filter(|s| (5..=end - pos).contains(s))
                    .ok_or_else(|| {
                        WireError::malformed("document sequence size overruns the message")
                    })?;
                let section_end = pos + size;
                let (identifier, mut at) = read_cstring(&bytes[..section_end], pos + 4)?;
                if identifier.is_empty() {
                    return Err(WireError::malformed(
                        "document sequence without an identifier",
                    ));
                }
                if sequences.iter().any(|(id, _)| id == identifier) {
                    return Err(WireError::malformed(format!(
                        "duplicate document sequence '{identifier}'"
                    )));
                }
                let mut docs = Vec::new();
                while at < section_end {
                    let len = document_len(bytes, at, section_end)?;
                    check_request_document(&bytes[at..at + len], target)?;
                    docs.push(at..at + len);
                    at += len;
                }
                sequences.push((identifier.to_string(), docs));
                pos = section_end;
            }
            other => {
                return Err(WireError::malformed(format!(
                    "unknown OP_MSG section kind {other}"
                )))
            }
        }
    }
    let mut body = body.ok_or_else(|| WireError::malformed("OP_MSG has no body section"))?;
    let inserting = keep_inserts && body.keys().next().map(String::as_str) == Some("insert");
    let mut documents = None;
    for (identifier, docs) in sequences {
        if body.contains_key(&identifier) {
            return Err(WireError::malformed(format!(
                "field '{identifier}' is both in the body and a document sequence"
            )));
        }
        if inserting && identifier == "documents" {
            documents = Some(docs.into_iter().map(|r| Arc::from(&bytes[r])).collect());
            continue;
        }
        let docs = docs
            .into_iter()
            .map(|r| decode_request_document(&bytes[r], target).map(Bson::Document))
            .collect::<Result<Vec<_>, _>>()?;
        body.insert(identifier, Bson::Array(docs));
    }
    Ok(OpMsg {
        header,
        flags,
        body,
        documents,
    })
}

/// Encodes a reply: flags 0 (or checksumPresent when `checksum`), one body section.
pub fn encode_op_msg(response_to: i32, body: &Document, checksum: bool) -> Vec<u8> {
    encode_with(response_to, checksum, false, 64, |out| {
        write_document(out, body)
    })
}

/// [`encode_op_msg`] of a body already encoded as BSON (copied as it is).
pub(crate) fn encode_op_msg_bytes(response_to: i32, body: &[u8], checksum: bool) -> Vec<u8> {
    encode_op_msg_streamed(response_to, body, checksum, false)
}

/// [`encode_op_msg_bytes`], with `moreToCome` set when `more_to_come`: one reply of an exhaust
/// cursor's stream, after which the server sends the next without being asked.
pub(crate) fn encode_op_msg_streamed(
    response_to: i32,
    body: &[u8],
    checksum: bool,
    more_to_come: bool,
) -> Vec<u8> {
    encode_with(
        response_to,
        checksum,
        more_to_come,
        body.len() + 32,
        |out| out.extend_from_slice(body),
    )
}

/// The `requestID` of an encoded message (what the next message of a stream answers to).
pub(crate) fn request_id_of(message: &[u8]) -> i32 {
    message
        .get(4..8)
        .map_or(0, |b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn encode_with(
    response_to: i32,
    checksum: bool,
    more_to_come: bool,
    capacity: usize,
    write_body: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    Header {
        message_length: 0,
        request_id: next_request_id(),
        response_to,
        op_code: OP_MSG,
    }
    .write(&mut out);
    let mut flags = if checksum { CHECKSUM_PRESENT } else { 0 };
    if more_to_come {
        flags |= MORE_TO_COME;
    }
    out.extend_from_slice(&flags.to_le_bytes());
    out.push(0);
    write_body(&mut out);
    if checksum {
        // The length must be final before the checksum covers it.
        let len = i32::try_from(out.len() + 4).unwrap_or(i32::MAX);
        out[..4].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        return out;
    }
    finish_message(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::bytes_of;
    use super::super::{parse_message, Message};
    use super::*;
    use bson::doc;

    /// Builds an OP_MSG from raw section bytes, optionally with a (correct) checksum.
    fn raw_msg(request_id: i32, flags: u32, sections: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Header {
            message_length: 0,
            request_id,
            response_to: 0,
            op_code: OP_MSG,
        }
        .write(&mut out);
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(sections);
        let checksum = flags & CHECKSUM_PRESENT != 0;
        let len = out.len() + if checksum { 4 } else { 0 };
        out[..4].copy_from_slice(&(len as i32).to_le_bytes());
        if checksum {
            let crc = crc32c::crc32c(&out);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        out
    }

    fn body_section(d: &Document) -> Vec<u8> {
        let mut s = vec![0u8];
        s.extend(bytes_of(d));
        s
    }

    fn sequence_section(id: &str, docs: &[Document]) -> Vec<u8> {
        let mut payload = id.as_bytes().to_vec();
        payload.push(0);
        for d in docs {
            payload.extend(bytes_of(d));
        }
        let mut s = vec![1u8];
        s.extend(((payload.len() + 4) as i32).to_le_bytes());
        s.extend(payload);
        s
    }

    fn parse_msg(bytes: &[u8]) -> Result<OpMsg, WireError> {
        match parse_message(bytes)? {
            Message::Msg(m) => Ok(m),
            other => panic!("expected OP_MSG, got {other:?}"),
        }
    }

    #[test]
    fn an_encoded_reply_parses_back_to_the_same_document() {
        let d = doc! { "ok": 1.0, "n": 3, "nested": { "a": [1, 2] } };
        for checksum in [false, true] {
            let bytes = encode_op_msg(42, &d, checksum);
            let msg = parse_msg(&bytes).expect("round trip");
            assert_eq!(msg.body, d);
            assert_eq!(msg.header.response_to, 42);
            assert_eq!(msg.header.message_length as usize, bytes.len());
            assert_eq!(msg.checksum_present(), checksum);
            assert!(!msg.more_to_come());
        }
    }

    #[test]
    fn document_sequences_are_merged_into_the_body_as_arrays() {
        let mut sections = body_section(&doc! { "insert": "items", "$db": "shop" });
        sections.extend(sequence_section(
            "documents",
            &[doc! { "_id": 1 }, doc! { "_id": 2, "x": "y" }],
        ));
        sections.extend(sequence_section("empty", &[]));
        let msg = parse_msg(&raw_msg(5, 0, &sections)).expect("valid");
        assert_eq!(
            msg.body,
            doc! {
                "insert": "items", "$db": "shop",
                "documents": [{ "_id": 1 }, { "_id": 2, "x": "y" }],
                "empty": [],
            }
        );
    }

    #[test]
    fn the_server_keeps_an_inserts_documents_as_sent_and_merges_other_sequences() {
        let docs = [doc! { "_id": 1 }, doc! { "_id": 2, "x": "y" }];
        let mut sections = sequence_section("documents", &docs);
        sections.extend(body_section(&doc! { "insert": "items", "$db": "shop" }));
        let bytes = raw_msg(5, 0, &sections);
        let Ok(super::super::Message::Msg(msg)) = super::super::parse_keeping_inserts(&bytes)
        else {
            panic!("valid");
        };
        assert_eq!(msg.body, doc! { "insert": "items", "$db": "shop" });
        let sent: Vec<Vec<u8>> = docs.iter().map(|d| bson::to_vec(d).unwrap()).collect();
        let kept: Vec<Vec<u8>> = msg.documents.unwrap().iter().map(|d| d.to_vec()).collect();
        assert_eq!(kept, sent);
        let mut sections = body_section(&doc! { "delete": "c", "$db": "d" });
        sections.extend(sequence_section("deletes", &[doc! { "q": {}, "limit": 0 }]));
        let Ok(super::super::Message::Msg(msg)) =
            super::super::parse_keeping_inserts(&raw_msg(6, 0, &sections))
        else {
            panic!("valid");
        };
        assert_eq!(msg.documents, None);
        assert_eq!(msg.body.get_array("deletes").map(|a| a.len()).ok(), Some(1));
    }

    #[test]
    fn a_sequence_may_come_before_the_body() {
        let mut sections = sequence_section("deletes", &[doc! { "q": {}, "limit": 0 }]);
        sections.extend(body_section(&doc! { "delete": "c", "$db": "d" }));
        let msg = parse_msg(&raw_msg(5, 0, &sections)).expect("valid");
        assert_eq!(msg.body.get_str("delete").ok(), Some("c"));
        assert_eq!(msg.body.get_array("deletes").map(|a| a.len()).ok(), Some(1));
    }

    #[test]
    fn a_correct_checksum_is_accepted_and_a_wrong_one_rejected() {
        let sections = body_section(&doc! { "ping": 1, "$db": "admin" });
        let good = raw_msg(1, CHECKSUM_PRESENT, &sections);
        assert!(parse_msg(&good).is_ok());
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xFF;
        assert!(matches!(parse_message(&bad), Err(WireError::Malformed(_))));
        let mut tampered = good;
        tampered[HEADER_LEN + 10] ^= 1;
        assert!(matches!(
            parse_message(&tampered),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn flag_bits_are_reported() {
        let sections = body_section(&doc! { "ping": 1, "$db": "admin" });
        let msg = parse_msg(&raw_msg(1, MORE_TO_COME | EXHAUST_ALLOWED, &sections)).unwrap();
        assert!(msg.more_to_come());
        assert!(msg.exhaust_allowed());
        assert!(!msg.checksum_present());
    }

    #[test]
    fn unknown_required_flag_bits_are_a_protocol_error_but_optional_ones_are_not() {
        let sections = body_section(&doc! { "ping": 1, "$db": "admin" });
        for bit in 2..16 {
            assert!(
                parse_message(&raw_msg(1, 1 << bit, &sections)).is_err(),
                "bit {bit}"
            );
        }
        assert!(parse_message(&raw_msg(1, 1 << 20, &sections)).is_ok());
    }

    #[test]
    fn exactly_one_body_section_is_required() {
        let one = body_section(&doc! { "ping": 1, "$db": "admin" });
        let two = [one.clone(), one].concat();
        assert!(parse_message(&raw_msg(1, 0, &two)).is_err());
        let none = sequence_section("documents", &[doc! {}]);
        assert!(parse_message(&raw_msg(1, 0, &none)).is_err());
        assert!(parse_message(&raw_msg(1, 0, &[])).is_err());
    }

    #[test]
    fn duplicate_sequences_and_sequence_body_clashes_are_errors() {
        let body = body_section(&doc! { "insert": "c", "$db": "d", "documents": [] });
        let seq = sequence_section("documents", &[doc! {}]);
        assert!(parse_message(&raw_msg(1, 0, &[body, seq.clone()].concat())).is_err());
        let body = body_section(&doc! { "insert": "c", "$db": "d" });
        assert!(parse_message(&raw_msg(1, 0, &[body, seq.clone(), seq].concat())).is_err());
    }

    #[test]
    fn unknown_section_kinds_are_errors() {
        let mut sections = body_section(&doc! { "ping": 1, "$db": "admin" });
        sections.extend([2u8, 5, 0, 0, 0, 0]);
        assert!(parse_message(&raw_msg(1, 0, &sections)).is_err());
    }

    #[test]
    fn sequence_sizes_are_checked_against_the_message() {
        let body = body_section(&doc! { "insert": "c", "$db": "d" });
        let mut seq = sequence_section("documents", &[doc! { "a": 1 }]);
        // Claim one more byte than there is.
        let size = i32::from_le_bytes([seq[1], seq[2], seq[3], seq[4]]) + 1;
        seq[1..5].copy_from_slice(&size.to_le_bytes());
        assert!(parse_message(&raw_msg(1, 0, &[body.clone(), seq].concat())).is_err());
        // A document inside the sequence that claims to run past the sequence's end.
        let mut seq = sequence_section("documents", &[doc! { "a": 1 }]);
        let doc_at = 1 + 4 + "documents".len() + 1;
        seq[doc_at] += 1;
        assert!(parse_message(&raw_msg(1, 0, &[body.clone(), seq].concat())).is_err());
        // Identifier without a terminating NUL inside the section.
        let seq = [1u8, 7, 0, 0, 0, b'a', b'b', b'c'];
        assert!(parse_message(&raw_msg(1, 0, &[body, seq.to_vec()].concat())).is_err());
    }

    #[test]
    fn every_truncation_of_a_valid_message_is_an_error_not_a_panic() {
        let mut sections = body_section(&doc! { "insert": "c", "$db": "d" });
        sections.extend(sequence_section("documents", &[doc! { "a": 1 }, doc! {}]));
        let full = raw_msg(3, CHECKSUM_PRESENT, &sections);
        for cut in 0..full.len() {
            let mut m = full[..cut].to_vec();
            if m.len() >= 4 {
                // Keep the header honest so that the section parser itself is exercised.
                let n = m.len() as i32;
                m[..4].copy_from_slice(&n.to_le_bytes());
            }
            assert!(parse_message(&m).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn seeded_random_mutations_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x0d0c_5703);
        let mut sections = body_section(&doc! { "insert": "c", "$db": "d", "o": { "k": [1] } });
        sections.extend(sequence_section("documents", &[doc! { "a": 1 }, doc! {}]));
        let base = raw_msg(3, 0, &sections);
        for _ in 0..20_000 {
            let mut m = base.clone();
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(4..m.len());
                m[i] = rng.gen();
            }
            let _ = parse_message(&m);
        }
        for len in 0..300usize {
            let mut m: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if len >= 16 {
                m[..4].copy_from_slice(&(len as i32).to_le_bytes());
                m[12..16].copy_from_slice(&OP_MSG.to_le_bytes());
            }
            let _ = parse_message(&m);
        }
    }

    #[test]
    fn too_deep_documents_are_rejected_with_a_reply_target() {
        let mut d = doc! { "x": 1 };
        for _ in 0..250 {
            d = doc! { "x": d };
        }
        let body = body_section(&doc! { "insert": "c", "$db": "d", "doc": d });
        match parse_message(&raw_msg(77, MORE_TO_COME, &body)) {
            Err(WireError::Rejected { target, error }) => {
                assert_eq!(target.request_id, 77);
                assert!(target.more_to_come);
                assert!(!target.legacy);
                assert_eq!(error.code_number(), 15);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
