//! Reserving stock for cart lines: add, change quantity, remove, and moving a cart's reservation
//! back on sale or into `sold`. Each step is one atomic single-document update; "matched 0" means
//! its precondition failed, and a step that cannot complete undoes the step before it.

use bson::{doc, DateTime, Document};

use crate::cart::{self, CartError, CartLimits, CartLine, CartStatus, MAX_LINE_QTY};
use crate::catalog::products;
use crate::db::Db;

/// How often a change is retried when another session changed the same cart in between.
const MAX_ATTEMPTS: usize = 8;

/// Why one attempt at a change did not go through.
enum Attempt {
    /// The cart changed between reading and writing; read it again and retry.
    Raced,
    Failed(CartError),
}

impl From<CartError> for Attempt {
    fn from(e: CartError) -> Self {
        Attempt::Failed(e)
    }
}

impl From<mongodb::error::Error> for Attempt {
    fn from(e: mongodb::error::Error) -> Self {
        Attempt::Failed(e.into())
    }
}

fn carts(db: &Db) -> mongodb::Collection<Document> {
    db.collection(cart::COLLECTION)
}

fn products_raw(db: &Db) -> mongodb::Collection<Document> {
    db.collection(products::COLLECTION)
}

/// Read the cart, insisting it is still active.
async fn active_cart(db: &Db, cart_id: &str) -> Result<cart::Cart, CartError> {
    match cart::by_id(db, cart_id).await? {
        Some(c) if c.status == CartStatus::Active => Ok(c),
        Some(c) => Err(CartError::NotActive(Some(c.status))),
        None => Err(CartError::NotActive(None)),
    }
}

/// Put `qty` units of `sku` in the cart: a new line, or more of a line already there. Returns
/// the product's title for the confirmation.
pub async fn add_item(db: &Db, cart_id: &str, sku: &str, qty: i64) -> Result<String, CartError> {
    add_item_within(db, cart_id, sku, qty, CartLimits::NONE).await
}

/// [`add_item`] within `limits`, checked against the cart and product as read before the
/// change.
pub async fn add_item_within(
    db: &Db,
    cart_id: &str,
    sku: &str,
    qty: i64,
    limits: CartLimits,
) -> Result<String, CartError> {
    if !(1..=MAX_LINE_QTY).contains(&qty) {
        return Err(CartError::BadQuantity);
    }
    // A draft or archived product cannot be added (it is not on the storefront).
    let product = products::by_sku(db, sku)
        .await?
        .filter(products::Product::is_on_sale)
        .ok_or(CartError::UnknownSku)?;
    for _ in 0..MAX_ATTEMPTS {
        let cart = active_cart(db, cart_id).await?;
        check_limits(
            &cart,
            &product,
            cart.line(sku).map_or(0, |l| l.qty) + qty,
            limits,
        )?;
        let attempt = match cart.line(sku) {
            Some(line) => {
                let wanted = line.qty + qty;
                if wanted > MAX_LINE_QTY {
                    return Err(CartError::TooMany);
                }
                change_line(db, cart_id, line, wanted).await
            }
            None => add_line(db, cart_id, CartLine::for_product(&product, qty)).await,
        };
        match attempt {
            Ok(()) => return Ok(product.title),
            Err(Attempt::Raced) => continue,
            Err(Attempt::Failed(e)) => return Err(e),
        }
    }
    Err(CartError::Contention)
}

/// Set a line's quantity (0 removes it). The current quantity is read from the cart, never
/// taken from the form, so a stale page cannot reserve the wrong amount.
pub async fn set_quantity(db: &Db, cart_id: &str, sku: &str, qty: i64) -> Result<(), CartError> {
    set_quantity_within(db, cart_id, sku, qty, CartLimits::NONE).await
}

/// [`set_quantity`] within `limits` (only a larger quantity is checked against them).
pub async fn set_quantity_within(
    db: &Db,
    cart_id: &str,
    sku: &str,
    qty: i64,
    limits: CartLimits,
) -> Result<(), CartError> {
    if !(0..=MAX_LINE_QTY).contains(&qty) {
        return Err(CartError::BadQuantity);
    }
    for _ in 0..MAX_ATTEMPTS {
        let cart = active_cart(db, cart_id).await?;
        let line = cart.line(sku).ok_or(CartError::NotInCart)?;
        if qty > line.qty && limits != CartLimits::NONE {
            if let Some(product) = products::by_sku(db, sku).await? {
                check_limits(&cart, &product, qty, limits)?;
            }
        }
        let attempt = if qty == 0 {
            remove_line(db, cart_id, line).await
        } else {
            change_line(db, cart_id, line, qty).await
        };
        match attempt {
            Ok(()) => return Ok(()),
            Err(Attempt::Raced) => continue,
            Err(Attempt::Failed(e)) => return Err(e),
        }
    }
    Err(CartError::Contention)
}

