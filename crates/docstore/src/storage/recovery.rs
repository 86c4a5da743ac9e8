//! Recovery: choosing the snapshot to start from, replaying the journal after it, and repairing a
//! damaged data directory.
//!
//! The rule is *detect, never silently discard*. A crash can only tear the end of the last write
//! to the newest segment, so only that — an incomplete last record at the physical end of the
//! newest non-empty segment, whose first bytes still look like the start of a journal record,
//! with no valid record anywhere after it — is dropped at start-up, and even then its bytes are
//! moved to a quarantine file beside the segment rather than thrown away. Anything else (an
//! implausible length, a checksum that fails, a record that is not journal BSON, in any segment)
//! is damage: start-up refuses with a message naming the file, the offset, what follows, and the
//! remedy, [`repair_with`], which keeps every record that still validates and reports what was lost.

use super::journal::{self, RECORD_HEADER_LEN};
use super::{
    data_loss, kept_name, list_dir, lock_dir, prepare_private_dir, segment_name, snapshot,
    snapshot_name, snapshot_tmp_name, sync_dir, Base, CollectionImage, JournalOp, Listing,
    FIRST_SEGMENT,
};
use bson::{Bson, Document};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use tracing::warn;

/// The bytes every journal record's payload starts with after its BSON length: the `ops` array
/// element of `{ops: [...]}`.
const GROUP_SIGNATURE: [u8; 5] = [0x04, b'o', b'p', b's', 0];
/// The smallest journal payload, `{ops: []}`.
const MIN_GROUP_LEN: usize = 15;
/// The smallest BSON document.
const MIN_BSON_LEN: usize = 5;

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// Fewer bytes than a record header are left before the end of the file.
    HeaderCut,
    /// The length field says the record runs past the end of the file.
    PastEnd { declared: u64 },
    /// The length field is too small for any record.
    Implausible { declared: u64 },
    /// The record is complete but its checksum does not match.
    Checksum,
    /// The checksum matches but the payload is not a journal record.
    NotARecord(String),
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bad::HeaderCut => f.write_str("record header cut short by the end of the file"),
            Bad::PastEnd { declared } => write!(
                f,
                "length field says {declared} bytes, more than the rest of the file"
            ),
            Bad::Implausible { declared } => {
                write!(f, "implausible length field ({declared} bytes)")
            }
            Bad::Checksum => f.write_str("checksum mismatch"),
            Bad::NotARecord(why) => write!(f, "checksum matches but {why}"),
        }
    }
}

/// Length and checksum of the record header at `off`, if a whole header is there.
fn header_at(bytes: &[u8], off: usize) -> Option<(usize, u32)> {
    let h = bytes.get(off..off + RECORD_HEADER_LEN)?;
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    Some((len, crc))
}

/// The framed record at `off` (length, checksum), with `min_len` the smallest plausible payload.
/// Returns the payload, or why there is no valid record there.
fn framed_at(bytes: &[u8], off: usize, min_len: usize) -> Result<Option<&[u8]>, Bad> {
    if off >= bytes.len() {
        return Ok(None);
    }
    let Some((len, crc)) = header_at(bytes, off) else {
        return Err(Bad::HeaderCut);
    };
    if len < min_len {
        return Err(Bad::Implausible {
            declared: len as u64,
        });
    }
    let start = off + RECORD_HEADER_LEN;
    if len > bytes.len() - start {
        return Err(Bad::PastEnd {
            declared: len as u64,
        });
    }
    let payload = &bytes[start..start + len];
    if crc32c::crc32c(payload) != crc {
        return Err(Bad::Checksum);
    }
    // A BSON document says its own length; one shorter than the record would let trailing
    // bytes pass unchecked.
    if payload[..4] != (len as u32).to_le_bytes() {
        return Err(Bad::NotARecord(
            "its BSON length disagrees with the record length".into(),
        ));
    }
    Ok(Some(payload))
}

/// The journal record at `off`: its operations and total size, `None` at the end of the file.
pub(crate) fn journal_record_at(
    bytes: &[u8],
    off: usize,
) -> Result<Option<(Vec<JournalOp>, usize)>, Bad> {
    let Some(payload) = framed_at(bytes, off, MIN_GROUP_LEN)? else {
        return Ok(None);
    };
    let ops = journal::decode_group(payload).map_err(|e| Bad::NotARecord(e.to_string()))?;
    Ok(Some((ops, RECORD_HEADER_LEN + payload.len())))
}

/// Whether a record header at `off` is followed by the first bytes of a journal payload of the
/// length it declares (as many of them as there are). Cheap; true for every real record start.
fn plausible_journal_start(bytes: &[u8], off: usize) -> bool {
    let Some((len, _)) = header_at(bytes, off) else {
        return false;
    };
    if len < MIN_GROUP_LEN {
        return false;
    }
    let mut expected = [0u8; 9];
    expected[..4].copy_from_slice(&(len as u32).to_le_bytes());
    expected[4..].copy_from_slice(&GROUP_SIGNATURE);
    let available = &bytes[off + RECORD_HEADER_LEN..];
    let n = available.len().min(expected.len());
    available[..n] == expected[..n]
}

/// The first offset at or after `from` where a whole valid journal record starts: length,
/// checksum and BSON all check out. This is how salvage finds its footing after damage.
pub(crate) fn next_valid_journal_record(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len().saturating_sub(RECORD_HEADER_LEN)).find(|&p| {
        let Some((len, _)) = header_at(bytes, p) else {
            return false;
        };
        // Cheap filters first, so that scanning megabytes of garbage stays linear.
        len >= MIN_GROUP_LEN
            && len <= bytes.len() - p - RECORD_HEADER_LEN
            && bytes[p + RECORD_HEADER_LEN + len - 1] == 0
            && plausible_journal_start(bytes, p)
            && matches!(journal_record_at(bytes, p), Ok(Some(_)))
    })
}

