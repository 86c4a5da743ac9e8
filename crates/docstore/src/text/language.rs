//! Text search languages and the tokenizer: how a string becomes index terms, as mongod's
//! text indexes (version 3) make them.
//!
//! A string is split into words at mongod's delimiters ([`delimiters`]: Unicode's white space,
//! dashes, hyphens, quotation marks, terminal punctuation and pattern syntax; everything else,
//! `_`, `™` and emoji included, belongs to words; an ASCII apostrophe inside a word belongs to
//! it, so "don't" is one word). Each word is lower-cased (unless the query is case-sensitive),
//! dropped if it is a stop word of its language, stemmed with that language's Snowball stemmer
//! (the stemmers MongoDB uses: "loves", "loved" and "loving" all become the term "love"), and
//! then stripped of its diacritics ([`diacritics`], unless the query is diacritic-sensitive),
//! in mongod's order.

mod delimiters;
mod diacritics;

use delimiters::is_delimiter;
use rust_stemmers::{Algorithm, Stemmer};
use std::borrow::Cow;

/// A language of MongoDB's text search (text index version 3). `None` indexes words as they
/// are: no stop words, no stemming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    None,
    Danish,
    Dutch,
    English,
    Finnish,
    French,
    German,
    Hungarian,
    Italian,
    Norwegian,
    Portuguese,
    Romanian,
    Russian,
    Spanish,
    Swedish,
    Turkish,
}

/// (name, ISO 639-1 code, language), as MongoDB accepts them.
const LANGUAGES: &[(&str, &str, Language)] = &[
    ("none", "none", Language::None),
    ("danish", "da", Language::Danish),
    ("dutch", "nl", Language::Dutch),
    ("english", "en", Language::English),
    ("finnish", "fi", Language::Finnish),
    ("french", "fr", Language::French),
    ("german", "de", Language::German),
    ("hungarian", "hu", Language::Hungarian),
    ("italian", "it", Language::Italian),
    ("norwegian", "nb", Language::Norwegian),
    ("portuguese", "pt", Language::Portuguese),
    ("romanian", "ro", Language::Romanian),
    ("russian", "ru", Language::Russian),
    ("spanish", "es", Language::Spanish),
    ("swedish", "sv", Language::Swedish),
    ("turkish", "tr", Language::Turkish),
];

/// MongoDB's English stop words (the Snowball list with its contractions).
#[rustfmt::skip]
const ENGLISH_STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
    "but", "by", "can't", "cannot", "could", "couldn't", "did", "didn't", "do", "does",
    "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further",
    "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll",
    "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how",
    "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it",
    "it's", "its", "itself", "let's", "me", "more", "most", "mustn't", "my", "myself", "no",
    "nor", "not", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours",
    "ourselves", "out", "over", "own", "same", "shan't", "she", "she'd", "she'll", "she's",
    "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their",
    "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd",
    "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "were", "weren't",
    "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's",
    "whom", "why", "why's", "with", "won't", "would", "wouldn't", "you", "you'd", "you'll",
    "you're", "you've", "your", "yours", "yourself", "yourselves",
];

impl Language {
    /// A language by name or two-letter code, case-insensitively (`None` if unsupported).
    pub fn parse(name: &str) -> Option<Language> {
        let lower = name.to_lowercase();
        LANGUAGES
            .iter()
            .find(|(n, code, _)| *n == lower || *code == lower)
            .map(|(_, _, l)| *l)
    }

    /// The error MongoDB gives for a language it does not support.
    pub(crate) fn unsupported(name: &str) -> String {
        format!("unsupported language: \"{name}\" for text index version 3")
    }

    fn algorithm(self) -> Option<Algorithm> {
        Some(match self {
            Language::None => return None,
            Language::Danish => Algorithm::Danish,
            Language::Dutch => Algorithm::Dutch,
            Language::English => Algorithm::English,
            Language::Finnish => Algorithm::Finnish,
            Language::French => Algorithm::French,
            Language::German => Algorithm::German,
            Language::Hungarian => Algorithm::Hungarian,
            Language::Italian => Algorithm::Italian,
            Language::Norwegian => Algorithm::Norwegian,
            Language::Portuguese => Algorithm::Portuguese,
            Language::Romanian => Algorithm::Romanian,
            Language::Russian => Algorithm::Russian,
            Language::Spanish => Algorithm::Spanish,
            Language::Swedish => Algorithm::Swedish,
            Language::Turkish => Algorithm::Turkish,
        })
    }

