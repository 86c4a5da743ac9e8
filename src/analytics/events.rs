//! The traffic log: one document in `events` per public page view and per commerce event
//! (product viewed, added to cart, checkout started, order placed, search), with typed fields
//! the reports filter and group by, written off the request path.
//!
//! **Events are statistics, not records.** A page hands its [`Hit`] (the raw request facts, one
//! for a page view and its commerce event together) to the [`EventLog`] without waiting: a
//! bounded queue (`analytics.queue_capacity`) that drops and counts what does not fit, and one
//! writer task that parses, hashes, builds the BSON and inserts what waits as unordered `insert`
//! batches with write concern `w: 1, j: false` (acknowledged by the store, not waited on for the
//! journal). A crash may lose the last moments of events; nobody was promised them, and orders,
//! carts and stock keep their own durable records.
//!
//! **No personal data.** Nothing identifying is stored: the visitor is a 64-bit hash of (the
//! day's secret salt, the client address, the user agent), as Plausible counts visitors without
//! cookies. The salt is random, one per UTC day (the day of the event's time, which is read
//! from the database's clock, so a test stepping it crosses days), kept in `traffic.salts` so
//! every instance on the database hashes alike, and deleted after two days, so a stored hash
//! cannot be tied back to an address even by someone holding the database. The user agent is reduced to a device
//! class, a browser family and a bot flag (parsed with `woothee`, in the writer task) before
//! anything is written; the referrer to its host.
//!
//! **Growth** is bounded by a TTL index on `at` (`analytics.events_retention_days`, default 30;
//! docs/data-model.md says why a TTL index rather than daily collections). The roll-ups
//! ([`super::rollup`]) keep the counts after the events expire.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bson::{doc, Document, RawDocumentBuf};
use chrono::{DateTime, Utc};
use mongodb::options::{Acknowledgment, IndexOptions, WriteConcern};
use mongodb::IndexModel;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use super::{hll, Day};
use crate::db::{is_duplicate_key, Db, DbError};
use crate::web::traffic::CommerceEvent;

/// The product funnel's steps, in order.
pub(crate) const FUNNEL: [(&str, &str); 4] = [
    ("product_viewed", "Viewed a product"),
    ("added_to_cart", "Added to cart"),
    ("checkout_started", "Started checkout"),
    ("order_placed", "Placed an order"),
];

/// One document per event.
pub const EVENTS: &str = "events";
/// One secret salt per UTC day: `{ _id: "2026-11-28", salt }`.
pub const SALTS: &str = "traffic.salts";
/// The `kind` of a page view.
pub const VIEW: &str = "view";
/// Every kind of event, page views first.
pub(crate) const KINDS: [&str; 6] = [
    VIEW,
    "product_viewed",
    "added_to_cart",
    "checkout_started",
    "order_placed",
    "search",
];
/// The name of the TTL index on `events`.
pub const TTL_INDEX: &str = "at_ttl";
/// Bytes of a user agent, referrer or query string kept in memory until parsed.
pub(crate) const MAX_HEADER_BYTES: usize = 512;
/// Longest UTM value stored, in characters.
const MAX_UTM_CHARS: usize = 100;
/// Hits written per `insert` command (a product page's hit is two events).
const BATCH: usize = 1_000;

/// What a page hands to the log: the raw request facts, held in memory only until the writer
/// turns them into an [`Event`].
#[derive(Debug, Clone)]
pub struct Hit {
    pub at: DateTime<Utc>,
    /// The commerce event; `None` for a page view alone ([`EventLog::record_page`] logs the
    /// page view besides it).
    pub event: Option<CommerceEvent>,
    /// The page's path as the counter normalises it.
    pub path: String,
    /// The route's pattern (`/products/{slug}`), or the path when no route matched.
    pub template: String,
    pub status: u16,
    pub response_ms: u32,
    /// The `Referer` header.
    pub referrer: Option<String>,
    /// The site's own host (`Host` header), so navigation within the site has no referrer.
    pub own_host: Option<String>,
    /// The query string (for UTM parameters).
    pub query: Option<String>,
    pub client: Option<IpAddr>,
    pub user_agent: String,
}

