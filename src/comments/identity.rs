//! One identity for comments: a customer who chose a display name (Account → Comment
//! settings) owns it — nobody else, anonymous or signed in as another account, may sign a
//! comment with it, in any lookalike spelling ([`names::comparison_key`]) — and a comment
//! posted while signed in records the account, marked "verified" when signed with the
//! account's own name.
//!
//! Comments sit below the accounts area, so, as with the discussed collections
//! (`DiscussionKind::collection`), the `accounts` collection and the two fields read here
//! (`display_key`, which the accounts area writes as [`names::comparison_key`] of the display
//! name, and `sessions_epoch`) are named here; tests check the names agree.

use actix_session::Session;
use bson::doc;
use bson::oid::ObjectId;
use serde::Deserialize;

use crate::comments::names;
use crate::db::{Db, DbError};
use crate::web::session::{ACCOUNT_EPOCH_KEY, ACCOUNT_KEY};

/// The accounts area's collection.
pub const ACCOUNTS: &str = "accounts";

/// The signed-in commenter as the comment forms need them.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Commenter {
    #[serde(rename = "_id")]
    pub(crate) id: ObjectId,
}

/// The account this session is signed in as — `None` when signed out, or when the account is
/// gone or signed out everywhere since (its epoch moved on).
pub(crate) async fn signed_in(session: &Session, db: &Db) -> Result<Option<Commenter>, DbError> {
    let Some(id) = session
        .get::<String>(ACCOUNT_KEY)
        .ok()
        .flatten()
        .and_then(|hex| ObjectId::parse_str(hex).ok())
    else {
        return Ok(None);
    };
    let Some(epoch) = session.get::<i64>(ACCOUNT_EPOCH_KEY).ok().flatten() else {
        return Ok(None);
    };
    Ok(db
        .collection::<Commenter>(ACCOUNTS)
        .find_one(doc! { "_id": id, "sessions_epoch": epoch })
        .projection(doc! { "_id": 1 })
        .await?)
}

/// The account whose display name `name` is (compared as [`names::comparison_key`]), if any.
pub(crate) async fn owner_of(db: &Db, name: &str) -> Result<Option<ObjectId>, DbError> {
    let key = names::comparison_key(name);
    if key.is_empty() {
        return Ok(None);
    }
    Ok(db
        .collection::<Commenter>(ACCOUNTS)
        .find_one(doc! { "display_key": key })
        .projection(doc! { "_id": 1 })
        .await?
        .map(|c| c.id))
}
