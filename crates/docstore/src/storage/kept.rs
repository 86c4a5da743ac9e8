//! Kept indexes: a snapshot's index entries, written beside it so that a start-up loads each
//! index's tree from its sorted entries instead of keying every document again and sorting the
//! keys (at a million products, keying and sorting were most of a restart; MongoDB, too, keeps
//! its indexes on disk).
//!
//! `indexes-<n>.db` belongs to `snapshot-<n>.db` and is optional: a missing, damaged or
//! mismatched file (another snapshot's, an older format) only means the indexes are built from
//! the documents, as before. Each index's entries are checked again when loaded (in order,
//! record ids within the collection, the definition the same as the snapshot's), and an index
//! whose kept entries fail a check is built from the documents instead.
//!
//! Layout, every record framed like a journal record (length, CRC-32C, payload): a header
//! `{format, version, token, snapshotBytes, collections}`; per collection a record
//! `{db, coll, docs}`, then per kept index a record `{spec, multikey, multikeyFields, entries,
//! chunks}` followed by `chunks` records of encoded entries, then `{indexes}` closing the
//! collection; a trailer `{end: true, collections}`. An encoded entry is the length of the
//! prefix it shares with the previous key of its chunk, the length of the rest and the rest,
//! then its record id (each number a LEB128 varint): sorted keys share long prefixes, so the
//! file is a fraction of the entries' size in memory.

use super::faults::{DiskFaults, FaultyFile};
use super::journal::{write_record, RECORD_HEADER_LEN};
use super::records::{encode, Reader, IO_BUFFER};
use bson::{doc, Document};
use std::io::{self, BufWriter, Write};
use std::path::Path;

const FORMAT: &str = "docstore-kept-indexes";
/// The file's format. The entries are the index keys as `keystring` encodes them: a change to
/// that encoding (or to how an index keys a document) must raise this number, so that files
/// written by an older build are refused and those indexes built from the documents instead.
const VERSION: i32 = 1;
/// Bytes of encoded entries per record.
const CHUNK_BYTES: usize = 1 << 20;

/// One index as a kept-indexes file holds it.
#[cfg_attr(test, derive(PartialEq))]
pub(crate) struct KeptIndex {
    /// The definition, in `IndexSpec::to_document` form.
    pub(crate) spec: Document,
    pub(crate) multikey: bool,
    pub(crate) multikey_fields: u64,
    /// How many entries the chunks hold.
    count: u64,
    /// The encoded entries, a record's worth each (see the module docs).
    chunks: Vec<Vec<u8>>,
}

impl std::fmt::Debug for KeptIndex {
    /// Without the encoded entries (hundreds of MB at a million documents).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptIndex")
            .field("spec", &self.spec)
            .field("entries", &self.count)
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

impl KeptIndex {
    /// An index to keep: its definition (`IndexSpec::to_document` form), multikey flags, and
    /// its `count` (key, record id) entries in order, encoded here.
    pub(crate) fn new<'a>(
        spec: Document,
        multikey: bool,
        multikey_fields: u64,
        count: u64,
        entries: impl Iterator<Item = (&'a [u8], u64)>,
    ) -> KeptIndex {
        KeptIndex {
            spec,
            multikey,
            multikey_fields,
            count,
            chunks: encode_entries(entries),
        }
    }

    /// How many entries it holds.
    pub(crate) fn len(&self) -> u64 {
        self.count
    }

