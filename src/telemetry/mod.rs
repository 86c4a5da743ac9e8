//! Logging: the `tracing` subscriber, writing text or JSON lines (the request-logging
//! middleware is `web::request_log`); progress of the long commands ([`progress`]).

pub(crate) mod progress;

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::Mutex;

use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// How log lines are written (`log.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line an event (coloured on a terminal).
    Text,
    /// One JSON object a line, with the fields of its spans (a request's id) on every line.
    Json,
}

/// Install the global subscriber. `RUST_LOG`, when set, wins over `log.level`. Calling it twice
/// (tests) is harmless.
pub fn init(level: &str, format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr: stdout carries the command's output (the address, a password hash).
    let lines = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(RecentProblems);
    let _ = match format {
        LogFormat::Text => registry
            .with(lines.with_ansi(std::io::stderr().is_terminal()))
            .try_init(),
        // Every line carries the fields of the spans it happened in (a request's id, a job's
        // name), in `span` and `spans`, so one request's lines can be selected.
        LogFormat::Json => registry
            .with(lines.json().with_current_span(true).with_span_list(true))
            .try_init(),
    };
}

/// One warning or error logged by this process, as Admin → System lists them.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    pub(crate) at: std::time::SystemTime,
    pub(crate) level: tracing::Level,
    /// The message and the event's fields, `key=value`, as one line.
    pub(crate) text: String,
}

/// How many recent problems are kept.
const PROBLEMS_KEPT: usize = 50;

static PROBLEMS: Mutex<VecDeque<Problem>> = Mutex::new(VecDeque::new());

/// The warnings and errors this process logged most recently, newest first.
pub(crate) fn recent_problems() -> Vec<Problem> {
    PROBLEMS
        .lock()
        .map(|p| p.iter().rev().cloned().collect())
        .unwrap_or_default()
}

/// A layer keeping the last [`PROBLEMS_KEPT`] warnings and errors in memory.
struct RecentProblems;

impl<S: tracing::Subscriber> Layer<S> for RecentProblems {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let level = *event.metadata().level();
        if level > tracing::Level::WARN {
            return;
        }
        let mut text = TextOf::default();
        event.record(&mut text);
        if let Ok(mut problems) = PROBLEMS.lock() {
            if problems.len() == PROBLEMS_KEPT {
                problems.pop_front();
            }
            problems.push_back(Problem {
                at: std::time::SystemTime::now(),
                level,
                text: text.0,
            });
        }
    }
}

/// An event's message followed by its other fields.
#[derive(Default)]
struct TextOf(String);

impl tracing::field::Visit for TextOf {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.0);
            self.0 = format!("{value:?}{rest}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        use std::fmt::Write;
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.0);
            self.0 = format!("{value}{rest}");
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}
