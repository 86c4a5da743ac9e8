//! `/metrics`: the Prometheus text exposition of `crate::metrics`, for a scraper that sends the
//! bearer token of `metrics.token`. Without a token configured the route answers 404, as if it
//! did not exist; with a wrong or missing token, 401.
//!
//! Counters and histograms are kept as requests happen; the figures that describe state (the
//! database's collections, the embedded store's journal, the process's memory) are read here,
//! at scrape time, so they cost nothing between scrapes.

use std::time::{Duration, SystemTime};

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use bson::{doc, Bson, Document};
use subtle::ConstantTimeEq;

use crate::metrics::{self, gauge};
use crate::state::AppState;
use crate::web::errors::Rendered;

/// The token `/metrics` asks for (`metrics.token`), registered by `startup`.
pub(crate) struct MetricsAccess {
    pub(crate) token: Option<String>,
}

pub(crate) async fn metrics(
    req: HttpRequest,
    state: web::Data<AppState>,
    access: Option<web::Data<MetricsAccess>>,
) -> HttpResponse {
    let Some(token) = access.as_ref().and_then(|a| a.token.as_deref()) else {
        return plain(StatusCode::NOT_FOUND, "not found\n".to_string());
    };
    if !bearer_matches(&req, token) {
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "a bearer token is required\n".into(),
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"metrics\""),
        );
        return response;
    }
    // A slow or unreachable database must not hang the scrape: what was read in time is served.
    let limit = Duration::from_millis(state.db_timeout_ms);
    if tokio::time::timeout(limit, read_store_figures(&state))
        .await
        .is_err()
    {
        tracing::warn!("reading the database's figures for /metrics timed out");
    }
    read_process_figures();
    match metrics::render() {
        Some(text) => {
            let mut response = plain(StatusCode::OK, text);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        None => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics are not being kept in this process\n".into(),
        ),
    }
}

fn bearer_matches(req: &HttpRequest, token: &str) -> bool {
    let sent = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    sent.len() == token.len() && bool::from(sent.as_bytes().ct_eq(token.as_bytes()))
}

fn plain(status: StatusCode, body: String) -> HttpResponse {
    let mut response = HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, "text/plain; charset=utf-8"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body);
    // A plain-text answer for a machine: not replaced by the HTML error page.
    response.extensions_mut().insert(Rendered);
    response
}

/// Documents, data bytes and index bytes per collection (`collStats`, which MongoDB and docstore
/// both answer), and the embedded store's journal figures from `serverStatus`.
async fn read_store_figures(state: &AppState) {
    let db = &state.db;
    if let Ok(names) = db.database().list_collection_names().await {
        for name in names {
            let Ok(stats) = db.database().run_command(doc! { "collStats": &name }).await else {
                continue;
            };
            let label = || Some(("collection", name.clone()));
            gauge(metrics::STORE_DOCUMENTS, label(), number(&stats, "count"));
            gauge(metrics::STORE_BYTES, label(), number(&stats, "size"));
            gauge(
                metrics::STORE_INDEX_BYTES,
                label(),
                number(&stats, "totalIndexSize"),
            );
        }
    }
    if let Ok(waiting) = crate::mail::count_waiting(db).await {
        gauge(metrics::OUTBOX_BACKLOG, None, waiting as f64);
    }
    let Ok(status) = db.server_status().await else {
        return;
    };
    if status.get_str("process") != Ok("docstore") {
        return;
    }
    let Ok(journal) = status.get_document("journal") else {
        return;
    };
    let writable = journal.get_bool("writable").unwrap_or(true);
    gauge(
        metrics::WRITES_REFUSED,
        None,
        if writable { 0.0 } else { 1.0 },
    );
    if journal.get_bool("persistent") != Ok(true) {
        return;
    }
    gauge(
        metrics::JOURNAL_BYTES,
        None,
        number(journal, "journalBytes"),
    );
    metrics::counter_absolute(metrics::JOURNAL_COMMITS, number(journal, "commits") as u64);
    let commit_secs = number(journal, "commitMicros") / 1_000_000.0;
    gauge(metrics::FSYNC_SECONDS_TOTAL, None, commit_secs);
    if let Ok(at) = journal.get_datetime("lastSnapshot") {
        let age = SystemTime::now()
            .duration_since(at.to_system_time())
            .unwrap_or_default();
        gauge(metrics::SNAPSHOT_AGE, None, age.as_secs_f64());
    }
}

/// A number field of a command's reply, whatever numeric type the server sent.
fn number(reply: &Document, field: &str) -> f64 {
    match reply.get(field) {
        Some(Bson::Int32(n)) => f64::from(*n),
        Some(Bson::Int64(n)) => *n as f64,
        Some(Bson::Double(d)) => *d,
        _ => 0.0,
    }
}

/// Resident memory and open files, from `/proc` (Linux; elsewhere they are left out).
fn read_process_figures() {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
        if let Some(kib) = rss_kib {
            gauge(metrics::PROCESS_RSS, None, kib * 1024.0);
        }
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        gauge(metrics::PROCESS_FDS, None, fds.count() as f64);
    }
    gauge(metrics::UPTIME, None, metrics::uptime().as_secs_f64());
}
