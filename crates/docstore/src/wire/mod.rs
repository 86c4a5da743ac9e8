//! The MongoDB wire protocol: message headers, OP_MSG (sections, checksum, flags), the legacy
//! OP_QUERY handshake and its OP_REPLY answer. Parsing never trusts a length it has not checked.

pub(crate) mod op_msg;
mod op_query;

pub(crate) use op_msg::{
    encode_op_msg, encode_op_msg_bytes, encode_op_msg_streamed, request_id_of, OpMsg,
};
pub(crate) use op_query::{encode_op_reply, OpQuery, OP_QUERY_ALLOWED_COMMANDS};

use crate::bson_depth::{self, BsonError};
use crate::error::{Error, ErrorCode};
use bson::Document;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::io::{AsyncRead, AsyncReadExt};

pub(crate) const OP_REPLY: i32 = 1;
pub(crate) const OP_UPDATE: i32 = 2001;
pub(crate) const OP_INSERT: i32 = 2002;
pub const OP_QUERY: i32 = 2004;
pub(crate) const OP_GET_MORE: i32 = 2005;
pub(crate) const OP_DELETE: i32 = 2006;
pub(crate) const OP_KILL_CURSORS: i32 = 2007;
pub(crate) const OP_COMPRESSED: i32 = 2012;
pub const OP_MSG: i32 = 2013;

/// The header every message starts with.
pub(crate) const HEADER_LEN: usize = 16;
/// `maxMessageSizeBytes` advertised in `hello`; longer messages close the connection.
pub(crate) const MAX_MESSAGE_SIZE: usize = 48_000_000;
/// `maxBsonObjectSize` advertised in `hello` (the limit for stored documents).
pub(crate) const MAX_BSON_OBJECT_SIZE: usize = 16 * 1024 * 1024;
/// A document on the wire may exceed the user limit by this much, so that a command can carry a
/// maximum-size document plus its own fields (MongoDB's `BSONObjMaxInternalSize`).
pub(crate) const MAX_WIRE_DOCUMENT_SIZE: usize = MAX_BSON_OBJECT_SIZE + 16 * 1024;
/// Deepest nesting accepted in a received document (MongoDB's default `maxBSONDepth`); the same
/// check guards every other path that reads BSON (see [`bson_depth`]).
pub(crate) use crate::bson_depth::MAX_BSON_DEPTH;

/// The longest message a connection may send before it has authenticated, when authentication
/// is on. Everything a driver sends before that is small: the handshake (`hello` with client
/// metadata, which the drivers' handshake specification caps at 512 bytes, and a speculative
/// SCRAM first step) and the SCRAM steps, each well under 2 KiB. Without this an unauthenticated
/// peer could announce a 48 MB frame and make the server buffer it; 64 KiB leaves room for
/// unusual clients while keeping what unauthenticated connections can hold to
/// `max_connections` × 64 KiB (64 MiB at the default 1 000). A longer frame closes the
/// connection before its body is read, as a malformed one does.
pub(crate) const MAX_UNAUTHENTICATED_MESSAGE_SIZE: usize = 64 * 1024;

/// A buffer that grew past this for one big message is released afterwards rather than kept
/// for the life of the connection.
pub(crate) const RETAINED_BUFFER_CAPACITY: usize = 1024 * 1024;

/// `messageLength, requestID, responseTo, opCode`, all little-endian int32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub message_length: i32,
    pub request_id: i32,
    pub response_to: i32,
    pub op_code: i32,
}

impl Header {
    /// Reads the header at the start of `bytes`, if there are enough of them.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        Some(Header {
            message_length: read_i32(bytes, 0)?,
            request_id: read_i32(bytes, 4)?,
            response_to: read_i32(bytes, 8)?,
            op_code: read_i32(bytes, 12)?,
        })
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.message_length.to_le_bytes());
        out.extend_from_slice(&self.request_id.to_le_bytes());
        out.extend_from_slice(&self.response_to.to_le_bytes());
        out.extend_from_slice(&self.op_code.to_le_bytes());
    }
}

/// A request docstore serves.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Msg(OpMsg),
    Query(OpQuery),
}

/// Which reply shape an erroneous but well-framed request expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyTarget {
    pub request_id: i32,
    /// OP_QUERY requests are answered with OP_REPLY.
    pub legacy: bool,
    /// OP_MSG `moreToCome`: the client wants no answer at all.
    pub more_to_come: bool,
    /// OP_MSG `checksumPresent`: the answer carries a checksum too.
    pub checksum: bool,
}

