//! A customer's data, exported and erased: "download my data" gathers exactly one account's
//! account document, saved addresses, orders and comments into one JSON document; "delete my
//! account" removes the account (and with it the saved addresses and the comment identity) and
//! anonymises what must be kept. The admin's customer pages run the same two functions for
//! support requests, and the retention job ([`erase_abandoned`]) runs [`erase`] on accounts
//! nobody used for `accounts.abandoned_after_days`.
//!
//! What is kept after an erasure, and why (docs/privacy.md says it for customers): every order
//! stays, with its number, date, lines, prices, totals, payment reference and status, because
//! the shop must keep its sales records for tax and accounting (GDPR Art. 17(3)(b), a legal
//! obligation; 17(3)(e), defence of legal claims such as a chargeback). The personal fields of
//! those orders — name, email, delivery address — are replaced with [`PLACEHOLDER`] and the
//! order's `account_id` is removed, so nothing left points at the person. Stock and totals are
//! not touched: an erasure sells or returns nothing. Comments written under the account keep
//! their text (replies hang from them) but lose their name (the placeholder), email and reply
//! notifications.
//!
//! Both customer actions are confirmed by a fresh emailed link ([`issue`], [`consume`]): a
//! single-use, expiring token stored only as its SHA-256 in `privacy_requests`, like a sign-in
//! link (`accounts::tokens`).

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::accounts::store::{self, Account};
use crate::checkout::orders::{self, Order};
use crate::comments::Comment;
use crate::db::{Db, DbError};

/// What replaces a name, an email and each line of a delivery address on an erased customer's
/// orders and comments.
pub const PLACEHOLDER: &str = "deleted customer";

pub const COLLECTION: &str = "privacy_requests";

/// How long a confirmation link works.
pub(crate) const LIFETIME: Duration = Duration::from_secs(30 * 60);

/// What a confirmation link confirms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Action {
    Export,
    Delete,
}

/// A pending confirmation as stored: `_id` is the SHA-256 (hex) of the link's token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PrivacyRequest {
    #[serde(rename = "_id")]
    pub(crate) id: String,
    pub(crate) account_id: ObjectId,
    pub(crate) action: Action,
    pub(crate) created: DateTime,
    pub(crate) expires: DateTime,
}

pub fn indexes() -> Vec<IndexModel> {
    vec![IndexModel::builder()
        .keys(doc! { "expires": 1 })
        .options(
            IndexOptions::builder()
                .expire_after(Duration::from_secs(0))
                .build(),
        )
        .build()]
}

fn requests(db: &Db) -> mongodb::Collection<PrivacyRequest> {
    db.durable(COLLECTION)
}

fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The id a link's token stands for, or `None` when it cannot be one (not 64 lowercase hex).
pub(crate) fn id_of_token(token: &str) -> Option<String> {
    let well_formed = token.len() == 64
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    well_formed.then(|| digest(token))
}

/// Issue a confirmation for `action` on `account`: the token for the link (never stored).
pub(crate) async fn issue(db: &Db, account: ObjectId, action: Action) -> Result<String, DbError> {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let token = hex::encode(bytes);
    let now = db.now();
    let expires = DateTime::from_millis(
        now.timestamp_millis()
            .saturating_add(i64::try_from(LIFETIME.as_millis()).unwrap_or(i64::MAX)),
    );
    requests(db)
        .insert_one(PrivacyRequest {
            id: digest(&token),
            account_id: account,
            action,
            created: now,
            expires,
        })
        .await?;
    Ok(token)
}

fn live(db: &Db, id: &str) -> Document {
    doc! { "_id": id, "expires": { "$gt": db.now() } }
}

/// The live request a link stands for, without using it (the confirmation page).
pub(crate) async fn peek(db: &Db, token: &str) -> Result<Option<PrivacyRequest>, DbError> {
    match id_of_token(token) {
        Some(id) => Ok(requests(db).find_one(live(db, &id)).await?),
        None => Ok(None),
    }
}

