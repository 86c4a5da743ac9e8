//! A small in-process cache for the storefront's read-mostly data: the category tree (the
//! product page's "filed under", a category page's breadcrumbs and children), the site settings
//! and home page shelves, listing totals, and the pages of cards the product lists and category
//! pages show ([`listing_page`], at most [`MAX_PAGES`] per handle). The product page's product
//! has a cache of its own with a shorter bound (`catalog::product_cache`).
//!
//! # Staleness
//!
//! No entry is served older than [`MAX_AGE`] (5 s): a value read from the database at most
//! 5 s before the page that shows it. Up to [`TTL`] (4 s) an entry is fresh. Between [`TTL`] and
//! [`MAX_AGE`] it is still served while a single background task reloads it, so under steady
//! traffic no request waits for a reload. Past [`MAX_AGE`] (after a quiet spell) the request
//! reloads it itself before answering, as when there is no entry at all (then concurrent
//! requests for the same total share one count). Writes through *this* process (admin saves,
//! seeding) invalidate the affected entries at once, so an admin sees their own change on the
//! next page: the writers report them ([`crate::catalog::changes`]) and every read of the cache
//! first catches up with those reports. With several app instances on one MongoDB, another instance's write shows up here
//! within [`MAX_AGE`] (plus the time of the read that loads it).
//!
//! Stock and prices a shopper is about to pay are never read from here: the cart and checkout
//! read products themselves. The shelves and listing pages may show a stock badge or price up
//! to [`MAX_AGE`] old: a stock move (a cart's add, a checkout) is not a change of the catalog
//! here, so a flash sale does not empty the listings every moment; stock received, edits and
//! lifecycle changes are.
//!
//! The cache lives in the [`Db`] handle (every clone shares it, see [`of`]), so a second handle
//! on the same store — another instance — has its own.
//!
//! # Totals no index answers
//!
//! A listing total the store cannot count from index keys (an in-stock filter, `qty > 0`; a
//! price range; a type and a genre together) over many products is a count that reads every
//! candidate document: half a second for 300 000 products, on one store worker, holding the
//! collection's lock against writers (and the readers queued behind them). Such a total is
//! never counted on a request's path once known, and never in one piece: it is counted by
//! walking the listing in its newest-first order, a thousand products per find (the page
//! anchors' walk, [`crate::catalog::anchors::walk`]), in the background, one such recount at a
//! time per handle. Its value is served meanwhile, so it is older than the other entries:
//! recounted every `max(TTL, RECOUNT_SHARE × the last count's duration)` (so recounts take at most a
//! fifth of a core; 4 s for small listings, about 10 s for 300 000 products on a 2-core machine)
//! and, after a write through this process, as soon as the last count's duration has passed
//! again. A total is such a walked one only when the candidates its indexed equality leaves
//! are many ([`PLAIN_COUNT_MAX`]); fewer are counted in one plain count, like the others. Only the
//! first request for such a listing waits for its first count (concurrent ones share it).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};

use crate::catalog::anchors;
use crate::catalog::card::ProductCard;
use crate::catalog::categories::{self, Category};
use crate::catalog::changes::{self, Seen};
use crate::catalog::products;
use crate::catalog::seek::Sort;
use crate::db::site::{self, SiteSettings};
use crate::db::{Db, DbError};

/// How long an entry is served before a background reload is started.
pub(crate) use crate::catalog::changes::TTL;
/// The oldest an entry may be when served; older ones are reloaded before the page is answered.
pub const MAX_AGE: Duration = Duration::from_secs(5);
/// Distinct listing filters whose totals are kept; more start the map over.
const MAX_TOTALS: usize = 1_000;
/// Listing pages kept (see [`listing_page`]): a page holds at most
/// [`crate::catalog::seek::PAGE_SIZE`] cards of a few hundred bytes each, so a few megabytes.
const MAX_PAGES: usize = 1_000;
/// A total no index answers is counted in one plain count when its indexed equality (a type, a
/// category, a genre, a person; else the whole catalog) leaves at most this many candidates to
/// read (about 20 ms of one store worker); more are counted by a walk in chunks.
pub(crate) const PLAIN_COUNT_MAX: u64 = 10_000;
/// Walked totals are recounted at most this often relative to a count's duration: background
/// recounts take at most a fifth of a core.
const RECOUNT_SHARE: u32 = 5;
/// The fields with an index whose equality alone the store counts from index keys, in the order
/// they are tried for a bound on a walked total's candidates.
const COUNTED_EQUALITIES: [&str; 4] = ["type", "category_path", "genre_keys", "people_keys"];

