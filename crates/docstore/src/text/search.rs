//! `$text` queries: the `{$search, $language, $caseSensitive, $diacriticSensitive}` argument,
//! the search string's terms, `-negated` terms, `"phrases"` and `-"negated phrases"`, and
//! matching and scoring documents against them.
//!
//! The search string is read as MongoDB reads it: words become terms (folded, stop words left
//! out, stemmed in the query's language); a `-` directly before a word (after whitespace or at
//! the start) negates that word; text between double quotes is a phrase whose words also count
//! as terms (unless the phrase is negated); a quote left open runs to the end of the string.
//! A document matches when it has at least one term, none of the negated terms, every phrase
//! and none of the negated phrases (phrases are substrings of one indexed string, compared
//! case- and diacritic-insensitively unless the query asks otherwise).

use super::language::{fold, words, Language, Sensitivity, Tokenizer};
use super::{StoredString, TextIndex, TextValue};
use crate::error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

/// The validated argument of `$text`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextSearch {
    pub search: String,
    pub language: Option<String>,
    pub sensitivity: Sensitivity,
}

impl TextSearch {
    /// Parse `{$search, $language?, $caseSensitive?, $diacriticSensitive?}` with MongoDB's
    /// errors.
    pub(crate) fn parse(value: &Bson) -> Result<TextSearch> {
        let Bson::Document(args) = value else {
            return Err(Error::bad_value("$text expects an object"));
        };
        let mut search = None;
        let mut language = None;
        let mut sensitivity = Sensitivity::default();
        for (key, arg) in args {
            match key.as_str() {
                "$search" => match arg {
                    Bson::String(s) => search = Some(s.clone()),
                    other => return Err(wrong_type(key, "string", other)),
                },
                "$language" => match arg {
                    Bson::String(s) => {
                        if Language::parse(s).is_none() {
                            return Err(Error::bad_value(Language::unsupported(s)));
                        }
                        language = Some(s.clone());
                    }
                    _ => return Err(Error::type_mismatch("$language requires a string value")),
                },
                "$caseSensitive" => match arg {
                    Bson::Boolean(b) => sensitivity.case = *b,
                    other => return Err(wrong_type(key, "boolean", other)),
                },
                "$diacriticSensitive" => match arg {
                    Bson::Boolean(b) => sensitivity.diacritics = *b,
                    other => return Err(wrong_type(key, "boolean", other)),
                },
                _ => return Err(Error::bad_value("extra fields in $text")),
            }
        }
        let Some(search) = search else {
            return Err(Error::new(
                ErrorCode::NoSuchKey,
                "Missing expected field \"$search\"",
            ));
        };
        Ok(TextSearch {
            search,
            language,
            sensitivity,
        })
    }
}

fn wrong_type(field: &str, expected: &str, got: &Bson) -> Error {
    Error::type_mismatch(format!(
        "\"{field}\" had the wrong type. Expected {expected}, found {}",
        crate::value::type_name(got)
    ))
}

/// A search string broken into its parts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedQuery {
    pub terms: BTreeSet<String>,
    pub negated_terms: BTreeSet<String>,
    pub phrases: Vec<String>,
    pub negated_phrases: Vec<String>,
}