/// Valid journal records from `from` to the end, skipping over damage (for messages).
fn count_valid_after(bytes: &[u8], from: usize) -> u64 {
    let mut n = 0;
    let mut off = from;
    while let Some(p) = next_valid_journal_record(bytes, off) {
        let Ok(Some((_, size))) = journal_record_at(bytes, p) else {
            break;
        };
        n += 1;
        off = p + size;
    }
    n
}

/// Whether the bad record at `off` is a torn tail: the record the writer was appending when the
/// process or machine stopped. Only the newest non-empty segment can have one, it runs to the end
/// of the file, its length field agrees with the BSON length and `{ops:` that follow it (a
/// damaged length field does not), and nothing valid comes after it.
pub(crate) fn is_torn_tail(bytes: &[u8], off: usize, bad: &Bad) -> bool {
    let incomplete = match bad {
        Bad::HeaderCut => true,
        Bad::PastEnd { .. } => plausible_journal_start(bytes, off),
        _ => false,
    };
    incomplete && next_valid_journal_record(bytes, off + 1).is_none()
}

/// What checking one whole segment found.
#[derive(Debug)]
pub enum SegmentCheck {
    /// Every record is valid.
    Intact { ops: Vec<JournalOp> },
    /// Valid up to `offset`, then a torn tail (if the segment is the newest).
    TornTail {
        ops: Vec<JournalOp>,
        offset: usize,
        bad: Bad,
    },
    /// Damage at `offset`; `records_after` valid records follow it in this segment.
    Damaged {
        offset: usize,
        bad: Bad,
        records_after: u64,
    },
}

/// Check a segment's bytes as start-up does; `newest` says whether a torn tail is possible.
pub fn check_segment(bytes: &[u8], newest: bool) -> SegmentCheck {
    let mut ops = Vec::new();
    let mut off = 0;
    loop {
        match journal_record_at(bytes, off) {
            Ok(Some((group, size))) => {
                ops.extend(group);
                off += size;
            }
            Ok(None) => return SegmentCheck::Intact { ops },
            Err(bad) if newest && is_torn_tail(bytes, off, &bad) => {
                return SegmentCheck::TornTail {
                    ops,
                    offset: off,
                    bad,
                }
            }
            Err(bad) => {
                return SegmentCheck::Damaged {
                    offset: off,
                    records_after: count_valid_after(bytes, off + 1),
                    bad,
                }
            }
        }
    }
}

/// One operation of a lost record that could still be read well enough to name it.
#[derive(Debug, Clone, PartialEq)]
pub struct LostOp {
    /// `put`, `delete`, `createIndex`, ...
    pub op: String,
    /// `db.collection` (or just `db` for a database drop).
    pub namespace: String,
    /// The document's `_id` (put, delete), if any.
    pub id: Option<Bson>,
    /// Other detail: an index name, a rename target.
    pub detail: Option<String>,
    /// Where it was read in the file. It was read from a damaged range, so if the damage itself
    /// fell inside these bytes, what is shown may be altered.
    pub at: std::ops::Range<u64>,
}

impl fmt::Display for LostOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.op, self.namespace)?;
        if let Some(id) = &self.id {
            write!(f, " _id {id}")?;
        }
        if let Some(detail) = &self.detail {
            write!(f, " {detail}")?;
        }
        Ok(())
    }
}

fn lost_op(op: &JournalOp, at: std::ops::Range<u64>) -> LostOp {
    let ns = |db: &str, coll: &str| format!("{db}.{coll}");
    let (name, namespace, id, detail) = match op {
        JournalOp::CreateCollection { db, coll, .. } => ("create", ns(db, coll), None, None),
        JournalOp::DropCollection { db, coll } => ("drop", ns(db, coll), None, None),
        JournalOp::DropDatabase { db } => ("dropDatabase", db.clone(), None, None),
        JournalOp::RenameCollection {
            db,
            from,
            to_db,
            to,
        } => (
            "rename",
            ns(db, from),
            None,
            Some(format!("to {}", ns(to_db, to))),
        ),
        JournalOp::CreateIndex { db, coll, spec } => (
            "createIndex",
            ns(db, coll),
            None,
            spec.get_str("name").ok().map(str::to_string),
        ),
        JournalOp::DropIndex { db, coll, name } => {
            ("dropIndex", ns(db, coll), None, Some(name.clone()))
        }
        JournalOp::Put { db, coll, doc } => {
            ("put", ns(db, coll), doc.get("_id").ok().flatten(), None)
        }
        JournalOp::Delete { db, coll, id } => ("delete", ns(db, coll), Some(id.clone()), None),
    };
    LostOp {
        op: name.to_string(),
        namespace,
        id,
        detail,
        at,
    }
}

/// BSON documents embedded anywhere in `bytes` that parse as `f` accepts: how the operations of
/// a damaged record are still named when only part of it is damaged.
/// `[from, to)` is the range searched; `f` gets each document and where it lies.
fn embedded_documents<T>(
    bytes: &[u8],
    from: usize,
    to: usize,
    mut f: impl FnMut(&Document, std::ops::Range<u64>) -> Option<T>,
) -> Vec<T> {
    let bytes = &bytes[..to];
    let mut found = Vec::new();
    let mut p = from;
    while p + MIN_BSON_LEN <= bytes.len() {
        let len = i32::from_le_bytes([bytes[p], bytes[p + 1], bytes[p + 2], bytes[p + 3]]);
        let fits = usize::try_from(len)
            .ok()
            .filter(|&l| l >= MIN_BSON_LEN && l <= bytes.len() - p && bytes[p + l - 1] == 0);
        if let Some(l) = fits {
            if let Ok(d) = crate::bson_depth::decode(&bytes[p..p + l]) {
                if let Some(t) = f(&d, p as u64..(p + l) as u64) {
                    found.push(t);
                    p += l;
                    continue;
                }
            }
        }
        p += 1;
    }
    found
}

