//! Files of framed records (length, CRC-32C, payload: the journal's framing) that are used only
//! when they are entirely intact: snapshots (`snapshot`) and their kept indexes (`kept`). Any
//! damage is an error naming the file; what follows from it is the caller's choice.

use super::journal::{read_record, ReadRecord, RECORD_HEADER_LEN};
use bson::Document;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

/// Large enough that a file of hundreds of MB is read and written in big pieces.
pub(super) const IO_BUFFER: usize = 1 << 20;

/// The error for a damaged or mismatched file: `what` it is (`"snapshot"`), its path and why.
pub(super) fn invalid_data(what: &str, path: &Path, msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what} {}: {msg}", path.display()),
    )
}

/// `doc`'s bytes in `scratch` (cleared first), for a record.
pub(super) fn encode(doc: &Document, scratch: &mut Vec<u8>) -> io::Result<()> {
    scratch.clear();
    doc.to_writer(&mut *scratch).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot encode document: {e}"),
        )
    })
}

/// Streams the records of one file, failing on any damage.
pub(super) struct Reader<'a> {
    /// What the file is, for errors.
    what: &'static str,
    pub(super) path: &'a Path,
    pub(super) r: BufReader<File>,
    /// The file's bytes not read yet.
    pub(super) remaining: u64,
    payload: Vec<u8>,
}

impl<'a> Reader<'a> {
    /// A reader of the file at `path`, which is `what` (for errors).
    pub(super) fn open(what: &'static str, path: &'a Path) -> io::Result<Reader<'a>> {
        let file = File::open(path)?;
        let remaining = file.metadata()?.len();
        Ok(Reader {
            what,
            path,
            r: BufReader::with_capacity(IO_BUFFER, file),
            remaining,
            payload: Vec::new(),
        })
    }

    /// The error for this file's damage.
    pub(super) fn invalid(&self, msg: impl std::fmt::Display) -> io::Error {
        invalid_data(self.what, self.path, msg)
    }

    /// The next record's payload into `payload`, its checksum verified.
    pub(super) fn next_record_into(&mut self, payload: &mut Vec<u8>) -> io::Result<()> {
        match read_record(&mut self.r, self.remaining, payload)? {
            ReadRecord::Ok => {}
            ReadRecord::End | ReadRecord::Truncated => {
                return Err(self.invalid("file is truncated"))
            }
            ReadRecord::BadChecksum => return Err(self.invalid("checksum mismatch")),
        }
        self.remaining -= (RECORD_HEADER_LEN + payload.len()) as u64;
        Ok(())
    }

    /// The next record's payload, its checksum verified.
    pub(super) fn next_record(&mut self) -> io::Result<&[u8]> {
        let mut payload = std::mem::take(&mut self.payload);
        let read = self.next_record_into(&mut payload);
        self.payload = payload;
        read?;
        Ok(&self.payload)
    }

    /// The next record as a document.
    pub(super) fn next_doc(&mut self) -> io::Result<Document> {
        let (what, path) = (self.what, self.path);
        crate::bson_depth::decode(self.next_record()?)
            .map_err(|e| invalid_data(what, path, format!("record is not BSON: {e}")))
    }
}
