//! Journal damage, property-tested: random journals (inserts, updates, deletes, index builds),
//! an optional write that was in flight when the machine stopped, and random damage (a flipped
//! bit, overwritten bytes anywhere including length fields and record boundaries, a zeroed block,
//! a truncation). After a restart the store either refuses to start or holds exactly the
//! acknowledged writes, dropping only a torn tail of unacknowledged bytes; repair then loses only
//! the records the damage touched, and reports them. The damaged journals in `journal_corpus/`
//! are replayed as regression cases.

use bson::{doc, Bson};
use docstore::internals::storage::journal;
use docstore::internals::storage::recovery::{self, salvage_segment, SegmentCheck};
use docstore::internals::storage::{JournalOp, Recovered, Storage};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

const SEGMENT: &str = "journal-0000000000000001.log";

#[derive(Debug, Clone)]
enum Action {
    Insert { coll: u8, id: i32, pad: usize },
    Update { coll: u8, id: i32, value: i32 },
    Delete { coll: u8, id: i32 },
    Index { coll: u8, field: &'static str },
}

fn coll_name(c: u8) -> String {
    format!("c{c}")
}

fn to_op(action: &Action) -> JournalOp {
    match action {
        Action::Insert { coll, id, pad } => JournalOp::Put {
            db: "shop".into(),
            coll: coll_name(*coll),
            doc: stored(doc! {"_id": id, "a": id * 3, "pad": "p".repeat(*pad)}),
        },
        Action::Update { coll, id, value } => JournalOp::Put {
            db: "shop".into(),
            coll: coll_name(*coll),
            doc: stored(doc! {"_id": id, "a": value, "b": "updated"}),
        },
        Action::Delete { coll, id } => JournalOp::Delete {
            db: "shop".into(),
            coll: coll_name(*coll),
            id: Bson::Int32(*id),
        },
        Action::Index { coll, field } => JournalOp::CreateIndex {
            db: "shop".into(),
            coll: coll_name(*coll),
            spec: doc! {"v": 2, "key": {*field: 1}, "name": format!("{field}_1")},
        },
    }
}

fn action() -> impl Strategy<Value = Action> {
    let coll = 0u8..2;
    let id = 0i32..12;
    prop_oneof![
        4 => (coll.clone(), id.clone(), 0usize..40).prop_map(|(coll, id, pad)| Action::Insert { coll, id, pad }),
        2 => (coll.clone(), id.clone(), any::<i32>()).prop_map(|(coll, id, value)| Action::Update { coll, id, value }),
        2 => (coll.clone(), id).prop_map(|(coll, id)| Action::Delete { coll, id }),
        1 => (coll, prop::sample::select(vec!["a", "b"])).prop_map(|(coll, field)| Action::Index { coll, field }),
    ]
}

/// Append groups of 1-3 operations, each one journal record.
fn groups() -> impl Strategy<Value = Vec<Vec<JournalOp>>> {
    prop::collection::vec(prop::collection::vec(action(), 1..4), 1..14)
        .prop_map(|gs| gs.iter().map(|g| g.iter().map(to_op).collect()).collect())
}

#[derive(Debug, Clone)]
enum Damage {
    /// Flip one bit at a position.
    Flip { at: Pos, bit: u8 },
    /// Overwrite bytes at a position.
    Overwrite { at: Pos, bytes: Vec<u8> },
    /// Zero a block.
    Zero { at: Pos, len: usize },
    /// Cut the file.
    Truncate { at: Pos },
}

/// A position: anywhere, or near a record boundary (its length field, its checksum, the end of
/// the record before).
#[derive(Debug, Clone, Copy)]
enum Pos {
    Anywhere(u32),
    NearRecord { record: u32, delta: i8 },
}

fn pos() -> impl Strategy<Value = Pos> {
    prop_oneof![
        any::<u32>().prop_map(Pos::Anywhere),
        (any::<u32>(), -4i8..14).prop_map(|(record, delta)| Pos::NearRecord { record, delta }),
    ]
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => (pos(), 0u8..8).prop_map(|(at, bit)| Damage::Flip { at, bit }),
        3 => (pos(), prop::collection::vec(any::<u8>(), 1..12)).prop_map(|(at, bytes)| Damage::Overwrite { at, bytes }),
        2 => (pos(), 1usize..80).prop_map(|(at, len)| Damage::Zero { at, len }),
        1 => pos().prop_map(|at| Damage::Truncate { at }),
    ]
}