/// The journal operations still legible in a damaged byte range.
fn legible_ops(bytes: &[u8], from: usize, to: usize) -> Vec<LostOp> {
    embedded_documents(bytes, from, to, |d, at| {
        d.contains_key("op")
            .then(|| JournalOp::from_document(d).ok())
            .flatten()
            .map(|op| lost_op(&op, at))
    })
}

/// A damaged range that salvage had to skip.
#[derive(Debug, Clone)]
pub struct LostRegion {
    pub file: PathBuf,
    /// Byte range `[start, end)` in `file`.
    pub start: u64,
    pub end: u64,
    /// Records (journal groups, or snapshot documents) that started in the range, as far as
    /// their headers could still be read; at least one.
    pub records: u64,
    pub reason: String,
    /// An incomplete last record of the newest segment: a write that was never acknowledged.
    pub torn_tail: bool,
    /// Operations or documents in the range that could still be named.
    pub identified: Vec<LostOp>,
}

impl LostRegion {
    pub fn bytes(&self) -> u64 {
        self.end - self.start
    }
}

/// Count the records that started in the damaged range `[start, end)`: follow length fields
/// where they agree with what follows them, and look for the next plausible header where not.
/// A lower bound when headers inside the range were destroyed too.
fn records_in_region(
    bytes: &[u8],
    start: usize,
    end: usize,
    plausible: fn(&[u8], usize) -> bool,
) -> u64 {
    // A record header inside the range, whose whole signature is there and which ends in it.
    let record_end = |q: usize| -> Option<usize> {
        let (len, _) = header_at(bytes, q)?;
        let next = q + RECORD_HEADER_LEN + len;
        (q + RECORD_HEADER_LEN + 9 <= bytes.len() && plausible(bytes, q) && next <= end)
            .then_some(next)
    };
    let mut n = 1;
    let mut p = start;
    loop {
        let next = match record_end(p) {
            Some(next) => next,
            None => match (p + 1..end).find(|&q| record_end(q).is_some()) {
                Some(q) => q,
                None => return n,
            },
        };
        if next >= end {
            return n;
        }
        n += 1;
        p = next;
    }
}

/// What salvaging one segment kept and lost.
#[derive(Debug, Default)]
pub struct SegmentSalvage {
    pub ops: Vec<JournalOp>,
    /// Valid records kept.
    pub records: u64,
    pub lost: Vec<LostRegion>,
}

/// Keep every valid record of a segment, resynchronising after each damaged range at the next
/// record whose length, checksum and BSON all validate. `newest` allows a torn tail.
pub fn salvage_segment(file: &Path, bytes: &[u8], newest: bool) -> SegmentSalvage {
    let mut out = SegmentSalvage::default();
    let mut off = 0;
    loop {
        match journal_record_at(bytes, off) {
            Ok(Some((group, size))) => {
                out.ops.extend(group);
                out.records += 1;
                off += size;
            }
            Ok(None) => return out,
            Err(bad) => {
                let torn = newest && is_torn_tail(bytes, off, &bad);
                let end = next_valid_journal_record(bytes, off + 1).unwrap_or(bytes.len());
                out.lost.push(LostRegion {
                    file: file.to_path_buf(),
                    start: off as u64,
                    end: end as u64,
                    records: records_in_region(bytes, off, end, plausible_journal_start),
                    reason: bad.to_string(),
                    torn_tail: torn,
                    identified: legible_ops(bytes, off, end),
                });
                off = end;
            }
        }
    }
}

/// An error start-up cannot get past on its own; [`crate::repair::repair`] can.
#[derive(Debug)]
pub struct NeedsRepair {
    pub dir: PathBuf,
    pub message: String,
}

impl fmt::Display for NeedsRepair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}. docstore will not start rather than silently drop data. To keep every record \
             that still validates and set the damaged bytes aside, stop everything using {} and \
             run `docstore --repair --dbpath {}` (it reports exactly what was lost), or restore \
             the directory from a backup",
            self.message,
            self.dir.display(),
            self.dir.display()
        )
    }
}

impl std::error::Error for NeedsRepair {}

fn needs_repair(dir: &Path, message: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        NeedsRepair {
            dir: dir.to_path_buf(),
            message,
        },
    )
}

/// The damage behind an error from [`super::Storage::open`], if [`crate::repair::repair`] can deal with it.
pub fn damage(e: &io::Error) -> Option<&NeedsRepair> {
    e.get_ref()?.downcast_ref::<NeedsRepair>()
}

pub(super) fn choose_base(dir: &Path, listing: &Listing) -> io::Result<Base> {
    let mut failed: Vec<(u64, io::Error)> = Vec::new();
    for &token in listing.snapshots.iter().rev() {
        // An older snapshot only stands in if the journal after it is all still there.
        if !failed.is_empty() && !listing.segments.contains_key(&token) {
            break;
        }
        let path = dir.join(snapshot_name(token));
        match snapshot::read_file(&path) {
            Ok((t, collections)) if t == token => {
                return Ok(Base {
                    token,
                    collections,
                    newest: failed.is_empty(),
                })
            }
            Ok((t, _)) => {
                let e = data_loss(format!(
                    "snapshot {} says it is snapshot {t}",
                    path.display()
                ));
                warn!("{e}");
                failed.push((token, e));
            }
            Err(e) => {
                warn!("cannot use snapshot {}: {e}", path.display());
                failed.push((token, e));
            }
        }
    }
    let no_snapshot = Base {
        token: FIRST_SEGMENT,
        collections: Vec::new(),
        newest: failed.is_empty(),
    };
    if failed.is_empty() {
        return Ok(no_snapshot);
    }
    if listing.segments.contains_key(&FIRST_SEGMENT) {
        warn!("no usable snapshot; replaying the whole journal");
        return Ok(no_snapshot);
    }
    let reasons: Vec<String> = failed.iter().map(|(_, e)| e.to_string()).collect();
    Err(needs_repair(
        dir,
        format!(
            "cannot recover {}: the newest snapshot is damaged and no intact older snapshot with \
             the journal after it remains ({})",
            dir.display(),
            reasons.join("; ")
        ),
    ))
}

