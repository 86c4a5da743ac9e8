//! How an index holds its entries in memory.
//!
//! An ordinary index is a set of (key, record id) pairs in key order ([`KeyBytes`] keeps short
//! keys inline: 48 bytes an entry before the tree's own overhead). A text index holds tens of
//! entries per document (one per distinct term), all of the form `term key ‖ score`
//! ([`crate::text::TextIndex::scored_key`]), and a `$text` query only ever asks for one term's
//! records with their scores. So a text index keeps, per term key, its records and their
//! scores, compactly ([`TermRecords`]: a few bytes a posting). At a million products (about 40
//! million text entries) the pairs took about 2.5 GB more than postings in maps did, and those
//! maps (about 18 bytes a posting) were most of what the text index added to the process.
//!
//! A `$text` query sorted by score with a limit walks its terms' records best first (see
//! [`crate::index::topk`]): each term's records ordered by score, descending ("impact order"),
//! are made on first use and kept in [`ImpactCache`] until a write changes that term.
//!
//! Both forms answer the same questions (insert, remove, exact key, ranges of keys, every
//! entry in key order); the postings rebuild full keys only for the rare callers that want
//! them (`validate`, a hinted scan).

use super::postings::TermRecords;
use super::topk::{impact_order, ImpactList};
use super::{KeyBytes, RecordId};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// Bytes an entry of a list in score order takes (a record id and a score's bits).
const POSTING_BYTES: usize = 16;

/// The bytes of a score at the end of a text index key.
const SCORE_BYTES: usize = 8;

/// One index's entries.
#[derive(Debug, Clone)]
pub(crate) enum Entries {
    /// (key, record id) pairs in key order, then record order.
    Pairs(BTreeSet<(KeyBytes, RecordId)>),
    /// A text index: term key (the key without its score) → record id → the score's bits.
    Postings {
        terms: BTreeMap<Box<[u8]>, TermRecords>,
        len: usize,
        by_score: ImpactCache,
    },
}

/// Terms with fewer postings are put in score order on each use (a sort of a few thousand
/// entries costs less than remembering them).
const IMPACT_CACHED_FROM: usize = 2_048;

/// Entries the cache holds at most (16 bytes each, counted in [`Entries::bytes`]): past it,
/// it starts again empty.
const IMPACT_CACHE_ENTRIES: usize = 8_000_000;

/// The impact-ordered postings of the terms searches asked for, per term key. Read under the
/// collection's read lock by concurrent queries (hence the mutex); a write to a term drops its
/// list (writes hold the collection exclusively, so no lock is taken then).
#[derive(Default)]
pub(crate) struct ImpactCache {
    lists: std::sync::Mutex<ImpactLists>,
}

#[derive(Default)]
struct ImpactLists {
    by_term: std::collections::HashMap<Box<[u8]>, ImpactList>,
    entries: usize,
}

impl ImpactCache {
    /// Postings the cached lists hold (16 bytes each), counted in the index's size.
    fn entries(&self) -> usize {
        self.lists
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entries
    }

    fn forget(&mut self, term: &[u8]) {
        let lists = self
            .lists
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if lists.by_term.is_empty() {
            return;
        }
        if let Some(list) = lists.by_term.remove(term) {
            lists.entries -= list.len();
        }
    }

    /// `records` (the postings of `term`) by score, descending, from the cache or made now.
    fn get(&self, term: &[u8], records: &TermRecords) -> ImpactList {
        let make = || impact_order(records);
        if records.len() < IMPACT_CACHED_FROM {
            return make();
        }
        let lock = || {
            self.lists
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(list) = lock().by_term.get(term) {
            return list.clone();
        }
        // Made outside the lock: other searches go on meanwhile (two making the same list
        // at once both make it; one keeps its own).
        let list = make();
        let mut lists = lock();
        if lists.entries + list.len() > IMPACT_CACHE_ENTRIES {
            *lists = ImpactLists::default();
        }
        if !lists.by_term.contains_key(term) {
            lists.entries += list.len();
            lists.by_term.insert(Box::from(term), list.clone());
        }
        list
    }
}

impl Clone for ImpactCache {
    /// A copy starts with an empty cache (its lists are made again on use).
    fn clone(&self) -> Self {
        ImpactCache::default()
    }
}

impl std::fmt::Debug for ImpactCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ImpactCache")
    }
}

/// A (key, record id) bound of a key range, as the planner gives them.
pub(crate) type Entry = (KeyBytes, RecordId);

