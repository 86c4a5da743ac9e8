//! The background jobs that keep reservations honest: cart expiry returns the stock of idle carts,
//! cleanup repairs reservations a crash left behind. Both are idempotent, so any number of app
//! instances may run them at the same time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use serde::Deserialize;

use crate::cart::{self, reserve, CartError, CartStatus};
use crate::catalog::products;
use crate::checkout::payment::PaymentGateway;
use crate::config::CartSettings;
use crate::db::Db;

/// What one expiry run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExpiryReport {
    /// Carts that went from idle to expired in this run (including ones a crashed run left
    /// half-done).
    pub carts_expired: u64,
    /// Product reservations put back on sale.
    pub reservations_returned: u64,
}

/// What one cleanup run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanupReport {
    /// Old reservations of carts still in use, given a fresh timestamp.
    pub refreshed: u64,
    /// Reservations of expired or missing carts put back on sale.
    pub returned: u64,
    /// Reservations of paid carts counted as sold (checkout stopped before doing it).
    pub sold: u64,
}

/// The moment `age` ago: anything last touched before it is older than `age`.
pub fn cutoff(age: Duration) -> DateTime {
    let millis = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
    DateTime::from_millis(DateTime::now().timestamp_millis().saturating_sub(millis))
}

/// Expire carts idle longer than `idle_for`: mark them `expiring` (one multi-update), return each
/// line's reservation, then mark them `expired`. Every `expiring` cart is processed, so a run that
/// crashed half-way is finished by the next; returning a reservation twice is impossible because
/// the first return removes the entry the second would match.
pub async fn expire_idle_carts(db: &Db, idle_for: Duration) -> Result<ExpiryReport, CartError> {
    let carts = cart::collection(db);
    carts
        .update_many(
            doc! { "status": "active", "last_modified": { "$lt": cutoff(idle_for) } },
            doc! { "$set": { "status": "expiring" } },
        )
        .await?;
    let expiring: Vec<cart::Cart> = carts
        .find(doc! { "status": "expiring" })
        .await?
        .try_collect()
        .await?;
    let mut report = ExpiryReport::default();
    for c in expiring {
        for line in &c.items {
            if reserve::return_reservation(db, &line.sku, &c.id).await? {
                report.reservations_returned += 1;
            }
        }
        let done = carts
            .update_one(
                doc! { "_id": &c.id, "status": "expiring" },
                doc! { "$set": { "status": "expired", "last_modified": DateTime::now() } },
            )
            .await?;
        report.carts_expired += done.modified_count;
    }
    if report.carts_expired > 0 {
        tracing::info!(
            carts = report.carts_expired,
            reservations = report.reservations_returned,
            "expired idle carts"
        );
    }
    Ok(report)
}

/// The filter of [`delete_expired_carts`], for `explain` in tests: expired carts last changed
/// (that is, expired) before `before`.
pub fn expired_before_query(before: DateTime) -> Document {
    doc! { "status": "expired", "last_modified": { "$lt": before } }
}

/// Delete carts that expired longer than `retention` ago. Their stock went back on sale when
/// they expired, so nothing refers to them any more; without this every abandoned visit would
/// leave a document behind for good. Returns how many were deleted.
pub async fn delete_expired_carts(db: &Db, retention: Duration) -> Result<u64, CartError> {
    let deleted = cart::collection(db)
        .delete_many(expired_before_query(cutoff(retention)))
        .await?;
    if deleted.deleted_count > 0 {
        tracing::info!(carts = deleted.deleted_count, "deleted long-expired carts");
    }
    Ok(deleted.deleted_count)
}

#[derive(Deserialize)]
struct Reservations {
    sku: String,
    #[serde(default)]
    carted: Vec<products::Carted>,
}