    /// Hand each entry (key, record id), in order, to `each`, if they are well formed: exactly
    /// [`KeptIndex::len`] of them, every record id one of the collection's `records` (1 to
    /// `records`, as a load numbers a snapshot's documents). `false` (with some entries
    /// perhaps handed over already) when they are not. Their order is the caller's to check.
    pub(crate) fn decode(&self, records: u64, mut each: impl FnMut(&[u8], u64)) -> bool {
        let mut left = self.count;
        let mut key: Vec<u8> = Vec::new();
        for chunk in &self.chunks {
            let mut at = 0;
            key.clear();
            while at < chunk.len() {
                let Some(rid) = next_entry(chunk, &mut at, &mut key) else {
                    return false;
                };
                if rid == 0 || rid > records || left == 0 {
                    return false;
                }
                left -= 1;
                each(&key, rid);
            }
        }
        left == 0
    }
}

/// Decode the entry at `*at` of a chunk into `key` (which holds the previous key), moving past
/// it; its record id, or `None` when it is malformed.
fn next_entry(chunk: &[u8], at: &mut usize, key: &mut Vec<u8>) -> Option<u64> {
    let shared = usize::try_from(varint(chunk, at)?).ok()?;
    let rest = usize::try_from(varint(chunk, at)?).ok()?;
    let end = at.checked_add(rest).filter(|&end| end <= chunk.len())?;
    if shared > key.len() {
        return None;
    }
    key.truncate(shared);
    key.extend_from_slice(&chunk[*at..end]);
    *at = end;
    varint(chunk, at)
}

/// One collection's kept indexes.
#[derive(Debug)]
pub(crate) struct KeptCollection {
    pub(crate) db: String,
    pub(crate) coll: String,
    /// The documents the snapshot holds for it (the record ids the entries refer to).
    pub(crate) docs: u64,
    pub(crate) indexes: Vec<KeptIndex>,
}

/// What a kept-indexes file held: per collection, its kept indexes.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    collections: Vec<KeptCollection>,
}

impl Kept {
    /// The kept indexes of `db.coll`, if the file had them for a collection of `docs`
    /// documents (taken: a second call finds none).
    pub(crate) fn take(&mut self, db: &str, coll: &str, docs: u64) -> Vec<KeptIndex> {
        match self
            .collections
            .iter_mut()
            .find(|c| c.db == db && c.coll == coll && c.docs == docs)
        {
            Some(c) => std::mem::take(&mut c.indexes),
            None => Vec::new(),
        }
    }

    /// Indexes held, over every collection.
    pub(crate) fn len(&self) -> usize {
        self.collections.iter().map(|c| c.indexes.len()).sum()
    }
}

/// One collection to keep the indexes of: its place, its document count and its indexes as a
/// load of the snapshot would build them.
pub(crate) struct CollectionIndexes<'a> {
    pub(crate) db: &'a str,
    pub(crate) coll: &'a str,
    pub(crate) docs: u64,
    /// Called once per index, in turn, so that only one index is in memory at a time; `None`
    /// when there is none left.
    pub(crate) next_index: Box<dyn FnMut() -> Option<KeptIndex> + 'a>,
}

fn invalid_data(path: &Path, msg: impl std::fmt::Display) -> io::Error {
    super::records::invalid_data("kept indexes", path, msg)
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The LEB128 number at `*at`, moving past it; `None` when it is cut short or too long.
fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Write the kept indexes of the snapshot `token` (a file of `snapshot_bytes` bytes) to `path`
/// and fsync it. The caller renames it into place. `stop` is asked before each index: once it
/// says so, the write is given up (`ErrorKind::Interrupted`), as when a newer snapshot is due.
pub(crate) fn write_file(
    path: &Path,
    token: u64,
    snapshot_bytes: u64,
    collections: Vec<CollectionIndexes<'_>>,
    faults: Option<DiskFaults>,
    stop: &dyn Fn() -> bool,
) -> io::Result<()> {
    let file = FaultyFile::new(super::private::create_file(path)?, faults)?;
    let mut w = BufWriter::with_capacity(IO_BUFFER, file);
    let mut scratch = Vec::new();
    let header = doc! {
        "format": FORMAT,
        "version": VERSION,
        "token": as_i64(token),
        "snapshotBytes": as_i64(snapshot_bytes),
        "collections": collections.len() as i64,
    };
    encode(&header, &mut scratch)?;
    write_record(&mut w, &scratch)?;
    let n_colls = collections.len();
    for mut c in collections {
        encode(
            &doc! { "db": c.db, "coll": c.coll, "docs": as_i64(c.docs) },
            &mut scratch,
        )?;
        write_record(&mut w, &scratch)?;
        let mut kept = 0i64;
        loop {
            if stop() {
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    "given up: a newer snapshot is due, or a shutdown writes its own",
                ));
            }
            let Some(index) = (c.next_index)() else {
                break;
            };
            encode(
                &doc! {
                    "spec": index.spec,
                    "multikey": index.multikey,
                    // Bits as stored: a u64 in an i64.
                    "multikeyFields": index.multikey_fields as i64,
                    "entries": as_i64(index.count),
                    "chunks": index.chunks.len() as i64,
                },
                &mut scratch,
            )?;
            write_record(&mut w, &scratch)?;
            for chunk in &index.chunks {
                write_record(&mut w, chunk)?;
            }
            kept += 1;
        }
        encode(&doc! { "indexes": kept }, &mut scratch)?;
        write_record(&mut w, &scratch)?;
    }
    encode(
        &doc! { "end": true, "collections": n_colls as i64 },
        &mut scratch,
    )?;
    write_record(&mut w, &scratch)?;
    w.flush()?;
    let mut file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// `entries` (in order) encoded in chunks of about [`CHUNK_BYTES`], each starting afresh.
