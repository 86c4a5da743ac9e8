//! The stock ledger: the only code that writes a product's stock counters and the reservations.
//!
//! Every product document carries three counters, and the `reservations` collection holds who
//! the reserved units are for:
//!
//! - `qty`: units on sale right now (what a shopper can still add to a cart);
//! - `reserved`: units held for carts (or cancelled orders), one [`Reservation`]
//!   `{sku, cart_id, qty, timestamp, ops}` per holder and product in `reservations`;
//! - `sold`: units paid for.
//!
//! **The invariants**: `qty + reserved + sold = received`, where `received` is everything the
//! shop ever took into stock (the product's starting `qty` plus every [`adjust_available`]), holds
//! after every single write; and `Σ reservations(sku).qty + Σ pending moves not yet settled =
//! reserved` holds whenever no move is half-done, and is restored by [`recover_pending`] after a
//! crash.
//!
//! A move of units between a product's counters and a reservation is three single-document
//! writes (no multi-document transactions: docstore has none, and on MongoDB they would abort
//! constantly on a hot product's document), each idempotent, keyed by a fresh move id `op`:
//!
//! 1. **record** on the product: the move goes into the short `pending` list (for taking units,
//!    in the same write that checks and moves the counters: `qty -= n, reserved += n`);
//! 2. **apply** on the reservation: its `qty` changes and `op` is appended to its `ops`, in one
//!    write whose filter says `op` is not there yet (so a replay is a no-op) and, for freeing
//!    units, that the reservation holds them;
//! 3. **settle** on the product: only if the pending entry is still there, it is pulled (and, for
//!    freeing units, the counters move: `reserved -= n, qty or sold += n`) in the same write.
//!
//! A crash between two writes leaves a pending entry, which [`recover_pending`] finishes once
//! it is older than a grace period: it replays step 2 (a no-op if it was applied) and then step 3;
//! when step 2's precondition fails it fences the move (`!op` in `ops`, so the original mover,
//! if it was only paused, can no longer apply it) and drops the entry. Units are therefore never
//! counted twice, and never freed from `reserved` without leaving the reservation. See
//! `docs/invariants.md` for every crash point.
//!
//! Every write of a product's counters is reported to the catalog's caches after it is made:
//! a move's steps 1 and 3 (and a cancel) as a stock move of that product
//! ([`crate::catalog::changes::stock_moved`], which drops it from the product page's cache),
//! stock received or written off as a change of the catalog
//! ([`crate::catalog::changes::products_changed`]).

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use mongodb::options::{Hint, IndexOptions};
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

use crate::catalog::products;
use crate::db::{is_duplicate_key, Db, DbError};
use crate::domain::{CartId, Sku, StockHolder};

/// The reservations collection: one document per holder and product.
pub const COLLECTION: &str = products::RESERVATIONS;

/// How many recent move ids a reservation remembers. A replay looks its move up here, and
/// replays happen within [`PENDING_GRACE`] of the move (plus one job interval): one cart's line
/// does not see this many moves in that time.
const OPS_KEPT: i32 = 32;

/// How old a pending move must be before the jobs take it for one a crash interrupted. A move's
/// three writes take milliseconds; a move this old was abandoned (or its instance is paused,
/// which the fencing makes harmless).
pub const PENDING_GRACE: Duration = Duration::from_secs(30);

/// One holder's reservation of one product, as stored in `reservations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reservation {
    pub sku: Sku,
    /// The cart (or cancelled order) holding the units; `cart_id`, the name from when only
    /// carts held stock.
    #[serde(rename = "cart_id")]
    pub holder: StockHolder,
    pub qty: i64,
    pub timestamp: DateTime,
}

/// The indexes of `reservations`: one reservation per holder and product (what makes a
/// concurrent first add of the same product by one cart harmless), a cart's reservations
/// (checkout's review), and the cleanup job's old reservations.
pub fn indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder()
            .keys(doc! { "sku": 1, "cart_id": 1 })
            .options(IndexOptions::builder().unique(true).build())
            .build(),
        IndexModel::builder().keys(doc! { "cart_id": 1 }).build(),
        IndexModel::builder().keys(doc! { "timestamp": 1 }).build(),
    ]
}

