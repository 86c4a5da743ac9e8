//! Journal records: the BSON form of [`JournalOp`] groups, and the checksummed framing
//! (`[u32 LE length][u32 LE CRC-32C][payload]`) shared by journal segments and snapshots.

use super::JournalOp;
use crate::stored::StoredDoc;
use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};
use std::fmt::Write as _;
use std::io::{self, Read, Write};

/// Bytes before each record's payload: length, then CRC-32C of the payload.
pub(crate) const RECORD_HEADER_LEN: usize = 8;

/// A record payload may not exceed what its u32 length field can say.
const MAX_PAYLOAD_LEN: usize = u32::MAX as usize;

fn invalid_data(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The journal form of one operation: `{op: "put", db, coll, doc}` and the like.
pub(crate) fn op_to_document(op: &JournalOp) -> Document {
    let mut d = Document::new();
    match op {
        JournalOp::CreateCollection { db, coll, options } => {
            d.insert("op", "create");
            d.insert("db", db.as_str());
            d.insert("coll", coll.as_str());
            d.insert("options", options.clone());
        }
        JournalOp::DropCollection { db, coll } => {
            d.insert("op", "drop");
            d.insert("db", db.as_str());
            d.insert("coll", coll.as_str());
        }
        JournalOp::DropDatabase { db } => {
            d.insert("op", "dropDatabase");
            d.insert("db", db.as_str());
        }
        JournalOp::RenameCollection {
            db,
            from,
            to_db,
            to,
        } => {
            d.insert("op", "rename");
            d.insert("db", db.as_str());
            d.insert("from", from.as_str());
            d.insert("toDb", to_db.as_str());
            d.insert("to", to.as_str());
        }
        JournalOp::CreateIndex { db, coll, spec } => {
            d.insert("op", "createIndex");
            d.insert("db", db.as_str());
            d.insert("coll", coll.as_str());
            d.insert("spec", spec.clone());
        }
        JournalOp::DropIndex { db, coll, name } => {
            d.insert("op", "dropIndex");
            d.insert("db", db.as_str());
            d.insert("coll", coll.as_str());
            d.insert("name", name.as_str());
        }
        JournalOp::Put { db, coll, doc } => {
            d.insert("op", "put");
            d.insert("db", db.as_str());
            d.insert("coll", coll.as_str());
            // Stored bytes were validated when stored, so they decode.
            d.insert("doc", doc.to_document().map_or(Bson::Null, Bson::Document));
        }
        JournalOp::Delete { db, coll, id } => {
            d.insert("op", "delete");
            d.insert("db", db.as_str());
            d.insert("coll", coll.as_str());
            d.insert("id", id.clone());
        }
    }
    d
}

fn get_str(d: &Document, key: &str) -> Result<String, String> {
    match d.get(key) {
        Some(Bson::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("journal op field '{key}' is not a string: {other}")),
        None => Err(format!("journal op lacks field '{key}'")),
    }
}

fn get_doc(d: &Document, key: &str) -> Result<Document, String> {
    match d.get(key) {
        Some(Bson::Document(v)) => Ok(v.clone()),
        Some(other) => Err(format!(
            "journal op field '{key}' is not a document: {other}"
        )),
        None => Err(format!("journal op lacks field '{key}'")),
    }
}

/// Parse the journal form written by [`op_to_document`].
pub(crate) fn op_from_document(d: &Document) -> Result<JournalOp, String> {
    let op = get_str(d, "op")?;
    let op = match op.as_str() {
        "create" => JournalOp::CreateCollection {
            db: get_str(d, "db")?,
            coll: get_str(d, "coll")?,
            options: get_doc(d, "options")?,
        },
        "drop" => JournalOp::DropCollection {
            db: get_str(d, "db")?,
            coll: get_str(d, "coll")?,
        },
        "dropDatabase" => JournalOp::DropDatabase {
            db: get_str(d, "db")?,
        },
        "rename" => JournalOp::RenameCollection {
            db: get_str(d, "db")?,
            from: get_str(d, "from")?,
            to_db: get_str(d, "toDb")?,
            to: get_str(d, "to")?,
        },
        "createIndex" => JournalOp::CreateIndex {
            db: get_str(d, "db")?,
            coll: get_str(d, "coll")?,
            spec: get_doc(d, "spec")?,
        },
        "dropIndex" => JournalOp::DropIndex {
            db: get_str(d, "db")?,
            coll: get_str(d, "coll")?,
            name: get_str(d, "name")?,
        },
        "put" => JournalOp::Put {
            db: get_str(d, "db")?,
            coll: get_str(d, "coll")?,
            doc: StoredDoc::from_document(&get_doc(d, "doc")?).map_err(|e| e.message)?,
        },
        "delete" => JournalOp::Delete {
            db: get_str(d, "db")?,
            coll: get_str(d, "coll")?,
            id: d
                .get("id")
                .cloned()
                .ok_or_else(|| "journal op lacks field 'id'".to_string())?,
        },
        other => return Err(format!("unknown journal op '{other}'")),
    };
    Ok(op)
}

/// Low-level BSON writing, so that the hot path (`Put`) encodes the document straight into the
/// group without first cloning it into a wrapper document.
fn begin_doc(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    start
}

fn end_doc(out: &mut Vec<u8>, start: usize) -> io::Result<()> {
    out.push(0);
    let len = i32::try_from(out.len() - start)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "journal group too large"))?;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    Ok(())
}