/// A journal as written: acknowledged records, then maybe part of one that was in flight.
struct Journal {
    bytes: Vec<u8>,
    /// `(start, end, ops)` of each acknowledged record.
    records: Vec<(usize, usize, Vec<JournalOp>)>,
    /// Where the acknowledged records end (the in-flight part, if any, follows).
    acked_end: usize,
}

fn build(groups: &[Vec<JournalOp>], in_flight: Option<(Vec<JournalOp>, u16)>) -> Journal {
    let mut bytes = Vec::new();
    let mut records = Vec::new();
    for g in groups {
        let start = bytes.len();
        let mut payload = Vec::new();
        journal::encode_group(g, &mut payload).unwrap();
        journal::write_record(&mut bytes, &payload).unwrap();
        records.push((start, bytes.len(), g.clone()));
    }
    let acked_end = bytes.len();
    if let Some((g, keep)) = in_flight {
        let mut payload = Vec::new();
        journal::encode_group(&g, &mut payload).unwrap();
        let mut record = Vec::new();
        journal::write_record(&mut record, &payload).unwrap();
        // Some but not all of its bytes reached the disk.
        let keep = 1 + usize::from(keep) % (record.len() - 1);
        bytes.extend_from_slice(&record[..keep]);
    }
    Journal {
        bytes,
        records,
        acked_end,
    }
}

/// What damaging a journal did.
struct Damaged {
    bytes: Vec<u8>,
    truncated: bool,
    /// The bytes changed (empty for a truncation).
    span: std::ops::Range<u64>,
}

/// Apply `damage`.
fn apply(j: &Journal, damage: &Damage) -> Damaged {
    let len = j.bytes.len();
    let resolve = |at: Pos| -> usize {
        match at {
            Pos::Anywhere(x) => x as usize % len,
            Pos::NearRecord { record, delta } => {
                let starts: Vec<usize> =
                    j.records.iter().map(|r| r.0).chain([j.acked_end]).collect();
                let base = starts[record as usize % starts.len()] as i64;
                (base + i64::from(delta)).clamp(0, len as i64 - 1) as usize
            }
        }
    };
    let mut bytes = j.bytes.clone();
    let span = match damage {
        Damage::Flip { at, bit } => {
            let at = resolve(*at);
            bytes[at] ^= 1 << bit;
            at..at + 1
        }
        Damage::Overwrite { at, bytes: with } => {
            let at = resolve(*at);
            let end = (at + with.len()).min(len);
            bytes[at..end].copy_from_slice(&with[..end - at]);
            at..end
        }
        Damage::Zero { at, len: n } => {
            let at = resolve(*at);
            let end = (at + n).min(len);
            bytes[at..end].fill(0);
            at..end
        }
        Damage::Truncate { at } => {
            bytes.truncate(resolve(*at));
            return Damaged {
                bytes,
                truncated: true,
                span: 0..0,
            };
        }
    };
    Damaged {
        bytes,
        truncated: false,
        span: span.start as u64..span.end as u64,
    }
}

/// The acknowledged records whose bytes the damage changed (or cut off).
fn touched(j: &Journal, damaged: &[u8]) -> BTreeSet<usize> {
    j.records
        .iter()
        .enumerate()
        .filter(|(_, (s, e, _))| damaged.get(*s..*e) != Some(&j.bytes[*s..*e]))
        .map(|(i, _)| i)
        .collect()
}

fn ops_except(j: &Journal, lost: &BTreeSet<usize>) -> Vec<JournalOp> {
    j.records
        .iter()
        .enumerate()
        .filter(|(i, _)| !lost.contains(i))
        .flat_map(|(_, r)| r.2.clone())
        .collect()
}

fn all_ops(j: &Journal) -> Vec<JournalOp> {
    ops_except(j, &BTreeSet::new())
}