/// `key` split into its term key and score bits, if it has the text key's shape.
fn split(key: &[u8]) -> Option<(&[u8], u64)> {
    let at = key.len().checked_sub(SCORE_BYTES)?;
    let (term, score) = key.split_at(at);
    let bits: [u8; SCORE_BYTES] = score.try_into().ok()?;
    Some((term, u64::from_be_bytes(bits)))
}

fn join(term: &[u8], bits: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(term.len() + SCORE_BYTES);
    key.extend_from_slice(term);
    key.extend_from_slice(&bits.to_be_bytes());
    key
}

impl Entries {
    /// Empty entries: postings for a text index, pairs otherwise.
    pub(crate) fn new(text: bool) -> Entries {
        if text {
            Entries::Postings {
                terms: BTreeMap::new(),
                len: 0,
                by_score: ImpactCache::default(),
            }
        } else {
            Entries::Pairs(BTreeSet::new())
        }
    }

    /// Entries from pairs sorted by key then record id, without duplicates.
    pub(crate) fn from_sorted(text: bool, pairs: Vec<(KeyBytes, RecordId)>) -> Entries {
        if !text {
            return Entries::Pairs(pairs.into_iter().collect());
        }
        let mut entries = Entries::new(true);
        let Entries::Postings { terms, len, .. } = &mut entries else {
            return entries;
        };
        let mut run: Vec<(RecordId, u64)> = Vec::new();
        let mut current: Option<Box<[u8]>> = None;
        let mut flush = |term: Option<Box<[u8]>>, run: &mut Vec<(RecordId, u64)>| {
            if let Some(term) = term {
                // Sorted by (score, record) within a term: re-sorted by record, the order the
                // postings are kept in (a record's lowest score kept, as before).
                run.sort_unstable();
                run.dedup_by_key(|(rid, _)| *rid);
                match terms.entry(term) {
                    std::collections::btree_map::Entry::Vacant(slot) => {
                        *len += run.len();
                        slot.insert(TermRecords::from_sorted(run));
                    }
                    std::collections::btree_map::Entry::Occupied(mut slot) => {
                        for &(rid, bits) in run.iter() {
                            if slot.get_mut().insert(rid, bits).is_none() {
                                *len += 1;
                            }
                        }
                    }
                }
                run.clear();
            }
        };
        for (key, rid) in pairs {
            let Some((term, bits)) = split(key.as_slice()) else {
                continue;
            };
            if current.as_deref() != Some(term) {
                flush(current.take(), &mut run);
                current = Some(Box::from(term));
            }
            run.push((rid, bits));
        }
        flush(current.take(), &mut run);
        if *len >= 1_000_000 && tracing::enabled!(tracing::Level::DEBUG) {
            // What a large text index holds (issue 37's memory measurements): terms with few
            // postings cost their own small allocations more than their postings.
            let small = terms.values().filter(|r| r.len() < 11).count();
            tracing::debug!(
                terms = terms.len(),
                postings = *len,
                small_terms = small,
                "text postings built"
            );
        }
        entries
    }

    /// The (key, record id) pairs of an ordinary index; `None` for a text index's postings.
    pub(crate) fn pairs(&self) -> Option<&BTreeSet<(KeyBytes, RecordId)>> {
        match self {
            Entries::Pairs(set) => Some(set),
            Entries::Postings { .. } => None,
        }
    }

