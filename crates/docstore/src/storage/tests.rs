//! Tests of the journal and snapshot files through [`Storage`]: ordering, torn and corrupt
//! records, snapshots and compaction, locking, and the flusher.

use super::*;
use bson::doc;
use std::fs::OpenOptions;
use std::path::PathBuf;
use std::time::Instant;

const FAST: Duration = Duration::from_millis(10);

fn put(i: i32) -> JournalOp {
    JournalOp::Put {
        db: "shop".into(),
        coll: "items".into(),
        doc: StoredDoc::from_document(&doc! {"_id": i, "name": format!("item {i}")}).unwrap(),
    }
}

fn segments(dir: &Path) -> Vec<u64> {
    list_dir(dir).unwrap().segments.keys().copied().collect()
}

fn open(dir: &Path) -> (Storage, Recovered) {
    Storage::open(dir, FAST).unwrap()
}

/// Append three groups, flush, close; returns the path of the segment that holds them.
fn write_three_groups(dir: &Path) -> PathBuf {
    let (s, _) = open(dir);
    s.append(&[put(1)]);
    s.append(&[put(2), put(3)]);
    s.append(&[put(4)]);
    s.flush().unwrap();
    let seg = *segments(dir).last().unwrap();
    dir.join(segment_name(seg))
}

#[test]
fn appended_ops_come_back_in_order_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (s, rec) = open(dir.path());
        assert!(rec.ops.is_empty() && rec.collections.is_empty());
        let ops = [
            JournalOp::CreateCollection {
                db: "shop".into(),
                coll: "items".into(),
                options: doc! {},
            },
            put(1),
            JournalOp::Delete {
                db: "shop".into(),
                coll: "items".into(),
                id: Bson::Int32(1),
            },
        ];
        assert_eq!(s.append(&ops[..1]), 1);
        assert_eq!(s.append(&ops[1..]), 2);
        s.flush().unwrap();
    }
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.ops.len(), 3);
    assert!(matches!(rec.ops[0], JournalOp::CreateCollection { .. }));
    assert_eq!(rec.ops[1], put(1));
    assert!(matches!(rec.ops[2], JournalOp::Delete { .. }));
}

#[test]
fn dropping_the_storage_flushes_what_was_appended() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (s, _) = Storage::open(dir.path(), Duration::from_secs(3600)).unwrap();
        s.append(&[put(1)]);
        s.append(&[put(2)]);
    }
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.ops, vec![put(1), put(2)]);
}

#[test]
fn restarting_without_writes_does_not_pile_up_segments() {
    let dir = tempfile::tempdir().unwrap();
    write_three_groups(dir.path());
    for _ in 0..3 {
        drop(open(dir.path()));
    }
    assert_eq!(segments(dir.path()).len(), 2);
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.ops.len(), 4);
}

#[test]
fn a_truncated_last_record_is_dropped_and_earlier_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let seg = write_three_groups(dir.path());
    let len = fs::metadata(&seg).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    {
        let (s, rec) = open(dir.path());
        assert_eq!(rec.ops, vec![put(1), put(2), put(3)]);
        // The torn bytes are cut off, so the file ends at the last good record.
        let last_record = 8 + {
            let mut b = Vec::new();
            journal::encode_group(&[put(4)], &mut b).unwrap();
            b.len() as u64
        };
        assert_eq!(fs::metadata(&seg).unwrap().len(), len - last_record);
        // ... and kept in a quarantine file beside it.
        let offset = len - last_record;
        let aside = seg.with_file_name(recovery::torn_tail_name(FIRST_SEGMENT, offset as usize));
        assert_eq!(fs::metadata(aside).unwrap().len(), last_record - 5);
        s.append(&[put(5)]);
    }
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.ops, vec![put(1), put(2), put(3), put(5)]);
}

#[test]
fn a_record_cut_inside_its_header_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let seg = write_three_groups(dir.path());
    let mut bytes = fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[7, 0, 0]);
    fs::write(&seg, &bytes).unwrap();
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.ops.len(), 4);
    assert_eq!(fs::metadata(&seg).unwrap().len(), bytes.len() as u64 - 3);
}

