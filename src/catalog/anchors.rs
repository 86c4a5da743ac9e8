//! Page anchors: how a numbered page deep in a long listing (`/products?page=41667` of a million
//! products) is read without skipping half the listing.
//!
//! For each listing (its filter and sort) that someone asks a deep page number of, one
//! background walk reads the listing in order, a few thousand products per find and only their
//! sort key and `_id` (the projection the sort index covers: MongoDB, and docstore for an index
//! multikey on no field, answer it from the index keys, which for the newest-first listing
//! also hold the status the on-sale condition tests; the category index is multikey on
//! `category_path`, so docstore decides the status from its keys but reads the documents),
//! and keeps the place of every
//! [`SPACING`]th product: its sort key, `_id`, and how many products after it share its key.
//! Page `N` then starts from the anchor just before it: a keyset read after that anchor (the
//! same finds as a Next link, see [`crate::catalog::seek`]) that skips fewer than [`SPACING`]
//! products. Every page then costs about what page 20 does, at any depth, on docstore and on
//! MongoDB alike (nothing here relies on the store being in-process).
//!
//! # Staleness
//!
//! Anchors are positions at the time of their walk. A product added or removed before an anchor
//! since then shifts the pages after it by one: page `N` shows the products that were at its
//! place when the anchors were walked, give or take the products added or removed meanwhile.
//! Keyset links (Next / Previous) stay exact, and the first and last [`NUMBERED_PAGES`] pages
//! are always read from their end of the listing, exactly. Anchors are walked again in the
//! background, never by the request that finds them old:
//! - every `max(TTL, 10 × the last walk's duration)` (5 s for small listings, about 10–20 s for a
//!   listing of a million products, so walks take at most a tenth of a core);
//! - `max(TTL, 2 × the walk)` after a write through this process (see
//!   [`crate::catalog::changes::products_changed`]), whose anchors are kept and
//!   served meanwhile.
//!
//! So a deep page number drifts by at most the products added or removed in the last
//! `max(5 s, 10 walks)` plus one walk. One walk runs at a time per store handle.
//!
//! # Before the anchors exist
//!
//! A deep page of a listing with no anchors yet (right after start-up, a new filter, or kept
//! anchors a write made unusable) is read by skipping, from the nearer end of the listing,
//! along the listing's index ([`skip_index`]), projecting only the sort key and `_id`; where
//! that index's keys decide the whole filter (newest first, of all products or of a category)
//! the store counts the skipped products from the keys without reading them (docstore's keyed
//! scan, MongoDB's covered `IXSCAN`). The page's products are then read by `_id`
//! ([`read_by_skipping`]). That read is bounded: one at a time per store handle,
//! at most [`SKIP_BOUND`] (sent as `maxTimeMS` too: the store stops it there), and, where the
//! index's keys do not hold every field of the filter (so the store reads each skipped
//! product), at most [`UNDECIDED_SKIP`] products skipped. When another such read is under way,
//! or the bound is hit, the request waits for the listing's walk for what is left of [`WAIT`],
//! then answers [`Anchored::NotReady`], which the page turns into a 503 "being prepared" page
//! with `Retry-After` (never a multi-second skip); the walk goes on and the next try is served
//! from the anchors. A page read by skipping is exact (the listing as it is now), so it needs
//! no anchors at all.
//!
//! # Across restarts and instances
//!
//! A walk's anchors are also kept in the database ([`COLLECTION`], at most once a
//! [`PERSIST_EVERY`] per listing and instance), so a process that has none for a listing (just
//! started, or it dropped them for memory) serves deep pages from the kept ones at once, while
//! its own first walk runs in the background and replaces them. Kept anchors are used only when
//! - their walk is at most [`KEPT_MAX_AGE`] old, by the database handle's clock, and
//! - they counted as many products as the listing's total has now (the cached total the page
//!   shows).
//!
//! So a write by another instance (or by this one before a restart) that added or removed
//! products since the kept walk makes them unusable, and the page waits for this process's own
//! walk as a first deep page always did; writes that added and removed equally many products
//! before an anchor shift the pages after it by at most their number, as for anchors in memory,
//! and only until this process's walk (seconds) replaces them. Every page read from anchors, kept
//! or walked, is a run of the listing in order: the keyset read after an anchor never repeats or
//! skips a product, only its page number can be off by the products moved since the walk.
//!
//! With several instances on one database each walks its own anchors (as above): another
//! instance's writes reach this one's anchors by its periodic walks, as they reach its totals.
//!
//! [`NUMBERED_PAGES`]: crate::catalog::seek::NUMBERED_PAGES
//! [`TTL`]: crate::catalog::changes::TTL

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use tokio::sync::{watch, Semaphore};

use crate::catalog::card::ProductCard;
use crate::catalog::changes;
use crate::catalog::changes::TTL;
use crate::catalog::products;
use crate::catalog::seek::{self, read_keyset, run_find, Cursor, PlannedFind, Seek, Sort};
use crate::db::{Db, DbError};

