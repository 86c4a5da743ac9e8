//! The words the text indexes hold, so search can forgive: the last word of a search is
//! completed as people type ("jaz" also looks for "jazz"), and a word the index does not know
//! is answered with "did you mean" the nearest word it does know ("coltrain" → "coltrane",
//! by edit distance over the word list).
//!
//! # Where the word list comes from
//!
//! Neither MongoDB nor the embedded store lets a client read a text index's terms, so the list
//! is made here from the same fields the indexes cover ([`super::PRODUCT_FIELDS`],
//! [`super::NODE_FIELDS`]): one ordinary `find` per collection, projected to those fields,
//! split into words with the tokenizer the search itself uses (stop words left out). That is
//! the same on MongoDB and on the embedded store.
//!
//! # Staleness and cost
//!
//! The list is kept with the [`Db`] handle. A product write through this handle (reported in
//! [`crate::catalog::changes`]) makes the next search rebuild it first when the last build was
//! quick (under [`WAIT_FOR_REBUILD`]: a small shop); a list older than [`TTL`], or stale after
//! a product write in a catalog whose build is slow, is still used while one rebuild runs in
//! the background. So content writes and other instances' writes show up within about
//! [`TTL`], and in a large catalog only the first search after start-up waits for a build
//! (measured with 5,049 products and posts in a debug build: 3 s, once; later searches took
//! 10 to 50 ms as before, the list answering in microseconds). Rebuilds never run twice at
//! once.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::Document;
use docstore::tokenizer::{fold, words, Sensitivity, Tokenizer};
use futures::TryStreamExt;

use super::tokenizer;
use crate::catalog::changes;
use crate::db::{Db, DbError};

/// The longest a word list is used before a rebuild is started.
pub const TTL: Duration = Duration::from_secs(60);
/// A build quicker than this is redone before the next search after a product write; a slower
/// one is redone in the background while the stale list answers.
pub const WAIT_FOR_REBUILD: Duration = Duration::from_millis(250);
/// Words the last word of a search is completed with at most (the most frequent ones).
pub const MAX_COMPLETIONS: usize = 8;
/// Shortest word that is completed: one letter would add half the list.
const MIN_PREFIX_CHARS: usize = 2;
/// Longest word kept in the list (longer ones are codes and addresses, not words to suggest).
const MAX_WORD_CHARS: usize = 40;

/// The words of the searchable fields.
#[derive(Debug, Default)]
pub struct Vocabulary {
    /// Folded words (lower case, no diacritics; stop words left out) and how many field
    /// values hold each.
    words: BTreeMap<String, u32>,
    /// The index terms (stems) of those words: a search word whose stem is here matches
    /// something.
    stems: HashSet<String>,
}

/// A search with its last word completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    /// What is sent to `$text`: the search as typed, then the completions.
    pub text: String,
    pub completions: Vec<String>,
}

impl Vocabulary {
    /// The list of the words in `texts`.
    pub fn of_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vocabulary {
        let tokenizer = tokenizer();
        let mut vocabulary = Vocabulary::default();
        for text in texts {
            let mut seen_here: HashSet<String> = HashSet::new();
            for word in words(text) {
                let Some(stem) = tokenizer.term(word) else {
                    continue;
                };
                let folded = fold(word, Sensitivity::default());
                let chars = folded.chars().count();
                if !(2..=MAX_WORD_CHARS).contains(&chars) {
                    continue;
                }
                vocabulary.stems.insert(stem);
                if seen_here.insert(folded.clone()) {
                    *vocabulary.words.entry(folded).or_insert(0) += 1;
                }
            }
        }
        vocabulary
    }

    /// Distinct words in the list.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Whether the index knows `word` (its stem is one of the index's terms).
    fn knows(&self, tokenizer: &Tokenizer, word: &str) -> bool {
        tokenizer
            .term(word)
            .is_none_or(|stem| self.stems.contains(&stem))
    }

    /// `query` with its last word completed from the list: unless that word is negated
    /// (`-blue`) or inside an unclosed phrase, or shorter than two letters.
    pub fn expand(&self, query: &str) -> Expanded {
        let unchanged = Expanded {
            text: query.to_string(),
            completions: Vec::new(),
        };
        let Some(last) = self.last_word(query) else {
            return unchanged;
        };
        let completions = self.completions(&last);
        if completions.is_empty() {
            return unchanged;
        }
        Expanded {
            text: format!("{query} {}", completions.join(" ")),
            completions,
        }
    }

    /// The last word of `query` if it may be completed, folded.
    fn last_word(&self, query: &str) -> Option<String> {
        // An odd number of quotes: the last word is inside a phrase still being typed.
        if query.matches('"').count() % 2 == 1 {
            return None;
        }
        let token = query.split_whitespace().last()?;
        if token.starts_with('-') || token.ends_with('"') {
            return None;
        }
        let word = *words(token).last()?;
        // A stop word ("of") is left alone: "office" is not what "kind of" was heading for.
        tokenizer().term(word)?;
        let word = fold(word, Sensitivity::default());
        (word.chars().count() >= MIN_PREFIX_CHARS).then_some(word)
    }