/// Why a message could not be served.
#[derive(Debug)]
pub enum WireError {
    /// The socket failed or the peer vanished mid-message.
    Io(io::Error),
    /// The bytes are not a valid message; the connection must close.
    Malformed(String),
    /// A legacy or unknown opcode docstore does not serve; the connection must close.
    UnsupportedOpCode(i32),
    /// A frame longer than the connection may send yet (it has not authenticated); the
    /// connection must close, and the body was not read.
    TooLarge { length: usize, limit: usize },
    /// The frame is sound but a document in it is not acceptable: the client gets this error as
    /// the command's reply and the connection stays open.
    Rejected {
        target: ReplyTarget,
        error: Box<Error>,
    },
}

impl WireError {
    fn malformed(message: impl Into<String>) -> Self {
        WireError::Malformed(message.into())
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Io(e) => write!(f, "i/o error: {e}"),
            WireError::Malformed(m) => write!(f, "malformed message: {m}"),
            WireError::UnsupportedOpCode(op) => {
                write!(f, "unsupported opcode {op} ({})", op_code_name(*op))
            }
            WireError::Rejected { error, .. } => write!(f, "request rejected: {error}"),
            WireError::TooLarge { length, limit } => write!(
                f,
                "a message of {length} bytes from a connection that has not authenticated \
                 (at most {limit} bytes before authentication)"
            ),
        }
    }
}

impl std::error::Error for WireError {}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> Self {
        WireError::Io(e)
    }
}

/// Name of an opcode, for log messages.
pub(crate) fn op_code_name(op: i32) -> &'static str {
    match op {
        OP_REPLY => "OP_REPLY",
        OP_UPDATE => "OP_UPDATE",
        OP_INSERT => "OP_INSERT",
        OP_QUERY => "OP_QUERY",
        OP_GET_MORE => "OP_GET_MORE",
        OP_DELETE => "OP_DELETE",
        OP_KILL_CURSORS => "OP_KILL_CURSORS",
        OP_COMPRESSED => "OP_COMPRESSED",
        OP_MSG => "OP_MSG",
        _ => "unknown",
    }
}

/// Reads one whole message (header included) into `buf`, replacing its contents.
///
/// Returns `Ok(false)` when the peer closed the connection cleanly between messages. The declared
/// length is checked before anything else is read — against the protocol's limits, then against
/// `limit` ([`MAX_UNAUTHENTICATED_MESSAGE_SIZE`] before authentication), a longer frame being
/// refused with [`WireError::TooLarge`] without reading its body — and the buffer grows as
/// bytes actually arrive, so that a peer announcing 48 MB and sending nothing does not get
/// 48 MB allocated.
pub(crate) async fn read_message<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> Result<bool, WireError> {
    let mut len_bytes = [0u8; 4];
    let mut got = 0;
    while got < len_bytes.len() {
        let n = reader.read(&mut len_bytes[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(false);
            }
            return Err(WireError::malformed(
                "connection closed inside a message header",
            ));
        }
        got += n;
    }
    let total = check_message_length(i32::from_le_bytes(len_bytes))?;
    if total > limit {
        return Err(WireError::TooLarge {
            length: total,
            limit,
        });
    }
    buf.clear();
    buf.extend_from_slice(&len_bytes);
    while buf.len() < total {
        let start = buf.len();
        // At most double what has arrived so far: memory follows the bytes actually received.
        let chunk = (total - start).min(start.max(64 * 1024));
        // Exactly: `resize` alone may double the capacity, holding up to twice the bytes read.
        buf.reserve_exact(chunk);
        buf.resize(start + chunk, 0);
        if let Err(e) = reader.read_exact(&mut buf[start..]).await {
            return Err(if e.kind() == io::ErrorKind::UnexpectedEof {
                WireError::malformed(format!(
                    "connection closed after {start} of {total} announced bytes"
                ))
            } else {
                WireError::Io(e)
            });
        }
    }
    Ok(true)
}

fn check_message_length(len: i32) -> Result<usize, WireError> {
    match usize::try_from(len) {
        Ok(n) if (HEADER_LEN..=MAX_MESSAGE_SIZE).contains(&n) => Ok(n),
        _ => Err(WireError::malformed(format!(
            "message length {len} is outside {HEADER_LEN}..={MAX_MESSAGE_SIZE}"
        ))),
    }
}

