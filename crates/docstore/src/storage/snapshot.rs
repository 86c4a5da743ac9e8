//! Snapshot files: every collection's options, indexes and documents at one journal rotation,
//! streamed as checksummed records so that the journal before that rotation can be deleted.
//!
//! Layout: a header record `{format, version, token, collections}`, then per collection a record
//! `{db, coll, options, indexes, count}` followed by `count` document records, then a trailer
//! `{end: true, collections, docs}`. Every record is framed like a journal record.

use super::faults::{DiskFaults, FaultyFile};
use super::journal::{write_record, RECORD_HEADER_LEN};
use super::records::{encode, Reader, IO_BUFFER};
use super::CollectionImage;
use crate::stored::StoredDoc;
use bson::{doc, Bson, Document};
use std::io::{self, BufWriter};
use std::path::Path;

const FORMAT: &str = "docstore-snapshot";
const VERSION: i32 = 1;

/// A batch of validated documents with its place in the file (batches are validated on several
/// threads and put back in order).
type SeqBatch = (usize, Vec<StoredDoc>);
fn invalid_data(path: &Path, msg: impl std::fmt::Display) -> io::Error {
    super::records::invalid_data("snapshot", path, msg)
}

/// Write a complete snapshot to `path` and fsync it. The caller renames it into place.
pub fn write_file(
    path: &Path,
    token: u64,
    collections: &[CollectionImage],
    faults: Option<DiskFaults>,
) -> io::Result<()> {
    let file = FaultyFile::new(super::private::create_file(path)?, faults)?;
    let mut w = BufWriter::with_capacity(IO_BUFFER, file);
    let mut scratch = Vec::new();
    let token_i64 = i64::try_from(token).unwrap_or(i64::MAX);
    let header = doc! {
        "format": FORMAT,
        "version": VERSION,
        "token": token_i64,
        "collections": collections.len() as i64,
    };
    encode(&header, &mut scratch)?;
    write_record(&mut w, &scratch)?;
    let mut total_docs: i64 = 0;
    for c in collections {
        let coll_header = doc! {
            "db": c.db.as_str(),
            "coll": c.coll.as_str(),
            "options": c.options.clone(),
            "indexes": c.indexes.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
            "count": c.docs.len() as i64,
        };
        encode(&coll_header, &mut scratch)?;
        write_record(&mut w, &scratch)?;
        for d in &c.docs {
            write_record(&mut w, d.as_bytes())?;
        }
        total_docs += c.docs.len() as i64;
    }
    let trailer = doc! {
        "end": true,
        "collections": collections.len() as i64,
        "docs": total_docs,
    };
    encode(&trailer, &mut scratch)?;
    write_record(&mut w, &scratch)?;
    let mut file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// The snapshot's own reading of its records (a snapshot is only used when it is entirely
/// intact, see `records`).
impl Reader<'_> {
    /// The next `count` records as stored documents, each validated as thoroughly as decoding
    /// would, but kept as its bytes. This thread reads the records and checks their checksums
    /// while others validate the documents, a batch at a time (start-up at a million
    /// documents).
    fn read_docs(&mut self, count: u64, plausible: usize) -> io::Result<Vec<StoredDoc>> {
        // One validator per core: the reading thread mostly waits for them (validating and
        // copying each document into memory of its own is the work; reading and checksumming
        // is cheap), so a core would otherwise sit idle.
        let validators = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (send, receive) = std::sync::mpsc::sync_channel::<Batch>(validators * 2);
        let receive = parking_lot::Mutex::new(receive);
        // Validated batches go back to the reader to be filled again: a few buffers for the
        // whole file rather than a fresh megabyte per batch.
        let (give_back, spare) = std::sync::mpsc::channel::<Batch>();
        let path = self.path;
        let (read, validated) = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..validators)
                .map(|_| {
                    let receive = &receive;
                    let give_back = give_back.clone();
                    scope.spawn(move || {
                        let mut done: Vec<(usize, Vec<StoredDoc>)> = Vec::new();
                        let mut failed = None;
                        // Every batch is taken, even after a failure, so the reader never
                        // waits on a full channel.
                        loop {
                            let next = receive.lock().recv();
                            let Ok(batch) = next else { break };
                            if failed.is_some() {
                                continue;
                            }
                            let mut docs = Vec::with_capacity(batch.ends.len());
                            let mut start = 0;
                            for &end in &batch.ends {
                                match StoredDoc::from_bytes(&batch.bytes[start..end]) {
                                    Ok(doc) => docs.push(doc),
                                    Err(e) => {
                                        failed = Some(invalid_data(
                                            path,
                                            format!("record is not BSON: {e}"),
                                        ));
                                        break;
                                    }
                                }
                                start = end;
                            }
                            done.push((batch.seq, docs));
                            let _ = give_back.send(batch);
                        }
                        match failed {
                            Some(e) => Err(e),
                            None => Ok(done),
                        }
                    })
                })
                .collect();
            drop(give_back);
            let read = self.read_batches(count, &send, &spare);
            drop(send);
            let validated: Vec<io::Result<Vec<SeqBatch>>> = handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect();
            (read, validated)
        });
        read?;
        let mut batches = Vec::new();
        for part in validated {
            batches.extend(part?);
        }
        batches.sort_unstable_by_key(|(seq, _)| *seq);
        let mut docs = Vec::with_capacity(plausible);
        for (_, batch) in batches {
            docs.extend(batch);
        }
        Ok(docs)
    }

    /// Read `count` records into batches for the validators.
    fn read_batches(
        &mut self,
        count: u64,
        send: &std::sync::mpsc::SyncSender<Batch>,
        spare: &std::sync::mpsc::Receiver<Batch>,
    ) -> io::Result<()> {
        let mut batch = Batch::new(0);
        for _ in 0..count {
            let record = self.next_record()?;
            batch.bytes.extend_from_slice(record);
            batch.ends.push(batch.bytes.len());
            if batch.bytes.len() >= BATCH_BYTES {
                let seq = batch.seq + 1;
                let next = match spare.try_recv() {
                    Ok(mut used) => {
                        used.seq = seq;
                        used.bytes.clear();
                        used.ends.clear();
                        used
                    }
                    Err(_) => Batch::new(seq),
                };
                if send.send(std::mem::replace(&mut batch, next)).is_err() {
                    // A validator failed; its error is reported.
                    return Ok(());
                }
            }
        }
        if !batch.ends.is_empty() {
            let _ = send.send(batch);
        }
        Ok(())
    }
}