fn write_key(out: &mut Vec<u8>, element_type: u8, key: &str) {
    out.push(element_type);
    out.extend_from_slice(key.as_bytes());
    out.push(0);
}

fn write_string_element(out: &mut Vec<u8>, key: &str, value: &str) -> io::Result<()> {
    write_key(out, 0x02, key);
    let len = i32::try_from(value.len() + 1)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "journal string too large"))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(value.as_bytes());
    out.push(0);
    Ok(())
}

fn write_document(out: &mut Vec<u8>, doc: &Document) -> io::Result<()> {
    doc.to_writer(out)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("cannot encode: {e}")))
}

fn encode_op(op: &JournalOp, out: &mut Vec<u8>) -> io::Result<()> {
    match op {
        JournalOp::Put { db, coll, doc } => {
            let start = begin_doc(out);
            write_string_element(out, "op", "put")?;
            write_string_element(out, "db", db)?;
            write_string_element(out, "coll", coll)?;
            write_key(out, 0x03, "doc");
            out.extend_from_slice(doc.as_bytes());
            end_doc(out, start)
        }
        other => write_document(out, &op_to_document(other)),
    }
}

/// About how many bytes [`encode_op`] appends for `op` (exact for a `put`, within a few bytes
/// of the array key), so that a group is encoded into memory reserved once: a batch of a
/// thousand documents grown by doubling would reallocate, and copy, a dozen times.
fn encoded_len_hint(op: &JournalOp) -> usize {
    /// The array key and its element type, and a few bytes to spare.
    const ELEMENT: usize = 16;
    match op {
        // `{op: "put", db, coll, doc}`: the lengths, names and terminators, then the document.
        JournalOp::Put { db, coll, doc } => {
            ELEMENT
                + 4
                + (3 + 4 + 4 + 1)
                + (3 + 4 + db.len() + 1)
                + (5 + 4 + coll.len() + 1)
                + 5
                + doc.as_bytes().len()
                + 1
        }
        // Rare (collection and index changes, deletes): left to grow as they need.
        _ => ELEMENT + 64,
    }
}

/// Append the BSON payload `{ops: [op, ...]}` of one append group to `out`.
pub fn encode_group(ops: &[JournalOp], out: &mut Vec<u8>) -> io::Result<()> {
    out.reserve(16 + ops.iter().map(encoded_len_hint).sum::<usize>());
    let start = begin_doc(out);
    write_key(out, 0x04, "ops");
    let array = begin_doc(out);
    // The array's keys "0", "1" …, written into one buffer rather than a string each.
    let mut key = String::new();
    for (i, op) in ops.iter().enumerate() {
        key.clear();
        write!(key, "{i}").expect("writing to a String cannot fail");
        write_key(out, 0x03, &key);
        encode_op(op, out)?;
    }
    end_doc(out, array)?;
    end_doc(out, start)
}