#[test]
fn a_bad_checksum_in_the_complete_last_record_refuses_to_start() {
    // A whole record that fails its checksum was written in full, so it may have been
    // acknowledged: dropping it would lose a write silently.
    let dir = tempfile::tempdir().unwrap();
    let seg = write_three_groups(dir.path());
    let mut bytes = fs::read(&seg).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0xff;
    fs::write(&seg, &bytes).unwrap();
    let err = Storage::open(dir.path(), FAST).unwrap_err();
    assert!(recovery::damage(&err).is_some(), "{err}");
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    assert_eq!(fs::read(&seg).unwrap(), bytes);
}

#[test]
fn damage_followed_by_more_journal_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let seg = write_three_groups(dir.path());
    {
        let (s, _) = open(dir.path());
        s.append(&[put(9)]);
    }
    let mut bytes = fs::read(&seg).unwrap();
    bytes[12] ^= 0xff;
    fs::write(&seg, &bytes).unwrap();
    let err = Storage::open(dir.path(), FAST).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(err.to_string().contains("damaged at byte 0"), "{err}");
    assert!(err.to_string().contains("--repair"), "{err}");
    // Nothing was truncated: the data is still there for a person to rescue.
    assert_eq!(fs::read(&seg).unwrap(), bytes);
}

#[test]
fn a_snapshot_plus_later_ops_is_recovered_and_old_segments_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let token;
    {
        let (s, _) = open(dir.path());
        s.append(&[put(1)]);
        s.append(&[put(2)]);
        token = s.rotate().unwrap();
        assert_eq!(s.journal_bytes(), 0);
        let image = CollectionImage {
            db: "shop".into(),
            coll: "items".into(),
            options: doc! {},
            indexes: vec![doc! {"v": 2, "key": {"name": 1}, "name": "name_1"}],
            docs: vec![
                StoredDoc::from_document(&doc! {"_id": 1, "name": "item 1"}).unwrap(),
                StoredDoc::from_document(&doc! {"_id": 2, "name": "item 2"}).unwrap(),
            ],
        };
        // Appends may continue while the snapshot is written.
        s.append(&[put(3)]);
        s.write_snapshot(token, &[image]).unwrap();
        s.append(&[put(4)]);
        assert!(segments(dir.path()).iter().all(|&n| n >= token));
    }
    let listing = list_dir(dir.path()).unwrap();
    assert_eq!(listing.snapshots, vec![token]);
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.collections.len(), 1);
    assert_eq!(rec.collections[0].docs.len(), 2);
    assert_eq!(rec.collections[0].indexes.len(), 1);
    assert_eq!(rec.ops, vec![put(3), put(4)]);
}

#[test]
fn a_second_snapshot_deletes_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = open(dir.path());
    let first = s.rotate().unwrap();
    s.write_snapshot(first, &[]).unwrap();
    s.append(&[put(1)]);
    let second = s.rotate().unwrap();
    assert!(second > first);
    s.write_snapshot(second, &[]).unwrap();
    let listing = list_dir(dir.path()).unwrap();
    assert_eq!(listing.snapshots, vec![second]);
    assert_eq!(segments(dir.path()), vec![second]);
}

#[test]
fn a_token_from_the_future_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = open(dir.path());
    let err = s.write_snapshot(1000, &[]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(segments(dir.path()).len(), 1);
}

#[test]
fn a_large_snapshot_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let docs: Vec<StoredDoc> = (0..20_000)
        .map(|i| {
            StoredDoc::from_document(&doc! {
                "_id": i,
                "title": format!("product number {i}"),
                "price": f64::from(i) * 1.25,
                "tags": ["a", "b", {"nested": i}],
            })
            .unwrap()
        })
        .collect();
    {
        let (s, _) = open(dir.path());
        let token = s.rotate().unwrap();
        let images = vec![
            CollectionImage {
                db: "shop".into(),
                coll: "products".into(),
                options: doc! {"validator": {"price": {"$gte": 0}}},
                indexes: vec![],
                docs: docs.clone(),
            },
            CollectionImage {
                db: "shop".into(),
                coll: "empty".into(),
                options: doc! {},
                indexes: vec![],
                docs: vec![],
            },
        ];
        s.write_snapshot(token, &images).unwrap();
    }
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.collections.len(), 2);
    let products = &rec.collections[0];
    assert_eq!(products.coll, "products");
    assert_eq!(products.options, doc! {"validator": {"price": {"$gte": 0}}});
    assert_eq!(products.docs, docs);
    assert!(rec.collections[1].docs.is_empty());
}

