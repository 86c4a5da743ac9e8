//! Text indexes and `$text` search, as MongoDB implements them (text index version 3).
//!
//! A text index is declared with `"text"` in its key pattern (`{title: "text", body: "text"}`,
//! or `{"$**": "text"}` for every string field) and is listed the way mongod normalises it: the
//! text fields are replaced by `_fts: "text", _ftsx: 1` and move into `weights`, beside
//! `default_language`, `language_override` and `textIndexVersion: 3`. Ordinary key fields before
//! the text fields form an equality prefix that every `$text` query must give.
//!
//! The index holds one entry per (prefix values, term) of each document, so a `$text` query
//! looks its terms up and unions the records (`TEXT_OR`), then re-checks negations and phrases
//! against the documents (`TEXT_MATCH`). Scores are recomputed from the document for the hits
//! with MongoDB's formula (see [`TextIndex::term_scores`]).

pub(crate) mod language;
pub(crate) mod search;

use crate::error::{Error, ErrorCode, Result};
use crate::keystring;
use crate::stored::{Element, Elements, StoredDoc};
use bson::{doc, Bson, Document};
use language::{Language, Sensitivity, Tokenizer};
use std::collections::BTreeMap;

pub(crate) use search::{TextFilter, TextSearch};

/// The hidden field under which a document carries its text score between pipeline stages.
/// A NUL can never appear in a field name that came over the wire, so it cannot collide with
/// user data, and [`strip_score`] removes it before documents leave the server.
pub(crate) const SCORE_FIELD: &str = "\u{0}textScore";

/// The only text index version docstore builds.
pub(crate) const TEXT_INDEX_VERSION: i32 = 3;

/// MongoDB's largest weight (exclusive) for one field.
const MAX_WORD_WEIGHT: f64 = 100_000.0;

/// Remove the hidden score field (top level) from a document about to leave the server.
pub(crate) fn strip_score(doc: &mut Document) {
    doc.remove(SCORE_FIELD);
}

/// The text-specific options of an index, as `listIndexes` shows them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextOptions {
    /// Field → weight, ordered by field name (`$**` for every string field).
    pub weights: Document,
    pub default_language: String,
    pub language_override: String,
    pub version: i32,
}

/// The text options of a `createIndexes` entry, before validation.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawTextOptions {
    pub weights: Option<Bson>,
    pub default_language: Option<Bson>,
    pub language_override: Option<Bson>,
    pub version: Option<Bson>,
}

impl RawTextOptions {
    pub(crate) fn is_empty(&self) -> bool {
        self.weights.is_none()
            && self.default_language.is_none()
            && self.language_override.is_none()
            && self.version.is_none()
    }
}

/// Whether a key pattern declares a text index (a `"text"` value or the normalised `_fts`).
pub(crate) fn is_text_key(key: &Document) -> bool {
    key.iter()
        .any(|(f, v)| f == "_fts" || matches!(v, Bson::String(s) if s == "text"))
}

fn location(code: i32, message: &str) -> Error {
    Error::location(code, message)
}

