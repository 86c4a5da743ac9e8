//! Site search: one query over products and published content, ranked by MongoDB's text score.
//!
//! Both collections carry a text index (created with the others at start-up, see
//! [`indexes`]); a search is a standard `$text` query on each, sorted by `{$meta: "textScore"}`,
//! and the two ranked lists are merged by score. The same queries run unchanged on MongoDB and
//! on the embedded docstore. Which fields matched is worked out here with the same English
//! stemming the index uses, so "loves" shows a match in a title that says "love".
//!
//! Search forgives ([`terms`]): the last word is completed from the indexes' own words as
//! people type, and a word the indexes do not know gets a "did you mean" with the nearest one
//! they do. Results show plain text (a post's Markdown rendered to words) with the matched
//! words marked, and products show their price, picture and stock like a product card.
//!
//! The results page asks [`cache`] first (a search repeated within two seconds is answered
//! from memory) and runs at most a few searches at once ([`limits`]).

pub mod cache;
pub(crate) mod limits;
pub(crate) mod listing;
pub(crate) mod pages;
pub(crate) mod terms;

use bson::{doc, Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use docstore::tokenizer::{word_spans, Language, ParsedQuery, Sensitivity, Tokenizer};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use crate::catalog::products;
use crate::content::store;
use crate::db::{Db, DbError};

/// Longest search used; longer input is cut, not refused.
pub(crate) const MAX_QUERY_CHARS: usize = 200;
/// Results per page.
pub const PER_PAGE: usize = 20;
/// Pages offered at most: a search shows its best `PER_PAGE * MAX_PAGES` results.
pub const MAX_PAGES: u64 = 10;
/// Matches counted at most in each collection: past it the page says "More than 200
/// results". Counting every match of a common word (a third of a million products and posts)
/// cost seconds per search, for a figure nobody reads exactly; counting stops at the number
/// of results a search offers (`PER_PAGE × MAX_PAGES`): past it, a visitor could not see more
/// of them anyway. (It was 1 000: counting to a thousand read each match's document and cost
/// a common word's search about as much as finding its page.)
pub const MAX_COUNTED: u64 = PER_PAGE as u64 * MAX_PAGES;

/// Name of the products' text index. A collection has at most one text index, and one of the
/// same name with other fields cannot be created over it: a change of fields gets a new name,
/// and the old one goes into [`RETIRED_INDEXES`].
pub const PRODUCT_INDEX: &str = "product_search_2";
/// Name of the content nodes' text index (renamed like [`PRODUCT_INDEX`]).
pub(crate) const NODE_INDEX: &str = "node_search_2";

/// Text indexes of earlier versions, `(collection, name)`, dropped at start-up before the
/// current ones are created (see `startup::indexes`): `product_search` lacked films' writers,
/// `node_search` the authors of posts.
pub(crate) const RETIRED_INDEXES: [(&str, &str); 2] = [
    (products::COLLECTION, "product_search"),
    (store::COLLECTION, "node_search"),
];

/// Product fields searched, with their weights and the label shown when they match.
pub(crate) const PRODUCT_FIELDS: &[(&str, i32, &str)] = &[
    ("title", 10, "title"),
    ("details.artist", 6, "artist"),
    ("details.author", 6, "author"),
    ("details.actor", 6, "cast"),
    ("details.director", 4, "director"),
    ("details.writer", 4, "writer"),
    ("details.genre", 3, "genre"),
    ("tags", 3, "tags"),
    ("description", 1, "description"),
];

/// Content fields searched, with their weights and labels.
pub(crate) const NODE_FIELDS: &[(&str, i32, &str)] = &[
    ("metadata.title", 10, "title"),
    ("metadata.tags", 3, "tags"),
    ("metadata.author.name", 3, "author"),
    ("metadata.detail.caption", 2, "caption"),
    ("metadata.detail.source", 2, "source"),
    ("metadata.detail.text", 1, "text"),
];

/// A field no document has, so no stored value can switch a document's language (a
/// product field called `language` with, say, "en-GB" in it would otherwise fail its write).
const LANGUAGE_OVERRIDE: &str = "search_language";

fn text_index(name: &str, fields: &[(&str, i32, &str)]) -> IndexModel {
    let mut keys = Document::new();
    let mut weights = Document::new();
    for (field, weight, _) in fields {
        keys.insert(*field, "text");
        weights.insert(*field, *weight);
    }
    IndexModel::builder()
        .keys(keys)
        .options(
            IndexOptions::builder()
                .name(name.to_string())
                .weights(weights)
                .default_language("english".to_string())
                .language_override(LANGUAGE_OVERRIDE.to_string())
                .build(),
        )
        .build()
}

/// The text indexes search needs: `(collection, indexes)` for [`crate::startup::indexes`].
pub(crate) fn indexes() -> Vec<(&'static str, Vec<IndexModel>)> {
    vec![
        (
            products::COLLECTION,
            vec![text_index(PRODUCT_INDEX, PRODUCT_FIELDS)],
        ),
        (store::COLLECTION, vec![text_index(NODE_INDEX, NODE_FIELDS)]),
    ]
}

/// The search a visitor typed, made safe to send: control characters (NUL included) removed,
/// whitespace trimmed, at most [`MAX_QUERY_CHARS`] characters. Quotes and minus signs keep
/// their `$text` meaning (phrases and negation).
pub(crate) fn clean_query(raw: &str) -> String {
    let cleaned: String = raw
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_QUERY_CHARS)
        .collect();
    cleaned.trim().to_string()
}

