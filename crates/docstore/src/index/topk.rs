//! The two orders a `$text` query walks its candidates in without gathering every posting
//! first: best first (a page sorted by score) and record order (an unsorted, limited query such
//! as a capped count).
//!
//! A common word is held by a third of a million products; gathering its postings, summing
//! several terms' scores per record and sorting or heaping them all cost tens to hundreds of
//! milliseconds per search, for a page of twenty. Both walks here read only as far as the
//! query needs:
//!
//! - [`BestFirst`] is Fagin's threshold algorithm over each term's postings in score order
//!   ("impact order", see `index::entries::ImpactCache`): it reads the lists a run of equal
//!   scores at a time (from the list that brings the threshold down soonest), scores each
//!   record it meets in full from the terms' record maps, and hands out the best scores once
//!   no record not yet met can reach them: the threshold, the sum of the lists' next scores,
//!   is below. Every record tied at a score is handed out together, so the caller orders ties
//!   by its later sort keys exactly as a full sort would.
//! - [`RecordOrder`] merges the terms' record maps (already in record order), summing each
//!   record's scores, and stops when the caller does.
//!
//! A record's score is the sum of its terms' scores added in the order of the query's terms,
//! starting from zero, as the gathering path adds them, so both give the same bits; the
//! threshold is summed the same way, and since rounding is monotone no record not yet met can
//! score above it.

use super::RecordId;
use std::collections::BTreeMap;

/// A term's postings by score, descending (ties by record id, ascending): `(score bits,
/// record)`. Made by [`impact_order`] and kept by `index::entries::ImpactCache`.
pub(crate) type ImpactList = std::sync::Arc<[(u64, RecordId)]>;

/// One term's postings as a text index holds them (compactly, `index::postings`) or as a
/// map: record → score bits.
pub(crate) trait Postings {
    /// Every (record, score bits), in record order.
    fn in_record_order(&self) -> InRecordOrder<'_>;
    /// How many records hold the term.
    fn count(&self) -> usize;
    /// A reader for lookups of records' score bits, fastest when they come in record order
    /// (the compact postings keep the block read last decoded).
    fn reader(&self) -> Box<dyn PostingsReader + '_>;
}

/// Lookups of many records in one term's postings ([`Postings::reader`]).
pub(crate) trait PostingsReader {
    /// The score bits of `record`, if it holds the term.
    fn get(&mut self, record: RecordId) -> Option<u64>;
}

impl PostingsReader for &BTreeMap<RecordId, u64> {
    fn get(&mut self, record: RecordId) -> Option<u64> {
        BTreeMap::get(self, &record).copied()
    }
}

impl Postings for BTreeMap<RecordId, u64> {
    fn reader(&self) -> Box<dyn PostingsReader + '_> {
        Box::new(self)
    }

    fn in_record_order(&self) -> InRecordOrder<'_> {
        Box::new(self.iter().map(|(record, bits)| (*record, *bits)))
    }

    fn count(&self) -> usize {
        self.len()
    }
}

/// A term's (record, score bits) in record order, as [`Postings::in_record_order`] gives them.
type InRecordOrder<'a> = Box<dyn Iterator<Item = (RecordId, u64)> + 'a>;

/// One query term's postings: record → score bits, and the same by score, descending.
pub(crate) struct TermPostings<'a> {
    pub records: &'a dyn Postings,
    pub by_score: ImpactList,
}

/// `records` (one term's postings) by score, descending, ties by record id.
pub(crate) fn impact_order<P: Postings + ?Sized>(records: &P) -> ImpactList {
    let mut list: Vec<(u64, RecordId)> = Vec::with_capacity(records.count());
    list.extend(records.in_record_order().map(|(rid, bits)| (bits, rid)));
    list.sort_unstable_by(|a, b| {
        f64::from_bits(b.0)
            .total_cmp(&f64::from_bits(a.0))
            .then(a.1.cmp(&b.1))
    });
    ImpactList::from(list)
}

