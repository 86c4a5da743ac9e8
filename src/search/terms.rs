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
//! The list is kept with the [`Db`] handle and rebuilt in the background, one build at a time:
//! a search never waits for a build longer than [`WAIT_FOR_REBUILD`]. After a product write
//! or content write through this handle (reported in [`crate::catalog::changes`] and
//! [`crate::content::changes`]) the next search starts a rebuild and waits up to that long for
//! it, so a small shop sees its edit at once; a list older than [`TTL`] is still used while it
//! is rebuilt. Other instances' writes show up within about [`TTL`]. A slow build (a large catalog) is redone less often:
//! at most once per twenty build times, so it takes at most a twentieth of one core.
//!
//! Before the first build finishes (start-up of a large catalog: reading a million products'
//! words takes seconds), searches run with an empty list: no completion and no "did you mean",
//! but an answer, where waiting for the build once held every search slot for seconds and
//! turned the searches behind them away as "busy". The build reads the products and posts a
//! page of [`BUILD_BATCH`] at a time, never holding them all, and rests between pages so the
//! shop's other pages do not wait for it (see [`build`]).

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

/// The longest a word list is used before a rebuild is started (longer for slow builds, see
/// [`refresh_after`]).
pub(crate) const TTL: Duration = Duration::from_secs(60);
/// The longest a search waits for a build it needs (the first, or one after a product write);
/// past it the search uses the list it has (an empty one before the first build).
pub(crate) const WAIT_FOR_REBUILD: Duration = Duration::from_millis(250);
/// A list is rebuilt at most once per this many build times.
const BUILD_SHARE: u32 = 20;
/// Words the last word of a search is completed with at most (the most frequent ones).
pub(crate) const MAX_COMPLETIONS: usize = 8;
/// Shortest word that is completed: one letter would add half the list.
const MIN_PREFIX_CHARS: usize = 2;
/// Longest word kept in the list (longer ones are codes and addresses, not words to suggest).
const MAX_WORD_CHARS: usize = 40;

/// The words of the searchable fields.
#[derive(Debug, Default)]
pub(crate) struct Vocabulary {
    /// Folded words (lower case, no diacritics; stop words left out) and how many field
    /// values hold each.
    words: BTreeMap<String, u32>,
    /// The index terms (stems) of those words: a search word whose stem is here matches
    /// something.
    stems: HashSet<String>,
}

/// A [`Vocabulary`] being filled one text at a time.
#[derive(Default)]
struct Builder {
    vocabulary: Vocabulary,
    /// Folded words that are stop words or of a length the list leaves out: each word is
    /// stemmed once, not at every occurrence (a million descriptions repeat the same words).
    skipped: HashSet<String>,
    seen_here: HashSet<String>,
}

impl Builder {
    /// Count the words of one field value.
    fn add(&mut self, text: &str) {
        let tokenizer = tokenizer();
        self.seen_here.clear();
        for word in words(text) {
            let folded = fold(word, Sensitivity::default());
            if self.skipped.contains(&folded) {
                continue;
            }
            if !self.vocabulary.words.contains_key(&folded) {
                // The term depends on the folded word alone (default sensitivity).
                let chars = folded.chars().count();
                let stem = tokenizer
                    .term(word)
                    .filter(|_| (2..=MAX_WORD_CHARS).contains(&chars));
                let Some(stem) = stem else {
                    self.skipped.insert(folded);
                    continue;
                };
                self.vocabulary.stems.insert(stem);
            }
            if self.seen_here.insert(folded.clone()) {
                *self.vocabulary.words.entry(folded).or_insert(0) += 1;
            }
        }
    }
}

/// A search with its last word completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expanded {
    /// What is sent to `$text`: the search as typed, then the completions.
    pub(crate) text: String,
    pub(crate) completions: Vec<String>,
}

impl Vocabulary {
    /// The list of the words in `texts`.
    #[cfg(test)]
    pub(crate) fn of_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vocabulary {
        let mut builder = Builder::default();
        for text in texts {
            builder.add(text);
        }
        builder.vocabulary
    }