/// One search result.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub(crate) title: String,
    pub(crate) url: String,
    /// "Album", "Blog entry"…
    pub(crate) label: String,
    /// Plain text from the description or text: its start, or the stretch around the first
    /// matched word, with the matched words marked.
    pub(crate) excerpt: Vec<Piece>,
    /// A product's card (price, picture, stock); `None` for content.
    pub(crate) product: Option<crate::catalog::card::ProductCard>,
    /// The fields the search words were found in ("title", "artist"…).
    pub(crate) matched: Vec<&'static str>,
}

/// A stretch of an excerpt: words, and whether they are ones the search matched (shown
/// marked; the template escapes the text like any other).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) text: String,
    pub(crate) matched: bool,
}

/// A page of results.
#[derive(Debug)]
pub struct Results {
    pub(crate) hits: Vec<Hit>,
    pub(crate) has_next: bool,
    /// How many products and published content match in all (not only the pages offered):
    /// what the results page says and the traffic log records. At most [`MAX_COUNTED`] per
    /// collection are counted: see `more`.
    pub(crate) total: u64,
    /// More than `total` match (a collection had more than [`MAX_COUNTED`] matches).
    pub(crate) more: bool,
    /// "Did you mean": the search with unknown words replaced by the nearest known ones.
    pub(crate) suggestion: Option<String>,
}

/// The `$text` filter for a search (kept in `db`, below the areas, as the content admin's
/// search uses it too).
pub use crate::db::text_filter;

/// Products first by score (ties by `_id`, so pages never overlap).
pub fn score_sort() -> Document {
    doc! { "score": { "$meta": "textScore" }, "_id": 1 }
}

