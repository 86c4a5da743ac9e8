//! Outgoing email through a durable outbox. An area that causes an email (an order placed,
//! shipped or cancelled; a reply to a comment whose author asked to be told) renders it with
//! its own askama templates and calls [`enqueue`] in the same step as the event: one document
//! in the `outbox` collection, whose `_id` is derived from the event (`order-placed/BZ-000123`),
//! so repeating the step (a retry, a recovery after a crash) cannot queue it twice.
//!
//! [`sender`] works the outbox: it claims one due message at a time with a lease stored on the
//! message itself (several instances may send at once; each message is claimed by one), sends
//! it through SMTP (`lettre`) or writes it as an `.eml` file when no mail server is configured,
//! retries temporary failures with exponential backoff and gives up after `email.max_attempts`,
//! leaving the failure for the admin to see. The `Message-ID` is derived from the outbox id, so
//! the one duplicate the design allows (a crash between the server's acceptance and the "sent"
//! mark) carries the same `Message-ID` as the first copy. See docs/email.md.

pub mod message;
pub mod sender;
pub(crate) mod signing;

use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

use crate::db::{is_duplicate_key, Db, DbError};

pub const COLLECTION: &str = "outbox";

/// Where a message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MailStatus {
    /// Waiting for its `due` time (first try, or a retry after a temporary failure).
    Pending,
    /// Claimed by a sender until `due` (the claim's expiry).
    Sending,
    Sent,
    /// Given up on: a permanent refusal, or `email.max_attempts` temporary failures.
    Failed,
}

impl MailStatus {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            MailStatus::Pending => "pending",
            MailStatus::Sending => "sending",
            MailStatus::Sent => "sent",
            MailStatus::Failed => "failed",
        }
    }
}

/// A message as an area renders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email {
    /// The outbox id, derived from the event (`order-placed/BZ-000123`): queueing the same
    /// event twice keeps one message.
    pub id: String,
    /// What kind of message this is (`order-placed`, `reply`), for the admin.
    pub kind: &'static str,
    pub to: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    /// The one-click unsubscribe address (RFC 8058), for messages someone subscribed to.
    pub unsubscribe: Option<String>,
    /// The body holds a secret (a sign-in link and code): once the message is sent or given
    /// up on, its text and HTML are replaced by [`REDACTED`], so the outbox keeps no usable
    /// copy.
    pub secret: bool,
}

/// What a [`Email::secret`] message's body reads once it was sent or given up on.
pub const REDACTED: &str = "[removed after sending: this message held a secret]";

/// A message in the outbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutboxMessage {
    #[serde(rename = "_id")]
    pub id: String,
    pub kind: String,
    pub to: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsubscribe: Option<String>,
    /// See [`Email::secret`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
    /// When the event happened: the message's `Date:`.
    pub(crate) created: DateTime,
    pub status: MailStatus,
    /// Pending: not before this. Sending: the claim runs out at this time. Absent once sent or
    /// given up on, so only messages with work left are in the index's range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) due: Option<DateTime>,
    /// Sends started (claims taken).
    #[serde(default)]
    pub attempts: u32,
    /// The sender holding the claim while sending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) claimed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sent: Option<DateTime>,
}

impl OutboxMessage {
    /// `Message-ID` of this message: the outbox id made header-safe, at the sender's domain. The
    /// same for every attempt, so a receiver can recognise a re-send.
    pub(crate) fn message_id(&self, from: &str) -> String {
        let domain = from.rsplit_once('@').map_or("localhost", |(_, d)| d);
        format!("<{}@{domain}>", self.id_with('.'))
    }

    /// The `.eml` file name of this message when written into a folder.
    pub(crate) fn file_name(&self) -> String {
        format!("{}.eml", self.id_with('_'))
    }

    /// The id with every character but ASCII letters, digits and `-` replaced by `other`.
    fn id_with(&self, other: char) -> String {
        self.id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    other
                }
            })
            .collect()
    }

    pub(crate) fn created_display(&self) -> String {
        self.created
            .to_chrono()
            .format("%-d %B %Y, %H:%M UTC")
            .to_string()
    }
}

