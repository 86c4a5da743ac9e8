//! Where scheduled backups live inside `backup.dir` and which of them rotation may delete.
//!
//! Several instances (and several runs of one) share `backup.dir`, and wall clocks can step back,
//! so nothing here trusts a time: a scheduled backup is named
//! `backup-<sequence>-<UTC time>-<instance>` with a sequence number the database hands out (see
//! `record`), is written under `.partial-<name>` and renamed to its name only after it was read
//! back and its completion marker ([`MARKER_FILE`]) written. Rotation considers only completed
//! backups in this naming scheme (and the older `backup-<UTC time>` ones), orders them by
//! sequence, and never deletes the backup just written.

use std::cmp::Ordering;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::private;

/// Name prefix of scheduled backup directories.
pub(crate) const PREFIX: &str = "backup-";
/// Prefix of a scheduled backup still being written or checked: never a backup yet.
pub const PARTIAL_PREFIX: &str = ".partial-";
/// Prefix a backup is renamed to before it is deleted, so that exactly one rotation (of however
/// many instances run one) deletes it, and a half-deleted backup is never taken for one.
const DELETING_PREFIX: &str = ".deleting-";
/// Bazaar's completion marker in a scheduled backup, written after the read-back check passed.
pub(crate) const MARKER_FILE: &str = "bazaar-backup.json";
const MARKER_FORMAT: &str = "bazaar-scheduled-backup";

/// The completion marker: what orders backups (the sequence) and who wrote one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    pub(crate) format: String,
    pub sequence: i64,
    /// The instance that wrote it (`db::lease::this_instance`).
    pub(crate) instance: String,
    /// The point in time the backup shows, by the writer's clock (for people, not for ordering).
    pub(crate) taken_at_millis: i64,
    pub(crate) bytes: u64,
    pub(crate) documents: u64,
}

impl Marker {
    pub fn new(
        sequence: i64,
        instance: &str,
        taken_at_millis: i64,
        bytes: u64,
        documents: u64,
    ) -> Self {
        Marker {
            format: MARKER_FORMAT.to_string(),
            sequence,
            instance: instance.to_string(),
            taken_at_millis,
            bytes,
            documents,
        }
    }

    /// Write the marker into `dir` (owner-only, synced): the last file of a backup.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        private::write_file(&dir.join(MARKER_FILE), &text)
    }

    /// The marker in `dir`, when there is a well-formed one.
    pub(crate) fn read(dir: &Path) -> Option<Marker> {
        let bytes = std::fs::read(dir.join(MARKER_FILE)).ok()?;
        let marker: Marker = serde_json::from_slice(&bytes).ok()?;
        (marker.format == MARKER_FORMAT).then_some(marker)
    }
}

/// `backup-000000000042-20261122T230501Z-shop1-4711-a1b2c3`: sequence first, zero-padded, so a
/// listing sorts like rotation does; the time and instance are for people reading the listing
/// and make two writers' names differ even if they got the same sequence.
pub fn backup_name(sequence: i64, taken_at_millis: i64, instance: &str) -> String {
    let stamp = bson::DateTime::from_millis(taken_at_millis)
        .to_chrono()
        .format("%Y%m%dT%H%M%SZ");
    format!("{PREFIX}{sequence:012}-{stamp}-{}", instance_tag(instance))
}

/// `.partial-<name>`: where the backup `name` is written.
pub fn partial_name(name: &str) -> String {
    format!("{PARTIAL_PREFIX}{name}")
}

/// The instance name made safe for a file name: `host/pid/objectid` → `host-pid-<last 6 hex>`.
fn instance_tag(instance: &str) -> String {
    let mut parts: Vec<&str> = instance.split('/').collect();
    if let Some(last) = parts.last_mut() {
        let start = last.len().saturating_sub(6);
        *last = last.get(start..).unwrap_or(last);
    }
    let tag: String = parts
        .join("-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if tag.is_empty() {
        "bazaar".to_string()
    } else {
        tag
    }
}

