//! The `backups` collection: scheduled backups' state shared by every instance on the database,
//! one document `_id: "scheduled"`. It hands out backup sequence numbers, records when the next
//! backup is due (so one backup is taken per period across all instances, whichever takes it)
//! and the last success and failure of any instance, which Admin → System shows.

use bson::{doc, DateTime};
use mongodb::options::ReturnDocument;
use serde::Deserialize;

use crate::db::{Db, DbError};

pub(crate) const COLLECTION: &str = "backups";
const SCHEDULED: &str = "scheduled";

/// The last verified scheduled backup of any instance.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct SuccessDoc {
    pub(crate) sequence: i64,
    /// The backup's directory name in `backup.dir`.
    pub(crate) name: String,
    pub(crate) instance: String,
    /// The point in time the backup shows.
    pub(crate) taken_at: DateTime,
    pub(crate) bytes: i64,
    pub(crate) documents: i64,
}

/// The last failed scheduled backup of any instance.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct FailureDoc {
    /// The sequence the failed attempt was given: a failure matters while it is above the last
    /// success's (sequences, unlike clocks, never go back).
    pub(crate) sequence: i64,
    pub(crate) instance: String,
    pub(crate) at: DateTime,
    pub(crate) message: String,
}

/// The shared document as stored.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ScheduleDoc {
    /// The last sequence handed out.
    #[serde(default)]
    pub(crate) sequence: i64,
    /// When the next scheduled backup is due; none yet: due now.
    #[serde(default)]
    pub(crate) next_due: Option<DateTime>,
    /// The instance whose clock `next_due` was computed with.
    #[serde(default)]
    pub(crate) next_due_by: Option<String>,
    #[serde(default)]
    pub(crate) last_success: Option<SuccessDoc>,
    #[serde(default)]
    pub(crate) last_failure: Option<FailureDoc>,
}

impl ScheduleDoc {
    /// The failure to show: one after the last success.
    pub(crate) fn current_failure(&self) -> Option<&FailureDoc> {
        self.last_failure.as_ref().filter(|f| {
            self.last_success
                .as_ref()
                .is_none_or(|s| f.sequence > s.sequence)
        })
    }
}

fn collection(db: &Db) -> mongodb::Collection<ScheduleDoc> {
    db.collection::<ScheduleDoc>(COLLECTION)
}

/// The shared state; the default when no scheduled backup ever ran on this database.
pub(crate) async fn load(db: &Db) -> Result<ScheduleDoc, DbError> {
    Ok(collection(db)
        .find_one(doc! {"_id": SCHEDULED})
        .await?
        .unwrap_or_default())
}

/// A new backup sequence number, above every one handed out before and above `at_least` (the
/// highest found in `backup.dir`, which stays right even if the database was restored from an
/// older backup and its counter went back). Atomic, so two callers never get the same one.
pub(crate) async fn next_sequence(db: &Db, at_least: i64) -> Result<i64, DbError> {
    let coll = collection(db);
    coll.update_one(
        doc! {"_id": SCHEDULED},
        doc! {"$max": {"sequence": at_least}},
    )
    .upsert(true)
    .await?;
    let updated = coll
        .find_one_and_update(doc! {"_id": SCHEDULED}, doc! {"$inc": {"sequence": 1_i64}})
        .return_document(ReturnDocument::After)
        .write_concern(db.journaled_write_concern())
        .await?;
    updated
        .map(|d| d.sequence)
        .ok_or_else(|| DbError::Invalid("the backups document vanished".to_string()))
}

/// Record a verified backup, unless one with a higher sequence was recorded meanwhile.
pub(crate) async fn record_success(db: &Db, success: &SuccessDoc) -> Result<(), DbError> {
    collection(db)
        .update_one(
            doc! {
                "_id": SCHEDULED,
                "$or": [
                    {"last_success": null},
                    {"last_success.sequence": {"$lt": success.sequence}},
                ],
            },
            doc! {"$set": {"last_success": {
                "sequence": success.sequence,
                "name": &success.name,
                "instance": &success.instance,
                "taken_at": success.taken_at,
                "bytes": success.bytes,
                "documents": success.documents,
            }}},
        )
        .await?;
    Ok(())
}

/// Record a failed attempt, unless a later attempt's failure was recorded meanwhile.
pub(crate) async fn record_failure(db: &Db, failure: &FailureDoc) -> Result<(), DbError> {
    collection(db)
        .update_one(
            doc! {
                "_id": SCHEDULED,
                "$or": [
                    {"last_failure": null},
                    {"last_failure.sequence": {"$lt": failure.sequence}},
                ],
            },
            doc! {"$set": {"last_failure": {
                "sequence": failure.sequence,
                "instance": &failure.instance,
                "at": failure.at,
                "message": &failure.message,
            }}},
        )
        .await?;
    Ok(())
}

/// Set when the next scheduled backup is due. Only the holder of the backup lease calls this.
pub(crate) async fn set_next_due(db: &Db, next_due: DateTime, by: &str) -> Result<(), DbError> {
    collection(db)
        .update_one(
            doc! {"_id": SCHEDULED},
            doc! {"$set": {"next_due": next_due, "next_due_by": by}},
        )
        .upsert(true)
        .write_concern(db.journaled_write_concern())
        .await?;
    Ok(())
}