/// Cut `s` to at most `max` bytes at a character boundary.
pub(crate) fn clip(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// One stored event. Optional fields are left out when empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: bson::DateTime,
    pub kind: String,
    pub path: String,
    pub template: String,
    pub status: i32,
    pub response_ms: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub referrer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utm_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utm_medium: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utm_campaign: Option<String>,
    /// `desktop`, `mobile`, `tablet` or `other`.
    pub device: String,
    /// The browser family (`Chrome`, `Firefox` …; `Other` when unknown).
    pub browser: String,
    pub bot: bool,
    /// The visitor hash (see the module header).
    pub visitor: i64,
    /// The visitor's HyperLogLog register and rank ([`hll::packed`]).
    pub hll: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qty: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cents: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<i32>,
}

/// A user agent reduced to what the reports show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Agent {
    pub device: &'static str,
    pub browser: String,
    pub bot: bool,
}

/// Words in a user agent that mark automated clients woothee does not list.
const BOT_WORDS: &[&str] = &[
    "bot",
    "crawl",
    "spider",
    "slurp",
    "headless",
    "curl",
    "wget",
    "python",
    "go-http",
    "java/",
    "okhttp",
    "libwww",
    "httpclient",
    "scrapy",
    "lighthouse",
    "monitor",
    "uptime",
    "preview",
];

/// Device class, browser family and bot flag of `user_agent`. An empty one is a bot (every
/// browser sends one).
pub(crate) fn parse_agent(user_agent: &str) -> Agent {
    let ua = user_agent.trim();
    let lower = ua.to_ascii_lowercase();
    let mut bot = ua.is_empty() || BOT_WORDS.iter().any(|w| lower.contains(w));
    let parsed = woothee::parser::Parser::new().parse(ua);
    let (device, browser) = match &parsed {
        Some(r) => {
            bot |= r.category == "crawler";
            let tablet = r.os == "iPad"
                || (r.os == "Android" && !lower.contains("mobile"))
                || lower.contains("tablet");
            let device = match r.category {
                _ if tablet && r.category != "crawler" => "tablet",
                "pc" => "desktop",
                "smartphone" | "mobilephone" => "mobile",
                _ => "other",
            };
            let browser = match r.name {
                "UNKNOWN" | "" => "Other".to_string(),
                name => name.to_string(),
            };
            (device, browser)
        }
        None => ("other", "Other".to_string()),
    };
    Agent {
        device,
        browser,
        bot,
    }
}

/// The host of a `Referer` value, lowercased, without `www.` or a port; `None` for anything
/// that is not an absolute http(s) address, or for `own_host` (a link within the site).
pub(crate) fn referrer_host(referrer: &str, own_host: Option<&str>) -> Option<String> {
    let lower = referrer.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if host_port.starts_with('[') {
        host_port.split(']').next().map(|h| format!("{h}]"))?
    } else {
        host_port.split(':').next()?.to_string()
    };
    let host = host.strip_prefix("www.").unwrap_or(&host).to_string();
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
    let own = own_host.map(|h| {
        let h = h.to_ascii_lowercase();
        let h = h.split(':').next().unwrap_or_default().to_string();
        h.strip_prefix("www.").unwrap_or(&h).to_string()
    });
    (valid && own.as_deref() != Some(host.as_str())).then_some(host)
}

/// `utm_source`, `utm_medium` and `utm_campaign` of a query string, trimmed and cut.
pub(crate) fn utm(query: &str) -> [Option<String>; 3] {
    let mut found: [Option<String>; 3] = Default::default();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match key.as_ref() {
            "utm_source" => 0,
            "utm_medium" => 1,
            "utm_campaign" => 2,
            _ => continue,
        };
        let value: String = value.trim().chars().take(MAX_UTM_CHARS).collect();
        if !value.is_empty() && found[slot].is_none() {
            found[slot] = Some(value);
        }
    }
    found
}

