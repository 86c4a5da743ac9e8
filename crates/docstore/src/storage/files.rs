//! The files of a data directory: segment and snapshot names, listing what is there, creating
//! segments durably, the `LOCK` file that keeps a second server out, and deleting what a
//! snapshot made obsolete.

use super::private;
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use tracing::warn;

/// The first journal segment of a new data directory.
pub(super) const FIRST_SEGMENT: u64 = 1;
/// A buffer that grew larger than this (a burst, or a stalled disk) is not kept for reuse.
pub(super) const MAX_SPARE_CAPACITY: usize = 16 << 20;
pub(super) const LOCK_FILE: &str = "LOCK";

pub(super) fn segment_name(n: u64) -> String {
    format!("journal-{n:016}.log")
}

pub(super) fn snapshot_name(n: u64) -> String {
    format!("snapshot-{n:016}.db")
}

pub(super) fn snapshot_tmp_name(n: u64) -> String {
    format!("snapshot-{n:016}.tmp")
}

/// The kept indexes of snapshot `n` (see `storage::kept`).
pub(super) fn kept_name(n: u64) -> String {
    format!("indexes-{n:016}.db")
}

pub(super) fn kept_tmp_name(n: u64) -> String {
    format!("indexes-{n:016}.tmp")
}

pub(super) fn parse_number(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The storage files found in a data directory.
#[derive(Debug, Default)]
pub(super) struct Listing {
    /// Segment number -> file size.
    pub(super) segments: BTreeMap<u64, u64>,
    /// Snapshot tokens, ascending.
    pub(super) snapshots: Vec<u64>,
    /// Tokens of the snapshots whose indexes are kept beside them, ascending.
    pub(super) kept: Vec<u64>,
    /// Snapshots and kept indexes whose writing never finished.
    pub(super) tmp: Vec<PathBuf>,
}

pub(super) fn list_dir(dir: &Path) -> io::Result<Listing> {
    let mut listing = Listing::default();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !entry.file_type()?.is_file() {
            continue;
        }
        if let Some(n) = parse_number(&name, "journal-", ".log") {
            listing.segments.insert(n, entry.metadata()?.len());
        } else if let Some(n) = parse_number(&name, "snapshot-", ".db") {
            listing.snapshots.push(n);
        } else if let Some(n) = parse_number(&name, "indexes-", ".db") {
            listing.kept.push(n);
        } else if parse_number(&name, "snapshot-", ".tmp").is_some()
            || parse_number(&name, "indexes-", ".tmp").is_some()
        {
            listing.tmp.push(entry.path());
        }
    }
    listing.snapshots.sort_unstable();
    listing.kept.sort_unstable();
    Ok(listing)
}

/// Make created, renamed and deleted directory entries durable.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

pub(super) fn create_segment(dir: &Path, n: u64) -> io::Result<File> {
    let file = private::file_options()
        .write(true)
        .create_new(true)
        .open(dir.join(segment_name(n)))?;
    // The new name must survive a crash, or acknowledged `j: true` writes in it would vanish.
    sync_dir(dir)?;
    Ok(file)
}

/// Create `dir` if needed (owner-only) and make what is already in it owner-only, warning
/// about each change: journals and snapshots hold customers' personal data, and a directory
/// created by an older version (or copied with a permissive umask) was readable by every local
/// user. A mode that cannot be changed (a file system without Unix permissions, a file owned by
/// someone else) is warned about and does not stop the store.
pub(super) fn prepare_private_dir(dir: &Path) -> io::Result<()> {
    private::create_dir_all(dir)?;
    match private::tighten_tree(dir) {
        Ok(changed) if changed.is_empty() => {}
        Ok(changed) => {
            let list: Vec<String> = changed.iter().map(ToString::to_string).collect();
            warn!(
                dir = %dir.display(),
                changed = %list.join(", "),
                "the data directory was readable by other users; made it owner-only"
            );
        }
        Err(e) => warn!(
            dir = %dir.display(),
            "cannot make the data directory owner-only ({e}); other local users may be able to \
             read it"
        ),
    }
    Ok(())
}

