//! Every write to the `carts` collection, and the reads that select carts by status.
//!
//! A cart moves through its states only here (see `docs/invariants.md`, "The cart state
//! machine"):
//!
//! ```text
//! active ──lock──▶ pending ──complete──▶ complete
//!   ▲                │
//!   └──unlock / hand back
//! active ──idle──▶ expiring ──stock returned──▶ expired ──retention──▶ deleted
//! ```
//!
//! Every filter names the status the write expects with [`CartStatus`], so a write that finds the
//! cart in another state matches nothing, and the caller reads "matched 0" as "someone else moved
//! it first". Line writes keep `items` in step with the stock ledger (`crate::stock`): the ledger
//! holds the reservation, the line says what the shopper asked for.

use bson::{doc, DateTime, Document};
use futures::TryStreamExt;

use crate::cart::{collection, Cart, CartLine, CartStatus, COLLECTION};
use crate::db::{Db, DbError};
use crate::domain::{CartId, Money, Sku};

fn carts(db: &Db) -> mongodb::Collection<Document> {
    db.collection(COLLECTION)
}

/// Start an empty active cart.
pub async fn create(db: &Db) -> Result<Cart, DbError> {
    let now = db.now();
    let cart = Cart {
        id: CartId::random(),
        status: CartStatus::Active,
        created: now,
        last_modified: now,
        items: Vec::new(),
        shipping_rates: crate::db::site::current().shipping,
    };
    collection(db).insert_one(&cart).await?;
    crate::metrics::count(crate::metrics::CARTS_CREATED, 1);
    Ok(cart)
}

/// Delete a cart that is still active and empty (a new cart whose first line could not be
/// added), so a request that added nothing leaves nothing behind.
pub(crate) async fn delete_if_empty(db: &Db, cart_id: &CartId) -> Result<(), DbError> {
    carts(db)
        .delete_one(doc! {
            "_id": cart_id, "status": CartStatus::Active.as_str(), "items": { "$size": 0 },
        })
        .await?;
    Ok(())
}

/// Push a new line onto an active cart that has no line for its SKU yet. Returns whether it was
/// pushed (false: another session added the SKU first, or the cart stopped being active).
pub async fn push_line(
    db: &Db,
    cart_id: &CartId,
    line: &CartLine,
    now: DateTime,
) -> Result<bool, DbError> {
    let line_doc = bson::to_document(line).map_err(|e| DbError::Invalid(e.to_string()))?;
    let pushed = carts(db)
        .update_one(
            doc! {
                "_id": cart_id, "status": CartStatus::Active.as_str(),
                "items.sku": { "$ne": &line.sku },
            },
            doc! { "$set": { "last_modified": now }, "$push": { "items": line_doc } },
        )
        .await?;
    Ok(pushed.matched_count == 1)
}

/// Change an active cart's line for `sku` by `delta` units if it still holds `seen` units.
/// Returns whether it changed.
pub(crate) async fn change_line(
    db: &Db,
    cart_id: &CartId,
    sku: &Sku,
    seen: i64,
    delta: i64,
    now: DateTime,
) -> Result<bool, DbError> {
    let changed = carts(db)
        .update_one(
            doc! {
                "_id": cart_id, "status": CartStatus::Active.as_str(),
                "items": { "$elemMatch": { "sku": sku, "qty": seen } },
            },
            doc! { "$inc": { "items.$.qty": delta }, "$set": { "last_modified": now } },
        )
        .await?;
    Ok(changed.matched_count == 1)
}

/// Undo [`change_line`] after its reservation step failed: take `delta` units off the line again,
/// whatever the cart's status by now.
pub(crate) async fn undo_line_change(
    db: &Db,
    cart_id: &CartId,
    sku: &Sku,
    delta: i64,
) -> Result<(), DbError> {
    carts(db)
        .update_one(
            doc! { "_id": cart_id, "items.sku": sku },
            doc! { "$inc": { "items.$.qty": -delta } },
        )
        .await?;
    Ok(())
}