/// Whether `cart` may hold `wanted` units of `product` in its line: within the line's share of
/// the product's stock and the cart's unit limit.
fn check_limits(
    cart: &cart::Cart,
    product: &products::Product,
    wanted: i64,
    limits: CartLimits,
) -> Result<(), CartError> {
    let current = cart.line(&product.sku).map_or(0, |l| l.qty);
    if wanted > current {
        let cap = limits.line_cap(product);
        if wanted > cap {
            return Err(CartError::LineLimit {
                title: product.title.clone(),
                max: cap,
            });
        }
        let total = cart.item_count().saturating_add(wanted - current);
        if total > limits.max_units {
            return Err(CartError::CartFull {
                max: limits.max_units,
            });
        }
    }
    Ok(())
}

/// Take a line out of the cart and put its stock back on sale.
pub async fn remove_item(db: &Db, cart_id: &str, sku: &str) -> Result<(), CartError> {
    set_quantity(db, cart_id, sku, 0).await
}

/// A new line: (1) push it onto the active cart unless the SKU is already there, (2) reserve the
/// stock on the product if enough is available, else (3) pull the line again.
async fn add_line(db: &Db, cart_id: &str, line: CartLine) -> Result<(), Attempt> {
    let now = DateTime::now();
    let line_doc = bson::to_document(&line).map_err(|e| {
        CartError::Db(crate::db::DbError::Other(mongodb::error::Error::custom(
            e.to_string(),
        )))
    })?;
    let pushed = carts(db)
        .update_one(
            doc! { "_id": cart_id, "status": "active", "items.sku": { "$ne": &line.sku } },
            doc! { "$set": { "last_modified": now }, "$push": { "items": line_doc } },
        )
        .await?;
    if pushed.matched_count == 0 {
        // Another session added the same SKU, or the cart stopped being active.
        return Err(Attempt::Raced);
    }
    let reserved = products_raw(db)
        .update_one(
            doc! { "sku": &line.sku, "qty": { "$gte": line.qty } },
            doc! {
                "$inc": { "qty": -line.qty },
                "$push": { "carted": { "cart_id": cart_id, "qty": line.qty, "timestamp": now } },
            },
        )
        .await?;
    if reserved.matched_count == 1 {
        return Ok(());
    }
    carts(db)
        .update_one(
            doc! { "_id": cart_id },
            doc! { "$pull": { "items": { "sku": &line.sku } } },
        )
        .await?;
    Err(short_of_stock(db, &line, None).await.into())
}

/// Change a line from its current quantity to `wanted` (> 0): (1) adjust the cart line if it
/// still holds what was read, (2) adjust the reservation by the same delta, else (3) undo (1).
async fn change_line(db: &Db, cart_id: &str, line: &CartLine, wanted: i64) -> Result<(), Attempt> {
    let delta = wanted - line.qty;
    let now = DateTime::now();
    let changed = carts(db)
        .update_one(
            doc! {
                "_id": cart_id, "status": "active",
                "items": { "$elemMatch": { "sku": &line.sku, "qty": line.qty } },
            },
            doc! { "$inc": { "items.$.qty": delta }, "$set": { "last_modified": now } },
        )
        .await?;
    if changed.matched_count == 0 {
        return Err(Attempt::Raced);
    }
    if delta == 0 {
        return Ok(());
    }
    // More units need that many available; fewer need the reservation to hold them.
    let filter = if delta > 0 {
        doc! { "sku": &line.sku, "qty": { "$gte": delta }, "carted.cart_id": cart_id }
    } else {
        doc! {
            "sku": &line.sku,
            "carted": { "$elemMatch": { "cart_id": cart_id, "qty": { "$gte": -delta } } },
        }
    };
    let reserved = products_raw(db)
        .update_one(
            filter,
            doc! {
                "$inc": { "qty": -delta, "carted.$.qty": delta },
                "$set": { "carted.$.timestamp": now },
            },
        )
        .await?;
    if reserved.matched_count == 1 {
        return Ok(());
    }
    carts(db)
        .update_one(
            doc! { "_id": cart_id, "items.sku": &line.sku },
            doc! { "$inc": { "items.$.qty": -delta } },
        )
        .await?;
    Err(short_of_stock(db, line, Some(cart_id)).await.into())
}