/// Parse the payload of one journal record back into its operations. A well-formed `put`
/// keeps its document's bytes (validated, not decoded): replay stores them as they are.
pub(crate) fn decode_group(payload: &[u8]) -> io::Result<Vec<JournalOp>> {
    let not_bson = |e: bson::raw::Error| invalid_data(format!("journal record is not BSON: {e}"));
    let raw = RawDocument::from_bytes(payload).map_err(not_bson)?;
    let ops = match raw.get("ops").map_err(not_bson)? {
        Some(RawBsonRef::Array(ops)) => ops,
        _ => return Err(invalid_data("journal record lacks its 'ops' array")),
    };
    let mut out = Vec::new();
    for op in ops {
        match op.map_err(not_bson)? {
            RawBsonRef::Document(d) => out.push(decode_op(d).map_err(invalid_data)?),
            other => {
                let shown = Bson::try_from(other).map_or_else(|e| e.to_string(), |b| b.to_string());
                return Err(invalid_data(format!(
                    "journal op is not a document: {shown}"
                )));
            }
        }
    }
    Ok(out)
}

/// One operation of a journal record: a `put` straight from its bytes, anything else (or a
/// `put` missing a field) through [`op_from_document`].
fn decode_op(d: &RawDocument) -> Result<JournalOp, String> {
    if let (Ok("put"), Ok(db), Ok(coll), Ok(doc)) = (
        d.get_str("op"),
        d.get_str("db"),
        d.get_str("coll"),
        d.get_document("doc"),
    ) {
        return Ok(JournalOp::Put {
            db: db.to_string(),
            coll: coll.to_string(),
            doc: StoredDoc::from_bytes(doc.as_bytes())
                .map_err(|e| format!("journal record is not BSON: {e}"))?,
        });
    }
    let decoded =
        crate::bson_depth::decode_raw(d).map_err(|e| format!("journal record is not BSON: {e}"))?;
    op_from_document(&decoded)
}

/// The 8-byte header of a record holding `payload`.
pub(crate) fn record_header(payload: &[u8]) -> io::Result<[u8; RECORD_HEADER_LEN]> {
    if payload.len() > MAX_PAYLOAD_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "record larger than 4 GiB",
        ));
    }
    let mut header = [0u8; RECORD_HEADER_LEN];
    header[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[4..].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    Ok(header)
}

/// Write one framed record (header, then `payload`) to a stream.
pub fn write_record<W: Write>(w: &mut W, payload: &[u8]) -> io::Result<()> {
    w.write_all(&record_header(payload)?)?;
    w.write_all(payload)
}

/// What reading the next record of a file found.
#[derive(Debug)]
pub(crate) enum ReadRecord {
    /// A complete record with a valid checksum; its payload is in the caller's buffer.
    Ok,
    /// The file ended cleanly between records.
    End,
    /// The record is cut short by the end of the file.
    Truncated,
    /// The record is complete but its checksum does not match.
    BadChecksum,
}

