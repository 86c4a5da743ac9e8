//! The background jobs, and the scheduler that runs them: cart expiry returns the stock of idle
//! carts, cleanup repairs reservations a crash left behind, old expired carts are deleted,
//! checkouts and cancellations a crash interrupted are finished, and scheduled content whose
//! time came is marked live, comments deleted longer ago than their restore period are
//! deleted for good, and customer accounts abandoned for `accounts.abandoned_after_days` are
//! erased (`accounts::privacy`, under a lease), and the traffic log is rolled up into hourly,
//! daily, weekly and monthly statistics (`analytics::rollup`, under a lease). Every job is idempotent, so any
//! number of app instances may run them at the same time.
//!
//! Clock steps: every job measures an age as "stored stamp against now", so a clock stepped
//! back by an hour would make every record written in the hour before the step look younger by
//! an hour, and every cut-off would stretch by the step. Each run therefore first rewrites the
//! stamps it measures that lie more than [`CLOCK_SLACK`] after now to now
//! ([`bound_future_stamps`]): a record is then at most its configured age plus one run interval
//! (plus the slack) late, however far the clock stepped. A step forward cannot be told from
//! time passing and shortens ages by the step; see docs/invariants.md.
//!
//! The jobs sit above the areas they tend (cart, checkout, the stock ledger): those areas never
//! import this module, and the cart and checkout areas do not import each other for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bson::DateTime;

use crate::cart::{self, store, CartError, CartStatus};
use crate::checkout::gateway::PaymentGateway;
use crate::config::CartSettings;
use crate::db::Db;
use crate::domain::{CartId, StockHolder};
use crate::stock;

/// The filter of [`delete_expired_carts`], for `explain` in tests.
pub use crate::cart::store::expired_before_query;
pub use crate::db::cutoff;

/// How far after now a stored stamp may lie before the jobs take it for one written before the
/// clock stepped back. It absorbs the ordinary skew between the clocks of several app instances
/// sharing one database, so their stamps are not rewritten all the time; rewriting one anyway
/// would be harmless (it only makes a record a few seconds younger).
pub(crate) const CLOCK_SLACK: Duration = Duration::from_secs(5);

/// Stamps the jobs found in the future and set to now, by collection.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StampReport {
    pub carts: u64,
    pub reservations: u64,
    pub payments: u64,
}

impl StampReport {
    pub fn total(&self) -> u64 {
        self.carts + self.reservations + self.payments
    }
}

/// Rewrite to now every stamp the jobs measure ages from (carts' `last_modified`, reservations'
/// `timestamp`, unfinished payment attempts' `updated`) that lies more than [`CLOCK_SLACK`] after
/// now. Such a stamp was written before the clock stepped back (or by an instance whose clock
/// runs ahead); left alone it would keep its record young for the size of the step. Idempotent:
/// a second run finds nothing, and any instance may run it at any time.
pub async fn bound_future_stamps(db: &Db) -> Result<StampReport, CartError> {
    let now = db.now();
    let limit = DateTime::from_millis(
        now.timestamp_millis()
            .saturating_add(i64::try_from(CLOCK_SLACK.as_millis()).unwrap_or(i64::MAX)),
    );
    let report = StampReport {
        carts: store::bound_future_stamps(db, limit, now).await?,
        reservations: stock::bound_future_stamps(db, limit, now).await?,
        payments: crate::checkout::payments::bound_future_stamps(db, limit, now).await?,
    };
    if report.total() > 0 {
        tracing::warn!(
            carts = report.carts,
            reservations = report.reservations,
            payments = report.payments,
            "found stamps later than now (the clock stepped back?); counting their age from now"
        );
    }
    Ok(report)
}

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
    /// Stock moves a crash left half-done, finished (`stock::recover_pending`).
    pub(crate) moves_finished: u64,
}