/// Products between two anchors: a deep page skips fewer than this many. Small, because a skip
/// is not free: docstore reads every skipped document (about 4 µs each at a million products,
/// where a page that skips 228 serves a third of the requests one that skips none does); and a
/// multiple of the page size, so a page skips either nothing or one page.
pub(crate) const SPACING: u64 = 2 * crate::catalog::seek::PAGE_SIZE;
/// Products read by one find of a walk (one round trip). Small enough that the store is not
/// held up: docstore runs a find in place on its connection's worker thread, and a find of
/// 4 800 products there made the pages served meanwhile wait tens of milliseconds.
const CHUNK: u64 = 960;
/// Listings (filter and sort) whose anchors are kept; the least recently used is dropped.
const MAX_LISTINGS: usize = 32;
/// Anchors kept over all listings (about 100 bytes each: 30 MB); past this the least recently
/// used listings are dropped. A listing of a million products has about 42 000.
const MAX_ANCHORS: usize = 300_000;
/// How long a deep page waits for its listing's first walk.
pub(crate) const WAIT: Duration = Duration::from_millis(500);
/// Most products a read by skipping passes over when the listing's index keys do not decide its
/// whole filter, so the store reads each skipped product (about 4 µs each at a million products,
/// against about 0.2 µs for an entry the keys decide; measured: 0.5–2.6 s for the other sorts'
/// middle pages): about 0.2 s.
const UNDECIDED_SKIP: u64 = 50_000;
/// The longest a deep page's read by skipping may take before its listing has anchors (see
/// "Before the anchors exist" above); past it the page waits for the walk for what is left of
/// [`WAIT`].
pub(crate) const SKIP_BOUND: Duration = Duration::from_millis(300);
/// A page more than this far past its anchor (the listing grew since the walk) waits for a
/// new walk rather than skipping that far.
const MAX_SKIP: u64 = 480;
/// Where walked anchors are kept between restarts and for other instances: per listing, parts of
/// at most [`PART`] anchors, `{_id: "<listing>#<part>", listing, walk, walked_at, sort, every,
/// count, usable, parts, anchors: [[key, _id, ties_after], …]}`. A cache: losing it costs a
/// walk.
pub const COLLECTION: &str = "page_anchors";
/// Anchors per kept document (a million products' listing has about 42 000: six documents of
/// well under the 16 MiB limit even with long title keys).
const PART: usize = 8_192;
/// Kept anchors older than this are not used.
pub(crate) const KEPT_MAX_AGE: Duration = Duration::from_secs(3_600);
/// Kept anchors of a listing nobody has walked for this long are deleted by a TTL index, so the
/// filters and sorts a crawler tried once do not keep documents for ever.
const KEPT_FOR: Duration = Duration::from_secs(24 * 3_600);

/// The TTL index that clears anchors no walk has refreshed for [`KEPT_FOR`].
pub(crate) fn indexes() -> Vec<mongodb::IndexModel> {
    vec![mongodb::IndexModel::builder()
        .keys(doc! { "walked_at": 1 })
        .options(
            mongodb::options::IndexOptions::builder()
                .expire_after(KEPT_FOR)
                .build(),
        )
        .build()]
}

/// A listing's walked anchors are kept at most this often per instance (a kept set of a million
/// products' listing is about 2 MB to write).
pub(crate) const PERSIST_EVERY: Duration = Duration::from_secs(60);

/// One anchor: the product at a multiple of [`SPACING`] (less one) in the listing's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Anchor {
    pub(crate) key: Bson,
    pub(crate) id: ObjectId,
    /// Products after this one with the same sort key (the keyset read after it starts with
    /// them, see [`seek::finds`]).
    pub(crate) ties_after: u64,
}

/// A listing's anchors as walked: anchor `i` is the product at position `(i + 1) · every - 1`
/// (counted from 0).
#[derive(Debug, Clone)]
pub struct Anchors {
    pub(crate) sort: Sort,
    pub(crate) every: u64,
    pub list: Vec<Anchor>,
    /// Products the walk saw.
    pub count: u64,
    /// False when a product lacked its sort key: such a listing cannot be walked by keyset, and
    /// its deep pages are read by skipping.
    pub usable: bool,
}

/// Where a page starting at `start` (counted from 0) is read from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan<'a> {
    /// From the start of the listing, skipping `start` products.
    FromStart,
    /// After this anchor: skip `skip` products, `skip < ties_after` being among its ties.
    After { anchor: &'a Anchor, skip: u64 },
    /// Too far past the last anchor: the anchors are out of date.
    TooFar,
}