    pub(crate) fn insert(&mut self, key: &[u8], rid: RecordId) {
        match self {
            Entries::Pairs(set) => {
                set.insert((KeyBytes::from(key), rid));
            }
            Entries::Postings {
                terms,
                len,
                by_score,
            } => {
                let Some((term, bits)) = split(key) else {
                    return;
                };
                by_score.forget(term);
                let records = match terms.get_mut(term) {
                    Some(records) => records,
                    None => terms.entry(Box::from(term)).or_default(),
                };
                if records.insert(rid, bits).is_none() {
                    *len += 1;
                }
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &[u8], rid: RecordId) {
        match self {
            Entries::Pairs(set) => {
                set.remove(&(KeyBytes::from(key), rid));
            }
            Entries::Postings {
                terms,
                len,
                by_score,
            } => {
                let Some((term, bits)) = split(key) else {
                    return;
                };
                let Some(records) = terms.get_mut(term) else {
                    return;
                };
                by_score.forget(term);
                // Only this very entry: a newer score of the same term stays.
                if records.get(&rid) == Some(&bits) {
                    records.remove(&rid);
                    *len -= 1;
                    if records.is_empty() {
                        terms.remove(term);
                    }
                }
            }
        }
    }

    pub(crate) fn contains(&self, key: &[u8], rid: RecordId) -> bool {
        match self {
            Entries::Pairs(set) => set.contains(&(KeyBytes::from(key), rid)),
            Entries::Postings { terms, .. } => split(key).is_some_and(|(term, bits)| {
                terms.get(term).and_then(|r| r.get(&rid)) == Some(&bits)
            }),
        }
    }

    /// Records whose key is exactly `key`, in record order.
    pub(crate) fn records_with_key<'a>(
        &'a self,
        key: &[u8],
    ) -> Box<dyn Iterator<Item = RecordId> + 'a> {
        match self {
            Entries::Pairs(set) => {
                let lo = KeyBytes::from(key);
                let hi = lo.clone();
                Box::new(
                    set.range((
                        Bound::Included((lo, RecordId::MIN)),
                        Bound::Included((hi, RecordId::MAX)),
                    ))
                    .map(|(_, rid)| *rid),
                )
            }
            Entries::Postings { terms, .. } => {
                let Some((term, bits)) = split(key) else {
                    return Box::new(std::iter::empty());
                };
                match terms.get(term) {
                    Some(records) => Box::new(
                        records
                            .iter()
                            .filter(move |(_, b)| *b == bits)
                            .map(|(rid, _)| rid),
                    ),
                    None => Box::new(std::iter::empty()),
                }
            }
        }
    }