/// MongoDB's `fixSpec`: validate a text index definition and normalise its key pattern to
/// `{prefix…, _fts: "text", _ftsx: 1, suffix…}`, gathering the text fields into the weights.
pub(crate) fn normalize(key: &Document, raw: &RawTextOptions) -> Result<(Document, TextOptions)> {
    let mut normalized = Document::new();
    let mut weights: BTreeMap<String, f64> = BTreeMap::new();
    // 0: before the text fields, 1: inside them, 2: after them.
    let mut section = 0;
    let mut already_normalized = false;
    for (field, value) in key {
        if field == "_fts" {
            if !matches!(value, Bson::String(s) if s == "text") {
                return Err(location(17271, "expecting _fts:\"text\""));
            }
            already_normalized = true;
            section = 1;
            normalized.insert("_fts", "text");
            normalized.insert("_ftsx", 1);
            continue;
        }
        if field == "_ftsx" {
            if crate::value::to_f64(value) != Some(1.0) {
                return Err(location(17272, "expecting _ftsx:1"));
            }
            if !already_normalized {
                return Err(location(17274, "expected _ftsx after _fts"));
            }
            section = 2;
            continue;
        }
        match value {
            Bson::String(s) if s == "text" => {
                if section == 2 || already_normalized {
                    return Err(location(
                        17389,
                        "'text' fields in index must all be adjacent",
                    ));
                }
                if section == 0 {
                    normalized.insert("_fts", "text");
                    normalized.insert("_ftsx", 1);
                }
                section = 1;
                weights.insert(field.clone(), 1.0);
            }
            other => {
                let n = crate::value::to_f64(other);
                if n != Some(1.0) && n != Some(-1.0) {
                    return Err(location(
                        17273,
                        "expected value 1 or -1 for non-text key in compound index",
                    ));
                }
                if section == 1 {
                    section = 2;
                }
                normalized.insert(field.clone(), other.clone());
            }
        }
    }
    if section == 0 {
        return Err(Error::new(
            ErrorCode::CannotCreateIndex,
            "text index options given for an index without text fields",
        ));
    }
    match &raw.weights {
        None => {}
        Some(Bson::Document(given)) => {
            for (field, w) in given {
                let Some(w) = crate::value::to_f64(w).filter(|_| crate::value::is_number(w)) else {
                    return Err(location(17283, "weight for text index needs numeric type"));
                };
                weights.insert(field.clone(), w);
            }
        }
        Some(Bson::String(s)) if s == "$**" => {
            weights.insert("$**".into(), 1.0);
        }
        Some(_) => {
            return Err(location(
                17284,
                "text index option 'weights' must be an object",
            ))
        }
    }
    let mut weights_doc = Document::new();
    for (field, w) in &weights {
        if !(*w > 0.0 && *w < MAX_WORD_WEIGHT) {
            return Err(location(16674, "score for word too high"));
        }
        if field.starts_with('$') && field != "$**" {
            return Err(Error::new(
                ErrorCode::CannotCreateIndex,
                format!("text index field names cannot start with '$': {field}"),
            ));
        }
        if w.fract() == 0.0 {
            weights_doc.insert(field.clone(), *w as i32);
        } else {
            weights_doc.insert(field.clone(), *w);
        }
    }
    let default_language = match &raw.default_language {
        None => "english".to_string(),
        Some(Bson::String(s)) => {
            if Language::parse(s).is_none() {
                return Err(Error::bad_value(Language::unsupported(s)));
            }
            s.clone()
        }
        Some(_) => return Err(location(17263, "default_language needs a string type")),
    };
    let language_override = match &raw.language_override {
        None => "language".to_string(),
        Some(Bson::String(s)) if !s.is_empty() && !s.starts_with('$') && !s.contains('.') => {
            s.clone()
        }
        Some(Bson::String(s)) => {
            return Err(location(
                17136,
                &format!("language_override is not valid: {s}"),
            ))
        }
        Some(_) => {
            return Err(location(
                17136,
                "language_override is not valid: it must be a string",
            ))
        }
    };
    let version = match &raw.version {
        None => TEXT_INDEX_VERSION,
        Some(v) => match crate::value::to_f64(v) {
            Some(n) if n == f64::from(TEXT_INDEX_VERSION) => TEXT_INDEX_VERSION,
            Some(n) if n == 1.0 || n == 2.0 => {
                return Err(Error::not_supported(format!(
                    "text index version {n} (docstore builds version 3)"
                )))
            }
            _ => {
                return Err(location(
                    17364,
                    &format!(
                        "attempt to use unsupported textIndexVersion {}; versions supported: 3, \
                         2, 1",
                        keystring::render(v)
                    ),
                ))
            }
        },
    };
    Ok((
        normalized,
        TextOptions {
            weights: weights_doc,
            default_language,
            language_override,
            version,
        },
    ))
}

/// One string a document contributes to its text index, with its weight and language.
#[derive(Debug)]
pub(crate) struct TextValue<'a> {
    pub text: &'a str,
    pub weight: f64,
    pub language: Language,
}

/// A text index's definition as the index structure and the query engine use it.
#[derive(Debug, Clone)]
pub(crate) struct TextIndex {
    pub options: TextOptions,
    /// Key fields before the text fields: a `$text` query must give equality on each.
    pub prefix: Vec<String>,
    /// Key fields after the text fields (kept in the definition; not used for matching).
    pub suffix: Vec<String>,
    weights: Vec<(String, f64)>,
    /// The weighted fields as a tree of their paths' parts, for the walk over stored bytes
    /// ([`TextIndex::visit_stored_strings`]); empty for a wildcard index.
    fields: FieldTree,
    wildcard: Option<f64>,
    pub default_language: Language,
}

