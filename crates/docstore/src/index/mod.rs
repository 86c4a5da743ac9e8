//! Secondary indexes: ordered key → record structures over an order-preserving encoding of BSON
//! values, with unique, sparse and partial variants, multikey expansion and the query planner.

mod build;
mod entries;
mod postings;
pub(crate) use postings::TermRecords;
pub(crate) use topk::ImpactList;
pub(crate) mod hashed;
pub(crate) mod partial;
pub(crate) mod planner;
mod spec;
pub(crate) mod topk;

/// A small deterministic generator (xorshift) for the index tests' random postings, so
/// failures repeat.
#[cfg(test)]
mod test_random {
    pub(super) struct Random(pub(super) u64);

    impl Random {
        pub(super) fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }
}

pub(crate) use build::{build_all, on_threads};
pub(crate) use spec::IndexSpec;
use spec::{is_geo, is_hashed};

use crate::error::{Error, ErrorCode, Result};
use crate::keystring;
use crate::query::Filter;
use crate::storage::kept::KeptIndex;
use crate::stored::FieldTree;
use bson::{doc, Bson, Document};
use entries::Entries;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};

/// A document's position in its collection; also the natural (insertion) order.
pub(crate) type RecordId = u64;

/// Index entries as a scan yields them: each key with its record id.
pub(crate) type KeyedEntries<'a> = Box<dyn Iterator<Item = (&'a [u8], RecordId)> + 'a>;

/// Longest key stored without a separate allocation: ObjectIds, numbers, short strings, and
/// most compound keys of a string or number, a date and an `_id` (a type with the newest-first
/// order, a price with `_id`). A key on the heap costs an allocation and, for every comparison
/// while sorting or searching, a read of memory elsewhere: at 32-byte entries (22 inline)
/// building a million products' indexes took 3.3 s, at 48-byte entries 2.0 s.
const INLINE_KEY: usize = 38;
/// Bytes an index entry (key and record id) takes, before the tree's own overhead.
pub(crate) const ENTRY_BYTES: usize = 48;
/// From this many documents, [`build_all`] works out keys on several threads.
const PARALLEL_KEYS_MIN: usize = 20_000;

/// The machine's cores: how many threads a large index build uses.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// An encoded key as stored in an index: short keys live inside the entry itself, which
/// halves the memory of typical indexes (an entry is [`ENTRY_BYTES`] with its record id).
#[derive(Clone)]
pub(crate) enum KeyBytes {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl KeyBytes {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline { len, bytes } => &bytes[..*len as usize],
            KeyBytes::Heap(b) => b,
        }
    }
}

impl KeyBytes {
    /// The key `key`, keeping its allocation when it is too long to be inline.
    pub(crate) fn from_vec(key: Vec<u8>) -> KeyBytes {
        if key.len() <= INLINE_KEY {
            KeyBytes::from(key.as_slice())
        } else {
            KeyBytes::Heap(key.into_boxed_slice())
        }
    }
}

impl From<&[u8]> for KeyBytes {
    fn from(key: &[u8]) -> Self {
        if key.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..key.len()].copy_from_slice(key);
            KeyBytes::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            KeyBytes::Heap(key.into())
        }
    }
}

impl PartialEq for KeyBytes {
    /// Through [`KeyBytes::cmp`]: tuples of a key and a record id test equality before order,
    /// and inline keys compare as words.
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for KeyBytes {}

impl PartialOrd for KeyBytes {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KeyBytes {
    /// Byte order. Two inline keys (almost every key) are compared as big-endian words and
    /// then their lengths, which is the same order since the bytes past `len` are zero:
    /// sorting and searching an index is mostly this comparison, and a `memcmp` call per
    /// comparison was most of building the indexes at start-up.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (
                KeyBytes::Inline { len, bytes },
                KeyBytes::Inline {
                    len: other_len,
                    bytes: other_bytes,
                },
            ) => inline_words(bytes)
                .cmp(&inline_words(other_bytes))
                .then(len.cmp(other_len)),
            _ => self.as_slice().cmp(other.as_slice()),
        }
    }
}

/// Words an inline key is compared as.
const INLINE_WORDS: usize = INLINE_KEY.div_ceil(8);

/// An inline key's bytes as big-endian words (the last one zero-padded), ordered as the bytes.
fn inline_words(bytes: &[u8; INLINE_KEY]) -> [u64; INLINE_WORDS] {
    let mut padded = [0u8; INLINE_WORDS * 8];
    padded[..INLINE_KEY].copy_from_slice(bytes);
    std::array::from_fn(|i| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&padded[i * 8..i * 8 + 8]);
        u64::from_be_bytes(word)
    })
}

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02x?}", self.as_slice())
    }
}

/// Buffers an index build encodes each document's keys in (see [`Index::append_keys`]), kept
/// from one document to the next.
#[derive(Default)]
pub(crate) struct KeyScratch {
    /// The key's fields other than an array's.
    fixed: Vec<u8>,
    /// One key with an array element's part.
    one: Vec<u8>,
}

/// One indexed path and its direction.
#[derive(Debug, Clone)]
struct KeyField {
    path: String,
    descending: bool,
    /// A hashed field (`"hashed"`): the key holds the value's 64-bit hash.
    hashed: bool,
    /// A geospatial field (`"2dsphere"`, `"2d"`): its key part is [`GEO_KEY`] for every
    /// document that has a valid location there (see [`Index::keys_for`]).
    geo: Option<crate::geospatial::IndexKind>,
}

/// The key part of a geospatial field. The index holds no cells: it records which documents
/// have a location (geo indexes leave the others out) and checks every location on the way
/// in; a geo query reads all of its entries and tests each document's geometry.
static GEO_KEY: Bson = Bson::Int32(0);

/// One index's entries.
#[derive(Debug)]
pub(crate) struct Index {
    pub spec: IndexSpec,
    fields: Vec<KeyField>,
    partial: Option<Filter>,
    /// Entries ordered by key, then record id (postings for a text index, see [`entries`]).
    entries: Entries,
    /// Set once any document had an array on an indexed path (never cleared, like MongoDB).
    multikey: AtomicBool,
    /// Which key fields' paths met an array (bit `i` for field `i`, see [`field_bit`]): like
    /// MongoDB's `multikeyPaths`, what tells a key field holding each document's one value
    /// from one holding an array's elements.
    multikey_fields: AtomicU64,
    /// For a text index: its definition (keys are then prefix values plus one term).
    text: Option<std::sync::Arc<crate::text::TextIndex>>,
    /// The paths keys are made from (the key paths, and the partial filter's top-level fields
    /// whole), or `None` when any field may count (text indexes).
    reads: Option<Vec<String>>,
    /// `reads` as a tree, to decode a stored document only that far.
    read_tree: Option<FieldTree>,
    /// Still being built in the background (see `collection::background`): it holds no
    /// entries, writes give it no keys, and queries cannot use it.
    building: bool,
}

impl Clone for Index {
    fn clone(&self) -> Self {
        Index {
            spec: self.spec.clone(),
            fields: self.fields.clone(),
            partial: self.partial.clone(),
            entries: self.entries.clone(),
            multikey: AtomicBool::new(self.is_multikey()),
            multikey_fields: AtomicU64::new(self.multikey_fields.load(AtomicOrdering::Relaxed)),
            text: self.text.clone(),
            reads: self.reads.clone(),
            read_tree: self.read_tree.clone(),
            building: self.building,
        }
    }
}

/// A value a key field takes for one key.
#[derive(Debug, Clone, Copy)]
enum Slot<'a> {
    /// The path does not exist: indexed as null, and "not found" for sparse indexes.
    Missing,
    /// An empty array at the end of the path.
    EmptyArray,
    Value(&'a Bson),
}