#[test]
fn a_stray_tmp_snapshot_is_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    write_three_groups(dir.path());
    let tmp = dir.path().join(snapshot_tmp_name(99));
    fs::write(&tmp, b"half a snapshot").unwrap();
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.ops.len(), 4);
    assert!(rec.collections.is_empty());
    assert!(!tmp.exists());
}

fn snapshot_then_more(dir: &Path) -> u64 {
    let (s, _) = open(dir);
    s.append(&[put(1)]);
    let token = s.rotate().unwrap();
    let image = CollectionImage {
        db: "shop".into(),
        coll: "items".into(),
        options: doc! {},
        indexes: vec![],
        docs: vec![StoredDoc::from_document(&doc! {"_id": 1, "name": "item 1"}).unwrap()],
    };
    s.write_snapshot(token, &[image]).unwrap();
    s.append(&[put(2)]);
    token
}

#[test]
fn a_corrupt_newest_snapshot_falls_back_to_an_older_one_when_its_journal_remains() {
    let dir = tempfile::tempdir().unwrap();
    let token = snapshot_then_more(dir.path());
    let newer = *segments(dir.path()).last().unwrap() + 1;
    fs::write(dir.path().join(snapshot_name(newer)), b"garbage").unwrap();
    {
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.collections.len(), 1);
        assert_eq!(rec.ops, vec![put(2)]);
    }
    // The unusable snapshot is moved aside, and the good one stays.
    let listing = list_dir(dir.path()).unwrap();
    assert_eq!(listing.snapshots, vec![token]);
}

#[test]
fn a_corrupt_snapshot_without_the_journal_to_rebuild_it_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let token = snapshot_then_more(dir.path());
    let path = dir.path().join(snapshot_name(token));
    let mut bytes = fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    fs::write(&path, &bytes).unwrap();
    let err = Storage::open(dir.path(), FAST).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(err.to_string().contains("backup"), "{err}");
    assert!(recovery::damage(&err).is_some(), "{err}");
}

#[test]
fn a_missing_journal_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_three_groups(dir.path());
    {
        let (s, _) = open(dir.path());
        s.append(&[put(5)]);
    }
    fs::remove_file(dir.path().join(segment_name(FIRST_SEGMENT))).unwrap();
    let err = Storage::open(dir.path(), FAST).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn a_second_open_of_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = open(dir.path());
    let err = Storage::open(dir.path(), FAST).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
    drop(s);
    assert!(Storage::open(dir.path(), FAST).is_ok());
}

#[test]
fn journal_bytes_count_appends_and_replayed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let appended;
    {
        let (s, _) = open(dir.path());
        assert_eq!(s.journal_bytes(), 0);
        s.append(&[put(1)]);
        s.append(&[put(2)]);
        appended = s.journal_bytes();
        assert!(appended > 0);
    }
    let (s, _) = open(dir.path());
    assert_eq!(s.journal_bytes(), appended);
    s.rotate().unwrap();
    assert_eq!(s.journal_bytes(), 0);
}

#[test]
fn in_memory_storage_numbers_appends_and_is_always_durable() {
    let s = Storage::in_memory();
    let a = s.append(&[put(1)]);
    let b = s.append(&[put(2)]);
    assert!(b > a);
    assert_eq!(s.journal_bytes(), 0);
    assert_eq!(s.rotate().unwrap(), 0);
    s.write_snapshot(0, &[]).unwrap();
    s.flush().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(s.wait_durable(b)).unwrap();
}

#[tokio::test]
async fn wait_durable_returns_after_a_prompt_group_commit() {
    let dir = tempfile::tempdir().unwrap();
    // A commit interval far longer than the test: only the waiter's nudge can commit.
    let (s, _) = Storage::open(dir.path(), Duration::from_secs(3600)).unwrap();
    let lsn = s.append(&[put(1)]);
    assert!(s.durable_lsn() < lsn);
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), s.wait_durable(lsn))
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(s.durable_lsn() >= lsn);
    let seg = dir
        .path()
        .join(segment_name(*segments(dir.path()).last().unwrap()));
    assert!(fs::metadata(seg).unwrap().len() > 0);
    // Already durable: returns at once.
    s.wait_durable(lsn).await.unwrap();
}