/// An indexed string read from a stored document's bytes
/// ([`TextIndex::visit_stored_strings`]): ASCII bytes as they are, any other string checked
/// as UTF-8. Most indexed strings are ASCII, and the one scan that tells so is all they need
/// (checking every string as UTF-8 and then again for ASCII was a tenth of a phrase search).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoredString<'a> {
    /// Only ASCII bytes.
    Ascii(&'a [u8]),
    /// A string with other characters.
    Other(&'a str),
}

impl<'a> StoredString<'a> {
    /// The string a BSON string's bytes hold; `None` when they are not UTF-8.
    pub(crate) fn of(bytes: &'a [u8]) -> Option<StoredString<'a>> {
        if bytes.is_ascii() {
            Some(StoredString::Ascii(bytes))
        } else {
            std::str::from_utf8(bytes).ok().map(StoredString::Other)
        }
    }
}

impl<'a> From<&'a str> for StoredString<'a> {
    fn from(text: &'a str) -> StoredString<'a> {
        if text.is_ascii() {
            StoredString::Ascii(text.as_bytes())
        } else {
            StoredString::Other(text)
        }
    }
}

/// The weighted fields of a text index as a tree of their dotted paths' parts: `details.artist`
/// and `details.genre` are the children `artist` and `genre` of the top-level child `details`.
/// The walk over a stored document ([`TextIndex::visit_stored_strings`]) compares each key it
/// meets with the few children of the field it is in, where building each dotted path and
/// comparing it with every weighted field was most of a phrase search's time.
#[derive(Debug, Clone, Default)]
struct FieldTree {
    /// Strings right at this path are indexed.
    weighted: bool,
    /// The next parts of the weighted paths below this one.
    children: Vec<(Box<[u8]>, FieldTree)>,
}

impl FieldTree {
    /// The tree of the dotted `paths`.
    fn of<'a>(paths: impl IntoIterator<Item = &'a str>) -> FieldTree {
        let mut root = FieldTree::default();
        for path in paths {
            let mut node = &mut root;
            for part in path.split('.') {
                let at = match node
                    .children
                    .iter()
                    .position(|(k, _)| &**k == part.as_bytes())
                {
                    Some(at) => at,
                    None => {
                        node.children
                            .push((part.as_bytes().into(), FieldTree::default()));
                        node.children.len() - 1
                    }
                };
                node = &mut node.children[at].1;
            }
            node.weighted = true;
        }
        root
    }

    /// The child for the key `key`.
    fn child(&self, key: &[u8]) -> Option<&FieldTree> {
        self.children
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, child)| child)
    }
}

impl TextIndex {
    /// From a normalised key pattern and validated options (see [`normalize`]).
    pub(crate) fn new(key: &Document, options: &TextOptions) -> Result<TextIndex> {
        let mut prefix = Vec::new();
        let mut suffix = Vec::new();
        let mut seen_text = false;
        for field in key.keys() {
            if field == "_fts" || field == "_ftsx" {
                seen_text = true;
            } else if seen_text {
                suffix.push(field.clone());
            } else {
                prefix.push(field.clone());
            }
        }
        let mut weights = Vec::new();
        let mut wildcard = None;
        for (field, w) in &options.weights {
            let w = crate::value::to_f64(w).unwrap_or(1.0);
            if field == "$**" {
                wildcard = Some(w);
            } else {
                weights.push((field.clone(), w));
            }
        }
        let default_language = Language::parse(&options.default_language)
            .ok_or_else(|| Error::bad_value(Language::unsupported(&options.default_language)))?;
        let fields = FieldTree::of(weights.iter().map(|(field, _)| field.as_str()));
        Ok(TextIndex {
            options: options.clone(),
            prefix,
            suffix,
            weights,
            fields,
            wildcard,
            default_language,
        })
    }

    /// The language a (sub)document sets with the override field, or `current`.
    fn language_of(&self, doc: &Document, current: Language) -> Result<Language> {
        match doc.get(&self.options.language_override) {
            None => Ok(current),
            Some(Bson::String(name)) => Language::parse(name).ok_or_else(|| {
                Error::location(17262, format!("language override unsupported: {name}"))
            }),
            Some(_) => Err(Error::location(
                17261,
                "found language override field in document with non-string type",
            )),
        }
    }

