//! Scheduled backups (`backup.every_hours`, `backup.keep`, `backup.dir`): a background task
//! writes a verified backup into a new `backup-<time>` directory, then deletes the oldest ones
//! beyond `keep`. The last outcome is kept for the admin (see [`BackupMonitor::status`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::sync::{Mutex, MutexGuard};

use crate::config::BackupSettings;
use crate::db::Db;

use super::{backup_to, human_bytes, BackupReport};

/// Name prefix of scheduled backup directories; the rest is the UTC time, so names sort by age.
const PREFIX: &str = "backup-";

/// What the admin sees about scheduled backups.
#[derive(Debug, Clone)]
pub struct BackupStatus {
    /// Scheduled backups are on (`backup.every_hours` > 0).
    pub enabled: bool,
    pub every_hours: u64,
    pub keep: usize,
    pub dir: String,
    /// The newest verified backup: when it was taken and its data size.
    pub last_success: Option<(String, String)>,
    /// The newest failure after that success, with its message.
    pub last_failure: Option<(String, String)>,
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

#[derive(Debug, Default)]
struct Outcomes {
    success: Option<(bson::DateTime, u64)>,
    failure: Option<(bson::DateTime, String)>,
}

/// Scheduled backups' settings and outcomes, shared by the task and the admin pages.
#[derive(Debug)]
pub struct BackupMonitor {
    settings: BackupSettings,
    outcomes: Mutex<Outcomes>,
}

impl BackupMonitor {
    /// A monitor that starts from the newest complete backup already in `backup.dir`.
    pub fn new(settings: BackupSettings) -> Arc<BackupMonitor> {
        let success = newest_backup(&settings.dir).and_then(|dir| {
            // Only the manifest: reading every file back would slow start-up on a big shop,
            // and the backup was verified when it was written.
            let manifest = docstore::dump::read_manifest(&dir).ok()??;
            Some((
                bson::DateTime::from_millis(manifest.created_at_ms),
                manifest.bytes(),
            ))
        });
        Arc::new(BackupMonitor {
            settings,
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

    /// The status for the admin.
    pub fn status(&self) -> BackupStatus {
        let outcomes = self.outcomes();
        let when = |t: &bson::DateTime| {
            t.try_to_rfc3339_string()
                .unwrap_or_else(|_| t.to_string())
                .replace('T', " ")
        };
        BackupStatus {
            enabled: self.settings.every.is_some(),
            every_hours: self.settings.every.map_or(0, |d| d.as_secs() / 3600),
            keep: self.settings.keep,
            dir: self.settings.dir.display().to_string(),
            last_success: outcomes
                .success
                .as_ref()
                .map(|(t, bytes)| (when(t), human_bytes(*bytes))),
            last_failure: outcomes
                .failure
                .as_ref()
                .filter(|(t, _)| outcomes.success.as_ref().is_none_or(|(s, _)| t > s))
                .map(|(t, message)| (when(t), message.clone())),
        }
    }

    /// Write one scheduled backup now and rotate; the outcome is recorded for [`Self::status`].
    pub async fn run_once(&self, db: &Db) -> anyhow::Result<BackupReport> {
        let result = self.backup_and_rotate(db).await;
        let mut outcomes = self.outcomes();
        match &result {
            Ok(report) => outcomes.success = Some((report.taken_at, report.bytes)),
            Err(e) => {
                tracing::error!("scheduled backup failed: {e:#}");
                outcomes.failure = Some((bson::DateTime::now(), format!("{e:#}")));
            }
        }
        result
    }

    async fn backup_and_rotate(&self, db: &Db) -> anyhow::Result<BackupReport> {
        let root = &self.settings.dir;
        std::fs::create_dir_all(root)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", root.display()))?;
        let name = format!(
            "{PREFIX}{}",
            chrono_like_stamp(bson::DateTime::now().timestamp_millis())
        );
        let dir = root.join(name);
        match backup_to(db, &dir).await {
            Ok(report) => {
                tracing::info!("{}", report.summary());
                rotate(root, self.settings.keep);
                Ok(report)
            }
            Err(e) => {
                // A half-written backup must never be taken for one.
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }
}

/// `20261122T230501.123Z`, sortable and safe in a file name.
fn chrono_like_stamp(millis: i64) -> String {
    let t = bson::DateTime::from_millis(millis).to_chrono();
    t.format("%Y%m%dT%H%M%S%.3fZ").to_string()
}

/// Complete scheduled backups (those with a manifest), oldest first.
fn complete_backups(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(PREFIX))
                && p.join(docstore::dump::MANIFEST_FILE).is_file()
        })
        .collect();
    dirs.sort();
    dirs
}

fn newest_backup(root: &Path) -> Option<PathBuf> {
    complete_backups(root).pop()
}

/// Delete the oldest complete backups beyond `keep`.
fn rotate(root: &Path, keep: usize) {
    let backups = complete_backups(root);
    let excess = backups.len().saturating_sub(keep);
    for old in &backups[..excess] {
        match std::fs::remove_dir_all(old) {
            Ok(()) => tracing::info!("deleted old backup {}", old.display()),
            Err(e) => tracing::warn!("cannot delete old backup {}: {e}", old.display()),
        }
    }
}

/// Run scheduled backups every `backup.every_hours` until aborted; `None` when they are off.
pub fn spawn(db: Db, monitor: Arc<BackupMonitor>) -> Option<tokio::task::JoinHandle<()>> {
    let every = monitor.settings.every?;
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate: a backup right after start-up shows the setup works.
        loop {
            ticks.tick().await;
            let _ = monitor.run_once(&db).await;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_the_newest_complete_backups_and_ignores_other_files() {
        let root = tempfile::tempdir().unwrap();
        for stamp in [
            "20260101T000000.000Z",
            "20260102T000000.000Z",
            "20260103T000000.000Z",
        ] {
            let dir = root.path().join(format!("{PREFIX}{stamp}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join(docstore::dump::MANIFEST_FILE), "{}").unwrap();
        }
        std::fs::create_dir(root.path().join("my-own-copy")).unwrap();
        rotate(root.path(), 2);
        let mut left: Vec<String> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec![
                "backup-20260102T000000.000Z",
                "backup-20260103T000000.000Z",
                "my-own-copy"
            ]
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
            every: Some(std::time::Duration::from_secs(3600)),
            keep: 3,
            dir: PathBuf::from("/nonexistent/backups"),
        });
        monitor.outcomes().failure = Some((bson::DateTime::now(), "disk full".into()));
        let warning = monitor.status().warning().unwrap();
        assert!(warning.contains("disk full"), "{warning}");
    }
}
