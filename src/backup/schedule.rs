//! Scheduled backups (`backup.every_hours`, `backup.keep`, `backup.dir`), shared by every
//! instance on one database: each instance checks often whether a backup is due (the `backups`
//! document, see `record`), and the one that takes the `backup:scheduled` lease writes it, so
//! one backup is taken per period whichever instances run. A backup is written under a
//! `.partial-` name, read back, marked complete and only then renamed to its
//! `backup-<sequence>-…` name; rotation then deletes the oldest completed ones beyond `keep` (see
//! `rotation`). Admin → System shows the last outcome of any instance ([`BackupMonitor::shared_status`]).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context;

use crate::config::BackupSettings;
use crate::db::lease::{self, Lease};
use crate::db::Db;

use super::record::{self, FailureDoc, ScheduleDoc, SuccessDoc};
use super::rotation::{self, Marker};
use super::{backup_to, human_bytes, private, BackupReport};

/// The lease whose holder writes the scheduled backup.
pub(crate) const LEASE: &str = "backup:scheduled";
/// How long the lease is taken for; renewed every [`RENEW_EVERY`] while a backup runs, so an
/// instance that dies mid-backup blocks the others for at most this long.
const RUN_LEASE: Duration = Duration::from_secs(120);
const RENEW_EVERY: Duration = Duration::from_secs(30);
/// After a failure the next attempt (by any instance) is due this soon, or after one period if
/// that is shorter: a full disk should not wait a day for the next try, nor be retried in a loop.
const RETRY_AFTER: Duration = Duration::from_secs(15 * 60);