/// Read the next record of a file of `remaining` bytes into `payload`, checking its checksum.
/// `remaining` bounds the length field so a garbage length never causes a huge allocation.
pub(crate) fn read_record<R: Read>(
    r: &mut R,
    remaining: u64,
    payload: &mut Vec<u8>,
) -> io::Result<ReadRecord> {
    if remaining == 0 {
        return Ok(ReadRecord::End);
    }
    if remaining < RECORD_HEADER_LEN as u64 {
        return Ok(ReadRecord::Truncated);
    }
    let mut header = [0u8; RECORD_HEADER_LEN];
    r.read_exact(&mut header)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if u64::from(len) > remaining - RECORD_HEADER_LEN as u64 {
        return Ok(ReadRecord::Truncated);
    }
    payload.clear();
    payload.resize(len as usize, 0);
    r.read_exact(payload)?;
    if crc32c::crc32c(payload) != crc {
        return Ok(ReadRecord::BadChecksum);
    }
    Ok(ReadRecord::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId};

    fn every_kind_of_op() -> Vec<JournalOp> {
        vec![
            JournalOp::CreateCollection {
                db: "shop".into(),
                coll: "items".into(),
                options: doc! {"capped": false},
            },
            JournalOp::DropCollection {
                db: "shop".into(),
                coll: "old".into(),
            },
            JournalOp::DropDatabase { db: "tmp".into() },
            JournalOp::RenameCollection {
                db: "shop".into(),
                from: "a".into(),
                to_db: "archive".into(),
                to: "b".into(),
            },
            JournalOp::CreateIndex {
                db: "shop".into(),
                coll: "items".into(),
                spec: doc! {"key": {"sku": 1}, "name": "sku_1", "unique": true},
            },
            JournalOp::DropIndex {
                db: "shop".into(),
                coll: "items".into(),
                name: "sku_1".into(),
            },
            JournalOp::Put {
                db: "shop".into(),
                coll: "items".into(),
                doc: StoredDoc::from_document(
                    &doc! {"_id": ObjectId::new(), "sku": "A-1", "tags": ["x", {"y": 1.5}], "n": null},
                )
                .unwrap(),
            },
            JournalOp::Delete {
                db: "shop".into(),
                coll: "items".into(),
                id: Bson::Int64(42),
            },
        ]
    }

    #[test]
    fn every_op_survives_the_document_round_trip() {
        for op in every_kind_of_op() {
            let d = op_to_document(&op);
            assert_eq!(op_from_document(&d).as_ref(), Ok(&op), "{d}");
        }
    }

    #[test]
    fn put_is_journaled_as_op_db_coll_doc() {
        let d = op_to_document(&JournalOp::Put {
            db: "d".into(),
            coll: "c".into(),
            doc: StoredDoc::from_document(&doc! {"_id": 1}).unwrap(),
        });
        assert_eq!(
            d,
            doc! {"op": "put", "db": "d", "coll": "c", "doc": {"_id": 1}}
        );
    }

    #[test]
    fn a_group_payload_is_the_bson_document_ops_array() {
        let ops = every_kind_of_op();
        let mut payload = Vec::new();
        encode_group(&ops, &mut payload).unwrap();
        let parsed = Document::from_reader(&payload[..]).unwrap();
        let expected: Vec<Bson> = ops
            .iter()
            .map(|op| Bson::Document(op_to_document(op)))
            .collect();
        assert_eq!(parsed, doc! {"ops": expected});
        assert_eq!(decode_group(&payload).unwrap(), ops);
    }

    #[test]
    fn an_empty_group_encodes_an_empty_ops_array() {
        let mut payload = Vec::new();
        encode_group(&[], &mut payload).unwrap();
        assert!(decode_group(&payload).unwrap().is_empty());
    }

    #[test]
    fn unknown_or_incomplete_ops_are_rejected() {
        assert!(op_from_document(&doc! {"op": "explode", "db": "d"}).is_err());
        assert!(op_from_document(&doc! {"op": "put", "db": "d", "coll": "c"}).is_err());
        assert!(op_from_document(&doc! {"op": "delete", "db": "d", "coll": "c"}).is_err());
        assert!(op_from_document(&doc! {"db": "d"}).is_err());
        assert!(decode_group(b"not bson").is_err());
    }

    #[test]
    fn framed_records_read_back_and_detect_damage() {
        let mut file = Vec::new();
        write_record(&mut file, b"first").unwrap();
        write_record(&mut file, b"second").unwrap();
        let mut payload = Vec::new();
        let mut r = &file[..];
        let total = file.len() as u64;
        assert!(matches!(
            read_record(&mut r, total, &mut payload).unwrap(),
            ReadRecord::Ok
        ));
        assert_eq!(payload, b"first");
        let rest = total - 13;
        assert!(matches!(
            read_record(&mut r, rest, &mut payload).unwrap(),
            ReadRecord::Ok
        ));
        assert_eq!(payload, b"second");
        assert!(matches!(
            read_record(&mut r, 0, &mut payload).unwrap(),
            ReadRecord::End
        ));

        // A flipped payload byte fails the checksum.
        let mut damaged = file.clone();
        damaged[10] ^= 0x01;
        assert!(matches!(
            read_record(&mut &damaged[..], total, &mut payload).unwrap(),
            ReadRecord::BadChecksum
        ));
        // A length that runs past the end of the file is a truncated record.
        let cut = &file[..file.len() - 2];
        let mut r = &cut[13..];
        assert!(matches!(
            read_record(&mut r, cut.len() as u64 - 13, &mut payload).unwrap(),
            ReadRecord::Truncated
        ));
        assert!(matches!(
            read_record(&mut &file[..3], 3, &mut payload).unwrap(),
            ReadRecord::Truncated
        ));
    }
}