/// The visitor hash of (salt, address, user agent).
pub(crate) fn visitor_hash(salt: &[u8], client: Option<IpAddr>, user_agent: &str) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    match client {
        Some(IpAddr::V4(a)) => hasher.update(a.octets()),
        Some(IpAddr::V6(a)) => hasher.update(a.octets()),
        None => {}
    }
    hasher.update([0]);
    hasher.update(user_agent.as_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// User agents already parsed by the writer: a site sees few distinct ones, and parsing (a few
/// dozen regular expressions) cost more than the rest of an event together (the product page's
/// throughput with logging on was 55 % of off without this cache on a 2-core VM).
#[derive(Default)]
pub(crate) struct Agents {
    parsed: HashMap<String, Agent>,
}

/// Distinct user agents remembered; the cache starts afresh beyond.
const AGENTS_REMEMBERED: usize = 2_000;

impl Agents {
    pub(crate) fn parse(&mut self, user_agent: &str) -> &Agent {
        // Looked up twice rather than through `entry`, which would allocate the key each time.
        if !self.parsed.contains_key(user_agent) {
            if self.parsed.len() >= AGENTS_REMEMBERED {
                self.parsed.clear();
            }
            self.parsed
                .insert(user_agent.to_string(), parse_agent(user_agent));
        }
        &self.parsed[user_agent]
    }
}

impl Event {
    /// The stored event of `hit`, hashed with its day's `salt`.
    pub fn from_hit(hit: &Hit, salt: &[u8]) -> Event {
        Event::from_hit_as(hit, salt, parse_agent(&hit.user_agent))
    }

    /// [`Event::from_hit`] with the user agent already parsed.
    pub(crate) fn from_hit_as(hit: &Hit, salt: &[u8], agent: Agent) -> Event {
        let hash = visitor_hash(salt, hit.client, &hit.user_agent);
        let [utm_source, utm_medium, utm_campaign] =
            hit.query.as_deref().map(utm).unwrap_or_default();
        let mut event = Event {
            at: bson::DateTime::from_chrono(hit.at),
            kind: hit
                .event
                .as_ref()
                .map_or(VIEW, CommerceEvent::kind)
                .to_string(),
            path: hit.path.clone(),
            template: hit.template.clone(),
            status: i32::from(hit.status),
            response_ms: i32::try_from(hit.response_ms).unwrap_or(i32::MAX),
            referrer: hit
                .referrer
                .as_deref()
                .and_then(|r| referrer_host(r, hit.own_host.as_deref())),
            utm_source,
            utm_medium,
            utm_campaign,
            device: agent.device.to_string(),
            browser: agent.browser,
            bot: agent.bot,
            visitor: hash as i64,
            hll: hll::packed(hash),
            sku: None,
            qty: None,
            total_cents: None,
            query: None,
            results: None,
        };
        match &hit.event {
            Some(CommerceEvent::ProductViewed { sku }) => event.sku = Some(sku.clone()),
            Some(CommerceEvent::AddedToCart { sku, qty }) => {
                event.sku = Some(sku.clone());
                event.qty = Some(*qty);
            }
            Some(CommerceEvent::OrderPlaced { total_cents }) => {
                event.total_cents = Some(*total_cents)
            }
            Some(CommerceEvent::Searched { query, results }) => {
                event.query = Some(query.clone());
                event.results = Some(i32::try_from(*results).unwrap_or(i32::MAX));
            }
            Some(CommerceEvent::CheckoutStarted) | None => {}
        }
        event
    }
}

impl Event {
    /// The stored document: what `bson::to_document` makes of it (the same fields in the same
    /// order, optional ones left out when empty), built without serde's per-field detour, which
    /// the writer paid for every event.
    #[cfg(test)]
    pub(crate) fn into_document(self) -> Document {
        let mut d = Document::new();
        d.insert("at", self.at);
        d.insert("kind", self.kind);
        d.insert("path", self.path);
        d.insert("template", self.template);
        d.insert("status", self.status);
        d.insert("response_ms", self.response_ms);
        let optional = |d: &mut Document, key: &str, value: Option<String>| {
            if let Some(value) = value {
                d.insert(key, value);
            }
        };
        optional(&mut d, "referrer", self.referrer);
        optional(&mut d, "utm_source", self.utm_source);
        optional(&mut d, "utm_medium", self.utm_medium);
        optional(&mut d, "utm_campaign", self.utm_campaign);
        d.insert("device", self.device);
        d.insert("browser", self.browser);
        d.insert("bot", self.bot);
        d.insert("visitor", self.visitor);
        d.insert("hll", self.hll);
        optional(&mut d, "sku", self.sku);
        if let Some(qty) = self.qty {
            d.insert("qty", qty);
        }
        if let Some(total_cents) = self.total_cents {
            d.insert("total_cents", total_cents);
        }
        optional(&mut d, "query", self.query);
        if let Some(results) = self.results {
            d.insert("results", results);
        }
        d
    }
}

/// What the writer derives from a [`Hit`] once, whichever of its events it writes.
struct Derived<'a> {
    agent: &'a Agent,
    hash: u64,
    referrer: Option<String>,
    utm: [Option<String>; 3],
}

