//! Counting the commands the app sends to the database, so the number of round trips a page
//! costs is visible: tests pin it per page (a regression fails a test instead of slowing a
//! benchmark), and at `debug` level each command is logged with its collection.
//!
//! Off by default (`log.database_commands`, and `metrics.token` for the command metrics): the
//! driver then builds no command events at all.
//! On, it copies every command and reply into an event, which costs more than the count is
//! worth on a busy site.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;

/// One command as counted: its name and the collection (or other target) it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub name: String,
    pub target: String,
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.target)
    }
}

/// Commands sent so far, shared by every clone of the database handle.
#[derive(Default)]
pub struct CommandLog {
    enabled: AtomicBool,
    total: AtomicU64,
    /// The commands themselves, while [`CommandLog::record`] is on (tests).
    recorded: Mutex<Option<Vec<Command>>>,
}

impl CommandLog {
    /// A log for a client that reports its commands (`log.database_commands`).
    pub(crate) fn enabled() -> Arc<CommandLog> {
        let log = CommandLog::default();
        log.enabled.store(true, Ordering::Relaxed);
        Arc::new(log)
    }

    /// True when commands are counted at all.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Start keeping each command (dropping any kept before); [`CommandLog::take`] returns them.
    pub fn record(&self) {
        if let Ok(mut recorded) = self.recorded.lock() {
            *recorded = Some(Vec::new());
        }
    }

    /// The commands kept since [`CommandLog::record`], which goes on recording afresh.
    pub fn take(&self) -> Vec<Command> {
        match self.recorded.lock() {
            Ok(mut recorded) => recorded.as_mut().map(std::mem::take).unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// The driver's event handler feeding this log and, when metrics are kept, the database
    /// command metrics (`crate::metrics::db_command`).
    pub(crate) fn handler(self: &Arc<Self>) -> EventHandler<CommandEvent> {
        let log = Arc::clone(self);
        EventHandler::callback(move |event| match event {
            CommandEvent::Started(started) if log.is_enabled() => {
                log.total.fetch_add(1, Ordering::Relaxed);
                let target = started
                    .command
                    .iter()
                    .next()
                    .and_then(|(_, v)| v.as_str())
                    .unwrap_or("")
                    .to_string();
                tracing::debug!(command = %started.command_name, %target, "database command");
                if let Ok(mut recorded) = log.recorded.lock() {
                    if let Some(list) = recorded.as_mut() {
                        list.push(Command {
                            name: started.command_name,
                            target,
                        });
                    }
                }
            }
            CommandEvent::Succeeded(done) => {
                crate::metrics::db_command(&done.command_name, true, done.duration);
            }
            CommandEvent::Failed(failed) => {
                crate::metrics::db_command(&failed.command_name, false, failed.duration);
            }
            _ => {}
        })
    }
}
