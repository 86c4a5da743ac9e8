//! Product listings: filters, sort and pagination parsed leniently from the query string (bad
//! values fall back to defaults), turned into an indexed query.

use std::collections::HashMap;
use std::sync::Arc;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use crate::catalog::anchors::{self, Anchored};
use crate::catalog::cache;
use crate::catalog::card::ProductCard;
use crate::catalog::facets;
use crate::catalog::products::{self, ProductType};
use crate::catalog::seek::{self, read_keyset, BadToken, Cursor, Seek};
pub use crate::catalog::seek::{Sort, MAX_PAGE, NUMBERED_PAGES, PAGE_SIZE};
use crate::db::site;
use crate::db::{Db, DbError};
use crate::domain::Money;

/// Longest search string used (longer input is cut, not refused).
const MAX_SEARCH_CHARS: usize = 100;

/// A listing request: what the filter form and the page links carry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListingQuery {
    pub kind: Option<ProductType>,
    pub genre: Option<String>,
    /// Artist, actor or author.
    pub person: Option<String>,
    pub min_price: Option<Money>,
    pub max_price: Option<Money>,
    pub min_discount: Option<i32>,
    pub in_stock: bool,
    /// The search box's words as typed (`q`).
    pub search: Option<String>,
    /// What is sent to `$text` for [`ListingQuery::search`]: the site search's form of it (the
    /// last word completed), set by the search area's listing handlers (`search::listing`);
    /// `None` sends the words as typed.
    pub text: Option<String>,
    pub sort: Sort,
    pub page: u64,
    /// A keyset page (`after` / `before`), which takes precedence over `page`.
    pub seek: Option<Seek>,
    /// Values that were given but could not be used, each with why: shown above the results
    /// (and the field marked) rather than silently ignored.
    pub problems: Vec<FilterProblem>,
}

/// A filter value that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterProblem {
    /// The query parameter (and the filter form's input name).
    pub(crate) param: &'static str,
    /// The value as given, for the form to show back.
    pub(crate) given: String,
    /// What was wrong, for the shopper.
    pub(crate) message: String,
}

/// One filter in force, with the address of the same listing without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActiveFilter {
    pub(crate) label: String,
    /// The query string without this filter (and back on page 1).
    pub(crate) query_without: String,
}

fn non_empty(params: &HashMap<String, String>, key: &str) -> Option<String> {
    params
        .get(key)
        .map(|v| without_control_chars(v))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Text typed by a visitor without control characters: nobody searches for them, and NUL cannot
/// be stored in a BSON regular expression or key at all.
pub(crate) fn without_control_chars(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).collect()
}

impl ListingQuery {
    /// Parse the query string; values that do not parse are dropped (page → 1, sort → newest).
    pub fn from_params(params: &HashMap<String, String>) -> ListingQuery {
        let page = params
            .get("page")
            .and_then(|p| p.trim().parse::<u64>().ok())
            .filter(|p| *p >= 1)
            .unwrap_or(1)
            .min(MAX_PAGE);
        ListingQuery {
            kind: params
                .get("type")
                .and_then(|t| ProductType::parse(t.trim())),
            genre: non_empty(params, "genre"),
            person: non_empty(params, "person"),
            min_price: params.get("min_price").and_then(|v| Money::parse(v).ok()),
            max_price: params.get("max_price").and_then(|v| Money::parse(v).ok()),
            min_discount: params
                .get("min_discount")
                .and_then(|v| v.trim().parse::<i32>().ok())
                .filter(|d| (1..=100).contains(d)),
            problems: filter_problems(params),
            in_stock: params
                .get("in_stock")
                .is_some_and(|v| matches!(v.as_str(), "1" | "on" | "true")),
            search: non_empty(params, "q").map(|q| q.chars().take(MAX_SEARCH_CHARS).collect()),
            text: None,
            sort: params
                .get("sort")
                .and_then(|s| Sort::parse(s.trim()))
                .unwrap_or_default(),
            page,
            seek: None,
        }
    }