    /// Longer words starting with `prefix`, most frequent first (at most [`MAX_COMPLETIONS`]).
    fn completions(&self, prefix: &str) -> Vec<String> {
        let mut found: Vec<(&String, u32)> = self
            .words
            .range::<str, _>((
                std::ops::Bound::Excluded(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(w, _)| w.starts_with(prefix))
            .map(|(w, n)| (w, *n))
            .collect();
        found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        found
            .into_iter()
            .take(MAX_COMPLETIONS)
            .map(|(w, _)| w.clone())
            .collect()
    }

    /// "Did you mean": `query` with each word the index does not know replaced by the nearest
    /// word it does (edit distance 1 for words of up to four letters, else 2; the more
    /// frequent of equally near ones). `None` when every word is known or nothing is near, and
    /// for searches with phrases or negations (their words are not corrected one by one).
    pub fn suggest(&self, query: &str) -> Option<String> {
        if query.contains('"') || query.split_whitespace().any(|t| t.starts_with('-')) {
            return None;
        }
        let tokenizer = tokenizer();
        let typed = words(query);
        let last = typed.len().saturating_sub(1);
        let mut changed = false;
        let mut out = Vec::with_capacity(typed.len());
        for (i, word) in typed.iter().enumerate() {
            let folded = fold(word, Sensitivity::default());
            // A last word still being typed that completes to something is not a mistake.
            let completes = i == last && !self.completions(&folded).is_empty();
            if completes || self.knows(&tokenizer, word) {
                out.push(word.to_string());
                continue;
            }
            match self.nearest(&folded) {
                Some(near) => {
                    changed = true;
                    out.push(near.to_string());
                }
                None => out.push(word.to_string()),
            }
        }
        changed.then(|| out.join(" "))
    }

    /// The nearest word of the list to `word`, within the allowed distance.
    fn nearest(&self, word: &str) -> Option<&str> {
        let typed: Vec<char> = word.chars().collect();
        let limit = if typed.len() <= 4 { 1 } else { 2 };
        let mut best: Option<(usize, u32, &str)> = None;
        for (candidate, &count) in &self.words {
            let length = candidate.chars().count();
            if length.abs_diff(typed.len()) > limit {
                continue;
            }
            let Some(distance) = edit_distance_within(&typed, candidate, limit) else {
                continue;
            };
            let better = match best {
                None => true,
                Some((d, n, _)) => distance < d || (distance == d && count > n),
            };
            if better {
                best = Some((distance, count, candidate.as_str()));
            }
        }
        best.map(|(_, _, w)| w)
    }
}

/// The Levenshtein distance between `a` and `b` if it is at most `limit` (rows stop early
/// once every cell is past the limit).
pub fn edit_distance_within(a: &[char], b: &str, limit: usize) -> Option<usize> {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        let mut row_min = current[0];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
            row_min = row_min.min(current[j + 1]);
        }
        if row_min > limit {
            return None;
        }
        std::mem::swap(&mut previous, &mut current);
    }
    let distance = previous[b.len()];
    (distance <= limit).then_some(distance)
}

/// The word list kept with one [`Db`] handle (a [`Db::extension`]).
#[derive(Default)]
pub struct VocabularyCache {
    held: Mutex<Option<Held>>,
    /// Held while a search builds the list it waits for.
    building: tokio::sync::Mutex<()>,
    /// Set while a background rebuild runs.
    refreshing: AtomicBool,
}

struct Held {
    vocabulary: Arc<Vocabulary>,
    loaded: Instant,
    /// How long the build took.
    took: Duration,
    /// The product change counter when the build started.
    products: u64,
}

/// What the held list is good for.
enum Usable {
    /// Current: use it.
    Fresh(Arc<Vocabulary>),
    /// Use it, and rebuild in the background.
    Stale(Arc<Vocabulary>),
    /// Build before searching.
    Rebuild,
}

impl VocabularyCache {
    /// What the held list is good for at `now`, with `products` the product change counter.
    fn usable(&self, products: u64, now: Instant) -> Usable {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let Some(h) = held.as_ref() else {
            return Usable::Rebuild;
        };
        let vocabulary = Arc::clone(&h.vocabulary);
        if h.products != products {
            if h.took < WAIT_FOR_REBUILD {
                Usable::Rebuild
            } else {
                Usable::Stale(vocabulary)
            }
        } else if now.duration_since(h.loaded) < TTL {
            Usable::Fresh(vocabulary)
        } else {
            Usable::Stale(vocabulary)
        }
    }

    fn put(&self, vocabulary: Arc<Vocabulary>, loaded: Instant, products: u64) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        *held = Some(Held {
            vocabulary,
            loaded,
            took: loaded.elapsed(),
            products,
        });
    }
}