/// Start-up's verdict on damaged bytes: refusing is always allowed; starting must keep every
/// acknowledged write, except that a truncation (indistinguishable from a crash mid-write) may
/// cut off what lies past the cut.
fn check_start_up(j: &Journal, damaged: &[u8], truncated: bool) -> Result<(), TestCaseError> {
    let touched = touched(j, damaged);
    match recovery::check_segment(damaged, true) {
        SegmentCheck::Intact { ops } | SegmentCheck::TornTail { ops, .. } if truncated => {
            prop_assert_eq!(ops, ops_except(j, &touched));
            // Only the records at and after the cut are gone.
            if let Some(&first) = touched.iter().next() {
                prop_assert!(j.records[first].1 > damaged.len());
            }
        }
        SegmentCheck::Intact { ops } => {
            prop_assert_eq!(&ops, &all_ops(j));
            prop_assert!(touched.is_empty());
        }
        SegmentCheck::TornTail { ops, offset, .. } => {
            prop_assert_eq!(&ops, &all_ops(j), "a torn tail dropped acknowledged writes");
            prop_assert_eq!(offset, j.acked_end);
            prop_assert!(touched.is_empty());
        }
        SegmentCheck::Damaged { offset, .. } => {
            prop_assert!(!truncated, "a clean cut was taken for damage");
            // It names where the first damaged record starts.
            let first = touched
                .iter()
                .next()
                .map_or(j.acked_end, |&i| j.records[i].0);
            prop_assert_eq!(offset, first);
        }
    }
    Ok(())
}

/// Salvage keeps every record the damage did not touch, and its lost ranges cover exactly the
/// touched records (and the in-flight tail), naming only operations from them.
fn check_salvage(j: &Journal, d: &Damaged) -> Result<(), TestCaseError> {
    let (damaged, truncated) = (&d.bytes[..], d.truncated);
    let touched = touched(j, damaged);
    let s = salvage_segment(Path::new(SEGMENT), damaged, true);
    prop_assert_eq!(&s.ops, &ops_except(j, &touched));
    prop_assert_eq!(s.records as usize, j.records.len() - touched.len());
    let starts: BTreeSet<usize> = j.records.iter().map(|r| r.0).chain([j.acked_end]).collect();
    let mut covered = BTreeSet::new();
    for r in &s.lost {
        let (start, end) = (r.start as usize, r.end as usize);
        prop_assert!(starts.contains(&start), "{r:?} does not start at a record");
        prop_assert!(
            end == damaged.len() || starts.contains(&end),
            "{r:?} does not end at a record"
        );
        let inside: Vec<usize> = (0..j.records.len())
            .filter(|&i| j.records[i].0 >= start && j.records[i].0 < end)
            .collect();
        covered.extend(inside.iter().copied());
        let in_flight = end > j.acked_end;
        prop_assert!(r.records >= 1);
        prop_assert!(
            r.records as usize <= inside.len() + usize::from(in_flight),
            "{r:?}"
        );
        let named: Vec<String> = inside
            .iter()
            .flat_map(|&i| j.records[i].2.iter())
            .map(|op| format!("{} {}", op_name(op), ns(op)))
            .collect();
        for op in &r.identified {
            let altered = op.at.start < d.span.end && d.span.start < op.at.end;
            if altered || (in_flight && op.at.end > j.acked_end as u64) {
                continue; // read through the damage, or the in-flight write's own
            }
            prop_assert!(
                named.contains(&format!("{} {}", op.op, op.namespace)),
                "{op} is not from a lost record"
            );
        }
        if r.torn_tail {
            prop_assert!(
                inside.is_empty() || truncated,
                "{r:?} dropped acknowledged records"
            );
        }
    }
    // Records cut off by a truncation are not in the file any more, so in no range.
    let present: BTreeSet<usize> = touched
        .iter()
        .copied()
        .filter(|&i| j.records[i].0 < damaged.len())
        .collect();
    prop_assert_eq!(
        &covered,
        &present,
        "the lost ranges are not the touched records"
    );
    Ok(())
}

fn op_name(op: &JournalOp) -> &'static str {
    match op {
        JournalOp::Put { .. } => "put",
        JournalOp::Delete { .. } => "delete",
        JournalOp::CreateIndex { .. } => "createIndex",
        _ => "other",
    }
}

fn ns(op: &JournalOp) -> String {
    match op {
        JournalOp::Put { db, coll, .. }
        | JournalOp::Delete { db, coll, .. }
        | JournalOp::CreateIndex { db, coll, .. } => format!("{db}.{coll}"),
        _ => String::new(),
    }
}

/// Collections as a plain model: documents by `_id` and index names.
type Model = BTreeMap<String, (BTreeMap<String, bson::Document>, BTreeSet<String>)>;