impl ParsedQuery {
    pub fn parse(search: &str, language: Language, sensitivity: Sensitivity) -> ParsedQuery {
        let tokenizer = Tokenizer::new(language, sensitivity);
        let mut parsed = ParsedQuery::default();
        let add = |text: &str, negated: bool, parsed: &mut ParsedQuery| {
            for word in words(text) {
                if let Some(term) = tokenizer.term(word) {
                    if negated {
                        parsed.negated_terms.insert(term);
                    } else {
                        parsed.terms.insert(term);
                    }
                }
            }
        };
        let mut in_phrase = false;
        let mut phrase_negated = false;
        let mut phrase_start = 0;
        let mut in_negation = false;
        let mut after_space = true;
        let mut word_start: Option<usize> = None;
        let chars: Vec<(usize, char)> = search.char_indices().collect();
        for (n, &(i, c)) in chars.iter().enumerate() {
            let word_char = super::language::is_word_char(c);
            if word_char {
                if word_start.is_none() {
                    word_start = Some(i);
                }
                let ends = chars
                    .get(n + 1)
                    .is_none_or(|(_, next)| !super::language::is_word_char(*next));
                if ends {
                    let start = word_start.take().unwrap_or(i);
                    let word = &search[start..i + c.len_utf8()];
                    if in_phrase {
                        if !phrase_negated {
                            add(word, false, &mut parsed);
                        }
                    } else {
                        add(word, in_negation, &mut parsed);
                    }
                }
                after_space = false;
                continue;
            }
            match c {
                '"' => {
                    if in_phrase {
                        push_phrase(&search[phrase_start..i], phrase_negated, &mut parsed);
                        in_phrase = false;
                        in_negation = false;
                    } else {
                        in_phrase = true;
                        phrase_negated = in_negation;
                        phrase_start = i + 1;
                    }
                }
                '-' if !in_phrase && after_space => in_negation = true,
                c if c.is_whitespace() && !in_phrase => in_negation = false,
                _ => {}
            }
            after_space = c.is_whitespace();
        }
        if in_phrase {
            push_phrase(&search[phrase_start..], phrase_negated, &mut parsed);
        }
        if !sensitivity.case {
            for phrase in parsed
                .phrases
                .iter_mut()
                .chain(parsed.negated_phrases.iter_mut())
            {
                *phrase = phrase.to_lowercase();
            }
        }
        parsed
    }

    /// `explain`'s `parsedTextQuery`.
    pub(crate) fn to_document(&self) -> Document {
        doc! {
            "terms": self.terms.iter().cloned().collect::<Vec<_>>(),
            "negatedTerms": self.negated_terms.iter().cloned().collect::<Vec<_>>(),
            "phrases": self.phrases.clone(),
            "negatedPhrases": self.negated_phrases.clone(),
        }
    }
}

fn push_phrase(phrase: &str, negated: bool, parsed: &mut ParsedQuery) {
    if phrase.trim().is_empty() {
        return;
    }
    if negated {
        parsed.negated_phrases.push(phrase.to_string());
    } else {
        parsed.phrases.push(phrase.to_string());
    }
}

/// A `$text` query bound to the collection's text index.
#[derive(Debug)]
pub(crate) struct BoundText {
    pub index: TextIndex,
    pub query: ParsedQuery,
    /// The query's terms as the index holds them (case- and diacritic-insensitive): what the
    /// index is searched for and what the score counts.
    pub index_terms: BTreeSet<String>,
    sensitivity: Sensitivity,
    /// The query's phrases and negated phrases folded as the indexed strings are compared
    /// (once per query, not once per candidate string).
    folded_phrases: Vec<String>,
    folded_negated_phrases: Vec<String>,
}

impl BoundText {
    /// Whether `doc` matches (see the module documentation). A document whose text cannot be
    /// read (a bad language override) does not match.
    pub(crate) fn matches(&self, doc: &Document) -> bool {
        let Ok(values) = self.index.values(doc) else {
            return false;
        };
        let mut terms = BTreeSet::new();
        for value in &values {
            let tokenizer = Tokenizer::new(value.language, self.sensitivity);
            terms.extend(tokenizer.terms(value.text));
        }
        if !self.query.terms.iter().any(|t| terms.contains(t)) {
            return false;
        }
        if self.query.negated_terms.iter().any(|t| terms.contains(t)) {
            return false;
        }
        self.phrases_hold(&values)
    }

    /// Whether the index's posting lists decide the query's terms: a document matches its
    /// positive terms exactly when the index holds one of [`BoundText::index_terms`] for it,
    /// and its negated terms exactly when the index holds one of them. True for the default
    /// (insensitive) matching, the form the index keeps its terms in; phrases are left to
    /// [`BoundText::phrases_match`].
    pub(crate) fn postings_decide_terms(&self) -> bool {
        self.sensitivity == Sensitivity::default() && self.index_terms == self.query.terms
    }

