//! The outbox sender: claims due messages one at a time, sends each through the configured
//! transport and records the outcome.
//!
//! A claim is a lease on one message: a conditional update moving it from `pending` (due) or
//! from `sending` whose claim ran out, to `sending` by this sender until now + [`CLAIM_FOR`].
//! Only one sender's update can match, so with several instances each message is sent by one
//! of them. The outcome is recorded only while the claim is still this sender's (same
//! `claimed_by` and attempt number): a sender that stalled past its claim cannot overwrite the
//! newer holder's record.
//!
//! Failures: a connection refused, a timeout or a 4xx reply is temporary and the message waits
//! `retry_after × 2^(attempts − 1)` (at most an hour) before the next attempt; a 5xx reply or an
//! address that cannot be built is permanent. After `email.max_attempts` the message is marked
//! failed with the last error, which Admin → System lists.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, DateTime, Document};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use mongodb::options::ReturnDocument;
use tracing::Instrument;

use crate::config::{EmailSettings, MailTransport, SmtpSecurity};
use crate::db::{lease, Db, DbError};
use crate::mail::{collection, message, MailStatus, OutboxMessage};

/// How long a claim lasts: far longer than one SMTP exchange (lettre's timeout is 60 s), so a
/// live sender never loses its claim mid-send; a crashed sender's messages wait this long.
pub const CLAIM_FOR: Duration = Duration::from_secs(120);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// Why one attempt did not deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Worth another attempt later (server down, busy, 4xx).
    Temporary(String),
    /// Another attempt would fail the same way (5xx, a bad address).
    Permanent(String),
}

/// Where messages go.
pub enum Transport {
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    Folder(PathBuf),
}

impl Transport {
    /// The transport `settings` describe.
    pub fn from_settings(settings: &EmailSettings) -> anyhow::Result<Transport> {
        Ok(match &settings.transport {
            MailTransport::Folder(dir) => Transport::Folder(dir.clone()),
            MailTransport::Smtp {
                host,
                port,
                security,
                credentials,
            } => {
                let tls = || TlsParameters::new(host.clone());
                let mut builder =
                    AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.as_str())
                        .port(*port)
                        .timeout(Some(Duration::from_secs(30)));
                builder = match security {
                    SmtpSecurity::StartTls => builder.tls(Tls::Required(tls()?)),
                    SmtpSecurity::Tls => builder.tls(Tls::Wrapper(tls()?)),
                    SmtpSecurity::None => builder.tls(Tls::None),
                };
                if let Some((user, password)) = credentials {
                    builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
                }
                Transport::Smtp(builder.build())
            }
        })
    }

    /// The folder `.eml` files are written into, when that is the transport.
    pub(crate) fn folder(&self) -> Option<&Path> {
        match self {
            Transport::Folder(dir) => Some(dir),
            Transport::Smtp(_) => None,
        }
    }

    async fn send(&self, m: &OutboxMessage, from: &str, shop: &str) -> Result<(), SendError> {
        let built = message::build(m, from, shop).map_err(|e| SendError::Permanent(e.0))?;
        match self {
            Transport::Smtp(smtp) => match smtp.send(built).await {
                Ok(_) => Ok(()),
                Err(e) if e.is_permanent() => Err(SendError::Permanent(e.to_string())),
                Err(e) => Err(SendError::Temporary(e.to_string())),
            },
            Transport::Folder(dir) => {
                let bytes = built.formatted();
                let dir = dir.clone();
                let name = m.file_name();
                tokio::task::spawn_blocking(move || write_eml(&dir, &name, &bytes))
                    .await
                    .map_err(|e| SendError::Temporary(e.to_string()))?
                    .map_err(|e| SendError::Temporary(format!("writing the .eml file: {e}")))
            }
        }
    }
}

/// Write `bytes` as `dir/name` whole or not at all (a temporary file renamed into place).
fn write_eml(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(name))
}