impl<'a> Derived<'a> {
    fn of(hit: &Hit, salt: &[u8], agent: &'a Agent) -> Derived<'a> {
        Derived {
            agent,
            hash: visitor_hash(salt, hit.client, &hit.user_agent),
            referrer: hit
                .referrer
                .as_deref()
                .and_then(|r| referrer_host(r, hit.own_host.as_deref())),
            utm: hit.query.as_deref().map(utm).unwrap_or_default(),
        }
    }
}

/// The stored document of `hit`'s `event` (`None`: its page view) as BSON bytes: exactly the
/// fields of `Event::into_document` (the tests compare the two) in its order, after `_id` (a fresh object id, first, as
/// the driver would prepend it). Built straight from the hit, so no [`Event`] nor [`Document`]
/// is made: the driver sends raw bytes as they are, where a `Document` is encoded field by
/// field, on the same two cores the pages are served from.
fn raw_event(hit: &Hit, event: Option<&CommerceEvent>, derived: &Derived<'_>) -> RawDocumentBuf {
    let mut d = empty_document(EVENT_BYTES);
    d.append("_id", bson::oid::ObjectId::new());
    d.append("at", bson::DateTime::from_chrono(hit.at));
    d.append_ref("kind", event.map_or(VIEW, CommerceEvent::kind));
    d.append_ref("path", hit.path.as_str());
    d.append_ref("template", hit.template.as_str());
    d.append("status", i32::from(hit.status));
    d.append(
        "response_ms",
        i32::try_from(hit.response_ms).unwrap_or(i32::MAX),
    );
    let optional = |d: &mut RawDocumentBuf, key: &str, value: &Option<String>| {
        if let Some(value) = value {
            d.append_ref(key, value.as_str());
        }
    };
    optional(&mut d, "referrer", &derived.referrer);
    optional(&mut d, "utm_source", &derived.utm[0]);
    optional(&mut d, "utm_medium", &derived.utm[1]);
    optional(&mut d, "utm_campaign", &derived.utm[2]);
    d.append_ref("device", derived.agent.device);
    d.append_ref("browser", derived.agent.browser.as_str());
    d.append("bot", derived.agent.bot);
    d.append("visitor", derived.hash as i64);
    d.append("hll", hll::packed(derived.hash));
    match event {
        Some(CommerceEvent::ProductViewed { sku }) => d.append_ref("sku", sku.as_str()),
        Some(CommerceEvent::AddedToCart { sku, qty }) => {
            d.append_ref("sku", sku.as_str());
            d.append("qty", *qty);
        }
        Some(CommerceEvent::OrderPlaced { total_cents }) => d.append("total_cents", *total_cents),
        Some(CommerceEvent::Searched { query, results }) => {
            d.append_ref("query", query.as_str());
            d.append("results", i32::try_from(*results).unwrap_or(i32::MAX));
        }
        Some(CommerceEvent::CheckoutStarted) | None => {}
    }
    d
}

/// Bytes reserved for an event's document: a product page's events take about 250 to 300 (a
/// long path, referrer or search makes more, which then grows the buffer as usual).
const EVENT_BYTES: usize = 384;

/// An empty document whose buffer has room for `capacity` bytes: appending fields to
/// `RawDocumentBuf::new()` grew it by doubling, half a dozen reallocations for every event.
fn empty_document(capacity: usize) -> RawDocumentBuf {
    let mut bytes = Vec::with_capacity(capacity);
    bytes.extend_from_slice(&5i32.to_le_bytes());
    bytes.push(0);
    // The five bytes of an empty document are always accepted.
    RawDocumentBuf::from_bytes(bytes).unwrap_or_default()
}

/// The day's salt, created by whichever instance asks first (all instances then agree), and the
/// salts of days before yesterday deleted.
pub(crate) async fn salt_of(db: &Db, day: Day) -> Result<Vec<u8>, DbError> {
    let salts = db.collection::<Document>(SALTS);
    let mut fresh = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut fresh);
    let taken = salts
        .find_one_and_update(
            doc! { "_id": day.iso() },
            doc! { "$setOnInsert": { "salt": hex::encode(fresh) } },
        )
        .upsert(true)
        .return_document(mongodb::options::ReturnDocument::After)
        .await;
    let stored = match taken {
        Ok(found) => found,
        // Two instances created the day's salt at once; the other's is the one.
        Err(e) if is_duplicate_key(&e) => salts.find_one(doc! { "_id": day.iso() }).await?,
        Err(e) => return Err(e.into()),
    };
    if let Some(before) = day.previous() {
        salts
            .delete_many(doc! { "_id": { "$lt": before.iso() } })
            .await?;
    }
    stored
        .and_then(|d| d.get_str("salt").ok().and_then(|s| hex::decode(s).ok()))
        .ok_or_else(|| DbError::Invalid(format!("the salt of {} is unreadable", day.iso())))
}