/// Search products and published content; `page` counts from 1 (at most [`MAX_PAGES`]).
pub(crate) async fn search(db: &Db, query: &str, page: u64) -> Result<Results, DbError> {
    let page = page.clamp(1, MAX_PAGES);
    let wanted = page as usize * PER_PAGE;
    // One more than needed tells whether a next page exists.
    let fetch = (wanted + 1) as i64;
    let vocabulary = terms::current(db).await?;
    let expanded = vocabulary.expand(query);
    let suggestion = vocabulary.suggest(query);
    let query = expanded.text.as_str();
    let terms = query_terms(query);

    // Drafts and archived products are not on the storefront.
    let product_filter = crate::catalog::lifecycle::on_sale_within(text_filter(query));
    // Read as the store sends them (no map built per document): only the page's results are
    // read further, and each field a result shows is read in place.
    let product_docs: Vec<RawDocumentBuf> = db
        .collection::<RawDocumentBuf>(products::COLLECTION)
        .find(product_filter.clone())
        .projection(product_projection())
        .sort(score_sort())
        .limit(fetch)
        .await?
        .try_collect()
        .await?;
    let mut node_filter = text_filter(query);
    // Published: live, or due by now (the same rule as the blog, so a clock stepped back hides
    // nothing from search either).
    node_filter.extend(store::visible_at(db.now()));
    let node_docs: Vec<RawDocumentBuf> = db
        .collection::<RawDocumentBuf>(store::COLLECTION)
        .find(node_filter.clone())
        .projection(node_projection())
        .sort(score_sort())
        .limit(fetch)
        .await?
        .try_collect()
        .await?;

    // A list shorter than asked for is every match; only a full one needs counting, and only
    // up to MAX_COUNTED (one more tells that there are more).
    let mut total = 0;
    let mut more = false;
    for (collection, filter, found) in [
        (products::COLLECTION, product_filter, product_docs.len()),
        (store::COLLECTION, node_filter, node_docs.len()),
    ] {
        let counted = if found < fetch as usize {
            found as u64
        } else {
            db.collection::<Document>(collection)
                .count_documents(filter)
                .limit(MAX_COUNTED + 1)
                .await?
        };
        more |= counted > MAX_COUNTED;
        total += counted.min(MAX_COUNTED);
    }

    // The two ranked lists merged by score; only the page shown is made into results (each
    // result reads and marks its text, which cost more than the two queries).
    let mut ranked: Vec<(f64, Found<'_>)> = product_docs
        .iter()
        .map(|d| (score_of(d), Found::Product(d)))
        .chain(node_docs.iter().map(|d| (score_of(d), Found::Node(d))))
        .collect();
    // Stable: equal scores keep products before content, each in its own order.
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let has_next = ranked.len() > wanted && page < MAX_PAGES;
    let mut words = WordMatcher::new(&terms);
    let hits = ranked
        .into_iter()
        .skip(wanted - PER_PAGE)
        .take(PER_PAGE)
        .map(|(_, found)| match found {
            Found::Product(d) => product_hit(d, &mut words),
            Found::Node(d) => node_hit(d, &mut words),
        })
        .collect();
    Ok(Results {
        hits,
        has_next,
        total,
        more,
        suggestion,
    })
}

/// `query` as a search sends it to `$text`: its last word completed (see [`terms`]). For
/// other full-text searches of the storefront (the product list's `q`), so every search box
/// finds the same.
pub(crate) async fn expanded_query(db: &Db, query: &str) -> Result<String, DbError> {
    Ok(terms::current(db).await?.expand(query).text)
}

/// The projection of a product search (the score included).
pub fn product_projection() -> Document {
    // What a product card shows, too.
    let mut p = crate::catalog::card::ProductCard::projection();
    p.insert("score", doc! { "$meta": "textScore" });
    for (field, _, _) in PRODUCT_FIELDS {
        p.insert(*field, 1);
    }
    p
}

/// The projection of a content search (the score included).
pub fn node_projection() -> Document {
    let mut p = doc! {
        "metadata.section": 1, "metadata.slug": 1, "metadata.type": 1,
        "score": { "$meta": "textScore" },
    };
    for (field, _, _) in NODE_FIELDS {
        p.insert(*field, 1);
    }
    p
}

/// The tokenizer of the search indexes: docstore's own, for English (their `default_language`),
/// case and diacritics folded as a `$text` query without `$caseSensitive` or
/// `$diacriticSensitive` folds them, so what search marks and suggests is what the index holds.
/// The one place the app builds it.
pub(crate) fn tokenizer() -> Tokenizer {
    Tokenizer::new(Language::English, Sensitivity::default())
}

/// The positive terms of a search as the index stems them.
fn query_terms(query: &str) -> Vec<String> {
    ParsedQuery::parse(query, Language::English, Sensitivity::default())
        .terms
        .into_iter()
        .collect()
}

/// Every string at a dotted path (through arrays), joined by spaces (the word list's
/// builder reads decoded documents; a result reads its stored bytes with [`texts_at`]).
pub(crate) fn text_at(doc: &Document, path: &str) -> String {
    fn collect(value: &Bson, rest: &[&str], out: &mut Vec<String>) {
        match (value, rest.split_first()) {
            (Bson::String(s), None) => out.push(s.clone()),
            (Bson::Array(items), _) => {
                for item in items {
                    collect(item, rest, out);
                }
            }
            (Bson::Document(d), Some((head, tail))) => {
                if let Some(v) = d.get(*head) {
                    collect(v, tail, out);
                }
            }
            _ => {}
        }
    }
    let parts: Vec<&str> = path.split('.').collect();
    let mut out = Vec::new();
    if let Some(v) = doc.get(parts[0]) {
        collect(v, &parts[1..], &mut out);
    }
    out.join(" ")
}

/// Every string at a dotted path (through arrays) of a document as stored, in place: what
/// [`text_at`] joins, for a document read raw.
fn texts_at<'a>(doc: &'a RawDocument, path: &str) -> Vec<&'a str> {
    fn collect<'a>(value: RawBsonRef<'a>, rest: &[&str], out: &mut Vec<&'a str>) {
        match (value, rest.split_first()) {
            (RawBsonRef::String(s), None) => out.push(s),
            (RawBsonRef::Array(items), _) => {
                for item in items.into_iter().flatten() {
                    collect(item, rest, out);
                }
            }
            (RawBsonRef::Document(d), Some((head, tail))) => {
                if let Ok(Some(v)) = d.get(head) {
                    collect(v, tail, out);
                }
            }
            _ => {}
        }
    }
    let parts: Vec<&str> = path.split('.').collect();
    let mut out = Vec::new();
    if let Ok(Some(v)) = doc.get(parts[0]) {
        collect(v, &parts[1..], &mut out);
    }
    out
}