/// The `.eml` files in `dir`, newest first, at most `limit` (Admin → System).
pub(crate) fn eml_files(dir: &Path, limit: usize) -> Vec<(String, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(std::time::SystemTime, String, u64)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let meta = e.metadata().ok()?;
            (name.ends_with(".eml") && !name.starts_with('.') && meta.is_file()).then(|| {
                (
                    meta.modified().unwrap_or(std::time::UNIX_EPOCH),
                    name,
                    meta.len(),
                )
            })
        })
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    files
        .into_iter()
        .take(limit)
        .map(|(_, name, len)| (name, len))
        .collect()
}

/// The wait before attempt `attempts + 1` after a temporary failure of attempt `attempts`.
pub(crate) fn backoff(retry_after: Duration, attempts: u32) -> Duration {
    let factor = 1u32
        .checked_shl(attempts.saturating_sub(1))
        .unwrap_or(u32::MAX);
    retry_after.saturating_mul(factor).min(MAX_BACKOFF)
}

fn later(now: DateTime, by: Duration) -> DateTime {
    let millis = i64::try_from(by.as_millis()).unwrap_or(i64::MAX / 2);
    DateTime::from_millis(now.timestamp_millis().saturating_add(millis))
}

/// The filter and sort a claim uses: messages whose `due` time came (pending ones, and sending
/// ones whose claim ran out), oldest first. For `explain` in tests.
pub fn claim_query(now: DateTime) -> (Document, Document) {
    (doc! { "due": { "$lte": now } }, doc! { "due": 1 })
}

/// Claim the next due message for `owner`, or `None` when nothing is due.
pub async fn claim(db: &Db, owner: &str) -> Result<Option<OutboxMessage>, DbError> {
    let now = db.now();
    let (filter, sort) = claim_query(now);
    Ok(collection(db)
        .find_one_and_update(
            filter,
            doc! {
                "$set": {
                    "status": MailStatus::Sending.as_str(),
                    "claimed_by": owner,
                    "due": later(now, CLAIM_FOR),
                },
                "$inc": { "attempts": 1 },
            },
        )
        .sort(sort)
        .return_document(ReturnDocument::After)
        .write_concern(db.journaled_write_concern())
        .await?)
}

/// The condition that `m` is still claimed as this sender claimed it.
fn still_mine(m: &OutboxMessage) -> Document {
    doc! {
        "_id": &m.id,
        "status": MailStatus::Sending.as_str(),
        "claimed_by": m.claimed_by.as_deref().unwrap_or_default(),
        "attempts": m.attempts,
    }
}

/// Record the outcome of sending claimed message `m`. False when the claim was lost meanwhile
/// (another sender holds it now; its record stands).
pub async fn record(
    db: &Db,
    m: &OutboxMessage,
    outcome: Result<(), SendError>,
    settings: &EmailSettings,
) -> Result<bool, DbError> {
    let now = db.now();
    let update = match outcome {
        Ok(()) => doc! {
            "$set": { "status": MailStatus::Sent.as_str(), "sent": now },
            "$unset": { "due": "", "claimed_by": "" },
        },
        Err(SendError::Temporary(e)) if m.attempts < settings.max_attempts => doc! {
            "$set": {
                "status": MailStatus::Pending.as_str(),
                "due": later(now, backoff(settings.retry_after, m.attempts)),
                "last_error": e,
            },
            "$unset": { "claimed_by": "" },
        },
        Err(SendError::Temporary(e) | SendError::Permanent(e)) => doc! {
            "$set": { "status": MailStatus::Failed.as_str(), "last_error": e },
            "$unset": { "due": "", "claimed_by": "" },
        },
    };
    let mut update = update;
    let finished = update
        .get_document("$set")
        .is_ok_and(|set| set.get_str("status") != Ok(MailStatus::Pending.as_str()));
    if m.secret && finished {
        if let Ok(set) = update.get_document_mut("$set") {
            set.insert("text", crate::mail::REDACTED);
            set.insert("html", crate::mail::REDACTED);
        }
    }
    let updated = db
        .durable::<OutboxMessage>(crate::mail::COLLECTION)
        .update_one(still_mine(m), update)
        .await?;
    Ok(updated.matched_count == 1)
}