/// The write concern of events: acknowledged by the store, not waited on for its journal.
pub fn write_concern() -> WriteConcern {
    WriteConcern::builder()
        .w(Acknowledgment::Nodes(1))
        .journal(false)
        .build()
}

/// Indexes of `events` serving the reports: every report filters one kind over a time range
/// (`kind, at`); the roll-up reads all events over a time range and the admin the oldest event
/// (the TTL index on `at`, [`ttl_index`], created separately with the configured retention).
/// No query filters events by path: a page's drill-down reads the roll-ups.
pub fn indexes() -> Vec<IndexModel> {
    vec![IndexModel::builder()
        .keys(doc! { "kind": 1, "at": 1 })
        .build()]
}

/// Indexes of `events` no query uses, dropped at start-up: `path, at` was made for a page's
/// drill-down over raw events, which reads the roll-ups instead; it was a fourth index to update
/// on every event written (see docs/data-model.md, what logging costs a page).
pub(crate) const RETIRED_INDEXES: [(&str, &str); 1] = [(EVENTS, "path_1_at_1")];

/// The TTL index removing events `retention_days` after their time.
pub(crate) fn ttl_index(retention_days: u32) -> IndexModel {
    IndexModel::builder()
        .keys(doc! { "at": 1 })
        .options(
            IndexOptions::builder()
                .name(TTL_INDEX.to_string())
                .expire_after(Duration::from_secs(u64::from(retention_days) * 86_400))
                .build(),
        )
        .build()
}

/// Create the TTL index with `retention_days`, replacing one made with another retention (a
/// changed setting takes effect at the next start).
pub async fn ensure_retention(db: &Db, retention_days: u32) -> Result<(), DbError> {
    let events = db.collection::<Document>(EVENTS);
    let wanted = i64::from(retention_days) * 86_400;
    let mut cursor = events.list_indexes().await;
    let mut existing = None;
    if let Ok(cursor) = &mut cursor {
        use futures::TryStreamExt;
        while let Some(index) = cursor.try_next().await? {
            if index.options.as_ref().and_then(|o| o.name.as_deref()) == Some(TTL_INDEX) {
                existing = index
                    .options
                    .and_then(|o| o.expire_after)
                    .map(|d| d.as_secs() as i64);
            }
        }
    }
    match existing {
        Some(secs) if secs == wanted => return Ok(()),
        Some(_) => events.drop_index(TTL_INDEX).await?,
        None => {}
    }
    events.create_index(ttl_index(retention_days)).await?;
    Ok(())
}

/// What the log has done since start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Events accepted into the queue.
    pub queued: u64,
    /// Events dropped because the queue was full (or the log stopped).
    pub dropped: u64,
    pub written: u64,
    /// Events lost to database errors.
    pub failed: u64,
}

#[derive(Default)]
struct Counts {
    queued: AtomicU64,
    dropped: AtomicU64,
    written: AtomicU64,
    failed: AtomicU64,
}

enum Message {
    /// A hit's event and, when the flag is set, its page view too.
    Hit(Box<Hit>, bool),
    Flush(oneshot::Sender<()>),
    Stop(oneshot::Sender<()>),
}

/// The handle pages log events with; cheap to clone.
#[derive(Clone)]
pub struct EventLog {
    queue: mpsc::Sender<Message>,
    counts: Arc<Counts>,
    /// The database's clock ([`Db::clock`]), which events are stamped with, so a test that
    /// steps it sees its events (and their day's salt) at the stepped time.
    clock: Arc<dyn crate::clock::Clock>,
    /// Ends the writer's lingering wait when a flush or stop is queued.
    wake: Arc<Notify>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl EventLog {
    /// Start the writer on the current Tokio runtime; at most `capacity` hits wait (a product
    /// page's is two events).
    pub fn spawn(db: Db, capacity: usize) -> EventLog {
        let (queue, receiver) = mpsc::channel(capacity.max(1));
        let counts = Arc::new(Counts::default());
        let clock = db.clock();
        let wake = Arc::new(Notify::new());
        let task = tokio::spawn(write_events(db, receiver, counts.clone(), wake.clone()));
        EventLog {
            queue,
            counts,
            clock,
            wake,
            task: Arc::new(Mutex::new(Some(task))),
        }
    }

    /// The time an event happening now is stamped with: the database's clock.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now().to_chrono()
    }