/// The sequence in a scheduled backup's name (also of its `.partial-` form).
pub fn sequence_in_name(name: &str) -> Option<i64> {
    let rest = name
        .strip_prefix(PARTIAL_PREFIX)
        .unwrap_or(name)
        .strip_prefix(PREFIX)?;
    let (digits, _) = rest.split_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `backup-20261122T230501.123Z`: how scheduled backups were named before sequence numbers.
fn is_old_style_name(name: &str) -> bool {
    let Some(stamp) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let b = stamp.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    let fraction = match b.len() {
        16 => true,
        20 => b[15] == b'.' && digits(16..19),
        _ => false,
    };
    fraction && digits(0..8) && b[8] == b'T' && digits(9..15) && b[b.len() - 1] == b'Z'
}

/// A completed scheduled backup found in `backup.dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    pub dir: PathBuf,
    pub(crate) name: String,
    /// `None` for an old-style backup (named by time only), which counts as older than any
    /// backup with a sequence number.
    pub sequence: Option<i64>,
}

impl Completed {
    fn order(&self, other: &Completed) -> Ordering {
        self.sequence
            .cmp(&other.sequence)
            .then_with(|| self.name.cmp(&other.name))
    }
}

/// The completed scheduled backups in `root`, oldest first: new-style ones only with a manifest
/// and a marker whose sequence is the name's; old-style ones with a manifest. Anything else (a
/// `.partial-` or `.deleting-` directory, a manual backup, a file) is not one.
pub fn completed_backups(root: &Path) -> Vec<Completed> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found: Vec<Completed> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_string();
            let dir = entry.path();
            // Not followed: a symlink in backup.dir is somebody else's.
            if !entry.file_type().ok()?.is_dir() || !name.starts_with(PREFIX) {
                return None;
            }
            if !dir.join(docstore::dump::MANIFEST_FILE).is_file() {
                return None;
            }
            if let Some(sequence) = sequence_in_name(&name) {
                let marker = Marker::read(&dir)?;
                (marker.sequence == sequence).then_some(Completed {
                    dir,
                    name,
                    sequence: Some(sequence),
                })
            } else if is_old_style_name(&name) {
                Some(Completed {
                    dir,
                    name,
                    sequence: None,
                })
            } else {
                None
            }
        })
        .collect();
    found.sort_by(Completed::order);
    found
}

/// The highest sequence any scheduled backup in `root` carries, finished or not: new sequences
/// must be above it even if the database's counter went back (a database restored from an
/// older backup).
pub(crate) fn highest_sequence(root: &Path) -> i64 {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| sequence_in_name(e.file_name().to_str()?))
        .max()
        .unwrap_or(0)
}

/// The newest completed scheduled backup in `root`.
pub(crate) fn newest(root: &Path) -> Option<Completed> {
    completed_backups(root).pop()
}

/// Delete the oldest completed backups beyond `keep`, never `just_written`; returns the names
/// deleted. Each is first renamed to `.deleting-<name>`, which only one rotation can do, then
/// removed; leftovers of an interrupted deletion are removed too.
pub(crate) fn rotate(root: &Path, keep: usize, just_written: &Path) -> Vec<String> {
    let backups = completed_backups(root);
    let excess = backups.len().saturating_sub(keep.max(1));
    let mut deleted = Vec::new();
    for old in &backups[..excess] {
        if old.dir == just_written {
            continue;
        }
        let doomed = root.join(format!("{DELETING_PREFIX}{}", old.name));
        if let Err(e) = std::fs::rename(&old.dir, &doomed) {
            // Most likely another instance's rotation claimed it first.
            tracing::debug!("not deleting {}: {e}", old.dir.display());
            continue;
        }
        match std::fs::remove_dir_all(&doomed) {
            Ok(()) => {
                tracing::info!("deleted old backup {}", old.dir.display());
                deleted.push(old.name.clone());
            }
            Err(e) => tracing::warn!("cannot delete old backup {}: {e}", doomed.display()),
        }
    }
    remove_deletion_leftovers(root);
    deleted
}