    /// A text index's records of one term key, each with its score.
    pub(crate) fn postings(&self, term_key: &[u8]) -> Vec<(RecordId, f64)> {
        match self {
            Entries::Pairs(set) => set
                .range((KeyBytes::from(term_key), 0)..)
                .map_while(|(key, rid)| {
                    crate::text::TextIndex::score_in_key(key.as_slice(), term_key)
                        .map(|score| (*rid, score))
                })
                .collect(),
            Entries::Postings { terms, .. } => terms
                .get(term_key)
                .map(|records| {
                    records
                        .iter()
                        .map(|(rid, bits)| (rid, f64::from_bits(bits)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// A text index's postings of one term key, record → score bits (`Some(None)` when no
    /// document holds the term); `None` when the index holds pairs.
    pub(crate) fn term_records(&self, term_key: &[u8]) -> Option<Option<&TermRecords>> {
        match self {
            Entries::Pairs(_) => None,
            Entries::Postings { terms, .. } => Some(terms.get(term_key)),
        }
    }

    /// A text index's postings of one term key by score, descending (see [`ImpactCache`]);
    /// `None` when the index holds pairs or no document holds the term.
    pub(crate) fn term_by_score(&self, term_key: &[u8]) -> Option<ImpactList> {
        match self {
            Entries::Pairs(_) => None,
            Entries::Postings {
                terms, by_score, ..
            } => terms
                .get(term_key)
                .map(|records| by_score.get(term_key, records)),
        }
    }

    /// Like [`Entries::range`], with each entry's key; `None` for a text index, whose
    /// entries hold postings rather than keys.
    pub(crate) fn range_with_keys<'a>(
        &'a self,
        range: (Bound<Entry>, Bound<Entry>),
        reverse: bool,
    ) -> Option<super::KeyedEntries<'a>> {
        let Entries::Pairs(set) = self else {
            return None;
        };
        let entries = set.range(range);
        Some(if reverse {
            Box::new(entries.rev().map(|(key, rid)| (key.as_slice(), *rid)))
        } else {
            Box::new(entries.map(|(key, rid)| (key.as_slice(), *rid)))
        })
    }

    /// Record ids of the entries in `range`, in key order (reversed when `reverse`).
    pub(crate) fn range<'a>(
        &'a self,
        range: (Bound<Entry>, Bound<Entry>),
        reverse: bool,
    ) -> Box<dyn Iterator<Item = RecordId> + 'a> {
        match self {
            Entries::Pairs(set) => {
                if reverse {
                    Box::new(set.range(range).rev().map(|(_, rid)| *rid))
                } else {
                    Box::new(set.range(range).map(|(_, rid)| *rid))
                }
            }
            Entries::Postings { .. } => {
                // Only a hint makes a text index scanned: the full keys are rebuilt.
                let mut ids: Vec<RecordId> = self
                    .all()
                    .filter(|(key, rid)| {
                        let entry = (KeyBytes::from(key.as_slice()), *rid);
                        let above = match &range.0 {
                            Bound::Included(lo) => entry >= *lo,
                            Bound::Excluded(lo) => entry > *lo,
                            Bound::Unbounded => true,
                        };
                        let below = match &range.1 {
                            Bound::Included(hi) => entry <= *hi,
                            Bound::Excluded(hi) => entry < *hi,
                            Bound::Unbounded => true,
                        };
                        above && below
                    })
                    .map(|(_, rid)| rid)
                    .collect();
                if reverse {
                    ids.reverse();
                }
                Box::new(ids.into_iter())
            }
        }
    }

    /// Every (key, record id) entry, in key order, then record order.
    pub(crate) fn all(&self) -> Box<dyn Iterator<Item = (Vec<u8>, RecordId)> + '_> {
        match self {
            Entries::Pairs(set) => {
                Box::new(set.iter().map(|(k, rid)| (k.as_slice().to_vec(), *rid)))
            }
            Entries::Postings { terms, .. } => {
                Box::new(terms.iter().flat_map(|(term, records)| {
                    let mut by_key: Vec<(u64, RecordId)> =
                        records.iter().map(|(rid, bits)| (bits, rid)).collect();
                    by_key.sort_unstable();
                    by_key
                        .into_iter()
                        .map(move |(bits, rid)| (join(term, bits), rid))
                }))
            }
        }
    }

    /// Bytes the entries take, before the trees' own overhead (`collStats`' index sizes).
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Entries::Pairs(set) => set.len() * super::ENTRY_BYTES,
            Entries::Postings {
                terms, by_score, ..
            } => {
                // The lists kept in score order are a copy of some terms' postings: counted, so
                // the index's size says what it holds in memory (up to 128 MB more per index).
                by_score.entries() * POSTING_BYTES
                    + terms
                        .iter()
                        .map(|(k, records)| k.len() + records.bytes())
                        .sum::<usize>()
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Entries::Pairs(set) => set.len(),
            Entries::Postings { len, .. } => *len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(term: &str, score: f64) -> Vec<u8> {
        let mut k = term.as_bytes().to_vec();
        k.push(0);
        k.extend_from_slice(&score.to_bits().to_be_bytes());
        k
    }

    #[test]
    fn postings_answer_what_pairs_answer() {
        let writes = [
            (key("blue", 1.5), 3),
            (key("blue", 0.75), 1),
            (key("jazz", 2.0), 1),
            (key("blue", 1.5), 2),
            (key("note", 1.0), 2),
        ];
        let mut pairs = Entries::new(false);
        let mut postings = Entries::new(true);
        for (k, rid) in &writes {
            pairs.insert(k, *rid);
            postings.insert(k, *rid);
        }
        let sorted = |e: &Entries| e.all().collect::<Vec<_>>();
        assert_eq!(sorted(&pairs), sorted(&postings));
        assert_eq!(pairs.len(), postings.len());
        let blue = {
            let mut k = b"blue".to_vec();
            k.push(0);
            k
        };
        let mut found = postings.postings(&blue);
        found.sort_by_key(|(rid, _)| *rid);
        assert_eq!(found, vec![(1, 0.75), (2, 1.5), (3, 1.5)]);
        let mut expected = pairs.postings(&blue);
        expected.sort_by_key(|(rid, _)| *rid);
        assert_eq!(found, expected);
        assert_eq!(
            postings
                .records_with_key(&key("blue", 1.5))
                .collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert!(postings.contains(&key("jazz", 2.0), 1));
        assert!(!postings.contains(&key("jazz", 2.5), 1));
        // A removal of a score the record no longer has leaves the newer one.
        postings.insert(&key("jazz", 3.0), 1);
        postings.remove(&key("jazz", 2.0), 1);
        assert!(postings.contains(&key("jazz", 3.0), 1));
        postings.remove(&key("jazz", 3.0), 1);
        postings.remove(&key("note", 1.0), 2);
        assert_eq!(postings.len(), 3);
        // Built from sorted pairs, the same entries.
        let mut all: Vec<(KeyBytes, RecordId)> = writes
            .iter()
            .map(|(k, rid)| (KeyBytes::from(k.as_slice()), *rid))
            .collect();
        all.sort_unstable();
        let built = Entries::from_sorted(true, all);
        assert_eq!(sorted(&built), sorted(&pairs));
        let range = (
            Bound::Included((KeyBytes::from(blue.as_slice()), RecordId::MIN)),
            Bound::Excluded((KeyBytes::from(&b"c"[..]), RecordId::MIN)),
        );
        assert_eq!(
            built.range(range.clone(), false).collect::<Vec<_>>(),
            pairs.range(range, false).collect::<Vec<_>>()
        );
    }
}