    /// Queue `hit` (its `event`, or a page view when it has none) without waiting; when the
    /// queue is full it is dropped and counted.
    pub fn record(&self, hit: Hit) {
        self.send(hit, false);
    }

    /// Queue a page view and, when `hit` has one, its commerce event (a product page is both a
    /// view and "product viewed"): one message for the two, so the page pays for one `Hit` and
    /// one queue slot, and the writer derives the visitor, agent and source once for both.
    pub(crate) fn record_page(&self, hit: Hit) {
        let also_view = hit.event.is_some();
        self.send(hit, also_view);
    }

    fn send(&self, hit: Hit, also_view: bool) {
        let events = 1 + u64::from(also_view);
        match self.queue.try_send(Message::Hit(Box::new(hit), also_view)) {
            Ok(()) => self.counts.queued.fetch_add(events, Ordering::Relaxed),
            Err(_) => self.counts.dropped.fetch_add(events, Ordering::Relaxed),
        };
    }

    /// Write every event queued before this call, and wait until it is written.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).await.is_ok() {
            self.wake.notify_one();
            let _ = wait.await;
        }
    }

    /// Write what is queued and stop the writer; later events are dropped. Safe to call twice.
    pub async fn stop(&self) {
        let (done, wait) = oneshot::channel();
        if self.queue.send(Message::Stop(done)).await.is_ok() {
            self.wake.notify_one();
            let _ = wait.await;
        }
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    pub fn stats(&self) -> LogStats {
        LogStats {
            queued: self.counts.queued.load(Ordering::Relaxed),
            dropped: self.counts.dropped.load(Ordering::Relaxed),
            written: self.counts.written.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
        }
    }
}

/// How long the writer lets events gather after the first of a batch arrives: one `insert` of
/// many events costs the store and the driver far less than many of a few (a command's own
/// overhead dwarfs an event's), and nobody waits for an event to be written.
const LINGER: Duration = Duration::from_millis(500);