/// Set aside snapshots that failed to load, so that later recoveries do not trip on them again;
/// the recovered state already covers them.
pub(super) fn quarantine_snapshots_after(dir: &Path, listing: &Listing, base: &Base) {
    if base.newest {
        return;
    }
    for &token in listing.snapshots.iter().filter(|&&t| t > base.token) {
        let from = dir.join(snapshot_name(token));
        let to = dir.join(format!("{}.corrupt", snapshot_name(token)));
        match fs::rename(&from, &to) {
            Ok(()) => warn!("moved unusable snapshot aside to {}", to.display()),
            Err(e) => warn!("cannot move unusable snapshot {}: {e}", from.display()),
        }
        // Its kept indexes are of no use without it.
        let _ = fs::remove_file(dir.join(kept_name(token)));
    }
}

/// The file a torn tail of `segment` at `offset` is moved to.
pub fn torn_tail_name(segment: u64, offset: usize) -> String {
    format!("{}.torn-at-{offset}", segment_name(segment))
}

/// Move the bytes of a torn tail into a quarantine file beside the segment (durably), then cut
/// them from the segment so that appends continue after the last valid record.
fn quarantine_tail(dir: &Path, segment: u64, bytes: &[u8], offset: usize) -> io::Result<PathBuf> {
    let path = dir.join(segment_name(segment));
    let aside = dir.join(torn_tail_name(segment, offset));
    let mut f = super::private::create_file(&aside)?;
    f.write_all(&bytes[offset..])?;
    f.sync_all()?;
    sync_dir(dir)?;
    let seg = OpenOptions::new().write(true).open(&path)?;
    seg.set_len(offset as u64)?;
    seg.sync_all()?;
    Ok(aside)
}

/// Segments `token, token + 1, ...`, refusing a gap.
fn segments_from(dir: &Path, listing: &Listing, token: u64) -> io::Result<Vec<(u64, u64)>> {
    let segments: Vec<(u64, u64)> = listing
        .segments
        .range(token..)
        .map(|(&n, &len)| (n, len))
        .collect();
    for (expected, &(n, _)) in (token..).zip(&segments) {
        if n != expected {
            return Err(needs_repair(
                dir,
                format!(
                    "journal segment {} is missing from {}",
                    dir.join(segment_name(expected)).display(),
                    dir.display()
                ),
            ));
        }
    }
    Ok(segments)
}

/// Replay segments `token, token + 1, ...`; returns their ops and total size.
pub(super) fn replay(
    dir: &Path,
    listing: &Listing,
    token: u64,
) -> io::Result<(Vec<JournalOp>, u64)> {
    let segments = segments_from(dir, listing, token)?;
    // A crash can only tear the last write, and that went to the newest non-empty segment.
    let newest = segments
        .iter()
        .rev()
        .find(|&&(_, len)| len > 0)
        .map(|&(n, _)| n);
    let mut ops = Vec::new();
    let mut total = 0u64;
    for (i, &(n, _)) in segments.iter().enumerate() {
        let path = dir.join(segment_name(n));
        let bytes = fs::read(&path)?;
        match check_segment(&bytes, Some(n) == newest) {
            SegmentCheck::Intact { ops: group } => {
                ops.extend(group);
                total += bytes.len() as u64;
            }
            SegmentCheck::TornTail {
                ops: group,
                offset,
                bad,
            } => {
                let aside = quarantine_tail(dir, n, &bytes, offset)?;
                warn!(
                    "journal {} ends in a torn write at byte {offset} ({bad}): the {} bytes of \
                     that never-acknowledged write were moved to {}",
                    path.display(),
                    bytes.len() - offset,
                    aside.display()
                );
                ops.extend(group);
                total += offset as u64;
            }
            SegmentCheck::Damaged {
                offset,
                bad,
                records_after,
            } => {
                let mut later_records = 0u64;
                let mut later_bytes = 0u64;
                for &(m, len) in &segments[i + 1..] {
                    let later = fs::read(dir.join(segment_name(m)))?;
                    later_records += count_valid_after(&later, 0);
                    later_bytes += len;
                }
                let follows = if later_bytes > 0 {
                    format!(
                        "{records_after} intact records ({} bytes) follow it in this segment and \
                         {later_records} more ({later_bytes} bytes) in {} later segments",
                        bytes.len() - offset,
                        segments.len() - i - 1
                    )
                } else {
                    format!(
                        "{records_after} intact records follow it in the {} bytes to the end of \
                         the journal",
                        bytes.len() - offset
                    )
                };
                return Err(needs_repair(
                    dir,
                    format!(
                        "journal {} is damaged at byte {offset} ({bad}); {follows}",
                        path.display()
                    ),
                ));
            }
        }
    }
    Ok((ops, total))
}

/// Replays journal operations onto collection images (see [`repair_with`]).
pub(crate) type Replay<'a> =
    &'a dyn Fn(Vec<CollectionImage>, Vec<JournalOp>) -> io::Result<Vec<CollectionImage>>;