    /// [`ListingQuery::from_params`] with the keyset parameters `after` / `before` as well,
    /// which, unlike the filters, are refused when unusable: they are made by the site, so a
    /// bad one is a mangled address rather than something a shopper typed.
    pub(crate) fn from_address(params: &HashMap<String, String>) -> Result<ListingQuery, BadToken> {
        let mut query = ListingQuery::from_params(params);
        query.seek = Seek::from_params(
            params.get("after").map(String::as_str),
            params.get("before").map(String::as_str),
            query.sort,
        )?;
        Ok(query)
    }

    /// The filter for these choices, within `base` (e.g. a category).
    pub fn filter(&self, base: Document) -> Document {
        // Only products on sale: never drafts or archived ones.
        let mut filter = crate::catalog::lifecycle::on_sale_within(base);
        if let Some(kind) = self.kind {
            filter.insert("type", kind.as_str());
        }
        // Genres and people match whatever the case and spacing, through the normalised keys
        // each product stores (see `facets`); with a type, the type's own people are the keys.
        if let Some(genre) = &self.genre {
            filter.insert("genre_keys", facets::normalise(genre));
        }
        if let Some(person) = &self.person {
            filter.insert("people_keys", facets::normalise(person));
        }
        let mut price = Document::new();
        if let Some(min) = self.min_price {
            price.insert("$gte", min);
        }
        if let Some(max) = self.max_price {
            price.insert("$lte", max);
        }
        if !price.is_empty() {
            filter.insert("pricing.retail", price);
        }
        if let Some(min) = self.min_discount {
            filter.insert("pricing.pct_savings", doc! { "$gte": min });
        }
        if self.in_stock {
            filter.insert("qty", doc! { "$gt": 0 });
        }
        // The search (`q`) is not a filter of this document: it is the site search's `$text`
        // query, added by `find_page` (see `find_search_page`).
        filter
    }

    /// The query string for these choices on another page (for page links), without `page`.
    pub(crate) fn query_string(&self) -> String {
        let mut s = form_urlencoded::Serializer::new(String::new());
        if let Some(kind) = self.kind {
            s.append_pair("type", kind.as_str());
        }
        if let Some(genre) = &self.genre {
            s.append_pair("genre", genre);
        }
        if let Some(person) = &self.person {
            s.append_pair("person", person);
        }
        if let Some(min) = self.min_price {
            s.append_pair("min_price", &min.short_amount());
        }
        if let Some(max) = self.max_price {
            s.append_pair("max_price", &max.short_amount());
        }
        if let Some(d) = self.min_discount {
            s.append_pair("min_discount", &d.to_string());
        }
        if self.in_stock {
            s.append_pair("in_stock", "1");
        }
        if let Some(q) = &self.search {
            s.append_pair("q", q);
        }
        if self.sort != Sort::default() {
            s.append_pair("sort", self.sort.as_str());
        }
        s.finish()
    }

    /// The filters in force, in the form's order, each with the query string that drops it
    /// (the removable chips above the results). Sort and page are not filters.
    pub(crate) fn active_filters(&self) -> Vec<ActiveFilter> {
        let mut out = Vec::new();
        let mut push = |label: String, clear: fn(&mut ListingQuery)| {
            let mut without = self.clone();
            clear(&mut without);
            without.page = 1;
            out.push(ActiveFilter {
                label,
                query_without: without.query_string(),
            });
        };
        if let Some(q) = &self.search {
            push(format!("Matching “{q}”"), |q| q.search = None);
        }
        if let Some(kind) = self.kind {
            push(kind.label().to_string(), |q| q.kind = None);
        }
        if let Some(genre) = &self.genre {
            push(format!("Genre: {genre}"), |q| q.genre = None);
        }
        if let Some(person) = &self.person {
            push(format!("By {person}"), |q| q.person = None);
        }
        let currency = site::currency();
        if let Some(min) = self.min_price {
            push(format!("From {}", min.display(&currency)), |q| {
                q.min_price = None
            });
        }
        if let Some(max) = self.max_price {
            push(format!("Up to {}", max.display(&currency)), |q| {
                q.max_price = None
            });
        }
        if let Some(d) = self.min_discount {
            push(format!("At least {d}% off"), |q| q.min_discount = None);
        }
        if self.in_stock {
            push("In stock".to_string(), |q| q.in_stock = false);
        }
        out
    }

