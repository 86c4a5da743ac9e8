//! The `orders` collection: one paid cart each (a unique index on `cart_id` makes a double
//! submit unable to create two), numbered `BZ-000123` from a counter document.

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::options::{IndexOptions, ReturnDocument};
use mongodb::IndexModel;

use crate::checkout::emails::{self, OrderEmail};
use crate::db::{is_duplicate_key, Db, DbError};
use crate::domain::{CartId, EmailAddress, OrderNumber, Sku, StockHolder};
use crate::stock;

pub use crate::checkout::model::{
    Address, Order, OrderItem, OrderStatus, Payment, COLLECTION, COUNTERS,
};

pub fn indexes() -> Vec<IndexModel> {
    let unique = || IndexOptions::builder().unique(true).build();
    vec![
        IndexModel::builder()
            .keys(doc! { "number": 1 })
            .options(unique())
            .build(),
        // One order per cart: what makes a double-submitted checkout create one order.
        IndexModel::builder()
            .keys(doc! { "cart_id": 1 })
            .options(unique())
            .build(),
        // The admin list and the dashboard, newest first: by number, which the counter hands
        // out in placing order whatever the clock says (`created` goes backwards when the
        // clock steps back). `_id` after it serves the admin list's tie-broken sort and paging.
        IndexModel::builder()
            .keys(doc! { "number": -1, "_id": -1 })
            .build(),
        IndexModel::builder()
            .keys(doc! { "status": 1, "number": -1, "_id": -1 })
            .build(),
        // The sales report's date range.
        IndexModel::builder()
            .keys(doc! { "created": -1, "_id": -1 })
            .build(),
        // Whether a product was ever ordered (only a never-ordered product may be deleted).
        IndexModel::builder().keys(doc! { "items.sku": 1 }).build(),
        // The orders a signed-in customer may claim (`claim_for_account`: by email prefix).
        IndexModel::builder().keys(doc! { "email": 1 }).build(),
        // A customer's orders, newest first (`for_account`).
        IndexModel::builder()
            .keys(doc! { "account_id": 1, "number": -1 })
            .build(),
    ]
}

/// Indexes no query uses any more, dropped at start-up: the list by status sorts by number now.
pub(crate) const RETIRED_INDEXES: &[&str] = &["status_1_created_-1"];

pub fn collection(db: &Db) -> mongodb::Collection<Order> {
    db.collection(COLLECTION)
}

/// For the writes a person is told about: placing, shipping and cancelling an order.
fn durable(db: &Db) -> mongodb::Collection<Order> {
    db.durable(COLLECTION)
}

/// The next order number, `BZ-000001` upwards, from `counters {_id: "order"}`.
pub(crate) async fn next_number(db: &Db) -> Result<OrderNumber, DbError> {
    // The number is shown with the order; a crash must not hand it out twice.
    let counters = db.durable::<Document>(COUNTERS);
    let mut attempts = 0;
    let counter = loop {
        attempts += 1;
        let result = counters
            .find_one_and_update(doc! { "_id": "order" }, doc! { "$inc": { "seq": 1_i64 } })
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await;
        match result {
            Ok(doc) => break doc,
            // Two first-ever orders racing to create the counter: the loser simply retries.
            Err(e) if attempts < 3 && is_duplicate_key(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let seq = counter
        .as_ref()
        .and_then(|d| d.get("seq"))
        .and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from)))
        .unwrap_or(0);
    Ok(OrderNumber::from_sequence(u64::try_from(seq).unwrap_or(0)))
}

/// How many orders list `sku` (served by the orders' `items.sku` index): a product that was
/// ever ordered is archived, not deleted.
pub(crate) async fn count_listing(db: &Db, sku: &Sku) -> Result<u64, DbError> {
    Ok(collection(db)
        .count_documents(doc! { "items.sku": sku })
        .await?)
}

/// Insert the order for its cart; if the cart already has one (a double submit won the race),
/// that order is returned instead.
pub(crate) async fn insert_once(db: &Db, order: Order) -> Result<Order, DbError> {
    match durable(db).insert_one(&order).await {
        Ok(_) => Ok(order),
        Err(e) if is_duplicate_key(&e) => by_cart(db, &order.cart_id)
            .await?
            .ok_or_else(|| DbError::Other(e)),
        Err(e) => Err(e.into()),
    }
}