/// The writer: waits for a first hit, lets more gather for [`LINGER`] (cut short by a flush or
/// stop), writes what waits in batches of up to [`BATCH`] hits, answers flushes in order.
///
/// While it lingers it does not poll the queue: a task waiting on a channel is woken by every
/// message sent, so each page view cost a wake-up and a thread switch of the writer (the
/// profile of the product page showed them as the largest share of the log's cost after the
/// store's own work). Now the pages only push; one wake-up starts a batch, and a flush or stop
/// rings `wake` to end the wait.
async fn write_events(
    db: Db,
    mut receiver: mpsc::Receiver<Message>,
    counts: Arc<Counts>,
    wake: Arc<Notify>,
) {
    let mut salts: HashMap<Day, Vec<u8>> = HashMap::new();
    let mut agents = Agents::default();
    let mut messages = Vec::with_capacity(BATCH);
    let mut hits: Vec<(Box<Hit>, bool)> = Vec::with_capacity(BATCH);
    let mut documents = Vec::with_capacity(2 * BATCH);
    // A full batch was written and more may wait: write on without lingering.
    let mut backlog = false;
    loop {
        let mut stop = None;
        let mut flushed = Vec::new();
        let mut closed = false;
        let mut take = |message: Message,
                        hits: &mut Vec<(Box<Hit>, bool)>,
                        receiver: &mut mpsc::Receiver<Message>| match message
        {
            Message::Hit(hit, also_view) => hits.push((hit, also_view)),
            Message::Flush(done) => flushed.push(done),
            Message::Stop(done) => {
                stop = Some(done);
                receiver.close();
            }
        };
        messages.clear();
        if receiver.recv_many(&mut messages, BATCH).await == 0 {
            closed = true;
        }
        let mut answer = false;
        for message in messages.drain(..) {
            answer |= !matches!(message, Message::Hit(..));
            take(message, &mut hits, &mut receiver);
        }
        if !closed && !answer && !backlog && hits.len() < BATCH {
            tokio::select! {
                () = tokio::time::sleep(LINGER) => {}
                () = wake.notified() => {}
            }
        }
        // What gathered meanwhile, up to a batch; a stop ends the gathering (what follows it
        // is dropped below).
        while hits.len() < BATCH && !answer {
            match receiver.try_recv() {
                Ok(message) => {
                    answer |= matches!(message, Message::Stop(_));
                    take(message, &mut hits, &mut receiver);
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        backlog = hits.len() >= BATCH;
        write_batch(&db, &mut salts, &mut agents, &hits, &mut documents, &counts).await;
        hits.clear();
        for done in flushed {
            let _ = done.send(());
        }
        if let Some(done) = stop {
            // Events queued after the stop still in the channel are dropped, as counted.
            while let Ok(message) = receiver.try_recv() {
                if let Message::Hit(_, also_view) = message {
                    counts
                        .dropped
                        .fetch_add(1 + u64::from(also_view), Ordering::Relaxed);
                }
            }
            let _ = done.send(());
            return;
        }
        if closed {
            return;
        }
    }
}

async fn write_batch(
    db: &Db,
    salts: &mut HashMap<Day, Vec<u8>>,
    agents: &mut Agents,
    hits: &[(Box<Hit>, bool)],
    documents: &mut Vec<RawDocumentBuf>,
    counts: &Counts,
) {
    documents.clear();
    for (hit, also_view) in hits {
        let day = Day::from_date(hit.at.date_naive());
        if !salts.contains_key(&day) {
            match salt_of(db, day).await {
                Ok(salt) => {
                    if salts.len() > 3 {
                        salts.clear();
                    }
                    salts.insert(day, salt);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the traffic log's salt could not be read");
                    counts
                        .failed
                        .fetch_add(1 + u64::from(*also_view), Ordering::Relaxed);
                    continue;
                }
            }
        }
        let salt = salts.get(&day).map(Vec::as_slice).unwrap_or_default();
        let derived = Derived::of(hit, salt, agents.parse(&hit.user_agent));
        documents.push(raw_event(hit, hit.event.as_ref(), &derived));
        if *also_view {
            documents.push(raw_event(hit, None, &derived));
        }
    }
    let n = documents.len() as u64;
    if n == 0 {
        return;
    }
    let written = db
        .collection::<RawDocumentBuf>(EVENTS)
        .insert_many(documents.drain(..))
        .ordered(false)
        .write_concern(write_concern())
        .await;
    match written {
        Ok(result) => {
            counts
                .written
                .fetch_add(result.inserted_ids.len() as u64, Ordering::Relaxed);
        }
        Err(e) => {
            tracing::warn!(error = %e, events = n, "traffic events could not be written");
            counts.failed.fetch_add(n, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIREFOX: &str =
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:120.0) Gecko/20100101 Firefox/120.0";
    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) \
        AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
    const GOOGLEBOT: &str =
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

    #[test]
    fn user_agents_become_a_device_class_a_browser_family_and_a_bot_flag() {
        let firefox = parse_agent(FIREFOX);
        assert_eq!(
            (firefox.device, firefox.browser.as_str(), firefox.bot),
            ("desktop", "Firefox", false)
        );
        let iphone = parse_agent(IPHONE);
        assert_eq!(
            (iphone.device, iphone.browser.as_str(), iphone.bot),
            ("mobile", "Safari", false)
        );
        assert!(parse_agent(GOOGLEBOT).bot);
        assert!(parse_agent("").bot);
        assert!(parse_agent("curl/8.4.0").bot);
    }

    #[test]
    fn a_referrer_is_kept_as_its_host_and_links_within_the_site_have_none() {
        assert_eq!(
            referrer_host("https://www.Google.com/search?q=x", Some("shop.example")),
            Some("google.com".into())
        );
        assert_eq!(
            referrer_host("http://user@forum.example:8080/t/1", None),
            Some("forum.example".into())
        );
        assert_eq!(
            referrer_host("https://shop.example/products/x", Some("shop.example:443")),
            None
        );
        assert_eq!(referrer_host("android-app://com.x", None), None);
        assert_eq!(referrer_host("https://<script>/", None), None);
    }

    #[test]
    fn utm_parameters_are_read_from_the_query_string() {
        assert_eq!(
            utm("utm_source=newsletter&utm_medium=email&utm_campaign=Black%20Friday&x=1"),
            [
                Some("newsletter".into()),
                Some("email".into()),
                Some("Black Friday".into())
            ]
        );
        assert_eq!(utm("utm_source=&q=1"), [None, None, None]);
    }

    #[test]
    fn an_events_document_is_the_one_serde_would_make() {
        let hit = Hit {
            at: chrono::Utc::now(),
            event: Some(CommerceEvent::AddedToCart {
                sku: "tea".into(),
                qty: 2,
            }),
            path: "/cart/items".into(),
            template: "/cart/items".into(),
            status: 303,
            response_ms: 12,
            referrer: Some("https://forum.example/t/1".into()),
            own_host: None,
            query: Some("utm_source=news&utm_campaign=spring".into()),
            client: "203.0.113.9".parse().ok(),
            user_agent: FIREFOX.into(),
        };
        for event in [
            Event::from_hit(&hit, b"salt"),
            Event::from_hit(
                &Hit {
                    event: Some(CommerceEvent::Searched {
                        query: "tea".into(),
                        results: 0,
                    }),
                    referrer: None,
                    query: None,
                    ..hit.clone()
                },
                b"salt",
            ),
            Event::from_hit(
                &Hit {
                    event: Some(CommerceEvent::OrderPlaced { total_cents: 1200 }),
                    ..hit.clone()
                },
                b"salt",
            ),
        ] {
            let by_serde = bson::to_document(&event).expect("encodes");
            let built = event.into_document();
            assert_eq!(built, by_serde);
            let order = |d: &Document| d.keys().cloned().collect::<Vec<_>>();
            assert_eq!(order(&built), order(&by_serde));
        }
    }

    #[test]
    fn the_writers_raw_documents_hold_exactly_the_events_fields_after_an_id() {
        let hit = Hit {
            at: chrono::Utc::now(),
            event: Some(CommerceEvent::ProductViewed { sku: "tea".into() }),
            path: "/products/tea".into(),
            template: "/products/{slug}".into(),
            status: 200,
            response_ms: 3,
            referrer: Some("https://www.forum.example/t/1".into()),
            own_host: Some("shop.example".into()),
            query: Some("utm_source=news&utm_medium=email&utm_campaign=spring".into()),
            client: "203.0.113.9".parse().ok(),
            user_agent: FIREFOX.into(),
        };
        let events = [
            None,
            hit.event.clone(),
            Some(CommerceEvent::AddedToCart {
                sku: "tea".into(),
                qty: 2,
            }),
            Some(CommerceEvent::CheckoutStarted),
            Some(CommerceEvent::OrderPlaced { total_cents: 1200 }),
            Some(CommerceEvent::Searched {
                query: "tea".into(),
                results: 0,
            }),
        ];
        let empty = empty_document(EVENT_BYTES);
        assert_eq!(empty.as_bytes(), RawDocumentBuf::new().as_bytes());
        assert!(empty.into_bytes().capacity() >= EVENT_BYTES);
        let agent = parse_agent(FIREFOX);
        for plain in [false, true] {
            let hit = if plain {
                Hit {
                    referrer: None,
                    own_host: None,
                    query: None,
                    ..hit.clone()
                }
            } else {
                hit.clone()
            };
            let derived = Derived::of(&hit, b"salt", &agent);
            for event in &events {
                let raw = raw_event(&hit, event.as_ref(), &derived);
                let mut stored = Document::try_from(raw.as_ref()).expect("valid BSON");
                let id = stored.remove("_id");
                assert!(matches!(id, Some(bson::Bson::ObjectId(_))), "{id:?}");
                let by_serde = bson::to_document(&Event::from_hit(
                    &Hit {
                        event: event.clone(),
                        ..hit.clone()
                    },
                    b"salt",
                ))
                .expect("encodes");
                assert_eq!(stored, by_serde);
                let order = |d: &Document| d.keys().cloned().collect::<Vec<_>>();
                assert_eq!(order(&stored), order(&by_serde));
            }
        }
    }

    #[test]
    fn the_visitor_hash_changes_with_the_salt_the_address_and_the_agent() {
        let ip: IpAddr = "203.0.113.9".parse().expect("address");
        let base = visitor_hash(b"salt-a", Some(ip), FIREFOX);
        assert_eq!(base, visitor_hash(b"salt-a", Some(ip), FIREFOX));
        assert_ne!(base, visitor_hash(b"salt-b", Some(ip), FIREFOX));
        assert_ne!(base, visitor_hash(b"salt-a", Some(ip), IPHONE));
        let other: IpAddr = "203.0.113.10".parse().expect("address");
        assert_ne!(base, visitor_hash(b"salt-a", Some(other), FIREFOX));
    }
}