/// A backup period as the admin reads it, in the largest unit that divides it.
pub(crate) fn period_text(every: Duration) -> String {
    let secs = every.as_secs();
    if secs >= 3600 && secs.is_multiple_of(3600) {
        format!("{} h", secs / 3600)
    } else if secs >= 60 && secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

/// What the admin sees about scheduled backups.
#[derive(Debug, Clone)]
pub struct BackupStatus {
    /// Scheduled backups are on (`backup.every_hours` > 0).
    pub(crate) enabled: bool,
    /// The period for people: "24 h", "90 min", "5 s".
    pub(crate) every: String,
    pub(crate) keep: usize,
    pub(crate) dir: String,
    /// The newest verified backup: when it was taken and its data size.
    pub last_success: Option<(String, String)>,
    /// The newest failure after that success, with its message.
    pub(crate) last_failure: Option<(String, String)>,
}

impl BackupStatus {
    /// Something the shop owner should act on: backups off, or the last attempt failed.
    pub fn warning(&self) -> Option<String> {
        if !self.enabled {
            return Some(
                "Scheduled backups are off: set backup.every_hours (and backup.dir) to turn them on."
                    .to_string(),
            );
        }
        if let Some((when, message)) = &self.last_failure {
            return Some(format!("The last backup failed at {when}: {message}"));
        }
        if self.last_success.is_none() {
            return Some("No backup has been written yet.".to_string());
        }
        None
    }
}

/// This process's own outcomes: what the admin sees when the database cannot be read.
#[derive(Debug, Default)]
struct Outcomes {
    success: Option<(bson::DateTime, u64)>,
    failure: Option<(bson::DateTime, String)>,
}

/// Scheduled backups' settings and outcomes, shared by the task and the admin pages.
#[derive(Debug)]
pub struct BackupMonitor {
    settings: BackupSettings,
    /// Who this scheduler is in the lease and the records: [`lease::this_instance`] in a server.
    owner: String,
    outcomes: Mutex<Outcomes>,
}

fn when(t: &bson::DateTime) -> String {
    t.try_to_rfc3339_string()
        .unwrap_or_else(|_| t.to_string())
        .replace('T', " ")
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

/// How often an instance checks whether a backup is due: a twelfth of the period, between 100 ms
/// and 5 minutes, so a backup starts at most that late whichever instance is up.
pub(crate) fn check_interval(every: Duration) -> Duration {
    (every / 12).clamp(Duration::from_millis(100), Duration::from_secs(300))
}

/// The host part of an instance name (`host/pid/id`): instances on one host share a clock.
fn host_of(instance: &str) -> &str {
    instance.split('/').next().unwrap_or(instance)
}

/// Whether a backup is due at `now` for `me`. Normally when `next_due` has passed. A `next_due`
/// more than a period ahead can only come from a clock that has since been stepped back: when
/// it was this host's own clock the backup is due now (else a clock stepped back a month would
/// stop backups for a month); another host's clock ahead of ours is left to that host, whose
/// clock says when.
pub(crate) fn is_due(state: &ScheduleDoc, now: bson::DateTime, every: Duration, me: &str) -> bool {
    let Some(due) = state.next_due else {
        return true;
    };
    let (now, due) = (now.timestamp_millis(), due.timestamp_millis());
    if now >= due {
        return true;
    }
    let set_here = state
        .next_due_by
        .as_deref()
        .is_some_and(|by| host_of(by) == host_of(me));
    due.saturating_sub(now) > millis(every) && set_here
}

impl BackupMonitor {
    /// A monitor for this process that starts from the newest complete backup already in
    /// `backup.dir`.
    pub fn new(settings: BackupSettings) -> Arc<BackupMonitor> {
        BackupMonitor::with_owner(settings, lease::this_instance())
    }

    /// A monitor with its own name in the lease and records: several schedulers in one process
    /// (tests) behave as several instances.
    pub fn with_owner(settings: BackupSettings, owner: &str) -> Arc<BackupMonitor> {
        let success = rotation::newest(&settings.dir).and_then(|backup| {
            // Only the manifest: reading every file back would slow start-up on a big shop,
            // and the backup was verified when it was written.
            let manifest = docstore::dump::read_manifest(&backup.dir).ok()??;
            Some((
                bson::DateTime::from_millis(manifest.created_at_ms),
                manifest.bytes(),
            ))
        });
        Arc::new(BackupMonitor {
            settings,
            owner: owner.to_string(),
            outcomes: Mutex::new(Outcomes {
                success,
                failure: None,
            }),
        })
    }

    fn outcomes(&self) -> MutexGuard<'_, Outcomes> {
        // The outcomes stay meaningful even if a holder panicked.
        self.outcomes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn base_status(&self) -> BackupStatus {
        BackupStatus {
            enabled: self.settings.every.is_some(),
            every: self.settings.every.map_or_else(String::new, period_text),
            keep: self.settings.keep,
            dir: self.settings.dir.display().to_string(),
            last_success: None,
            last_failure: None,
        }
    }

    /// This process's own view: its last outcomes, or the newest backup found on disk at start.
    pub fn status(&self) -> BackupStatus {
        let outcomes = self.outcomes();
        BackupStatus {
            last_success: outcomes
                .success
                .as_ref()
                .map(|(t, bytes)| (when(t), human_bytes(*bytes))),
            last_failure: outcomes
                .failure
                .as_ref()
                .filter(|(t, _)| outcomes.success.as_ref().is_none_or(|(s, _)| t > s))
                .map(|(t, message)| (when(t), message.clone())),
            ..self.base_status()
        }
    }

    /// What every instance on the database did: the last backup and failure of any of them.
    /// Falls back to [`Self::status`] when the database cannot be read, and to the newest
    /// backup on disk when the database has no record yet (backups from before the records).
    pub async fn shared_status(&self, db: &Db) -> BackupStatus {
        let shared = match record::load(db).await {
            Ok(shared) => shared,
            Err(e) => {
                tracing::warn!("cannot read the shared backup status: {e}");
                return self.status();
            }
        };
        let local = self.status();
        BackupStatus {
            last_success: match &shared.last_success {
                Some(s) => Some((when(&s.taken_at), human_bytes(s.bytes.max(0) as u64))),
                None => local.last_success,
            },
            last_failure: shared.current_failure().map(|f| {
                (
                    when(&f.at),
                    format!("{} (instance {})", f.message, f.instance),
                )
            }),
            ..self.base_status()
        }
    }

    /// The scheduler's check: when a backup is due and no other instance is writing one, write
    /// it (`Some`); `None` when there was nothing to do. Errors are recorded for the admin.
    pub async fn tick(&self, db: &Db) -> anyhow::Result<Option<BackupReport>> {
        let result = self.tick_inner(db).await;
        if let Err(e) = &result {
            self.note_failure(&format!("{e:#}"));
        }
        result
    }

    async fn tick_inner(&self, db: &Db) -> anyhow::Result<Option<BackupReport>> {
        let Some(every) = self.settings.every else {
            return Ok(None);
        };
        // The database's clock, which the lease reads too (and tests step).
        let due = |state: &ScheduleDoc| is_due(state, db.now(), every, &self.owner);
        let reading = "cannot read the backup schedule from the database";
        if !due(&record::load(db).await.context(reading)?) {
            return Ok(None);
        }
        let taken = lease::try_take(db, LEASE, &self.owner, RUN_LEASE)
            .await
            .context("cannot take the backup lease")?;
        let Some(lease) = taken else {
            // Another instance is writing this period's backup.
            return Ok(None);
        };
        // Read again under the lease: another instance may have finished one since.
        let due_now = match record::load(db).await {
            Ok(state) => due(&state),
            Err(e) => {
                let _ = lease.release(db).await;
                return Err(anyhow::Error::new(e).context(reading));
            }
        };
        if !due_now {
            let _ = lease.release(db).await;
            return Ok(None);
        }
        self.run_under_lease(db, lease).await.map(Some)
    }

    /// Write one scheduled backup now, due or not (another instance's running backup still
    /// comes first: then this fails), and rotate. The outcome is recorded for the admin.
    pub async fn run_once(&self, db: &Db) -> anyhow::Result<BackupReport> {
        let taken = lease::try_take(db, LEASE, &self.owner, RUN_LEASE).await;
        let lease = match taken {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                let message = "another instance is writing a scheduled backup right now";
                return Err(anyhow::anyhow!(message));
            }
            Err(e) => {
                let e = anyhow::Error::new(e).context("cannot take the backup lease");
                self.note_failure(&format!("{e:#}"));
                return Err(e);
            }
        };
        self.run_under_lease(db, lease).await
    }

    fn note_failure(&self, message: &str) {
        tracing::error!("scheduled backup failed: {message}");
        self.outcomes().failure = Some((bson::DateTime::now(), message.to_string()));
    }

    /// Write, check, rename, rotate and record, holding (and renewing) the lease throughout.
    async fn run_under_lease(&self, db: &Db, mut lease: Lease) -> anyhow::Result<BackupReport> {
        let started = db.now();
        let written = renewing(db, &mut lease, self.write_backup(db)).await;
        let result = match written {
            Ok((report, sequence, name)) => {
                tracing::info!("{}", report.summary());
                // Fencing: a holder that stalled past its lease leaves rotation to the new one.
                match lease.still_held(db).await {
                    Ok(true) => {
                        if let Some(root) = report.dir.parent() {
                            rotation::rotate(root, self.settings.keep, &report.dir);
                        }
                    }
                    Ok(false) => tracing::warn!(
                        "the backup lease was taken over while writing {}: not rotating",
                        report.dir.display()
                    ),
                    Err(e) => tracing::warn!("cannot check the backup lease, not rotating: {e}"),
                }
                let success = SuccessDoc {
                    sequence,
                    name,
                    instance: self.owner.clone(),
                    taken_at: report.taken_at,
                    bytes: i64::try_from(report.bytes).unwrap_or(i64::MAX),
                    documents: i64::try_from(report.documents).unwrap_or(i64::MAX),
                };
                if let Err(e) = record::record_success(db, &success).await {
                    tracing::warn!("cannot record the backup in the database: {e}");
                }
                if let Some(every) = self.settings.every {
                    self.set_next_due(db, started, every).await;
                }
                self.outcomes().success = Some((report.taken_at, report.bytes));
                Ok(report)
            }
            Err((e, sequence)) => {
                let message = format!("{e:#}");
                self.note_failure(&message);
                let failure = FailureDoc {
                    sequence: sequence.unwrap_or(0),
                    instance: self.owner.clone(),
                    at: db.now(),
                    message,
                };
                if let Err(e) = record::record_failure(db, &failure).await {
                    tracing::warn!("cannot record the backup failure in the database: {e}");
                }
                if let Some(every) = self.settings.every {
                    self.set_next_due(db, db.now(), every.min(RETRY_AFTER))
                        .await;
                }
                Err(e)
            }
        };
        if let Err(e) = lease.release(db).await {
            tracing::warn!("cannot release the backup lease (it expires by itself): {e}");
        }
        result
    }

    async fn set_next_due(&self, db: &Db, from: bson::DateTime, after: Duration) {
        let due =
            bson::DateTime::from_millis(from.timestamp_millis().saturating_add(millis(after)));
        if let Err(e) = record::set_next_due(db, due, &self.owner).await {
            tracing::warn!("cannot record when the next backup is due: {e}");
        }
    }

    /// `backup.dir`, absolute (the store writes backups by absolute path).
    fn root(&self) -> anyhow::Result<PathBuf> {
        std::path::absolute(&self.settings.dir).with_context(|| {
            format!(
                "cannot resolve the backup directory {}",
                self.settings.dir.display()
            )
        })
    }

    /// Write a verified backup under `.partial-<name>`, mark it complete, rename it to `<name>`.
    /// On failure only the `.partial-` directory this call created is removed. Returns the
    /// report, the sequence and the name; on failure the sequence when one was given.
    async fn write_backup(
        &self,
        db: &Db,
    ) -> Result<(BackupReport, i64, String), (anyhow::Error, Option<i64>)> {
        let root = self.root().map_err(|e| (e, None))?;
        // The sequence first, so that every later failure has one and shows as the latest.
        let sequence = record::next_sequence(db, rotation::highest_sequence(&root))
            .await
            .context("cannot get a backup sequence number from the database")
            .map_err(|e| (e, None))?;
        private::create_dir_all(&root)
            .with_context(|| format!("cannot create {}", root.display()))
            .map_err(|e| (e, Some(sequence)))?;
        for stale in rotation::foreign_partials(&root, &[]) {
            let stale_sequence = stale
                .file_name()
                .and_then(|n| rotation::sequence_in_name(&n.to_string_lossy()));
            if stale_sequence.is_none_or(|s| s < sequence) {
                tracing::warn!(
                    "{} looks left over from an interrupted backup; delete it when no backup is \
                     running",
                    stale.display()
                );
            }
        }
        let name = rotation::backup_name(
            sequence,
            bson::DateTime::now().timestamp_millis(),
            &self.owner,
        );
        let partial = root.join(rotation::partial_name(&name));
        private::create_new_dir(&partial)
            .with_context(|| format!("cannot create {}", partial.display()))
            .map_err(|e| (e, Some(sequence)))?;
        match self
            .fill_and_publish(db, &root, &partial, &name, sequence)
            .await
        {
            Ok(report) => Ok((report, sequence, name)),
            Err(e) => {
                // Ours alone: created above with a name nobody else is given.
                if let Err(cleanup) = std::fs::remove_dir_all(&partial) {
                    tracing::warn!("cannot remove {}: {cleanup}", partial.display());
                }
                Err((e, Some(sequence)))
            }
        }
    }

    async fn fill_and_publish(
        &self,
        db: &Db,
        root: &Path,
        partial: &Path,
        name: &str,
        sequence: i64,
    ) -> anyhow::Result<BackupReport> {
        let mut report = backup_to(db, partial).await?;
        Marker::new(
            sequence,
            &self.owner,
            report.taken_at.timestamp_millis(),
            report.bytes,
            report.documents,
        )
        .write(partial)
        .with_context(|| format!("cannot mark {} complete", partial.display()))?;
        let done = root.join(name);
        std::fs::rename(partial, &done)
            .with_context(|| format!("cannot rename {} to {name}", partial.display()))?;
        if let Err(e) = std::fs::File::open(root).and_then(|d| d.sync_all()) {
            tracing::warn!("cannot sync {}: {e}", root.display());
        }
        report.dir = done;
        Ok(report)
    }
}

/// Run `work` while renewing `lease` every [`RENEW_EVERY`]; a lost lease is only logged, since
/// the work's writes are its own and the steps it must not share check [`Lease::still_held`].
async fn renewing<T>(db: &Db, lease: &mut Lease, work: impl Future<Output = T>) -> T {
    tokio::pin!(work);
    let mut renew = tokio::time::interval(RENEW_EVERY);
    renew.tick().await;
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = renew.tick() => match lease.renew(db, RUN_LEASE).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!("the backup lease expired and was taken over"),
                Err(e) => tracing::warn!("cannot renew the backup lease: {e}"),
            },
        }
    }
}