    /// Distinct words in the list.
    pub(crate) fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether the index knows `word` (its stem is one of the index's terms).
    fn knows(&self, tokenizer: &Tokenizer, word: &str) -> bool {
        tokenizer
            .term(word)
            .is_none_or(|stem| self.stems.contains(&stem))
    }

    /// `query` with its last word completed from the list: unless that word is negated
    /// (`-blue`) or inside an unclosed phrase, or shorter than two letters.
    pub(crate) fn expand(&self, query: &str) -> Expanded {
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
    pub(crate) fn suggest(&self, query: &str) -> Option<String> {
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
pub(crate) fn edit_distance_within(a: &[char], b: &str, limit: usize) -> Option<usize> {
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

/// How long a list built in `took` is used before it is rebuilt: [`TTL`], or [`BUILD_SHARE`]
/// build times when that is longer.
pub(crate) fn refresh_after(took: Duration) -> Duration {
    TTL.max(took * BUILD_SHARE)
}

/// The word list kept with one [`Db`] handle (a [`Db::extension`]).
#[derive(Default)]
pub(crate) struct VocabularyCache {
    held: Mutex<Option<Held>>,
    /// Set while a build runs (never two at once).
    building: AtomicBool,
    /// Woken when a build ends.
    built: tokio::sync::Notify,
    /// When the running (or last) build started.
    started: Mutex<Option<Instant>>,
}

struct Held {
    vocabulary: Arc<Vocabulary>,
    loaded: Instant,
    /// How long the build took.
    took: Duration,
    /// [`writes`] when the build started.
    seen: u64,
}

/// What the held list is good for.
enum Usable {
    /// Current: use it.
    Fresh(Arc<Vocabulary>),
    /// Use it, and rebuild in the background.
    Stale(Arc<Vocabulary>),
    /// Products changed since it was built (or there is none yet): rebuild, and wait a
    /// little for the build.
    Rebuild(Option<Arc<Vocabulary>>),
}

impl VocabularyCache {
    /// What the held list is good for at `now`, with `seen` the [`writes`] counter.
    fn usable(&self, seen: u64, now: Instant) -> Usable {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let Some(h) = held.as_ref() else {
            return Usable::Rebuild(None);
        };
        let vocabulary = Arc::clone(&h.vocabulary);
        if h.seen != seen {
            Usable::Rebuild(Some(vocabulary))
        } else if now.duration_since(h.loaded) < refresh_after(h.took) {
            Usable::Fresh(vocabulary)
        } else {
            Usable::Stale(vocabulary)
        }
    }

    fn put(&self, vocabulary: Arc<Vocabulary>, loaded: Instant, seen: u64) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        *held = Some(Held {
            vocabulary,
            loaded,
            took: loaded.elapsed(),
            seen,
        });
    }

    /// How long the running build has been running (zero when none has started).
    fn build_age(&self) -> Duration {
        self.started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map_or(Duration::ZERO, |at| at.elapsed())
    }

    /// Start a build in the background unless one runs.
    fn start_build(self: &Arc<Self>, db: &Db, seen: u64) {
        if self.building.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.started.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        let (db, cache) = (db.clone(), Arc::clone(self));
        tokio::spawn(async move {
            let loaded = Instant::now();
            match build(&db).await {
                Ok(v) => cache.put(Arc::new(v), loaded, seen),
                Err(e) => tracing::warn!(error = %e, "search word list not built"),
            }
            cache.building.store(false, Ordering::SeqCst);
            cache.built.notify_waiters();
        });
    }
}

/// Product and content writes through `db`'s handle so far: a list built before the last of
/// them may lack its words.
fn writes(db: &Db) -> u64 {
    changes::of(db).seen().products + crate::content::changes::nodes_seen(db)
}

/// The word list of `db`'s searchable fields (see the module's notes on staleness): never
/// waits longer than [`WAIT_FOR_REBUILD`], and only while the build it waits for is younger
/// than that.
pub(crate) async fn current(db: &Db) -> Result<Arc<Vocabulary>, DbError> {
    let cache = db.extension::<VocabularyCache>();
    let seen = writes(db);
    let fallback = match cache.usable(seen, Instant::now()) {
        Usable::Fresh(vocabulary) => return Ok(vocabulary),
        Usable::Stale(vocabulary) => {
            cache.start_build(db, seen);
            return Ok(vocabulary);
        }
        Usable::Rebuild(held) => held,
    };
    // Registered before the build starts, so its end cannot be missed.
    let built = cache.built.notified();
    cache.start_build(db, seen);
    // Only until the build is WAIT_FOR_REBUILD old: a small shop's build ends within it, so
    // its next search sees the edit; a million products take seconds, and every search during
    // such a build used to wait the whole 250 ms (most of an idle search's time at start-up).
    let wait = WAIT_FOR_REBUILD.saturating_sub(cache.build_age());
    let waited = tokio::time::timeout(wait, built).await;
    if waited.is_ok() {
        if let Usable::Fresh(vocabulary) = cache.usable(seen, Instant::now()) {
            return Ok(vocabulary);
        }
    }
    Ok(fallback.unwrap_or_default())
}

/// Documents read in one store call of a build (a page of `_id` order), their words then
/// counted off the request thread in one go.
const BUILD_BATCH: usize = 512;
/// After each page a build rests this many times as long as the page took, so it takes at
/// most a quarter of one core and the store serves other pages between its calls.
const BUILD_REST: u32 = 3;

/// Read the searchable fields of the products on sale and the published content, and count
/// their words.
///
/// A build reads every product (a million in a large shop) while the shop serves its pages,
/// so it must never hold the store, an HTTP worker or a core for long:
/// - it reads [`BUILD_BATCH`] documents per store call, in pages of `_id` order (the `_id`
///   index bounds each page). One cursor over every product made the store match and project
///   the whole million in its first call and the driver decode 16 MB batches, and the filtered
///   listing's p99 rose to 120–220 ms for the 20 s the build took;
/// - each page's words are counted on the blocking pool, not on the worker whose search
///   started the build (counted inline, a build held one worker for most of its seconds);
/// - after each page it rests [`BUILD_REST`] times as long as the page took: a build of a
///   million products takes about a minute instead of 20 s, and it is redone at most once per
///   [`BUILD_SHARE`] build times.
async fn build(db: &Db) -> Result<Vocabulary, DbError> {
    let started = Instant::now();
    let mut builder = Builder::default();
    let mut documents = 0u64;
    builder = count_words(
        db,
        crate::catalog::products::COLLECTION,
        crate::catalog::lifecycle::on_sale_within(Document::new()),
        super::PRODUCT_FIELDS,
        builder,
        &mut documents,
    )
    .await?;
    builder = count_words(
        db,
        crate::content::store::COLLECTION,
        crate::content::store::visible_at(db.now()),
        super::NODE_FIELDS,
        builder,
        &mut documents,
    )
    .await?;
    let vocabulary = builder.vocabulary;
    tracing::debug!(
        words = vocabulary.len(),
        documents,
        ms = started.elapsed().as_millis() as u64,
        "search word list built"
    );
    Ok(vocabulary)
}

/// Add the words of `fields` of every document of `collection` matching `filter` (which has
/// no `_id` condition of its own) to `builder`, a page at a time (see [`build`]).
async fn count_words(
    db: &Db,
    collection: &str,
    filter: Document,
    fields: &'static [(&'static str, i32, &'static str)],
    mut builder: Builder,
    documents: &mut u64,
) -> Result<Builder, DbError> {
    let mut projection = bson::doc! { "_id": 1 };
    for (field, _, _) in fields {
        projection.insert(*field, 1);
    }
    let mut after: Option<bson::Bson> = None;
    loop {
        let page_started = Instant::now();
        let mut page_filter = filter.clone();
        if let Some(last) = after.take() {
            page_filter.insert("_id", bson::doc! { "$gt": last });
        }
        let batch: Vec<Document> = db
            .collection::<Document>(collection)
            .find(page_filter)
            .projection(projection.clone())
            .sort(bson::doc! { "_id": 1 })
            .hint(mongodb::options::Hint::Name("_id_".to_string()))
            .limit(BUILD_BATCH as i64)
            .await?
            .try_collect()
            .await?;
        *documents += batch.len() as u64;
        let last_page = batch.len() < BUILD_BATCH;
        after = batch.last().and_then(|d| d.get("_id").cloned());
        builder = tokio::task::spawn_blocking(move || {
            for doc in &batch {
                for (field, _, _) in fields {
                    builder.add(&super::text_at(doc, field));
                }
            }
            builder
        })
        .await
        .map_err(|e| DbError::Invalid(format!("the word count stopped: {e}")))?;
        if last_page || after.is_none() {
            return Ok(builder);
        }
        tokio::time::sleep(page_started.elapsed() * BUILD_REST).await;
    }
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