fn products_raw(db: &Db) -> mongodb::Collection<Document> {
    db.collection(products::COLLECTION)
}

fn reservations_raw(db: &Db) -> mongodb::Collection<Document> {
    db.collection(COLLECTION)
}

/// Which product counter a move takes units from or gives them to, besides `reserved`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    OnSale,
    Sold,
}

impl Source {
    fn field(self) -> &'static str {
        match self {
            Source::OnSale => "qty",
            Source::Sold => "sold",
        }
    }

    fn parse(s: &str) -> Source {
        if s == "sold" {
            Source::Sold
        } else {
            Source::OnSale
        }
    }
}

/// One move of units between a product's counters and a reservation (see the module header).
/// Stored in the product's `pending` list as `{op, cart_id, qty, sold, from, create, at}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub(crate) op: String,
    pub sku: Sku,
    pub holder: StockHolder,
    /// Units added to the reservation (taking), or removed from it (negative: freeing).
    pub delta: i64,
    /// Of the freed units, how many go to `sold` (the rest go back on sale).
    pub(crate) sold: i64,
    /// Taking: the counter the units come from (`qty`, or `sold` for a cancelled order).
    from: Source,
    /// The reservation's new timestamp.
    pub(crate) stamp: DateTime,
    /// Taking: whether the reservation is created if missing (a new line) or must exist (a
    /// line growing: a missing reservation was lost to a crash and the line must be dropped).
    create: bool,
}

impl Move {
    fn new(sku: &Sku, holder: &StockHolder, delta: i64, stamp: DateTime) -> Move {
        Move {
            op: ObjectId::new().to_hex(),
            sku: sku.clone(),
            holder: holder.clone(),
            delta,
            sold: 0,
            stamp,
            from: Source::OnSale,
            create: false,
        }
    }

    /// Take `n` units on sale into a reservation created if missing, stamped `at`.
    pub fn reserve(sku: &Sku, holder: &StockHolder, n: i64, at: DateTime) -> Move {
        Move {
            create: true,
            ..Move::new(sku, holder, n, at)
        }
    }

    /// Grow (`delta > 0`, from on sale, the reservation must exist) or shrink (`delta < 0`, back
    /// on sale) a reservation, stamping it `at`.
    pub fn change(sku: &Sku, holder: &StockHolder, delta: i64, at: DateTime) -> Move {
        Move::new(sku, holder, delta, at)
    }

    /// Free `held` units (what the reservation holds), `sold` of them as sold, the rest back on
    /// sale, stamping the reservation `at`.
    pub fn free(sku: &Sku, holder: &StockHolder, held: i64, sold: i64, at: DateTime) -> Move {
        Move {
            sold: sold.clamp(0, held),
            ..Move::new(sku, holder, -held, at)
        }
    }

    fn is_take(&self) -> bool {
        self.delta > 0
    }

    fn pending_entry(&self, at: DateTime) -> Document {
        doc! {
            "op": &self.op, "cart_id": &self.holder, "qty": self.delta, "sold": self.sold,
            "from": self.from.field(), "create": self.create, "stamp": self.stamp, "at": at,
        }
    }

    fn from_pending(sku: &Sku, entry: &Document) -> Option<Move> {
        Some(Move {
            op: entry.get_str("op").ok()?.to_string(),
            sku: sku.clone(),
            holder: StockHolder::from_stored(entry.get_str("cart_id").ok()?.to_string()),
            delta: entry.get_i64("qty").ok()?,
            sold: entry.get_i64("sold").unwrap_or(0),
            from: Source::parse(entry.get_str("from").unwrap_or("qty")),
            stamp: entry
                .get_datetime("stamp")
                .or_else(|_| entry.get_datetime("at"))
                .ok()
                .copied()?,
            create: entry.get_bool("create").unwrap_or(false),
        })
    }

    /// The mark a recovery leaves in `ops` when it gives the move up.
    fn fence(&self) -> String {
        format!("!{}", self.op)
    }
}