pub async fn by_number(db: &Db, number: &OrderNumber) -> Result<Option<Order>, DbError> {
    Ok(collection(db).find_one(doc! { "number": number }).await?)
}

pub async fn by_cart(db: &Db, cart_id: &CartId) -> Result<Option<Order>, DbError> {
    Ok(collection(db).find_one(doc! { "cart_id": cart_id }).await?)
}

/// Orders newest first, optionally only those with `status`.
pub async fn list(db: &Db, status: Option<OrderStatus>, limit: i64) -> Result<Vec<Order>, DbError> {
    let (filter, sort) = list_query(status);
    Ok(collection(db)
        .find(filter)
        .sort(sort)
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

/// Mark a paid order shipped and queue the shipping notice. False when it is not (or no
/// longer) paid.
pub async fn mark_shipped(db: &Db, number: &OrderNumber) -> Result<bool, DbError> {
    let shipped = durable(db)
        .find_one_and_update(
            doc! { "number": number, "status": OrderStatus::Paid.as_str() },
            doc! { "$set": { "status": OrderStatus::Shipped.as_str() } },
        )
        .return_document(ReturnDocument::After)
        .await?;
    match shipped {
        Some(order) => {
            emails::queue(db, OrderEmail::Shipped, &order).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Cancel a paid order and put its units back on sale. The status change is the guard (only one
/// cancel can move an order from `paid`) and records which SKUs are to be restocked; [`restock`]
/// then returns them one by one, so a crash part-way is finished by [`resume_restocking`].
pub async fn cancel(db: &Db, number: &OrderNumber) -> Result<bool, DbError> {
    let skus: Vec<Sku> = match by_number(db, number).await? {
        Some(order) => order.items.iter().map(|i| i.sku.clone()).collect(),
        None => return Ok(false),
    };
    let cancelled = durable(db)
        .find_one_and_update(
            doc! { "number": number, "status": OrderStatus::Paid.as_str() },
            doc! { "$set": { "status": OrderStatus::Cancelled.as_str(), "restock": &skus } },
        )
        .return_document(ReturnDocument::After)
        .await?;
    match cancelled {
        Some(order) => {
            restock(db, &order).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Put a cancelled order's units back on sale, for each SKU still listed in `restock`. Each SKU
/// goes through steps that are each safe to repeat: finish a sale checkout left undone, move the
/// units from `sold` into a reservation held under the order's name (at most one: the filter
/// refuses a second), strike the SKU off the order, then return that reservation. A crash after
/// the strike leaves only the held reservation, which cleanup returns (it has no cart).
/// These writes stay fast (not journaled one by one): a crash that loses some of them is a crash
/// part-way, which [`resume_restocking`] finishes from the durable `restock` list.
pub(crate) async fn restock(db: &Db, order: &Order) -> Result<(), DbError> {
    // The cancellation email goes with the restock, which resumes after a crash; its outbox id
    // keeps it to one message.
    if !order.restock.is_empty() {
        emails::queue(db, OrderEmail::Cancelled, order).await?;
    }
    let hold = StockHolder::Cancelled(order.number.clone());
    let cart = StockHolder::from(&order.cart_id);
    for sku in &order.restock {
        let units: i64 = order
            .items
            .iter()
            .filter(|i| &i.sku == sku)
            .map(|i| i.qty)
            .sum();
        stock::sell_reservation(db, sku, &cart, units).await?;
        stock::unsell_into_hold(db, sku, &hold, units).await?;
        collection(db)
            .update_one(
                doc! { "_id": order.id },
                doc! { "$pull": { "restock": sku } },
            )
            .await?;
        stock::return_reservation(db, sku, &hold).await?;
    }
    Ok(())
}

/// Finish every cancellation a crash interrupted; returns how many orders it finished.
pub async fn resume_restocking(db: &Db) -> Result<u64, DbError> {
    let pending: Vec<Order> = collection(db)
        .find(doc! {
            "status": OrderStatus::Cancelled.as_str(), "restock.0": { "$exists": true },
        })
        .await?
        .try_collect()
        .await?;
    for order in &pending {
        tracing::warn!(order = %order.number, "finishing a cancellation interrupted by a crash");
        restock(db, order).await?;
    }
    Ok(pending.len() as u64)
}

/// Orders newest first (by number: placing order even across clock steps), optionally only
/// those with `status`: the filter and sort [`list`] uses, for `explain` in tests.
pub fn list_query(status: Option<OrderStatus>) -> (Document, Document) {
    let filter = match status {
        Some(s) => doc! { "status": s.as_str() },
        None => doc! {},
    };
    (filter, doc! { "number": -1, "_id": -1 })
}

/// How many orders there are, optionally only those with `status`.
pub(crate) async fn count(db: &Db, status: Option<OrderStatus>) -> Result<u64, DbError> {
    let (filter, _) = list_query(status);
    Ok(collection(db).count_documents(filter).await?)
}

/// How many leading characters of an address the claim spells in every case: at most 2² ranges
/// of the `email` index, narrow enough that a claim reads a few orders, not all of them.
const CLAIM_PREFIX: usize = 2;

/// The filters of [`claim_for_account`]'s candidates, one per upper/lower-case spelling of
/// `email`'s first characters: each a range of the `{ email: 1 }` index holding every order
/// whose stored email begins so (orders keep the address as typed at checkout; the exact,
/// case-insensitive comparison is made on what they find). Separate queries rather than one
/// `$or`, which the embedded store answers with a collection scan. For `explain` in tests.
pub fn claim_candidate_queries(email: &EmailAddress) -> Vec<Document> {
    let mut prefixes = vec![String::new()];
    for c in email.as_str().chars().take(CLAIM_PREFIX) {
        let upper = c.to_ascii_uppercase();
        prefixes = prefixes
            .into_iter()
            .flat_map(|p| {
                let mut both = vec![format!("{p}{c}")];
                if upper != c {
                    both.push(format!("{p}{upper}"));
                }
                both
            })
            .collect();
    }
    prefixes
        .into_iter()
        .map(|p| doc! { "email": { "$gte": &p, "$lt": format!("{p}\u{10FFFF}") } })
        .collect()
}

/// Give the orders placed with `email` (in any case, with any surrounding spaces) and not yet
/// claimed to `account`: run when someone proves they own the address (sign-in) and when they
/// look at their orders, so a guest order placed since is theirs too. Returns how many it
/// claimed. An order already owned by an account keeps its owner.
pub(crate) async fn claim_for_account(
    db: &Db,
    email: &EmailAddress,
    account: bson::oid::ObjectId,
) -> Result<u64, DbError> {
    let mut candidates: Vec<Document> = Vec::new();
    for filter in claim_candidate_queries(email) {
        let found: Vec<Document> = db
            .collection::<Document>(COLLECTION)
            .find(filter)
            .projection(doc! { "_id": 1, "email": 1, "account_id": 1 })
            .await?
            .try_collect()
            .await?;
        candidates.extend(found);
    }
    let ids: Vec<bson::Bson> = candidates
        .iter()
        .filter(|d| !d.contains_key("account_id"))
        .filter(|d| {
            d.get_str("email")
                .is_ok_and(|e| crate::domain::email::normalise(e) == email.as_str())
        })
        .filter_map(|d| d.get("_id").cloned())
        .collect();
    if ids.is_empty() {
        return Ok(0);
    }
    let claimed = durable(db)
        .update_many(
            doc! { "_id": { "$in": ids }, "account_id": { "$exists": false } },
            doc! { "$set": { "account_id": account } },
        )
        .await?;
    Ok(claimed.modified_count)
}

/// The filter and sort of [`for_account`], newest first; for `explain` in tests.
pub fn account_query(account: bson::oid::ObjectId) -> (Document, Document) {
    (
        doc! { "account_id": account },
        doc! { "account_id": 1, "number": -1 },
    )
}

/// The newest `limit` orders `account` owns.
pub(crate) async fn for_account(
    db: &Db,
    account: bson::oid::ObjectId,
    limit: i64,
) -> Result<Vec<Order>, DbError> {
    let (filter, sort) = account_query(account);
    Ok(collection(db)
        .find(filter)
        .sort(sort)
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}
