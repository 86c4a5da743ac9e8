//! Flash messages: one-time notices stored in the session by a POST handler and shown by the
//! next page (Post/Redirect/Get).

use actix_session::Session;
use serde::{Deserialize, Serialize};

const SESSION_KEY: &str = "flash";
/// A runaway loop of redirects must not grow the cookie past its 4 KiB limit.
const MAX_PENDING: usize = 5;
/// Longest message kept (characters); longer ones are cut with an ellipsis.
const MAX_MESSAGE_CHARS: usize = 300;
/// Bytes the session's JSON may reach with its flash messages. Browsers drop cookies over
/// 4096 bytes and the cookie store refuses to write them; encryption and base64 add about a
/// third, so this leaves room for the rest of the session. Keeping under it means storing a
/// notice can never make the response fail after the change it reports was made.
const SESSION_BUDGET: usize = 2_400;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Level {
    Success,
    Info,
    Warning,
    Error,
}

impl Level {
    /// CSS modifier and ARIA role hint in templates.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Level::Success => "success",
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Flash {
    pub(crate) level: Level,
    pub(crate) message: String,
}

/// Queue a message for the next page this session sees. Older messages make room for newer
/// ones, so the session stays within its cookie's size whatever is queued.
pub(crate) fn push(session: &Session, level: Level, message: impl Into<String>) {
    let mut pending: Vec<Flash> = session.get(SESSION_KEY).ok().flatten().unwrap_or_default();
    pending.push(Flash {
        level,
        message: truncated(message.into(), MAX_MESSAGE_CHARS),
    });
    let others: usize = session
        .entries()
        .iter()
        .filter(|(key, _)| key.as_str() != SESSION_KEY)
        .map(|(key, value)| key.len() + value.len() + 6)
        .sum();
    let budget = SESSION_BUDGET.saturating_sub(others + SESSION_KEY.len() + 6);
    let pending = fit(pending, budget);
    if let Err(e) = session.insert(SESSION_KEY, pending) {
        tracing::warn!(error = %e, "could not store a flash message in the session");
    }
}

/// The newest messages (at most [`MAX_PENDING`]) whose JSON fits in `budget` bytes.
fn fit(mut pending: Vec<Flash>, budget: usize) -> Vec<Flash> {
    while pending.len() > MAX_PENDING {
        pending.remove(0);
    }
    while !pending.is_empty() && json_len(&pending) > budget {
        if pending.len() == 1 {
            // A single message too large even alone: shorten it until it fits.
            let message = &pending[0].message;
            let shorter = message.chars().count() / 2;
            if shorter < 20 {
                pending.clear();
            } else {
                pending[0].message = truncated(message.clone(), shorter);
            }
        } else {
            pending.remove(0);
        }
    }
    pending
}

fn json_len(pending: &[Flash]) -> usize {
    serde_json::to_string(pending).map_or(usize::MAX, |json| json.len())
}

fn truncated(message: String, max_chars: usize) -> String {
    if message.chars().count() <= max_chars {
        return message;
    }
    let mut cut: String = message.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Take the pending messages, so each is shown once.
pub(crate) fn take(session: &Session) -> Vec<Flash> {
    // Removing marks the session changed (re-encrypted and sent back as a new cookie), so only
    // when there is something to take: a plain page view leaves the cookie alone.
    if !session.contains_key(SESSION_KEY) {
        return Vec::new();
    }
    match session.remove_as::<Vec<Flash>>(SESSION_KEY) {
        Some(Ok(messages)) => messages,
        // A cookie written by another version: drop it rather than fail the page.
        Some(Err(_)) | None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flash(message: &str) -> Flash {
        Flash {
            level: Level::Success,
            message: message.to_string(),
        }
    }

    #[test]
    fn long_messages_are_cut_with_an_ellipsis() {
        let cut = truncated("x".repeat(1000), MAX_MESSAGE_CHARS);
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(truncated("short".into(), 10), "short");
    }

    #[test]
    fn only_the_newest_messages_that_fit_the_budget_are_kept() {
        let many: Vec<Flash> = (0..10)
            .map(|i| flash(&format!("{i}{}", "y".repeat(290))))
            .collect();
        let kept = fit(many, 1_000);
        assert!(json_len(&kept) <= 1_000);
        assert!(!kept.is_empty());
        assert!(
            kept.last().is_some_and(|f| f.message.starts_with('9')),
            "newest kept"
        );
        let alone = fit(vec![flash(&"z".repeat(300))], 100);
        assert!(json_len(&alone) <= 100);
    }
}
