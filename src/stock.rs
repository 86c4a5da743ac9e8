//! The stock ledger: the only code that writes a product's stock counters.
//!
//! Every product document carries three counters:
//!
//! - `qty`: units on sale right now (what a shopper can still add to a cart);
//! - `carted`: one entry `{cart_id, qty, timestamp}` per cart (or cancelled order) holding units
//!   reserved for it;
//! - `sold`: units paid for.
//!
//! **The invariant**: `qty + Σ carted.qty + sold = received`, where `received` is everything the
//! shop ever took into stock (the product's starting `qty` plus every [`adjust_available`]).
//! Each function below moves units between the three counters in one atomic single-document
//! update, so the sum only ever changes when stock is received or written off; the filter of each
//! update states its precondition (enough on sale, a reservation to move), so "matched nothing"
//! means the move did not happen and the caller decides what to undo. See `docs/invariants.md`
//! for how carts, checkout and the background jobs use these moves.
//!
//! A product starts with `carted: []` and `sold: 0` (`catalog::products::NewProduct`); the admin
//! form never writes the counters afterwards.

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};

use crate::catalog::products;
use crate::db::{Db, DbError};
use crate::domain::{Sku, StockHolder};

fn products_raw(db: &Db) -> mongodb::Collection<Document> {
    db.collection(products::COLLECTION)
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
    let reserved = products_raw(db)
        .update_one(
            doc! { "sku": sku, "qty": { "$gte": qty } },
            doc! {
                "$inc": { "qty": -qty },
                "$push": { "carted": { "cart_id": holder, "qty": qty, "timestamp": at } },
            },
        )
        .await?;
    Ok(reserved.matched_count == 1)
}

/// Grow (positive `delta`) or shrink (negative) `holder`'s existing reservation of `sku`, moving
/// the units from or to on sale. Growing needs `delta` units on sale; shrinking needs the
/// reservation to hold at least `-delta`. Returns whether the change happened.
pub async fn change_reservation(
    db: &Db,
    sku: &Sku,
    holder: &StockHolder,
    delta: i64,
    at: DateTime,
) -> Result<bool, DbError> {
    let filter = if delta > 0 {
        doc! { "sku": sku, "qty": { "$gte": delta }, "carted.cart_id": holder }
    } else {
        doc! {
            "sku": sku,
            "carted": { "$elemMatch": { "cart_id": holder, "qty": { "$gte": -delta } } },
        }
    };
    let reserved = products_raw(db)
        .update_one(
            filter,
            doc! {
                "$inc": { "qty": -delta, "carted.$.qty": delta },
                "$set": { "carted.$.timestamp": at },
            },
        )
        .await?;
    Ok(reserved.matched_count == 1)
}

/// Give `holder`'s reservation of `sku` a fresh timestamp if it still carries `seen` (the cleanup
/// job's "this cart is still in use"). Returns how many reservations were refreshed (0 or 1).
pub async fn refresh_reservation(
    db: &Db,
    sku: &Sku,
    holder: &StockHolder,
    seen: DateTime,
) -> Result<u64, DbError> {
    let refreshed = products_raw(db)
        .update_one(
            doc! {
                "sku": sku,
                "carted": { "$elemMatch": { "cart_id": holder, "timestamp": seen } },
            },
            doc! { "$set": { "carted.$.timestamp": db.now() } },
        )
        .await?;
    Ok(refreshed.modified_count)
}

/// The pipeline update that moves every unit `holder` holds of a product from `carted` into
/// `target` (`qty` to put it back on sale), all in one atomic write: the amount moved is whatever
/// the reservation holds, so the invariant holds even when a cart and its reservation disagree.
fn move_reservation(holder: &StockHolder, target: &str, now: DateTime) -> Vec<Document> {
    vec![doc! { "$set": {
        target: { "$add": [format!("${target}"), held_by(holder)] },
        "carted": others_than(holder),
        "updated": now,
    } }]
}