/// Use the link: one `findOneAndDelete`, so it works once however many instances see it.
pub(crate) async fn consume(db: &Db, token: &str) -> Result<Option<PrivacyRequest>, DbError> {
    match id_of_token(token) {
        Some(id) => Ok(requests(db).find_one_and_delete(live(db, &id)).await?),
        None => Ok(None),
    }
}

/// The comments written by `account`: posted while signed in (`account_id`) or with the
/// account's email (compared normalised, as orders are claimed).
pub(crate) async fn comments_of(db: &Db, account: &Account) -> Result<Vec<Comment>, DbError> {
    let mut found: Vec<Comment> = crate::comments::store::collection(db)
        .find(doc! { "account_id": account.id })
        .await?
        .try_collect()
        .await?;
    for filter in orders::claim_candidate_queries(&account.email) {
        let candidates: Vec<Comment> = crate::comments::store::collection(db)
            .find(filter)
            .await?
            .try_collect()
            .await?;
        found.extend(candidates.into_iter().filter(|c| {
            c.email
                .as_deref()
                .is_some_and(|e| crate::domain::email::normalise(e) == account.email.as_str())
        }));
    }
    found.sort_by_key(|c| c.id);
    found.dedup_by_key(|c| c.id);
    Ok(found)
}

/// Every order `account` owns (guest orders with its email claimed first), oldest first.
async fn orders_of(db: &Db, account: &Account) -> Result<Vec<Order>, DbError> {
    orders::claim_for_account(db, &account.email, account.id).await?;
    let (filter, _) = orders::account_query(account.id);
    Ok(orders::collection(db)
        .find(filter)
        .sort(doc! { "number": 1 })
        .await?
        .try_collect()
        .await?)
}

/// The export: `{ account, addresses, orders, comments }` as JSON, each record as stored
/// (minus the session epoch, which is the shop's bookkeeping, not the customer's data).
pub(crate) async fn export(db: &Db, account: &Account) -> Result<serde_json::Value, DbError> {
    let orders = orders_of(db, account).await?;
    let comments = comments_of(db, account).await?;
    let json = |e: serde_json::Error| DbError::Invalid(format!("exporting an account: {e}"));
    let orders: Vec<serde_json::Value> = orders
        .iter()
        .map(|o| {
            Ok(serde_json::json!({
                "number": o.number.to_string(),
                "placed": o.created.try_to_rfc3339_string().unwrap_or_default(),
                "email": o.email,
                "name": o.name,
                "address": serde_json::to_value(&o.address)?,
                "items": o.items.iter().map(|i| serde_json::json!({
                    "sku": i.sku.to_string(),
                    "title": i.title,
                    "quantity": i.qty,
                    "unit_price": i.unit(),
                })).collect::<Vec<_>>(),
                "subtotal": o.subtotal_display(),
                "shipping": o.shipping_display(),
                "total": o.total_display(),
                "status": o.status.as_str(),
                "payment": { "card_last4": o.payment.last4 },
            }))
        })
        .collect::<Result<_, serde_json::Error>>()
        .map_err(json)?;
    let comments: Vec<serde_json::Value> = comments
        .iter()
        .map(|c| {
            serde_json::json!({
                "id": c.id.to_hex(),
                "posted": c.posted.try_to_rfc3339_string().unwrap_or_default(),
                "name": c.author.name,
                "email": c.email,
                "text": c.text,
                "status": c.status.as_str(),
                "reply_notifications": c.notify,
            })
        })
        .collect();
    Ok(serde_json::json!({
        "account": {
            "email": account.email.as_str(),
            "created": account.created.try_to_rfc3339_string().unwrap_or_default(),
            "last_seen": account.last_seen.try_to_rfc3339_string().unwrap_or_default(),
            "display_name": account.display_name,
            "reply_notifications": account.notify_replies,
        },
        "addresses": serde_json::to_value(&account.addresses).map_err(json)?,
        "orders": orders,
        "comments": comments,
    }))
}

/// What an erasure did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Erased {
    pub(crate) orders_anonymised: u64,
    pub(crate) comments_anonymised: u64,
    pub(crate) account_deleted: bool,
}