    /// Whether `lower` (lower-cased, diacritics kept, as mongod checks it) is a stop word. Only
    /// English has a stop word list in docstore (see the crate README).
    pub(crate) fn is_stop_word(self, lower: &str) -> bool {
        self == Language::English && ENGLISH_STOP_WORDS.binary_search(&lower).is_ok()
    }
}

/// How words are folded before they are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sensitivity {
    pub case: bool,
    pub diacritics: bool,
}

/// Lower-case (unless case-sensitive) and strip diacritics (unless diacritic-sensitive), as
/// mongod's `caseFoldAndStripDiacritics` does for phrases: character by character, mongod's
/// diacritics (Unicode 8.0.0's `Diacritic` property; ASCII's two, `^` and `` ` ``, included)
/// dropped and the characters that decompose to a letter and diacritics replaced by that
/// letter.
pub fn fold(text: &str, sensitivity: Sensitivity) -> String {
    if sensitivity.case && sensitivity.diacritics {
        return text.to_string();
    }
    // ASCII without `^` or `` ` `` only changes case: byte for byte, without looking anything
    // up (most of checking a phrase against a candidate's text).
    if text.is_ascii() && (sensitivity.diacritics || !text.contains(['^', '`'])) {
        return if sensitivity.case {
            text.to_string()
        } else {
            text.to_ascii_lowercase()
        };
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let c = if sensitivity.case { c } else { lower(c) };
        if sensitivity.diacritics {
            out.push(c);
        } else if let Some(c) = diacritics::without_diacritics(c) {
            out.push(c);
        }
    }
    out
}