/// A document a search found, before it is made into a [`Hit`].
enum Found<'a> {
    Product(&'a RawDocument),
    Node(&'a RawDocument),
}

/// Words remembered by a [`WordMatcher`] at most (a page's texts hold a few hundred distinct
/// words; the bound only keeps an unusual text from growing the map without end).
const MAX_REMEMBERED_WORDS: usize = 10_000;

/// Tells whether a word of a result's text is one the search matched (its index term, as the
/// index stems it, is one of the search's terms), remembering each word's answer: a page's
/// texts repeat their words (a post's paragraphs, a product's editions), and stemming every
/// occurrence again was most of the cost of making a results page.
pub(crate) struct WordMatcher<'a> {
    tokenizer: Tokenizer,
    terms: &'a [String],
    seen: std::collections::HashMap<String, bool>,
}

impl<'a> WordMatcher<'a> {
    /// A matcher for the search terms `terms` (see [`query_terms`]).
    pub(crate) fn new(terms: &'a [String]) -> WordMatcher<'a> {
        WordMatcher {
            tokenizer: tokenizer(),
            terms,
            seen: std::collections::HashMap::new(),
        }
    }

    /// Whether `word` (one of [`docstore::tokenizer::words`]) is a match.
    pub(crate) fn is_match(&mut self, word: &str) -> bool {
        if let Some(&known) = self.seen.get(word) {
            return known;
        }
        let terms = self.terms;
        let matched = self
            .tokenizer
            .term(word)
            .is_some_and(|t| terms.contains(&t));
        if self.seen.len() < MAX_REMEMBERED_WORDS {
            self.seen.insert(word.to_string(), matched);
        }
        matched
    }
}

/// The labels of the fields whose text holds one of the search's terms.
fn matched_fields(
    doc: &RawDocument,
    fields: &[(&str, i32, &'static str)],
    words: &mut WordMatcher<'_>,
) -> Vec<&'static str> {
    let mut matched = Vec::new();
    for (field, _, label) in fields {
        if matched.contains(label) {
            continue;
        }
        // Each string on its own: joined by spaces (as `text_at` joins them) they have the
        // same words.
        if texts_at(doc, field).into_iter().any(|text| {
            docstore::tokenizer::words(text)
                .into_iter()
                .any(|word| words.is_match(word))
        }) {
            matched.push(*label);
        }
    }
    matched
}

/// `text`'s words joined by single spaces.
fn flatten(text: &str) -> String {
    let mut flat = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !flat.is_empty() {
            flat.push(' ');
        }
        flat.push_str(word);
    }
    flat
}

/// At most `max` characters of the [`flatten`]ed text `flat`, cut at a word, with an ellipsis
/// when cut. Only its first `max` characters are read (a post's whole body was read several
/// times over for each result).
fn excerpt_of_flat(flat: &str, max: usize) -> String {
    let Some((end, _)) = flat.char_indices().nth(max) else {
        return flat.to_string();
    };
    let cut = &flat[..end];
    let cut = match cut.rfind(' ') {
        Some(i) if i > max / 2 => &cut[..i],
        _ => cut,
    };
    format!("{cut}…")
}

/// Plain `text` cut to about `max` characters (from its start, or from shortly before the first
/// matched word when that would be cut off), split into [`Piece`]s with the words `words`
/// matches marked.
pub(crate) fn highlighted(text: &str, words: &mut WordMatcher<'_>, max: usize) -> Vec<Piece> {
    let flat = flatten(text);
    // Where the first matched word starts, in characters.
    let first = word_spans(&flat)
        .into_iter()
        .find(|&(start, end)| words.is_match(&flat[start..end]))
        .map(|(start, _)| flat[..start].chars().count());
    let window = match first {
        // Far enough in that the excerpt would end before it: start a few words before it.
        Some(at) if at + 20 > max => {
            let from = at.saturating_sub(40);
            let tail = flat
                .char_indices()
                .nth(from)
                .map_or("", |(i, _)| &flat[i..]);
            // (A part of `flat`, so already flat: it never starts with a space, as a space
            // found first is dropped here.)
            let tail = match tail.find(' ') {
                Some(i) if from > 0 && i < 40 => &tail[i + 1..],
                _ => tail,
            };
            format!("…{}", excerpt_of_flat(tail, max))
        }
        _ => excerpt_of_flat(&flat, max),
    };
    let mut pieces: Vec<Piece> = Vec::new();
    let mut push = |text: &str, matched: bool| match pieces.last_mut() {
        Some(last) if last.matched == matched => last.text.push_str(text),
        _ => pieces.push(Piece {
            text: text.to_string(),
            matched,
        }),
    };
    let mut done = 0;
    for (start, end) in word_spans(&window) {
        if words.is_match(&window[start..end]) {
            push(&window[done..start], false);
            push(&window[start..end], true);
            done = end;
        }
    }
    push(&window[done..], false);
    pieces.retain(|p| !p.text.is_empty());
    pieces
}

fn score_of(doc: &RawDocument) -> f64 {
    match doc.get("score") {
        Ok(Some(RawBsonRef::Double(s))) => s,
        Ok(Some(RawBsonRef::Int32(i))) => f64::from(i),
        Ok(Some(RawBsonRef::Int64(i))) => i as f64,
        _ => 0.0,
    }
}

/// The string field `key` of `doc`, or "" (missing, or not a string).
fn str_of<'a>(doc: &'a RawDocument, key: &str) -> &'a str {
    doc.get_str(key).unwrap_or("")
}