    /// What the listing is narrowed to, for the page heading: `Albums · Jazz · by Miles Davis`
    /// (`None` without a type, genre or person filter).
    pub(crate) fn heading_filter(&self) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        if let Some(kind) = self.kind {
            parts.push(kind.label().to_string());
        }
        if let Some(genre) = &self.genre {
            parts.push(genre.clone());
        }
        if let Some(person) = &self.person {
            parts.push(format!("by {person}"));
        }
        if let Some(q) = &self.search {
            parts.push(format!("“{q}…”"));
        }
        (!parts.is_empty()).then(|| parts.join(" · "))
    }

    /// Why the value given for the form input `param` was not used, if it was not.
    pub(crate) fn problem(&self, param: &str) -> Option<&FilterProblem> {
        self.problems.iter().find(|p| p.param == param)
    }

    /// What the form input `param` shows: the value in force, or the unusable value as given
    /// (so the shopper sees what to correct).
    fn shown(&self, param: &str, in_force: String) -> String {
        match self.problem(param) {
            Some(p) => p.given.clone(),
            None => in_force,
        }
    }

    // Values for the filter form's inputs.
    pub(crate) fn type_value(&self) -> &str {
        self.kind.map_or("", |k| k.as_str())
    }
    pub(crate) fn genre_value(&self) -> &str {
        self.genre.as_deref().unwrap_or("")
    }
    pub(crate) fn person_value(&self) -> &str {
        self.person.as_deref().unwrap_or("")
    }
    pub(crate) fn search_value(&self) -> &str {
        self.search.as_deref().unwrap_or("")
    }
    pub(crate) fn min_price_value(&self) -> String {
        self.shown(
            "min_price",
            self.min_price.map(Money::short_amount).unwrap_or_default(),
        )
    }
    pub(crate) fn max_price_value(&self) -> String {
        self.shown(
            "max_price",
            self.max_price.map(Money::short_amount).unwrap_or_default(),
        )
    }
    pub(crate) fn min_discount_value(&self) -> String {
        self.shown(
            "min_discount",
            self.min_discount.map(|d| d.to_string()).unwrap_or_default(),
        )
    }
}

/// The price and discount values given that cannot be used, with why. Empty values are simply
/// no filter.
fn filter_problems(params: &HashMap<String, String>) -> Vec<FilterProblem> {
    let mut problems = Vec::new();
    for (param, label) in [
        ("min_price", "minimum price"),
        ("max_price", "maximum price"),
    ] {
        let Some(given) = params.get(param).map(|v| without_control_chars(v)) else {
            continue;
        };
        if !given.trim().is_empty() && Money::parse(&given).is_err() {
            problems.push(FilterProblem {
                param,
                message: format!(
                    "The {label} “{}” is not an amount in dollars (like 12 or 12.50), so it is not applied.",
                    shortened(&given)
                ),
                given: shortened(&given),
            });
        }
    }
    if let Some(given) = params.get("min_discount").map(|v| without_control_chars(v)) {
        let fits = given
            .trim()
            .parse::<i32>()
            .is_ok_and(|d| (1..=100).contains(&d));
        if !given.trim().is_empty() && !fits {
            problems.push(FilterProblem {
                param: "min_discount",
                message: format!(
                    "The minimum discount “{}” is not a whole percentage from 1 to 100, so it is not applied.",
                    shortened(&given)
                ),
                given: shortened(&given),
            });
        }
    }
    problems
}

/// A value as echoed back in a message: at most 30 characters.
fn shortened(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() > 30 {
        format!("{}…", text.chars().take(30).collect::<String>())
    } else {
        text.to_string()
    }
}