/// Expire carts idle longer than `idle_for`: mark them `expiring` (one multi-update), return each
/// line's reservation, then mark them `expired`. Every `expiring` cart is processed, so a run that
/// crashed half-way is finished by the next; returning a reservation twice is impossible because
/// the first return removes the entry the second would match.
pub async fn expire_idle_carts(db: &Db, idle_for: Duration) -> Result<ExpiryReport, CartError> {
    bound_future_stamps(db).await?;
    store::start_expiring_idle(db, cutoff(db.now(), idle_for)).await?;
    let expiring = store::expiring(db).await?;
    let mut report = ExpiryReport::default();
    for c in expiring {
        for line in &c.items {
            if stock::return_reservation(db, &line.sku, &StockHolder::from(&c.id)).await? {
                report.reservations_returned += 1;
            }
        }
        report.carts_expired += store::mark_expired(db, &c.id).await?;
    }
    crate::metrics::count(crate::metrics::CARTS_EXPIRED, report.carts_expired);
    if report.carts_expired > 0 {
        tracing::info!(
            carts = report.carts_expired,
            reservations = report.reservations_returned,
            "expired idle carts"
        );
    }
    Ok(report)
}

/// Delete carts that expired longer than `retention` ago. Their stock went back on sale when
/// they expired, so nothing refers to them any more; without this every abandoned visit would
/// leave a document behind for good. Returns how many were deleted.
pub async fn delete_expired_carts(db: &Db, retention: Duration) -> Result<u64, CartError> {
    bound_future_stamps(db).await?;
    let deleted = store::delete_expired_before(db, cutoff(db.now(), retention)).await?;
    if deleted > 0 {
        tracing::info!(carts = deleted, "deleted long-expired carts");
    }
    Ok(deleted)
}

/// Check every reservation older than `older_than` against its cart: a cart still in use gets a
/// fresh timestamp; a paid cart's units are counted as sold; anything else (expired, expiring,
/// gone) goes back on sale. This repairs stock trapped by a crash between two writes. Before
/// that, stock moves pending longer than `stock::PENDING_GRACE` are finished.
pub async fn clean_up_reservations(
    db: &Db,
    older_than: Duration,
) -> Result<CleanupReport, CartError> {
    bound_future_stamps(db).await?;
    let mut report = CleanupReport {
        // First the moves a crash left half-done, so the reservations below are whole.
        moves_finished: stock::recover_pending(db, stock::PENDING_GRACE).await?,
        ..CleanupReport::default()
    };
    let before = cutoff(db.now(), older_than);
    let stale = stock::stamped_before(db, before).await?;
    let mut carts: HashMap<CartId, Option<cart::Cart>> = HashMap::new();
    for entry in stale {
        // A cancelled order's hold has no cart: like a cart that is gone, its units go back
        // on sale.
        let owner = match entry.holder.cart() {
            Some(id) => {
                if !carts.contains_key(id) {
                    let found = cart::by_id(db, id).await?;
                    carts.insert(id.clone(), found);
                }
                carts.get(id).and_then(Option::as_ref)
            }
            None => None,
        };
        match owner.map(|c| c.status) {
            Some(CartStatus::Active | CartStatus::Pending) => {
                report.refreshed +=
                    stock::refresh_reservation(db, &entry.sku, &entry.holder, entry.timestamp)
                        .await?;
            }
            Some(CartStatus::Complete) => {
                // The paid line's units are sold; anything held beyond them goes back.
                let units = owner.and_then(|c| c.line(&entry.sku)).map_or(0, |l| l.qty);
                if stock::sell_reservation(db, &entry.sku, &entry.holder, units).await? {
                    report.sold += 1;
                }
            }
            Some(CartStatus::Expiring | CartStatus::Expired) | None => {
                if stock::return_reservation(db, &entry.sku, &entry.holder).await? {
                    report.returned += 1;
                }
            }
        }
    }
    // Finished lines leave empty reservations, kept this long for their move ids.
    stock::delete_empty_before(db, before).await?;
    if report.returned + report.sold > 0 {
        tracing::warn!(
            returned = report.returned,
            sold = report.sold,
            "cleanup repaired stock reservations left behind"
        );
    }
    Ok(report)
}