/// One cached value with when it was loaded, and whether a reload is under way.
struct Entry<T> {
    value: Arc<T>,
    loaded: Instant,
    refreshing: bool,
}

/// A single cached value (see the module documentation for its life cycle).
struct Slot<T> {
    entry: Mutex<Option<Entry<T>>>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            entry: Mutex::new(None),
        }
    }
}

/// What a lookup found.
enum Lookup<T> {
    Fresh(Arc<T>),
    /// Stale: served, and this caller starts the one reload.
    StaleReload(Arc<T>),
    /// Stale, with a reload already running.
    Stale(Arc<T>),
    Missing,
}

/// What an entry (or its absence) means for a lookup; a stale entry nobody reloads yet is
/// marked as being reloaded by this caller.
fn lookup_entry<T>(entry: Option<&mut Entry<T>>) -> Lookup<T> {
    match entry {
        None => Lookup::Missing,
        Some(e) if e.loaded.elapsed() < TTL => Lookup::Fresh(Arc::clone(&e.value)),
        // Too old to serve, even while a reload runs: load it now like a missing one.
        Some(e) if e.loaded.elapsed() >= MAX_AGE => Lookup::Missing,
        Some(e) if e.refreshing => Lookup::Stale(Arc::clone(&e.value)),
        Some(e) => {
            e.refreshing = true;
            Lookup::StaleReload(Arc::clone(&e.value))
        }
    }
}

impl<T> Slot<T> {
    fn lookup(&self) -> Lookup<T> {
        let Ok(mut guard) = self.entry.lock() else {
            return Lookup::Missing;
        };
        let found = lookup_entry(guard.as_mut());
        crate::metrics::cache_lookup("catalog", !matches!(found, Lookup::Missing));
        found
    }

    fn store(&self, value: Arc<T>) {
        crate::metrics::cache_refresh("catalog");
        if let Ok(mut guard) = self.entry.lock() {
            *guard = Some(Entry {
                value,
                loaded: Instant::now(),
                refreshing: false,
            });
        }
    }

    /// A failed reload: let a later request try again.
    fn reload_failed(&self) {
        if let Ok(mut guard) = self.entry.lock() {
            if let Some(e) = guard.as_mut() {
                e.refreshing = false;
            }
        }
    }

    fn clear(&self) {
        if let Ok(mut guard) = self.entry.lock() {
            *guard = None;
        }
    }

    /// How long ago the value was loaded; `None` without one.
    fn age(&self) -> Option<Duration> {
        let guard = self.entry.lock().ok()?;
        guard.as_ref().map(|e| e.loaded.elapsed())
    }
}

/// The category tree, indexed for the storefront's lookups.
pub(crate) struct CategoryTree {
    pub(crate) all: Vec<Category>,
    by_id: HashMap<ObjectId, usize>,
    by_slug: HashMap<String, usize>,
}

impl CategoryTree {
    fn new(all: Vec<Category>) -> CategoryTree {
        let by_id = all.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        let by_slug = all
            .iter()
            .enumerate()
            .map(|(i, c)| (c.slug.as_str().to_string(), i))
            .collect();
        CategoryTree {
            all,
            by_id,
            by_slug,
        }
    }

    pub(crate) fn by_id(&self, id: &ObjectId) -> Option<&Category> {
        self.by_id.get(id).map(|i| &self.all[*i])
    }