/// Parses one complete message (header included).
pub fn parse_message(bytes: &[u8]) -> Result<Message, WireError> {
    parse(bytes, false)
}

/// [`parse_message`] as the server parses a request: an `insert`'s document sequence is kept
/// as the bytes sent ([`OpMsg::documents`]), for the insert command to store without decoding.
pub(crate) fn parse_keeping_inserts(bytes: &[u8]) -> Result<Message, WireError> {
    parse(bytes, true)
}

fn parse(bytes: &[u8], keep_inserts: bool) -> Result<Message, WireError> {
    let header = Header::parse(bytes)
        .ok_or_else(|| WireError::malformed("message shorter than its header"))?;
    let len = check_message_length(header.message_length)?;
    if len != bytes.len() {
        return Err(WireError::malformed(format!(
            "message length {len} does not match the {} bytes received",
            bytes.len()
        )));
    }
    match header.op_code {
        OP_MSG => op_msg::parse(header, bytes, keep_inserts).map(Message::Msg),
        OP_QUERY => op_query::parse(header, bytes).map(Message::Query),
        other => Err(WireError::UnsupportedOpCode(other)),
    }
}

/// A fresh `requestID` for a message the server sends.
pub(crate) fn next_request_id() -> i32 {
    static NEXT: AtomicI32 = AtomicI32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Little-endian int32 at `at`, or `None` past the end.
fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    let end = at.checked_add(4)?;
    let b: [u8; 4] = bytes.get(at..end)?.try_into().ok()?;
    Some(i32::from_le_bytes(b))
}

/// The NUL-terminated UTF-8 string at `at` within `bytes`, and the position after its NUL.
fn read_cstring(bytes: &[u8], at: usize) -> Result<(&str, usize), WireError> {
    let rest = bytes
        .get(at..)
        .ok_or_else(|| WireError::malformed("string past the end of the message"))?;
    let nul = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| WireError::malformed("unterminated string"))?;
    let s = std::str::from_utf8(&rest[..nul])
        .map_err(|_| WireError::malformed("string is not valid UTF-8"))?;
    Ok((s, at + nul + 1))
}

/// Length of the BSON document starting at `at`, checked against what is left in `bytes` (up to
/// `end`) and against the wire limit for one document.
fn document_len(bytes: &[u8], at: usize, end: usize) -> Result<usize, WireError> {
    let declared = read_i32(bytes, at)
        .filter(|_| at + 4 <= end)
        .ok_or_else(|| WireError::malformed("document length past the end of its section"))?;
    let len = usize::try_from(declared)
        .ok()
        .filter(|&n| n >= 5)
        .ok_or_else(|| WireError::malformed(format!("invalid document length {declared}")))?;
    if len > MAX_WIRE_DOCUMENT_SIZE {
        return Err(WireError::malformed(format!(
            "document of {len} bytes exceeds the limit of {MAX_WIRE_DOCUMENT_SIZE}"
        )));
    }
    if len > end - at {
        return Err(WireError::malformed(format!(
            "document of {len} bytes overruns its section ({} bytes left)",
            end - at
        )));
    }
    Ok(len)
}

/// Decodes a document of a well-framed request; depth errors become an error reply.
fn decode_request_document(bytes: &[u8], target: ReplyTarget) -> Result<Document, WireError> {
    bson_depth::decode(bytes).map_err(|e| request_error(e, target))
}

/// What [`decode_request_document`] checks of `bytes`, without decoding them.
fn check_request_document(bytes: &[u8], target: ReplyTarget) -> Result<(), WireError> {
    bson::RawDocument::from_bytes(bytes)
        .map_err(|e| BsonError::Invalid(e.to_string()))
        .and_then(bson_depth::check)
        .map_err(|e| request_error(e, target))
}

/// The wire's answer to a received document `bson_depth` refused.
fn request_error(e: BsonError, target: ReplyTarget) -> WireError {
    match e {
        BsonError::Invalid(m) => WireError::malformed(format!("invalid BSON: {m}")),
        BsonError::TooDeep => WireError::Rejected {
            target,
            error: Box::new(Error::new(
                ErrorCode::Overflow,
                format!("BSONObj exceeds maximum nested object depth: {MAX_BSON_DEPTH}"),
            )),
        },
    }
}