/// The lock on `file`, waiting up to a second while the recorded holder is this very process.
///
/// A lock this process released can still be held for a moment by a child it is starting: a
/// child shares the parent's open files between `fork` and `exec` (close-on-exec closes them
/// only at `exec`), so a thread spawning a process while another releases the directory keeps
/// the lock alive that long. Another process's lock is reported at once.
fn try_lock_own(file: &File) -> Result<(), fs::TryLockError> {
    let own = std::process::id().to_string();
    let mut waited = std::time::Duration::ZERO;
    loop {
        match file.try_lock() {
            Err(fs::TryLockError::WouldBlock) if waited < std::time::Duration::from_secs(1) => {
                let mut holder = String::new();
                let mut reader = file;
                let _ = std::io::Seek::rewind(&mut reader);
                let _ = reader.read_to_string(&mut holder);
                let _ = std::io::Seek::rewind(&mut reader);
                if holder.trim() != own {
                    return Err(fs::TryLockError::WouldBlock);
                }
                let pause = std::time::Duration::from_millis(20);
                std::thread::sleep(pause);
                waited += pause;
            }
            other => return other,
        }
    }
}

/// Hold an exclusive lock on `LOCK` so that a second server cannot share the directory.
pub(super) fn lock_dir(dir: &Path) -> io::Result<File> {
    let path = dir.join(LOCK_FILE);
    let mut file = private::file_options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match try_lock_own(&file) {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let by = if holder.is_empty() {
                String::from("another process")
            } else {
                format!("another process (pid {holder})")
            };
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "data directory {} is in use by {by}: its {LOCK_FILE} file is locked",
                    dir.display()
                ),
            ));
        }
        Err(fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {
            warn!(
                "cannot lock {} on this file system ({e}); make sure no other docstore uses {}",
                path.display(),
                dir.display()
            );
        }
        Err(fs::TryLockError::Error(e)) => return Err(e),
    }
    // The pid is only a hint for the message above; the lock itself is what excludes.
    file.set_len(0)?;
    file.write_all(std::process::id().to_string().as_bytes())?;
    Ok(file)
}

/// The segment new appends go to: the last one if recovery left it empty (so that restarts do
/// not pile up empty files), else a new one after it.
pub(super) fn new_segment_after_recovery(
    dir: &Path,
    listing: &Listing,
    token: u64,
) -> io::Result<(u64, File)> {
    if let Some(&last) = listing.segments.keys().next_back() {
        let path = dir.join(segment_name(last));
        if last >= token && fs::metadata(&path)?.len() == 0 {
            return Ok((last, private::open_existing(&path)?));
        }
        let next = (last + 1).max(token);
        return Ok((next, create_segment(dir, next)?));
    }
    let segment = token.max(FIRST_SEGMENT);
    Ok((segment, create_segment(dir, segment)?))
}

/// Delete snapshots (with their kept indexes) and segments that the snapshot `token` makes
/// obsolete.
pub(super) fn delete_obsolete(dir: &Path, token: u64) -> io::Result<()> {
    let listing = list_dir(dir)?;
    let mut deleted = false;
    let obsolete_segments = listing
        .segments
        .range(..token)
        .map(|(&n, _)| segment_name(n));
    let obsolete_snapshots = listing
        .snapshots
        .iter()
        .filter(|&&n| n < token)
        .map(|&n| snapshot_name(n));
    let obsolete_kept = listing
        .kept
        .iter()
        .filter(|&&n| n < token)
        .map(|&n| kept_name(n));
    for name in obsolete_segments
        .chain(obsolete_snapshots)
        .chain(obsolete_kept)
    {
        match fs::remove_file(dir.join(&name)) {
            Ok(()) => deleted = true,
            Err(e) => warn!("cannot delete obsolete {name}: {e}"),
        }
    }
    if deleted {
        sync_dir(dir)?;
    }
    Ok(())
}