fn encode_entries<'a>(entries: impl Iterator<Item = (&'a [u8], u64)>) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK_BYTES + 256);
    let mut previous: &[u8] = &[];
    for (key, rid) in entries {
        if chunk.len() >= CHUNK_BYTES {
            chunks.push(std::mem::replace(
                &mut chunk,
                Vec::with_capacity(CHUNK_BYTES + 256),
            ));
            previous = &[];
        }
        let shared = key.iter().zip(previous).take_while(|(a, b)| a == b).count();
        put_varint(&mut chunk, shared as u64);
        put_varint(&mut chunk, (key.len() - shared) as u64);
        chunk.extend_from_slice(&key[shared..]);
        put_varint(&mut chunk, rid);
        previous = key;
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

fn count(path: &Path, d: &Document, key: &str) -> io::Result<u64> {
    d.get_i64(key)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| invalid_data(path, format!("record lacks '{key}'")))
}

/// Read a whole kept-indexes file, which must belong to the snapshot `token` of
/// `snapshot_bytes` bytes. Any damage or mismatch is an error: the caller then builds every
/// index from the documents.
pub(crate) fn read_file(path: &Path, token: u64, snapshot_bytes: u64) -> io::Result<Kept> {
    let mut reader = Reader::open("kept indexes", path)?;
    let header = reader.next_doc()?;
    if header.get_str("format") != Ok(FORMAT) || header.get_i32("version") != Ok(VERSION) {
        return Err(invalid_data(
            path,
            "not a kept-indexes file of this version",
        ));
    }
    if count(path, &header, "token")? != token
        || count(path, &header, "snapshotBytes")? != snapshot_bytes
    {
        return Err(invalid_data(path, "belongs to another snapshot"));
    }
    let n_colls = count(path, &header, "collections")?;
    let mut kept = Kept::default();
    for _ in 0..n_colls {
        let h = reader.next_doc()?;
        let (Ok(db), Ok(coll)) = (h.get_str("db"), h.get_str("coll")) else {
            return Err(invalid_data(path, "collection record lacks 'db' or 'coll'"));
        };
        let mut collection = KeptCollection {
            db: db.to_string(),
            coll: coll.to_string(),
            docs: count(path, &h, "docs")?,
            indexes: Vec::new(),
        };
        loop {
            let d = reader.next_doc()?;
            if let Ok(n) = d.get_i64("indexes") {
                if u64::try_from(n).ok() != Some(collection.indexes.len() as u64) {
                    return Err(invalid_data(path, "index count does not match"));
                }
                break;
            }
            let spec = d
                .get_document("spec")
                .map_err(|_| invalid_data(path, "index record lacks 'spec'"))?
                .clone();
            let chunks = count(path, &d, "chunks")?;
            // Every chunk takes at least a record header: a garbage count fails here rather
            // than reserving memory for it.
            if chunks > reader.remaining / RECORD_HEADER_LEN as u64 {
                return Err(invalid_data(path, "chunk count is larger than the file"));
            }
            let mut index = KeptIndex {
                spec,
                multikey: d.get_bool("multikey").unwrap_or(true),
                multikey_fields: d.get_i64("multikeyFields").map_or(u64::MAX, |n| n as u64),
                count: count(path, &d, "entries")?,
                chunks: Vec::with_capacity(chunks as usize),
            };
            for _ in 0..chunks {
                let mut chunk = Vec::new();
                reader.next_record_into(&mut chunk)?;
                index.chunks.push(chunk);
            }
            collection.indexes.push(index);
        }
        kept.collections.push(collection);
    }
    let trailer = reader.next_doc()?;
    if trailer.get_bool("end") != Ok(true) || count(path, &trailer, "collections")? != n_colls {
        return Err(invalid_data(path, "trailer does not match the contents"));
    }
    if reader.remaining != 0 {
        return Err(invalid_data(path, "unexpected bytes after the trailer"));
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries of an index over `n` records: two keys a record, sharing prefixes.
    fn entries(n: u64) -> Vec<(Vec<u8>, u64)> {
        let mut all: Vec<(Vec<u8>, u64)> = (1..=n)
            .flat_map(|rid| {
                [
                    (format!("key-{:06}", rid % 97).into_bytes(), rid),
                    (
                        format!("key-{:06}-long-{}", rid % 13, "x".repeat(40)).into_bytes(),
                        rid,
                    ),
                ]
            })
            .collect();
        all.sort();
        all
    }

    fn kept(name: &str, all: &[(Vec<u8>, u64)]) -> KeptIndex {
        KeptIndex::new(
            doc! { "v": 2, "key": { name: 1 }, "name": name },
            true,
            0b10,
            all.len() as u64,
            all.iter().map(|(k, rid)| (k.as_slice(), *rid)),
        )
    }

    fn decoded(index: &KeptIndex, records: u64) -> Option<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        index
            .decode(records, |k, rid| out.push((k.to_vec(), rid)))
            .then_some(out)
    }

    /// Write a file of one collection (`n` documents) with indexes `a` and `b`.
    fn write(path: &Path, token: u64, snapshot_bytes: u64, n: u64) {
        let all = entries(n);
        let mut left = vec![kept("b", &all[..0]), kept("a", &all)];
        let collections = vec![
            CollectionIndexes {
                db: "shop",
                coll: "items",
                docs: n,
                next_index: Box::new(move || left.pop()),
            },
            CollectionIndexes {
                db: "shop",
                coll: "empty",
                docs: 0,
                next_index: Box::new(|| None),
            },
        ];
        write_file(path, token, snapshot_bytes, collections, None, &|| false).unwrap();
    }

    #[test]
    fn kept_indexes_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("indexes.db");
        // Several chunks: 400 000 entries, some 20 MB before the shared prefixes are left out.
        let n = 200_000;
        write(&path, 3, 1234, n);
        let mut back = read_file(&path, 3, 1234).unwrap();
        assert_eq!(back.len(), 2);
        // Another collection, or the same one with another document count, has none.
        assert!(back.take("shop", "other", n).is_empty());
        assert!(back.take("shop", "items", n + 1).is_empty());
        let indexes = back.take("shop", "items", n);
        assert_eq!(indexes.len(), 2);
        assert!(indexes[0].chunks.len() > 1, "{:?}", indexes[0]);
        assert_eq!(indexes[0].spec.get_str("name"), Ok("a"));
        assert!(indexes[0].multikey);
        assert_eq!(indexes[0].multikey_fields, 0b10);
        assert_eq!(decoded(&indexes[0], n), Some(entries(n)));
        assert_eq!(decoded(&indexes[1], n), Some(Vec::new()));
        // Taken once.
        assert!(back.take("shop", "items", n).is_empty());
    }

    #[test]
    fn entries_naming_records_the_collection_does_not_have_are_refused() {
        let all = entries(100);
        assert!(decoded(&kept("a", &all), 99).is_none());
        let with_zero = vec![(b"k".to_vec(), 0)];
        assert!(decoded(&kept("a", &with_zero), 100).is_none());
        // A count that does not match the entries.
        let mut short = kept("a", &all);
        short.count -= 1;
        assert!(decoded(&short, 100).is_none());
        short.count += 2;
        assert!(decoded(&short, 100).is_none());
        // A chunk cut short.
        let mut cut = kept("a", &all);
        cut.chunks[0].pop();
        assert!(decoded(&cut, 100).is_none());
    }

    #[test]
    fn a_file_of_another_snapshot_or_damaged_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("indexes.db");
        write(&path, 3, 1234, 2_000);
        assert!(read_file(&path, 4, 1234).is_err(), "another token");
        assert!(read_file(&path, 3, 1235).is_err(), "another snapshot size");
        let bytes = std::fs::read(&path).unwrap();
        let mut flipped = bytes.clone();
        flipped[bytes.len() / 2] ^= 0x08;
        std::fs::write(&path, &flipped).unwrap();
        let err = read_file(&path, 3, 1234).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        for cut in [bytes.len() - 1, bytes.len() / 2, 3] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(read_file(&path, 3, 1234).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(&bytes[..20]);
        std::fs::write(&path, &longer).unwrap();
        assert!(
            read_file(&path, 3, 1234).is_err(),
            "bytes after the trailer"
        );
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_file(&path, 3, 1234).is_ok());
    }
}
