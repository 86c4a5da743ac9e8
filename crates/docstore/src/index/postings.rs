//! One text index term's postings held compactly: record → score bits, in record order.
//!
//! A text index holds tens of postings per document (about 40 million at a million products),
//! and as a `BTreeMap<RecordId, u64>` each took about 18 bytes (16 of data and the nodes'
//! share), a term with a handful of postings a whole 192-byte node: most of the memory a large
//! catalog's text index added after start-up. Here a term's postings are blocks of
//! [`BLOCK`]–[`BLOCK_MAX`] postings in record order, each posting the gap from the previous
//! record and the index of its score among the term's distinct scores, both as varints: a
//! term's documents are close together and share a few scores, so most postings take 2–4
//! bytes. A score's bits are kept once per term, so [`TermRecords::get`] can still hand out a
//! reference to them as a map would.
//!
//! Reads decode one block (at most [`BLOCK_MAX`] postings) for a lookup and walk the blocks in
//! order for the records in order; a write decodes and re-encodes one block. Many lookups in
//! record order (a negated word's postings subtracted from a tie group) go through a
//! [`Reader`], a cursor that decodes a block only as far as the records asked for and goes on
//! from there.

use super::topk::Postings;
use super::RecordId;
use std::collections::HashMap;

/// Postings a block is built with.
const BLOCK: usize = 64;

/// Postings a block holds at most: past it, an insert splits it in two.
const BLOCK_MAX: usize = 2 * BLOCK;

/// A run of postings in record order: the gaps and score indexes as varints.
#[derive(Debug, Clone)]
struct Block {
    /// The block's first and last records (a lookup picks its block by them).
    first: RecordId,
    last: RecordId,
    count: u32,
    /// Per posting: the record minus the previous one (the first's previous is `first`),
    /// then the score's index in [`TermRecords::scores`].
    bytes: Box<[u8]>,
}

/// One term's postings: record → score bits.
#[derive(Debug, Clone, Default)]
pub(crate) struct TermRecords {
    /// The term's distinct score bits, in the order first met (a posting holds an index).
    /// A score no posting holds any more stays until the term is built again: harmless.
    scores: Vec<u64>,
    blocks: Vec<Block>,
    len: usize,
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The varint at `*at` in `bytes`, moving `*at` past it. The bytes are only ever written by
/// [`put_varint`], so a block always decodes.
fn get_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    while let Some(&byte) = bytes.get(*at) {
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            break;
        }
        shift += 7;
    }
    value
}

impl Block {
    /// A block of `postings` (in record order, not empty): (record, score index).
    fn encode(postings: &[(RecordId, u32)]) -> Block {
        let first = postings.first().map_or(0, |p| p.0);
        let last = postings.last().map_or(0, |p| p.0);
        let mut bytes = Vec::with_capacity(postings.len() * 3);
        let mut previous = first;
        for &(record, score) in postings {
            put_varint(&mut bytes, record - previous);
            put_varint(&mut bytes, u64::from(score));
            previous = record;
        }
        Block {
            first,
            last,
            count: postings.len() as u32,
            bytes: bytes.into_boxed_slice(),
        }
    }

    /// The block's postings: (record, score index).
    fn decode(&self) -> Vec<(RecordId, u32)> {
        let mut out = Vec::with_capacity(self.count as usize);
        let mut at = 0;
        let mut previous = self.first;
        for _ in 0..self.count {
            let record = previous + get_varint(&self.bytes, &mut at);
            let score = get_varint(&self.bytes, &mut at) as u32;
            out.push((record, score));
            previous = record;
        }
        out
    }
}