    pub(crate) fn by_slug(&self, slug: &str) -> Option<&Category> {
        self.by_slug.get(slug).map(|i| &self.all[*i])
    }

    /// Direct children of `parent`, by name (as [`categories::children`] orders them).
    pub(crate) fn children(&self, parent: ObjectId) -> Vec<Category> {
        let mut kids: Vec<Category> = self
            .all
            .iter()
            .filter(|c| c.parent == Some(parent))
            .cloned()
            .collect();
        kids.sort_by(|a, b| a.name.cmp(&b.name));
        kids
    }
}

/// The home page's shelves as last loaded, in shelf order.
pub(crate) type Shelves = Vec<Vec<ProductCard>>;

/// The cached data of one [`Db`] handle.
pub(crate) struct CatalogCache {
    /// Bumped by every invalidation: a reload that started before one is not stored.
    generation: AtomicU64,
    /// The change counters ([`changes`]) this cache has caught up with, and their sum.
    seen: Mutex<Seen>,
    seen_sum: AtomicU64,
    categories: Arc<Slot<CategoryTree>>,
    site: Arc<Slot<SiteSettings>>,
    shelves: Arc<Slot<Shelves>>,
    totals: Mutex<HashMap<String, Arc<TotalSlot>>>,
    /// Totals no index answers, counted by walks (see the module documentation).
    walked: Mutex<HashMap<String, Arc<WalkedTotal>>>,
    /// One background recount of a walked total at a time.
    recounts: Arc<tokio::sync::Semaphore>,
    /// [`PLAIN_COUNT_MAX`], lowered by tests to walk small listings' totals.
    plain_count_max: AtomicU64,
}

/// A listing total: the cached value, and the one initial count concurrent requests share.
#[derive(Default)]
struct TotalSlot {
    slot: Slot<u64>,
    initial: tokio::sync::OnceCell<u64>,
}

impl Default for CatalogCache {
    fn default() -> Self {
        CatalogCache {
            generation: AtomicU64::default(),
            seen: Mutex::default(),
            seen_sum: AtomicU64::default(),
            categories: Arc::default(),
            site: Arc::default(),
            shelves: Arc::default(),
            totals: Mutex::default(),
            walked: Mutex::default(),
            recounts: Arc::new(tokio::sync::Semaphore::new(1)),
            plain_count_max: AtomicU64::new(PLAIN_COUNT_MAX),
        }
    }
}

/// A total counted by walking its listing: the last count, kept and served while the next one
/// runs (see the module documentation).
#[derive(Default)]
struct WalkedTotal {
    /// The first count, which the requests that find no value share.
    initial: tokio::sync::OnceCell<u64>,
    state: Mutex<WalkedState>,
}

#[derive(Default)]
struct WalkedState {
    /// The last count: its value, when it started and how long it took.
    counted: Option<(u64, Instant, Duration)>,
    counting: bool,
    /// A write through this process since the last count started.
    changed: bool,
}

impl WalkedState {
    /// Whether a recount should start now.
    fn due(&self) -> bool {
        match self.counted {
            _ if self.counting => false,
            None => false,
            Some((_, at, cost)) if self.changed => at.elapsed() >= cost,
            Some((_, at, cost)) => at.elapsed() >= TTL.max(cost * RECOUNT_SHARE),
        }
    }
}

impl CatalogCache {
    /// Drops what the changes reported since the last call made stale.
    fn catch_up(&self, now: Seen) {
        // The counters only grow, so an equal sum means nothing changed: the common case takes
        // no lock.
        let sum = now.products + now.categories + now.site;
        if self.seen_sum.load(Ordering::Acquire) == sum {
            return;
        }
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        // Another reader may have caught up with newer counters meanwhile: never step back.
        if now.products <= seen.products
            && now.categories <= seen.categories
            && now.site <= seen.site
        {
            return;
        }
        let was = std::mem::replace(&mut *seen, now);
        self.seen_sum.store(sum, Ordering::Release);
        if now.categories != was.categories {
            self.categories_changed();
        } else if now.products != was.products {
            self.products_changed();
        }
        if now.site != was.site {
            self.site_changed();
        }
    }