/// What [`repair`](crate::repair) kept, lost and moved.
#[derive(Debug, Clone)]
pub struct RepairReport {
    pub dir: PathBuf,
    /// The snapshot repair started from (`None`: the journal from its first segment).
    pub base_snapshot: Option<PathBuf>,
    /// Journal records replayed on top of it.
    pub records_kept: u64,
    pub ops_kept: u64,
    /// Collections and documents in the repaired store.
    pub collections: u64,
    pub documents: u64,
    /// Every damaged range skipped, in journal and snapshot files, in order.
    pub lost: Vec<LostRegion>,
    /// Journal segments that should have been there but were not.
    pub missing_segments: Vec<PathBuf>,
    /// The fresh snapshot holding the repaired state.
    pub snapshot: PathBuf,
    /// Where the journal segments and snapshots from before the repair were moved.
    pub moved_to: PathBuf,
}

impl RepairReport {
    /// Whether anything acknowledged was lost (a torn tail never was).
    pub fn lost_anything(&self) -> bool {
        self.lost.iter().any(|r| !r.torn_tail) || !self.missing_segments.is_empty()
    }
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "repaired {}", self.dir.display())?;
        match &self.base_snapshot {
            Some(s) => writeln!(f, "  started from snapshot {}", s.display())?,
            None => writeln!(f, "  started from the beginning of the journal")?,
        }
        writeln!(
            f,
            "  kept {} journal records ({} operations); the store now holds {} collections, {} \
             documents",
            self.records_kept, self.ops_kept, self.collections, self.documents
        )?;
        for m in &self.missing_segments {
            writeln!(f, "  LOST: journal segment {} is missing", m.display())?;
        }
        if self.lost.is_empty() && self.missing_segments.is_empty() {
            writeln!(f, "  nothing was lost")?;
        }
        for r in &self.lost {
            let what = if r.torn_tail {
                "dropped a torn tail (a write that was never acknowledged)"
            } else {
                "LOST"
            };
            writeln!(
                f,
                "  {what}: {} bytes {}..{} of {}, {} record{} ({})",
                r.bytes(),
                r.start,
                r.end,
                r.file.display(),
                r.records,
                if r.records == 1 { "" } else { "s" },
                r.reason
            )?;
            if r.identified.is_empty() {
                writeln!(f, "    nothing in it could still be identified")?;
            } else {
                // Read from the damaged bytes: a name the damage itself hit may be altered.
                writeln!(f, "    still legible in it:")?;
            }
            for op in &r.identified {
                writeln!(f, "    {op}")?;
            }
        }
        writeln!(f, "  fresh snapshot: {}", self.snapshot.display())?;
        write!(
            f,
            "  the files from before the repair were moved to {}",
            self.moved_to.display()
        )
    }
}

/// Whether the snapshot record header at `off` is followed by a BSON length that agrees.
fn plausible_snapshot_start(bytes: &[u8], off: usize) -> bool {
    let Some((len, _)) = header_at(bytes, off) else {
        return false;
    };
    let available = &bytes[off + RECORD_HEADER_LEN..];
    len >= MIN_BSON_LEN && (available.len() < 4 || available[..4] == (len as u32).to_le_bytes())
}

fn snapshot_doc_at(bytes: &[u8], off: usize) -> Result<Option<(Document, usize)>, Bad> {
    let Some(payload) = framed_at(bytes, off, MIN_BSON_LEN)? else {
        return Ok(None);
    };
    let doc = crate::bson_depth::decode(payload)
        .map_err(|e| Bad::NotARecord(format!("the record is not BSON: {e}")))?;
    Ok(Some((doc, RECORD_HEADER_LEN + payload.len())))
}

fn next_valid_snapshot_record(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len().saturating_sub(RECORD_HEADER_LEN)).find(|&p| {
        plausible_snapshot_start(bytes, p)
            && header_at(bytes, p)
                .is_some_and(|(len, _)| len <= bytes.len() - p - RECORD_HEADER_LEN)
            && matches!(snapshot_doc_at(bytes, p), Ok(Some(_)))
    })
}

/// The per-collection record of a snapshot, told apart from documents by its exact shape.
fn collection_header(d: &Document) -> Option<(String, String, Document, Vec<Document>, u64)> {
    let keys: Vec<&str> = d.keys().map(String::as_str).collect();
    if keys != ["db", "coll", "options", "indexes", "count"] {
        return None;
    }
    let indexes = d
        .get_array("indexes")
        .ok()?
        .iter()
        .map(|b| b.as_document().cloned())
        .collect::<Option<Vec<_>>>()?;
    Some((
        d.get_str("db").ok()?.to_string(),
        d.get_str("coll").ok()?.to_string(),
        d.get_document("options").ok()?.clone(),
        indexes,
        u64::try_from(d.get_i64("count").ok()?).ok()?,
    ))
}

fn is_trailer(d: &Document) -> bool {
    d.keys().map(String::as_str).collect::<Vec<_>>() == ["end", "collections", "docs"]
        && d.get_bool("end") == Ok(true)
}

