//! Leases: how several Bazaar instances on one database agree that exactly one of them does a
//! piece of work (a scheduled backup, seeding an empty database, a clean-up sweep) at a time.
//!
//! A lease is one document in the `leases` collection, `_id` = the work's name:
//! `{ owner, expires, fence }`. Taking it is one conditional upsert: it succeeds when nobody holds
//! the lease, when its holder's time ran out, or when the caller already holds it; two instances
//! racing for a free lease both try to insert the same `_id` and the unique `_id` index lets only
//! one win (the other sees error 11000 and is told "held by someone else"). Every successful take
//! increments `fence`, so a holder that stalled past its expiry (a long GC pause, a suspended VM)
//! and then writes can be recognised: writes guarded by the lease carry its fence number and the
//! newer holder's is larger (see [`Lease::still_held`]).
//!
//! Expiry is measured with the instances' wall clocks. Leases are long (minutes) next to the
//! skew NTP keeps between servers; a clock stepped far forward on one instance lets it take a
//! lease early, which costs a duplicate run of idempotent work, never a lost one. The design is
//! described in docs/architecture.md ("Work shared by several instances").

use std::sync::OnceLock;
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, DateTime};
use mongodb::options::ReturnDocument;
use serde::{Deserialize, Serialize};

use super::{is_duplicate_key, Db, DbError};

pub const COLLECTION: &str = "leases";

/// This process's name in lease documents: the host name and a random id, fixed for the
/// process's life, so two instances on one host differ and a log line says which one held it.
pub(crate) fn this_instance() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "bazaar".to_string());
        format!("{host}/{}/{}", std::process::id(), ObjectId::new().to_hex())
    })
}

/// A lease as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LeaseDoc {
    #[serde(rename = "_id")]
    name: String,
    owner: String,
    expires: DateTime,
    fence: i64,
}

/// A lease this process holds (until [`Lease::expires`], unless renewed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) name: String,
    pub(crate) owner: String,
    /// Grows by one at every take: larger means a later holder.
    pub(crate) fence: i64,
    pub(crate) expires: DateTime,
}

/// `ttl` from now on `db`'s clock.
fn after(db: &Db, ttl: Duration) -> DateTime {
    let millis = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
    DateTime::from_millis(db.now().timestamp_millis().saturating_add(millis))
}

/// Take the lease `name` for `ttl` as `owner`: `Some` when it was free, expired, or already
/// `owner`'s (then renewed, same holder, new fence); `None` when another holder's lease is still
/// running. Journaled, so a lease granted is never forgotten by a crash of the store.
pub(crate) async fn try_take(
    db: &Db,
    name: &str,
    owner: &str,
    ttl: Duration,
) -> Result<Option<Lease>, DbError> {
    let now = db.now();
    let filter = doc! {
        "_id": name,
        "$or": [ { "owner": owner }, { "expires": { "$lte": now } } ],
    };
    let expires = after(db, ttl);
    let update = doc! {
        "$set": { "owner": owner, "expires": expires },
        "$inc": { "fence": 1_i64 },
    };
    // The document as it was, so a takeover from another instance can be counted; the lease
    // as it now is follows from the update.
    let taken = db
        .collection::<LeaseDoc>(COLLECTION)
        .find_one_and_update(filter, update)
        .upsert(true)
        .return_document(ReturnDocument::Before)
        .write_concern(db.journaled_write_concern())
        .await;
    match taken {
        Ok(before) => {
            if before.as_ref().is_some_and(|b| b.owner != owner) {
                crate::metrics::lease_takeover(name);
            }
            Ok(Some(Lease {
                name: name.to_string(),
                owner: owner.to_string(),
                fence: before.map_or(1, |b| b.fence + 1),
                expires,
            }))
        }
        // The document exists and matched neither condition, so the upsert tried to insert a
        // second one with the same _id: somebody else holds the lease.
        Err(e) if is_duplicate_key(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// [`try_take`] as this process ([`this_instance`]).
pub(crate) async fn try_take_here(
    db: &Db,
    name: &str,
    ttl: Duration,
) -> Result<Option<Lease>, DbError> {
    try_take(db, name, this_instance(), ttl).await
}

impl Lease {
    /// Extend the lease by `ttl` from now; `false` when it was lost (expired and taken by
    /// another holder), in which case the caller must stop what it was doing under it.
    pub(crate) async fn renew(&mut self, db: &Db, ttl: Duration) -> Result<bool, DbError> {
        let expires = after(db, ttl);
        let renewed = db
            .collection::<LeaseDoc>(COLLECTION)
            .update_one(
                doc! { "_id": &self.name, "owner": &self.owner, "fence": self.fence },
                doc! { "$set": { "expires": expires } },
            )
            .await?;
        if renewed.matched_count == 1 {
            self.expires = expires;
        }
        Ok(renewed.matched_count == 1)
    }

    /// True while nobody took the lease over: same owner and fence as when taken. A holder
    /// checks this before a step it must not share (deleting old backups, say).
    pub(crate) async fn still_held(&self, db: &Db) -> Result<bool, DbError> {
        let found = db
            .collection::<LeaseDoc>(COLLECTION)
            .find_one(doc! { "_id": &self.name, "owner": &self.owner, "fence": self.fence })
            .await?;
        Ok(found.is_some())
    }

    /// Give the lease up now (its work is done) so the next holder need not wait for expiry.
    /// Only this holder's lease is released: a lease taken over meanwhile is left alone. For
    /// work that must run once per period, keep the lease to its expiry instead.
    pub(crate) async fn release(self, db: &Db) -> Result<(), DbError> {
        db.collection::<LeaseDoc>(COLLECTION)
            .update_one(
                doc! { "_id": &self.name, "owner": &self.owner, "fence": self.fence },
                doc! { "$set": { "expires": DateTime::from_millis(0) } },
            )
            .await?;
        Ok(())
    }
}