    /// Whether the query has phrases or negated phrases (which need the document's text).
    pub(crate) fn has_phrases(&self) -> bool {
        !self.query.phrases.is_empty() || !self.query.negated_phrases.is_empty()
    }

    /// Whether the indexed strings `values` hold every phrase and none of the negated phrases
    /// (folded like the query: case and diacritics as the query's sensitivity says).
    fn phrases_hold(&self, values: &[TextValue<'_>]) -> bool {
        let mut found = PhrasesFound::new(self);
        for value in values {
            found.see(self, value.text.into());
        }
        found.hold()
    }

    /// [`BoundText::phrases_match`] read from the stored bytes: only the strings the index
    /// covers are looked at, an ASCII one compared byte by byte (folding ASCII is lowering its
    /// case), and nothing is decoded. `None` when the bytes cannot decide (see
    /// [`TextIndex::visit_stored_strings`]): ask [`BoundText::phrases_match`] then.
    pub(crate) fn phrases_match_stored(&self, doc: &crate::stored::StoredDoc) -> Option<bool> {
        if !self.has_phrases() {
            return Some(true);
        }
        let mut found = PhrasesFound::new(self);
        self.index
            .visit_stored_strings(doc, &mut |text| found.see(self, text))?;
        Some(found.hold())
    }

    /// The phrase part of [`BoundText::matches`] alone: `doc` holds every phrase and none of
    /// the negated phrases. Folding the indexed strings is all it reads; tokenizing and
    /// stemming them (what checking the terms takes) is left to the index.
    pub(crate) fn phrases_match(&self, doc: &Document) -> bool {
        if !self.has_phrases() {
            return true;
        }
        let Ok(values) = self.index.values(doc) else {
            return false;
        };
        self.phrases_hold(&values)
    }

    /// The document's text score: the sum over the query's distinct terms of their scores in
    /// the document (see [`TextIndex::term_scores`]).
    pub(crate) fn score(&self, doc: &Document) -> f64 {
        let Ok(scores) = self.index.term_scores(doc) else {
            return 0.0;
        };
        self.index_terms.iter().filter_map(|t| scores.get(t)).sum()
    }
}

/// Which of a query's phrases the indexed strings seen so far hold ([`BoundText::phrases_hold`],
/// [`BoundText::phrases_match_stored`]).
struct PhrasesFound {
    /// Per phrase: held by a string seen.
    phrases: Vec<bool>,
    /// A negated phrase is held by a string seen.
    negated: bool,
}

impl PhrasesFound {
    fn new(bound: &BoundText) -> PhrasesFound {
        PhrasesFound {
            phrases: vec![false; bound.folded_phrases.len()],
            negated: false,
        }
    }

    /// Look for the phrases in one indexed string: `fold(text).contains(phrase)` for each
    /// folded phrase, where an ASCII `text` is compared as it is (folding it only changes its
    /// ASCII case, and an ASCII string holds no folded phrase that is not ASCII).
    fn see(&mut self, bound: &BoundText, text: StoredString<'_>) {
        let text = match text {
            StoredString::Ascii(bytes) => bytes,
            StoredString::Other(text) => {
                let folded = fold(text, bound.sensitivity);
                let holds = |phrase: &String| folded.contains(phrase.as_str());
                return self.record(bound, holds);
            }
        };
        let holds = |phrase: &String| {
            phrase.is_ascii()
                && if bound.sensitivity.case {
                    memchr::memmem::find(text, phrase.as_bytes()).is_some()
                } else {
                    holds_ascii_phrase(text, phrase.as_bytes())
                }
        };
        self.record(bound, holds);
    }

    /// Note the phrases `holds` says one string holds.
    fn record(&mut self, bound: &BoundText, holds: impl Fn(&String) -> bool) {
        for (held, phrase) in self.phrases.iter_mut().zip(&bound.folded_phrases) {
            *held = *held || holds(phrase);
        }
        self.negated = self.negated || bound.folded_negated_phrases.iter().any(holds);
    }