    /// Categories were added, renamed, moved or deleted.
    fn categories_changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.categories.clear();
        // Category moves change which products a category total counts.
        self.products_changed();
    }

    /// Products were added, edited, deleted or restocked.
    fn products_changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.shelves.clear();
        if let Ok(mut totals) = self.totals.lock() {
            totals.clear();
        }
        // Walked totals are kept (a request never waits for their count) and recounted soon.
        if let Ok(walked) = self.walked.lock() {
            for total in walked.values() {
                if let Ok(mut state) = total.state.lock() {
                    state.changed = true;
                }
            }
        }
    }

    /// The site settings were saved.
    fn site_changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.site.clear();
    }

    /// The invalidation count, after catching up with `db`'s reported changes.
    fn generation(&self, db: &Db) -> u64 {
        self.catch_up(changes::of(db).seen());
        self.generation.load(Ordering::SeqCst)
    }
}

/// The cache kept with `db` (a [`Db::extension`], so `db` holds it without knowing the catalog),
/// caught up with the changes reported since it was last read.
pub(crate) fn of(db: &Db) -> Arc<CatalogCache> {
    let cache = db.extension::<CatalogCache>();
    cache.catch_up(changes::of(db).seen());
    cache
}

/// Serve `slot` of `db`'s cache, loading it with `load` when missing and reloading it in the
/// background when stale.
async fn cached<T, F, Fut>(
    db: &Db,
    slot: fn(&CatalogCache) -> &Arc<Slot<T>>,
    load: F,
) -> Result<Arc<T>, DbError>
where
    T: Send + Sync + 'static,
    F: Fn(Db) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, DbError>> + Send + 'static,
{
    let cache = of(db);
    let slot = Arc::clone(slot(&cache));
    serve(db, cache, slot, load).await
}

/// Serve `slot`, an entry of `cache` (`db`'s), loading it with `load` when missing and
/// reloading it in the background when stale; a value loaded across an invalidation is served
/// to its request but not kept.
async fn serve<T, E, F, Fut>(
    db: &Db,
    cache: Arc<CatalogCache>,
    slot: Arc<Slot<T>>,
    load: F,
) -> Result<Arc<T>, E>
where
    T: Send + Sync + 'static,
    E: std::fmt::Display + Send + 'static,
    F: Fn(Db) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    match slot.lookup() {
        Lookup::Fresh(v) | Lookup::Stale(v) => Ok(v),
        Lookup::StaleReload(v) => {
            let db = db.clone();
            tokio::spawn(async move {
                let generation = cache.generation(&db);
                match load(db.clone()).await {
                    Ok(fresh) if cache.generation(&db) == generation => {
                        slot.store(Arc::new(fresh));
                    }
                    // Something was invalidated meanwhile: this value may predate the write, so
                    // it is dropped and a later request reloads.
                    Ok(_) => slot.reload_failed(),
                    Err(e) => {
                        tracing::warn!(error = %e, "reloading cached catalog data failed");
                        slot.reload_failed();
                    }
                }
            });
            Ok(v)
        }
        Lookup::Missing => {
            let generation = cache.generation(db);
            let value = Arc::new(load(db.clone()).await?);
            if cache.generation(db) == generation {
                slot.store(Arc::clone(&value));
            }
            Ok(value)
        }
    }
}

/// The listing pages of one type `T` kept with a [`Db`] handle (a [`Db::extension`] of its
/// own, as the cache sits below the listings and does not know what a page is), by the key the
/// listing makes of its filter, order and page; emptied whenever the catalog cache is
/// invalidated.
struct ListingPages<T> {
    kept: Mutex<KeptPages<T>>,
}

struct KeptPages<T> {
    /// The catalog cache's invalidation count these pages were loaded under.
    generation: u64,
    by_key: HashMap<String, Arc<Slot<T>>>,
}