/// A case-insensitive regex matching `text` anywhere, with every metacharacter escaped.
pub(crate) fn contains_ignoring_case(text: &str) -> Bson {
    Bson::RegularExpression(bson::Regex {
        pattern: regex::escape(&without_control_chars(text)),
        options: "i".to_string(),
    })
}

/// One page of a listing.
pub struct Page {
    pub products: Vec<ProductCard>,
    pub total: u64,
    /// This page's number (counted from where a keyset walk started, for keyset pages).
    pub page: u64,
    pub(crate) pages: u64,
    /// Whether there are products before and after this page.
    pub(crate) has_prev: bool,
    pub(crate) has_next: bool,
    /// The keyset links to the neighbouring pages (`None`: link by number instead, as for the
    /// first page, or around a product whose sort key is missing).
    pub(crate) prev: Option<Cursor>,
    pub(crate) next: Option<Cursor>,
    /// How this page was reached when by a keyset link (its own address).
    pub seek: Option<Seek>,
}

impl Page {
    /// Page numbers to link to: all of them when few, else the first, last, this page and its
    /// neighbours within [`NUMBERED_PAGES`] of either end (`None` marks a gap).
    pub(crate) fn links(&self) -> Vec<Option<u64>> {
        let cheap = |n: u64| n <= NUMBERED_PAGES || n > self.pages.saturating_sub(NUMBERED_PAGES);
        let near = self.page.saturating_sub(2).max(1)..=(self.page + 2).min(self.pages);
        let mut wanted: Vec<u64> = near
            .filter(|&n| n == self.page || cheap(n))
            .chain([1, self.pages])
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut out: Vec<Option<u64>> = Vec::new();
        let mut previous = 0;
        for n in wanted {
            if n > previous + 1 {
                out.push(None);
            }
            out.push(Some(n));
            previous = n;
        }
        out
    }

    pub(crate) fn first_shown(&self) -> u64 {
        if self.total == 0 {
            0
        } else {
            (self.page - 1) * PAGE_SIZE + 1
        }
    }

    pub(crate) fn last_shown(&self) -> u64 {
        (self.first_shown() + self.products.len() as u64).saturating_sub(1)
    }
}

/// Why a listing page could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    #[error(transparent)]
    Db(#[from] DbError),
    /// A deep page number of a listing whose page anchors are still being walked (see
    /// [`crate::catalog::anchors`]): the page says so, with `Retry-After`.
    #[error("page numbers this deep in the list are being prepared")]
    Preparing,
}

impl From<mongodb::error::Error> for ListingError {
    fn from(e: mongodb::error::Error) -> Self {
        ListingError::Db(e.into())
    }
}

/// Run a listing query within `base`. A page past the end shows the last page.
///
/// The total comes from the catalog cache (at most a few seconds old, recounted in the
/// background; see [`crate::catalog::cache`]); the products themselves are read fresh, without
/// their stock reservations. A keyset request (`query.seek`) reads from its cursor (see
/// [`crate::catalog::seek`]); a numbered one from the nearer end of the listing, or, deep in a
/// long listing, from the nearest page anchor (see [`crate::catalog::anchors`]).
pub async fn find_page(
    db: &Db,
    base: Document,
    query: &ListingQuery,
) -> Result<Page, ListingError> {
    let filter = query.filter(base);
    if let Some(search) = &query.search {
        return find_search_page(db, filter, search, query).await;
    }
    let total = cache::total(db, &filter).await?;
    page_of(db, &filter, total, query).await
}

/// The page `query` asks for of the listing `filter` (not a search), which holds `total`
/// products.
async fn page_of(
    db: &Db,
    filter: &Document,
    total: u64,
    query: &ListingQuery,
) -> Result<Page, ListingError> {
    match &query.seek {
        Some(seek) => find_seek_page(db, filter, total, seek).await,
        None => find_numbered_page(db, filter, total, query.sort, query.page).await,
    }
}