/// Pull an active cart's line for `sku` if it still holds `seen` units. Returns whether it was
/// pulled.
pub(crate) async fn remove_line(
    db: &Db,
    cart_id: &CartId,
    sku: &Sku,
    seen: i64,
) -> Result<bool, DbError> {
    let pulled = carts(db)
        .update_one(
            doc! {
                "_id": cart_id, "status": CartStatus::Active.as_str(),
                "items": { "$elemMatch": { "sku": sku, "qty": seen } },
            },
            doc! {
                "$pull": { "items": { "sku": sku } },
                "$set": { "last_modified": db.now() },
            },
        )
        .await?;
    Ok(pulled.matched_count == 1)
}

/// Take the line for `sku` out of the cart whatever it holds and whatever the cart's status: the
/// undo of [`push_line`], and how a line that lost its reservation leaves the cart (it must not
/// be bought unreserved).
pub(crate) async fn drop_line(db: &Db, cart_id: &CartId, sku: &Sku) -> Result<(), DbError> {
    carts(db)
        .update_one(
            doc! { "_id": cart_id },
            doc! { "$pull": { "items": { "sku": sku } } },
        )
        .await?;
    Ok(())
}

/// Cut the line for `sku` to `qty` units (what its reservation holds), whatever the cart's
/// status: checkout's review of a cart it locked.
pub(crate) async fn cut_line(
    db: &Db,
    cart_id: &CartId,
    sku: &Sku,
    qty: i64,
) -> Result<(), DbError> {
    carts(db)
        .update_one(
            doc! { "_id": cart_id, "items.sku": sku },
            doc! { "$set": { "items.$.qty": qty } },
        )
        .await?;
    Ok(())
}

/// The one rule for a price that changed since a line was added: the line takes over the
/// product's current retail price, and the shopper is told ([`super::price_changed_notice`]).
///
/// The guard: the cart must still be in `held_as` (`active` when the cart page shows it, or
/// `pending` while the checkout that locked it reviews it), and the line must still carry the
/// price `was` that the caller read, and takes over `current`. So a complete or expired cart never changes, and of two
/// requests taking over the same change only one succeeds (and only that one tells the shopper).
/// Returns whether the price was taken over.
pub(crate) async fn take_over_price(
    db: &Db,
    cart_id: &CartId,
    held_as: CartStatus,
    sku: &Sku,
    was: Money,
    current: Money,
) -> Result<bool, DbError> {
    let taken = carts(db)
        .update_one(
            doc! {
                "_id": cart_id, "status": held_as.as_str(),
                "items": { "$elemMatch": { "sku": sku, "details.price": was } },
            },
            doc! { "$set": { "items.$.details.price": current } },
        )
        .await?;
    Ok(taken.modified_count == 1)
}

/// Lock a non-empty active cart for checkout (`active → pending`), returning it as locked; `None`
/// when it is not active, or empty. Fast: a lost lock is a cart still active, and checkout's
/// journaled payment record takes it to disk with it before any money moves.
pub(crate) async fn lock_for_checkout(db: &Db, cart_id: &CartId) -> Result<Option<Cart>, DbError> {
    Ok(collection(db)
        .find_one_and_update(
            doc! {
                "_id": cart_id, "status": CartStatus::Active.as_str(),
                "items.0": { "$exists": true },
            },
            doc! { "$set": {
                "status": CartStatus::Pending.as_str(), "last_modified": db.now(),
            } },
        )
        .return_document(mongodb::options::ReturnDocument::After)
        .await?)
}

/// Put a locked cart back in the shopper's hands (`pending → active`).
pub(crate) async fn unlock(db: &Db, cart_id: &CartId) -> Result<(), DbError> {
    carts(db)
        .update_one(
            doc! { "_id": cart_id, "status": CartStatus::Pending.as_str() },
            doc! { "$set": {
                "status": CartStatus::Active.as_str(), "last_modified": db.now(),
            } },
        )
        .await?;
    Ok(())
}