/// Documents read and checksummed, on their way to be validated: their bytes one after
/// another, and where each ends.
struct Batch {
    seq: usize,
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// Bytes of documents handed to a validator at once.
const BATCH_BYTES: usize = 1 << 20;

impl Batch {
    fn new(seq: usize) -> Batch {
        Batch {
            seq,
            bytes: Vec::with_capacity(BATCH_BYTES + (64 << 10)),
            ends: Vec::new(),
        }
    }
}

fn get_count(path: &Path, d: &Document, key: &str) -> io::Result<u64> {
    let n = match d.get(key) {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        _ => return Err(invalid_data(path, format!("record lacks '{key}'"))),
    };
    u64::try_from(n).map_err(|_| invalid_data(path, format!("negative '{key}'")))
}

fn get_str(path: &Path, d: &Document, key: &str) -> io::Result<String> {
    d.get_str(key)
        .map(str::to_string)
        .map_err(|_| invalid_data(path, format!("collection record lacks '{key}'")))
}

/// Read and verify a whole snapshot; returns its token and collections.
pub(crate) fn read_file(path: &Path) -> io::Result<(u64, Vec<CollectionImage>)> {
    let mut reader = Reader::open("snapshot", path)?;
    let header = reader.next_doc()?;
    if header.get_str("format") != Ok(FORMAT) {
        return Err(invalid_data(path, "not a docstore snapshot"));
    }
    if header.get_i32("version") != Ok(VERSION) {
        return Err(invalid_data(path, "unsupported snapshot version"));
    }
    let token = get_count(path, &header, "token")?;
    let n_colls = get_count(path, &header, "collections")?;
    let mut collections = Vec::new();
    let mut total_docs = 0u64;
    for _ in 0..n_colls {
        let h = reader.next_doc()?;
        let count = get_count(path, &h, "count")?;
        let indexes = match h.get_array("indexes") {
            Ok(a) => a
                .iter()
                .map(|b| match b {
                    Bson::Document(d) => Ok(d.clone()),
                    _ => Err(invalid_data(path, "index spec is not a document")),
                })
                .collect::<io::Result<Vec<_>>>()?,
            Err(_) => return Err(invalid_data(path, "collection record lacks 'indexes'")),
        };
        let options = h
            .get_document("options")
            .cloned()
            .map_err(|_| invalid_data(path, "collection record lacks 'options'"))?;
        // Every document takes at least a header and 5 bytes, so this bounds the reservation
        // by the file size even if the count is garbage.
        let plausible = (reader.remaining / (RECORD_HEADER_LEN as u64 + 5)).min(count);
        let docs = reader.read_docs(count, plausible as usize)?;
        total_docs += count;
        collections.push(CollectionImage {
            db: get_str(path, &h, "db")?,
            coll: get_str(path, &h, "coll")?,
            options,
            indexes,
            docs,
        });
    }
    let trailer = reader.next_doc()?;
    if trailer.get_bool("end") != Ok(true)
        || get_count(path, &trailer, "collections")? != n_colls
        || get_count(path, &trailer, "docs")? != total_docs
    {
        return Err(invalid_data(path, "trailer does not match the contents"));
    }
    if reader.remaining != 0 {
        return Err(invalid_data(path, "unexpected bytes after the trailer"));
    }
    Ok((token, collections))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::journal::{read_record, ReadRecord};

    fn image(db: &str, coll: &str, n: i32) -> CollectionImage {
        CollectionImage {
            db: db.into(),
            coll: coll.into(),
            options: doc! {},
            indexes: vec![doc! {"v": 2, "key": {"n": 1}, "name": "n_1"}],
            docs: (0..n)
                .map(|i| {
                    StoredDoc::from_document(&doc! {"_id": i, "n": i * 2, "s": "x".repeat(20)})
                        .unwrap()
                })
                .collect(),
        }
    }

    #[test]
    fn a_snapshot_reads_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let images = vec![image("a", "one", 3), image("b", "two", 0)];
        write_file(&path, 7, &images, None).unwrap();
        let (token, back) = read_file(&path).unwrap();
        assert_eq!(token, 7);
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].db, "a");
        assert_eq!(back[0].coll, "one");
        assert_eq!(back[0].indexes, images[0].indexes);
        assert_eq!(back[0].docs, images[0].docs);
        assert_eq!(back[1].coll, "two");
        assert!(back[1].docs.is_empty());
    }

    #[test]
    fn a_snapshot_of_many_batches_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        // About 4 MB of documents: several batches for the validators.
        let images = vec![image("a", "big", 40_000), image("a", "small", 3)];
        write_file(&path, 2, &images, None).unwrap();
        let (_, back) = read_file(&path).unwrap();
        assert_eq!(back[0].docs, images[0].docs);
        assert_eq!(back[1].docs, images[1].docs);
    }

    #[test]
    fn a_record_that_is_not_bson_is_refused_even_with_a_valid_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut images = vec![image("a", "big", 30_000)];
        // Valid framing and checksum, invalid BSON (the element after `_id` has no valid
        // type), in the middle of the collection and in its last batch.
        for at in [15_000, 29_999] {
            let mut bytes = images[0].docs[at].as_bytes().to_vec();
            bytes[13] = 0x55;
            let bad = std::sync::Arc::<[u8]>::from(bytes);
            images[0].docs[at] = unsafe_stored(bad);
            write_file(&path, 1, &images, None).unwrap();
            let Err(err) = read_file(&path) else {
                panic!("a snapshot with a record that is not BSON was accepted");
            };
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
            assert!(err.to_string().contains("not BSON"), "{err}");
            images = vec![image("a", "big", 30_000)];
        }
    }

    /// A stored document holding whatever bytes (to write a damaged snapshot).
    fn unsafe_stored(bytes: std::sync::Arc<[u8]>) -> StoredDoc {
        StoredDoc::from_raw_unchecked(bytes)
    }

    #[test]
    fn a_damaged_or_truncated_snapshot_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        write_file(&path, 1, &[image("a", "one", 50)], None).unwrap();
        let bytes = std::fs::read(&path).unwrap();

        let mut flipped = bytes.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x40;
        std::fs::write(&path, &flipped).unwrap();
        assert_eq!(
            read_file(&path).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );

        // Cutting exactly at a record boundary (the trailer) must also be caught.
        let mut r = &bytes[..];
        let mut payload = Vec::new();
        let mut remaining = bytes.len() as u64;
        let mut last_start = 0;
        while let ReadRecord::Ok = read_record(&mut r, remaining, &mut payload).unwrap() {
            last_start = bytes.len() as u64 - remaining;
            remaining -= (RECORD_HEADER_LEN + payload.len()) as u64;
        }
        std::fs::write(&path, &bytes[..last_start as usize]).unwrap();
        assert!(read_file(&path).is_err());
    }
}