fn model_of_ops(ops: &[JournalOp]) -> Model {
    let mut m = Model::new();
    for op in ops {
        match op {
            JournalOp::Put { coll, doc, .. } => {
                let id = doc.id().unwrap().to_string();
                m.entry(coll.clone())
                    .or_default()
                    .0
                    .insert(id, doc.to_document().unwrap());
            }
            JournalOp::Delete { coll, id, .. } => {
                m.entry(coll.clone()).or_default().0.remove(&id.to_string());
            }
            JournalOp::CreateIndex { coll, spec, .. } => {
                let name = spec.get_str("name").unwrap().to_string();
                m.entry(coll.clone()).or_default().1.insert(name);
            }
            other => panic!("not generated: {other:?}"),
        }
    }
    m
}

/// Collections with neither documents nor indexes are left out: whether an emptied collection
/// still exists is not what these tests are about.
fn without_empty(mut m: Model) -> Model {
    m.retain(|_, (docs, indexes)| !docs.is_empty() || !indexes.is_empty());
    m
}

fn model_of_recovered(rec: &Recovered) -> Model {
    let mut m = model_of_ops(&rec.ops);
    for c in &rec.collections {
        let entry = m.entry(c.coll.clone()).or_default();
        for d in &c.docs {
            entry
                .0
                .insert(d.id().unwrap().to_string(), d.to_document().unwrap());
        }
        for i in &c.indexes {
            entry.1.insert(i.get_str("name").unwrap().to_string());
        }
    }
    m
}

fn stored(doc: bson::Document) -> docstore::internals::storage::StoredDoc {
    docstore::internals::storage::StoredDoc::from_document(&doc).unwrap()
}

const FAST: Duration = Duration::from_millis(50);

/// A directory in memory where the system has one: each case fsyncs several times, and on a
/// shared, busy disk that alone can take seconds, which is not what this test is about.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

/// The whole round on a real directory: start (or refuse), repair, start again.
fn check_directory(j: &Journal, damaged: &[u8], truncated: bool) -> Result<(), TestCaseError> {
    let dir = scratch_dir();
    std::fs::write(dir.path().join(SEGMENT), damaged).unwrap();
    let touched = touched(j, damaged);
    match Storage::open(dir.path(), FAST) {
        Ok((storage, rec)) => {
            drop(storage);
            let expected = if truncated {
                ops_except(j, &touched)
            } else {
                all_ops(j)
            };
            prop_assert_eq!(&rec.ops, &expected);
            // Whatever was dropped is in a quarantine file, byte for byte.
            let kept = std::fs::metadata(dir.path().join(SEGMENT)).unwrap().len() as usize;
            if kept < damaged.len() {
                let aside = dir.path().join(recovery::torn_tail_name(1, kept));
                prop_assert_eq!(std::fs::read(aside).unwrap(), damaged[kept..].to_vec());
            }
        }
        Err(e) => {
            prop_assert!(
                recovery::damage(&e).is_some(),
                "not a repairable refusal: {e}"
            );
            prop_assert!(e.to_string().contains("docstore --repair --dbpath"), "{e}");
            prop_assert_eq!(
                std::fs::read(dir.path().join(SEGMENT)).unwrap(),
                damaged.to_vec()
            );
            let report = docstore::repair(dir.path()).unwrap();
            prop_assert!(report.lost_anything() || touched.is_empty(), "{report}");
            let (_s, rec) = Storage::open(dir.path(), FAST).unwrap();
            prop_assert_eq!(
                without_empty(model_of_recovered(&rec)),
                without_empty(model_of_ops(&ops_except(j, &touched)))
            );
            let moved = report.moved_to.join(SEGMENT);
            prop_assert_eq!(std::fs::read(moved).unwrap(), damaged.to_vec());
        }
    }
    Ok(())
}

fn journal_and_damage() -> impl Strategy<Value = (Journal, Damage)> {
    (
        groups(),
        prop::option::of((prop::collection::vec(action(), 1..3), any::<u16>())),
        damage(),
    )
        .prop_map(|(groups, in_flight, damage)| {
            let in_flight = in_flight.map(|(g, keep)| (g.iter().map(to_op).collect(), keep));
            (build(&groups, in_flight), damage)
        })
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Journal {{ {} records, {} bytes, acknowledged up to {} }}",
            self.records.len(),
            self.bytes.len(),
            self.acked_end
        )
    }
}