/// Hand a cart stuck `pending` back to its shopper, unless it changed since `cart` was read.
pub(crate) async fn hand_back(db: &Db, cart: &Cart) -> Result<(), DbError> {
    carts(db)
        .update_one(
            doc! {
                "_id": &cart.id, "status": CartStatus::Pending.as_str(),
                "last_modified": cart.last_modified,
            },
            doc! { "$set": {
                "status": CartStatus::Active.as_str(), "last_modified": db.now(),
            } },
        )
        .await?;
    Ok(())
}

/// Mark a paid cart complete (`pending → complete`; repeating it is harmless). Durable: the
/// shopper has been told the order is placed.
pub(crate) async fn complete(db: &Db, cart_id: &CartId) -> Result<(), DbError> {
    let paid = [CartStatus::Pending.as_str(), CartStatus::Complete.as_str()];
    db.durable::<Document>(COLLECTION)
        .update_one(
            doc! { "_id": cart_id, "status": { "$in": paid.as_slice() } },
            doc! { "$set": {
                "status": CartStatus::Complete.as_str(), "last_modified": db.now(),
            } },
        )
        .await?;
    Ok(())
}

/// Carts still `pending` and unchanged since `before` (a checkout a crash interrupted).
pub(crate) async fn pending_before(db: &Db, before: DateTime) -> Result<Vec<Cart>, DbError> {
    Ok(collection(db)
        .find(doc! {
            "status": CartStatus::Pending.as_str(), "last_modified": { "$lt": before },
        })
        .await?
        .try_collect()
        .await?)
}

/// Start expiring every active cart unchanged since `before` (`active → expiring`, one
/// multi-update).
pub(crate) async fn start_expiring_idle(db: &Db, before: DateTime) -> Result<(), DbError> {
    carts(db)
        .update_many(
            doc! { "status": CartStatus::Active.as_str(), "last_modified": { "$lt": before } },
            doc! { "$set": { "status": CartStatus::Expiring.as_str() } },
        )
        .await?;
    Ok(())
}

/// Every cart on its way to expired (including ones a crashed expiry run left half-done).
pub(crate) async fn expiring(db: &Db) -> Result<Vec<Cart>, DbError> {
    Ok(collection(db)
        .find(doc! { "status": CartStatus::Expiring.as_str() })
        .await?
        .try_collect()
        .await?)
}

/// Finish expiring a cart whose stock went back on sale (`expiring → expired`). Returns how many
/// carts changed (0 when another run finished it first).
pub(crate) async fn mark_expired(db: &Db, cart_id: &CartId) -> Result<u64, DbError> {
    let done = carts(db)
        .update_one(
            doc! { "_id": cart_id, "status": CartStatus::Expiring.as_str() },
            doc! { "$set": {
                "status": CartStatus::Expired.as_str(), "last_modified": db.now(),
            } },
        )
        .await?;
    Ok(done.modified_count)
}

/// The filter of [`delete_expired_before`], for `explain` in tests: expired carts last changed
/// (that is, expired) before `before`.
pub fn expired_before_query(before: DateTime) -> Document {
    doc! { "status": CartStatus::Expired.as_str(), "last_modified": { "$lt": before } }
}

/// Delete carts that expired before `before`. Returns how many were deleted.
pub(crate) async fn delete_expired_before(db: &Db, before: DateTime) -> Result<u64, DbError> {
    let deleted = carts(db).delete_many(expired_before_query(before)).await?;
    Ok(deleted.deleted_count)
}

/// The filter of [`bound_future_stamps`], for `explain` in tests: carts of any status last
/// modified after `limit`.
pub fn modified_after_query(limit: DateTime) -> Document {
    let statuses: Vec<&str> = CartStatus::ALL.iter().map(CartStatus::as_str).collect();
    doc! { "status": { "$in": statuses }, "last_modified": { "$gt": limit } }
}

/// Give every cart last modified after `limit` the stamp `now` (see `jobs::bound_future_stamps`:
/// such stamps were written before the clock stepped back). Returns how many changed.
pub(crate) async fn bound_future_stamps(
    db: &Db,
    limit: DateTime,
    now: DateTime,
) -> Result<u64, DbError> {
    let changed = carts(db)
        .update_many(
            modified_after_query(limit),
            doc! { "$set": { "last_modified": now } },
        )
        .await?;
    Ok(changed.modified_count)
}
