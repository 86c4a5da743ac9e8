//! Conditional GET for generated documents (sitemaps, feeds, robots.txt): an `ETag` from the
//! body's SHA-256 and a `Last-Modified` from the newest stored change, and `304 Not Modified`
//! when the client already has this version (`If-None-Match`, else `If-Modified-Since`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix_web::http::header::{self, HttpDate};
use actix_web::{HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};

/// A generated text document and how it may be cached.
pub(crate) struct Document<'a> {
    pub(crate) content_type: &'a str,
    pub(crate) cache_control: &'a str,
    pub(crate) body: String,
    /// The newest change it shows, when known.
    pub(crate) last_modified: Option<bson::DateTime>,
}

/// The strong ETag of `body`.
pub(crate) fn etag_of(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    format!("\"{}\"", hex::encode(&digest[..16]))
}

/// Whether an `If-None-Match` header of `req` names `etag` (weak or strong) or `*`.
pub(crate) fn matches_etag(req: &HttpRequest, etag: &str) -> bool {
    req.headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*")
}

/// HTTP dates have whole seconds.
fn http_date(at: bson::DateTime) -> HttpDate {
    let secs = at.timestamp_millis().max(0) as u64 / 1000;
    HttpDate::from(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Whether `If-Modified-Since` says the client's copy is at least as new as `last_modified`.
fn not_modified_since(req: &HttpRequest, last_modified: bson::DateTime) -> bool {
    let Some(since) = req
        .headers()
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<HttpDate>().ok())
    else {
        return false;
    };
    SystemTime::from(http_date(last_modified)) <= SystemTime::from(since)
}

/// `200` with the document, or `304` when the client's copy is current.
pub(crate) fn respond(req: &HttpRequest, doc: Document<'_>) -> HttpResponse {
    let etag = etag_of(doc.body.as_bytes());
    let fresh = if req.headers().contains_key(header::IF_NONE_MATCH) {
        matches_etag(req, &etag)
    } else {
        doc.last_modified
            .is_some_and(|at| not_modified_since(req, at))
    };
    let mut response = if fresh {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    response
        .insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, doc.cache_control));
    if let Some(at) = doc.last_modified {
        response.insert_header((header::LAST_MODIFIED, http_date(at)));
    }
    if fresh {
        response.finish()
    } else {
        response
            .insert_header((header::CONTENT_TYPE, doc.content_type))
            .body(doc.body)
    }
}