/// Appends `doc`'s BSON to `out`. A document that cannot be encoded (for example a key with a NUL
/// byte built by a command) is replaced by an InternalError reply so the client still gets one.
fn write_document(out: &mut Vec<u8>, doc: &Document) {
    let start = out.len();
    if let Err(e) = doc.to_writer(&mut *out) {
        out.truncate(start);
        let fallback = Error::internal(format!("cannot encode reply: {e}")).to_command_reply();
        // A reply built only from strings and numbers always encodes.
        if fallback.to_writer(&mut *out).is_err() {
            out.truncate(start);
            out.extend_from_slice(&[5, 0, 0, 0, 0]);
        }
    }
}

/// Writes the real length into a message built with a placeholder.
fn finish_message(mut out: Vec<u8>) -> Vec<u8> {
    let len = i32::try_from(out.len()).unwrap_or(i32::MAX);
    out[..4].copy_from_slice(&len.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    pub(super) fn bytes_of(doc: &Document) -> Vec<u8> {
        let mut v = Vec::new();
        doc.to_writer(&mut v).expect("test document encodes");
        v
    }

    fn nested(depth: usize) -> Document {
        let mut d = doc! { "leaf": 1 };
        for _ in 1..depth {
            d = doc! { "a": d };
        }
        d
    }

    #[test]
    fn header_parses_all_four_fields_little_endian() {
        let mut b = Vec::new();
        Header {
            message_length: 21,
            request_id: 7,
            response_to: -3,
            op_code: OP_MSG,
        }
        .write(&mut b);
        let h = Header::parse(&b).expect("16 bytes are a header");
        assert_eq!(
            (h.message_length, h.request_id, h.response_to, h.op_code),
            (21, 7, -3, 2013)
        );
        assert_eq!(Header::parse(&b[..15]), None);
    }

    #[test]
    fn lengths_outside_the_protocol_limits_are_refused() {
        assert!(check_message_length(15).is_err());
        assert!(check_message_length(-1).is_err());
        assert!(check_message_length(48_000_001).is_err());
        assert_eq!(check_message_length(16).ok(), Some(16));
        assert_eq!(check_message_length(48_000_000).ok(), Some(48_000_000));
    }

    #[test]
    fn a_declared_length_that_differs_from_the_bytes_is_malformed() {
        let mut m = encode_op_msg(1, &doc! { "ping": 1, "$db": "admin" }, false);
        m.push(0);
        assert!(matches!(parse_message(&m), Err(WireError::Malformed(_))));
    }

    #[test]
    fn legacy_opcodes_are_reported_as_unsupported() {
        for op in [
            OP_REPLY,
            OP_UPDATE,
            OP_INSERT,
            OP_GET_MORE,
            OP_DELETE,
            OP_KILL_CURSORS,
            OP_COMPRESSED,
            9999,
        ] {
            let mut m = Vec::new();
            Header {
                message_length: 20,
                request_id: 1,
                response_to: 0,
                op_code: op,
            }
            .write(&mut m);
            m.extend_from_slice(&[0, 0, 0, 0]);
            assert!(
                matches!(parse_message(&m), Err(WireError::UnsupportedOpCode(o)) if o == op),
                "opcode {op}"
            );
        }
    }

    fn target() -> ReplyTarget {
        ReplyTarget {
            request_id: 1,
            legacy: false,
            more_to_come: false,
            checksum: false,
        }
    }

    #[test]
    fn documents_nested_beyond_the_limit_are_rejected_with_overflow() {
        assert!(decode_request_document(&bytes_of(&nested(MAX_BSON_DEPTH)), target()).is_ok());
        let deep = bytes_of(&nested(MAX_BSON_DEPTH + 1));
        match decode_request_document(&deep, target()) {
            Err(WireError::Rejected { error, .. }) => assert_eq!(error.code, ErrorCode::Overflow),
            other => panic!("not refused with Overflow: {other:?}"),
        }
        // Far deeper than recursion survives: still a clean error reply.
        let deepest = crate::bson_depth::nested_bytes(100_000);
        assert!(matches!(
            decode_request_document(&deepest, target()),
            Err(WireError::Rejected { .. })
        ));
    }

    #[test]
    fn invalid_bson_is_reported_not_panicked_on() {
        // Declares an int32 element (0x10) but ends before its value.
        let bad = [11u8, 0, 0, 0, 0x10, b'a', 0, 1, 0, 0, 0];
        assert!(matches!(
            decode_request_document(&bad, target()),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn document_lengths_are_checked_against_the_section_and_the_limit() {
        let b = [5u8, 0, 0, 0, 0];
        assert_eq!(document_len(&b, 0, 5).ok(), Some(5));
        assert!(document_len(&b, 0, 4).is_err());
        assert!(document_len(&[4u8, 0, 0, 0, 0], 0, 5).is_err());
        assert!(document_len(&[6u8, 0, 0, 0, 0], 0, 5).is_err());
        assert!(document_len(&(-7i32).to_le_bytes(), 0, 4).is_err());
        let too_big = ((MAX_WIRE_DOCUMENT_SIZE + 1) as i32).to_le_bytes();
        assert!(document_len(&too_big, 0, 4).is_err());
        assert!(document_len(&b, usize::MAX - 2, usize::MAX).is_err());
    }

    #[test]
    fn cstrings_must_be_terminated_utf8() {
        assert_eq!(read_cstring(b"ab\0c", 0).ok(), Some(("ab", 3)));
        assert!(read_cstring(b"abc", 0).is_err());
        assert!(read_cstring(b"\xff\0", 0).is_err());
        assert!(read_cstring(b"a\0", 9).is_err());
    }

    #[tokio::test]
    async fn read_message_reads_whole_frames_and_reports_clean_eof() {
        let a = encode_op_msg(1, &doc! { "ping": 1, "$db": "admin" }, false);
        let b = encode_op_msg(2, &doc! { "hello": 1, "$db": "admin" }, true);
        let stream: Vec<u8> = [a.clone(), b.clone()].concat();
        let mut reader = &stream[..];
        let mut buf = Vec::new();
        assert!(read_message(&mut reader, &mut buf, MAX_MESSAGE_SIZE)
            .await
            .unwrap());
        assert_eq!(buf, a);
        assert!(read_message(&mut reader, &mut buf, MAX_MESSAGE_SIZE)
            .await
            .unwrap());
        assert_eq!(buf, b);
        assert!(!read_message(&mut reader, &mut buf, MAX_MESSAGE_SIZE)
            .await
            .unwrap());
    }

    #[tokio::test]
    async fn read_message_refuses_bad_lengths_and_truncation() {
        let mut buf = Vec::new();
        let mut short: &[u8] = &[3, 0];
        assert!(read_message(&mut short, &mut buf, MAX_MESSAGE_SIZE)
            .await
            .is_err());
        let mut tiny: &[u8] = &[15, 0, 0, 0];
        assert!(read_message(&mut tiny, &mut buf, MAX_MESSAGE_SIZE)
            .await
            .is_err());
        let huge = (48_000_001i32).to_le_bytes();
        let mut huge: &[u8] = &huge;
        assert!(read_message(&mut huge, &mut buf, MAX_MESSAGE_SIZE)
            .await
            .is_err());
        let m = encode_op_msg(1, &doc! { "ping": 1, "$db": "admin" }, false);
        let mut cut = &m[..m.len() - 1];
        assert!(matches!(
            read_message(&mut cut, &mut buf, MAX_MESSAGE_SIZE).await,
            Err(WireError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn read_message_reads_frames_larger_than_its_growth_step() {
        let big = doc! { "insert": "c", "$db": "d", "blob": "x".repeat(300_000) };
        let m = encode_op_msg(9, &big, false);
        let mut reader = &m[..];
        let mut buf = Vec::new();
        assert!(read_message(&mut reader, &mut buf, MAX_MESSAGE_SIZE)
            .await
            .unwrap());
        assert_eq!(buf.len(), m.len());
        match parse_message(&buf) {
            Ok(Message::Msg(msg)) => assert_eq!(msg.body, big),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A frame over the caller's limit is refused from its length alone: nothing of its body is
    /// read (the reader still holds it) and no buffer is grown for it.
    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_before_its_body_is_read() {
        let m = encode_op_msg(
            1,
            &doc! { "hello": 1, "$db": "admin", "pad": "x".repeat(2000) },
            false,
        );
        let mut reader = &m[..];
        let mut buf = Vec::new();
        match read_message(&mut reader, &mut buf, 1024).await {
            Err(WireError::TooLarge { length, limit }) => {
                assert_eq!((length, limit), (m.len(), 1024));
            }
            other => panic!("not refused: {other:?}"),
        }
        assert_eq!(reader.len(), m.len() - 4, "only the length was read");
        assert_eq!(buf.capacity(), 0);
        let mut again = &m[..];
        assert!(read_message(&mut again, &mut buf, m.len()).await.unwrap());
    }
}
