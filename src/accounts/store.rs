//! The `accounts` collection: one document per customer, keyed by the normalised email they
//! signed in with (unique index), created on their first sign-in. It holds what the customer
//! keeps with the shop — saved delivery addresses, their comment settings — and
//! `sessions_epoch`, which "sign out everywhere" increments so every session signed in under
//! the old value stops counting (`accounts::session`).
//!
//! Every function here is one database command on this collection; other areas (the admin's
//! customer list, data export and deletion, comment-name reservation) build on [`Account`],
//! [`find_by_email`] and [`find_by_id`].

use bson::oid::ObjectId;
use bson::{doc, DateTime};
use mongodb::options::{IndexOptions, ReturnDocument};
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

use crate::db::{is_duplicate_key, Db, DbError};
use crate::domain::EmailAddress;

pub const COLLECTION: &str = "accounts";

/// Saved addresses per account: enough for home, work and a few relatives, and a bound on the
/// document's size.
pub(crate) const MAX_ADDRESSES: usize = 20;

/// A customer account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    /// Normalised (trimmed, lowercased); unique.
    pub(crate) email: EmailAddress,
    pub(crate) created: DateTime,
    /// The last sign-in or signed-in page view that touched it ([`touch`]).
    pub(crate) last_seen: DateTime,
    /// The name shown on the customer's comments, when they chose one.
    #[serde(default)]
    pub display_name: Option<String>,
    /// `comments::names::comparison_key` of the display name: what reserves it to this
    /// account (`comments::identity`). Absent without a display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_key: Option<String>,
    /// Whether replies to the customer's comments are emailed to them.
    #[serde(default)]
    pub notify_replies: bool,
    #[serde(default)]
    pub addresses: Vec<SavedAddress>,
    /// Sessions record the epoch they signed in under; one that differs is signed out.
    #[serde(default)]
    pub(crate) sessions_epoch: i64,
}

impl Account {
    /// The default delivery address (the one marked, else the first saved).
    pub(crate) fn default_address(&self) -> Option<&SavedAddress> {
        self.addresses
            .iter()
            .find(|a| a.default)
            .or_else(|| self.addresses.first())
    }

    pub(crate) fn address(&self, id: &ObjectId) -> Option<&SavedAddress> {
        self.addresses.iter().find(|a| &a.id == id)
    }

    pub(crate) fn created_display(&self) -> String {
        self.created.to_chrono().format("%-d %B %Y").to_string()
    }
}

/// A saved delivery address, checked like checkout's address (`checkout::required_text`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedAddress {
    pub id: ObjectId,
    pub(crate) name: String,
    pub(crate) line1: String,
    #[serde(default)]
    pub(crate) line2: String,
    pub(crate) city: String,
    pub(crate) postcode: String,
    pub(crate) country: String,
    #[serde(default)]
    pub(crate) default: bool,
}

impl SavedAddress {
    /// The street as checkout's single field takes it: both lines, comma-separated.
    pub(crate) fn street(&self) -> String {
        if self.line2.is_empty() {
            self.line1.clone()
        } else {
            format!("{}, {}", self.line1, self.line2)
        }
    }
}

pub fn indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder()
            .keys(doc! { "email": 1 })
            .options(IndexOptions::builder().unique(true).build())
            .build(),
        // Who owns a comment name (`comments::identity::owner_of`); unique, so two accounts
        // choosing the same name at once cannot both get it (sparse: most have none).
        IndexModel::builder()
            .keys(doc! { "display_key": 1 })
            .options(
                IndexOptions::builder()
                    .name("display_key_unique".to_string())
                    .unique(true)
                    .sparse(true)
                    .build(),
            )
            .build(),
        // The retention job's "not seen since" (`privacy::erase_abandoned`).
        IndexModel::builder().keys(doc! { "last_seen": 1 }).build(),
    ]
}

pub fn collection(db: &Db) -> mongodb::Collection<Account> {
    db.collection(COLLECTION)
}

fn durable(db: &Db) -> mongodb::Collection<Account> {
    db.durable(COLLECTION)
}

pub async fn find_by_email(db: &Db, email: &EmailAddress) -> Result<Option<Account>, DbError> {
    Ok(collection(db).find_one(doc! { "email": email }).await?)
}

pub async fn find_by_id(db: &Db, id: ObjectId) -> Result<Option<Account>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