/// What step 2 found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The reservation changed now, or had already (the move id was in its `ops`).
    Yes,
    /// Its precondition failed: too few units held, or no reservation to grow; or the move was
    /// fenced by a recovery.
    No,
}

/// The three writes of a move and the recovery's fence, one by one (the crash tests stop
/// between them; everything else uses [`run`]).
pub mod steps {
    use super::*;

    /// Step 1 on the product: record the move as pending, and for taking units check and move the
    /// counters in the same write. `false`: too few units to take (nothing written).
    pub async fn record(db: &Db, m: &Move) -> Result<bool, DbError> {
        let entry = m.pending_entry(db.now());
        let (filter, update) = if m.is_take() {
            let from = m.from.field();
            (
                doc! { "sku": &m.sku, from: { "$gte": m.delta } },
                doc! {
                    "$inc": { from: -m.delta, "reserved": m.delta },
                    "$push": { "pending": entry },
                },
            )
        } else {
            (
                doc! { "sku": &m.sku },
                doc! { "$push": { "pending": entry } },
            )
        };
        let recorded = products_raw(db).update_one(filter, update).await;
        crate::catalog::changes::stock_moved(db, &m.sku);
        Ok(recorded?.matched_count == 1)
    }

    /// Step 2 on the reservation, idempotent: applied once whoever replays it. `create` also
    /// creates a missing reservation (a new line, or a recovery rolling a take forward).
    pub async fn apply(db: &Db, m: &Move, create: bool) -> Result<Applied, DbError> {
        let mut filter = doc! {
            "sku": &m.sku, "cart_id": &m.holder, "ops": { "$nin": [&m.op, m.fence()] },
        };
        if !m.is_take() {
            filter.insert("qty", doc! { "$gte": -m.delta });
        }
        let update = doc! {
            "$inc": { "qty": m.delta },
            "$set": { "timestamp": m.stamp },
            "$push": { "ops": { "$each": [&m.op], "$slice": -OPS_KEPT } },
        };
        let upsert = create && m.is_take();
        // Two upserts of one missing reservation race to insert it; the loser's second try
        // finds the winner's and applies to it.
        for _ in 0..2 {
            let result = reservations_raw(db)
                .update_one(filter.clone(), update.clone())
                .upsert(upsert)
                .await;
            match result {
                Ok(r) if r.matched_count == 1 || r.upserted_id.is_some() => {
                    return Ok(Applied::Yes)
                }
                Ok(_) => break,
                // The reservation exists but already names the move (or its fence), or another
                // upsert inserted it first: which one, the reservation says.
                Err(e) if is_duplicate_key(&e) => {
                    if recorded(db, m, &m.op).await? {
                        return Ok(Applied::Yes);
                    }
                    if recorded(db, m, &m.fence()).await? {
                        return Ok(Applied::No);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(if recorded(db, m, &m.op).await? {
            Applied::Yes
        } else {
            Applied::No
        })
    }

    /// Step 3 on the product: only if the move is still pending, pull it, and for freeing units
    /// move them out of `reserved` in the same write. `false`: someone settled or cancelled it
    /// already.
    pub async fn settle(db: &Db, m: &Move) -> Result<bool, DbError> {
        let mut update = doc! { "$pull": { "pending": { "op": &m.op } } };
        if !m.is_take() {
            let freed = -m.delta;
            update.insert(
                "$inc",
                doc! { "reserved": -freed, "sold": m.sold, "qty": freed - m.sold },
            );
            update.insert("$set", doc! { "updated": db.now() });
        }
        let products = if m.sold > 0 {
            // Durable: the shopper has been told the order is placed, and stock sold must stay
            // sold.
            db.durable::<Document>(products::COLLECTION)
        } else {
            products_raw(db)
        };
        let settled = products
            .update_one(doc! { "sku": &m.sku, "pending.op": &m.op }, update)
            .await;
        crate::catalog::changes::stock_moved(db, &m.sku);
        Ok(settled?.modified_count == 1)
    }

    /// Undo step 1 of a move whose step 2 was refused: pull it, and for taking units put them
    /// back where they came from, in one write (only if it is still pending).
    pub async fn cancel(db: &Db, m: &Move) -> Result<bool, DbError> {
        let mut update = doc! { "$pull": { "pending": { "op": &m.op } } };
        if m.is_take() {
            update.insert(
                "$inc",
                doc! { m.from.field(): m.delta, "reserved": -m.delta },
            );
        }
        let cancelled = products_raw(db)
            .update_one(doc! { "sku": &m.sku, "pending.op": &m.op }, update)
            .await;
        crate::catalog::changes::stock_moved(db, &m.sku);
        Ok(cancelled?.modified_count == 1)
    }

    /// Make sure step 2 of `m` can never be applied from now on, unless it already was: put its
    /// fence in the reservation's `ops`. Returns whether the move had been applied after all.
    pub async fn fence(db: &Db, m: &Move) -> Result<bool, DbError> {
        let fenced = reservations_raw(db)
            .update_one(
                doc! { "sku": &m.sku, "cart_id": &m.holder, "ops": { "$nin": [&m.op, m.fence()] } },
                doc! {
                    "$push": { "ops": { "$each": [m.fence()], "$slice": -OPS_KEPT } },
                    "$setOnInsert": { "qty": 0_i64, "timestamp": db.now() },
                },
            )
            .upsert(true)
            .await;
        match fenced {
            Ok(_) => {}
            Err(e) if is_duplicate_key(&e) => {}
            Err(e) => return Err(e.into()),
        }
        recorded(db, m, &m.op).await
    }
}

/// Whether the reservation of `m` lists `id` among its recent moves.
async fn recorded(db: &Db, m: &Move, id: &str) -> Result<bool, DbError> {
    Ok(reservations_raw(db)
        .find_one(doc! { "sku": &m.sku, "cart_id": &m.holder, "ops": id })
        .projection(doc! { "_id": 1 })
        .await?
        .is_some())
}

/// Make a move: record, apply, settle; a refused step 2 is fenced and cancelled. Returns whether
/// the units moved.
pub(crate) async fn run(db: &Db, m: &Move) -> Result<bool, DbError> {
    // Queued here, in the app, rather than in the store: see [`MoveLanes`].
    let lanes = db.extension::<MoveLanes>();
    let _lane = lanes.enter(&m.sku).await;
    if !steps::record(db, m).await? {
        return Ok(false);
    }
    match steps::apply(db, m, m.create).await? {
        Applied::Yes => {
            steps::settle(db, m).await?;
            Ok(true)
        }
        Applied::No => {
            // Fenced before it is cancelled: a recovery that found the move pending (this
            // mover paused past the grace period) may be rolling it forward right now. After
            // the fence it cannot; and if it already had, the move happened.
            if steps::fence(db, m).await? {
                steps::settle(db, m).await?;
                Ok(true)
            } else {
                steps::cancel(db, m).await?;
                Ok(false)
            }
        }
    }
}

/// Moves of one product's units under way at once from this instance, at most. Chosen by
/// `cargo bench --bench flash_sale` (docs/data-model.md): 1 cost a quarter of a hot product's
/// adds, 4 to 16 let its writes crowd other pages' reads again; 2 kept both goals.
const MOVES_IN_FLIGHT: usize = 2;
/// Lanes products are spread over by a hash of their SKU.
const LANES: usize = 64;

/// Bounds the moves under way on one product from this instance (issue 44, a product drop).
///
/// Every move writes the product's document twice, and the store applies writes to one
/// collection one at a time. Without a bound, a drop of 256 shoppers on one product put 256
/// moves in flight: the product's `pending` list held 256 entries, each write decoded and
/// re-encoded all of them, and every other page's read of `products` queued behind the
/// resulting line of writes. With the bound the surplus shoppers wait here, on an async
/// semaphore that holds no thread and serves them in arrival order (so nobody starves), and
/// the store only ever sees a short queue of small writes. Products share a lane by a hash of
/// their SKU; a lane admits [`MOVES_IN_FLIGHT`] moves, so products that happen to share one
/// still proceed together. The bound is per instance: three instances put at most three times
/// as many moves in flight, which changes speed, never correctness (the moves' own writes are
/// what keep stock exact).
pub(crate) struct MoveLanes {
    lanes: Vec<tokio::sync::Semaphore>,
}

impl Default for MoveLanes {
    fn default() -> Self {
        MoveLanes {
            lanes: (0..LANES)
                .map(|_| tokio::sync::Semaphore::new(MOVES_IN_FLIGHT))
                .collect(),
        }
    }
}

impl MoveLanes {
    /// Wait for room to move units of `sku`; the room is given back when the permit drops.
    async fn enter(&self, sku: &Sku) -> Option<tokio::sync::SemaphorePermit<'_>> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        sku.as_str().hash(&mut hasher);
        let lane = &self.lanes[(hasher.finish() % LANES as u64) as usize];
        // The semaphores are never closed; should one be, the move goes ahead unbounded.
        lane.acquire().await.ok()
    }
}

/// Units `holder` holds of `sku` (0 without a reservation).
pub(crate) async fn held(db: &Db, sku: &Sku, holder: &StockHolder) -> Result<i64, DbError> {
    Ok(reservations_raw(db)
        .find_one(doc! { "sku": sku, "cart_id": holder })
        .projection(doc! { "_id": 0, "qty": 1 })
        .await?
        .and_then(|d| d.get_i64("qty").ok())
        .unwrap_or(0))
}

/// Units `cart_id` holds of each product it holds any of (by the `cart_id` index).
pub(crate) async fn held_by_cart(
    db: &Db,
    cart_id: &CartId,
) -> Result<std::collections::HashMap<Sku, i64>, DbError> {
    let found: Vec<Reservation> = db
        .collection::<Reservation>(COLLECTION)
        .find(doc! { "cart_id": StockHolder::from(cart_id), "qty": { "$gt": 0 } })
        .projection(doc! { "_id": 0, "sku": 1, "cart_id": 1, "qty": 1, "timestamp": 1 })
        .await?
        .try_collect()
        .await?;
    Ok(found.into_iter().map(|r| (r.sku, r.qty)).collect())
}

/// The reservations of `sku` holding units, oldest first (the tests' and benchmark's view; a
/// hot product has thousands).
pub async fn reservations_of(db: &Db, sku: &Sku) -> Result<Vec<Reservation>, DbError> {
    Ok(db
        .collection::<Reservation>(COLLECTION)
        .find(doc! { "sku": sku, "qty": { "$ne": 0 } })
        .projection(doc! { "_id": 0, "sku": 1, "cart_id": 1, "qty": 1, "timestamp": 1 })
        .sort(doc! { "timestamp": 1 })
        .await?
        .try_collect()
        .await?)
}

/// Move `qty` units of `sku` from on sale into a new reservation for `holder`, if that many are on
/// sale, stamped `at`. Returns whether the units were reserved.
pub async fn reserve(
    db: &Db,
    sku: &Sku,
    holder: &StockHolder,
    qty: i64,
    at: DateTime,
) -> Result<bool, DbError> {
    if qty <= 0 {
        return Ok(false);
    }
    run(db, &Move::reserve(sku, holder, qty, at)).await
}

/// Grow (positive `delta`) or shrink (negative) `holder`'s existing reservation of `sku`, moving
/// the units from or to on sale. Growing needs `delta` units on sale and a reservation; shrinking
/// needs the reservation to hold at least `-delta`. Returns whether the change happened.
pub async fn change_reservation(
    db: &Db,
    sku: &Sku,
    holder: &StockHolder,
    delta: i64,
    at: DateTime,
) -> Result<bool, DbError> {
    if delta == 0 {
        return Ok(true);
    }
    run(db, &Move::change(sku, holder, delta, at)).await
}

/// Give `holder`'s reservation of `sku` a fresh timestamp if it still carries `seen` (the cleanup
/// job's "this cart is still in use"). Returns how many reservations were refreshed (0 or 1).
pub async fn refresh_reservation(
    db: &Db,
    sku: &Sku,
    holder: &StockHolder,
    seen: DateTime,
) -> Result<u64, DbError> {
    let refreshed = reservations_raw(db)
        .update_one(
            doc! { "sku": sku, "cart_id": holder, "timestamp": seen },
            doc! { "$set": { "timestamp": db.now() } },
        )
        .await?;
    Ok(refreshed.modified_count)
}

/// How often freeing "whatever is held" re-reads the reservation when it changed between the
/// read and the write (another device changing the same line).
const FREE_ATTEMPTS: usize = 5;

/// Free everything `holder` holds of `sku`, `units` of it as sold and the rest back on sale.
async fn free_all(db: &Db, sku: &Sku, holder: &StockHolder, units: i64) -> Result<bool, DbError> {
    for _ in 0..FREE_ATTEMPTS {
        let held = held(db, sku, holder).await?;
        if held <= 0 {
            return Ok(false);
        }
        // What was read: a reservation that shrank meanwhile refuses the move (it no longer
        // holds that many), and the amount is read again.
        if run(db, &Move::free(sku, holder, held, units, db.now())).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Put everything `holder` reserved of `sku` back on sale. Safe to repeat: once the reservation
/// holds nothing there is nothing to move. Returns whether anything was returned.
pub async fn return_reservation(db: &Db, sku: &Sku, holder: &StockHolder) -> Result<bool, DbError> {
    free_all(db, sku, holder, 0).await
}

/// Count `units` of what `holder` reserved of `sku` as sold (its order is paid) and put anything
/// it held beyond that back on sale. Safe to repeat: once the reservation holds nothing there is
/// nothing to move.
pub async fn sell_reservation(
    db: &Db,
    sku: &Sku,
    holder: &StockHolder,
    units: i64,
) -> Result<bool, DbError> {
    free_all(db, sku, holder, units).await
}

/// Move `units` of `sku` from `sold` into a reservation held under `hold` (a cancelled order's
/// name), unless `hold` already has one: the first step of putting a cancelled order's units back
/// on sale, safe to repeat. Returns whether the units moved.
///
/// The reservation is created (empty) first, by an insert the unique `sku, cart_id` index lets
/// only one caller win, so two instances resuming the same cancellation move the units once.
pub async fn unsell_into_hold(
    db: &Db,
    sku: &Sku,
    hold: &StockHolder,
    units: i64,
) -> Result<bool, DbError> {
    if units <= 0 {
        return Ok(false);
    }
    let claim = reservations_raw(db)
        .insert_one(doc! {
            "sku": sku, "cart_id": hold, "qty": 0_i64, "timestamp": db.now(), "ops": [],
        })
        .await;
    match claim {
        Ok(_) => {}
        Err(e) if is_duplicate_key(&e) => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    let m = Move {
        from: Source::Sold,
        ..Move::change(sku, hold, units, db.now())
    };
    run(db, &m).await
}

/// Receive (or with a negative `delta`, write off) stock on sale; units on sale never go below
/// zero, so writing off more than is on sale is refused. The only write that changes
/// `received`.
pub async fn adjust_available(db: &Db, id: ObjectId, delta: i64) -> Result<bool, DbError> {
    let filter = if delta < 0 {
        // i64::MIN has no positive counterpart: no stock could cover it.
        let Some(needed) = delta.checked_neg() else {
            return Ok(false);
        };
        doc! { "_id": id, "qty": { "$gte": needed } }
    } else {
        doc! { "_id": id }
    };
    let result = db
        .durable::<Document>(products::COLLECTION)
        .update_one(
            filter,
            doc! { "$inc": { "qty": delta }, "$set": { "updated": db.now() } },
        )
        .await;
    // Reported as a change of the catalog, not a stock move: stock received can put a product
    // back into the listings' in-stock filter, which a stock move leaves to the caches' bound.
    crate::catalog::changes::products_changed(db);
    Ok(result?.modified_count == 1)
}

/// The filter of [`bound_future_stamps`], for `explain` in tests: reservations stamped after
/// `limit`.
pub fn reserved_after_query(limit: DateTime) -> Document {
    doc! { "timestamp": { "$gt": limit } }
}

/// Give every reservation stamped after `limit` the stamp `now` (see
/// `jobs::bound_future_stamps`), and every pending move too. Only stamps change; the units held
/// do not. Returns how many reservations changed.
pub(crate) async fn bound_future_stamps(
    db: &Db,
    limit: DateTime,
    now: DateTime,
) -> Result<u64, DbError> {
    let changed = reservations_raw(db)
        .update_many(
            reserved_after_query(limit),
            doc! { "$set": { "timestamp": now } },
        )
        .await?;
    products_raw(db)
        .update_many(
            doc! { "pending.at": { "$gt": limit } },
            doc! { "$set": { "pending.$[late].at": now } },
        )
        .array_filters(vec![doc! { "late.at": { "$gt": limit } }])
        .await?;
    Ok(changed.modified_count)
}

/// The filter of [`recover_pending`], for `explain` in tests: products with a move pending
/// since before `before`.
pub fn pending_before_query(before: DateTime) -> Document {
    doc! { "pending.at": { "$lt": before } }
}

/// Finish every move pending longer than `older_than` (a crash or a pause between its writes):
/// replay step 2 (a take is rolled forward, creating its reservation if need be; a free whose
/// reservation no longer holds the units is fenced and dropped), then step 3. Idempotent; any
/// number of instances may run it at once. Returns how many moves were finished or dropped.
pub async fn recover_pending(db: &Db, older_than: Duration) -> Result<u64, DbError> {
    let before = crate::db::cutoff(db.now(), older_than);
    let stale: Vec<Document> = products_raw(db)
        .find(pending_before_query(before))
        .projection(doc! { "_id": 0, "sku": 1, "pending": 1 })
        .await?
        .try_collect()
        .await?;
    let mut finished = 0;
    for product in stale {
        let Ok(sku) = product.get_str("sku") else {
            continue;
        };
        let Ok(sku) = Sku::parse(sku) else {
            continue;
        };
        let Ok(pending) = product.get_array("pending") else {
            continue;
        };
        for entry in pending {
            let Bson::Document(entry) = entry else {
                continue;
            };
            if entry.get_datetime("at").map_or(true, |at| *at >= before) {
                continue;
            }
            let Some(m) = Move::from_pending(&sku, entry) else {
                continue;
            };
            if finish(db, &m).await? {
                finished += 1;
            }
        }
    }
    if finished > 0 {
        tracing::warn!(
            moves = finished,
            "finished stock moves a crash left half-done"
        );
    }
    Ok(finished)
}

/// Finish one pending move (see [`recover_pending`]). Returns whether this call settled or
/// dropped it.
pub async fn finish(db: &Db, m: &Move) -> Result<bool, DbError> {
    // Taking is rolled forward whatever happens: the units already left `qty`, and creating the
    // reservation (for a grow whose line was lost, a reservation without a line, which the
    // cleanup returns once the cart is gone) never creates units.
    let applied = match steps::apply(db, m, true).await? {
        Applied::Yes => true,
        Applied::No => steps::fence(db, m).await?,
    };
    if applied {
        steps::settle(db, m).await
    } else {
        steps::cancel(db, m).await
    }
}

/// Delete reservations holding nothing that were last changed before `before`: what every
/// finished line leaves behind. They are kept that long for their `ops`, which make a late
/// replay of a move a no-op. Returns how many were deleted.
pub(crate) async fn delete_empty_before(db: &Db, before: DateTime) -> Result<u64, DbError> {
    Ok(reservations_raw(db)
        .delete_many(doc! { "timestamp": { "$lt": before }, "qty": 0_i64 })
        .await?
        .deleted_count)
}

/// Reservations stamped before `before` that hold units (the cleanup job's candidates), by the
/// `timestamp` index.
pub(crate) async fn stamped_before(db: &Db, before: DateTime) -> Result<Vec<Reservation>, DbError> {
    Ok(db
        .collection::<Reservation>(COLLECTION)
        .find(doc! { "timestamp": { "$lt": before }, "qty": { "$gt": 0 } })
        .projection(doc! { "_id": 0, "sku": 1, "cart_id": 1, "qty": 1, "timestamp": 1 })
        .await?
        .try_collect()
        .await?)
}

/// The move id a product's migrated reservations record: replaying the migration of the same
/// product after a crash finds it and adds nothing.
const MIGRATED: &str = "migrated-from-carted";

/// Whether any product still keeps reservations in a `carted` array (see [`migrate_carted`]).
pub(crate) async fn has_carted(db: &Db) -> Result<bool, DbError> {
    Ok(products_raw(db)
        .find_one(doc! { "carted": { "$exists": true } })
        .projection(doc! { "_id": 1 })
        .hint(Hint::Name(products::CARTED_INDEX.to_string()))
        .await?
        .is_some())
}

/// Move the reservations of products stored before the `reservations` collection existed (a
/// `carted` array in the product) to their own documents, at start-up. Per product: (1) each
/// holder's units are added to its reservation, recording `MIGRATED` in its `ops` (a replay
/// adds nothing); (2) the product's `carted` is removed and its units added to `reserved` in
/// one write whose filter says `carted` is still exactly what was read. A crash between (1) and
/// (2) is finished by the next start-up; nothing is counted twice because (2) happens once and
/// (1) only once per holder. Returns how many products were migrated.
pub async fn migrate_carted(db: &Db) -> Result<u64, DbError> {
    let legacy: Vec<Document> = products_raw(db)
        .find(doc! { "carted": { "$exists": true } })
        .projection(doc! { "_id": 1, "sku": 1, "carted": 1 })
        .hint(Hint::Name(products::CARTED_INDEX.to_string()))
        .await?
        .try_collect()
        .await?;
    let mut migrated = 0;
    for product in legacy {
        let (Ok(id), Ok(sku)) = (product.get_object_id("_id"), product.get_str("sku")) else {
            continue;
        };
        let carted = product.get_array("carted").cloned().unwrap_or_default();
        let entries: Vec<products::Carted> = carted
            .iter()
            .filter_map(|e| bson::from_bson(e.clone()).ok())
            .collect();
        let mut by_holder: Vec<(StockHolder, i64, DateTime)> = Vec::new();
        for e in &entries {
            match by_holder.iter_mut().find(|(h, _, _)| *h == e.holder) {
                Some(row) => {
                    row.1 += e.qty;
                    row.2 = row.2.max(e.timestamp);
                }
                None => by_holder.push((e.holder.clone(), e.qty, e.timestamp)),
            }
        }
        for (holder, qty, timestamp) in &by_holder {
            let added = reservations_raw(db)
                .update_one(
                    doc! { "sku": sku, "cart_id": holder, "ops": { "$ne": MIGRATED } },
                    doc! {
                        "$inc": { "qty": qty },
                        "$set": { "timestamp": timestamp },
                        "$push": { "ops": { "$each": [MIGRATED], "$slice": -OPS_KEPT } },
                    },
                )
                .upsert(true)
                .await;
            match added {
                Ok(_) => {}
                // Migrated by an earlier, interrupted run (or another instance right now).
                Err(e) if is_duplicate_key(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let total: i64 = entries.iter().map(|e| e.qty).sum();
        let done = products_raw(db)
            .update_one(
                doc! { "_id": id, "carted": carted },
                doc! { "$unset": { "carted": "" }, "$inc": { "reserved": total } },
            )
            .await?;
        migrated += done.modified_count;
    }
    if migrated > 0 {
        crate::catalog::changes::products_changed(db);
        tracing::info!(
            products = migrated,
            "moved reservations out of the product documents"
        );
    }
    Ok(migrated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lane_admits_a_bounded_number_of_moves_of_one_product() {
        let lanes = MoveLanes::default();
        let sku = Sku::parse("HOT-1").unwrap();
        let mut held = Vec::new();
        for _ in 0..MOVES_IN_FLIGHT {
            held.push(lanes.enter(&sku).await);
        }
        // The lane is full: the next mover waits until one of the moves under way ends.
        let waiting = tokio::time::timeout(Duration::from_millis(50), lanes.enter(&sku)).await;
        assert!(waiting.is_err(), "a move got past a full lane");
        held.pop();
        let admitted = tokio::time::timeout(Duration::from_secs(5), lanes.enter(&sku)).await;
        assert!(
            admitted.is_ok(),
            "a freed place was not given to the waiting move"
        );
    }
}