/// `c` lower-cased one character for one, as mongod's `codepointToLower` (in its normal,
/// not Turkish, mode) leaves `İ` as it is rather than lower-casing it to two characters.
/// Whether `c` lies in one of `ranges`: sorted, disjoint, inclusive code point ranges (the
/// Unicode property tables of [`delimiters`] and [`diacritics`]).
fn in_ranges(ranges: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    ranges
        .binary_search_by(|&(first, last)| {
            if last < c {
                std::cmp::Ordering::Less
            } else if first > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

fn lower(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let mut lowered = c.to_lowercase();
    match (lowered.next(), lowered.next()) {
        (Some(one), None) => one,
        _ => c,
    }
}

/// Characters that belong to words: every one but mongod's delimiters, under the English rule
/// (the ASCII apostrophe belongs to words; see [`words`]).
pub(crate) fn is_word_char(c: char) -> bool {
    !is_delimiter(c)
}

/// The words of `text` in order: runs of characters between mongod's delimiters, under its
/// English rule (an ASCII apostrophe belongs to the word; mongod's other languages split at
/// it), with apostrophes at either end trimmed (mongod's English stemmer drops them, and in the
/// other languages they delimit).
pub fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_word(text, |start, end| out.push(&text[start..end]));
    out
}

/// Where the words of [`words`] are in `text`: their byte ranges, in order, for a caller that
/// marks them in the text (search results highlight matched words with these).
pub fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for_each_word(text, |start, end| out.push((start, end)));
    out
}

/// Call `found` with the byte range of each word of `text`, in order: runs of word characters
/// without the apostrophes at either end (a quoting `'word'` is the word), unless nothing is
/// left of them.
fn for_each_word(text: &str, mut found: impl FnMut(usize, usize)) {
    let is_apostrophe = |c: char| c == '\'';
    let mut trimmed = |start: usize, end: usize| {
        let word = &text[start..end];
        let leading = word.len() - word.trim_start_matches(is_apostrophe).len();
        let trailing = word.len() - word.trim_end_matches(is_apostrophe).len();
        if leading + trailing < word.len() {
            found(start + leading, end - trailing);
        }
    };
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (is_word_char(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                trimmed(s, i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        trimmed(s, text.len());
    }
}

/// Turns words into terms for one language and one sensitivity.
pub struct Tokenizer {
    language: Language,
    stemmer: Option<Stemmer>,
    sensitivity: Sensitivity,
}

impl Tokenizer {
    pub fn new(language: Language, sensitivity: Sensitivity) -> Tokenizer {
        Tokenizer {
            language,
            stemmer: language.algorithm().map(Stemmer::create),
            sensitivity,
        }
    }

    /// The term a word becomes, or `None` for a stop word: in mongod's order, lower-cased,
    /// checked against the stop words, stemmed (the word as written when case-sensitive), then
    /// stripped of its diacritics (unless diacritic-sensitive).
    pub fn term(&self, word: &str) -> Option<String> {
        let lower = fold(
            word,
            Sensitivity {
                case: false,
                diacritics: true,
            },
        );
        if self.language.is_stop_word(&lower) {
            return None;
        }
        let cased = if self.sensitivity.case { word } else { &lower };
        let stemmed = match &self.stemmer {
            Some(stemmer) => stemmer.stem(cased),
            None => Cow::Borrowed(cased),
        };
        Some(if self.sensitivity.diacritics {
            stemmed.into_owned()
        } else {
            fold(
                &stemmed,
                Sensitivity {
                    case: true,
                    diacritics: false,
                },
            )
        })
    }

    /// The terms of `text`, in order, stop words left out.
    pub fn terms(&self, text: &str) -> Vec<String> {
        words(text)
            .into_iter()
            .filter_map(|w| self.term(w))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_word_list_is_sorted_for_binary_search() {
        assert!(ENGLISH_STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn english_words_are_folded_stemmed_and_stop_words_dropped() {
        let t = Tokenizer::new(Language::English, Sensitivity::default());
        assert_eq!(
            t.terms("The Lovers LOVED loving it, don't they? Café-crème"),
            vec!["lover", "love", "love", "cafe", "creme"]
        );
        let none = Tokenizer::new(Language::None, Sensitivity::default());
        assert_eq!(none.terms("the Loves"), vec!["the", "loves"]);
        let sensitive = Tokenizer::new(
            Language::None,
            Sensitivity {
                case: true,
                diacritics: true,
            },
        );
        assert_eq!(sensitive.terms("Café"), vec!["Café"]);
    }

    #[test]
    fn words_split_at_mongods_delimiters_only() {
        // `_`, `™`, `¨` and emoji are word characters in mongod; `^`, `` ` ``, `©`, `’` and
        // dashes are delimiters.
        assert_eq!(
            words("snake_case rock\u{2122} \u{1F3B8}guitar a^b c`d \u{00A9}2024 x\u{00A8}y"),
            vec![
                "snake_case",
                "rock\u{2122}",
                "\u{1F3B8}guitar",
                "a",
                "b",
                "c",
                "d",
                "2024",
                "x\u{00A8}y"
            ]
        );
        assert_eq!(
            words("don\u{2019}t stop\u{2014}now"),
            vec!["don", "t", "stop", "now"]
        );
        let t = Tokenizer::new(Language::None, Sensitivity::default());
        // The diaeresis inside the word is a diacritic: stripped from the term.
        assert_eq!(t.terms("x\u{00A8}y don\u{2019}t"), vec!["xy", "don", "t"]);
    }

    #[test]
    fn folding_drops_mongods_diacritics_only() {
        let insensitive = Sensitivity::default();
        assert_eq!(fold("A^b`C", insensitive), "abc");
        assert_eq!(fold("Crème Brûlée", insensitive), "creme brulee");
        // No decomposition: kept, as in mongod.
        assert_eq!(fold("Øl Łódź", insensitive), "øl łodz");
        // A Devanagari vowel sign is no diacritic: kept.
        assert_eq!(fold("\u{0915}\u{093F}", insensitive), "\u{0915}\u{093F}");
        let keep_diacritics = Sensitivity {
            case: false,
            diacritics: true,
        };
        assert_eq!(fold("A^b`É", keep_diacritics), "a^b`é");
        let keep_case = Sensitivity {
            case: true,
            diacritics: false,
        };
        assert_eq!(fold("É^", keep_case), "E");
        let sensitive = Tokenizer::new(Language::None, keep_case);
        assert_eq!(sensitive.terms("Café"), vec!["Cafe"]);
    }

    #[test]
    fn languages_parse_by_name_or_code() {
        assert_eq!(Language::parse("English"), Some(Language::English));
        assert_eq!(Language::parse("es"), Some(Language::Spanish));
        assert_eq!(Language::parse("klingon"), None);
    }

    #[test]
    fn word_spans_are_where_the_words_are_without_quoting_apostrophes() {
        let text = "'Tis Zoë's \u{2018}café' -- don't ''";
        let spans = word_spans(text);
        let at: Vec<&str> = spans.iter().map(|&(s, e)| &text[s..e]).collect();
        assert_eq!(at, vec!["Tis", "Zoë's", "café", "don't"]);
        assert_eq!(at, words(text));
        assert!(word_spans("-- '' ").is_empty());
    }
}