/// `PROPTEST_CASES` (proptest reads it) sets the case count, 256 by default. The in-memory
/// checks take microseconds a case, so CI's 4096 run in about a second.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The directory round opens, fsyncs and repairs real files (milliseconds a case), so its case
/// count is capped whatever `PROPTEST_CASES` says: the byte-level property above explores the
/// damage space; this one checks that the files, quarantine and repair agree with it.
fn directory_config() -> ProptestConfig {
    ProptestConfig {
        cases: config().cases.min(48),
        ..config()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn damaged_journals_are_refused_or_keep_every_acknowledged_write_and_salvage_loses_only_the_touched_records(
        (j, damage) in journal_and_damage()
    ) {
        let damaged = apply(&j, &damage);
        check_start_up(&j, &damaged.bytes, damaged.truncated)?;
        check_salvage(&j, &damaged)?;
    }
}

proptest! {
    #![proptest_config(directory_config())]

    #[test]
    fn a_damaged_data_directory_starts_with_every_acknowledged_write_or_repairs_to_the_untouched_ones(
        (j, damage) in journal_and_damage()
    ) {
        let damaged = apply(&j, &damage);
        check_directory(&j, &damaged.bytes, damaged.truncated)?;
    }
}

// ---------------------------------------------------------------------------------------------
// The corpus: damaged journals kept as files, each with what start-up and salvage must say.
// ---------------------------------------------------------------------------------------------

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/journal_corpus")
}

/// What start-up and salvage make of a segment, as stable text.
fn verdict(bytes: &[u8]) -> String {
    let start = match recovery::check_segment(bytes, true) {
        SegmentCheck::Intact { ops } => format!("start: intact, {} ops", ops.len()),
        SegmentCheck::TornTail { ops, offset, bad } => {
            format!(
                "start: torn tail at {offset} ({bad}), keeps {} ops",
                ops.len()
            )
        }
        SegmentCheck::Damaged {
            offset,
            bad,
            records_after,
        } => format!("start: refuses, damaged at {offset} ({bad}), {records_after} records after"),
    };
    let s = salvage_segment(Path::new(SEGMENT), bytes, true);
    let mut out = format!(
        "{start}\nsalvage: keeps {} records, {} ops\n",
        s.records,
        s.ops.len()
    );
    for r in &s.lost {
        out += &format!(
            "lost {}..{}: {} records{}{}\n",
            r.start,
            r.end,
            r.records,
            if r.torn_tail { ", torn tail" } else { "" },
            r.identified
                .iter()
                .map(|o| format!("; {o}"))
                .collect::<String>()
        );
    }
    out
}

#[test]
fn the_corpus_of_damaged_journals_still_gets_the_same_verdicts() {
    let mut seen = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    entries.sort();
    for path in entries {
        let bytes = std::fs::read(&path).unwrap();
        let expected = std::fs::read_to_string(path.with_extension("expect")).unwrap();
        assert_eq!(verdict(&bytes), expected, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 7, "the corpus is missing ({seen} files)");
}

/// Writes a corpus entry: run with `DOCSTORE_WRITE_CORPUS=1` to add the cases below.
#[test]
fn corpus_entries_can_be_regenerated() {
    let cases: Vec<(&str, Damage, bool)> = vec![
        // The case: bytes overwritten with 0xff across a length field mid-journal.
        (
            "length-field-overwritten-mid-journal",
            Damage::Overwrite {
                at: Pos::NearRecord {
                    record: 5,
                    delta: 0,
                },
                bytes: vec![0xff; 4],
            },
            false,
        ),
        (
            "bit-flip-in-a-payload",
            Damage::Flip {
                at: Pos::NearRecord {
                    record: 3,
                    delta: 13,
                },
                bit: 2,
            },
            false,
        ),
        (
            "zeroed-block-across-a-boundary",
            Damage::Zero {
                at: Pos::NearRecord {
                    record: 4,
                    delta: -3,
                },
                len: 70,
            },
            false,
        ),
        (
            "length-of-the-last-record-grown",
            Damage::Overwrite {
                at: Pos::NearRecord {
                    record: 7,
                    delta: 1,
                },
                bytes: vec![0x40],
            },
            false,
        ),
        // Found by the property test: a flipped bit in a database name ("shop" became "rhop");
        // the report names the operation as read from the damaged bytes.
        (
            "bit-flip-in-a-namespace",
            Damage::Flip {
                at: Pos::NearRecord {
                    record: 0,
                    delta: 48,
                },
                bit: 0,
            },
            false,
        ),
        (
            "torn-in-flight-write",
            Damage::Flip {
                at: Pos::Anywhere(0),
                bit: 0,
            },
            true,
        ),
        (
            "truncated-inside-a-record",
            Damage::Truncate {
                at: Pos::NearRecord {
                    record: 6,
                    delta: 11,
                },
            },
            false,
        ),
    ];
    for (name, damage, in_flight_only) in cases {
        let groups: Vec<Vec<JournalOp>> = (0..8)
            .map(|i| {
                vec![to_op(&match i % 4 {
                    0 => Action::Insert {
                        coll: 0,
                        id: i,
                        pad: 10,
                    },
                    1 => Action::Update {
                        coll: 0,
                        id: i - 1,
                        value: i,
                    },
                    2 => Action::Index {
                        coll: 1,
                        field: "a",
                    },
                    _ => Action::Delete { coll: 0, id: i - 3 },
                })]
            })
            .collect();
        let in_flight = Some((
            vec![to_op(&Action::Insert {
                coll: 1,
                id: 99,
                pad: 30,
            })],
            20,
        ));
        let j = build(&groups, if in_flight_only { in_flight } else { None });
        let damaged = if in_flight_only {
            j.bytes.clone()
        } else {
            apply(&j, &damage).bytes
        };
        let path = corpus_dir().join(format!("{name}.log"));
        if std::env::var_os("DOCSTORE_WRITE_CORPUS").is_some() {
            std::fs::create_dir_all(corpus_dir()).unwrap();
            std::fs::write(&path, &damaged).unwrap();
            std::fs::write(path.with_extension("expect"), verdict(&damaged)).unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), damaged, "{name} changed");
    }
}

