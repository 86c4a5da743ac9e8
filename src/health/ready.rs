//! `/readyz`: whether this instance can serve every page now, for a load balancer deciding
//! where to send traffic (`/healthz` stays the liveness check: the process and the database
//! answer). 503 until the store is open and writable, every index of the start-up plan exists,
//! the start-up work left to the background (older content's summaries) is done, and the text
//! indexes search needs have finished building (the embedded store builds a large
//! collection's text index in the background after start-up; until then search is refused).
//! The JSON body lists what is still pending:
//!
//! ```json
//! {"ready": false, "pending": ["the text index on products is still being built"]}
//! ```
//!
//! Once the start-up checks have passed they are not repeated (indexes are not dropped by a
//! running shop); the store's writability is checked on every call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use bson::{doc, Document};
use serde::Serialize;

use crate::db::Db;
use crate::state::AppState;
use crate::web::errors::Rendered;

/// What `/readyz` waits for, registered by `startup` from its index plan.
pub(crate) struct Readiness {
    /// `(collection, index names)` that must exist.
    indexes: Vec<(String, Vec<String>)>,
    /// Collections whose text index must answer a `$text` query.
    text_searched: Vec<String>,
    /// Start-up work left to run in the background: what `/readyz` says while it runs, and
    /// whether it is done.
    background: Vec<(&'static str, Arc<AtomicBool>)>,
    /// True once the start-up checks passed.
    settled: AtomicBool,
}

impl Readiness {
    pub(crate) fn new(
        indexes: Vec<(String, Vec<String>)>,
        text_searched: Vec<String>,
        background: Vec<(&'static str, Arc<AtomicBool>)>,
    ) -> Readiness {
        Readiness {
            indexes,
            text_searched,
            background,
            settled: AtomicBool::new(false),
        }
    }

    /// What is not ready yet; empty when everything is.
    pub(crate) async fn pending(&self, db: &Db, limit: Duration) -> Vec<String> {
        let mut pending = Vec::new();
        match tokio::time::timeout(limit, db.ping()).await {
            Ok(Ok(())) => {}
            _ => {
                pending.push("the database does not answer".to_string());
                return pending;
            }
        }
        if let Ok(Some(reason)) = tokio::time::timeout(limit, db.writes_refused()).await {
            pending.push(format!("the database refuses writes: {reason}"));
        }
        if self.settled.load(Ordering::Relaxed) {
            return pending;
        }
        let mut start_up = Vec::new();
        for (collection, names) in &self.indexes {
            let existing = db
                .collection::<Document>(collection)
                .list_index_names()
                .await
                .unwrap_or_default();
            for name in names.iter().filter(|n| !existing.contains(n)) {
                start_up.push(format!(
                    "the index {name} on {collection} does not exist yet"
                ));
            }
        }
        for collection in &self.text_searched {
            let searched = db.collection::<Document>(collection);
            let probe = searched
                .find_one(doc! { "$text": { "$search": "readiness" } })
                .projection(doc! { "_id": 1 });
            match tokio::time::timeout(limit, probe).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => start_up.push(format!(
                    "the text index on {collection} cannot be searched yet ({})",
                    first_line(&e.to_string())
                )),
                Err(_) => start_up.push(format!(
                    "searching the text index on {collection} did not answer in time"
                )),
            }
        }
        for (what, done) in &self.background {
            if !done.load(Ordering::Relaxed) {
                start_up.push(what.to_string());
            }
        }
        if start_up.is_empty() {
            self.settled.store(true, Ordering::Relaxed);
        }
        pending.extend(start_up);
        pending
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

#[derive(Serialize)]
struct Answer {
    ready: bool,
    pending: Vec<String>,
}

pub(crate) async fn readyz(
    state: web::Data<AppState>,
    readiness: Option<web::Data<Readiness>>,
) -> HttpResponse {
    let limit = Duration::from_millis(state.db_timeout_ms);
    let pending = match &readiness {
        Some(readiness) => readiness.pending(&state.db, limit).await,
        None => vec!["the readiness checks are not registered".to_string()],
    };
    let status = if pending.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::to_string(&Answer {
        ready: pending.is_empty(),
        pending,
    })
    .unwrap_or_else(|_| "{\"ready\":false,\"pending\":[]}".to_string());
    let mut response = HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body);
    response.extensions_mut().insert(Rendered);
    response
}