/// [`crate::checkout::recover_stuck_checkouts`] after [`bound_future_stamps`], so a checkout
/// interrupted just before the clock stepped back is recovered on time.
pub(crate) async fn recover_stuck_checkouts(
    db: &Db,
    gateway: &dyn PaymentGateway,
    older_than: Duration,
) -> Result<crate::checkout::RecoveryReport, CartError> {
    bound_future_stamps(db).await?;
    crate::checkout::recover_stuck_checkouts(db, gateway, older_than).await
}

/// Run expiry, cleanup and the recovery of interrupted checkouts (asking `gateway` what it
/// charged) every `settings.jobs_every` until the returned task is aborted. `None` when the jobs
/// are turned off. Comments deleted more than `restore_days` ago are deleted for good, and
/// customer accounts abandoned for `abandoned_after_days` are erased (under a lease, by one
/// instance at a time; `accounts::privacy::erase_abandoned`).
pub(crate) fn spawn(
    db: Db,
    settings: CartSettings,
    gateway: Arc<dyn PaymentGateway>,
    restore_days: u32,
    abandoned_after_days: u32,
) -> Option<tokio::task::JoinHandle<()>> {
    if settings.jobs_every.is_zero() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(settings.jobs_every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            run(
                "expire_idle_carts",
                expire_idle_carts(&db, settings.expire_after),
            )
            .await;
            run(
                "clean_up_reservations",
                clean_up_reservations(&db, settings.cleanup_after),
            )
            .await;
            run(
                "delete_expired_carts",
                delete_expired_carts(&db, settings.retention),
            )
            .await;
            // A checkout takes seconds; one pending this long was interrupted by a crash.
            let stuck_after = settings.recover_checkout_after;
            let recovery = recover_stuck_checkouts(&db, gateway.as_ref(), stuck_after);
            if let Some(report) = run("recover_stuck_checkouts", recovery).await {
                if report.total() > 0 {
                    tracing::warn!(?report, "recovered checkouts interrupted by a crash");
                }
            }
            // Scheduled posts whose time came go live once, recorded, so a later step of the
            // clock cannot take them off the site again.
            let due = crate::content::store::go_live_due(&db);
            if let Some(n @ 1..) = run("go_live_due", due).await {
                tracing::info!(nodes = n, "scheduled content went live");
            }
            run(
                "resume_restocking",
                crate::checkout::orders::resume_restocking(&db),
            )
            .await;
            // Each comment is taken by a conditional write, so instances running this at once
            // purge it once.
            let purge = crate::comments::store::purge_deleted(&db, restore_days);
            if let Some(n @ 1..) = run("purge_deleted_comments", purge).await {
                tracing::info!(
                    comments = n,
                    "deleted comments past their restore period purged"
                );
            }
            // The traffic roll-ups, by one instance at a time (under a lease).
            let rollup = crate::analytics::rollup::roll_up_under_lease(&db);
            if let Some(Some(report)) = run("traffic_rollup", rollup).await {
                if !report.built.is_empty() {
                    tracing::debug!(?report, "traffic rolled up");
                }
            }
            let abandoned = crate::accounts::privacy::erase_abandoned(&db, abandoned_after_days);
            if let Some(n @ 1..) = run("erase_abandoned_accounts", abandoned).await {
                tracing::info!(accounts = n, "abandoned customer accounts erased");
            }
        }
    }))
}

/// Run one job of the scheduler: inside a `job` span (so its log lines, JSON ones included, name
/// it), timed and counted (`crate::metrics::job_run`, also shown on Admin → System). A failure is
/// logged and the job is tried again on the next tick; `None` then.
async fn run<T, E: std::fmt::Display>(
    job: &'static str,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> Option<T> {
    use tracing::Instrument;
    let started = std::time::Instant::now();
    let result = work
        .instrument(tracing::info_span!("job", name = job))
        .await;
    let took = started.elapsed();
    match result {
        Ok(value) => {
            crate::metrics::job_run(job, None, took);
            Some(value)
        }
        Err(e) => {
            let error = e.to_string();
            tracing::warn!(job, %error, "background job failed; retrying on the next run");
            crate::metrics::job_run(job, Some(&error), took);
            None
        }
    }
}