/// Check every reservation older than `older_than` against its cart: a cart still in use gets a
/// fresh timestamp; a paid cart's units are counted as sold; anything else (expired, expiring,
/// gone) goes back on sale. This repairs stock trapped by a crash between two writes.
pub async fn clean_up_reservations(
    db: &Db,
    older_than: Duration,
) -> Result<CleanupReport, CartError> {
    let before = cutoff(older_than);
    let stale: Vec<Reservations> = db
        .collection::<Reservations>(products::COLLECTION)
        .find(doc! { "carted.timestamp": { "$lt": before } })
        .projection(doc! { "sku": 1, "carted": 1 })
        .await?
        .try_collect()
        .await?;
    let mut carts: HashMap<String, Option<cart::Cart>> = HashMap::new();
    let mut report = CleanupReport::default();
    for product in stale {
        for entry in product.carted.iter().filter(|c| c.timestamp < before) {
            if !carts.contains_key(&entry.cart_id) {
                let found = cart::by_id(db, &entry.cart_id).await?;
                carts.insert(entry.cart_id.clone(), found);
            }
            let owner = carts.get(&entry.cart_id).and_then(Option::as_ref);
            match owner.map(|c| c.status) {
                Some(CartStatus::Active | CartStatus::Pending) => {
                    let refreshed = db
                        .collection::<Document>(products::COLLECTION)
                        .update_one(
                            doc! {
                                "sku": &product.sku,
                                "carted": { "$elemMatch": {
                                    "cart_id": &entry.cart_id, "timestamp": entry.timestamp,
                                } },
                            },
                            doc! { "$set": { "carted.$.timestamp": DateTime::now() } },
                        )
                        .await?;
                    report.refreshed += refreshed.modified_count;
                }
                Some(CartStatus::Complete) => {
                    // The paid line's units are sold; anything held beyond them goes back.
                    let units = owner
                        .and_then(|c| c.line(&product.sku))
                        .map_or(0, |l| l.qty);
                    if reserve::sell_reservation(db, &product.sku, &entry.cart_id, units).await? {
                        report.sold += 1;
                    }
                }
                Some(CartStatus::Expiring | CartStatus::Expired) | None => {
                    if reserve::return_reservation(db, &product.sku, &entry.cart_id).await? {
                        report.returned += 1;
                    }
                }
            }
        }
    }
    if report.returned + report.sold > 0 {
        tracing::warn!(
            returned = report.returned,
            sold = report.sold,
            "cleanup repaired stock reservations left behind"
        );
    }
    Ok(report)
}

/// Run expiry, cleanup and the recovery of interrupted checkouts (asking `gateway` what it
/// charged) every `settings.jobs_every` until the returned task is aborted. `None` when the jobs
/// are turned off.
pub fn spawn(
    db: Db,
    settings: CartSettings,
    gateway: Arc<dyn PaymentGateway>,
) -> Option<tokio::task::JoinHandle<()>> {
    if settings.jobs_every.is_zero() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(settings.jobs_every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Err(e) = expire_idle_carts(&db, settings.expire_after).await {
                tracing::warn!(error = %e, "cart expiry failed; retrying on the next run");
            }
            if let Err(e) = clean_up_reservations(&db, settings.cleanup_after).await {
                tracing::warn!(error = %e, "reservation cleanup failed; retrying on the next run");
            }
            if let Err(e) = delete_expired_carts(&db, settings.retention).await {
                tracing::warn!(error = %e, "deleting old carts failed; retrying on the next run");
            }
            // A checkout takes seconds; one pending this long was interrupted by a crash.
            let stuck_after = settings.recover_checkout_after;
            match crate::checkout::recover_stuck_checkouts(&db, gateway.as_ref(), stuck_after).await
            {
                Ok(report) if report.total() > 0 => {
                    tracing::warn!(?report, "recovered checkouts interrupted by a crash");
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "checkout recovery failed; retrying on the next run");
                }
            }
            if let Err(e) = crate::checkout::orders::resume_restocking(&db).await {
                tracing::warn!(error = %e, "restocking cancelled orders failed; retrying later");
            }
        }
    }))
}