#[test]
fn the_flusher_commits_on_its_own_every_interval() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = open(dir.path());
    let lsn = s.append(&[put(1)]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.durable_lsn() < lsn {
        assert!(Instant::now() < deadline, "group commit never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn concurrent_appenders_keep_their_own_order() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (s, _) = open(dir.path());
        std::thread::scope(|scope| {
            for t in 0..8 {
                let s = &s;
                scope.spawn(move || {
                    for i in 0..200 {
                        s.append(&[put(t * 1000 + i)]);
                    }
                });
            }
        });
    }
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.ops.len(), 1600);
    let mut last = [-1i32; 8];
    for op in &rec.ops {
        let JournalOp::Put { doc, .. } = op else {
            panic!("unexpected op {op:?}");
        };
        let id = doc.to_document().unwrap().get_i32("_id").unwrap();
        let (t, i) = ((id / 1000) as usize, id % 1000);
        assert!(i > last[t], "thread {t} ops out of order");
        last[t] = i;
    }
}

/// The mode bits of `path` (permissions only).
#[cfg(unix)]
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Journals and snapshots hold customers' names, emails and addresses: nobody but the owner may
/// read them, whatever the umask (the test's is usually 022, which would give 0755 and 0644).
#[cfg(unix)]
#[test]
fn the_data_directory_its_journals_and_its_snapshots_are_owner_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    {
        let (s, _) = open(&dir);
        s.append(&[put(1)]);
        let token = s.rotate().unwrap();
        s.append(&[put(2)]);
        let image = CollectionImage {
            db: "shop".into(),
            coll: "items".into(),
            options: doc! {},
            indexes: vec![],
            docs: vec![StoredDoc::from_document(&doc! {"_id": 1}).unwrap()],
        };
        s.write_snapshot(token, &[image]).unwrap();
        s.flush().unwrap();
    }
    let listing = list_dir(&dir).unwrap();
    assert!(!listing.segments.is_empty() && !listing.snapshots.is_empty());
    assert_eq!(mode_of(&dir), 0o700, "the data directory");
    for &n in listing.segments.keys() {
        assert_eq!(mode_of(&dir.join(segment_name(n))), 0o600, "segment {n}");
    }
    for &n in &listing.snapshots {
        assert_eq!(mode_of(&dir.join(snapshot_name(n))), 0o600, "snapshot {n}");
    }
    assert_eq!(mode_of(&dir.join(LOCK_FILE)), 0o600, "the LOCK file");
}

/// A directory left readable by an older version (0755, files 0644) is made owner-only when it
/// is opened, and its data is still all there.
#[cfg(unix)]
#[test]
fn a_world_readable_data_directory_is_made_owner_only_when_opened() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let segment = write_three_groups(&dir);
    let set = |path: &Path, mode: u32| {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    };
    set(&dir, 0o755);
    set(&segment, 0o644);
    set(&dir.join(LOCK_FILE), 0o644);
    fs::create_dir(dir.join("repair-old")).unwrap();
    set(&dir.join("repair-old"), 0o755);
    fs::write(dir.join("repair-old/journal-1.log"), b"old").unwrap();
    set(&dir.join("repair-old/journal-1.log"), 0o644);

    let (_s, recovered) = open(&dir);
    assert_eq!(recovered.ops, vec![put(1), put(2), put(3), put(4)]);
    assert_eq!(mode_of(&dir), 0o700);
    assert_eq!(mode_of(&segment), 0o600);
    assert_eq!(mode_of(&dir.join(LOCK_FILE)), 0o600);
    assert_eq!(mode_of(&dir.join("repair-old")), 0o700);
    assert_eq!(mode_of(&dir.join("repair-old/journal-1.log")), 0o600);
}

/// One collection to keep: `shop.items` of `docs` documents with one index `name_1` whose
/// entries name records 1 to `docs`.
fn items_to_keep(docs: u64) -> Vec<kept::CollectionIndexes<'static>> {
    let mut index = Some(kept::KeptIndex::new(
        doc! {"v": 2, "key": {"name": 1}, "name": "name_1"},
        false,
        0,
        docs,
        (1..=docs).map(|rid| (&b"same key"[..], rid)),
    ));
    vec![kept::CollectionIndexes {
        db: "shop",
        coll: "items",
        docs,
        next_index: Box::new(move || index.take()),
    }]
}