/// The account of `email` as it stands after a successful sign-in: created when it is the
/// address's first, `last_seen` set to now either way. One upsert, so two instances signing
/// the same new address in at once make one account (the unique index refuses the second
/// insert; the retry then finds the first).
pub async fn upsert_on_sign_in(db: &Db, email: &EmailAddress) -> Result<Account, DbError> {
    let now = db.now();
    let update = doc! {
        "$set": { "last_seen": now },
        "$setOnInsert": {
            "_id": ObjectId::new(),
            "created": now,
            "display_name": bson::Bson::Null,
            "notify_replies": false,
            "addresses": [],
            "sessions_epoch": 0_i64,
        },
    };
    for attempt in 0..3 {
        let result = durable(db)
            .find_one_and_update(doc! { "email": email }, update.clone())
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await;
        match result {
            Ok(Some(account)) => return Ok(account),
            Ok(None) => {
                return Err(DbError::Invalid(
                    "an upsert returned no account".to_string(),
                ))
            }
            Err(e) if attempt < 2 && is_duplicate_key(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(DbError::Invalid(
        "could not create or find the account".to_string(),
    ))
}

/// Record that the customer was here (`last_seen`). Not journaled: losing it in a crash costs
/// nothing.
pub(crate) async fn touch(db: &Db, id: ObjectId) -> Result<(), DbError> {
    collection(db)
        .update_one(
            doc! { "_id": id },
            doc! { "$set": { "last_seen": db.now() } },
        )
        .await?;
    Ok(())
}

/// Sign out every session: the new epoch, or `None` when the account is gone.
pub(crate) async fn bump_sessions_epoch(db: &Db, id: ObjectId) -> Result<Option<i64>, DbError> {
    let account = durable(db)
        .find_one_and_update(
            doc! { "_id": id },
            doc! { "$inc": { "sessions_epoch": 1_i64 } },
        )
        .return_document(ReturnDocument::After)
        .await?;
    Ok(account.map(|a| a.sessions_epoch))
}

/// What storing the comment settings did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsSaved {
    Saved,
    /// The account is gone.
    NoAccount,
    /// Another account holds that display name (it took it since the page's check).
    NameTaken,
}

/// Store the comment settings; the display name with its comparison key, which reserves it
/// (the unique `display_key` index settles two accounts choosing one name at once).
pub async fn set_comment_settings(
    db: &Db,
    id: ObjectId,
    display_name: Option<&str>,
    notify_replies: bool,
) -> Result<SettingsSaved, DbError> {
    let key = display_name.map(crate::comments::names::comparison_key);
    let update = match key {
        Some(key) => doc! { "$set": {
            "display_name": display_name,
            "display_key": key,
            "notify_replies": notify_replies,
        } },
        None => doc! {
            "$set": { "display_name": bson::Bson::Null, "notify_replies": notify_replies },
            "$unset": { "display_key": "" },
        },
    };
    match durable(db).update_one(doc! { "_id": id }, update).await {
        Ok(done) if done.matched_count == 1 => Ok(SettingsSaved::Saved),
        Ok(_) => Ok(SettingsSaved::NoAccount),
        Err(e) if crate::db::is_duplicate_key(&e) => Ok(SettingsSaved::NameTaken),
        Err(e) => Err(e.into()),
    }
}

/// Add `address` (the default when it is the first, or when it says so: the others then are
/// not). False when the account is gone or already holds [`MAX_ADDRESSES`].
pub(crate) async fn add_address(
    db: &Db,
    id: ObjectId,
    address: SavedAddress,
) -> Result<bool, DbError> {
    let mut filter = doc! { "_id": id };
    filter.insert(
        format!("addresses.{}", MAX_ADDRESSES - 1),
        doc! { "$exists": false },
    );
    let make_default = address.default;
    let address_id = address.id;
    let as_doc = bson::to_document(&address).map_err(|e| DbError::Invalid(e.to_string()))?;
    let done = durable(db)
        .update_one(filter, doc! { "$push": { "addresses": as_doc } })
        .await?;
    if done.matched_count == 0 {
        return Ok(false);
    }
    if make_default {
        set_default_address(db, id, address_id).await?;
    }
    Ok(true)
}

/// Replace the saved address with `address.id`, keeping which one is the default. False when
/// there is no such address.
pub(crate) async fn update_address(
    db: &Db,
    id: ObjectId,
    address: &SavedAddress,
) -> Result<bool, DbError> {
    let done = durable(db)
        .update_one(
            doc! { "_id": id, "addresses.id": address.id },
            doc! { "$set": {
                "addresses.$.name": &address.name,
                "addresses.$.line1": &address.line1,
                "addresses.$.line2": &address.line2,
                "addresses.$.city": &address.city,
                "addresses.$.postcode": &address.postcode,
                "addresses.$.country": &address.country,
            } },
        )
        .await?;
    Ok(done.matched_count == 1)
}

pub(crate) async fn delete_address(
    db: &Db,
    id: ObjectId,
    address: ObjectId,
) -> Result<bool, DbError> {
    let done = durable(db)
        .update_one(
            doc! { "_id": id },
            doc! { "$pull": { "addresses": { "id": address } } },
        )
        .await?;
    Ok(done.modified_count == 1)
}

/// Make `address` the default and every other saved address not. One update (two filtered
/// positional paths) so no reader sees two defaults. False when there is no such address.
pub(crate) async fn set_default_address(
    db: &Db,
    id: ObjectId,
    address: ObjectId,
) -> Result<bool, DbError> {
    let done = durable(db)
        .update_one(
            doc! { "_id": id, "addresses.id": address },
            doc! { "$set": {
                "addresses.$[chosen].default": true,
                "addresses.$[other].default": false,
            } },
        )
        .array_filters(vec![
            doc! { "chosen.id": address },
            doc! { "other.id": { "$ne": address } },
        ])
        .await?;
    Ok(done.matched_count == 1)
}