    /// Every phrase held and no negated one.
    fn hold(&self) -> bool {
        self.phrases.iter().all(|held| *held) && !self.negated
    }
}

/// Whether the ASCII `text` holds the non-empty ASCII `needle`, ASCII case aside. Only the
/// places where the needle's rarest byte (in either case, see [`anchor`]) occurs are
/// compared, found with `memchr`: phrase candidates are turned away by this scan over their
/// strings, and comparing a window at every byte was a phrase search's largest cost (anchored
/// on the needle's first byte, a phrase starting with "the" stopped at every `t` of a post).
fn holds_ascii_phrase(hay: &[u8], needle: &[u8]) -> bool {
    let Some(at) = anchor(needle) else {
        return true;
    };
    if hay.len() < needle.len() {
        return false;
    }
    let byte = needle[at];
    // A window starting at `start` has the anchor at `start + at`: the anchors looked for lie
    // between `at` and `at + hay.len() - needle.len()`.
    let last_start = hay.len() - needle.len();
    memchr::memchr2_iter(
        byte.to_ascii_lowercase(),
        byte.to_ascii_uppercase(),
        &hay[at..=at + last_start],
    )
    .any(|start| hay[start..start + needle.len()].eq_ignore_ascii_case(needle))
}

/// The index of the byte of `needle` that ordinary text holds least often (ASCII case aside),
/// the first such; `None` for an empty needle. Letters rank by their frequency in English
/// text, space and the common letters highest; other bytes (digits, punctuation) rank with
/// `q`.
fn anchor(needle: &[u8]) -> Option<usize> {
    /// Letters and space from the most to the least frequent in English text.
    const BY_FREQUENCY: &[u8] = b" etaoinshrdlcumwfgypbvkjxqz";
    let rank = |byte: u8| -> usize {
        let lower = byte.to_ascii_lowercase();
        BY_FREQUENCY
            .iter()
            .position(|&b| b == lower)
            .unwrap_or(BY_FREQUENCY.len() - 2)
    };
    (0..needle.len()).min_by_key(|&i| std::cmp::Reverse(rank(needle[i])))
}

/// A `$text` condition inside a parsed filter. It is bound to the collection's text index when
/// the query runs (the filter is parsed before the collection is known).
#[derive(Debug, Clone)]
pub(crate) struct TextFilter {
    pub search: TextSearch,
    bound: OnceLock<Arc<BoundText>>,
}

impl TextFilter {
    pub(crate) fn new(search: TextSearch) -> TextFilter {
        TextFilter {
            search,
            bound: OnceLock::new(),
        }
    }

    /// Bind to `index` (the first binding wins; a filter runs against one collection).
    pub(crate) fn bind(&self, index: &TextIndex) -> Arc<BoundText> {
        Arc::clone(self.bound.get_or_init(|| {
            let language = self
                .search
                .language
                .as_deref()
                .and_then(Language::parse)
                .unwrap_or(index.default_language);
            let query = ParsedQuery::parse(&self.search.search, language, self.search.sensitivity);
            let index_terms = if self.search.sensitivity == Sensitivity::default() {
                query.terms.clone()
            } else {
                ParsedQuery::parse(&self.search.search, language, Sensitivity::default()).terms
            };
            let sensitivity = self.search.sensitivity;
            let folded = |phrases: &[String]| -> Vec<String> {
                phrases.iter().map(|p| fold(p, sensitivity)).collect()
            };
            Arc::new(BoundText {
                index: index.clone(),
                folded_phrases: folded(&query.phrases),
                folded_negated_phrases: folded(&query.negated_phrases),
                query,
                index_terms,
                sensitivity,
            })
        }))
    }

    pub(crate) fn bound(&self) -> Option<&Arc<BoundText>> {
        self.bound.get()
    }