    /// The weight of the strings at the dotted `path` (its bytes), if they are indexed.
    fn weight_of(&self, path: &[u8]) -> Option<f64> {
        self.weights
            .iter()
            .find(|(f, _)| f.as_bytes() == path)
            .map(|(_, w)| *w)
            .or(self.wildcard)
    }

    /// The top-level fields keys are made from (weighted fields, the ordinary key fields
    /// around them and the language override), or `None` for a wildcard index, which reads
    /// every string field.
    pub(crate) fn top_level_fields(&self) -> Option<Vec<String>> {
        if self.wildcard.is_some() {
            return None;
        }
        let mut heads: Vec<String> = Vec::new();
        let paths = self
            .weights
            .iter()
            .map(|(f, _)| f.as_str())
            .chain(self.prefix.iter().map(String::as_str))
            .chain(self.suffix.iter().map(String::as_str))
            .chain(std::iter::once(self.options.language_override.as_str()));
        for path in paths {
            let head = path.split('.').next().unwrap_or(path);
            if !heads.iter().any(|h| h == head) {
                heads.push(head.to_string());
            }
        }
        Some(heads)
    }

    /// Whether anything at or below the dotted `path` (its bytes) can be indexed.
    fn may_contain(&self, path: &[u8]) -> bool {
        self.wildcard.is_some()
            || self.weights.iter().any(|(f, _)| {
                let f = f.as_bytes();
                f == path || (f.starts_with(path) && f.get(path.len()) == Some(&b'.'))
            })
    }