/// [`find_page`] as the storefront shows it: kept in the catalog cache
/// ([`cache::listing_page`]) by the listing's filter, order and page (or keyset cursor), so its
/// products are at most [`cache::MAX_AGE`] old and never older than a change of the catalog
/// through this instance. The listing's total, as the cache has it now, is part of the key: a
/// page shows the same total as when it was read each time (a kept page is not served with a
/// total older than the cache's), and a new total reads the page anew (which products a page
/// in the second half holds depends on the total) and is read with that total. A search (`q`) is read each time, as
/// before: its matches come from the site search's `$text` query, whose words are too many to
/// keep pages for.
pub(crate) async fn shown_page(
    db: &Db,
    base: Document,
    query: &ListingQuery,
) -> Result<Arc<Page>, ListingError> {
    if query.search.is_some() {
        return Ok(Arc::new(find_page(db, base, query).await?));
    }
    let filter = query.filter(base);
    let total = cache::total(db, &filter).await?;
    let key = format!("{} total={total}", page_key(&filter, query));
    let query = query.clone();
    // The page under this key is read with the key's total (not counted again).
    cache::listing_page(db, key, move |db| {
        let filter = filter.clone();
        let query = query.clone();
        async move { page_of(&db, &filter, total, &query).await }
    })
    .await
}

/// What decides a page of a listing other than a search: the filter (with its base), the order,
/// and the page number or keyset cursor asked for.
fn page_key(filter: &Document, query: &ListingQuery) -> String {
    let at = match &query.seek {
        Some(seek) => seek.param(),
        None => format!("page={}", query.page),
    };
    format!("{filter} sort={} {at}", query.sort.as_str())
}

/// A listing narrowed by a search (`q`): the products the site search finds for it (the same
/// `$text` query: [`ListingQuery::text`]) that pass the other filters, in the listing's sort,
/// by page number. Counted and read without the catalog cache, page anchors or index hints:
/// `$text` takes no hint, and its matches are few next to the catalog.
async fn find_search_page(
    db: &Db,
    mut filter: Document,
    search: &str,
    query: &ListingQuery,
) -> Result<Page, ListingError> {
    let text = query.text.as_deref().unwrap_or(search);
    filter.extend(crate::db::text_filter(text));
    let total = products::collection(db)
        .count_documents(filter.clone())
        .await?;
    let pages = total.div_ceil(PAGE_SIZE).max(1);
    let page = query.page.clamp(1, pages);
    let products: Vec<ProductCard> = products::collection(db)
        .clone_with_type::<ProductCard>()
        .find(filter)
        .sort(query.sort.document())
        .projection(ProductCard::projection())
        .skip((page - 1) * PAGE_SIZE)
        .limit(PAGE_SIZE as i64)
        .await?
        .try_collect()
        .await?;
    Ok(Page {
        products,
        total,
        page,
        pages,
        has_prev: page > 1,
        has_next: page < pages,
        // Numbered links only: a keyset cursor walks the sort index, which `$text` cannot.
        prev: None,
        next: None,
        seek: None,
    })
}

/// Numbered pages deeper than the linked ones of a listing that cannot be anchored (a product
/// without its sort key), read one at a time by skipping (see [`find_numbered_page`]).
static DEEP_SKIPS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// Whether to make the store read `filter` (of `total` products) along the whole catalog's sort
/// index: when the listing is dense in it (see [`seek::walk_is_cheap`]), unless the listing has
/// an index of its own in its order ([`OWN_ORDER_INDEXES`]), which the store's planner picks
/// without a hint and which never reads another listing's products. Dense on average is not
/// dense everywhere: generated editions share their template's date, so a type-filtered walk of
/// the catalog's order crossed runs of hundreds of other products (500 index entries for one
/// page). The whole catalog's total is cached like the listing's.
async fn walk_sort_index(
    db: &Db,
    filter: &Document,
    sort: Sort,
    total: u64,
) -> Result<bool, DbError> {
    if has_own_order_index(filter, sort) {
        return Ok(false);
    }
    let everything = crate::catalog::lifecycle::on_sale_within(Document::new());
    let catalog = if *filter == everything {
        total
    } else {
        cache::total(db, &everything).await?
    };
    Ok(seek::walk_is_cheap(total, catalog))
}