impl Anchors {
    pub(crate) fn plan(&self, start: u64) -> Plan<'_> {
        let blocks = (start / self.every).min(self.list.len() as u64);
        if blocks == 0 {
            return if start <= MAX_SKIP {
                Plan::FromStart
            } else {
                Plan::TooFar
            };
        }
        let anchor = &self.list[blocks as usize - 1];
        let position = blocks * self.every - 1;
        let skip = start - position - 1;
        if skip > MAX_SKIP {
            return Plan::TooFar;
        }
        Plan::After { anchor, skip }
    }
}

/// What reading a page through anchors gave.
pub(crate) enum Anchored {
    Page(Vec<ProductCard>),
    /// The anchors are not walked yet (or too old for this page) and the walk did not finish
    /// within [`WAIT`]: answer "being prepared".
    NotReady,
    /// The listing cannot be anchored (a product lacks its sort key): read it some other way.
    Unusable,
}

/// The anchors of every listing asked for, kept with a [`Db`] handle (see [`of`]).
pub struct AnchorCache {
    listings: Mutex<HashMap<String, Arc<Listing>>>,
    /// One walk at a time.
    walks: Arc<Semaphore>,
    /// One read by skipping at a time (see [`read_by_skipping`]); held until the store has
    /// answered, even when the request stopped waiting for it.
    skip_reads: Arc<Semaphore>,
    /// The products change counter ([`changes`]) last caught up with.
    seen_products: std::sync::atomic::AtomicU64,
}

