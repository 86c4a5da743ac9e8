//! Flash messages: one-time notices stored in the session by a POST handler and shown by the
//! next page (Post/Redirect/Get).

use actix_session::Session;
use serde::{Deserialize, Serialize};

const SESSION_KEY: &str = "flash";
/// A runaway loop of redirects must not grow the cookie past its 4 KiB limit.
const MAX_PENDING: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Success,
    Info,
    Warning,
    Error,
}

impl Level {
    /// CSS modifier and ARIA role hint in templates.
    pub fn as_str(&self) -> &'static str {
        match self {
            Level::Success => "success",
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flash {
    pub level: Level,
    pub message: String,
}

/// Queue a message for the next page this session sees.
pub fn push(session: &Session, level: Level, message: impl Into<String>) {
    let mut pending: Vec<Flash> = session.get(SESSION_KEY).ok().flatten().unwrap_or_default();
    if pending.len() >= MAX_PENDING {
        pending.remove(0);
    }
    pending.push(Flash {
        level,
        message: message.into(),
    });
    if let Err(e) = session.insert(SESSION_KEY, pending) {
        tracing::warn!(error = %e, "could not store a flash message in the session");
    }
}

/// Take the pending messages, so each is shown once.
pub fn take(session: &Session) -> Vec<Flash> {
    match session.remove_as::<Vec<Flash>>(SESSION_KEY) {
        Some(Ok(messages)) => messages,
        // A cookie written by another version: drop it rather than fail the page.
        Some(Err(_)) | None => Vec::new(),
    }
}