impl<T> Default for ListingPages<T> {
    fn default() -> Self {
        ListingPages {
            kept: Mutex::new(KeptPages {
                generation: 0,
                by_key: HashMap::new(),
            }),
        }
    }
}

impl<T> KeptPages<T> {
    /// Room for one more page: when [`MAX_PAGES`] are kept, the expired ones are dropped, and
    /// all of them if that is not enough.
    fn make_room(&mut self) {
        if self.by_key.len() < MAX_PAGES {
            return;
        }
        self.by_key
            .retain(|_, slot| slot.age().is_some_and(|age| age < MAX_AGE));
        if self.by_key.len() >= MAX_PAGES {
            self.by_key.clear();
        }
    }
}

/// A page of a listing, kept under `key` (which the listing makes of everything that decides
/// the page: its filter, order, and page number or keyset cursor) with the life cycle of the
/// other entries (see the module documentation): loaded with `load` when missing, served up to
/// [`MAX_AGE`] old, reloaded in the background past [`TTL`], dropped by every change of the
/// catalog reported through this handle. At most [`MAX_PAGES`] pages of a type are kept.
pub(crate) async fn listing_page<T, E, F, Fut>(db: &Db, key: String, load: F) -> Result<Arc<T>, E>
where
    T: Send + Sync + 'static,
    E: std::fmt::Display + Send + 'static,
    F: Fn(Db) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    let cache = of(db);
    let generation = cache.generation.load(Ordering::SeqCst);
    let pages = db.extension::<ListingPages<T>>();
    let slot = match pages.kept.lock() {
        Ok(mut kept) => {
            if kept.generation != generation {
                kept.by_key.clear();
                kept.generation = generation;
            }
            if !kept.by_key.contains_key(&key) {
                kept.make_room();
            }
            Arc::clone(kept.by_key.entry(key).or_default())
        }
        // Poisoned: load the page, keeping nothing.
        Err(_) => return Ok(Arc::new(load(db.clone()).await?)),
    };
    serve(db, cache, slot, load).await
}

/// The category tree.
pub(crate) async fn categories(db: &Db) -> Result<Arc<CategoryTree>, DbError> {
    cached(
        db,
        |c| &c.categories,
        |db| async move { Ok(CategoryTree::new(categories::all(&db).await?)) },
    )
    .await
}

/// The site settings (name and tagline).
pub(crate) async fn site(db: &Db) -> Result<Arc<SiteSettings>, DbError> {
    cached(db, |c| &c.site, |db| async move { site::load(&db).await }).await
}

/// The home page's shelves, as `load` reads them (the home page passes the listing's shelf
/// reads: the cache sits below the listings and does not know how shelves are found).
pub(crate) async fn shelves<F, Fut>(db: &Db, load: F) -> Result<Arc<Shelves>, DbError>
where
    F: Fn(Db) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Shelves, DbError>> + Send + 'static,
{
    cached(db, |c| &c.shelves, load).await
}

/// Count the products matching `filter` with the `count` command, which docstore answers from
/// index keys alone when an index covers an equality filter (MongoDB counts from the index
/// too); the whole catalog is the collection's size.
async fn count_products(db: &Db, filter: Document) -> Result<u64, DbError> {
    if filter.is_empty() {
        return Ok(products::collection(db).estimated_document_count().await?);
    }
    let on_sale = crate::catalog::lifecycle::on_sale();
    let status = on_sale.get("status");
    if status.is_some() && filter.get("status") == status {
        // A storefront listing: the products of the rest of the filter less the few hidden
        // (draft or archived) ones among them. The rest is often one equality the store counts
        // from index keys alone (a category, the whole catalog); the hidden ones are found
        // through the status index. Counting the listing as it is would visit every document
        // of it, as "not hidden" cannot be counted from an index.
        let mut rest = filter.clone();
        rest.remove("status");
        let all = if rest.is_empty() {
            products::collection(db).estimated_document_count().await?
        } else {
            run_count(db, rest.clone(), None).await?
        };
        let mut hidden = rest;
        hidden.extend(crate::catalog::lifecycle::hidden());
        // Without the status index (not created yet) the store refuses the hint: count anyway.
        let hidden = match run_count(db, hidden.clone(), Some(doc! { "status": 1 })).await {
            Ok(n) => n,
            Err(_) => run_count(db, hidden, None).await?,
        };
        return Ok(all.saturating_sub(hidden));
    }
    run_count(db, filter, None).await
}