/// Fields whose equality, followed by the newest-first order, is an index of the products
/// collection (see [`products::indexes`]) that the embedded store's planner picks unhinted for
/// a keyset read. Not `category_path`: its index is multikey and, unhinted, the store sorts a
/// category's matches instead of walking it in order (thousands of entries for one page).
const OWN_ORDER_INDEXES: [&str; 1] = ["type"];

/// Whether `filter` names one value of an [`OWN_ORDER_INDEXES`] field and `sort` is that
/// index's order.
fn has_own_order_index(filter: &Document, sort: Sort) -> bool {
    sort == Sort::Newest
        && OWN_ORDER_INDEXES
            .iter()
            .any(|field| matches!(filter.get(*field), Some(Bson::String(_))))
}

/// Page `page` (clamped to the listing) by number.
async fn find_numbered_page(
    db: &Db,
    filter: &Document,
    total: u64,
    sort: Sort,
    page: u64,
) -> Result<Page, ListingError> {
    let pages = total.div_ceil(PAGE_SIZE).max(1);
    let page = page.clamp(1, pages);
    // A page in the second half is read from the other end (the sort reversed, then the rows
    // put back in order), so no page skips more than half the listing: the last page costs what
    // the first does. With a total a few seconds old the seam may shift by the products added
    // or removed meanwhile; the last page always shows the real end.
    let start = (page - 1) * PAGE_SIZE;
    let end = (start + PAGE_SIZE).min(total);
    let from_end = page > 1 && start > total / 2;
    let (order, skip, limit) = if from_end {
        (seek::reversed(sort.document()), total - end, end - start)
    } else {
        (sort.document(), start, PAGE_SIZE)
    };
    // Beyond the linked page numbers, a page is read from the nearest page anchor rather than
    // by skipping up to half the listing.
    let deep = skip > NUMBERED_PAGES * PAGE_SIZE;
    let _deep = if deep {
        let hint = walk_sort_index(db, filter, sort, total).await?;
        let nearer = anchors::FromNearerEnd {
            order: order.clone(),
            skip,
            limit,
            from_end,
        };
        match anchors::read_page(db, filter, sort, start, limit, hint, total, &nearer).await? {
            Anchored::Page(products) => {
                let links = Links {
                    page,
                    has_prev: page > 1,
                    has_next: page < pages,
                    seek: None,
                };
                return Ok(links.page(products, total, sort));
            }
            Anchored::NotReady => return Err(ListingError::Preparing),
            // One such skip at a time, so typing deep page numbers cannot take every worker
            // from the rest of the shop.
            Anchored::Unusable => Some(DEEP_SKIPS.acquire().await.ok()),
        }
    } else {
        None
    };
    let mut products: Vec<ProductCard> = products::collection(db)
        .clone_with_type::<ProductCard>()
        .find(filter.clone())
        .sort(order)
        .projection(ProductCard::projection())
        .skip(skip)
        .limit(limit as i64)
        .await?
        .try_collect()
        .await?;
    if from_end {
        products.reverse();
    }
    let links = Links {
        page,
        has_prev: page > 1,
        has_next: page < pages,
        seek: None,
    };
    Ok(links.page(products, total, sort))
}