/// Erase `account`: its orders (guest orders with its email claimed first) and comments
/// anonymised, then the account deleted. Each step is idempotent, so an erasure interrupted by
/// a crash is finished by running it again (the admin's button, or the retention job).
pub(crate) async fn erase(db: &Db, account: &Account) -> Result<Erased, DbError> {
    orders::claim_for_account(db, &account.email, account.id).await?;
    let anonymised = db
        .durable::<Document>(orders::COLLECTION)
        .update_many(
            doc! { "account_id": account.id },
            doc! {
                "$set": {
                    "name": PLACEHOLDER,
                    "email": PLACEHOLDER,
                    "address.street": PLACEHOLDER,
                    "address.city": PLACEHOLDER,
                    "address.postcode": PLACEHOLDER,
                    "address.country": PLACEHOLDER,
                },
                "$unset": { "account_id": "" },
            },
        )
        .await?;
    let ids: Vec<ObjectId> = comments_of(db, account)
        .await?
        .into_iter()
        .map(|c| c.id)
        .collect();
    let comments = if ids.is_empty() {
        0
    } else {
        let renamed = db
            .durable::<Document>(crate::comments::COLLECTION)
            .update_many(
                doc! { "_id": { "$in": ids } },
                doc! {
                    "$set": { "author.name": PLACEHOLDER, "notify": false, "verified": false },
                    "$unset": { "email": "", "account_id": "" },
                },
            )
            .await;
        // The pages' caches show comments with their names: they reload.
        crate::comments::changes::comments_changed(db);
        renamed?.modified_count
    };
    let deleted = db
        .durable::<Document>(store::COLLECTION)
        .delete_one(doc! { "_id": account.id })
        .await?;
    db.durable::<Document>(COLLECTION)
        .delete_many(doc! { "account_id": account.id })
        .await?;
    Ok(Erased {
        orders_anonymised: anonymised.modified_count,
        comments_anonymised: comments,
        account_deleted: deleted.deleted_count == 1,
    })
}

/// The lease the retention job runs under, so one instance sweeps at a time.
pub(crate) const RETENTION_LEASE: &str = "accounts-retention";

/// How long one instance keeps the sweep to itself: other instances skip it meanwhile, so it
/// runs about once per this period across all instances.
pub(crate) const RETENTION_LEASE_FOR: Duration = Duration::from_secs(3600);

/// Accounts the retention sweep looks at per run; the rest wait for the next run.
const SWEEP_BATCH: i64 = 500;

/// Erase the accounts abandoned for `days`: not seen (no sign-in or signed-in page view) since
/// the cut-off, and no order placed since either. `days == 0` turns the sweep off. Only the
/// instance holding [`RETENTION_LEASE`] sweeps; others return 0. Returns the accounts erased.
pub(crate) async fn erase_abandoned(db: &Db, days: u32) -> Result<u64, DbError> {
    if days == 0 {
        return Ok(0);
    }
    if crate::db::lease::try_take_here(db, RETENTION_LEASE, RETENTION_LEASE_FOR)
        .await?
        .is_none()
    {
        return Ok(0);
    }
    erase_abandoned_now(db, days).await
}

/// [`erase_abandoned`] without the lease (tests, and the lease holder).
pub async fn erase_abandoned_now(db: &Db, days: u32) -> Result<u64, DbError> {
    if days == 0 {
        return Ok(0);
    }
    let cutoff = crate::db::cutoff(db.now(), Duration::from_secs(u64::from(days) * 86_400));
    let stale: Vec<Account> = store::collection(db)
        .find(doc! { "last_seen": { "$lt": cutoff } })
        .limit(SWEEP_BATCH)
        .await?
        .try_collect()
        .await?;
    let mut erased = 0;
    for account in stale {
        orders::claim_for_account(db, &account.email, account.id).await?;
        let recent = orders::collection(db)
            .count_documents(doc! { "account_id": account.id, "created": { "$gte": cutoff } })
            .await?;
        if recent > 0 {
            continue;
        }
        if erase(db, &account).await?.account_deleted {
            erased += 1;
        }
    }
    Ok(erased)
}