impl TermRecords {
    /// Postings sorted by record, without repeats.
    pub(crate) fn from_sorted(postings: &[(RecordId, u64)]) -> TermRecords {
        let mut scores = Vec::new();
        let mut index: HashMap<u64, u32> = HashMap::new();
        let mut coded = Vec::with_capacity(postings.len());
        for &(record, bits) in postings {
            let i = *index.entry(bits).or_insert_with(|| {
                scores.push(bits);
                (scores.len() - 1) as u32
            });
            coded.push((record, i));
        }
        scores.shrink_to_fit();
        TermRecords {
            scores,
            blocks: coded.chunks(BLOCK).map(Block::encode).collect(),
            len: postings.len(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the postings take in memory (for the index's size).
    pub(crate) fn bytes(&self) -> usize {
        self.scores.capacity() * 8
            + self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.blocks.iter().map(|b| b.bytes.len()).sum::<usize>()
    }

    /// The block that holds `record` if any holds it, else the one it would go in.
    fn block_for(&self, record: RecordId) -> usize {
        self.blocks
            .partition_point(|b| b.last < record)
            .min(self.blocks.len().saturating_sub(1))
    }

    /// The score bits of `record`, if it holds the term.
    pub(crate) fn get(&self, record: &RecordId) -> Option<&u64> {
        let block = self.blocks.get(self.block_for(*record))?;
        if *record < block.first || *record > block.last {
            return None;
        }
        let mut at = 0;
        let mut previous = block.first;
        for _ in 0..block.count {
            let here = previous + get_varint(&block.bytes, &mut at);
            let score = get_varint(&block.bytes, &mut at) as usize;
            if here == *record {
                return self.scores.get(score);
            }
            if here > *record {
                return None;
            }
            previous = here;
        }
        None
    }

    /// Set `record`'s score bits; the previous ones, if it held the term.
    pub(crate) fn insert(&mut self, record: RecordId, bits: u64) -> Option<u64> {
        let score = match self.scores.iter().position(|&s| s == bits) {
            Some(i) => i as u32,
            None => {
                self.scores.push(bits);
                (self.scores.len() - 1) as u32
            }
        };
        if self.blocks.is_empty() {
            self.blocks.push(Block::encode(&[(record, score)]));
            self.len = 1;
            return None;
        }
        let at = self.block_for(record);
        let mut postings = self.blocks[at].decode();
        let previous = match postings.binary_search_by_key(&record, |p| p.0) {
            Ok(i) => {
                let old = self.scores.get(postings[i].1 as usize).copied();
                postings[i].1 = score;
                old
            }
            Err(i) => {
                postings.insert(i, (record, score));
                self.len += 1;
                None
            }
        };
        if postings.len() > BLOCK_MAX {
            let (left, right) = postings.split_at(postings.len() / 2);
            self.blocks[at] = Block::encode(left);
            self.blocks.insert(at + 1, Block::encode(right));
        } else {
            self.blocks[at] = Block::encode(&postings);
        }
        previous
    }

    /// Take `record` out; its score bits, if it held the term.
    pub(crate) fn remove(&mut self, record: &RecordId) -> Option<u64> {
        let at = self.block_for(*record);
        let block = self.blocks.get(at)?;
        if *record < block.first || *record > block.last {
            return None;
        }
        let mut postings = block.decode();
        let i = postings.binary_search_by_key(record, |p| p.0).ok()?;
        let (_, score) = postings.remove(i);
        self.len -= 1;
        if postings.is_empty() {
            self.blocks.remove(at);
        } else {
            self.blocks[at] = Block::encode(&postings);
        }
        self.scores.get(score as usize).copied()
    }

    /// Every posting in record order: (record, score bits).
    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter {
            records: self,
            block: 0,
            at: 0,
            previous: self.blocks.first().map_or(0, |b| b.first),
            left: self.blocks.first().map_or(0, |b| b.count),
        }
    }
}

/// Lookups of many records in one term's postings ([`TermRecords::reader`]): a cursor in the
/// block of the last lookup, which a record after it is searched for from, so records asked
/// for in record order (a tie group, a merge's candidates, the records of one score run met by
/// the best-first walk) decode each posting of a block at most once, and only as far as the
/// records asked for, instead of a search of the blocks and a whole block decoded each.
/// Records in any order give the same answers ([`TermRecords::get`]'s): one before the cursor
/// starts its block again.
pub(crate) struct Reader<'a> {
    records: &'a TermRecords,
    /// The block the cursor is in, if any.
    block: Option<usize>,
    /// Where the next posting of the block starts in its bytes.
    at: usize,
    /// Postings of the block not decoded yet.
    left: u32,
    /// The last posting decoded: its record (the block's `first` before any) and score index.
    last: (RecordId, Option<u32>),
}

impl Reader<'_> {
    /// The index of the block that holds `record` if any holds it, else of the one it would go
    /// in (or past the last block): from the block read last when `record` lies after it.
    fn block_for(&self, record: RecordId) -> usize {
        let blocks = &self.records.blocks;
        match self.block {
            Some(b) if blocks[b].first <= record && record <= blocks[b].last => b,
            Some(b) if blocks[b].last < record => {
                // Usually the next block or one soon after: look there before searching.
                let next = b + 1;
                match blocks.get(next) {
                    Some(block) if block.last >= record => next,
                    Some(_) => next + 1 + blocks[next + 1..].partition_point(|b| b.last < record),
                    None => blocks.len(),
                }
            }
            _ => blocks.partition_point(|b| b.last < record),
        }
    }

    /// Put the cursor at the start of block `at`.
    fn start(&mut self, at: usize, block: &Block) {
        self.block = Some(at);
        self.at = 0;
        self.left = block.count;
        self.last = (block.first, None);
    }

    /// The score bits of `record`, if it holds the term.
    pub(crate) fn get(&mut self, record: RecordId) -> Option<u64> {
        let at = self.block_for(record);
        let block = self.records.blocks.get(at)?;
        if record < block.first {
            return None;
        }
        if self.block != Some(at) || record < self.last.0 {
            self.start(at, block);
        }
        if let (last, Some(score)) = self.last {
            if last == record {
                return self.score(score);
            }
        }
        while self.left > 0 {
            // Read the next posting without moving past it unless it is not after `record`:
            // a later lookup may ask for it.
            let mut next = self.at;
            let here = self.last.0 + get_varint(&block.bytes, &mut next);
            if here > record {
                return None;
            }
            let score = get_varint(&block.bytes, &mut next) as u32;
            self.at = next;
            self.left -= 1;
            self.last = (here, Some(score));
            if here == record {
                return self.score(score);
            }
        }
        None
    }

    /// The score bits at `index` in the term's distinct scores.
    fn score(&self, index: u32) -> Option<u64> {
        self.records.scores.get(index as usize).copied()
    }
}

impl super::topk::PostingsReader for Reader<'_> {
    fn get(&mut self, record: RecordId) -> Option<u64> {
        Reader::get(self, record)
    }
}