/// What one pass over the due messages did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SendReport {
    pub sent: u64,
    pub(crate) retrying: u64,
    pub(crate) failed: u64,
}

/// Send every message due now, one claim at a time, as `owner`. `shop` is the name shown in
/// `From:`.
pub async fn send_due(
    db: &Db,
    transport: &Transport,
    settings: &EmailSettings,
    owner: &str,
    shop: &str,
) -> Result<SendReport, DbError> {
    let mut report = SendReport::default();
    while let Some(m) = claim(db, owner).await? {
        let outcome = transport.send(&m, &settings.from, shop).await;
        match &outcome {
            Ok(()) => {
                report.sent += 1;
                crate::metrics::count(crate::metrics::EMAILS_SENT, 1);
            }
            Err(SendError::Temporary(e)) if m.attempts < settings.max_attempts => {
                crate::metrics::email_failure("retrying");
                tracing::warn!(message = %m.id, attempt = m.attempts, error = %e,
                    "email not sent; retrying later");
                report.retrying += 1;
            }
            Err(SendError::Temporary(e) | SendError::Permanent(e)) => {
                crate::metrics::email_failure("given_up");
                tracing::error!(message = %m.id, attempt = m.attempts, error = %e,
                    "email given up on");
                report.failed += 1;
            }
        }
        if !record(db, &m, outcome, settings).await? {
            tracing::warn!(message = %m.id, "an email's claim was taken over while sending");
        }
        if report.retrying > 0 && report.sent == 0 {
            // The server is down: leave the rest for the next pass rather than wait on each.
            break;
        }
    }
    Ok(report)
}

/// Outgoing email as configured: the settings and the transport built from them.
pub struct Mailer {
    pub(crate) settings: EmailSettings,
    pub(crate) transport: Transport,
}

impl Mailer {
    pub(crate) fn new(settings: EmailSettings) -> anyhow::Result<Mailer> {
        Ok(Mailer {
            transport: Transport::from_settings(&settings)?,
            settings,
        })
    }
}

/// Run [`send_due`] every `email.send_every_ms` until the task is aborted. `None` when sending
/// is turned off (`email.send_every_ms = 0`).
pub(crate) fn spawn(db: Db, mailer: Arc<Mailer>) -> Option<tokio::task::JoinHandle<()>> {
    if mailer.settings.send_every.is_zero() {
        return None;
    }
    let owner = format!("{}/mail", lease::this_instance());
    Some(tokio::spawn(async move {
        let settings = &mailer.settings;
        let mut ticks = tokio::time::interval(settings.send_every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let shop = crate::db::site::load(&db)
                .await
                .map(|s| s.name)
                .unwrap_or_else(|_| "Bazaar".to_string());
            let started = std::time::Instant::now();
            let pass = send_due(&db, &mailer.transport, settings, &owner, &shop)
                .instrument(tracing::info_span!("job", name = "send_email"))
                .await;
            let error = pass.as_ref().err().map(ToString::to_string);
            crate::metrics::job_run("send_email", error.as_deref(), started.elapsed());
            match pass {
                Ok(report) if report != SendReport::default() => {
                    tracing::info!(?report, "outbox pass");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "outbox pass failed; retrying later"),
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_with_each_failure_up_to_an_hour() {
        let base = Duration::from_secs(30);
        assert_eq!(backoff(base, 1), Duration::from_secs(30));
        assert_eq!(backoff(base, 2), Duration::from_secs(60));
        assert_eq!(backoff(base, 4), Duration::from_secs(240));
        assert_eq!(backoff(base, 20), MAX_BACKOFF);
        assert_eq!(backoff(base, 200), MAX_BACKOFF);
    }
}