/// What walking a dotted path up to the first array finds.
enum Extracted<'a> {
    Missing,
    Value(&'a Bson),
    /// An array that must be expanded: the array, its field name, and the rest of the path.
    Array(&'a [Bson], &'a str, &'a str),
}

/// Whether one dotted path equals the other or lies inside it (`a.b` and `a`, not `ab`).
fn paths_overlap(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long.starts_with(short) && (long.len() == short.len() || long.as_bytes()[short.len()] == b'.')
}

/// The keys in `old` but not in `new`, and those in `new` but not in `old` (both as
/// [`Index::keys_for`] gives them: sorted, distinct): what an update must remove from and add
/// to an index, leaving the keys both versions share alone.
pub(crate) fn key_difference(old: Vec<Vec<u8>>, new: Vec<Vec<u8>>) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut old, mut new) = (old, new);
    for keys in [&mut old, &mut new] {
        if !keys.windows(2).all(|w| w[0] < w[1]) {
            keys.sort_unstable();
            keys.dedup();
        }
    }
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let mut old = old.into_iter().peekable();
    let mut new = new.into_iter().peekable();
    loop {
        match (old.peek(), new.peek()) {
            (Some(o), Some(n)) => match o.cmp(n) {
                Ordering::Less => removed.extend(old.next()),
                Ordering::Greater => added.extend(new.next()),
                Ordering::Equal => {
                    old.next();
                    new.next();
                }
            },
            (Some(_), None) => removed.extend(old.next()),
            (None, Some(_)) => added.extend(new.next()),
            (None, None) => return (removed, added),
        }
    }
}

fn split_path(path: &str) -> (&str, &str) {
    // A byte scan: paths are short, and this runs for every key of every document.
    match path.bytes().position(|b| b == b'.') {
        Some(dot) => (&path[..dot], &path[dot + 1..]),
        None => (path, ""),
    }
}

fn positional(component: &str) -> Option<usize> {
    if component.is_empty() || !component.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    component.parse().ok()
}

/// Walk `path` inside `obj`, stopping at the first array that needs expanding. A numeric
/// component after an array selects that element (positional paths such as `a.0.b`).
fn extract<'a>(obj: Option<&'a Document>, path: &'a str) -> Extracted<'a> {
    let Some(doc) = obj else {
        return Extracted::Missing;
    };
    let (head, tail) = split_path(path);
    let Some(mut current) = doc.get(head) else {
        return Extracted::Missing;
    };
    let mut name = head;
    let mut rest = tail;
    loop {
        match current {
            Bson::Array(items) => {
                let (next, after) = split_path(rest);
                match positional(next) {
                    Some(i) if !rest.is_empty() => match items.get(i) {
                        Some(item) => {
                            current = item;
                            name = next;
                            rest = after;
                        }
                        None => return Extracted::Missing,
                    },
                    _ => return Extracted::Array(items, name, rest),
                }
            }
            v if rest.is_empty() => return Extracted::Value(v),
            Bson::Document(d) => {
                let (next, after) = split_path(rest);
                match d.get(next) {
                    Some(v) => {
                        current = v;
                        name = next;
                        rest = after;
                    }
                    None => return Extracted::Missing,
                }
            }
            _ => return Extracted::Missing,
        }
    }
}

impl Index {
    pub(crate) fn new(spec: IndexSpec) -> Result<Index> {
        let text = match &spec.text {
            Some(options) => Some(std::sync::Arc::new(crate::text::TextIndex::new(
                &spec.key, options,
            )?)),
            None => None,
        };
        let mut fields = Vec::with_capacity(spec.key.len());
        for (path, direction) in &spec.key {
            if text.is_some() && (path == "_fts" || path == "_ftsx") {
                continue;
            }
            if is_hashed(direction) {
                fields.push(KeyField {
                    path: path.clone(),
                    descending: false,
                    hashed: true,
                    geo: None,
                });
                continue;
            }
            if is_geo(direction) {
                let bound = |name: &str, default: f64| {
                    spec.kept_options
                        .get(name)
                        .and_then(crate::value::to_f64)
                        .unwrap_or(default)
                };
                fields.push(KeyField {
                    path: path.clone(),
                    descending: false,
                    hashed: false,
                    geo: crate::geospatial::IndexKind::of(
                        direction,
                        bound("min", -180.0),
                        bound("max", 180.0),
                    ),
                });
                continue;
            }
            let Some(n) = crate::value::to_f64(direction) else {
                return Err(Error::not_supported(format!(
                    "{} indexes",
                    keystring::render(direction)
                )));
            };
            fields.push(KeyField {
                path: path.clone(),
                descending: n < 0.0,
                hashed: false,
                geo: None,
            });
        }
        let partial = match &spec.partial_filter {
            Some(filter) => Some(Filter::parse(filter)?),
            None => None,
        };
        let reads = {
            let mut reads = match &partial {
                Some(filter) => filter.top_level_fields(),
                None => Some(Vec::new()),
            };
            let heads: Option<Vec<String>> = match &text {
                Some(text) => text.top_level_fields(),
                None => Some(fields.iter().map(|f| f.path.clone()).collect()),
            };
            match (&mut reads, heads) {
                (Some(reads), Some(heads)) => {
                    for head in heads {
                        if !reads.contains(&head) {
                            reads.push(head);
                        }
                    }
                }
                _ => reads = None,
            }
            reads
        };
        Ok(Index {
            spec,
            fields,
            partial,
            entries: Entries::new(text.is_some()),
            multikey: AtomicBool::new(false),
            multikey_fields: AtomicU64::new(0),
            text,
            read_tree: reads
                .as_ref()
                .map(|paths| FieldTree::from_paths(paths.iter().map(String::as_str))),
            reads,
            building: false,
        })
    }

    /// The geospatial fields of the key pattern (`2dsphere`, `2d`), in order.
    pub(crate) fn geo_fields(&self) -> impl Iterator<Item = (&str, crate::geospatial::IndexKind)> {
        self.fields
            .iter()
            .filter_map(|f| f.geo.map(|kind| (f.path.as_str(), kind)))
    }

    /// Whether this is a geospatial index (only geo queries and hints use it: like a sparse
    /// index it leaves out documents without a location).
    pub(crate) fn is_geo(&self) -> bool {
        self.fields.iter().any(|f| f.geo.is_some())
    }

    /// The text index definition, for a text index.
    pub(crate) fn text(&self) -> Option<&crate::text::TextIndex> {
        self.text.as_deref()
    }

    /// Records holding `term` under the given equality prefix values, each with the term's
    /// score in it (text indexes: see [`crate::text::TextIndex::scored_key`]).
    pub(crate) fn text_scores(&self, prefix: &[&Bson], term: &str) -> Vec<(RecordId, f64)> {
        let term_key = crate::text::TextIndex::key(prefix, term);
        self.entries.postings(&term_key)
    }

    /// A text index's postings of `term` under the given equality prefix values: record →
    /// score bits (`Some(None)`: no document holds it; `None`: the index holds pairs, see
    /// [`Index::text_scores`]).
    pub(crate) fn text_records(
        &self,
        prefix: &[&Bson],
        term: &str,
    ) -> Option<Option<&postings::TermRecords>> {
        let term_key = crate::text::TextIndex::key(prefix, term);
        self.entries.term_records(&term_key)
    }

    /// The same postings by score, descending (made on first use and kept until a write
    /// changes the term).
    pub(crate) fn text_by_score(&self, prefix: &[&Bson], term: &str) -> Option<ImpactList> {
        let term_key = crate::text::TextIndex::key(prefix, term);
        self.entries.term_by_score(&term_key)
    }