impl TermRecords {
    /// A [`Reader`] for many lookups, fastest when they come in record order.
    pub(crate) fn reader(&self) -> Reader<'_> {
        Reader {
            records: self,
            block: None,
            at: 0,
            left: 0,
            last: (0, None),
        }
    }
}

impl FromIterator<(RecordId, u64)> for TermRecords {
    /// Postings in any order; a record given twice keeps its last score, as a map would.
    fn from_iter<I: IntoIterator<Item = (RecordId, u64)>>(iter: I) -> TermRecords {
        let mut postings: Vec<(RecordId, u64)> = iter.into_iter().collect();
        // Stable: of a record's scores the last given stays last, and is the one kept.
        postings.sort_by_key(|p| p.0);
        let mut kept: Vec<(RecordId, u64)> = Vec::with_capacity(postings.len());
        for posting in postings {
            match kept.last_mut() {
                Some(last) if last.0 == posting.0 => *last = posting,
                _ => kept.push(posting),
            }
        }
        TermRecords::from_sorted(&kept)
    }
}

/// [`TermRecords::iter`].
pub(crate) struct Iter<'a> {
    records: &'a TermRecords,
    block: usize,
    at: usize,
    previous: RecordId,
    left: u32,
}

impl Iterator for Iter<'_> {
    type Item = (RecordId, u64);

    fn next(&mut self) -> Option<(RecordId, u64)> {
        while self.left == 0 {
            self.block += 1;
            let block = self.records.blocks.get(self.block)?;
            self.at = 0;
            self.previous = block.first;
            self.left = block.count;
        }
        let block = self.records.blocks.get(self.block)?;
        let record = self.previous + get_varint(&block.bytes, &mut self.at);
        let score = get_varint(&block.bytes, &mut self.at) as usize;
        self.previous = record;
        self.left -= 1;
        Some((record, self.records.scores.get(score).copied().unwrap_or(0)))
    }
}

