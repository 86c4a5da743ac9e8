//! The product page's products, kept per [`Db`] handle for at most [`MAX_AGE`] (1 s), by slug.
//!
//! # Staleness
//!
//! A product page shows a product read from the database at most [`MAX_AGE`] before, and never
//! one older than a write through *this* process that changed what the page shows: every such
//! write is reported (stock moves one product at a time, by SKU, through
//! [`crate::catalog::changes::stock_moved`]; admin edits, lifecycle changes, photos, tags and
//! restocking through [`crate::catalog::changes::products_changed`]; comments posted, moderated
//! or closed through the comments area's count of its writes, `comments::changes`) and every read of the cache
//! first catches up with the reports: a stock move drops the product it moved, the others drop
//! every product. A load that a report touching its product overtook is not kept, so a read
//! that began before a write never outlives it here. With several app instances on one
//! MongoDB, another instance's write shows within [`MAX_AGE`] (plus the time of the read).
//!
//! # Why the page may be a second old
//!
//! What a shopper pays is never read from here: adding to a cart reads the product's stock and
//! price itself (`catalog::products::for_cart`, then takes the units in one conditional write,
//! `crate::stock`), and the checkout reads the prices and stock of the cart's lines fresh
//! before charging. The page is what the shopper looks at before those: a second is below the
//! time anyone takes to act on it, and under load it turns the product's read (one store round
//! trip plus decoding the whole document, the page's main cost) into one read per product per
//! second. The shopper's own cart's share of the reservations is read fresh on every page, so
//! "held by others" (the cached reservations less it) is clamped at 0 rather than trusted.
//!
//! # Size
//!
//! At most [`MAX_PRODUCTS`] products are kept (a product document is a few kilobytes: a few
//! megabytes in all); when full, expired ones are dropped first, then all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::catalog::changes::{self, Seen};
use crate::catalog::model::Details;
use crate::catalog::product_view::ProductView;
use crate::catalog::products::{self, Product};
use crate::db::{Db, DbError};
use crate::domain::Slug;
use crate::web::rendered::Part;

/// The oldest a product may be when its page is served from the cache (see the module
/// documentation for why a second).
pub const MAX_AGE: Duration = Duration::from_secs(1);
/// Products kept at most.
const MAX_PRODUCTS: usize = 1_000;

/// A product as its page shows it: the stored product without its `details` document, and
/// those details parsed, once per load (`None` when they do not fit the product's type); and
/// the page's part made from them, once the first page has made it (`catalog::product_view`),
/// kept with the entry and dropped with it.
#[derive(Debug, Clone)]
pub struct Shown {
    pub product: Arc<Product>,
    pub details: Arc<Option<Details>>,
    pub(crate) view: Arc<Part<ProductView>>,
}

impl Shown {
    /// `product` read just now, its details parsed.
    pub(crate) fn new(mut product: Product) -> Shown {
        let details = product.take_details();
        Shown {
            product: Arc::new(product),
            details: Arc::new(details),
            view: Arc::default(),
        }
    }
}

/// The products kept with one [`Db`] handle (a [`Db::extension`]).
#[derive(Default)]
pub(crate) struct ProductCache {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The reports this cache has caught up with.
    seen: Reports,
    by_slug: HashMap<String, Kept>,
}

struct Kept {
    shown: Shown,
    loaded: Instant,
}

/// Where the change reports stood at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Reports {
    catalog: Seen,
    stock_moves: u64,
    comment_writes: u64,
}

impl Reports {
    fn now(db: &Db) -> Reports {
        let changes = changes::of(db);
        Reports {
            catalog: changes.seen(),
            stock_moves: changes.stock_moves(),
            comment_writes: crate::comments::changes::seen(db),
        }
    }

    /// Whether a change reported between `self` and `later`, other than a stock move, may have
    /// changed any product's page (the site settings do not: the page reads them itself).
    fn any_product_changed(&self, later: &Reports) -> bool {
        self.catalog.products != later.catalog.products
            || self.catalog.categories != later.catalog.categories
            || self.comment_writes != later.comment_writes
    }
}

impl State {
    /// Drops what the reports made since the last call made stale.
    fn catch_up(&mut self, db: &Db) {
        let now = Reports::now(db);
        if self.seen.any_product_changed(&now) {
            self.by_slug.clear();
        }
        let (moved, stock_moves) = changes::of(db).moved_since(self.seen.stock_moves);
        if stock_moves != self.seen.stock_moves {
            self.by_slug
                .retain(|_, kept| !moved.includes(&kept.shown.product.sku));
        }
        self.seen = Reports { stock_moves, ..now };
    }

    /// Whether a product loaded since `started` may be kept: nothing reported meanwhile
    /// touched it.
    fn still_current(&self, db: &Db, started: &Reports, shown: &Shown) -> bool {
        if started.any_product_changed(&self.seen) {
            return false;
        }
        let (moved, _) = changes::of(db).moved_since(started.stock_moves);
        !moved.includes(&shown.product.sku)
    }

    fn keep(&mut self, slug: &str, shown: Shown) {
        if self.by_slug.len() >= MAX_PRODUCTS && !self.by_slug.contains_key(slug) {
            self.by_slug
                .retain(|_, kept| kept.loaded.elapsed() < MAX_AGE);
            if self.by_slug.len() >= MAX_PRODUCTS {
                self.by_slug.clear();
            }
        }
        let kept = Kept {
            shown,
            loaded: Instant::now(),
        };
        self.by_slug.insert(slug.to_string(), kept);
    }
}

/// The product at `slug` (on sale or not), as its page shows it: read at most [`MAX_AGE`]
/// before, and after every write to it through `db` (see the module documentation). `None`
/// when no product has that slug now, which is never kept.
pub async fn by_slug(db: &Db, slug: &Slug) -> Result<Option<Shown>, DbError> {
    let cache = db.extension::<ProductCache>();
    let started = match cache.state.lock() {
        Ok(mut state) => {
            state.catch_up(db);
            if let Some(kept) = state.by_slug.get(slug.as_str()) {
                if kept.loaded.elapsed() < MAX_AGE {
                    crate::metrics::cache_lookup("product", true);
                    return Ok(Some(kept.shown.clone()));
                }
            }
            Some(state.seen)
        }
        Err(_) => None,
    };
    crate::metrics::cache_lookup("product", false);
    let Some(product) = products::by_slug(db, slug).await? else {
        return Ok(None);
    };
    let shown = Shown::new(product);
    if let (Some(started), Ok(mut state)) = (started, cache.state.lock()) {
        state.catch_up(db);
        if state.still_current(db, &started, &shown) {
            crate::metrics::cache_refresh("product");
            state.keep(slug.as_str(), shown.clone());
        }
    }
    Ok(Some(shown))
}