    /// Unbound (no text index was found), nothing matches; the query fails before matching.
    pub(crate) fn matches(&self, doc: &Document) -> bool {
        self.bound().is_some_and(|b| b.matches(doc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> ParsedQuery {
        ParsedQuery::parse(s, Language::English, Sensitivity::default())
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// A text index over `title` and `body.text` (through arrays), or over every string.
    fn bound(search: &str, sensitivity: Sensitivity, wildcard: bool) -> Arc<BoundText> {
        let key = if wildcard {
            doc! { "$**": "text" }
        } else {
            doc! { "title": "text", "body.text": "text" }
        };
        let (key, options) =
            super::super::normalize(&key, &super::super::RawTextOptions::default()).unwrap();
        let index = TextIndex::new(&key, &options).unwrap();
        TextFilter::new(TextSearch {
            search: search.to_string(),
            language: None,
            sensitivity,
        })
        .bind(&index)
    }

    #[test]
    fn phrases_read_from_the_stored_bytes_agree_with_the_decoded_document() {
        let docs = [
            doc! { "title": "Kind of Blue", "sku": "kind of blue" },
            doc! { "title": "x", "sku": "Kind of Blue", "body": { "text": "so kind of bluest" } },
            doc! { "title": "x", "body": [{ "text": "KIND OF BLUE" }, { "text": 3 }] },
            doc! { "title": ["Café Society", "kind  of blue"], "body": { "note": "kind of blue" } },
            doc! { "title": "CAFÉ SOCIETY, the second chorus", "body": { "text": "Kind Of Blue" } },
            doc! { "title": "cafe\u{301} society", "body": { "text": ["a", ["the second chorus"]] } },
            doc! { "title": "the second", "body": { "text": "chorus" } },
            doc! { "other": "kind of blue the second chorus" },
            // An indexed path holding a document, and strings under unindexed paths of an
            // indexed field's parent: neither is indexed.
            doc! { "title": { "x": "kind of blue" }, "body": { "note": ["the second chorus"], "text": [{ "text": "kind of blue" }] } },
            doc! { "n": 1.5, "when": bson::DateTime::from_millis(7), "title": ["x", 3, null, { "a": "the second chorus" }], "body": [{ "text": "Kind of blue" }] },
            doc! {},
        ];
        let searches = [
            "\"kind of blue\"",
            "\"Café society\"",
            "\"cafe society\" -\"second chorus\"",
            "jazz -\"kind of blue\"",
            "\"kind of blue\" \"the second chorus\"",
            "\"société\"",
        ];
        let sensitivities = [
            Sensitivity::default(),
            Sensitivity {
                case: true,
                diacritics: false,
            },
            Sensitivity {
                case: false,
                diacritics: true,
            },
        ];
        for search in searches {
            for sensitivity in sensitivities {
                for wildcard in [false, true] {
                    let bound = bound(search, sensitivity, wildcard);
                    for doc in &docs {
                        let stored = crate::stored::StoredDoc::from_document(doc).unwrap();
                        assert_eq!(
                            bound.phrases_match_stored(&stored),
                            Some(bound.phrases_match(doc)),
                            "{search} {sensitivity:?} wildcard {wildcard} on {doc}"
                        );
                    }
                }
            }
        }
        // The language override anywhere on the way: the decoded document decides.
        let bound = bound("\"kind of blue\"", Sensitivity::default(), false);
        for doc in [
            doc! { "title": "kind of blue", "language": "french" },
            doc! { "title": "kind of blue", "body": { "language": 3, "text": "x" } },
        ] {
            let stored = crate::stored::StoredDoc::from_document(&doc).unwrap();
            assert_eq!(bound.phrases_match_stored(&stored), None, "{doc}");
        }
        assert!(!bound.phrases_match(&doc! { "title": "kind of blue", "language": 3 }));
        // A key holding a dot spells an indexed path with the keys before it (`body.text` at
        // the top, `text.x` under `body` does not): the decoded document decides.
        for (doc, held) in [
            (doc! { "body.text": "kind of blue" }, true),
            (doc! { "body": { "text.x": "kind of blue" } }, false),
        ] {
            let stored = crate::stored::StoredDoc::from_document(&doc).unwrap();
            assert_eq!(bound.phrases_match_stored(&stored), None, "{doc}");
            assert_eq!(bound.phrases_match(&doc), held, "{doc}");
        }
    }

    #[test]
    fn an_ascii_phrase_is_found_in_any_case_and_at_either_end() {
        assert!(holds_ascii_phrase(b"Kind of Blue", b"kind of blue"));
        assert!(holds_ascii_phrase(b"so KIND OF BLUE", b"kind of blue"));
        assert!(holds_ascii_phrase(b"kind of bluest", b"kind of blue"));
        assert!(holds_ascii_phrase(b"a kkind of blue", b"kind of blue"));
        assert!(!holds_ascii_phrase(b"kind of blu", b"kind of blue"));
        assert!(!holds_ascii_phrase(b"kind  of blue", b"kind of blue"));
        assert!(!holds_ascii_phrase(b"", b"kind"));
        assert!(holds_ascii_phrase(b"x", b"X"));
    }

    #[test]
    fn an_ascii_phrase_is_found_wherever_a_window_comparison_finds_it() {
        // Random strings over a few letters (both cases), spaces and a digit: every needle is
        // found exactly where comparing the needle with every window finds it.
        let alphabet = b"aAbBeEtT 1-";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        for _ in 0..20_000 {
            let hay: Vec<u8> = (0..next(24))
                .map(|_| alphabet[next(alphabet.len())])
                .collect();
            let needle: Vec<u8> = (0..1 + next(5))
                .map(|_| alphabet[next(alphabet.len())])
                .collect();
            let windows = hay
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(&needle));
            assert_eq!(
                holds_ascii_phrase(&hay, &needle),
                windows,
                "{:?} in {:?}",
                String::from_utf8_lossy(&needle),
                String::from_utf8_lossy(&hay)
            );
        }
        // The anchor is the rarest byte, the first of equally rare ones.
        assert_eq!(anchor(b"the second chorus"), Some(15));
        assert_eq!(anchor(b"kind of blue"), Some(0));
        assert_eq!(anchor(b"ab1b1"), Some(2));
        assert_eq!(anchor(b""), None);
    }

    #[test]
    fn search_strings_split_into_terms_negations_and_phrases() {
        let p = parse("Loves the -blue \"Red  Sky\" -\"grey day\" sugar-free");
        assert_eq!(p.terms, set(&["love", "red", "sky", "sugar", "free"]));
        assert_eq!(p.negated_terms, set(&["blue"]));
        assert_eq!(p.phrases, vec!["red  sky"]);
        assert_eq!(p.negated_phrases, vec!["grey day"]);
        let open = parse("\"unbalanced quote");
        assert_eq!(open.phrases, vec!["unbalanced quote"]);
        assert_eq!(open.terms, set(&["unbalanc", "quot"]));
        let lone = parse(" - -- \"\" ");
        assert_eq!(lone, ParsedQuery::default());
        let spaced = parse("- blue");
        assert_eq!(spaced.terms, set(&["blue"]));
    }

    #[test]
    fn text_argument_errors_match_mongod() {
        let code = |v: Bson| TextSearch::parse(&v).unwrap_err().code_number();
        assert_eq!(code(Bson::Document(doc! { "$search": 1 })), 14);
        assert_eq!(code(Bson::Document(doc! { "$search": "a", "x": 1 })), 2);
        assert_eq!(
            code(Bson::Document(
                doc! { "$search": "a", "$caseSensitive": "yes" }
            )),
            14
        );
        assert_eq!(
            code(Bson::Document(doc! { "$search": "a", "$language": "xx" })),
            2
        );
        assert_eq!(code(Bson::Int32(1)), 2);
        assert_eq!(code(Bson::Document(doc! { "$language": "en" })), 4);
    }
}