    /// Every record in key order (reversed when `reverse`), read lazily.
    pub(crate) fn records_in_key_order(
        &self,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = RecordId> + '_> {
        self.entries.range(
            (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
            reverse,
        )
    }

    /// A TTL index the monitor sweeps: `expireAfterSeconds` on a single field.
    pub(crate) fn is_ttl(&self) -> bool {
        self.spec.expire_after_seconds.is_some() && self.fields.len() == 1
    }

    /// Records whose indexed date (the earliest, for an array of dates) plus
    /// `expireAfterSeconds` is at or before `now`, as mongod's TTL monitor selects them: a scan
    /// of the index's date keys. Other types and missing fields never expire.
    pub(crate) fn expired_records(&self, now: bson::DateTime) -> Vec<RecordId> {
        let Some(secs) = self.spec.expire_after_seconds.filter(|_| self.is_ttl()) else {
            return Vec::new();
        };
        let cutoff = bson::DateTime::from_millis(
            now.timestamp_millis()
                .saturating_sub(secs.saturating_mul(1000)),
        );
        let bounds = planner::dates_up_to(self, cutoff);
        self.scan(&bounds, false).collect()
    }

    /// Whether an update that changed only the paths `touched` (see
    /// [`crate::update::UpdateSpec::touched_paths`]) can change this index's keys: whether
    /// some path the keys are made from (key fields, partial filter fields, text fields) lies
    /// on, above or below one of them. A wildcard text index reads every field.
    pub(crate) fn reads_any_of(&self, touched: &[String]) -> bool {
        match &self.reads {
            None => true,
            Some(reads) => reads
                .iter()
                .any(|read| touched.iter().any(|t| paths_overlap(read, t))),
        }
    }

    /// Field paths of the key pattern, in order, with `true` for descending fields.
    pub(crate) fn key_fields(&self) -> impl Iterator<Item = (&str, bool)> {
        self.fields.iter().map(|f| (f.path.as_str(), f.descending))
    }

    /// [`Index::keys_for`] of a stored document, decoding only the fields the keys read.
    pub(crate) fn keys_for_stored(&self, doc: &crate::stored::StoredDoc) -> Result<Vec<Vec<u8>>> {
        if let Some(keys) = self.top_level_keys(doc)? {
            return Ok(keys);
        }
        match &self.read_tree {
            Some(tree) => {
                let mut selected = Document::new();
                doc.select_tree_into(tree, &mut selected)?;
                self.keys_for(&selected)
            }
            None => self.keys_for(&doc.to_document()?),
        }
    }

    /// [`Index::keys_for_stored`] of a plain index (no partial filter, text, hashed or geo
    /// field, not being built) whose fields are all top-level names, which most indexes are:
    /// the values read straight from the stored bytes ([`StoredDoc::top_level_values`]) and
    /// encoded as [`Index::keys_for`] encodes them (null for a missing field; no key for a
    /// sparse index missing them all), with no [`Document`] of the fields built in between (a
    /// batch of small inserts, the traffic log's events, spent more on those documents than on
    /// the index entries). `None` for any other index, or when a field holds an array (the
    /// general way then makes one key per element and marks the index multikey).
    ///
    /// [`StoredDoc::top_level_values`]: crate::stored::StoredDoc::top_level_values
    fn top_level_keys(&self, doc: &crate::stored::StoredDoc) -> Result<Option<Vec<Vec<u8>>>> {
        let plain = !self.building
            && self.partial.is_none()
            && self.text.is_none()
            && self
                .fields
                .iter()
                .all(|f| !f.hashed && f.geo.is_none() && !f.path.contains('.'));
        if !plain {
            return Ok(None);
        }
        let slot = |key: &[u8]| self.fields.iter().position(|f| f.path.as_bytes() == key);
        let Some(values) = doc.top_level_values(self.fields.len(), slot)? else {
            return Ok(None);
        };
        if self.spec.sparse && values.iter().all(Option::is_none) {
            return Ok(Some(Vec::new()));
        }
        let mut key = Vec::with_capacity(16 * self.fields.len());
        for (field, value) in self.fields.iter().zip(&values) {
            self.encode_key_part(field, value.as_ref().unwrap_or(&Bson::Null), &mut key);
        }
        Ok(Some(vec![key]))
    }

    /// Encoded keys a document contributes (several for multikey; none when sparse/partial
    /// excludes it, or while the index is being built in the background, since the build keys
    /// every document changed meanwhile when it finishes). Errors on parallel arrays in a
    /// compound key (code 171).
    pub(crate) fn keys_for(&self, doc: &Document) -> Result<Vec<Vec<u8>>> {
        self.keys_for_with(doc, &mut crate::text::TermCache::disabled())
    }

    /// [`Index::keys_for`], with the terms a text index's words become remembered in `terms`
    /// (building over many documents: most words come again and again).
    pub(crate) fn keys_for_with(
        &self,
        doc: &Document,
        terms: &mut crate::text::TermCache,
    ) -> Result<Vec<Vec<u8>>> {
        if self.building {
            return Ok(Vec::new());
        }
        if let Some(filter) = &self.partial {
            // The filter compares under the index's collation, whatever command writes.
            let _collation = crate::collation::enter(self.spec.collation.clone());
            if !filter.matches(doc) {
                return Ok(Vec::new());
            }
        }
        for field in self.fields.iter().filter(|f| f.hashed) {
            if let Extracted::Array(..) = extract(Some(doc), &field.path) {
                return Err(Error::location(
                    16766,
                    format!(
                        "Error: hashed indexes do not currently support array values. Found \
                         array at path: {}",
                        field.path
                    ),
                ));
            }
        }
        if let Some(text) = &self.text {
            return text.keys_for_with(doc, terms);
        }
        if self.is_geo() && !self.has_location(doc)? {
            return Ok(Vec::new());
        }
        let mut paths: Vec<Option<&str>> = self
            .fields
            .iter()
            .map(|f| f.geo.is_none().then_some(&*f.path))
            .collect();
        let mut fixed: Vec<Slot> = self
            .fields
            .iter()
            .map(|f| match f.geo {
                Some(_) => Slot::Value(&GEO_KEY),
                None => Slot::Missing,
            })
            .collect();
        let mut tuples = Vec::new();
        let mut array_fields = 0;
        generate(
            &mut paths,
            &mut fixed,
            Some(doc),
            &mut tuples,
            &mut array_fields,
        )?;
        if array_fields != 0 {
            self.note_arrays(array_fields);
        }
        // Sorted and distinct, as a set would give them (most documents have one key).
        let mut keys = Vec::with_capacity(tuples.len());
        for tuple in tuples {
            let found = tuple.iter().any(|s| !matches!(s, Slot::Missing));
            if self.spec.sparse && !found {
                continue;
            }
            let mut key = Vec::with_capacity(16 * self.fields.len());
            for (slot, field) in tuple.iter().zip(&self.fields) {
                let keyed;
                let value = match slot {
                    Slot::Missing => &Bson::Null,
                    Slot::EmptyArray => &Bson::Undefined,
                    Slot::Value(v) => match &self.spec.collation {
                        Some(c) => {
                            keyed = c.key_value(v);
                            &keyed
                        }
                        None => *v,
                    },
                };
                if field.hashed {
                    keystring::encode_value(&Bson::Int64(hashed::hash_value(value)), &mut key);
                } else if field.descending {
                    keystring::encode_value_descending(value, &mut key);
                } else {
                    keystring::encode_value(value, &mut key);
                }
            }
            keys.push(key);
        }
        if keys.len() > 1 {
            keys.sort_unstable();
            keys.dedup();
        }
        Ok(keys)
    }

    /// [`Index::keys_for_with`] of `doc`, each key appended to `out` with `rid`, in any order
    /// and possibly more than once (an index build sorts its entries and drops repeats): what
    /// building an index over many documents does for each of them. A plain index (no partial
    /// filter, text, hashed or geo field), which is most indexes, has its keys encoded in
    /// `scratch` and stored inline without the vectors [`Index::keys_for_with`] allocates for
    /// the general case (start-up at a million documents made a hundred million of them), unless
    /// the document has more than one array on the index's paths or an array inside the path;
    /// anything else goes the general way, so the keys are the same either way.
    pub(crate) fn append_keys(
        &self,
        doc: &Document,
        rid: RecordId,
        terms: &mut crate::text::TermCache,
        scratch: &mut KeyScratch,
        out: &mut Vec<(KeyBytes, RecordId)>,
    ) -> Result<()> {
        let plain = !self.building
            && self.partial.is_none()
            && self.text.is_none()
            && self.fields.iter().all(|f| !f.hashed && f.geo.is_none());
        if plain && self.plain_keys(doc, scratch, |key| out.push((KeyBytes::from(key), rid))) {
            return Ok(());
        }
        let keys = self.keys_for_with(doc, terms)?;
        out.extend(keys.into_iter().map(|k| (KeyBytes::from_vec(k), rid)));
        Ok(())
    }

    /// A plain index's keys of `doc`, each given to `key` (a repeated array element gives its
    /// key again), as [`generate`] makes them when at most one field's path ends at an array
    /// and no path meets an array before its end: a key is the fields' encodings one after
    /// another, so the other fields are encoded once and each element's encoding is put
    /// between them. `false`, having given nothing, for any other document.
    fn plain_keys(
        &self,
        doc: &Document,
        scratch: &mut KeyScratch,
        mut key: impl FnMut(&[u8]),
    ) -> bool {
        let KeyScratch { fixed, one } = scratch;
        fixed.clear();
        // The array field: its place among the fields, its elements, and where its encoding
        // goes in `fixed`.
        let mut array: Option<(usize, &[Bson], usize)> = None;
        let mut found = false;
        for (i, field) in self.fields.iter().enumerate() {
            let value = match extract(Some(doc), &field.path) {
                Extracted::Array(items, _, "") if array.is_none() => {
                    array = Some((i, items, fixed.len()));
                    continue;
                }
                Extracted::Array(..) => return false,
                Extracted::Missing => &Bson::Null,
                Extracted::Value(v) => {
                    found = true;
                    v
                }
            };
            self.encode_key_part(field, value, fixed);
        }
        let Some((i, items, at)) = array else {
            if found || !self.spec.sparse {
                key(fixed);
            }
            return true;
        };
        self.note_arrays(field_bit(i));
        let field = &self.fields[i];
        let mut one_key = |value: &Bson| {
            one.clear();
            one.extend_from_slice(&fixed[..at]);
            self.encode_key_part(field, value, one);
            one.extend_from_slice(&fixed[at..]);
            key(one);
        };
        if items.is_empty() {
            // An empty array at the end of the path is indexed as undefined.
            one_key(&Bson::Undefined);
        }
        for item in items {
            one_key(item);
        }
        true
    }

    /// Append one plain field's part of a key for `value` (a value found at its path, or null
    /// or undefined standing for none), under the index's collation.
    fn encode_key_part(&self, field: &KeyField, value: &Bson, key: &mut Vec<u8>) {
        let keyed;
        let value = match (&self.spec.collation, value) {
            (Some(c), v) if !matches!(v, Bson::Null | Bson::Undefined) => {
                keyed = c.key_value(v);
                &keyed
            }
            _ => value,
        };
        if field.descending {
            keystring::encode_value_descending(value, key);
        } else {
            keystring::encode_value(value, key);
        }
    }

    /// Whether `doc` has a location at a geo field (geo indexes leave out documents without
    /// one); mongod's error when a location there is malformed (16755 for `2dsphere`, 13026
    /// and 13027 for `2d`).
    fn has_location(&self, doc: &Document) -> Result<bool> {
        let mut found = false;
        for (path, kind) in self.geo_fields() {
            let values =
                crate::path::collect_path_values(doc, path, crate::path::LeafArrays::NoTraversal);
            match crate::geospatial::index_locations(&values, kind) {
                Ok(locations) => found |= !locations.is_empty(),
                Err(refusal) => {
                    let (code, message) = refusal.code_and_message(doc);
                    return Err(Error::location(code, message));
                }
            }
        }
        Ok(found)
    }

    fn descending_flags(&self) -> Vec<bool> {
        self.fields.iter().map(|f| f.descending).collect()
    }

    /// Duplicate-key check before inserting `keys` for record `rid` (E11000 error with
    /// `keyPattern`/`keyValue`; `ns` is `db.collection` for the message).
    pub(crate) fn check_unique(&self, keys: &[Vec<u8>], rid: RecordId, ns: &str) -> Result<()> {
        if !self.spec.unique {
            return Ok(());
        }
        for key in keys {
            if self.records_with_key(key).any(|other| other != rid) {
                return Err(self.duplicate_key_error(key, ns));
            }
        }
        Ok(())
    }

    /// Put back the multikey flag as it was before keys were worked out for documents that were
    /// then not inserted after all.
    pub(crate) fn reset_multikey(&self, was: bool) {
        if !was {
            self.multikey.store(false, AtomicOrdering::Relaxed);
            self.multikey_fields.store(0, AtomicOrdering::Relaxed);
        }
    }

    /// Whether any stored document has this key.
    pub(crate) fn has_key(&self, key: &[u8]) -> bool {
        self.records_with_key(key).next().is_some()
    }

    fn records_with_key<'a>(&'a self, key: &[u8]) -> impl Iterator<Item = RecordId> + 'a {
        self.entries.records_with_key(key)
    }

    fn duplicate_key_error(&self, key: &[u8], ns: &str) -> Error {
        let values = keystring::decode_key(key, &self.descending_flags())
            .unwrap_or_else(|| vec![Bson::Null; self.fields.len()]);
        let mut key_value = Document::new();
        for (field, value) in self.fields.iter().zip(values) {
            key_value.insert(field.path.clone(), value);
        }
        Error::new(
            ErrorCode::DuplicateKey,
            format!(
                "E11000 duplicate key error collection: {ns} index: {} dup key: {}",
                self.spec.name,
                keystring::render_document(&key_value)
            ),
        )
        .with_extra(doc! { "keyPattern": self.spec.key.clone(), "keyValue": key_value })
    }

    pub(crate) fn insert(&mut self, keys: &[Vec<u8>], rid: RecordId) {
        for key in keys {
            self.entries.insert(key, rid);
        }
    }

    /// The end of a bulk build: an empty index's entries from every document's (key, record)
    /// pairs, in any order. Fails, leaving the index empty, as [`Index::check_unique`] would on
    /// the first duplicate of a unique index.
    pub(crate) fn finish_build(
        &mut self,
        mut entries: Vec<(KeyBytes, RecordId)>,
        ns: &str,
    ) -> Result<()> {
        entries.sort_unstable();
        entries.dedup();
        if self.spec.unique {
            if let Some(pair) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(self.duplicate_key_error(pair[1].0.as_slice(), ns));
            }
        }
        self.entries = Entries::from_sorted(self.text.is_some(), entries);
        Ok(())
    }

    pub(crate) fn remove(&mut self, keys: &[Vec<u8>], rid: RecordId) {
        for key in keys {
            self.entries.remove(key, rid);
        }
    }

    /// Record ids whose keys fall within `bounds`, in key order (reversed when `reverse`),
    /// each at most once.
    pub(crate) fn scan<'a>(
        &'a self,
        bounds: &'a planner::IndexBounds,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = RecordId> + 'a> {
        let ranges: Vec<_> = bounds
            .ranges
            .iter()
            .filter_map(|r| r.btree_range())
            .collect();
        // One range over a single-key-per-document index cannot repeat a record.
        let dedupe = self.is_multikey() || ranges.len() > 1;
        let entries = &self.entries;
        let ids: Box<dyn Iterator<Item = RecordId> + 'a> = if reverse {
            Box::new(
                ranges
                    .into_iter()
                    .rev()
                    .flat_map(move |r| entries.range(r, true)),
            )
        } else {
            Box::new(
                ranges
                    .into_iter()
                    .flat_map(move |r| entries.range(r, false)),
            )
        };
        if dedupe {
            let mut seen = HashSet::new();
            Box::new(ids.filter(move |rid| seen.insert(*rid)))
        } else {
            ids
        }
    }

    /// Like [`Index::scan`], each record with the key it is first met at; `None` for a text
    /// index, whose entries are postings.
    pub(crate) fn scan_keys<'a>(
        &'a self,
        bounds: &'a planner::IndexBounds,
        reverse: bool,
    ) -> Option<KeyedEntries<'a>> {
        if self.text.is_some() {
            return None;
        }
        let mut ranges = Vec::with_capacity(bounds.ranges.len());
        for range in bounds.ranges.iter().filter_map(|r| r.btree_range()) {
            ranges.push(self.entries.range_with_keys(range, reverse)?);
        }
        if reverse {
            ranges.reverse();
        }
        // As in `scan`: one range over a single-key-per-document index cannot repeat a record.
        let dedupe = self.is_multikey() || ranges.len() > 1;
        let entries = ranges.into_iter().flatten();
        Some(if dedupe {
            let mut seen = HashSet::new();
            Box::new(entries.filter(move |(_, rid)| seen.insert(*rid)))
        } else {
            Box::new(entries)
        })
    }

    /// Record ids of the documents whose key equals `values` (one value per key field; for the
    /// `_id_` index, the `_id`).
    pub(crate) fn lookup_exact(&self, values: &[Bson]) -> Vec<RecordId> {
        if values.len() != self.fields.len() {
            return Vec::new();
        }
        let key = self.encode_values(values);
        self.records_with_key(&key).collect()
    }

    /// The key `returnKey` shows for a document: its first key (the least, for a multikey
    /// document), one field per key pattern field; empty when the index holds no key for it.
    pub(crate) fn key_document(&self, doc: &Document) -> Result<Document> {
        let mut out = Document::new();
        let keys = self.keys_for(doc)?;
        if let Some(first) = keys.first() {
            out = self.key_to_document(first);
        }
        Ok(out)
    }

    /// An encoded key of this index as a document, field by field (empty if it does not
    /// decode).
    pub(crate) fn key_to_document(&self, key: &[u8]) -> Document {
        let mut out = Document::new();
        if let Some(values) = keystring::decode_key(key, &self.descending_flags()) {
            for (field, value) in self.fields.iter().zip(values) {
                out.insert(field.path.clone(), value);
            }
        }
        out
    }

    /// The encoded key of one value per key field, as `find`'s `min`/`max` give a bound (a
    /// hashed field's bound is given as a hash already).
    pub(crate) fn encode_values(&self, values: &[Bson]) -> Vec<u8> {
        let mut key = Vec::new();
        for (value, field) in values.iter().zip(&self.fields) {
            let keyed;
            let value = match &self.spec.collation {
                Some(c) => {
                    keyed = c.key_value(value);
                    &keyed
                }
                None => value,
            };
            if field.descending {
                keystring::encode_value_descending(value, &mut key);
            } else {
                keystring::encode_value(value, &mut key);
            }
        }
        key
    }

    /// Whether the index holds the entry `key` → `rid` (for `validate`).
    pub(crate) fn has_entry(&self, key: &[u8], rid: RecordId) -> bool {
        self.entries.contains(key, rid)
    }

    /// What a snapshot keeps of this index (see `storage::kept`): its definition, multikey
    /// flags and (key, record id) entries in order, each record id as `renumber` gives it (the
    /// document's position in the snapshot); `None` for a text index (kept as postings, rebuilt
    /// at start-up instead), one still being built, and when `renumber` does not know a record.
    /// `renumber` must keep the record ids' order, so that the entries stay in order.
    pub(crate) fn to_kept(
        &self,
        renumber: impl Fn(RecordId) -> Option<RecordId>,
    ) -> Option<KeptIndex> {
        if self.building {
            return None;
        }
        let set = self.entries.pairs()?;
        let unknown = std::cell::Cell::new(false);
        let kept = KeptIndex::new(
            self.spec.to_document(),
            self.is_multikey(),
            self.multikey_fields.load(AtomicOrdering::Relaxed),
            set.len() as u64,
            set.iter().map(|(k, rid)| {
                let position = renumber(*rid).unwrap_or_else(|| {
                    unknown.set(true);
                    0
                });
                (k.as_slice(), position)
            }),
        );
        (!unknown.get()).then_some(kept)
    }

    /// Which key fields' paths met an array (bit `i` for field `i`), as a snapshot keeps it.
    #[cfg(test)]
    pub(crate) fn multikey_fields(&self) -> u64 {
        self.multikey_fields.load(AtomicOrdering::Relaxed)
    }

    /// An index for `spec` holding the entries a snapshot kept (`kept`, over a collection of
    /// `records` documents) and its multikey flags, instead of keying every document. `None`
    /// for a text index (its entries are postings) and when the entries are malformed, out of
    /// order or break a unique index: the caller builds the index then.
    pub(crate) fn from_kept(spec: IndexSpec, kept: &KeptIndex, records: u64) -> Option<Index> {
        let mut index = Index::new(spec).ok()?;
        if index.text.is_some() {
            return None;
        }
        let mut entries: Vec<(KeyBytes, RecordId)> =
            Vec::with_capacity(usize::try_from(kept.len()).ok()?.min(records as usize * 64));
        let unique = index.spec.unique;
        let mut in_order = true;
        let well_formed = kept.decode(records, |key, rid| {
            if let Some((last, last_rid)) = entries.last() {
                let last = last.as_slice();
                in_order &= if unique {
                    last < key
                } else {
                    (last, *last_rid) < (key, rid)
                };
            }
            entries.push((KeyBytes::from(key), rid));
        });
        if !well_formed || !in_order {
            return None;
        }
        index.entries = Entries::from_sorted(false, entries);
        index.multikey.store(kept.multikey, AtomicOrdering::Relaxed);
        index
            .multikey_fields
            .store(kept.multikey_fields, AtomicOrdering::Relaxed);
        Some(index)
    }

    /// Every (key, record id) entry, in key order (for `validate`).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (Vec<u8>, RecordId)> + '_ {
        self.entries.all()
    }

    /// Bytes the entries take, before the trees' own overhead.
    pub(crate) fn entry_bytes(&self) -> usize {
        self.entries.bytes()
    }

    pub(crate) fn entry_count(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_multikey(&self) -> bool {
        self.multikey.load(AtomicOrdering::Relaxed)
    }

    /// Whether key field `i`'s path met an array in some document (its keys then hold array
    /// elements; the index's other fields still hold each document's one value).
    pub(crate) fn is_multikey_field(&self, i: usize) -> bool {
        self.multikey_fields.load(AtomicOrdering::Relaxed) & field_bit(i) != 0
    }

    /// Record that a document had arrays on the paths of the key fields in `fields` (bits).
    fn note_arrays(&self, fields: u64) {
        self.multikey.store(true, AtomicOrdering::Relaxed);
        self.multikey_fields
            .fetch_or(fields, AtomicOrdering::Relaxed);
    }

    /// Whether the index is still being built in the background after start-up.
    pub(crate) fn is_building(&self) -> bool {
        self.building
    }

    /// An empty stand-in for `spec`'s index while it is built in the background.
    pub(crate) fn new_building(spec: IndexSpec) -> Result<Index> {
        let mut index = Index::new(spec)?;
        index.building = true;
        Ok(index)
    }
}