// ---------------------------------------------------------------------------------------------
// Snapshots: salvage never files a document under the wrong collection.
// ---------------------------------------------------------------------------------------------

fn images() -> impl Strategy<Value = Vec<docstore::internals::storage::CollectionImage>> {
    prop::collection::vec(0usize..8, 1..4).prop_map(|sizes| {
        sizes
            .iter()
            .enumerate()
            .map(|(c, &n)| docstore::internals::storage::CollectionImage {
                db: "shop".into(),
                coll: format!("c{c}"),
                options: doc! {},
                indexes: vec![doc! {"v": 2, "key": {"a": 1}, "name": "a_1"}],
                docs: (0..n as i32)
                    .map(|i| {
                        docstore::internals::storage::StoredDoc::from_document(
                            &doc! {"_id": c as i32 * 100 + i, "a": i},
                        )
                        .unwrap()
                    })
                    .collect(),
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_salvaged_snapshot_keeps_documents_only_in_their_own_collection_and_names_the_rest(
        images in images(),
        damage in damage(),
    ) {
        let dir = scratch_dir();
        let path = dir.path().join("snapshot-0000000000000002.db");
        docstore::internals::storage::snapshot::write_file(&path, 2, &images, None).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        // Record boundaries, for damage aimed near them.
        let mut records = Vec::new();
        let mut off = 0;
        while off + 8 <= bytes.len() {
            let end = off + 8 + u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
            records.push((off, end, vec![]));
            off = end;
        }
        let j = Journal { records, acked_end: bytes.len(), bytes };
        let damaged = apply(&j, &damage);
        let (salvaged, lost) = recovery::salvage_snapshot(&path, &damaged.bytes);
        let mut kept = BTreeSet::new();
        for c in &salvaged {
            let original = images.iter().find(|i| i.coll == c.coll);
            prop_assert!(original.is_some(), "invented collection {}", c.coll);
            for d in &c.docs {
                prop_assert!(original.unwrap().docs.iter().any(|o| o == d), "{} misfiled in {}", d, c.coll);
                kept.insert(d.to_document().unwrap().get_i32("_id").unwrap());
            }
        }
        // A document whose record the damage did not touch is kept or named by _id.
        let named: BTreeSet<String> = lost
            .iter()
            .flat_map(|r| r.identified.iter())
            .filter_map(|o| o.id.as_ref().map(|id| id.to_string()))
            .collect();
        let mut off = 0;
        let mut untouched_ids = Vec::new();
        while off + 8 <= j.bytes.len() {
            let len = u32::from_le_bytes(j.bytes[off..off + 4].try_into().unwrap()) as usize;
            let end = off + 8 + len;
            let record = bson::Document::from_reader(&j.bytes[off + 8..end]).unwrap();
            if damaged.bytes.get(off..end) == Some(&j.bytes[off..end]) {
                if let Ok(id) = record.get_i32("_id") {
                    untouched_ids.push(id);
                }
            }
            off = end;
        }
        for id in untouched_ids {
            prop_assert!(
                kept.contains(&id) || named.contains(&Bson::Int32(id).to_string()),
                "untouched document {id} neither kept nor reported"
            );
        }
    }
}