/// The word list of `db`'s searchable fields (see the module's notes on staleness).
pub async fn current(db: &Db) -> Result<Arc<Vocabulary>, DbError> {
    let cache = db.extension::<VocabularyCache>();
    let products = changes::of(db).seen().products;
    match cache.usable(products, Instant::now()) {
        Usable::Fresh(vocabulary) => return Ok(vocabulary),
        Usable::Stale(vocabulary) => {
            if !cache.refreshing.swap(true, Ordering::SeqCst) {
                let (db, cache) = (db.clone(), Arc::clone(&cache));
                tokio::spawn(async move {
                    let loaded = Instant::now();
                    match build(&db).await {
                        Ok(v) => cache.put(Arc::new(v), loaded, products),
                        Err(e) => tracing::warn!(error = %e, "search word list not rebuilt"),
                    }
                    cache.refreshing.store(false, Ordering::SeqCst);
                });
            }
            return Ok(vocabulary);
        }
        Usable::Rebuild => {}
    }
    let _building = cache.building.lock().await;
    // Another search may have built it while this one waited.
    if let Usable::Fresh(vocabulary) = cache.usable(products, Instant::now()) {
        return Ok(vocabulary);
    }
    let loaded = Instant::now();
    let vocabulary = Arc::new(build(db).await?);
    cache.put(Arc::clone(&vocabulary), loaded, products);
    Ok(vocabulary)
}

/// Read the searchable fields of the products on sale and the published content.
async fn build(db: &Db) -> Result<Vocabulary, DbError> {
    let started = Instant::now();
    let mut texts: Vec<String> = Vec::new();
    let fields = |list: &[(&str, i32, &str)]| {
        let mut p = bson::doc! { "_id": 0 };
        for (field, _, _) in list {
            p.insert(*field, 1);
        }
        p
    };
    let products: Vec<Document> = db
        .collection::<Document>(crate::catalog::products::COLLECTION)
        .find(crate::catalog::lifecycle::on_sale_within(Document::new()))
        .projection(fields(super::PRODUCT_FIELDS))
        .await?
        .try_collect()
        .await?;
    for doc in &products {
        for (field, _, _) in super::PRODUCT_FIELDS {
            texts.push(super::text_at(doc, field));
        }
    }
    let nodes: Vec<Document> = db
        .collection::<Document>(crate::content::model::COLLECTION)
        .find(crate::content::model::visible_at(db.now()))
        .projection(fields(super::NODE_FIELDS))
        .await?
        .try_collect()
        .await?;
    for doc in &nodes {
        for (field, _, _) in super::NODE_FIELDS {
            texts.push(super::text_at(doc, field));
        }
    }
    let vocabulary = Vocabulary::of_texts(texts.iter().map(String::as_str));
    tracing::debug!(
        words = vocabulary.len(),
        documents = products.len() + nodes.len(),
        ms = started.elapsed().as_millis() as u64,
        "search word list built"
    );
    Ok(vocabulary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shop() -> Vocabulary {
        Vocabulary::of_texts([
            "Kind of Blue",
            "John Coltrane",
            "A Love Supreme",
            "Jazz",
            "jazz",
            "Jazzy nights",
            "Blues for Alice",
            "The Blues Brothers",
        ])
    }

    #[test]
    fn the_last_word_is_completed_with_the_most_frequent_longer_words() {
        let v = shop();
        let e = v.expand("jaz");
        assert_eq!(e.completions, ["jazz", "jazzy"]);
        assert_eq!(e.text, "jaz jazz jazzy");
        assert_eq!(v.expand("kind of blu").completions, ["blues", "blue"]);
    }

    #[test]
    fn negated_quoted_and_one_letter_words_are_not_completed() {
        let v = shop();
        assert!(v.expand("jazz -blu").completions.is_empty());
        assert!(v.expand("\"kind of blu").completions.is_empty());
        assert!(v.expand("j").completions.is_empty());
        assert!(v.expand("kind of").completions.is_empty(), "a stop word");
        assert!(v.expand("").completions.is_empty());
    }

    #[test]
    fn an_unknown_word_is_answered_with_the_nearest_known_one() {
        let v = shop();
        assert_eq!(v.suggest("coltrain").as_deref(), Some("coltrane"));
        assert_eq!(v.suggest("love supremme").as_deref(), Some("love supreme"));
        assert_eq!(
            v.suggest("Coltrane"),
            None,
            "known words need no suggestion"
        );
        assert_eq!(v.suggest("jaz"), None, "a word being typed completes");
        assert_eq!(v.suggest("xylophone"), None, "nothing near");
    }

    #[test]
    fn the_edit_distance_stops_past_its_limit() {
        let a: Vec<char> = "coltrain".chars().collect();
        assert_eq!(edit_distance_within(&a, "coltrane", 2), Some(2));
        assert_eq!(edit_distance_within(&a, "coltrane", 1), None);
        assert_eq!(edit_distance_within(&a, "coltrain", 0), Some(0));
        assert_eq!(edit_distance_within(&a, "blue", 2), None);
    }
}