fn items_image(n: i32) -> CollectionImage {
    CollectionImage {
        db: "shop".into(),
        coll: "items".into(),
        options: doc! {},
        indexes: vec![doc! {"v": 2, "key": {"name": 1}, "name": "name_1"}],
        docs: (1..=n)
            .map(|i| StoredDoc::from_document(&doc! {"_id": i, "name": "same key"}).unwrap())
            .collect(),
    }
}

#[test]
fn kept_indexes_come_back_with_their_snapshot_and_a_damaged_or_missing_file_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let token;
    {
        let (s, rec) = open(dir.path());
        assert_eq!(rec.keep_for, None, "no snapshot, nothing to keep");
        token = s.rotate().unwrap();
        s.write_snapshot(token, &[items_image(3)]).unwrap();
        s.write_kept_indexes(token, items_to_keep(3), &|| false)
            .unwrap();
    }
    let kept_path = dir.path().join(kept_name(token));
    let (s, mut rec) = open(dir.path());
    assert_eq!(rec.keep_for, None);
    assert_eq!(rec.kept.len(), 1);
    assert_eq!(rec.kept.take("shop", "items", 3).len(), 1);
    drop(s);

    let bytes = fs::read(&kept_path).unwrap();
    let mut damaged = bytes.clone();
    let last = damaged.len() - 3;
    damaged[last] ^= 0x01;
    fs::write(&kept_path, &damaged).unwrap();
    let (s, rec) = open(dir.path());
    assert_eq!(
        rec.keep_for,
        Some(token),
        "damaged: kept again after start-up"
    );
    assert_eq!(rec.kept.len(), 0);
    assert_eq!(
        rec.collections[0].docs.len(),
        3,
        "the snapshot itself is used"
    );
    drop(s);

    fs::remove_file(&kept_path).unwrap();
    let (s, rec) = open(dir.path());
    assert_eq!(rec.keep_for, Some(token), "missing: kept after start-up");
    assert_eq!(rec.kept.len(), 0);
    // Kept again, then made obsolete by the next snapshot with its journal.
    s.write_kept_indexes(token, items_to_keep(3), &|| false)
        .unwrap();
    assert!(kept_path.exists());
    let next = s.rotate().unwrap();
    s.write_snapshot(next, &[items_image(4)]).unwrap();
    assert!(
        !kept_path.exists(),
        "an obsolete snapshot's kept indexes are deleted"
    );
    // Keeping the indexes of a snapshot that is no longer the newest writes nothing.
    s.write_kept_indexes(token, items_to_keep(3), &|| false)
        .unwrap();
    assert!(!kept_path.exists());
    assert_eq!(list_dir(dir.path()).unwrap().kept, Vec::<u64>::new());
}

#[test]
fn kept_indexes_given_up_leave_no_file_and_the_snapshot_loads_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let token;
    {
        let (s, _) = open(dir.path());
        token = s.rotate().unwrap();
        s.write_snapshot(token, &[items_image(3)]).unwrap();
        let asked = std::cell::Cell::new(0);
        let e = s
            .write_kept_indexes(token, items_to_keep(3), &|| {
                asked.set(asked.get() + 1);
                asked.get() > 1
            })
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert_eq!(
            asked.get(),
            2,
            "asked before each index, given up at the second"
        );
    }
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with("indexes-")),
        "no kept file, no temporary one: {names:?}"
    );
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.keep_for, Some(token), "kept after the next start-up");
    assert_eq!(rec.collections[0].docs.len(), 3);
}

#[test]
fn kept_indexes_of_another_snapshot_with_the_same_token_are_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = open(dir.path());
    let token = s.rotate().unwrap();
    s.write_snapshot(token, &[items_image(3)]).unwrap();
    s.write_kept_indexes(token, items_to_keep(3), &|| false)
        .unwrap();
    let kept_path = dir.path().join(kept_name(token));
    let kept_bytes = fs::read(&kept_path).unwrap();
    // A snapshot written again under this token (as after a failed attempt) drops the file.
    s.write_snapshot(token, &[items_image(5)]).unwrap();
    assert!(!kept_path.exists());
    drop(s);
    // Put back by hand, it belongs to a snapshot of another size: refused.
    fs::write(&kept_path, &kept_bytes).unwrap();
    let (_s, rec) = open(dir.path());
    assert_eq!(rec.kept.len(), 0);
    assert_eq!(rec.keep_for, Some(token));
}