/// Aggregation expression: the units `holder` holds in this product's `carted`.
fn held_by(holder: &StockHolder) -> Document {
    let entries = doc! {
        "$filter": { "input": "$carted", "as": "c", "cond": { "$eq": ["$$c.cart_id", holder] } }
    };
    doc! { "$sum": { "$map": { "input": entries, "as": "c", "in": "$$c.qty" } } }
}

/// Aggregation expression: this product's `carted` without `holder`'s entries.
fn others_than(holder: &StockHolder) -> Document {
    doc! {
        "$filter": { "input": "$carted", "as": "c", "cond": { "$ne": ["$$c.cart_id", holder] } }
    }
}

/// Put everything `holder` reserved of `sku` back on sale. Safe to repeat: once the entry is gone
/// the filter matches nothing. Returns whether anything was returned.
pub async fn return_reservation(db: &Db, sku: &Sku, holder: &StockHolder) -> Result<bool, DbError> {
    let result = products_raw(db)
        .update_one(
            doc! { "sku": sku, "carted.cart_id": holder },
            move_reservation(holder, "qty", db.now()),
        )
        .await?;
    Ok(result.modified_count == 1)
}

/// Count `units` of what `holder` reserved of `sku` as sold (its order is paid) and put anything
/// it held beyond that back on sale, in one atomic write. Safe to repeat: once the entry is gone
/// the filter matches nothing.
pub async fn sell_reservation(
    db: &Db,
    sku: &Sku,
    holder: &StockHolder,
    units: i64,
) -> Result<bool, DbError> {
    let held = held_by(holder);
    let sold_now = doc! { "$min": [units, held.clone()] };
    let surplus = doc! { "$max": [0, { "$subtract": [held, units] }] };
    // Durable: the shopper has been told the order is placed, and stock sold must stay sold.
    let result = db
        .durable::<Document>(products::COLLECTION)
        .update_one(
            doc! { "sku": sku, "carted.cart_id": holder },
            vec![doc! { "$set": {
                "sold": { "$add": ["$sold", sold_now] },
                "qty": { "$add": ["$qty", surplus] },
                "carted": others_than(holder),
                "updated": db.now(),
            } }],
        )
        .await?;
    Ok(result.modified_count == 1)
}

/// Move `units` of `sku` from `sold` into a reservation held under `hold` (a cancelled order's
/// name), unless `hold` already has one: the first step of putting a cancelled order's units back
/// on sale, safe to repeat. Returns whether the units moved.
pub async fn unsell_into_hold(
    db: &Db,
    sku: &Sku,
    hold: &StockHolder,
    units: i64,
) -> Result<bool, DbError> {
    let moved = products_raw(db)
        .update_one(
            doc! { "sku": sku, "sold": { "$gte": units }, "carted.cart_id": { "$ne": hold } },
            doc! {
                "$inc": { "sold": -units },
                "$push": { "carted": {
                    "cart_id": hold, "qty": units, "timestamp": db.now(),
                } },
            },
        )
        .await?;
    Ok(moved.modified_count == 1)
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
        .await?;
    Ok(result.modified_count == 1)
}

/// The filter of [`bound_future_stamps`], for `explain` in tests: products holding a
/// reservation stamped after `limit`.
pub fn reserved_after_query(limit: DateTime) -> Document {
    doc! { "carted.timestamp": { "$gt": limit } }
}

/// Give every reservation stamped after `limit` the stamp `now` (see
/// `jobs::bound_future_stamps`). Only those entries change; the units held do not. Returns how
/// many products changed.
pub async fn bound_future_stamps(db: &Db, limit: DateTime, now: DateTime) -> Result<u64, DbError> {
    let changed = products_raw(db)
        .update_many(
            reserved_after_query(limit),
            doc! { "$set": { "carted.$[late].timestamp": now } },
        )
        .array_filters(vec![doc! { "late.timestamp": { "$gt": limit } }])
        .await?;
    Ok(changed.modified_count)
}