/// The outbox's indexes: due messages in due order (the sender's claim) and the admin's list
/// by status, newest first.
pub fn indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder().keys(doc! { "due": 1 }).build(),
        IndexModel::builder()
            .keys(doc! { "status": 1, "created": -1 })
            .build(),
    ]
}

pub fn collection(db: &Db) -> mongodb::Collection<OutboxMessage> {
    db.collection(COLLECTION)
}

/// Queue `email`, due now. Journaled like the event that causes it. Queueing an id already in
/// the outbox does nothing and returns false (the event's step ran again).
pub async fn enqueue(db: &Db, email: Email) -> Result<bool, DbError> {
    let now = db.now();
    let message = OutboxMessage {
        id: email.id,
        kind: email.kind.to_string(),
        to: email.to,
        subject: email.subject,
        text: email.text,
        html: email.html,
        unsubscribe: email.unsubscribe,
        secret: email.secret,
        created: now,
        status: MailStatus::Pending,
        due: Some(now),
        attempts: 0,
        claimed_by: None,
        last_error: None,
        sent: None,
    };
    match db
        .durable::<OutboxMessage>(COLLECTION)
        .insert_one(&message)
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_duplicate_key(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The filter and sort of the admin's list of messages with `status`, newest first; for
/// `explain` in tests.
pub fn list_query(status: MailStatus) -> (Document, Document) {
    (doc! { "status": status.as_str() }, doc! { "created": -1 })
}

/// The newest `limit` messages with `status`.
pub(crate) async fn list(
    db: &Db,
    status: MailStatus,
    limit: i64,
) -> Result<Vec<OutboxMessage>, DbError> {
    let (filter, sort) = list_query(status);
    Ok(collection(db)
        .find(filter)
        .sort(sort)
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

/// How many messages have `status`.
pub async fn count(db: &Db, status: MailStatus) -> Result<u64, DbError> {
    let (filter, _) = list_query(status);
    Ok(collection(db).count_documents(filter).await?)
}

/// How many messages wait to be sent (pending or being sent), counted in one query: every such
/// message has a `due` time (index `{ due: 1 }`).
pub(crate) async fn count_waiting(db: &Db) -> Result<u64, DbError> {
    Ok(collection(db).count_documents(waiting_query()).await?)
}

/// The filter of [`count_waiting`]: a range over every `due` time. For `explain` in tests.
pub fn waiting_query() -> Document {
    doc! { "due": { "$gte": DateTime::MIN } }
}

/// Give a failed message another round of attempts, due now. False when it is not (or no
/// longer) failed.
pub(crate) async fn retry_failed(db: &Db, id: &str) -> Result<bool, DbError> {
    let updated = collection(db)
        .update_one(
            doc! { "_id": id, "status": MailStatus::Failed.as_str() },
            doc! { "$set": { "status": MailStatus::Pending.as_str(), "due": db.now(), "attempts": 0 } },
        )
        .await?;
    Ok(updated.modified_count == 1)
}

/// Read a message back (tests, the admin).
pub async fn by_id(db: &Db, id: &str) -> Result<Option<OutboxMessage>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

/// Absolute address of `path` on the public site (`base` is `server.public_url`'s form, with or
/// without a trailing slash), for links in emails.
pub(crate) fn absolute(base: &str, path: &str) -> String {
    format!("{}{}", base.trim_end_matches('/'), path)
}

/// The site's public address, for links in emails, kept with the [`Db`] handle (start-up sets
/// it once the listener is bound; every clone of the handle shares it).
#[derive(Default)]
pub(crate) struct SiteAddress(std::sync::RwLock<Option<String>>);

impl SiteAddress {
    pub(crate) fn set(&self, address: &str) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) =
            Some(address.trim_end_matches('/').to_string());
    }
}

/// The address start-up recorded in [`SiteAddress`] (`http://localhost` before it did).
pub(crate) fn site_address(db: &Db) -> String {
    db.extension::<SiteAddress>()
        .0
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_else(|| "http://localhost".to_string())
}
