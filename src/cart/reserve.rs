//! Changing cart lines together with their reservations: add, change quantity, remove. Each
//! change is two steps, a cart write (`cart::store`) and a stock move (`crate::stock`), each one
//! atomic single-document update; "matched 0" means its precondition failed, and a step that
//! cannot complete undoes the step before it.

use crate::cart::{self, store, CartError, CartLimits, CartLine, CartStatus, MAX_LINE_QTY};
use crate::catalog::products;
use crate::db::{Db, DbError};
use crate::domain::{CartId, Sku, StockHolder};
use crate::stock;

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

impl From<DbError> for Attempt {
    fn from(e: DbError) -> Self {
        Attempt::Failed(e.into())
    }
}

/// Read the cart, insisting it is still active.
async fn active_cart(db: &Db, cart_id: &CartId) -> Result<cart::Cart, CartError> {
    match cart::by_id(db, cart_id).await? {
        Some(c) if c.status == CartStatus::Active => Ok(c),
        Some(c) => Err(CartError::NotActive(Some(c.status))),
        None => Err(CartError::NotActive(None)),
    }
}

/// Put `qty` units of `sku` in the cart: a new line, or more of a line already there, within
/// `limits`, checked against the cart and product as read before the change. Returns the
/// product's title for the confirmation.
pub(crate) async fn add_item_within(
    db: &Db,
    cart_id: &CartId,
    sku: &Sku,
    qty: i64,
    limits: CartLimits,
) -> Result<String, CartError> {
    if !(1..=MAX_LINE_QTY).contains(&qty) {
        return Err(CartError::BadQuantity);
    }
    // A draft or archived product cannot be added (it is not on the storefront). Only the
    // fields a cart line needs are read: a product in a drop holds thousands of reservations.
    let product = products::for_cart(db, sku)
        .await?
        .filter(products::ForCart::is_on_sale)
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

/// Set a line's quantity (0 removes it and puts its stock back on sale), within `limits` (only a
/// larger quantity is checked against them). The current quantity is read from the cart, never
/// taken from the form, so a stale page cannot reserve the wrong amount.
pub(crate) async fn set_quantity_within(
    db: &Db,
    cart_id: &CartId,
    sku: &Sku,
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
            if let Some(product) = products::for_cart(db, sku).await? {
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
/// the product's stock and the cart's unit limit. The share counts the units held in carts
/// too (the product's `reserved` counter).
fn check_limits(
    cart: &cart::Cart,
    product: &products::ForCart,
    wanted: i64,
    limits: CartLimits,
) -> Result<(), CartError> {
    let current = cart.line(&product.sku).map_or(0, |l| l.qty);
    if wanted > current {
        let cap = limits.line_cap(product.qty, product.reserved);
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

/// A new line: (1) push it onto the active cart unless the SKU is already there, (2) reserve the
/// stock on the product if enough is available, else (3) pull the line again.
async fn add_line(db: &Db, cart_id: &CartId, line: CartLine) -> Result<(), Attempt> {
    let now = db.now();
    if !store::push_line(db, cart_id, &line, now).await? {
        // Another session added the same SKU, or the cart stopped being active.
        return Err(Attempt::Raced);
    }
    if stock::reserve(db, &line.sku, &StockHolder::from(cart_id), line.qty, now).await? {
        return Ok(());
    }
    store::drop_line(db, cart_id, &line.sku).await?;
    Err(short_of_stock(db, &line, None).await.into())
}

/// Change a line from its current quantity to `wanted` (> 0): (1) adjust the cart line if it
/// still holds what was read, (2) adjust the reservation by the same delta, else (3) undo (1).
async fn change_line(
    db: &Db,
    cart_id: &CartId,
    line: &CartLine,
    wanted: i64,
) -> Result<(), Attempt> {
    let delta = wanted - line.qty;
    let now = db.now();
    if !store::change_line(db, cart_id, &line.sku, line.qty, delta, now).await? {
        return Err(Attempt::Raced);
    }
    if delta == 0 {
        return Ok(());
    }
    // More units need that many available; fewer need the reservation to hold them.
    if stock::change_reservation(db, &line.sku, &StockHolder::from(cart_id), delta, now).await? {
        return Ok(());
    }
    store::undo_line_change(db, cart_id, &line.sku, delta).await?;
    if delta < 0 && reservation_in_flight(db, &line.sku, cart_id).await? {
        // A decrease needs no stock, only a reservation holding the units. It falls short when
        // another device's change of this line has changed the cart but not yet its
        // reservation: let that write land, then read the cart again.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        return Err(Attempt::Raced);
    }
    Err(short_of_stock(db, line, Some(cart_id)).await.into())
}

/// Whether `cart_id` still holds a reservation of `sku` (one that some change in flight may be
/// about to adjust), as opposed to none at all (lost to a crash: [`short_of_stock`] says so).
async fn reservation_in_flight(db: &Db, sku: &Sku, cart_id: &CartId) -> Result<bool, DbError> {
    Ok(stock::held(db, sku, &StockHolder::from(cart_id)).await? > 0)
}

/// Pull a line from the cart if it still holds what was read, then return its stock.
async fn remove_line(db: &Db, cart_id: &CartId, line: &CartLine) -> Result<(), Attempt> {
    if !store::remove_line(db, cart_id, &line.sku, line.qty).await? {
        return Err(Attempt::Raced);
    }
    stock::return_reservation(db, &line.sku, &StockHolder::from(cart_id)).await?;
    Ok(())
}

/// After a reservation step failed: either too few units are available, or the line had no
/// reservation to change (a crash between the two writes of an earlier add). In the second case
/// the line is taken out of the cart so it cannot be bought unreserved.
async fn short_of_stock(db: &Db, line: &CartLine, reserved_by: Option<&CartId>) -> CartError {
    let title = line.details.title.clone();
    let product = match products::for_cart(db, &line.sku).await {
        Ok(Some(p)) => p,
        Ok(None) => return CartError::UnknownSku,
        Err(e) => return e.into(),
    };
    let held = match reserved_by {
        Some(cart_id) => match stock::held(db, &line.sku, &StockHolder::from(cart_id)).await {
            Ok(held) => held,
            Err(e) => return e.into(),
        },
        None => 0,
    };
    if let Some(cart_id) = reserved_by.filter(|_| held == 0) {
        return match store::drop_line(db, cart_id, &line.sku).await {
            Ok(_) => CartError::ReservationLost { title },
            Err(e) => e.into(),
        };
    }
    CartError::OnlyLeft {
        title,
        available: product.qty,
    }
}
