//! Legacy OP_QUERY (opcode 2004), kept only for the `<db>.$cmd` handshake that older drivers and
//! shells send first, and the OP_REPLY (opcode 1) that answers it.

use super::{
    decode_request_document, document_len, finish_message, next_request_id, read_cstring, read_i32,
    write_document, Header, ReplyTarget, WireError, HEADER_LEN, OP_REPLY,
};
use bson::{Bson, Document};

/// Commands MongoDB 7.0 still accepts over OP_QUERY (`checkAllowedOpQueryCommand`); any other
/// gets error 352 UnsupportedOpQueryCommand.
pub(crate) const OP_QUERY_ALLOWED_COMMANDS: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "_isSelf",
    "authenticate",
    "buildinfo",
    "buildInfo",
    "saslContinue",
    "saslStart",
];

/// OP_REPLY `responseFlags` bit MongoDB sets on every reply it sends.
const AWAIT_CAPABLE: i32 = 1 << 3;

/// A parsed OP_QUERY.
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    pub header: Header,
    pub flags: i32,
    pub full_collection_name: String,
    pub number_to_skip: i32,
    pub number_to_return: i32,
    pub query: Document,
    pub return_fields_selector: Option<Document>,
}

impl OpQuery {
    /// The database of a `<db>.$cmd` query; `None` for a query on a collection.
    pub fn command_database(&self) -> Option<&str> {
        self.full_collection_name
            .strip_suffix(".$cmd")
            .filter(|db| !db.is_empty())
    }

    /// The command document, unwrapped from `{ $query: {...}, $readPreference: ... }` when the
    /// driver wrapped it.
    pub fn into_command(self) -> Document {
        let mut query = self.query;
        if query.keys().next().map(String::as_str) == Some("$query") {
            if let Some(Bson::Document(inner)) = query.remove("$query") {
                return inner;
            }
        }
        query
    }
}

pub(super) fn parse(header: Header, bytes: &[u8]) -> Result<OpQuery, WireError> {
    let truncated = || WireError::malformed("OP_QUERY is truncated");
    let flags = read_i32(bytes, HEADER_LEN).ok_or_else(truncated)?;
    let (name, pos) = read_cstring(bytes, HEADER_LEN + 4)?;
    let number_to_skip = read_i32(bytes, pos).ok_or_else(truncated)?;
    let number_to_return = read_i32(bytes, pos + 4).ok_or_else(truncated)?;
    let target = ReplyTarget {
        request_id: header.request_id,
        legacy: true,
        more_to_come: false,
        checksum: false,
    };
    let end = bytes.len();
    let mut at = pos + 8;
    let len = document_len(bytes, at, end)?;
    let query = decode_request_document(&bytes[at..at + len], target)?;
    at += len;
    let return_fields_selector = if at < end {
        let len = document_len(bytes, at, end)?;
        let selector = decode_request_document(&bytes[at..at + len], target)?;
        at += len;
        Some(selector)
    } else {
        None
    };
    if at != end {
        return Err(WireError::malformed("trailing bytes after OP_QUERY"));
    }
    Ok(OpQuery {
        header,
        flags,
        full_collection_name: name.to_string(),
        number_to_skip,
        number_to_return,
        query,
        return_fields_selector,
    })
}

/// Encodes the OP_REPLY carrying one command reply document.
pub(crate) fn encode_op_reply(response_to: i32, reply: &Document) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    Header {
        message_length: 0,
        request_id: next_request_id(),
        response_to,
        op_code: OP_REPLY,
    }
    .write(&mut out);
    out.extend_from_slice(&AWAIT_CAPABLE.to_le_bytes()); // responseFlags
    out.extend_from_slice(&0i64.to_le_bytes()); // cursorID
    out.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
    out.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
    write_document(&mut out, reply);
    finish_message(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::bytes_of;
    use super::super::{parse_message, Message, OP_QUERY};
    use super::*;
    use bson::doc;

    fn raw_query(ns: &str, query: &Document, selector: Option<&Document>) -> Vec<u8> {
        let mut out = Vec::new();
        Header {
            message_length: 0,
            request_id: 11,
            response_to: 0,
            op_code: OP_QUERY,
        }
        .write(&mut out);
        out.extend_from_slice(&0i32.to_le_bytes());
        out.extend_from_slice(ns.as_bytes());
        out.push(0);
        out.extend_from_slice(&0i32.to_le_bytes());
        out.extend_from_slice(&(-1i32).to_le_bytes());
        out.extend(bytes_of(query));
        if let Some(s) = selector {
            out.extend(bytes_of(s));
        }
        finish_message(out)
    }

    fn parse_query(bytes: &[u8]) -> Result<OpQuery, WireError> {
        match parse_message(bytes)? {
            Message::Query(q) => Ok(q),
            other => panic!("expected OP_QUERY, got {other:?}"),
        }
    }

    #[test]
    fn a_cmd_query_names_its_database_and_command() {
        let q = parse_query(&raw_query(
            "admin.$cmd",
            &doc! { "isMaster": 1, "helloOk": true },
            None,
        ))
        .expect("valid");
        assert_eq!(q.header.request_id, 11);
        assert_eq!(q.number_to_return, -1);
        assert_eq!(q.command_database(), Some("admin"));
        assert_eq!(q.into_command(), doc! { "isMaster": 1, "helloOk": true });
    }

    #[test]
    fn a_wrapped_query_is_unwrapped() {
        let wrapped = doc! {
            "$query": { "ismaster": 1 },
            "$readPreference": { "mode": "secondaryPreferred" },
        };
        let q = parse_query(&raw_query("test.$cmd", &wrapped, None)).expect("valid");
        assert_eq!(q.into_command(), doc! { "ismaster": 1 });
    }

    #[test]
    fn a_collection_query_has_no_command_database() {
        let q =
            parse_query(&raw_query("shop.items", &doc! {}, Some(&doc! { "a": 1 }))).expect("valid");
        assert_eq!(q.command_database(), None);
        assert_eq!(q.return_fields_selector, Some(doc! { "a": 1 }));
        let q = parse_query(&raw_query(".$cmd", &doc! { "ping": 1 }, None)).expect("valid");
        assert_eq!(q.command_database(), None);
    }

    #[test]
    fn trailing_bytes_and_truncation_are_errors() {
        let good = raw_query("admin.$cmd", &doc! { "isMaster": 1 }, None);
        let mut extra = good.clone();
        extra.extend([1, 2, 3]);
        let n = extra.len() as i32;
        extra[..4].copy_from_slice(&n.to_le_bytes());
        assert!(parse_message(&extra).is_err());
        for cut in 16..good.len() {
            let mut m = good[..cut].to_vec();
            m[..4].copy_from_slice(&(cut as i32).to_le_bytes());
            assert!(parse_message(&m).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn the_reply_is_an_op_reply_with_one_document() {
        let reply = doc! { "ismaster": true, "ok": 1.0 };
        let bytes = encode_op_reply(11, &reply);
        let h = Header::parse(&bytes).expect("header");
        assert_eq!(h.message_length as usize, bytes.len());
        assert_eq!((h.response_to, h.op_code), (11, OP_REPLY));
        assert_eq!(read_i32(&bytes, 16), Some(AWAIT_CAPABLE));
        assert_eq!(&bytes[20..28], &[0u8; 8]);
        assert_eq!(read_i32(&bytes, 28), Some(0));
        assert_eq!(read_i32(&bytes, 32), Some(1));
        let doc = Document::from_reader(&bytes[36..]).expect("document");
        assert_eq!(doc, reply);
    }
}