/// Keep every record of a damaged snapshot that validates. Documents after a damaged range are
/// only kept when the range's record count is known exactly and the collection header said more
/// documents were still to come, so a document is never filed under the wrong collection;
/// otherwise they are reported lost, by `_id`, until the next collection header.
pub fn salvage_snapshot(path: &Path, bytes: &[u8]) -> (Vec<CollectionImage>, Vec<LostRegion>) {
    let mut collections: Vec<CollectionImage> = Vec::new();
    let mut lost: Vec<LostRegion> = Vec::new();
    // Documents still expected for the last collection header, while we know where we are.
    let mut expected: Option<u64> = None;
    let mut off = 0;
    let mut orphans: Option<usize> = None;
    loop {
        match snapshot_doc_at(bytes, off) {
            Ok(None) => break,
            Ok(Some((doc, size))) => {
                let region_start = off;
                off += size;
                if off == size && doc.get_str("format").is_ok() {
                    continue; // the file header
                }
                // While a header's count says documents are still to come, this is one of them,
                // whatever its shape.
                let doc_expected = matches!(expected, Some(left) if left > 0);
                if let Some((db, coll, options, indexes, count)) =
                    collection_header(&doc).filter(|_| !doc_expected)
                {
                    collections.push(CollectionImage {
                        db,
                        coll,
                        options,
                        indexes,
                        docs: Vec::new(),
                    });
                    expected = Some(count);
                    orphans = None;
                    continue;
                }
                if !doc_expected && is_trailer(&doc) {
                    expected = Some(0);
                    continue;
                }
                match (expected, collections.last_mut()) {
                    (Some(left), Some(c)) if left > 0 && orphans.is_none() => {
                        match crate::stored::StoredDoc::from_document(&doc) {
                            Ok(stored) => c.docs.push(stored),
                            // Decoded from valid BSON, so it encodes; never file a guess.
                            Err(e) => warn!(
                                "salvage dropped a document that does not encode: {}",
                                e.message
                            ),
                        }
                        expected = Some(left - 1);
                    }
                    _ => {
                        // A document whose collection is unknown: report it rather than guess.
                        let i = *orphans.get_or_insert_with(|| {
                            lost.push(LostRegion {
                                file: path.to_path_buf(),
                                start: region_start as u64,
                                end: region_start as u64,
                                records: 0,
                                reason: "intact documents whose collection header was lost".into(),
                                torn_tail: false,
                                identified: Vec::new(),
                            });
                            lost.len() - 1
                        });
                        let r = &mut lost[i];
                        r.end = off as u64;
                        r.records += 1;
                        r.identified.push(LostOp {
                            op: "document".into(),
                            namespace: "(unknown collection)".into(),
                            id: doc.get("_id").cloned(),
                            detail: None,
                            at: (region_start + RECORD_HEADER_LEN) as u64..off as u64,
                        });
                    }
                }
            }
            Err(bad) => {
                let end = next_valid_snapshot_record(bytes, off + 1).unwrap_or(bytes.len());
                // Exact only if every length field in the range chains to its end.
                let mut chained = Some(0u64);
                let mut p = off;
                while p < end {
                    match header_at(bytes, p) {
                        Some((len, _)) if plausible_snapshot_start(bytes, p) => {
                            p += RECORD_HEADER_LEN + len;
                            chained = chained.map(|n| n + 1);
                        }
                        _ => {
                            chained = None;
                            break;
                        }
                    }
                }
                if p != end {
                    chained = None;
                }
                let ns = collections
                    .last()
                    .map(|c| format!("{}.{}", c.db, c.coll))
                    .unwrap_or_default();
                let identified = embedded_documents(bytes, off, end, |d, at| {
                    d.get("_id").map(|id| LostOp {
                        op: "document".into(),
                        namespace: ns.clone(),
                        id: Some(id.clone()),
                        detail: None,
                        at,
                    })
                });
                lost.push(LostRegion {
                    file: path.to_path_buf(),
                    start: off as u64,
                    end: end as u64,
                    records: chained.unwrap_or_else(|| {
                        records_in_region(bytes, off, end, plausible_snapshot_start)
                    }),
                    reason: bad.to_string(),
                    torn_tail: false,
                    identified,
                });
                expected = match (expected, chained) {
                    (Some(left), Some(n)) if n < left => Some(left - n),
                    _ => None,
                };
                orphans = None;
                off = end;
            }
        }
    }
    (collections, lost)
}

/// Hard-link (or, where links are not supported, copy) a file into `to_dir`.
fn keep_copy(from: &Path, to_dir: &Path) -> io::Result<()> {
    let to = to_dir.join(from.file_name().unwrap_or_default());
    if fs::hard_link(from, &to).is_err() {
        fs::copy(from, &to)?;
        File::open(&to)?.sync_all()?;
    }
    Ok(())
}