/// A score as a key whose integer order is `f64::total_cmp`'s (flip every bit of a negative,
/// the sign bit of the rest), so a `BTreeMap` keeps scores in the walk's order.
fn score_key(bits: u64) -> u64 {
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The score of a [`score_key`].
fn key_score(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// How many of `list`'s first postings score `below` or more, counted no further than `cap`
/// (a longer prefix gives `cap + 1`): a galloping search from the list's start, so a short
/// prefix reads only the entries next to it (the walk picks a list before every run it reads,
/// and a run is often a single posting).
fn count_at_least(list: &[(u64, RecordId)], below: f64, cap: usize) -> usize {
    let at_least = |entry: &(u64, RecordId)| f64::from_bits(entry.0) >= below;
    let end = list.len().min(cap.saturating_add(1));
    // Every entry before `from` scores `below` or more.
    let mut from = 0;
    let mut step = 1;
    while from + step <= end {
        let probe = from + step - 1;
        if !at_least(&list[probe]) {
            return from + list[from..probe].partition_point(at_least);
        }
        from = probe + 1;
        step *= 2;
    }
    from + list[from..end].partition_point(at_least)
}

/// Postings read from one list in one step at most, while they keep the same score: the
/// threshold cannot change within such a run, so it is not recomputed for each posting, and
/// stopping mid-run reads at most this many postings more than a posting-at-a-time walk.
const RUN_STEP: usize = 256;

/// The records holding any of the terms, in groups of equal score, best first.
///
/// Generated and templated catalogs tie by the ten thousand (a product's editions hold the
/// same text), and a group is only handed out once every record of its score is met, so the
/// per-record cost decides a search's cost: a record met is scored with one lookup per other
/// term, and those lookups also tell whether an earlier list already met it (its posting there
/// lies before that list's read position), so no set of met records is kept; met records wait
/// in a map from score to records, whose few distinct scores make each insertion cheap (a heap
/// of every met record cost most of a search's time).
pub(crate) struct BestFirst<'a> {
    terms: Vec<TermPostings<'a>>,
    /// Each term's record map, for the lookups of records met in the other lists (a run of
    /// one score comes in record order, which the readers are fastest for).
    readers: Vec<Box<dyn PostingsReader + 'a>>,
    /// How far each term's score-ordered list has been read.
    read: Vec<usize>,
    /// Met records not handed out yet: [`score_key`] → records, in the order met.
    pending: BTreeMap<u64, Vec<RecordId>>,
    /// The records one step of [`BestFirst::advance`] met, with their [`score_key`]s, before
    /// they go into `pending` (kept to reuse its memory).
    met: Vec<(u64, RecordId)>,
    /// Postings read from the lists (`keysExamined`).
    pub(crate) postings_read: u64,
}

impl<'a> BestFirst<'a> {
    pub(crate) fn new(terms: Vec<TermPostings<'a>>) -> BestFirst<'a> {
        let read = vec![0; terms.len()];
        let readers = terms.iter().map(|t| t.records.reader()).collect();
        BestFirst {
            terms,
            readers,
            read,
            pending: BTreeMap::new(),
            met: Vec::new(),
            postings_read: 0,
        }
    }

    /// The highest score a record not met yet can have, `None` once every list is read.
    fn threshold(&self) -> Option<f64> {
        let mut any = false;
        let mut bound = 0.0;
        for (term, &at) in self.terms.iter().zip(&self.read) {
            if let Some((bits, _)) = term.by_score.get(at) {
                any = true;
                bound += f64::from_bits(*bits);
            }
        }
        any.then_some(bound)
    }

    /// Whether list `j` has read its posting `(bits, record)`: it lies before the list's read
    /// position in the list's order (score descending, then record ascending).
    fn read_in(&self, j: usize, bits: u64, record: RecordId) -> bool {
        match self.terms[j].by_score.get(self.read[j]) {
            None => true,
            Some(&(next_bits, next_record)) => f64::from_bits(bits)
                .total_cmp(&f64::from_bits(next_bits))
                .then(next_record.cmp(&record))
                .is_gt(),
        }
    }

    /// Meet `record`, read from list `from` with score `bits` there: its score (its terms'
    /// scores summed in term order, from zero), or `None` when an earlier list met it.
    fn meet(&mut self, from: usize, bits: u64, record: RecordId) -> Option<f64> {
        let mut score = 0.0;
        for j in 0..self.terms.len() {
            let term_bits = if j == from {
                bits
            } else {
                match self.readers[j].get(record) {
                    Some(b) => {
                        if self.read_in(j, b, record) {
                            return None;
                        }
                        b
                    }
                    None => continue,
                }
            };
            score += f64::from_bits(term_bits);
        }
        Some(score)
    }

    /// The list to read next: the one that alone brings the threshold below the best score
    /// met (and so hands out its group) reading the fewest postings; before any record is met,
    /// or when no list can do that alone, the one whose next score is highest (the first such).
    ///
    /// Any order of reading gives the same groups (a group is handed out only once no record
    /// not yet met can reach it); the order only decides how many postings are read. Reading
    /// the highest score first read a common word's whole tie run (tens of thousands of
    /// templated products, each met with a lookup in every other list) where a rarer word's
    /// short run would have brought the threshold down as far.
    fn list_to_read(&self) -> Option<usize> {
        let mut highest: Option<(usize, f64)> = None;
        for (i, (term, &at)) in self.terms.iter().zip(&self.read).enumerate() {
            if let Some((bits, _)) = term.by_score.get(at) {
                let score = f64::from_bits(*bits);
                if highest.is_none_or(|(_, b)| score > b) {
                    highest = Some((i, score));
                }
            }
        }
        let highest = highest.map(|(i, _)| i);
        let (Some(&top_key), Some(threshold)) = (self.pending.keys().next_back(), self.threshold())
        else {
            return highest;
        };
        let top = key_score(top_key);
        let mut fewest: Option<(usize, usize)> = None;
        for (i, (term, &at)) in self.terms.iter().zip(&self.read).enumerate() {
            let rest = &term.by_score[at.min(term.by_score.len())..];
            let Some(&(bits, _)) = rest.first() else {
                continue;
            };
            let next = f64::from_bits(bits);
            // The other lists' share of the threshold: this list's next score must fall
            // below `top - others` (or the list end) for the threshold to fall below `top`.
            let others = threshold - next;
            let below = top - others;
            let cap = fewest.map_or(usize::MAX, |(_, p)| p);
            let postings = count_at_least(rest, below, cap);
            if postings == rest.len() && others >= top {
                // Even read to its end, this list leaves the threshold at `top` or above.
                continue;
            }
            if fewest.is_none_or(|(_, p)| postings < p) {
                fewest = Some((i, postings));
            }
        }
        fewest.map(|(i, _)| i).or(highest)
    }

    /// Read more postings from the list [`BestFirst::list_to_read`] picks, up to [`RUN_STEP`]
    /// of them while their score stays the same.
    fn advance(&mut self) {
        let Some(i) = self.list_to_read() else {
            return;
        };
        let list = ImpactList::clone(&self.terms[i].by_score);
        let at = self.read[i];
        let run_bits = list[at].0;
        let run = list[at..]
            .iter()
            .take(RUN_STEP)
            .take_while(|(bits, _)| *bits == run_bits)
            .count();
        let mut met = std::mem::take(&mut self.met);
        for &(bits, record) in &list[at..at + run] {
            // Moved past the posting first: `meet` asks this list's position of no record.
            self.read[i] += 1;
            self.postings_read += 1;
            if let Some(score) = self.meet(i, bits, record) {
                met.push((score_key(score.to_bits()), record));
            }
        }
        // Into `pending` a run of equal scores at a time: a single word's run is one score,
        // and looking its key up in the map once per record was most of the walk's time.
        for same in met.chunk_by(|a, b| a.0 == b.0) {
            self.pending
                .entry(same[0].0)
                .or_default()
                .extend(same.iter().map(|&(_, record)| record));
        }
        met.clear();
        self.met = met;
    }

    /// The next best score and every record that has it, in record order; `None` when no
    /// record is left.
    pub(crate) fn next_group(&mut self) -> Option<(f64, Vec<RecordId>)> {
        if let Some(group) = self.next_single_term_group() {
            return group;
        }
        loop {
            let threshold = self.threshold();
            if let Some(&top_key) = self.pending.keys().next_back() {
                let top = key_score(top_key);
                if threshold.is_none_or(|t| top > t) {
                    let mut group = self.pending.remove(&top_key).unwrap_or_default();
                    group.sort_unstable();
                    return Some((top, group));
                }
            }
            threshold?;
            self.advance();
        }
    }

    /// [`BestFirst::next_group`] for a query of one term: its next group is the run of equal
    /// scores at the list's read position, already in record order (the list orders ties by
    /// record), so it is copied out whole instead of met a record at a time (a common word's
    /// tie is up to a quarter of a million postings). `None` when the query has several terms;
    /// `Some(None)` when the list is read to its end.
    fn next_single_term_group(&mut self) -> Option<Option<(f64, Vec<RecordId>)>> {
        let [term] = self.terms.as_slice() else {
            return None;
        };
        // Only `advance` fills `pending`, and with one term it is never called.
        debug_assert!(self.pending.is_empty());
        let at = self.read[0];
        let Some(&(run_bits, _)) = term.by_score.get(at) else {
            return Some(None);
        };
        let run = term.by_score[at..].partition_point(|&(bits, _)| bits == run_bits);
        let group = term.by_score[at..at + run]
            .iter()
            .map(|&(_, record)| record)
            .collect();
        self.read[0] += run;
        self.postings_read += run as u64;
        // Summed from zero, as `meet` sums a record's scores.
        Some(Some((0.0 + f64::from_bits(run_bits), group)))
    }
}

/// The records holding any of the terms, in record order, each with its score.
pub(crate) struct RecordOrder<'a> {
    cursors: Vec<std::iter::Peekable<InRecordOrder<'a>>>,
    /// Postings read (`keysExamined`).
    pub(crate) postings_read: u64,
}

impl<'a> RecordOrder<'a> {
    pub(crate) fn new<P: Postings + ?Sized>(terms: &[&'a P]) -> RecordOrder<'a> {
        RecordOrder {
            cursors: terms
                .iter()
                .map(|t| t.in_record_order().peekable())
                .collect(),
            postings_read: 0,
        }
    }
}

impl Iterator for RecordOrder<'_> {
    type Item = (RecordId, f64);

    fn next(&mut self) -> Option<(RecordId, f64)> {
        let record = self
            .cursors
            .iter_mut()
            .filter_map(|c| c.peek().map(|(record, _)| *record))
            .min()?;
        let mut score = 0.0;
        for cursor in &mut self.cursors {
            if let Some((_, bits)) = cursor.next_if(|(r, _)| *r == record) {
                score += f64::from_bits(bits);
                self.postings_read += 1;
            }
        }
        Some((record, score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::test_random::Random;

    use super::impact_order as impact;

    /// A best-first walk over the terms whose postings are `terms`.
    fn walk_over<'a>(terms: &[&'a BTreeMap<RecordId, u64>]) -> BestFirst<'a> {
        BestFirst::new(
            terms
                .iter()
                .map(|&records| TermPostings {
                    records,
                    by_score: impact(records),
                })
                .collect(),
        )
    }

    /// Random postings: `terms` terms over `records` records, scores from a few values (many
    /// ties) or many.
    fn postings(rng: &mut Random, terms: usize, records: u64) -> Vec<BTreeMap<RecordId, u64>> {
        let values = 1 + rng.below(40);
        let mut maps = Vec::new();
        for _ in 0..terms {
            let share = 1 + rng.below(records);
            let mut map = BTreeMap::new();
            for r in 0..records {
                if rng.below(records) < share {
                    let score = 0.5 + rng.below(values) as f64 * 0.37 + 0.1 / 3.0;
                    map.insert(r, score.to_bits());
                }
            }
            maps.push(map);
        }
        maps
    }

    /// What gathering every posting gives: each record's sum in term order, sorted by score,
    /// descending, then record.
    fn gathered(maps: &[BTreeMap<RecordId, u64>]) -> Vec<(RecordId, f64)> {
        let mut all: Vec<(RecordId, f64)> = Vec::new();
        for map in maps {
            all.extend(map.iter().map(|(r, b)| (*r, f64::from_bits(*b))));
        }
        all.sort_by_key(|(r, _)| *r);
        let mut summed: Vec<(RecordId, f64)> = Vec::new();
        for (r, s) in all {
            match summed.last_mut() {
                Some((last, total)) if *last == r => *total += s,
                _ => summed.push((r, 0.0 + s)),
            }
        }
        summed
    }

    #[test]
    fn best_first_gives_every_record_in_the_order_of_a_full_sort() {
        let mut rng = Random(0x9e37_79b9_7f4a_7c15);
        for _ in 0..300 {
            let terms = 1 + rng.below(4) as usize;
            let records = 1 + rng.below(300);
            let maps = postings(&mut rng, terms, records);
            let mut expected = gathered(&maps);
            expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut walk = walk_over(&maps.iter().collect::<Vec<_>>());
            let mut found = Vec::new();
            let mut last: Option<f64> = None;
            while let Some((score, group)) = walk.next_group() {
                assert!(last.is_none_or(|l| score < l), "groups come best first");
                last = Some(score);
                assert!(group.windows(2).all(|w| w[0] < w[1]));
                found.extend(group.into_iter().map(|r| (r, score)));
            }
            assert_eq!(found.len(), expected.len());
            for (f, e) in found.iter().zip(&expected) {
                assert_eq!((f.0, f.1.to_bits()), (e.0, e.1.to_bits()));
            }
        }
    }

    #[test]
    fn best_first_reads_few_postings_for_a_short_page() {
        // One term over 100 000 records, distinct scores: the best ten need about ten reads.
        let map: BTreeMap<RecordId, u64> = (0..100_000u64)
            .map(|r| (r, (1.0 + r as f64 / 1e5).to_bits()))
            .collect();
        let mut walk = walk_over(&[&map]);
        let best: Vec<RecordId> = (0..10)
            .filter_map(|_| walk.next_group())
            .flat_map(|(_, g)| g)
            .collect();
        assert_eq!(best, (99_990..100_000).rev().collect::<Vec<_>>());
        assert!(walk.postings_read <= 11, "{}", walk.postings_read);
    }

    #[test]
    fn counting_a_prefix_by_galloping_agrees_with_a_binary_search() {
        let mut rng = Random(0x51_7cc1_b727_220a);
        for _ in 0..2_000 {
            let len = rng.below(70) as usize;
            let mut scores: Vec<u64> = (0..len).map(|_| rng.below(12)).collect();
            scores.sort_unstable_by(|a, b| b.cmp(a));
            let list: Vec<(u64, RecordId)> = scores
                .iter()
                .enumerate()
                .map(|(i, &s)| ((s as f64 * 0.5).to_bits(), i as RecordId))
                .collect();
            let below = rng.below(14) as f64 * 0.5 - 0.25;
            let cap = rng.below(80) as usize;
            let whole = list.partition_point(|e| f64::from_bits(e.0) >= below);
            assert_eq!(
                count_at_least(&list, below, cap),
                whole.min(cap + 1),
                "{scores:?} below {below} cap {cap}"
            );
            assert_eq!(count_at_least(&list, below, usize::MAX), whole);
        }
    }

    #[test]
    fn score_keys_order_scores_as_total_cmp_does() {
        let scores = [-3.5, -0.0, 0.0, 1e-300, 0.75, 1.0, 2.5, 1e300];
        for a in scores {
            assert_eq!(key_score(score_key(f64::to_bits(a))).to_bits(), a.to_bits());
            for b in scores {
                assert_eq!(
                    score_key(a.to_bits()).cmp(&score_key(b.to_bits())),
                    a.total_cmp(&b),
                    "{a} {b}"
                );
            }
        }
    }

    #[test]
    fn best_first_hands_out_a_large_tie_whole_and_in_record_order() {
        // Two terms, every record tied in the first; some hold the second too.
        let first: BTreeMap<RecordId, u64> = (0..5_000u64).map(|r| (r, 1.5f64.to_bits())).collect();
        let second: BTreeMap<RecordId, u64> = (0..5_000u64)
            .filter(|r| r % 7 == 0)
            .map(|r| (r, 0.25f64.to_bits()))
            .collect();
        let mut walk = walk_over(&[&first, &second]);
        let (top, both) = walk.next_group().expect("a group");
        assert_eq!(top, 1.75);
        assert_eq!(both, (0..5_000).filter(|r| r % 7 == 0).collect::<Vec<_>>());
        let (next, rest) = walk.next_group().expect("a second group");
        assert_eq!(next, 1.5);
        assert_eq!(rest, (0..5_000).filter(|r| r % 7 != 0).collect::<Vec<_>>());
        assert!(walk.next_group().is_none());
    }

    #[test]
    fn best_first_reads_a_short_run_before_a_long_one_that_lowers_the_threshold_no_further() {
        // A common word tied over 10 000 records and a rare word on ten of them: the best
        // group (both words) is handed out once the rare word's run is read, without reading
        // the common word's whole tie.
        let common: BTreeMap<RecordId, u64> =
            (0..10_000u64).map(|r| (r, 2.0f64.to_bits())).collect();
        let rare: BTreeMap<RecordId, u64> = (0..10u64).map(|r| (r, 1.0f64.to_bits())).collect();
        let mut walk = walk_over(&[&common, &rare]);
        assert_eq!(walk.next_group(), Some((3.0, (0..10).collect())));
        assert!(
            walk.postings_read <= RUN_STEP as u64 + 10,
            "{}",
            walk.postings_read
        );
        let (next, rest) = walk.next_group().expect("the common word's records");
        assert_eq!((next, rest), (2.0, (10..10_000).collect::<Vec<_>>()));
        assert_eq!(walk.next_group(), None);
        assert_eq!(walk.postings_read, 10_010);
    }

    #[test]
    fn best_first_hands_out_a_single_terms_ties_as_runs_of_its_list() {
        // One term: 3 000 records tied at the top, then 2 000 at a lower score, then one alone.
        let map: BTreeMap<RecordId, u64> = (0..5_001u64)
            .map(|r| {
                let score = match r {
                    _ if r % 5 < 3 && r < 5_000 => 2.0,
                    _ if r < 5_000 => 1.0,
                    _ => 0.5,
                };
                (r, f64::to_bits(score))
            })
            .collect();
        let mut walk = walk_over(&[&map]);
        let (top, first) = walk.next_group().expect("a group");
        assert_eq!(top, 2.0);
        assert_eq!(first, (0..5_000).filter(|r| r % 5 < 3).collect::<Vec<_>>());
        assert_eq!(walk.postings_read, 3_000);
        let (next, second) = walk.next_group().expect("a second group");
        assert_eq!(next, 1.0);
        assert_eq!(
            second,
            (0..5_000).filter(|r| r % 5 >= 3).collect::<Vec<_>>()
        );
        assert_eq!(walk.next_group(), Some((0.5, vec![5_000])));
        assert_eq!(walk.next_group(), None);
        assert_eq!(walk.postings_read, 5_001);
    }

    #[test]
    fn record_order_sums_each_record_like_gathering() {
        let mut rng = Random(0x2545_f491_4f6c_dd1d);
        for _ in 0..300 {
            let terms = 1 + rng.below(4) as usize;
            let records = 1 + rng.below(300);
            let maps = postings(&mut rng, terms, records);
            let refs: Vec<&BTreeMap<RecordId, u64>> = maps.iter().collect();
            let found: Vec<(RecordId, u64)> = RecordOrder::new(&refs)
                .map(|(r, s)| (r, s.to_bits()))
                .collect();
            let expected: Vec<(RecordId, u64)> = gathered(&maps)
                .into_iter()
                .map(|(r, s)| (r, s.to_bits()))
                .collect();
            assert_eq!(found, expected);
        }
    }
}