/// The `count` command's answer for `filter`, through the index `hint` when given.
async fn run_count(db: &Db, filter: Document, hint: Option<Document>) -> Result<u64, DbError> {
    let mut command = doc! { "count": products::COLLECTION, "query": filter };
    if let Some(hint) = hint {
        command.insert("hint", hint);
    }
    let reply = db.database().run_command(command).await?;
    Ok(match reply.get("n") {
        Some(bson::Bson::Int32(n)) => *n as u64,
        Some(bson::Bson::Int64(n)) => *n as u64,
        Some(bson::Bson::Double(n)) => *n as u64,
        _ => 0,
    })
}

/// The number of products matching `filter`: cached per filter (see the module documentation);
/// only the first request for a filter waits, sharing one count with its concurrent peers.
pub async fn total(db: &Db, filter: &Document) -> Result<u64, DbError> {
    if !index_counts(filter) {
        return walked_total(db, filter).await;
    }
    let cache = of(db);
    let key = filter.to_string();
    let slot = {
        let Ok(mut totals) = cache.totals.lock() else {
            return count_products(db, filter.clone()).await;
        };
        if totals.len() >= MAX_TOTALS && !totals.contains_key(&key) {
            totals.clear();
        }
        Arc::clone(totals.entry(key).or_default())
    };
    match slot.slot.lookup() {
        Lookup::Fresh(n) | Lookup::Stale(n) => Ok(*n),
        Lookup::StaleReload(n) => {
            let db = db.clone();
            let filter = filter.clone();
            tokio::spawn(async move {
                match count_products(&db, filter).await {
                    Ok(fresh) => slot.slot.store(Arc::new(fresh)),
                    Err(e) => {
                        tracing::warn!(error = %e, "recounting a listing total failed");
                        slot.slot.reload_failed();
                    }
                }
            });
            Ok(*n)
        }
        Lookup::Missing if slot.initial.initialized() => {
            // Expired (past MAX_AGE): recount before answering.
            let n = count_products(db, filter.clone()).await?;
            slot.slot.store(Arc::new(n));
            Ok(n)
        }
        Lookup::Missing => {
            let n = *slot
                .initial
                .get_or_try_init(|| count_products(db, filter.clone()))
                .await?;
            // Stored once per slot; a slot replaced by an invalidation starts afresh.
            if matches!(slot.slot.lookup(), Lookup::Missing) {
                slot.slot.store(Arc::new(n));
            }
            Ok(n)
        }
    }
}

/// Whether the store counts `filter` from index keys (see [`count_products`]): the whole
/// catalog, or one scalar equality on an indexed field, each within the products on sale.
fn index_counts(filter: &Document) -> bool {
    let mut rest = filter.clone();
    let on_sale = crate::catalog::lifecycle::on_sale();
    if rest.get("status") == on_sale.get("status") {
        rest.remove("status");
    }
    let mut conditions = rest.iter();
    match (conditions.next(), conditions.next()) {
        (None, _) => true,
        (Some((field, value)), None) => {
            COUNTED_EQUALITIES.contains(&field.as_str()) && is_scalar(value)
        }
        _ => false,
    }
}