    /// Every indexed string of `doc` (MongoDB's FTSElementIterator): the weighted fields (or,
    /// for a wildcard index, every string field), through embedded documents and arrays, in
    /// the language of the nearest enclosing document that sets the override field.
    pub(crate) fn values<'a>(&self, doc: &'a Document) -> Result<Vec<TextValue<'a>>> {
        let mut out = Vec::new();
        let language = self.language_of(doc, self.default_language)?;
        self.walk_document(doc, "", language, &mut out)?;
        Ok(out)
    }

    fn walk_document<'a>(
        &self,
        doc: &'a Document,
        path: &str,
        language: Language,
        out: &mut Vec<TextValue<'a>>,
    ) -> Result<()> {
        for (field, value) in doc {
            let child = if path.is_empty() {
                field.clone()
            } else {
                format!("{path}.{field}")
            };
            if !self.may_contain(child.as_bytes()) {
                continue;
            }
            self.walk_value(value, &child, language, out)?;
        }
        Ok(())
    }

    fn walk_value<'a>(
        &self,
        value: &'a Bson,
        path: &str,
        language: Language,
        out: &mut Vec<TextValue<'a>>,
    ) -> Result<()> {
        match value {
            Bson::String(text) => {
                if let Some(weight) = self.weight_of(path.as_bytes()) {
                    out.push(TextValue {
                        text,
                        weight,
                        language,
                    });
                }
            }
            Bson::Document(sub) => {
                let language = self.language_of(sub, language)?;
                self.walk_document(sub, path, language, out)?;
            }
            Bson::Array(items) => {
                for item in items {
                    self.walk_value(item, path, language, out)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The strings [`TextIndex::values`] gives for the stored document `doc`, in the same
    /// order, handed to `visit` straight from the bytes ([`StoredString`]): nothing is decoded
    /// into a `Document` and fields the index does not cover are skipped (a phrase search checks thousands of
    /// candidates this way). `None` when the walk cannot stand in for `values`: a document on
    /// the way holds the language override field (`values` may then refuse the document, see
    /// `language_of`; the languages themselves do not change which strings are
    /// indexed), or the bytes do not read. `visit` may have seen some strings by then.
    ///
    /// The walk reads elements by their type and length ([`Elements`]): keys are compared as
    /// bytes and only the indexed strings are looked at, where the driver's raw iterator checked
    /// every key and value it passed as UTF-8 (most of a phrase search's time).
    pub(crate) fn visit_stored_strings(
        &self,
        doc: &StoredDoc,
        visit: &mut dyn FnMut(StoredString<'_>),
    ) -> Option<()> {
        if self.wildcard.is_some() {
            let mut path = Vec::new();
            return self.walk_stored_document(doc.as_bytes(), &mut path, visit);
        }
        self.walk_stored_fields(doc.as_bytes(), &self.fields, visit)
    }

    /// [`TextIndex::visit_stored_strings`] for an index of named fields, in the (embedded)
    /// document `bytes` at the field `node` of [`TextIndex::fields`] (the root at the top):
    /// each key is looked up among the field's children, and only the elements found are read.
    /// A key holding a dot that is not one of them gives `None`: with the path before it, it
    /// could spell a weighted path (`values` joins keys with dots), so the decoded walk decides.
    fn walk_stored_fields(
        &self,
        bytes: &[u8],
        node: &FieldTree,
        visit: &mut dyn FnMut(StoredString<'_>),
    ) -> Option<()> {
        let language_override = self.options.language_override.as_bytes();
        for element in Elements::new(bytes).ok()? {
            let element = element.ok()?;
            let key = element.key();
            if key == language_override {
                return None;
            }
            match node.child(key) {
                Some(child) => self.walk_stored_field(&element, child, visit)?,
                None if key.contains(&b'.') => return None,
                None => {}
            }
        }
        Some(())
    }

    /// The indexed strings of one element at the field `node`: a string when the field is
    /// weighted, the fields of an embedded document, the items of an array (nested arrays
    /// included), as [`TextIndex::walk_stored_value`] takes them.
    fn walk_stored_field(
        &self,
        element: &Element<'_>,
        node: &FieldTree,
        visit: &mut dyn FnMut(StoredString<'_>),
    ) -> Option<()> {
        match element.kind() {
            0x02 if node.weighted => {
                visit(StoredString::of(element.string_bytes()?)?);
            }
            0x03 => self.walk_stored_fields(element.value(), node, visit)?,
            0x04 => {
                for item in Elements::new(element.value()).ok()? {
                    self.walk_stored_field(&item.ok()?, node, visit)?;
                }
            }
            _ => {}
        }
        Some(())
    }

    /// [`TextIndex::visit_stored_strings`] for a wildcard index in the (embedded) document
    /// `bytes` found at the dotted `path` (empty at the top).
    fn walk_stored_document(
        &self,
        bytes: &[u8],
        path: &mut Vec<u8>,
        visit: &mut dyn FnMut(StoredString<'_>),
    ) -> Option<()> {
        let parent = path.len();
        for element in Elements::new(bytes).ok()? {
            let element = element.ok()?;
            if element.key() == self.options.language_override.as_bytes() {
                return None;
            }
            if parent > 0 {
                path.push(b'.');
            }
            path.extend_from_slice(element.key());
            if self.may_contain(path) {
                self.walk_stored_value(&element, path, visit)?;
            }
            path.truncate(parent);
        }
        Some(())
    }

    /// The indexed strings of one element at `path`: a string when `path` is weighted, the
    /// fields of an embedded document, the items of an array (nested arrays included), as
    /// [`TextIndex::values`] takes them.
    fn walk_stored_value(
        &self,
        element: &Element<'_>,
        path: &mut Vec<u8>,
        visit: &mut dyn FnMut(StoredString<'_>),
    ) -> Option<()> {
        match element.kind() {
            0x02 if self.weight_of(path).is_some() => {
                visit(StoredString::of(element.string_bytes()?)?);
            }
            0x03 => self.walk_stored_document(element.value(), path, visit)?,
            0x04 => {
                for item in Elements::new(element.value()).ok()? {
                    self.walk_stored_value(&item.ok()?, path, visit)?;
                }
            }
            _ => {}
        }
        Some(())
    }

    /// MongoDB's `FTSSpec::scoreDocument`: each term's score in `doc`, summed over the indexed
    /// strings. For one string of `n` terms (stop words excluded) with field weight `w`, a term
    /// occurring `c` times scores
    ///
    /// `w × freq × (0.5 × c / n + 0.5) × adjustment`
    ///
    /// where `freq = 1 + 1/2 + 1/4 + …` (`c` terms: each repeated occurrence counts half the
    /// previous one) and `adjustment` is 1.1 when the whole string equals the term
    /// (case-insensitively) and 1 otherwise. A query's score for the document is the sum of
    /// the scores of its distinct terms.
    pub(crate) fn term_scores(&self, doc: &Document) -> Result<BTreeMap<String, f64>> {
        let mut scores = BTreeMap::new();
        for value in self.values(doc)? {
            let tokenizer = Tokenizer::new(value.language, Sensitivity::default());
            score_string(&tokenizer, value.text, value.weight, &mut scores);
        }
        Ok(scores)
    }

    /// The equality prefix values of `doc` (arrays are refused, as mongod refuses them).
    pub(crate) fn prefix_values<'a>(&self, doc: &'a Document) -> Result<Vec<&'a Bson>> {
        let mut values = Vec::with_capacity(self.prefix.len());
        for path in self.prefix.iter().chain(&self.suffix) {
            let value = crate::path::get_path(doc, path).unwrap_or(&Bson::Null);
            if matches!(value, Bson::Array(_)) {
                return Err(Error::location(
                    16675,
                    "cannot have a multi-key as a prefix to a text index",
                ));
            }
            values.push(value);
        }
        values.truncate(self.prefix.len());
        Ok(values)
    }

    /// The index key of one term under the given prefix values.
    pub(crate) fn key(prefix: &[&Bson], term: &str) -> Vec<u8> {
        let mut key = Vec::new();
        for value in prefix {
            keystring::encode_value(value, &mut key);
        }
        keystring::encode_value(&Bson::String(term.to_string()), &mut key);
        key
    }

    /// An index entry's key: [`TextIndex::key`] followed by the term's score in the document
    /// (its bits, big-endian), as MongoDB keeps the score in the key (`_fts`, `_ftsx`): a
    /// `$text` query sums its terms' scores from the keys it reads instead of tokenizing every
    /// matching document again.
    pub(crate) fn scored_key(prefix: &[&Bson], term: &str, score: f64) -> Vec<u8> {
        let mut key = Self::key(prefix, term);
        key.extend_from_slice(&score.to_bits().to_be_bytes());
        key
    }

    /// The score a [`TextIndex::scored_key`] holds after the `term_key` it starts with, if it
    /// is one.
    pub(crate) fn score_in_key(key: &[u8], term_key: &[u8]) -> Option<f64> {
        let rest = key.strip_prefix(term_key)?;
        let bits: [u8; 8] = rest.try_into().ok()?;
        Some(f64::from_bits(u64::from_be_bytes(bits)))
    }

    /// Whether two versions of a document give the same keys without tokenizing them: the
    /// same indexed strings (with weights and languages) and the same prefix values. Most
    /// updates (stock counters, reservations) touch no indexed text.
    pub(crate) fn same_input(&self, old: &Document, new: &Document) -> bool {
        let (Ok(a), Ok(b)) = (self.values(old), self.values(new)) else {
            return false;
        };
        let same_values = a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| x.text == y.text && x.weight == y.weight && x.language == y.language);
        same_values
            && match (self.prefix_values(old), self.prefix_values(new)) {
                (Ok(x), Ok(y)) => x == y,
                _ => false,
            }
    }

    /// The index keys of `doc`: one per distinct term, under its prefix values, remembering in
    /// `cache` the term each word becomes (the same terms as [`TextIndex::term_scores`] gives,
    /// without the scores).
    pub(crate) fn keys_for_with(
        &self,
        doc: &Document,
        cache: &mut TermCache,
    ) -> Result<Vec<Vec<u8>>> {
        let prefix = self.prefix_values(doc)?;
        let mut scores = BTreeMap::new();
        for value in self.values(doc)? {
            let tokenizer = Tokenizer::new(value.language, Sensitivity::default());
            let terms = language::words(value.text)
                .into_iter()
                .filter_map(|word| cache.term(&tokenizer, value.language, word));
            score_terms(terms, value.text, value.weight, &mut scores);
        }
        Ok(scores
            .into_iter()
            .map(|(term, score)| Self::scored_key(&prefix, &term, score))
            .collect())
    }
}

/// The terms words become (per language, default sensitivity), remembered while one thread
/// keys many documents for a text index: folding and stemming every occurrence of a word again
/// was most of building a text index.
pub(crate) struct TermCache {
    terms: Vec<(Language, LanguageTerms)>,
    /// How many more words may be remembered (bounds the memory a huge vocabulary takes).
    room: usize,
}

/// One language's remembered words: each word's term, `None` for a stop word.
type LanguageTerms = std::collections::HashMap<Box<str>, Option<std::sync::Arc<str>>>;

/// Words a [`TermCache`] remembers at most.
const TERM_CACHE_WORDS: usize = 200_000;

impl Default for TermCache {
    fn default() -> Self {
        TermCache {
            terms: Vec::new(),
            room: TERM_CACHE_WORDS,
        }
    }
}

impl TermCache {
    /// A cache that remembers nothing (keying one document).
    pub(crate) fn disabled() -> TermCache {
        TermCache {
            terms: Vec::new(),
            room: 0,
        }
    }

    /// [`Tokenizer::term`] of `word`; `tokenizer` must be for `language` and the default
    /// sensitivity.
    fn term(
        &mut self,
        tokenizer: &Tokenizer,
        language: Language,
        word: &str,
    ) -> Option<std::sync::Arc<str>> {
        if self.room == 0 {
            return tokenizer.term(word).map(std::sync::Arc::from);
        }
        let position = match self.terms.iter().position(|(l, _)| *l == language) {
            Some(p) => p,
            None => {
                self.terms.push((language, Default::default()));
                self.terms.len() - 1
            }
        };
        let words = &mut self.terms[position].1;
        if let Some(term) = words.get(word) {
            return term.clone();
        }
        let term: Option<std::sync::Arc<str>> = tokenizer.term(word).map(std::sync::Arc::from);
        self.room -= 1;
        words.insert(Box::from(word), term.clone());
        term
    }
}

/// MongoDB's `_scoreStringV2` (see [`TextIndex::term_scores`]).
fn score_string(tokenizer: &Tokenizer, raw: &str, weight: f64, scores: &mut BTreeMap<String, f64>) {
    score_terms(tokenizer.terms(raw).into_iter(), raw, weight, scores);
}

/// [`score_string`] of the string `raw`, given the terms its words become, in order.
fn score_terms<T: Ord + AsRef<str>>(
    raw_terms: impl Iterator<Item = T>,
    raw: &str,
    weight: f64,
    scores: &mut BTreeMap<String, f64>,
) {
    struct Helper {
        count: u32,
        exp: f64,
        freq: f64,
    }
    let mut terms: BTreeMap<T, Helper> = BTreeMap::new();
    let mut num_tokens = 0u32;
    for term in raw_terms {
        let h = terms.entry(term).or_insert(Helper {
            count: 0,
            exp: 0.0,
            freq: 0.0,
        });
        h.exp = if h.exp == 0.0 { 1.0 } else { h.exp * 2.0 };
        h.count += 1;
        h.freq += 1.0 / h.exp;
        num_tokens += 1;
    }
    for (term, h) in terms {
        let term = term.as_ref();
        let coeff = 0.5 * f64::from(h.count) / f64::from(num_tokens) + 0.5;
        let adjustment = if raw.len() == term.len() && raw.to_lowercase() == term.to_lowercase() {
            1.1
        } else {
            1.0
        };
        *scores.entry(term.to_string()).or_insert(0.0) += weight * h.freq * coeff * adjustment;
    }
}

/// `explain`'s description of a text query's plan.
pub(crate) fn describe_plan(
    index_name: &str,
    key: &Document,
    prefix: &Document,
    parsed: Document,
    terms: usize,
) -> Document {
    let scans: Vec<Bson> = (0..terms.max(1))
        .map(|_| {
            Bson::Document(doc! {
                "stage": "IXSCAN",
                "keyPattern": key.clone(),
                "indexName": index_name,
                "isMultiKey": true,
                "isUnique": false,
                "isSparse": false,
                "isPartial": false,
                "indexVersion": 2,
                "direction": "backward",
            })
        })
        .collect();
    doc! {
        "stage": "TEXT_MATCH",
        "indexPrefix": prefix.clone(),
        "indexName": index_name,
        "parsedTextQuery": parsed,
        "textIndexVersion": TEXT_INDEX_VERSION,
        "inputStage": {
            "stage": "TEXT_OR",
            "inputStages": scans,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(key: Document, weights: Option<Document>) -> TextIndex {
        let raw = RawTextOptions {
            weights: weights.map(Bson::Document),
            ..RawTextOptions::default()
        };
        let (key, options) = normalize(&key, &raw).unwrap();
        TextIndex::new(&key, &options).unwrap()
    }

    #[test]
    fn key_patterns_normalise_like_mongod() {
        let (key, options) = normalize(
            &doc! { "shop": 1, "title": "text", "body": "text" },
            &RawTextOptions {
                weights: Some(Bson::Document(doc! { "title": 10 })),
                ..RawTextOptions::default()
            },
        )
        .unwrap();
        assert_eq!(key, doc! { "shop": 1, "_fts": "text", "_ftsx": 1 });
        assert_eq!(options.weights, doc! { "body": 1, "title": 10 });
        assert_eq!(options.default_language, "english");
        assert_eq!(options.language_override, "language");
        let (again, same) = normalize(
            &key,
            &RawTextOptions {
                weights: Some(Bson::Document(options.weights.clone())),
                ..RawTextOptions::default()
            },
        )
        .unwrap();
        assert_eq!((again, same), (key, options));
        let err = normalize(
            &doc! { "a": "text", "b": 1, "c": "text" },
            &RawTextOptions::default(),
        )
        .unwrap_err();
        assert_eq!(err.code_number(), 17389);
        let err = normalize(
            &doc! { "a": "text" },
            &RawTextOptions {
                weights: Some(Bson::Document(doc! { "a": 0 })),
                ..RawTextOptions::default()
            },
        )
        .unwrap_err();
        assert_eq!(err.code_number(), 16674);
    }

    #[test]
    fn scores_follow_mongodbs_formula() {
        let idx = index(
            doc! { "title": "text", "body": "text" },
            Some(doc! { "title": 2 }),
        );
        let scores = idx
            .term_scores(&doc! { "title": "Love", "body": "love me, love my dog" })
            .unwrap();
        // title: one term, weight 2, whole string equals the term: 2 × 1 × 1 × 1.1.
        // body: terms love, love, dog ("me", "my" are stop words): love freq 1.5, coeff
        // 0.5 × 2/3 + 0.5; dog freq 1, coeff 0.5 × 1/3 + 0.5.
        let love = 2.0 * 1.1 + 1.5 * (0.5 * 2.0 / 3.0 + 0.5);
        assert!((scores["love"] - love).abs() < 1e-12);
        assert!((scores["dog"] - (0.5 / 3.0 + 0.5)).abs() < 1e-12);
        assert_eq!(scores.len(), 2);
    }

    #[test]
    fn updates_that_leave_the_text_alone_are_recognised() {
        let (key, options) = normalize(
            &doc! { "shop": 1, "title": "text" },
            &RawTextOptions::default(),
        )
        .unwrap();
        let idx = TextIndex::new(&key, &options).unwrap();
        let old = doc! { "shop": "a", "title": "Blue", "qty": 1 };
        assert!(idx.same_input(&old, &doc! { "shop": "a", "title": "Blue", "qty": 2 }));
        assert!(!idx.same_input(&old, &doc! { "shop": "a", "title": "Red", "qty": 1 }));
        assert!(!idx.same_input(&old, &doc! { "shop": "b", "title": "Blue", "qty": 1 }));
        assert!(!idx.same_input(
            &old,
            &doc! { "shop": "a", "title": "Blue", "language": "spanish" }
        ));
    }

    #[test]
    fn values_follow_arrays_embedded_documents_and_language_overrides() {
        let idx = index(doc! { "$**": "text" }, None);
        let d = doc! {
            "a": "one", "n": 5, "tags": ["x", { "b": "two", "language": "spanish" }],
        };
        let values = idx.values(&d).unwrap();
        let texts: Vec<_> = values.iter().map(|v| (v.text, v.language)).collect();
        assert_eq!(
            texts,
            vec![
                ("one", Language::English),
                ("x", Language::English),
                ("two", Language::Spanish),
                ("spanish", Language::Spanish),
            ]
        );
        let err = idx.values(&doc! { "language": 1 }).unwrap_err();
        assert_eq!(err.code_number(), 17261);
        let err = idx.values(&doc! { "language": "klingon" }).unwrap_err();
        assert_eq!(err.code_number(), 17262);
    }
}