/// Pull a line from the cart if it still holds what was read, then return its stock.
async fn remove_line(db: &Db, cart_id: &str, line: &CartLine) -> Result<(), Attempt> {
    let pulled = carts(db)
        .update_one(
            doc! {
                "_id": cart_id, "status": "active",
                "items": { "$elemMatch": { "sku": &line.sku, "qty": line.qty } },
            },
            doc! {
                "$pull": { "items": { "sku": &line.sku } },
                "$set": { "last_modified": DateTime::now() },
            },
        )
        .await?;
    if pulled.matched_count == 0 {
        return Err(Attempt::Raced);
    }
    return_reservation(db, &line.sku, cart_id).await?;
    Ok(())
}

/// After a reservation step failed: either too few units are available, or the line had no
/// reservation to change (a crash between the two writes of an earlier add). In the second case
/// the line is taken out of the cart so it cannot be bought unreserved.
async fn short_of_stock(db: &Db, line: &CartLine, reserved_by: Option<&str>) -> CartError {
    let title = line.details.title.clone();
    let product = match products::by_sku(db, &line.sku).await {
        Ok(Some(p)) => p,
        Ok(None) => return CartError::UnknownSku,
        Err(e) => return e.into(),
    };
    if let Some(cart_id) = reserved_by {
        if product.reserved_for(cart_id) == 0 {
            let pulled = carts(db)
                .update_one(
                    doc! { "_id": cart_id },
                    doc! { "$pull": { "items": { "sku": &line.sku } } },
                )
                .await;
            return match pulled {
                Ok(_) => CartError::ReservationLost { title },
                Err(e) => e.into(),
            };
        }
    }
    CartError::OnlyLeft {
        title,
        available: product.qty,
    }
}

/// The pipeline update that moves every unit `cart_id` holds of a product from `carted` into
/// `target` (`qty` to put it back on sale), all in one atomic write: the amount moved is whatever the reservation holds, so the stock invariant holds even
/// when the cart and the reservation disagree.
fn move_reservation(cart_id: &str, target: &str) -> Vec<Document> {
    vec![doc! { "$set": {
        target: { "$add": [format!("${target}"), held_by(cart_id)] },
        "carted": others_than(cart_id),
        "updated": DateTime::now(),
    } }]
}

/// Aggregation expression: the units `cart_id` holds in this product's `carted`.
fn held_by(cart_id: &str) -> Document {
    let entries = doc! {
        "$filter": { "input": "$carted", "as": "c", "cond": { "$eq": ["$$c.cart_id", cart_id] } }
    };
    doc! { "$sum": { "$map": { "input": entries, "as": "c", "in": "$$c.qty" } } }
}

/// Aggregation expression: this product's `carted` without `cart_id`'s entries.
fn others_than(cart_id: &str) -> Document {
    doc! {
        "$filter": { "input": "$carted", "as": "c", "cond": { "$ne": ["$$c.cart_id", cart_id] } }
    }
}

/// Put everything `cart_id` reserved of `sku` back on sale. Safe to repeat: once the entry is
/// gone the filter matches nothing. Returns whether anything was returned.
pub async fn return_reservation(db: &Db, sku: &str, cart_id: &str) -> Result<bool, CartError> {
    let result = products_raw(db)
        .update_one(
            doc! { "sku": sku, "carted.cart_id": cart_id },
            move_reservation(cart_id, "qty"),
        )
        .await?;
    Ok(result.modified_count == 1)
}

/// Count `units` of what `cart_id` reserved of `sku` as sold (its order is paid) and put anything
/// it held beyond that back on sale, in one atomic write. Safe to repeat: once the entry is gone
/// the filter matches nothing.
pub async fn sell_reservation(
    db: &Db,
    sku: &str,
    cart_id: &str,
    units: i64,
) -> Result<bool, CartError> {
    let held = held_by(cart_id);
    let sold_now = doc! { "$min": [units, held.clone()] };
    let surplus = doc! { "$max": [0, { "$subtract": [held, units] }] };
    // Durable: the shopper has been told the order is placed, and stock sold must stay sold.
    let result = db
        .durable::<Document>(products::COLLECTION)
        .update_one(
            doc! { "sku": sku, "carted.cart_id": cart_id },
            vec![doc! { "$set": {
                "sold": { "$add": ["$sold", sold_now] },
                "qty": { "$add": ["$qty", surplus] },
                "carted": others_than(cart_id),
                "updated": DateTime::now(),
            } }],
        )
        .await?;
    Ok(result.modified_count == 1)
}