/// A value an equality on it is counted from index keys for.
fn is_scalar(value: &Bson) -> bool {
    matches!(
        value,
        Bson::String(_) | Bson::ObjectId(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Boolean(_)
    )
}

/// A total no index answers (see the module documentation): the last count, recounted in the
/// background when due; only when there is none yet does the request wait for the first.
async fn walked_total(db: &Db, filter: &Document) -> Result<u64, DbError> {
    let cache = of(db);
    let key = filter.to_string();
    let total = {
        let Ok(mut walked) = cache.walked.lock() else {
            return count_walked(db, filter).await;
        };
        if walked.len() >= MAX_TOTALS && !walked.contains_key(&key) {
            walked.clear();
        }
        Arc::clone(walked.entry(key).or_default())
    };
    let (known, due) = match total.state.lock() {
        Ok(mut state) => {
            let due = state.due();
            if due {
                state.counting = true;
                state.changed = false;
            }
            (state.counted.map(|(n, _, _)| n), due)
        }
        Err(_) => (None, false),
    };
    crate::metrics::cache_lookup("catalog", known.is_some());
    if let Some(n) = known {
        if due {
            let db = db.clone();
            let filter = filter.clone();
            let recounts = Arc::clone(&cache.recounts);
            tokio::spawn(async move {
                let _one_at_a_time = recounts.acquire_owned().await;
                let started = Instant::now();
                let counted = count_walked(&db, &filter).await;
                let cost = started.elapsed();
                if let Err(e) = &counted {
                    tracing::warn!(error = %e, "recounting a listing total failed");
                }
                if let Ok(mut state) = total.state.lock() {
                    state.counting = false;
                    if let Ok(n) = counted {
                        crate::metrics::cache_refresh("catalog");
                        state.counted = Some((n, started, cost));
                    }
                }
            });
        }
        return Ok(n);
    }
    let first = total.initial.get_or_try_init(|| async {
        let started = Instant::now();
        let n = count_walked(db, filter).await?;
        if let Ok(mut state) = total.state.lock() {
            state.counted.get_or_insert((n, started, started.elapsed()));
        }
        Ok::<u64, DbError>(n)
    });
    Ok(*first.await?)
}

/// Count a total no index answers: by walking its listing newest first in chunks when many
/// candidates are left by its indexed equality (or by none: the whole catalog) and matches are
/// dense among them, else in one plain count.
async fn count_walked(db: &Db, filter: &Document) -> Result<u64, DbError> {
    let catalog = products::collection(db).estimated_document_count().await?;
    let mut candidates = catalog;
    // The type's own newest-first index holds the type's products in the listing's order (the
    // store's planner picks it for a type-filtered walk); else the walk follows the whole
    // catalog's newest-first index.
    let mut own_order = false;
    for field in COUNTED_EQUALITIES {
        if let Some(value) = filter.get(field).filter(|v| is_scalar(v)) {
            candidates = candidates.min(run_count(db, doc! { field: value.clone() }, None).await?);
            own_order |= field == "type";
        }
    }
    // Along the whole catalog's order, a chunk of a sparse listing would read many products of
    // others: walked only when at least one product in `SPARSEST` is a candidate.
    const SPARSEST: u64 = 30;
    let dense = own_order || candidates.saturating_mul(SPARSEST) >= catalog;
    let plain_max = of(db).plain_count_max.load(Ordering::Relaxed);
    if candidates <= plain_max || !dense {
        return count_products(db, filter.clone()).await;
    }
    let walked = anchors::walk(db, filter, Sort::Newest, u64::MAX, !own_order).await?;
    if walked.usable {
        Ok(walked.count)
    } else {
        // A product without a date cannot be walked past: count the listing as it is.
        count_products(db, filter.clone()).await
    }
}

/// Count every total no index answers of this handle by walking, however few its candidates
/// (for tests of walked totals on small catalogs).
#[doc(hidden)]
pub fn walk_every_total(db: &Db) {
    of(db).plain_count_max.store(0, Ordering::Relaxed);
}

/// Filed-under categories of a product, from the cached tree.
pub(crate) async fn filed_under(db: &Db, ids: &[ObjectId]) -> Result<Vec<Category>, DbError> {
    let tree = categories(db).await?;
    Ok(ids
        .iter()
        .filter_map(|id| tree.by_id(id))
        .cloned()
        .collect())
}