impl Postings for TermRecords {
    fn reader(&self) -> Box<dyn super::topk::PostingsReader + '_> {
        Box::new(TermRecords::reader(self))
    }

    fn in_record_order(&self) -> Box<dyn Iterator<Item = (RecordId, u64)> + '_> {
        Box::new(self.iter())
    }

    fn count(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use super::super::test_random::Random;

    fn same(records: &TermRecords, map: &BTreeMap<RecordId, u64>) {
        assert_eq!(records.len(), map.len());
        assert_eq!(
            records.iter().collect::<Vec<_>>(),
            map.iter().map(|(r, s)| (*r, *s)).collect::<Vec<_>>()
        );
        for record in 0..=map.keys().last().copied().unwrap_or(0) + 2 {
            assert_eq!(records.get(&record), map.get(&record), "record {record}");
        }
    }

    #[test]
    fn compact_postings_answer_every_write_and_read_as_a_map_does() {
        let mut rng = Random(0x9e37_79b9_7f4a_7c15);
        let mut map = BTreeMap::new();
        for _ in 0..600 {
            map.insert(1 + rng.below(5_000), 1 + rng.below(7));
        }
        let sorted: Vec<(RecordId, u64)> = map.iter().map(|(r, s)| (*r, *s)).collect();
        let mut records = TermRecords::from_sorted(&sorted);
        same(&records, &map);
        for step in 0..3_000 {
            let record = rng.below(6_000);
            if step % 3 == 0 {
                assert_eq!(records.remove(&record), map.remove(&record));
            } else {
                let bits = 1 + rng.below(9);
                assert_eq!(records.insert(record, bits), map.insert(record, bits));
            }
        }
        same(&records, &map);
        assert!(records.blocks.iter().all(|b| b.count as usize <= BLOCK_MAX));
        for record in map.keys().copied().collect::<Vec<_>>() {
            records.remove(&record);
        }
        assert!(records.is_empty());
        assert_eq!(records.iter().count(), 0);
        records.insert(7, 3);
        assert_eq!(records.iter().collect::<Vec<_>>(), vec![(7, 3)]);
    }

    #[test]
    fn postings_collected_in_any_order_keep_each_records_last_score() {
        let records: TermRecords = [(9, 1), (2, 5), (9, 4), (u64::MAX, 2)]
            .into_iter()
            .collect();
        assert_eq!(
            records.iter().collect::<Vec<_>>(),
            vec![(2, 5), (9, 4), (u64::MAX, 2)]
        );
        assert_eq!(records.get(&u64::MAX), Some(&2));
    }

    #[test]
    fn a_reader_answers_lookups_in_any_order_as_get_does() {
        let mut rng = Random(0x2545_f491_4f6c_dd1d);
        for _ in 0..50 {
            let mut map = BTreeMap::new();
            for _ in 0..rng.below(2_000) {
                map.insert(rng.below(20_000), 1 + rng.below(5));
            }
            let sorted: Vec<(RecordId, u64)> = map.iter().map(|(r, s)| (*r, *s)).collect();
            let records = TermRecords::from_sorted(&sorted);
            // In record order (what the reader is for), then at random, on one reader.
            let mut reader = records.reader();
            for record in 0..20_050 {
                assert_eq!(reader.get(record), map.get(&record).copied(), "{record}");
            }
            for _ in 0..5_000 {
                let record = rng.below(20_050);
                assert_eq!(reader.get(record), map.get(&record).copied(), "{record}");
            }
        }
        assert_eq!(TermRecords::default().reader().get(3), None);
    }

    #[test]
    fn a_dense_term_takes_a_few_bytes_a_posting() {
        let postings: Vec<(RecordId, u64)> = (0..100_000u64)
            .map(|r| (r * 3, (1.0 + (r % 5) as f64 / 4.0).to_bits()))
            .collect();
        let records = TermRecords::from_sorted(&postings);
        assert!(records.bytes() < postings.len() * 3, "{}", records.bytes());
    }
}