/// Salvage a data directory: keep every snapshot and journal record that still validates,
/// resynchronising after each damaged range, write the result as a fresh snapshot, and move the
/// old journal segments and snapshots into a `repair-<time>` directory inside `dir` (nothing is
/// deleted). Refuses while a server has the directory open.
///
/// `replay` turns the salvaged base and journal operations into the collections they describe,
/// as start-up would; the catalog supplies it (`crate::repair`), since what an operation means
/// is not storage's to know.
pub(crate) fn repair_with(dir: &Path, replay: Replay<'_>) -> io::Result<RepairReport> {
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a directory", dir.display()),
        ));
    }
    prepare_private_dir(dir)?;
    let _lock = lock_dir(dir)?;
    let listing = list_dir(dir)?;
    let mut lost = Vec::new();

    // The base: the newest intact snapshot; failing that, the whole journal if it is all there;
    // failing that, what can be salvaged from the newest snapshot.
    let mut base: Option<(u64, Vec<CollectionImage>)> = None;
    for &token in listing.snapshots.iter().rev() {
        if let Ok((t, collections)) = snapshot::read_file(&dir.join(snapshot_name(token))) {
            if t == token {
                base = Some((token, collections));
                break;
            }
        }
    }
    let newest_snapshot = listing.snapshots.last().copied();
    let base = match base {
        // An older intact snapshot is only better than salvage if the journal after it is there.
        Some((token, c))
            if Some(token) == newest_snapshot || listing.segments.contains_key(&token) =>
        {
            Some((token, c))
        }
        _ if newest_snapshot.is_none() || listing.segments.contains_key(&FIRST_SEGMENT) => None,
        _ => {
            let token = newest_snapshot.unwrap_or(FIRST_SEGMENT);
            let path = dir.join(snapshot_name(token));
            let bytes = fs::read(&path)?;
            let (collections, snapshot_lost) = salvage_snapshot(&path, &bytes);
            lost.extend(snapshot_lost);
            Some((token, collections))
        }
    };
    let (token, collections, base_snapshot) = match base {
        Some((token, c)) => (token, c, Some(dir.join(snapshot_name(token)))),
        None => (FIRST_SEGMENT, Vec::new(), None),
    };

    let segments: Vec<u64> = listing.segments.range(token..).map(|(&n, _)| n).collect();
    let newest = listing
        .segments
        .range(token..)
        .rev()
        .find(|&(_, &len)| len > 0)
        .map(|(&n, _)| n);
    let mut missing_segments = Vec::new();
    let mut ops = Vec::new();
    let mut records_kept = 0;
    let mut expected = token;
    for &n in &segments {
        missing_segments.extend((expected..n).map(|m| dir.join(segment_name(m))));
        expected = n + 1;
        let path = dir.join(segment_name(n));
        let bytes = fs::read(&path)?;
        let salvaged = salvage_segment(&path, &bytes, Some(n) == newest);
        records_kept += salvaged.records;
        ops.extend(salvaged.ops);
        lost.extend(salvaged.lost);
    }
    let ops_kept = ops.len() as u64;
    let images = replay(collections, ops)?;

    // The fresh snapshot numbers after every existing file, so it is the newest.
    let fresh = listing
        .segments
        .keys()
        .chain(&listing.snapshots)
        .max()
        .map_or(FIRST_SEGMENT, |&n| n + 1);
    let tmp = dir.join(snapshot_tmp_name(fresh));
    if let Err(e) = snapshot::write_file(&tmp, fresh, &images, None) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // Keep the old files first, so that a crash at any point leaves them somewhere.
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let mut moved_to = dir.join(format!("repair-{stamp}"));
    let mut k = 1;
    while moved_to.exists() {
        k += 1;
        moved_to = dir.join(format!("repair-{stamp}-{k}"));
    }
    super::private::create_dir(&moved_to)?;
    let old: Vec<PathBuf> = listing
        .segments
        .keys()
        .map(|&n| dir.join(segment_name(n)))
        .chain(
            listing
                .snapshots
                .iter()
                .map(|&n| dir.join(snapshot_name(n))),
        )
        .collect();
    for path in &old {
        keep_copy(path, &moved_to)?;
    }
    sync_dir(&moved_to)?;
    sync_dir(dir)?;
    let snapshot_path = dir.join(snapshot_name(fresh));
    fs::rename(&tmp, &snapshot_path)?;
    sync_dir(dir)?;
    for path in &old {
        fs::remove_file(path)?;
    }
    sync_dir(dir)?;

    Ok(RepairReport {
        dir: dir.to_path_buf(),
        base_snapshot,
        records_kept,
        ops_kept,
        collections: images.len() as u64,
        documents: images.iter().map(|c| c.docs.len() as u64).sum(),
        lost,
        missing_segments,
        snapshot: snapshot_path,
        moved_to,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Storage;
    use super::*;
    use bson::doc;
    use std::time::Duration;

    const FAST: Duration = Duration::from_millis(10);

    fn put(i: i32) -> JournalOp {
        JournalOp::Put {
            db: "shop".into(),
            coll: "items".into(),
            doc: crate::stored::StoredDoc::from_document(
                &doc! {"_id": i, "name": format!("item {i}")},
            )
            .unwrap(),
        }
    }

    /// A segment of `n` one-put records; returns its bytes and each record's start.
    fn segment(n: i32) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for i in 0..n {
            starts.push(bytes.len());
            let mut payload = Vec::new();
            journal::encode_group(&[put(i)], &mut payload).unwrap();
            journal::write_record(&mut bytes, &payload).unwrap();
        }
        (bytes, starts)
    }

    fn write_segment(dir: &Path, bytes: &[u8]) -> PathBuf {
        let path = dir.join(segment_name(FIRST_SEGMENT));
        fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn a_damaged_length_field_in_the_middle_refuses_to_start_and_truncates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut bytes, starts) = segment(100);
        let at = starts[50];
        bytes[at..at + 4].copy_from_slice(&[0xff; 4]);
        let path = write_segment(dir.path(), &bytes);
        let err = Storage::open(dir.path(), FAST).unwrap_err();
        let msg = err.to_string();
        assert!(recovery_damage_names(&msg, &path, at), "{msg}");
        assert!(msg.contains("49 intact records"), "{msg}");
        assert!(
            msg.contains(&format!("{} bytes", bytes.len() - at)),
            "{msg}"
        );
        assert!(msg.contains("docstore --repair --dbpath"), "{msg}");
        assert_eq!(fs::read(&path).unwrap(), bytes, "nothing may be cut off");
    }

    fn recovery_damage_names(msg: &str, path: &Path, at: usize) -> bool {
        msg.contains(&path.display().to_string()) && msg.contains(&format!("damaged at byte {at}"))
    }

    #[test]
    fn a_damaged_length_field_in_the_last_record_is_not_taken_for_a_torn_tail() {
        let (mut bytes, starts) = segment(3);
        let at = starts[2];
        // Longer than the file: it looks cut short, but the payload says otherwise.
        bytes[at + 1] = 0x70;
        assert!(matches!(
            check_segment(&bytes, true),
            SegmentCheck::Damaged { offset, .. } if offset == at
        ));
    }

    #[test]
    fn a_record_cut_short_at_the_end_of_the_newest_segment_is_a_torn_tail() {
        let (bytes, starts) = segment(3);
        for cut in [starts[2] + 3, starts[2] + 10, bytes.len() - 1] {
            let cut_bytes = &bytes[..cut];
            match check_segment(cut_bytes, true) {
                SegmentCheck::TornTail { ops, offset, .. } => {
                    assert_eq!(ops, vec![put(0), put(1)]);
                    assert_eq!(offset, starts[2]);
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
            // In an older segment the same thing is damage.
            assert!(matches!(
                check_segment(cut_bytes, false),
                SegmentCheck::Damaged { .. }
            ));
        }
    }

    #[test]
    fn a_zeroed_tail_is_damage_not_a_torn_write() {
        let (mut bytes, starts) = segment(3);
        let at = starts[2];
        bytes[at..].fill(0);
        assert!(matches!(
            check_segment(&bytes, true),
            SegmentCheck::Damaged {
                bad: Bad::Implausible { declared: 0 },
                ..
            }
        ));
    }

    #[test]
    fn salvage_resynchronises_after_damage_and_names_what_it_lost() {
        let (mut bytes, starts) = segment(10);
        // Damage the length of record 4 and a byte inside record 7.
        bytes[starts[4]..starts[4] + 4].copy_from_slice(&[0xff; 4]);
        bytes[starts[7] + 30] ^= 0x01;
        let s = salvage_segment(Path::new("j"), &bytes, true);
        let kept: Vec<JournalOp> = [0, 1, 2, 3, 5, 6, 8, 9].iter().map(|&i| put(i)).collect();
        assert_eq!(s.ops, kept);
        assert_eq!(s.records, 8);
        assert_eq!(s.lost.len(), 2);
        let first = &s.lost[0];
        assert_eq!(
            (first.start, first.end, first.records),
            (starts[4] as u64, starts[5] as u64, 1)
        );
        assert!(!first.torn_tail);
        assert_eq!(first.identified.len(), 1);
        assert_eq!(first.identified[0].to_string(), "put shop.items _id 4");
        assert_eq!(
            (s.lost[1].start, s.lost[1].end),
            (starts[7] as u64, starts[8] as u64)
        );
    }

    #[test]
    fn repair_keeps_every_valid_record_writes_a_snapshot_and_moves_the_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let (mut bytes, starts) = segment(20);
        bytes[starts[10] + 2] = 0x7f;
        let path = write_segment(dir.path(), &bytes);
        assert!(Storage::open(dir.path(), FAST).is_err());
        let report = crate::repair::repair(dir.path()).unwrap();
        assert_eq!(report.records_kept, 19);
        assert_eq!(report.documents, 19);
        assert_eq!(report.lost.len(), 1);
        assert!(report.lost_anything());
        let text = report.to_string();
        assert!(text.contains("LOST"), "{text}");
        assert!(text.contains("put shop.items _id 10"), "{text}");
        // The damaged segment is kept, byte for byte, where the report says.
        assert!(!path.exists());
        let kept = report.moved_to.join(segment_name(FIRST_SEGMENT));
        assert_eq!(fs::read(kept).unwrap(), bytes);

        let (s, rec) = Storage::open(dir.path(), FAST).unwrap();
        assert!(rec.ops.is_empty());
        assert_eq!(rec.collections.len(), 1);
        let ids: Vec<i32> = rec.collections[0]
            .docs
            .iter()
            .map(|d| d.to_document().unwrap().get_i32("_id").unwrap())
            .collect();
        assert_eq!(ids.len(), 19);
        assert!(!ids.contains(&10));
        // The repaired store keeps working across restarts.
        s.append(&[put(99)]);
        drop(s);
        let (_s, rec) = Storage::open(dir.path(), FAST).unwrap();
        assert_eq!(rec.ops, vec![put(99)]);
        assert_eq!(rec.collections[0].docs.len(), 19);
    }

    #[test]
    fn repair_refuses_while_the_directory_is_open() {
        let dir = tempfile::tempdir().unwrap();
        let (_s, _) = Storage::open(dir.path(), FAST).unwrap();
        let err = crate::repair::repair(dir.path()).unwrap_err();
        assert!(err.to_string().contains("in use"), "{err}");
    }

    fn image(coll: &str, n: i32) -> CollectionImage {
        CollectionImage {
            db: "shop".into(),
            coll: coll.into(),
            options: doc! {},
            indexes: vec![doc! {"v": 2, "key": {"n": 1}, "name": "n_1"}],
            docs: (0..n)
                .map(|i| crate::stored::StoredDoc::from_document(&doc! {"_id": i, "n": i}).unwrap())
                .collect(),
        }
    }

    /// Start offsets of the records of a framed file.
    fn record_starts(bytes: &[u8]) -> Vec<usize> {
        let mut starts = Vec::new();
        let mut off = 0;
        while let Some((len, _)) = header_at(bytes, off) {
            starts.push(off);
            off += RECORD_HEADER_LEN + len;
        }
        starts
    }

    #[test]
    fn repair_salvages_a_damaged_only_snapshot_without_misfiling_documents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(snapshot_name(5));
        snapshot::write_file(&path, 5, &[image("a", 10), image("b", 10)], None).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        let starts = record_starts(&bytes);
        // Records: file header, "a" header, 10 docs, "b" header, 10 docs, trailer.
        // Damage document 3 of "a" (a checksum) and the header of "b" (its length).
        bytes[starts[5] + 12] ^= 0x01;
        bytes[starts[12]..starts[12] + 4].copy_from_slice(&[0xff; 4]);
        fs::write(&path, &bytes).unwrap();
        fs::write(dir.path().join(segment_name(5)), b"").unwrap();

        let err = Storage::open(dir.path(), FAST).unwrap_err();
        assert!(recovery::damage(&err).is_some(), "{err}");
        let report = crate::repair::repair(dir.path()).unwrap();
        let text = report.to_string();
        assert_eq!(report.documents, 9, "{text}");
        // The documents of "b" cannot be filed under "a": they are reported by _id instead.
        let orphans = report
            .lost
            .iter()
            .find(|r| r.reason.contains("collection header was lost"))
            .expect(&text);
        assert_eq!(orphans.identified.len(), 10, "{text}");
        let (_s, rec) = Storage::open(dir.path(), FAST).unwrap();
        assert_eq!(rec.collections.len(), 1);
        assert_eq!(rec.collections[0].coll, "a");
        assert_eq!(rec.collections[0].indexes.len(), 1);
        assert_eq!(rec.collections[0].docs.len(), 9);
    }

    use super::super::recovery;
}