/// The page a keyset link asks for. Past the end (the cursor's product and everything after it
/// gone) it is the last page; before the start, the first.
async fn find_seek_page(
    db: &Db,
    filter: &Document,
    total: u64,
    seek: &Seek,
) -> Result<Page, ListingError> {
    let sort = seek.cursor().sort;
    // Walk the sort index when the listing is dense in it.
    let hint = walk_sort_index(db, filter, sort, total).await?;
    let finds = seek::finds(filter, seek, hint);
    let wanted = finds[0].limit as u64;
    let mut products = read_keyset(db, finds, wanted, 0, None).await?;
    let more = products.len() > PAGE_SIZE as usize;
    products.truncate(PAGE_SIZE as usize);
    let pages = total.div_ceil(PAGE_SIZE).max(1);
    let asked = seek.cursor().page;
    let links = match seek {
        Seek::After(_) if products.is_empty() => {
            return find_numbered_page(db, filter, total, sort, pages).await;
        }
        // The number is the one the walk counted, kept within the listing as now counted.
        Seek::After(_) => Links {
            page: asked.clamp(2, pages.max(2)),
            has_prev: true,
            has_next: more,
            seek: Some(seek.clone()),
        },
        Seek::Before(_) if products.len() < PAGE_SIZE as usize => {
            return find_numbered_page(db, filter, total, sort, 1).await;
        }
        Seek::Before(_) => {
            products.reverse();
            Links {
                page: if more {
                    asked.clamp(2, pages.max(2))
                } else {
                    1
                },
                has_prev: more,
                has_next: true,
                seek: Some(seek.clone()),
            }
        }
    };
    Ok(links.page(products, total, sort))
}

/// Where a page sits among its neighbours.
struct Links {
    page: u64,
    has_prev: bool,
    has_next: bool,
    seek: Option<Seek>,
}

impl Links {
    /// The page with its keyset links: Next after its last product, Previous before its first
    /// (the first page itself is linked by number: its address has no cursor).
    fn page(self, products: Vec<ProductCard>, total: u64, sort: Sort) -> Page {
        let next = match products.last() {
            Some(last) if self.has_next => Cursor::at(sort, last, self.page + 1),
            _ => None,
        };
        let prev = match products.first() {
            Some(first) if self.has_prev && self.page > 2 => Cursor::at(sort, first, self.page - 1),
            _ => None,
        };
        Page {
            products,
            total,
            page: self.page,
            pages: total.div_ceil(PAGE_SIZE).max(1),
            has_prev: self.has_prev,
            has_next: self.has_next,
            prev,
            next,
            seek: self.seek,
        }
    }
}

/// A short list for the home page's shelves (active products only): in stock first, in `sort` order, then
/// sold-out ones only if too few are on sale to fill the shelf (a shelf of "newest" should not
/// lead with things nobody can buy).
pub(crate) async fn shelf(
    db: &Db,
    filter: Document,
    sort: Document,
    n: i64,
) -> Result<Vec<ProductCard>, DbError> {
    // Drafts and archived products are never on a shelf.
    let filter = crate::catalog::lifecycle::on_sale_within(filter);
    let mut on_sale = filter.clone();
    on_sale.insert("qty", doc! { "$gt": 0 });
    let mut products: Vec<ProductCard> = products::collection(db)
        .clone_with_type::<ProductCard>()
        .find(on_sale)
        .sort(sort.clone())
        .projection(ProductCard::projection())
        .limit(n)
        .await?
        .try_collect()
        .await?;
    let missing = n - products.len() as i64;
    if missing > 0 {
        let mut sold_out = filter;
        sold_out.insert("qty", doc! { "$lte": 0 });
        let rest: Vec<ProductCard> = products::collection(db)
            .clone_with_type::<ProductCard>()
            .find(sold_out)
            .sort(sort)
            .projection(ProductCard::projection())
            .limit(missing)
            .await?
            .try_collect()
            .await?;
        products.extend(rest);
    }
    Ok(products)
}

/// The home page's shelves: featured, biggest discounts, newest.
pub fn featured_filter() -> (Document, Document) {
    (doc! { "featured": true }, doc! { "details.issue_date": -1 })
}

pub fn discounts_filter() -> (Document, Document) {
    (
        doc! { "pricing.pct_savings": { "$gt": 0 } },
        doc! { "pricing.pct_savings": -1 },
    )
}

pub fn newest_filter() -> (Document, Document) {
    (doc! {}, doc! { "details.issue_date": -1 })
}