/// `.deleting-*` directories were claimed for deletion and are never backups again.
fn remove_deletion_leftovers(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let is_leftover = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(DELETING_PREFIX))
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if is_leftover {
            if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                tracing::debug!("cannot remove {}: {e}", entry.path().display());
            }
        }
    }
}

/// `.partial-` directories in `root` not written by this process: left by a writer that crashed
/// (or still being written by another instance, which is why they are only reported).
pub(crate) fn foreign_partials(root: &Path, own: &[PathBuf]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(PARTIAL_PREFIX))
        })
        .map(|e| e.path())
        .filter(|p| !own.contains(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A completed new-style backup in `root`.
    fn completed(root: &Path, sequence: i64, taken_at_millis: i64) -> PathBuf {
        let dir = root.join(backup_name(sequence, taken_at_millis, "host/1/abcdef0123"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(docstore::dump::MANIFEST_FILE), "{}").unwrap();
        Marker::new(sequence, "host/1/abcdef0123", taken_at_millis, 0, 0)
            .write(&dir)
            .unwrap();
        dir
    }

    fn old_style(root: &Path, stamp: &str) -> PathBuf {
        let dir = root.join(format!("{PREFIX}{stamp}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(docstore::dump::MANIFEST_FILE), "{}").unwrap();
        dir
    }

    fn names_in(root: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    const DAY: i64 = 86_400_000;
    const JAN_2026: i64 = 1_767_225_600_000;

    #[test]
    fn a_name_carries_its_sequence_and_sorts_by_it() {
        let name = backup_name(42, JAN_2026, "shop.example/4711/65f0c0ffee0123456789abcd");
        assert_eq!(
            name,
            "backup-000000000042-20260101T000000Z-shop.example-4711-89abcd"
        );
        assert_eq!(sequence_in_name(&name), Some(42));
        assert_eq!(sequence_in_name(&partial_name(&name)), Some(42));
        assert!(backup_name(9, JAN_2026 + DAY, "a/1/b") < backup_name(10, JAN_2026, "a/1/b"));
        assert_eq!(sequence_in_name("backup-20260101T000000.000Z"), None);
        assert_eq!(sequence_in_name("backup--x"), None);
        assert_eq!(sequence_in_name("backup-12x-x"), None);
    }

    #[test]
    fn an_instance_name_with_slashes_and_odd_characters_makes_a_safe_file_name() {
        let name = backup_name(1, JAN_2026, "../etc/pass wd/ff00");
        assert!(!name.contains('/') && !name.contains(' '), "{name}");
        assert_eq!(sequence_in_name(&name), Some(1));
    }

    #[test]
    fn the_newest_backup_survives_rotation_even_when_its_time_sorts_lowest() {
        let root = tempfile::tempdir().unwrap();
        // Written before the clock stepped back a year: later times, lower sequences.
        for sequence in 1..=3 {
            completed(root.path(), sequence, JAN_2026 + 365 * DAY + sequence * DAY);
        }
        // Written after the step: the earliest time of all, the highest sequence.
        let newest = completed(root.path(), 4, JAN_2026);
        let deleted = rotate(root.path(), 2, &newest);
        assert_eq!(deleted.len(), 2, "{deleted:?}");
        let left: Vec<Option<i64>> = completed_backups(root.path())
            .iter()
            .map(|c| c.sequence)
            .collect();
        assert_eq!(left, vec![Some(3), Some(4)]);
        assert!(newest.is_dir());
    }

    #[test]
    fn the_backup_just_written_is_kept_even_if_it_sorts_among_the_oldest() {
        // A foreign directory with a higher sequence (another database's counter, say) must
        // not push out the backup this run wrote.
        let root = tempfile::tempdir().unwrap();
        let ours = completed(root.path(), 5, JAN_2026);
        completed(root.path(), 900, JAN_2026);
        completed(root.path(), 901, JAN_2026);
        rotate(root.path(), 1, &ours);
        assert!(ours.is_dir());
        assert_eq!(completed_backups(root.path()).len(), 2);
    }

    #[test]
    fn old_style_backups_count_as_older_than_any_with_a_sequence() {
        let root = tempfile::tempdir().unwrap();
        old_style(root.path(), "20991231T235959.999Z");
        old_style(root.path(), "20990101T000000Z");
        let first = completed(root.path(), 1, JAN_2026);
        let order: Vec<String> = completed_backups(root.path())
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(
            order[..2],
            ["backup-20990101T000000Z", "backup-20991231T235959.999Z"]
        );
        rotate(root.path(), 2, &first);
        assert_eq!(
            names_in(root.path()),
            vec![
                first.file_name().unwrap().to_string_lossy().into_owned(),
                "backup-20991231T235959.999Z".to_string()
            ]
        );
    }

    #[test]
    fn rotation_leaves_partial_unmarked_and_unrelated_directories_alone() {
        let root = tempfile::tempdir().unwrap();
        let name = backup_name(1, JAN_2026, "other/2/abc");
        // Another instance's backup, manifest written, read-back still running.
        let partial = root.path().join(partial_name(&name));
        std::fs::create_dir(&partial).unwrap();
        std::fs::write(partial.join(docstore::dump::MANIFEST_FILE), "{}").unwrap();
        // Our naming, a manifest, but no completion marker: not known to be complete.
        let unmarked = root.path().join(backup_name(2, JAN_2026, "other/2/abc"));
        std::fs::create_dir(&unmarked).unwrap();
        std::fs::write(unmarked.join(docstore::dump::MANIFEST_FILE), "{}").unwrap();
        // A marker that disagrees with the name.
        let mismatched = root.path().join(backup_name(3, JAN_2026, "other/2/abc"));
        std::fs::create_dir(&mismatched).unwrap();
        std::fs::write(mismatched.join(docstore::dump::MANIFEST_FILE), "{}").unwrap();
        Marker::new(77, "x", 0, 0, 0).write(&mismatched).unwrap();
        // A manual backup and a file the shop owner keeps there.
        let manual = root.path().join("before-the-sale");
        std::fs::create_dir(&manual).unwrap();
        std::fs::write(manual.join(docstore::dump::MANIFEST_FILE), "{}").unwrap();
        std::fs::write(root.path().join("notes.txt"), "keep").unwrap();
        let before = names_in(root.path());

        let newest = completed(root.path(), 10, JAN_2026);
        let older = completed(root.path(), 9, JAN_2026);
        let deleted = rotate(root.path(), 1, &newest);
        assert_eq!(
            deleted,
            vec![older.file_name().unwrap().to_string_lossy().into_owned()]
        );
        let mut expected = before;
        expected.push(newest.file_name().unwrap().to_string_lossy().into_owned());
        expected.sort();
        assert_eq!(names_in(root.path()), expected);
    }

    #[test]
    fn the_highest_sequence_counts_partial_backups_too() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(highest_sequence(root.path()), 0);
        completed(root.path(), 7, JAN_2026);
        std::fs::create_dir(
            root.path()
                .join(partial_name(&backup_name(12, JAN_2026, "a/1/b"))),
        )
        .unwrap();
        assert_eq!(highest_sequence(root.path()), 12);
    }

    #[test]
    fn a_half_deleted_backup_is_not_a_backup_and_is_cleared_away() {
        let root = tempfile::tempdir().unwrap();
        let newest = completed(root.path(), 2, JAN_2026);
        let leftover = root.path().join(format!(
            "{DELETING_PREFIX}{}",
            backup_name(1, JAN_2026, "a/1/b")
        ));
        std::fs::create_dir(&leftover).unwrap();
        assert_eq!(completed_backups(root.path()).len(), 1);
        rotate(root.path(), 3, &newest);
        assert!(!leftover.exists());
        assert!(newest.is_dir());
    }
}
