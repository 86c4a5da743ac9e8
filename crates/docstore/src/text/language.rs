//! Text search languages and the tokenizer: how a string becomes index terms.
//!
//! A string is split into words at delimiters (whitespace and punctuation; an apostrophe inside
//! a word belongs to it, so "don't" is one word). Each word is folded (lower-cased and stripped of
//! diacritics unless the query asks to keep them), dropped if it is a stop word of its language,
//! and stemmed with that language's Snowball stemmer (the stemmers MongoDB uses): "loves",
//! "loved" and "loving" all become the term "love".

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

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

    /// Whether `folded` (lower-case, without diacritics) is a stop word. Only English has a
    /// stop word list in docstore (see the crate README).
    pub(crate) fn is_stop_word(self, folded: &str) -> bool {
        self == Language::English && ENGLISH_STOP_WORDS.binary_search(&folded).is_ok()
    }
}

/// How words are folded before they are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sensitivity {
    pub case: bool,
    pub diacritics: bool,
}

/// Lower-case (unless case-sensitive) and strip diacritics (unless diacritic-sensitive).
pub fn fold(text: &str, sensitivity: Sensitivity) -> String {
    // ASCII has no diacritics and lower-cases byte for byte: the same result without the
    // Unicode normalisation, which was most of checking a phrase against a candidate's text.
    if text.is_ascii() {
        return if sensitivity.case {
            text.to_string()
        } else {
            text.to_ascii_lowercase()
        };
    }
    let cased: String = if sensitivity.case {
        text.to_string()
    } else {
        text.to_lowercase()
    };
    if sensitivity.diacritics {
        cased
    } else {
        cased
            .nfd()
            .filter(|c| !is_combining_mark(*c))
            .nfc()
            .collect()
    }
}

/// Characters that belong to words; everything else delimits them.
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '\'' || c == '\u{2019}' || is_combining_mark(c)
}

/// The words of `text` in order (apostrophes at either end trimmed).
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
    let is_apostrophe = |c: char| c == '\'' || c == '\u{2019}';
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

    /// The term a word becomes, or `None` for a stop word.
    pub fn term(&self, word: &str) -> Option<String> {
        let insensitive = fold(word, Sensitivity::default());
        if self
            .language
            .is_stop_word(&insensitive.replace('\u{2019}', "'"))
        {
            return None;
        }
        let folded = if self.sensitivity == Sensitivity::default() {
            insensitive
        } else {
            fold(word, self.sensitivity)
        };
        Some(match &self.stemmer {
            Some(stemmer) => stemmer.stem(&folded).into_owned(),
            None => folded,
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