fn product_hit(doc: &RawDocument, words: &mut WordMatcher<'_>) -> Hit {
    let kind = str_of(doc, "type");
    let label = match kind {
        "album" => "Album",
        "film" => "Film",
        "book" => "Book",
        _ => "Product",
    };
    Hit {
        title: str_of(doc, "title").to_string(),
        url: crate::catalog::model::url_of(str_of(doc, "slug")),
        label: label.to_string(),
        excerpt: highlighted(str_of(doc, "description"), words, 180),
        // The card's fields straight from the stored bytes (the other fields are skipped).
        product: bson::from_slice(doc.as_bytes()).ok(),
        matched: matched_fields(doc, PRODUCT_FIELDS, words),
    }
}

fn node_hit(doc: &RawDocument, words: &mut WordMatcher<'_>) -> Hit {
    let meta = doc.get_document("metadata").ok();
    let get = |field: &str| meta.map_or("", |m| str_of(m, field));
    let label = match get("type") {
        "page" => "Page",
        "entry" => "Blog entry",
        "photo" => "Photo",
        "video" => "Video",
        "quote" => "Quote",
        "link" => "Link",
        _ => "Article",
    };
    let detail_text = texts_at(doc, "metadata.detail.text").join(" ");
    let caption = texts_at(doc, "metadata.detail.caption").join(" ");
    // Pages and entries are Markdown: shown as the words a reader sees.
    let body = if detail_text.is_empty() {
        caption
    } else {
        crate::content::excerpt::plain_text(&detail_text)
    };
    Hit {
        title: get("title").to_string(),
        url: crate::content::model::url_of(get("section"), get("slug")),
        label: label.to_string(),
        excerpt: highlighted(&body, words, 180),
        product: None,
        matched: matched_fields(doc, NODE_FIELDS, words),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_lose_control_characters_and_excess_length() {
        assert_eq!(clean_query("  blue\0 note\u{7} "), "blue note");
        assert_eq!(clean_query(&"x".repeat(5000)).len(), MAX_QUERY_CHARS);
        assert_eq!(clean_query("\"kind of\" -blue"), "\"kind of\" -blue");
    }

    #[test]
    fn matched_fields_use_the_index_stemming() {
        let d = doc! {
            "title": "Love Supreme",
            "details": { "artist": "John Coltrane", "genre": ["Jazz"] },
            "description": "A spiritual suite.",
        };
        let d = RawDocumentBuf::from_document(&d).expect("a valid document");
        let terms = query_terms("loves jazz");
        assert_eq!(
            matched_fields(&d, PRODUCT_FIELDS, &mut WordMatcher::new(&terms)),
            vec!["title", "genre"]
        );
        let piano = query_terms("piano");
        assert!(matched_fields(&d, PRODUCT_FIELDS, &mut WordMatcher::new(&piano)).is_empty());
    }

    #[test]
    fn texts_read_in_place_are_the_strings_text_at_joins() {
        let d = doc! {
            "title": "Blue Train",
            "tags": ["hard bop", 7, "jazz"],
            "details": { "actor": [{ "name": "Ann" }, "Bo", { "name": ["Cy", "Di"] }], "year": 1957 },
            "metadata": { "detail": { "text": "Para one.\n\nPara two." } },
        };
        let raw = RawDocumentBuf::from_document(&d).expect("a valid document");
        for path in [
            "title",
            "tags",
            "details.actor",
            "details.actor.name",
            "details.year",
            "details.missing",
            "missing.path",
            "metadata.detail.text",
            "title.deeper",
        ] {
            assert_eq!(texts_at(&raw, path).join(" "), text_at(&d, path), "{path}");
        }
    }

    #[test]
    fn a_product_result_read_in_place_shows_what_its_decoded_document_shows() {
        let d = doc! {
            "_id": bson::oid::ObjectId::new(),
            "slug": "blue-train", "type": "album", "title": "Blue Train",
            "search_title": "blue train",
            "pricing": bson::to_bson(&crate::catalog::model::Pricing::new(
                crate::domain::Money::from_cents(2000),
                crate::domain::Money::from_cents(1500),
            ))
            .expect("prices serialize"),
            "photos": [bson::oid::ObjectId::new()], "qty": 3_i64,
            "details": { "artist": "John Coltrane", "issue_date": bson::DateTime::from_millis(0) },
            "description": "A hard bop classic by Coltrane.",
            "score": 1.5,
        };
        let decoded: Option<crate::catalog::card::ProductCard> =
            bson::from_document(d.clone()).ok();
        let decoded = decoded.expect("the test document is a card");
        let raw = RawDocumentBuf::from_document(&d).expect("a valid document");
        let terms = query_terms("coltrane");
        let hit = product_hit(&raw, &mut WordMatcher::new(&terms));
        assert_eq!(score_of(&raw), 1.5);
        assert_eq!(hit.title, "Blue Train");
        assert_eq!(hit.label, "Album");
        assert_eq!(hit.url, crate::catalog::model::url_of("blue-train"));
        assert_eq!(hit.matched, ["artist", "description"]);
        assert!(hit
            .excerpt
            .iter()
            .any(|p| p.matched && p.text == "Coltrane"));
        let card = hit.product.expect("the card is read from the stored bytes");
        assert_eq!(card.id, decoded.id);
        assert_eq!(card.cover_url(), decoded.cover_url());
        assert_eq!(card.retail_price(), decoded.retail_price());
        assert_eq!(card.list_price(), decoded.list_price());
        assert_eq!(card.qty, decoded.qty);
    }

    #[test]
    fn matched_words_are_marked_in_the_excerpt() {
        let terms = query_terms("blue");
        let pieces = highlighted(
            "Kind of Blue is blue <b>",
            &mut WordMatcher::new(&terms),
            180,
        );
        let shown: Vec<(&str, bool)> = pieces
            .iter()
            .map(|p| (p.text.as_str(), p.matched))
            .collect();
        assert_eq!(
            shown,
            [
                ("Kind of ", false),
                ("Blue", true),
                (" is ", false),
                ("blue", true),
                (" <b>", false)
            ]
        );
    }

    #[test]
    fn an_excerpt_starts_near_a_match_that_the_start_would_cut_off() {
        let text = format!("{} Coltrane plays.", "word ".repeat(100));
        let terms = query_terms("coltrane");
        let pieces = highlighted(&text, &mut WordMatcher::new(&terms), 60);
        assert!(pieces[0].text.starts_with('…'), "{pieces:?}");
        assert!(pieces.iter().any(|p| p.matched && p.text == "Coltrane"));
    }

    #[test]
    fn a_word_matcher_answers_as_the_tokenizer_does_and_remembers_its_answers() {
        let terms = query_terms("loves jazz");
        let mut words = WordMatcher::new(&terms);
        let tokenizer = tokenizer();
        for text in [
            "Loving jazz, LOVE and the jazzy loves",
            "jazz jazz Jazz love the of",
        ] {
            for word in docstore::tokenizer::words(text) {
                let expected = tokenizer.term(word).is_some_and(|t| terms.contains(&t));
                assert_eq!(words.is_match(word), expected, "{word}");
                assert_eq!(words.is_match(word), expected, "{word}, asked again");
            }
        }
        assert_eq!(words.seen.len(), 10, "{:?}", words.seen);
    }

    /// At most `max` characters of `text`, cut at a word, with an ellipsis when cut.
    fn excerpt(text: &str, max: usize) -> String {
        excerpt_of_flat(&flatten(text), max)
    }

    #[test]
    fn excerpts_cut_at_a_word() {
        assert_eq!(excerpt("short  text", 50), "short text");
        assert_eq!(excerpt("one two three four", 12), "one two…");
    }

    #[test]
    fn excerpts_read_only_their_start_and_say_what_reading_the_whole_text_said() {
        // The excerpt as it was made from the whole text: every character counted and copied.
        fn whole(text: &str, max: usize) -> String {
            let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if flat.chars().count() <= max {
                return flat;
            }
            let cut: String = flat.chars().take(max).collect();
            let cut = match cut.rfind(' ') {
                Some(i) if i > max / 2 => cut[..i].to_string(),
                _ => cut,
            };
            format!("{cut}…")
        }
        let texts = [
            "",
            "   ",
            "one",
            " café  crème\tbrûlée \n déjà vu ",
            "naïve words — with ünïcödé, and   spaces\n\nbetween paragraphs of a longer post",
            "a b c d e f g h i j k l m n o p q r s t u v w x y z",
            "x",
        ];
        for text in texts {
            for max in 0..40 {
                assert_eq!(excerpt(text, max), whole(text, max), "{text:?} {max}");
            }
        }
    }
}