/// The listing base for a category page: the category and all its descendants.
pub fn in_category(id: ObjectId) -> Document {
    doc! { "category_path": id }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn bad_page_and_sort_values_fall_back_to_defaults() {
        for page in ["0", "abc", "-3", "", "99999999999999999999999"] {
            let q = ListingQuery::from_params(&params(&[("page", page), ("sort", "evil")]));
            assert!(q.page >= 1, "{page}");
            assert_eq!(q.sort, Sort::Newest);
        }
        let q = ListingQuery::from_params(&params(&[("page", "3"), ("sort", "price-desc")]));
        assert_eq!((q.page, q.sort), (3, Sort::PriceHigh));
    }

    #[test]
    fn control_characters_never_reach_the_search() {
        let q = ListingQuery::from_params(&params(&[("q", "\0\0"), ("genre", "ja\0zz")]));
        assert_eq!(q.search, None, "nothing but NULs is no search");
        assert_eq!(q.genre.as_deref(), Some("jazz"));
    }

    #[test]
    fn numbers_too_large_for_their_type_fall_back_to_defaults() {
        let q = ListingQuery::from_params(&params(&[
            ("page", "18446744073709551616"),
            ("min_price", "92233720368547758.08"),
            ("max_price", "99999999999999999999"),
            ("min_discount", "2147483648"),
        ]));
        assert_eq!(q.page, 1);
        assert_eq!(
            (q.min_price, q.max_price, q.min_discount),
            (None, None, None)
        );
        assert_eq!(
            ListingQuery::from_params(&params(&[("page", "99999999")])).page,
            MAX_PAGE
        );
    }

    #[test]
    fn a_type_listing_newest_first_is_left_to_its_own_index() {
        let album = ListingQuery::from_params(&params(&[("type", "album")])).filter(doc! {});
        assert!(has_own_order_index(&album, Sort::Newest));
        assert!(!has_own_order_index(&album, Sort::PriceLow));
        let everything = ListingQuery::default().filter(doc! {});
        assert!(!has_own_order_index(&everything, Sort::Newest));
        let category = ListingQuery::default().filter(in_category(ObjectId::new()));
        assert!(!has_own_order_index(&category, Sort::Newest));
    }

    /// The number links of page `n` of `pages`.
    fn links(n: u64, pages: u64) -> Vec<Option<u64>> {
        Page {
            products: Vec::new(),
            total: pages * PAGE_SIZE,
            page: n,
            pages,
            has_prev: n > 1,
            has_next: n < pages,
            prev: None,
            next: None,
            seek: None,
        }
        .links()
    }

    #[test]
    fn page_links_show_ends_and_neighbours_with_gaps() {
        assert_eq!(
            links(8, 17),
            vec![
                Some(1),
                None,
                Some(6),
                Some(7),
                Some(8),
                Some(9),
                Some(10),
                None,
                Some(17)
            ]
        );
        assert_eq!(links(1, 1), vec![Some(1)]);
        assert_eq!(links(2, 3), vec![Some(1), Some(2), Some(3)]);
    }

    #[test]
    fn deep_pages_link_no_numbers_but_their_own_and_the_ends() {
        let n = NUMBERED_PAGES;
        // Deep in a long listing: only the ends and this page (keyset links do the rest).
        assert_eq!(
            links(5_000, 80_000),
            vec![Some(1), None, Some(5_000), None, Some(80_000)]
        );
        // The last cheap pages keep their neighbours, up to the edge of the cheap range.
        assert_eq!(
            links(n + 1, 80_000),
            vec![
                Some(1),
                None,
                Some(n - 1),
                Some(n),
                Some(n + 1),
                None,
                Some(80_000)
            ]
        );
        assert_eq!(
            links(80_000 - n, 80_000),
            vec![
                Some(1),
                None,
                Some(80_000 - n),
                Some(80_001 - n),
                Some(80_002 - n),
                None,
                Some(80_000)
            ]
        );
    }
}