/// Check for a due backup every [`check_interval`] until aborted; `None` when scheduled backups
/// are off. The first check is at start-up, so a new setup shows a backup at once.
pub(crate) fn spawn(db: Db, monitor: Arc<BackupMonitor>) -> Option<tokio::task::JoinHandle<()>> {
    let every = monitor.settings.every?;
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(check_interval(every));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let _ = monitor.tick(&db).await;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn at(millis: i64) -> bson::DateTime {
        bson::DateTime::from_millis(millis)
    }

    fn due_at(millis: i64, by: &str) -> ScheduleDoc {
        ScheduleDoc {
            next_due: Some(at(millis)),
            next_due_by: Some(by.to_string()),
            ..ScheduleDoc::default()
        }
    }

    #[test]
    fn a_backup_is_due_when_none_was_ever_scheduled_or_its_time_has_come() {
        let me = "shop1/10/aa";
        assert!(is_due(&ScheduleDoc::default(), at(0), HOUR, me));
        let state = due_at(10_000_000, "shop2/11/bb");
        assert!(!is_due(&state, at(9_999_999), HOUR, me));
        assert!(is_due(&state, at(10_000_000), HOUR, me));
    }

    #[test]
    fn a_clock_stepped_back_past_a_period_does_not_stop_this_hosts_backups() {
        let state = due_at(100 * 3_600_000, "shop1/10/aa");
        // A day behind the time this host set: its clock went back; back up now.
        let a_day_earlier = at(76 * 3_600_000);
        assert!(is_due(&state, a_day_earlier, HOUR, "shop1/99/cc"));
        // Another host's clock being ahead is that host's business: it says when.
        assert!(!is_due(&state, a_day_earlier, HOUR, "shop2/10/aa"));
        // Within a period: simply not yet due.
        assert!(!is_due(
            &state,
            at(100 * 3_600_000 - 60_000),
            HOUR,
            "shop1/10/aa"
        ));
    }

    #[test]
    fn the_check_interval_is_a_twelfth_of_the_period_within_bounds() {
        assert_eq!(check_interval(HOUR), Duration::from_secs(300));
        assert_eq!(
            check_interval(Duration::from_secs(60)),
            Duration::from_secs(5)
        );
        assert_eq!(
            check_interval(Duration::from_millis(10)),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn off_backups_and_failures_are_warnings() {
        let monitor = BackupMonitor::new(BackupSettings {
            every: None,
            keep: 3,
            dir: PathBuf::from("/nonexistent/backups"),
        });
        assert!(monitor.status().warning().unwrap().contains("off"));
        let monitor = BackupMonitor::new(BackupSettings {
            every: Some(HOUR),
            keep: 3,
            dir: PathBuf::from("/nonexistent/backups"),
        });
        assert!(monitor.status().warning().unwrap().contains("No backup"));
        monitor.note_failure("disk full");
        let warning = monitor.status().warning().unwrap();
        assert!(warning.contains("disk full"), "{warning}");
    }

    #[test]
    fn a_failure_before_the_last_success_is_not_shown() {
        let failure = |sequence| FailureDoc {
            sequence,
            instance: "a".into(),
            at: at(0),
            message: "disk full".into(),
        };
        let mut state = ScheduleDoc {
            last_success: Some(SuccessDoc {
                sequence: 5,
                name: "backup-5".into(),
                instance: "b".into(),
                taken_at: at(0),
                bytes: 1,
                documents: 1,
            }),
            last_failure: Some(failure(4)),
            ..ScheduleDoc::default()
        };
        assert!(state.current_failure().is_none());
        state.last_failure = Some(failure(6));
        assert_eq!(state.current_failure().map(|f| f.sequence), Some(6));
    }
}