impl Default for AnchorCache {
    fn default() -> Self {
        AnchorCache {
            listings: Mutex::new(HashMap::new()),
            walks: Arc::new(Semaphore::new(1)),
            skip_reads: Arc::new(Semaphore::new(1)),
            seen_products: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// The anchor cache kept with `db` (a [`Db::extension`]), caught up with the product changes
/// reported since it was last read: a change marks every listing's anchors for a new walk.
pub fn of(db: &Db) -> Arc<AnchorCache> {
    let cache = db.extension::<AnchorCache>();
    let now = changes::of(db).seen().products;
    // Read first: the common case (nothing changed) writes nothing shared.
    if cache
        .seen_products
        .load(std::sync::atomic::Ordering::Acquire)
        != now
        && cache
            .seen_products
            .swap(now, std::sync::atomic::Ordering::AcqRel)
            != now
    {
        cache.products_changed();
    }
    cache
}

/// One listing's anchors and the state of its walks.
struct Listing {
    anchors: watch::Sender<Option<Arc<Anchors>>>,
    state: Mutex<WalkState>,
    /// The kept anchors were looked up (once per listing and process).
    looked_up: tokio::sync::OnceCell<()>,
}

struct WalkState {
    /// When the anchors served were walked (started), and how long that walk took.
    walked: Option<(Instant, Duration)>,
    walking: bool,
    /// A write through this process since the last walk started.
    changed: bool,
    last_used: Instant,
    /// When this process last kept a walk's anchors in the database.
    kept: Option<Instant>,
}

impl AnchorCache {
    /// Products were added, changed or removed through this process: every listing's anchors
    /// are walked again soon (and served meanwhile).
    fn products_changed(&self) {
        if let Ok(listings) = self.listings.lock() {
            for listing in listings.values() {
                if let Ok(mut state) = listing.state.lock() {
                    state.changed = true;
                }
            }
        }
    }

    /// Drop the least recently used listings (other than `keep`) while more than
    /// [`MAX_ANCHORS`] anchors are kept.
    fn bound_memory(&self, keep: &Arc<Listing>) {
        let Ok(mut listings) = self.listings.lock() else {
            return;
        };
        let size = |l: &Listing| l.anchors.borrow().as_ref().map_or(0, |a| a.list.len());
        let mut kept: usize = listings.values().map(|l| size(l)).sum();
        while kept > MAX_ANCHORS {
            let Some(key) =
                least_recently_used(&listings, |l| !Arc::ptr_eq(l, keep) && size(l) > 0)
            else {
                break;
            };
            if let Some(dropped) = listings.remove(&key) {
                kept -= size(&dropped);
            }
        }
    }

    fn listing(&self, key: String) -> Arc<Listing> {
        let Ok(mut listings) = self.listings.lock() else {
            return Arc::new(Listing::new());
        };
        if listings.len() >= MAX_LISTINGS && !listings.contains_key(&key) {
            if let Some(oldest) = least_recently_used(&listings, |_| true) {
                listings.remove(&oldest);
            }
        }
        Arc::clone(
            listings
                .entry(key)
                .or_insert_with(|| Arc::new(Listing::new())),
        )
    }

    /// Hold off every walk of this handle while the guard lives (for tests of what a deep page
    /// answers before its anchors exist).
    #[doc(hidden)]
    pub async fn hold_walks(&self) -> tokio::sync::OwnedSemaphorePermit {
        Arc::clone(&self.walks)
            .acquire_owned()
            .await
            .expect("the walk semaphore is never closed")
    }

    /// Hold off every read by skipping of this handle while the guard lives (for tests of what
    /// a deep page answers when that read is not possible).
    #[doc(hidden)]
    pub async fn hold_skip_reads(&self) -> tokio::sync::OwnedSemaphorePermit {
        Arc::clone(&self.skip_reads)
            .acquire_owned()
            .await
            .expect("the skip read semaphore is never closed")
    }
}

/// The key of the listing among those `eligible` that was asked for longest ago.
fn least_recently_used(
    listings: &HashMap<String, Arc<Listing>>,
    eligible: impl Fn(&Arc<Listing>) -> bool,
) -> Option<String> {
    listings
        .iter()
        .filter(|(_, l)| eligible(l))
        .min_by_key(|(_, l)| l.state.lock().map(|s| s.last_used).ok())
        .map(|(k, _)| k.clone())
}

impl Listing {
    fn new() -> Listing {
        Listing {
            anchors: watch::Sender::new(None),
            state: Mutex::new(WalkState {
                walked: None,
                walking: false,
                changed: false,
                last_used: Instant::now(),
                kept: None,
            }),
            looked_up: tokio::sync::OnceCell::new(),
        }
    }

    /// Whether a walk should start now (and if so, it is marked as started).
    fn walk_due(&self, too_far: bool) -> bool {
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        state.last_used = Instant::now();
        if state.walking {
            return false;
        }
        let due = match state.walked {
            None => true,
            Some(_) if too_far => true,
            Some((at, cost)) => {
                let interval = if state.changed {
                    TTL.max(cost * 2)
                } else {
                    TTL.max(cost * 10)
                };
                at.elapsed() >= interval
            }
        };
        if due {
            state.walking = true;
            state.changed = false;
        }
        due
    }
}

/// The anchors of `filter` under `sort`, walked now in the background when missing or due (or
/// `too_far`: the listing grew past them, so they are not served). `hint` names the sort index
/// for the walk's finds (see [`seek::walk_is_cheap`]).
async fn anchors(
    db: &Db,
    filter: &Document,
    sort: Sort,
    hint: bool,
    too_far: bool,
    total: u64,
) -> Found {
    let cache = of(db);
    let key = format!("{}|{}", sort.as_str(), filter);
    let listing = cache.listing(key.clone());
    if listing.walk_due(too_far) {
        let db = db.clone();
        let filter = filter.clone();
        let walks = Arc::clone(&cache.walks);
        let listing = Arc::clone(&listing);
        let cache = Arc::clone(&cache);
        let key = key.clone();
        tokio::spawn(async move {
            let _one_at_a_time = walks.acquire_owned().await;
            let started = Instant::now();
            let walked = walk(&db, &filter, sort, SPACING, hint).await;
            let cost = started.elapsed();
            let mut keep = false;
            if let Ok(mut state) = listing.state.lock() {
                state.walking = false;
                if walked.is_ok() {
                    state.walked = Some((started, cost));
                    keep = state.kept.is_none_or(|at| at.elapsed() >= PERSIST_EVERY);
                    if keep {
                        state.kept = Some(Instant::now());
                    }
                }
            }
            match walked {
                Ok(anchors) => {
                    tracing::debug!(
                        products = anchors.count,
                        anchors = anchors.list.len(),
                        ms = cost.as_millis() as u64,
                        "walked a listing's page anchors"
                    );
                    let anchors = Arc::new(anchors);
                    listing.anchors.send_replace(Some(Arc::clone(&anchors)));
                    cache.bound_memory(&listing);
                    if keep {
                        if let Err(e) = store(&db, &key, &anchors).await {
                            tracing::warn!(error = %e, "keeping a listing's page anchors failed");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "walking a listing's page anchors failed"),
            }
        });
    }
    if listing.anchors.borrow().is_none() {
        // None in this process yet: the kept ones serve until the walk started above is done.
        listing
            .looked_up
            .get_or_init(|| async {
                match load(db, &key, sort).await {
                    Ok(Some((kept, walked_at)))
                        if usable_kept(&kept, walked_at, db.now(), total) =>
                    {
                        listing.anchors.send_if_modified(|current| {
                            let empty = current.is_none();
                            if empty {
                                *current = Some(Arc::new(kept));
                            }
                            empty
                        });
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "reading kept page anchors failed"),
                }
            })
            .await;
    }
    let mut seen = listing.anchors.subscribe();
    let current = seen.borrow_and_update().clone();
    Found {
        current: current.filter(|_| !too_far),
        seen,
    }
}

/// A listing's anchors as [`anchors`] found them.
struct Found {
    /// The anchors to serve now; `None` when there are none yet (or they are too old for the
    /// page asked).
    current: Option<Arc<Anchors>>,
    /// The listing's anchors as walks replace them.
    seen: watch::Receiver<Option<Arc<Anchors>>>,
}

impl Found {
    /// The current anchors, or the next walk's when it ends within `wait`.
    async fn within(mut self, wait: Duration) -> Option<Arc<Anchors>> {
        if self.current.is_some() {
            return self.current;
        }
        match tokio::time::timeout(wait, self.seen.changed()).await {
            Ok(Ok(())) => self.seen.borrow().clone(),
            _ => None,
        }
    }
}

/// What a deep page is read from when its listing's anchors are not there to serve it.
enum Fallback {
    /// The walk ended in time.
    Walked(Arc<Anchors>),
    /// The page, read by skipping.
    Page(Vec<ProductCard>),
    NotReady,
}

/// For a deep page whose listing has no anchors to serve it (`found.current` is `None`): the
/// page read by skipping when that is possible within its bound, else the walk's anchors when
/// it ends within what is left of [`WAIT`] since the request `asked`.
async fn without_anchors(
    db: &Db,
    filter: &Document,
    sort: Sort,
    hint: bool,
    nearer: &FromNearerEnd,
    found: Found,
    asked: Instant,
) -> Result<Fallback, DbError> {
    if let Some(page) = read_by_skipping(db, filter, sort, hint, nearer).await? {
        return Ok(Fallback::Page(page));
    }
    let left = WAIT.saturating_sub(asked.elapsed());
    Ok(match found.within(left).await {
        Some(anchors) => Fallback::Walked(anchors),
        None => Fallback::NotReady,
    })
}

/// A deep page as a read from the nearer end of its listing: `skip` products in `order` (the
/// listing's, or reversed when `from_end`), then `limit`.
#[derive(Debug, Clone)]
pub struct FromNearerEnd {
    pub order: Document,
    pub skip: u64,
    pub limit: u64,
    /// `order` is the listing's reversed: the products read come last first.
    pub from_end: bool,
}

/// The page of `filter` under `sort` that starts at `start` (counted from 0), `limit` products
/// long, read from the nearest anchor before it, or, while the listing has none, by skipping
/// from its nearer end (`nearer`, see "Before the anchors exist" in the module documentation).
/// `total` is the listing's total as the page shows it (kept anchors that counted otherwise are
/// not used).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn read_page(
    db: &Db,
    filter: &Document,
    sort: Sort,
    start: u64,
    limit: u64,
    hint: bool,
    total: u64,
    nearer: &FromNearerEnd,
) -> Result<Anchored, DbError> {
    let asked = Instant::now();
    let found = anchors(db, filter, sort, hint, false, total).await;
    let mut found = match found.current {
        Some(current) => current,
        None => match without_anchors(db, filter, sort, hint, nearer, found, asked).await? {
            Fallback::Walked(walked) => walked,
            Fallback::Page(page) => return Ok(Anchored::Page(page)),
            Fallback::NotReady => return Ok(Anchored::NotReady),
        },
    };
    if found.plan(start) == Plan::TooFar {
        // The listing grew past the anchors since their walk: walk again (read by skipping or
        // waiting meanwhile, as for a first walk).
        let fresh = anchors(db, filter, sort, hint, true, total).await;
        match without_anchors(db, filter, sort, hint, nearer, fresh, asked).await? {
            Fallback::Walked(fresh) if fresh.plan(start) != Plan::TooFar => found = fresh,
            Fallback::Page(page) => return Ok(Anchored::Page(page)),
            Fallback::Walked(_) | Fallback::NotReady => return Ok(Anchored::NotReady),
        }
    }
    if !found.usable {
        return Ok(Anchored::Unusable);
    }
    read_planned(db, filter, &found, start, limit, hint)
        .await
        .map(Anchored::Page)
}

/// MongoDB's (and docstore's) code for a command stopped at its `maxTimeMS`.
const MAX_TIME_EXPIRED: i32 = 50;

/// The index a read by skipping goes along, so the store counts the skipped products from its
/// keys: for a category's newest-first listing the category index (its keys hold the category,
/// the order and the status: the whole filter), else the sort index when `hint` (the listing
/// is dense in it, see [`seek::walk_is_cheap`]; the newest-first one ends in `status`), else
/// the store's choice.
pub(crate) fn skip_index(filter: &Document, sort: Sort, hint: bool) -> Option<Document> {
    if sort == Sort::Newest && matches!(filter.get("category_path"), Some(Bson::ObjectId(_))) {
        return Some(products::category_order_index());
    }
    hint.then(|| sort.index())
}

/// The find of a read by skipping: the sort key and `_id` of the products at `nearer`, along
/// [`skip_index`], stopped by the store at [`SKIP_BOUND`] (`maxTimeMS`: MongoDB and docstore
/// answer 50 MaxTimeMSExpired, see [`read_by_skipping`]).
pub fn skip_find(
    collection: &str,
    filter: &Document,
    sort: Sort,
    hint: bool,
    nearer: &FromNearerEnd,
) -> Document {
    let mut command = doc! {
        "find": collection,
        "filter": filter.clone(),
        "sort": nearer.order.clone(),
        "projection": { sort.key_field(): 1, "_id": 1 },
        "skip": nearer.skip as i64,
        "limit": nearer.limit as i64,
        "maxTimeMS": SKIP_BOUND.as_millis() as i64,
    };
    if let Some(index) = skip_index(filter, sort, hint) {
        command.insert("hint", index);
    }
    command
}

/// The `_id`s of the products at `nearer` in `filter`'s order, skipped to on the index keys
/// ([`skip_find`], one batch).
async fn skipped_to(
    db: &Db,
    filter: Document,
    sort: Sort,
    hint: bool,
    nearer: FromNearerEnd,
) -> Result<Vec<ObjectId>, DbError> {
    let mut command = skip_find(products::COLLECTION, &filter, sort, hint, &nearer);
    command.insert("singleBatch", true);
    let reply = db.database().run_command(command).await?;
    let batch = reply
        .get_document("cursor")
        .and_then(|cursor| cursor.get_array("firstBatch"))
        .map_err(|e| DbError::Invalid(format!("a find's reply without its batch: {e}")))?;
    Ok(batch
        .iter()
        .filter_map(|place| place.as_document()?.get_object_id("_id").ok())
        .collect())
}

/// A deep page of a listing that has no anchors yet, read by skipping from the nearer end
/// (`nearer`) on the index keys, then its products by `_id` (see "Before the anchors exist" in
/// the module documentation); `None` when another such read is under way, this one took
/// longer than [`SKIP_BOUND`], or it would read more than [`UNDECIDED_SKIP`] skipped products
/// (the index's keys do not hold every field of the filter: another sort than newest first).
/// The store stops the find at the same bound (its `maxTimeMS`) and answers 50
/// MaxTimeMSExpired, taken here as the bound hit (`None`, the 503 page), not as a failure. The
/// request's own wait ends at about the same moment (whichever comes first answers it); the
/// read keeps the next one from starting until the store has answered it, so at most one runs
/// at a time, and it no longer runs on past the bound.
async fn read_by_skipping(
    db: &Db,
    filter: &Document,
    sort: Sort,
    hint: bool,
    nearer: &FromNearerEnd,
) -> Result<Option<Vec<ProductCard>>, DbError> {
    let decided = skip_index(filter, sort, hint)
        .is_some_and(|index| filter.keys().all(|field| index.contains_key(field)));
    if !decided && nearer.skip > UNDECIDED_SKIP {
        return Ok(None);
    }
    let Ok(permit) = Arc::clone(&of(db).skip_reads).try_acquire_owned() else {
        return Ok(None);
    };
    let read = tokio::spawn({
        let (db, filter, nearer) = (db.clone(), filter.clone(), nearer.clone());
        async move {
            let _one_at_a_time = permit;
            let started = Instant::now();
            let read = skipped_to(&db, filter, sort, hint, nearer.clone()).await;
            tracing::debug!(
                skip = nearer.skip,
                ms = started.elapsed().as_millis() as u64,
                ok = read.is_ok(),
                "read a deep page's place by skipping"
            );
            read
        }
    });
    let ids = match tokio::time::timeout(SKIP_BOUND, read).await {
        Ok(Ok(Ok(ids))) => ids,
        Ok(Ok(Err(DbError::Other(e))))
            if matches!(e.kind.as_ref(), mongodb::error::ErrorKind::Command(c)
                if c.code == MAX_TIME_EXPIRED) =>
        {
            return Ok(None)
        }
        Ok(Ok(Err(e))) => return Err(e),
        // The bound passed (the store's answer, 50, follows), or the read's task failed.
        Ok(Err(_)) | Err(_) => return Ok(None),
    };
    // The page's products, still in the listing (one removed meanwhile is left out).
    let mut products: Vec<ProductCard> = products::collection(db)
        .clone_with_type::<ProductCard>()
        .find(doc! { "$and": [{ "_id": { "$in": &ids } }, filter.clone()] })
        .projection(ProductCard::projection())
        .hint(mongodb::options::Hint::Keys(doc! { "_id": 1 }))
        .await?
        .try_collect()
        .await?;
    let place = |product: &ProductCard| ids.iter().position(|id| *id == product.id);
    products.sort_by_key(place);
    if nearer.from_end {
        products.reverse();
    }
    Ok(Some(products))
}

/// The products at `start..start + limit` of `filter` as `anchors` place them.
pub async fn read_planned(
    db: &Db,
    filter: &Document,
    anchors: &Anchors,
    start: u64,
    limit: u64,
    hint: bool,
) -> Result<Vec<ProductCard>, DbError> {
    let sort = anchors.sort;
    let (anchor, skip) = match anchors.plan(start) {
        Plan::FromStart | Plan::TooFar => {
            let find = PlannedFind {
                filter: filter.clone(),
                sort: sort.document(),
                hint: hint.then(|| sort.index()),
                limit: limit as i64,
            };
            return run_find(db, &find, start.min(MAX_SKIP)).await;
        }
        Plan::After { anchor, skip } => (anchor, skip),
    };
    let cursor = Cursor {
        sort,
        key: anchor.key.clone(),
        id: anchor.id,
        page: 1,
    };
    let finds = seek::finds(filter, &Seek::After(cursor), hint);
    read_keyset(db, finds, limit, skip, Some(anchor.ties_after)).await
}

/// The `_id` of part `part` of a listing's kept anchors (parts sort in order).
fn part_id(listing: &str, part: usize) -> String {
    format!("{listing}#{part:05}")
}

/// The `_id` range of every part of a listing's kept anchors (`#` then `$` in ASCII).
fn parts_of(listing: &str) -> Document {
    doc! { "_id": { "$gte": format!("{listing}#"), "$lt": format!("{listing}$") } }
}

/// Keep `anchors` of `listing` in the database (see the module documentation): every part
/// replaced, then the parts a longer earlier walk left removed. A reader that meets parts of two
/// walks refuses them ([`load`]).
async fn store(db: &Db, listing: &str, anchors: &Anchors) -> Result<(), DbError> {
    let collection = db.collection::<Document>(COLLECTION);
    let walk = ObjectId::new();
    let walked_at = db.now();
    let parts = anchors.list.len().div_ceil(PART).max(1);
    for part in 0..parts {
        let list: Vec<Bson> = anchors
            .list
            .iter()
            .skip(part * PART)
            .take(PART)
            .map(|a| {
                Bson::Array(vec![
                    a.key.clone(),
                    Bson::ObjectId(a.id),
                    Bson::Int64(a.ties_after as i64),
                ])
            })
            .collect();
        let id = part_id(listing, part);
        let document = doc! {
            "_id": &id,
            "listing": listing,
            "walk": walk,
            "walked_at": walked_at,
            "sort": anchors.sort.as_str(),
            "every": anchors.every as i64,
            "count": anchors.count as i64,
            "usable": anchors.usable,
            "parts": parts as i64,
            "anchors": list,
        };
        collection
            .replace_one(doc! { "_id": id }, document)
            .upsert(true)
            .await?;
    }
    let mut beyond = parts_of(listing);
    beyond.insert(
        "$and",
        vec![Bson::Document(
            doc! { "_id": { "$gt": part_id(listing, parts - 1) } },
        )],
    );
    collection.delete_many(beyond).await?;
    Ok(())
}

/// The anchors of `listing` under `sort` kept in the database, with when they were walked;
/// `None` when none are kept or the parts do not make up one walk's whole set.
async fn load(
    db: &Db,
    listing: &str,
    sort: Sort,
) -> Result<Option<(Anchors, bson::DateTime)>, DbError> {
    let parts: Vec<Document> = db
        .collection::<Document>(COLLECTION)
        .find(parts_of(listing))
        .sort(doc! { "_id": 1 })
        .await?
        .try_collect()
        .await?;
    Ok(kept_anchors(&parts, sort))
}

/// The anchors the kept `parts` (in `_id` order) make up: one walk's, every part present,
/// under `sort`.
fn kept_anchors(parts: &[Document], sort: Sort) -> Option<(Anchors, bson::DateTime)> {
    let first = parts.first()?;
    let walk = first.get_object_id("walk").ok()?;
    let count = u64::try_from(first.get_i64("count").ok()?).ok()?;
    let every = u64::try_from(first.get_i64("every").ok()?).ok()?;
    let walked_at = first.get_datetime("walked_at").ok()?;
    if first.get_str("sort").ok()? != sort.as_str()
        || first.get_i64("parts").ok()? != parts.len() as i64
        || every == 0
    {
        return None;
    }
    let mut list = Vec::new();
    for part in parts {
        if part.get_object_id("walk").ok()? != walk {
            return None;
        }
        for anchor in part.get_array("anchors").ok()? {
            let Bson::Array(fields) = anchor else {
                return None;
            };
            let [key, Bson::ObjectId(id), Bson::Int64(ties_after)] = fields.as_slice() else {
                return None;
            };
            list.push(Anchor {
                key: key.clone(),
                id: *id,
                ties_after: u64::try_from(*ties_after).ok()?,
            });
        }
    }
    let anchors = Anchors {
        sort,
        every,
        list,
        count,
        usable: first.get_bool("usable").ok()?,
    };
    Some((anchors, *walked_at))
}

/// Whether kept anchors walked at `walked_at` may serve a listing of `total` products now (see
/// the module documentation).
fn usable_kept(kept: &Anchors, walked_at: bson::DateTime, now: bson::DateTime, total: u64) -> bool {
    let age = now
        .timestamp_millis()
        .abs_diff(walked_at.timestamp_millis());
    kept.count == total && kept.every == SPACING && age <= KEPT_MAX_AGE.as_millis() as u64
}

/// The value at a dotted `path` of `doc`.
fn at_path<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut value = doc.get(parts.next()?)?;
    for part in parts {
        value = match value {
            Bson::Document(d) => d.get(part)?,
            _ => return None,
        };
    }
    Some(value)
}

/// Walk `filter` in `sort` order, `CHUNK` products per find (each a keyset read after the
/// previous one's last product), and place an anchor every `every` products.
pub async fn walk(
    db: &Db,
    filter: &Document,
    sort: Sort,
    every: u64,
    hint: bool,
) -> Result<Anchors, DbError> {
    let every = every.max(1);
    let field = sort.key_field();
    let projection = doc! { field: 1, "_id": 1 };
    let collection = db.collection::<Document>(products::COLLECTION);
    let mut anchors = Anchors {
        sort,
        every,
        list: Vec::new(),
        count: 0,
        usable: true,
    };
    // The run of equal keys under way: its key and the anchors in it (whose `ties_after` is
    // known when it ends).
    let mut run_key: Option<Bson> = None;
    let mut run_anchors: Vec<(usize, u64)> = Vec::new();
    let mut last: Option<(Bson, ObjectId)> = None;
    let close_run = |anchors: &mut Anchors, run: &mut Vec<(usize, u64)>, end: u64| {
        for (index, position) in run.drain(..) {
            anchors.list[index].ties_after = end - position;
        }
    };
    loop {
        let finds: Vec<PlannedFind> = match &last {
            None => vec![PlannedFind {
                filter: filter.clone(),
                sort: sort.document(),
                hint: hint.then(|| sort.index()),
                limit: CHUNK as i64,
            }],
            Some((key, id)) => {
                let cursor = Cursor {
                    sort,
                    key: key.clone(),
                    id: *id,
                    page: 1,
                };
                seek::finds(filter, &Seek::After(cursor), hint)
                    .into_iter()
                    .map(|f| PlannedFind {
                        limit: CHUNK as i64,
                        ..f
                    })
                    .collect()
            }
        };
        let mut chunk: Vec<Document> = Vec::new();
        for find in finds {
            let wanted = CHUNK as usize - chunk.len();
            if wanted == 0 {
                break;
            }
            let mut action = collection
                .find(find.filter)
                .sort(find.sort)
                .projection(projection.clone())
                .limit(wanted as i64)
                .batch_size(wanted as u32);
            if let Some(hint) = find.hint {
                action = action.hint(mongodb::options::Hint::Keys(hint));
            }
            chunk.extend(action.await?.try_collect::<Vec<Document>>().await?);
        }
        let full = chunk.len() as u64 == CHUNK;
        for doc in chunk {
            let (Some(key), Ok(id)) = (at_path(&doc, field).cloned(), doc.get_object_id("_id"))
            else {
                anchors.usable = false;
                return Ok(anchors);
            };
            if matches!(key, Bson::Null | Bson::Undefined) {
                anchors.usable = false;
                return Ok(anchors);
            }
            let position = anchors.count;
            if run_key.as_ref() != Some(&key) {
                if position > 0 {
                    close_run(&mut anchors, &mut run_anchors, position - 1);
                }
                run_key = Some(key.clone());
            }
            if (position + 1).is_multiple_of(every) {
                anchors.list.push(Anchor {
                    key: key.clone(),
                    id,
                    ties_after: 0,
                });
                run_anchors.push((anchors.list.len() - 1, position));
            }
            anchors.count += 1;
            last = Some((key, id));
        }
        if !full {
            break;
        }
        // Let the requests the store serves meanwhile go first.
        tokio::task::yield_now().await;
    }
    if anchors.count > 0 {
        let end = anchors.count - 1;
        close_run(&mut anchors, &mut run_anchors, end);
    }
    Ok(anchors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchors(n: usize, every: u64) -> Anchors {
        Anchors {
            sort: Sort::PriceLow,
            every,
            list: (0..n)
                .map(|i| Anchor {
                    key: Bson::Int64(i as i64),
                    id: ObjectId::new(),
                    ties_after: 0,
                })
                .collect(),
            count: n as u64 * every,
            usable: true,
        }
    }

    #[test]
    fn a_page_starts_from_the_anchor_just_before_it() {
        let a = anchors(10, 100);
        assert_eq!(a.plan(0), Plan::FromStart);
        assert_eq!(a.plan(99), Plan::FromStart);
        // Anchor 0 is the product at 99: the page starting at 100 skips nothing after it.
        assert_eq!(
            a.plan(100),
            Plan::After {
                anchor: &a.list[0],
                skip: 0
            }
        );
        assert_eq!(
            a.plan(250),
            Plan::After {
                anchor: &a.list[1],
                skip: 50
            }
        );
        // Past the last anchor (at 999) the skip grows until the anchors are too old.
        assert_eq!(
            a.plan(1_000 + MAX_SKIP),
            Plan::After {
                anchor: &a.list[9],
                skip: MAX_SKIP
            }
        );
        assert_eq!(a.plan(1_001 + MAX_SKIP), Plan::TooFar);
    }
}