/// Key field `i`'s bit in [`Index::is_multikey_field`]'s set (fields past the 64th share the
/// last bit: an index has at most 32 fields).
fn field_bit(i: usize) -> u64 {
    1 << i.min(63)
}

/// MongoDB's key generation: resolve every pending path up to its first array; at most one
/// distinct array may be expanded per level (otherwise the arrays are "parallel"), and each of
/// its elements continues the paths that reached it.
fn generate<'a>(
    paths: &mut [Option<&'a str>],
    fixed: &mut [Slot<'a>],
    obj: Option<&'a Document>,
    out: &mut Vec<Vec<Slot<'a>>>,
    array_fields: &mut u64,
) -> Result<()> {
    let mut array: Option<(&'a [Bson], &'a str)> = None;
    let mut expanding = Vec::new();
    for i in 0..paths.len() {
        let Some(path) = paths[i] else { continue };
        match extract(obj, path) {
            Extracted::Missing => {
                fixed[i] = Slot::Missing;
                paths[i] = None;
            }
            Extracted::Value(v) => {
                fixed[i] = Slot::Value(v);
                paths[i] = None;
            }
            Extracted::Array(items, name, rest) => {
                match array {
                    Some((existing, existing_name)) if !std::ptr::eq(existing, items) => {
                        return Err(Error::new(
                            ErrorCode::CannotIndexParallelArrays,
                            format!("cannot index parallel arrays [{name}] [{existing_name}]"),
                        ));
                    }
                    Some(_) => {}
                    None => array = Some((items, name)),
                }
                expanding.push(i);
                paths[i] = Some(rest);
            }
        }
    }
    let Some((items, _)) = array else {
        out.push(fixed.to_vec());
        return Ok(());
    };
    for &i in &expanding {
        *array_fields |= field_bit(i);
    }
    // An empty array contributes one key: undefined where it ends the path, null beyond.
    let elements: Vec<Option<&'a Bson>> = if items.is_empty() {
        vec![None]
    } else {
        items.iter().map(Some).collect()
    };
    for element in elements {
        let mut sub_paths = paths.to_vec();
        let mut sub_fixed = fixed.to_vec();
        for &i in &expanding {
            if sub_paths[i] == Some("") {
                sub_fixed[i] = match element {
                    Some(v) => Slot::Value(v),
                    None => Slot::EmptyArray,
                };
                sub_paths[i] = None;
            }
        }
        let next = match element {
            Some(Bson::Document(d)) => Some(d),
            _ => None,
        };
        generate(&mut sub_paths, &mut sub_fixed, next, out, array_fields)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;

    fn index(spec: Document) -> Index {
        Index::new(IndexSpec::parse(&spec).expect("valid spec")).expect("index builds")
    }

    fn decoded_keys(idx: &Index, d: &Document) -> Vec<Vec<Bson>> {
        idx.keys_for(d)
            .expect("keys")
            .iter()
            .map(|k| keystring::decode_key(k, &idx.descending_flags()).expect("decodes"))
            .collect()
    }

    fn ints(values: &[i32]) -> Vec<Vec<Bson>> {
        values.iter().map(|v| vec![Bson::Int32(*v)]).collect()
    }

    #[test]
    fn spec_parse_reads_options_and_lists_them_back() {
        let spec = IndexSpec::parse(&doc! {
            "key": { "a": -1 }, "name": "a_-1", "unique": true, "sparse": true,
            "expireAfterSeconds": 3600, "v": 2, "background": true,
        })
        .unwrap();
        assert!(spec.unique && spec.sparse);
        assert_eq!(spec.expire_after_seconds, Some(3600));
        assert_eq!(
            spec.to_document(),
            doc! { "v": 2, "key": { "a": -1 }, "name": "a_-1", "unique": true,
            "sparse": true, "expireAfterSeconds": 3600, "background": true }
        );
        assert_eq!(
            IndexSpec::id_index().to_document(),
            doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }
        );
    }

    #[test]
    fn ttl_and_partial_options_are_validated_like_mongod() {
        let err = IndexSpec::parse(
            &doc! { "key": { "w": 1, "a": 1 }, "expireAfterSeconds": 10, "name": "w_1_a_1" },
        )
        .unwrap_err();
        assert_eq!(err.code_number(), 67);
        assert_eq!(
            err.message,
            "TTL indexes are single-field indexes, compound indexes do not support TTL. Index \
             spec: { key: { w: 1, a: 1 }, expireAfterSeconds: 10, name: \"w_1_a_1\" }"
        );
        let err = IndexSpec::parse(
            &doc! { "key": { "_id": 1 }, "name": "_id_1", "expireAfterSeconds": 10 },
        )
        .unwrap_err();
        assert_eq!(err.code_number(), 197);
        let err = IndexSpec::parse(&doc! {
            "key": { "a": 1 }, "name": "a_1", "partialFilterExpression": { "a": { "$ne": 1 } },
        })
        .unwrap_err();
        assert_eq!(err.code_number(), 67);
        assert_eq!(
            err.message,
            "Error in specification { key: { a: 1 }, name: \"a_1\", partialFilterExpression: \
             { a: { $ne: 1 } }, v: 2 } :: caused by :: Expression not supported in partial \
             index: $not\n    a $eq 1\n"
        );
        let err = IndexSpec::parse(&doc! {
            "key": { "a": 1 }, "name": "a_1", "sparse": true,
            "partialFilterExpression": { "a": 1 },
        })
        .unwrap_err();
        assert!(err
            .message
            .ends_with("cannot mix \"partialFilterExpression\" and \"sparse\" options"));
        let err = IndexSpec::parse(&doc! {
            "key": { "a": 1 }, "name": "a_1",
            "partialFilterExpression": { "$expr": { "$eq": ["$a", 1] } },
        })
        .unwrap_err();
        assert_eq!(err.code_number(), 224);
    }

    #[test]
    fn ttl_scan_finds_dates_at_or_before_the_cutoff_only() {
        let mut idx =
            index(doc! { "key": { "at": -1 }, "name": "at_-1", "expireAfterSeconds": 60 });
        let now = bson::DateTime::from_millis(1_000_000);
        let at = |ms: i64| Bson::DateTime(bson::DateTime::from_millis(ms));
        let docs = [
            doc! { "at": at(1_000_000 - 60_000) },
            doc! { "at": at(1_000_000 - 59_999) },
            doc! { "at": [at(2_000_000), at(1)] },
            doc! { "at": 5 },
            doc! { "at": "yesterday" },
            doc! {},
            doc! { "at": bson::Timestamp { time: 1, increment: 1 } },
        ];
        for (rid, d) in docs.iter().enumerate() {
            let keys = idx.keys_for(d).unwrap();
            idx.insert(&keys, rid as RecordId);
        }
        let mut expired = idx.expired_records(now);
        expired.sort();
        assert_eq!(expired, vec![0, 2]);
        let compound_like = index(doc! { "key": { "at": 1 }, "name": "at_1" });
        assert!(!compound_like.is_ttl());
    }

    #[test]
    fn spec_parse_rejects_unknown_options_with_code_197() {
        let err =
            IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "a_1", "bogus": 1 }).unwrap_err();
        assert_eq!(err.code_number(), 197);
        assert_eq!(
            err.message,
            "The field 'bogus' is not valid for an index specification. Specification: \
             { key: { a: 1 }, name: \"a_1\", bogus: 1 }"
        );
    }

    #[test]
    fn spec_parse_names_unsupported_index_kinds() {
        for (kind, feature) in [
            ("geoHaystack", "geoHaystack indexes"),
            ("columnstore", "columnstore indexes"),
        ] {
            let err = IndexSpec::parse(&doc! { "key": { "a": kind }, "name": "x" }).unwrap_err();
            assert_eq!(err.code, ErrorCode::CommandNotSupported);
            assert!(err.message.contains(feature), "{}", err.message);
        }
        // Geo indexes: a 2d field comes first, and alone.
        IndexSpec::parse(&doc! { "key": { "a": "2dsphere", "b": 1 }, "name": "x" }).unwrap();
        IndexSpec::parse(&doc! { "key": { "a": "2d", "b": 1 }, "name": "x" }).unwrap();
        let err =
            IndexSpec::parse(&doc! { "key": { "b": 1, "a": "2d" }, "name": "x" }).unwrap_err();
        assert!(
            err.message.contains("2d has to be first in index"),
            "{}",
            err.message
        );
        let err = IndexSpec::parse(&doc! { "key": { "a": "2d", "b": "2dsphere" }, "name": "x" })
            .unwrap_err();
        assert!(
            err.message.contains("can't have 2 geo fields"),
            "{}",
            err.message
        );
        let err = IndexSpec::parse(&doc! { "key": { "a": 0 }, "name": "x" }).unwrap_err();
        assert_eq!(err.code_number(), 67);
        // Hashed indexes: one hashed field at most, and never unique.
        IndexSpec::parse(&doc! { "key": { "a": 1, "b": "hashed" }, "name": "x" }).unwrap();
        let err = IndexSpec::parse(&doc! { "key": { "a": "hashed", "b": "hashed" }, "name": "x" })
            .unwrap_err();
        assert_eq!(err.code_number(), 67);
        let err = IndexSpec::parse(&doc! { "key": { "a": "hashed" }, "name": "x", "unique": true })
            .unwrap_err();
        assert_eq!(err.code_number(), 16764);
        let err = IndexSpec::parse(&doc! { "key": {}, "name": "x" }).unwrap_err();
        assert_eq!(err.code_number(), 67);
        let err = IndexSpec::parse(&doc! { "key": { "a": 1 } }).unwrap_err();
        assert_eq!(err.code_number(), 9);
    }

    #[test]
    fn same_definition_detects_noop_and_conflicts() {
        let a = IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "a_1" }).unwrap();
        assert_eq!(a.same_definition(&a.clone()), Ok(true));
        let b = IndexSpec::parse(&doc! { "key": { "b": 1 }, "name": "b_1" }).unwrap();
        assert_eq!(b.same_definition(&a), Ok(false));

        let renamed_key = IndexSpec::parse(&doc! { "key": { "b": 1 }, "name": "a_1" }).unwrap();
        let err = renamed_key.same_definition(&a).unwrap_err();
        assert_eq!(err.code_number(), 86);
        assert!(err
            .message
            .starts_with("An existing index has the same name as the requested index."));

        let other_name = IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "mine" }).unwrap();
        let err = other_name.same_definition(&a).unwrap_err();
        assert_eq!(err.code_number(), 85);
        assert_eq!(
            err.message,
            "Index already exists with a different name: a_1"
        );

        let id = IndexSpec::parse(&doc! { "key": { "_id": 1 }, "name": "_id_1" }).unwrap();
        assert_eq!(id.same_definition(&IndexSpec::id_index()), Ok(true));

        let unique =
            IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "a_1", "unique": true }).unwrap();
        let err = unique.same_definition(&a).unwrap_err();
        assert_eq!(err.code_number(), 85);
        assert!(err.message.starts_with(
            "An equivalent index already exists with the same name but different options."
        ));
    }

    #[test]
    fn arrays_produce_one_key_per_element_and_mark_multikey() {
        let idx = index(doc! { "key": { "a": 1 }, "name": "a_1" });
        assert_eq!(decoded_keys(&idx, &doc! { "a": 5 }), ints(&[5]));
        assert!(!idx.is_multikey());
        assert_eq!(decoded_keys(&idx, &doc! { "a": [3, 1, 3] }), ints(&[1, 3]));
        assert!(idx.is_multikey());
        // Arrays nested in an array are indexed whole.
        assert_eq!(
            decoded_keys(&idx, &doc! { "a": [[1, 2]] }),
            vec![vec![Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])]]
        );
        assert_eq!(
            decoded_keys(&idx, &doc! { "a": [] }),
            vec![vec![Bson::Undefined]]
        );
        assert_eq!(decoded_keys(&idx, &doc! { "b": 1 }), vec![vec![Bson::Null]]);
    }

    #[test]
    fn dotted_paths_fan_out_through_arrays_of_documents() {
        let idx = index(doc! { "key": { "a.b": 1 }, "name": "a.b_1" });
        assert_eq!(
            decoded_keys(
                &idx,
                &doc! { "a": [{ "b": 2 }, { "b": [3, 4] }, { "c": 1 }, 7] }
            ),
            vec![
                vec![Bson::Null],
                vec![Bson::Int32(2)],
                vec![Bson::Int32(3)],
                vec![Bson::Int32(4)],
            ]
        );
        assert_eq!(
            decoded_keys(&idx, &doc! { "a": { "b": { "c": 1 } } }),
            vec![vec![Bson::Document(doc! { "c": 1 })]]
        );
        let positional = index(doc! { "key": { "a.1.b": 1 }, "name": "p" });
        assert_eq!(
            decoded_keys(&positional, &doc! { "a": [{ "b": 1 }, { "b": 2 }] }),
            ints(&[2])
        );
    }

    #[test]
    fn compound_keys_pair_one_array_with_the_other_fields() {
        let idx = index(doc! { "key": { "a": 1, "b": -1 }, "name": "ab" });
        assert_eq!(
            decoded_keys(&idx, &doc! { "a": [1, 2], "b": "x" }),
            vec![
                vec![Bson::Int32(1), Bson::String("x".into())],
                vec![Bson::Int32(2), Bson::String("x".into())],
            ]
        );
        // Two paths through the same array take their values from the same element.
        let same = index(doc! { "key": { "a.x": 1, "a.y": 1 }, "name": "xy" });
        assert_eq!(
            decoded_keys(
                &same,
                &doc! { "a": [{ "x": 1, "y": 2 }, { "x": 3, "y": 4 }] }
            ),
            vec![
                vec![Bson::Int32(1), Bson::Int32(2)],
                vec![Bson::Int32(3), Bson::Int32(4)],
            ]
        );
    }

    #[test]
    fn parallel_arrays_in_a_compound_key_are_refused() {
        let idx = index(doc! { "key": { "a": 1, "b": 1 }, "name": "ab" });
        let err = idx.keys_for(&doc! { "a": [1], "b": [2] }).unwrap_err();
        assert_eq!(err.code_number(), 171);
        assert_eq!(err.message, "cannot index parallel arrays [b] [a]");
    }

    #[test]
    fn sparse_indexes_skip_documents_missing_every_key_field() {
        let idx = index(doc! { "key": { "a": 1, "b": 1 }, "name": "ab", "sparse": true });
        assert!(idx.keys_for(&doc! { "c": 1 }).unwrap().is_empty());
        assert_eq!(idx.keys_for(&doc! { "b": 1 }).unwrap().len(), 1);
        let single = index(doc! { "key": { "a": 1 }, "name": "a", "sparse": true });
        assert!(single.keys_for(&doc! { "a": null }).unwrap().len() == 1);
        assert!(single.keys_for(&doc! {}).unwrap().is_empty());
    }

    #[test]
    fn unique_index_reports_duplicates_like_mongodb() {
        let mut idx = index(doc! { "key": { "name": 1 }, "name": "name_1", "unique": true });
        let keys = idx.keys_for(&doc! { "name": "x" }).unwrap();
        idx.check_unique(&keys, 1, "db.coll").unwrap();
        idx.insert(&keys, 1);
        // The same record may keep its own key (updates).
        idx.check_unique(&keys, 1, "db.coll").unwrap();
        let err = idx.check_unique(&keys, 2, "db.coll").unwrap_err();
        assert_eq!(err.code_number(), 11000);
        assert_eq!(
            err.message,
            "E11000 duplicate key error collection: db.coll index: name_1 dup key: { name: \"x\" }"
        );
        assert_eq!(
            err.extra,
            Some(doc! { "keyPattern": { "name": 1 }, "keyValue": { "name": "x" } })
        );
        idx.remove(&keys, 1);
        idx.check_unique(&keys, 2, "db.coll").unwrap();
    }

    #[test]
    fn unique_index_treats_equal_numbers_of_any_type_as_duplicates() {
        let mut idx = index(doc! { "key": { "a": 1, "b": 1 }, "name": "a_1_b_1", "unique": true });
        idx.insert(&idx.keys_for(&doc! { "a": 1, "b": "x" }).unwrap(), 1);
        let keys = idx.keys_for(&doc! { "a": 1.0, "b": "x" }).unwrap();
        let err = idx.check_unique(&keys, 2, "db.c").unwrap_err();
        assert_eq!(
            err.message,
            "E11000 duplicate key error collection: db.c index: a_1_b_1 dup key: { a: 1, b: \"x\" }"
        );
        let big = idx
            .keys_for(&doc! { "a": 9_007_199_254_740_993i64, "b": "x" })
            .unwrap();
        idx.insert(&big, 3);
        let near = idx
            .keys_for(&doc! { "a": 9_007_199_254_740_992.0, "b": "x" })
            .unwrap();
        idx.check_unique(&near, 4, "db.c").unwrap();
    }

    #[test]
    fn id_index_duplicates_render_object_ids() {
        let mut idx = Index::new(IndexSpec::id_index()).unwrap();
        let id = ObjectId::from_bytes([1; 12]);
        let keys = idx.keys_for(&doc! { "_id": id }).unwrap();
        idx.insert(&keys, 7);
        assert_eq!(idx.lookup_exact(&[Bson::ObjectId(id)]), vec![7]);
        let err = idx.check_unique(&keys, 8, "shop.products").unwrap_err();
        assert_eq!(
            err.message,
            "E11000 duplicate key error collection: shop.products index: _id_ dup key: \
             { _id: ObjectId('010101010101010101010101') }"
        );
    }

    #[test]
    fn short_keys_are_stored_inline_and_compare_as_bytes() {
        assert_eq!(std::mem::size_of::<(KeyBytes, RecordId)>(), ENTRY_BYTES);
        let short = KeyBytes::from(&[1u8, 2][..]);
        let long = KeyBytes::from(&[1u8; 40][..]);
        assert!(matches!(short, KeyBytes::Inline { .. }));
        assert!(matches!(long, KeyBytes::Heap(_)));
        assert!(long < short);
        assert!(KeyBytes::from(&[1u8][..]) < short);
    }

    fn byte() -> impl proptest::strategy::Strategy<Value = u8> {
        proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff])
    }

    proptest::proptest! {
        /// Inline keys compare word by word; the order must be the bytes' order, trailing
        /// zero bytes and keys on either side of the inline limit included.
        #[test]
        fn keys_compare_as_their_bytes(
            common in proptest::collection::vec(byte(), 0..42),
            tail_a in proptest::collection::vec(byte(), 0..6),
            tail_b in proptest::collection::vec(byte(), 0..6),
        ) {
            let a = [common.as_slice(), tail_a.as_slice()].concat();
            let b = [common.as_slice(), tail_b.as_slice()].concat();
            let (ka, kb) = (KeyBytes::from(&a[..]), KeyBytes::from(&b[..]));
            proptest::prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            proptest::prop_assert_eq!(ka == kb, a == b);
        }
    }

    #[test]
    fn full_scans_return_each_record_once_in_key_order() {
        let mut idx = index(doc! { "key": { "a": -1 }, "name": "a_-1" });
        for (rid, d) in [
            (1, doc! { "a": 2 }),
            (2, doc! { "a": [1, 3] }),
            (3, doc! { "a": "s" }),
            (4, doc! {}),
        ] {
            let keys = idx.keys_for(&d).unwrap();
            idx.insert(&keys, rid);
        }
        assert_eq!(idx.entry_count(), 5);
        let bounds = planner::IndexBounds::default();
        // Descending index: "s" (strings above numbers), 3, 2, 1 (already seen), null.
        assert_eq!(
            idx.scan(&bounds, false).collect::<Vec<_>>(),
            vec![3, 2, 1, 4]
        );
        assert_eq!(
            idx.scan(&bounds, true).collect::<Vec<_>>(),
            vec![4, 2, 1, 3]
        );
    }

    #[test]
    fn an_index_build_gets_each_document_the_keys_it_would_get_alone() {
        let specs = [
            doc! { "key": { "a": 1 }, "name": "a" },
            doc! { "key": { "a": -1, "b.c": 1, "_id": -1 }, "name": "abc" },
            doc! { "key": { "b.c": 1 }, "name": "bc", "sparse": true },
            doc! { "key": { "a": 1, "b": 1 }, "name": "ab_sparse", "sparse": true },
            doc! { "key": { "t": 1 }, "name": "t", "collation": { "locale": "en", "strength": 2 } },
            doc! { "key": { "a.0": 1 }, "name": "a0" },
            doc! { "key": { "a": 1 }, "name": "partial", "partialFilterExpression": { "b": { "$exists": true } } },
            doc! { "key": { "h": "hashed" }, "name": "hashed" },
        ];
        let docs = [
            doc! { "_id": 1, "a": 5, "b": { "c": "x" }, "t": "Été" },
            doc! { "_id": 2 },
            doc! { "_id": 3, "a": [3, 1, 3, [2, 4], { "z": 1 }], "b": { "c": [1, 2] } },
            doc! { "_id": 4, "a": [], "b": [{ "c": 1 }, { "c": 2 }, {}] },
            doc! { "_id": 5, "a": null, "b": { "c": null }, "t": ["b", "B", "é"] },
            doc! { "_id": 6, "a": { "x": 1 }, "b": [], "h": [1] },
            doc! { "_id": 7, "a": [[]], "b": 7, "h": "s", "t": [] },
        ];
        for spec in specs {
            let alone = index(spec.clone());
            let built = index(spec);
            for (rid, d) in (1..).zip(&docs) {
                let expected = alone.keys_for(d);
                let mut got = Vec::new();
                let mut scratch = KeyScratch::default();
                let mut terms = crate::text::TermCache::disabled();
                let appended = built.append_keys(d, rid, &mut terms, &mut scratch, &mut got);
                match expected {
                    Ok(keys) => {
                        appended.unwrap();
                        let mut got: Vec<Vec<u8>> = got
                            .into_iter()
                            .map(|(k, r)| {
                                assert_eq!(r, rid);
                                k.as_slice().to_vec()
                            })
                            .collect();
                        got.sort();
                        got.dedup();
                        assert_eq!(got, keys, "{} of {d}", alone.spec.name);
                    }
                    Err(e) => assert_eq!(appended.unwrap_err().code_number(), e.code_number()),
                }
                assert_eq!(
                    built.is_multikey(),
                    alone.is_multikey(),
                    "{} of {d}",
                    alone.spec.name
                );
            }
        }
    }

    #[test]
    fn keys_read_from_stored_bytes_are_the_keys_of_the_decoded_document() {
        let specs = [
            doc! { "key": { "_id": 1 }, "name": "_id_" },
            doc! { "key": { "kind": 1, "at": 1 }, "name": "kind_at" },
            doc! { "key": { "at": -1 }, "name": "at_desc" },
            doc! { "key": { "a": 1, "b": 1 }, "name": "ab_sparse", "sparse": true },
            doc! { "key": { "t": 1 }, "name": "t", "collation": { "locale": "en", "strength": 2 } },
            doc! { "key": { "b.c": 1 }, "name": "bc" },
            doc! { "key": { "a": 1 }, "name": "partial", "partialFilterExpression": { "b": { "$exists": true } } },
        ];
        let docs = [
            doc! { "_id": ObjectId::new(), "at": bson::DateTime::from_millis(5), "kind": "view" },
            doc! { "_id": 2, "kind": "search", "a": 1.5, "t": "Été" },
            doc! { "_id": "x", "a": null, "b": { "c": "x" }, "t": Bson::Undefined },
            doc! { "_id": 4i64, "a": { "x": [1] }, "b": Bson::Decimal128("2.5".parse().unwrap()) },
            doc! { "_id": 5, "a": [3, 1], "b": 7, "t": ["b", "B"] },
            doc! { "_id": 6, "at": [], "kind": true },
            doc! { "_id": 7, "z": 1 },
        ];
        for spec in specs {
            for d in &docs {
                let idx = index(spec.clone());
                let fresh = index(spec.clone());
                let stored = crate::stored::StoredDoc::from_document(d).unwrap();
                assert_eq!(
                    idx.keys_for_stored(&stored).unwrap(),
                    fresh.keys_for(d).unwrap(),
                    "{} of {d}",
                    idx.spec.name
                );
                assert_eq!(idx.is_multikey(), fresh.is_multikey(), "{}", idx.spec.name);
                // The bytes are read directly exactly for plain top-level indexes without
                // an array in their fields.
                let plain = ["_id_", "kind_at", "at_desc", "ab_sparse", "t"]
                    .contains(&idx.spec.name.as_str());
                let arrays = ["a", "b", "t", "at", "kind"].iter().any(|f| {
                    idx.spec.key.contains_key(*f) && matches!(d.get(*f), Some(Bson::Array(_)))
                });
                assert_eq!(
                    idx.top_level_keys(&stored).unwrap().is_some(),
                    plain && !arrays,
                    "{} of {d}",
                    idx.spec.name
                );
            }
        }
    }
}
