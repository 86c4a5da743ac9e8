//! What the traffic log costs the embedded store, and how long its roll-ups take.
//!
//! 1. **Growth: a TTL index or daily collections.** One day of events (BENCH_DAY_EVENTS,
//!    default 100 000) is inserted into `events` with its indexes and the TTL index, and into a
//!    collection of its own (`events_YYYYMMDD`) with the same indexes but no TTL index; then the
//!    day is expired both ways: the TTL monitor's delete of everything before a time, and
//!    dropping the day's collection. Printed: insert rate and expiry time of each.
//! 2. **Roll-ups**: BENCH_ROLLUP_EVENTS (default 1 000 000) events over 30 days on 500 pages
//!    by 100 000 visitors, then one `rollup::roll_up` building every level from scratch.
//! 3. **Reports**: each of the traffic report's queries over those 30 days, from the events
//!    alone (`analytics::traffic`, the reports before the dimension roll-ups) and as Admin →
//!    Analytics reads them now (`analytics::rolled`: roll-ups, then the events after the
//!    watermarks), side by side. The roll-up runs as of 00:01 after the 30th, so the tables
//!    read the 30th's first 23 hours from the hourly dimension documents and its last hour from
//!    the events: their longest tail. BENCH_PROBE=true also prints the plan and time of the
//!    dimension reads' queries.
//!
//! All on the embedded store with its data on disk (a temporary directory), as a shop runs it.
//! `cargo bench -p bazaar --bench traffic_store`; BENCH_DAY_EVENTS=0 skips part 1,
//! BENCH_ROLLUP=false part 2, BENCH_ROLLUP_EVENTS=3000000 is the 30 days of 100 000.
//!
//! Figures (a shared 2-core VM, one run each, 1 000 000 events): the roll-up from scratch took
//! 168 s with the first version (pipelines merging sketches register by register, ending in
//! `$merge`) and 19.7 s with the present one (hours 15.9 s, days 3.0 s, weeks 0.5 s, months
//! 0.4 s); 3 000 000 events took 24.4 s once docstore's `$group` decoded only what it reads.
//! The bench's events are in October 2026: with a 30-day TTL index the TTL monitor deleted
//! most of them once the clock passed November, so report figures taken that way (3–220 ms at
//! "3 000 000") ran over what was left; the retention is now BENCH_RETENTION_DAYS (default
//! 3 650) and the events kept are printed. Over 3 000 000 kept events the events-only reports
//! take 2–6 s and the roll-up reads 6–354 ms; the roll-up from scratch with the dimension
//! documents takes 49.5 s (docs/data-model.md, `traffic.dimensions`, has the table). With the
//! open day's hourly dimension documents (main's binary and this one in one lock hold, a load of
//! 9–12): top pages 184–193 → 59–64 ms, devices 139–167 → 32–76 ms, browsers 118–120 → 20–27
//! ms, every report 0.8–76 ms; the roll-up from scratch 52.2 → 58.9 s.

use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bazaar::analytics::dimensions::{self, Dim};
use bazaar::analytics::events::{self, Event, EVENTS};
use bazaar::analytics::rolled;
use bazaar::analytics::rollup::{self, Level};
use bazaar::analytics::traffic::{self, Range, Source};
use bazaar::analytics::{hll, Day};
use bazaar::config::Settings;
use bazaar::db::Db;
use bazaar::startup::OpenDatabase;
use bson::{doc, Document};
use chrono::{TimeZone, Utc};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Event `i` of `n` spread over `days` days from 1 October 2026.
fn event(i: u64, n: u64, days: u64) -> Event {
    let start = Utc
        .with_ymd_and_hms(2026, 10, 1, 0, 0, 0)
        .single()
        .expect("valid");
    let span_ms = (days * 86_400_000) as i64;
    let at = start + chrono::Duration::milliseconds((i as i64) * span_ms / n.max(1) as i64);
    let visitor = (i * 2_654_435_761) % 100_000;
    let hash = u64::from_be_bytes(
        sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(
            visitor.to_be_bytes(),
        ))[..8]
            .try_into()
            .expect("8 bytes"),
    );
    let kind = match i % 20 {
        0 => "product_viewed",
        1 => "search",
        2 if i % 60 == 2 => "added_to_cart",
        _ => events::VIEW,
    };
    Event {
        at: bson::DateTime::from_chrono(at),
        kind: kind.to_string(),
        path: format!("/products/p{}", i % 500),
        template: "/products/{slug}".to_string(),
        status: 200,
        response_ms: (i % 50) as i32 + 3,
        referrer: i.is_multiple_of(7).then(|| "forum.example".to_string()),
        utm_source: None,
        utm_medium: None,
        utm_campaign: i.is_multiple_of(11).then(|| "spring".to_string()),
        device: if i.is_multiple_of(3) {
            "mobile"
        } else {
            "desktop"
        }
        .to_string(),
        browser: "Firefox".to_string(),
        bot: i.is_multiple_of(50),
        visitor: hash as i64,
        hll: hll::packed(hash),
        sku: None,
        qty: None,
        total_cents: None,
        query: (kind == "search").then(|| format!("q{}", i % 40)),
        results: (kind == "search").then_some((i % 4) as i32),
    }
}

/// Insert `n` events spread over `days` days into `collection`, as the log writes them.
async fn insert(db: &Db, collection: &str, n: u64, days: u64) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let coll = db.collection::<Document>(collection);
    let mut i = 0;
    while i < n {
        let batch: Vec<Document> = (i..(i + 1_000).min(n))
            .map(|j| bson::to_document(&event(j, n, days)).expect("encodes"))
            .collect();
        i += batch.len() as u64;
        coll.insert_many(batch)
            .ordered(false)
            .write_concern(events::write_concern())
            .await?;
    }
    Ok(started.elapsed())
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let day_events = env_or("BENCH_DAY_EVENTS", 100_000);
    let rollup_events = env_or("BENCH_ROLLUP_EVENTS", 1_000_000);
    let dir = tempfile::tempdir()?;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let settings = Settings::load(
        Some(&root.join("config.toml")),
        vec![
            (
                "BAZAAR_DATABASE__PATH".to_string(),
                dir.path().display().to_string(),
            ),
            ("BAZAAR_LOG__LEVEL".to_string(), "error".to_string()),
        ],
    )?;
    let database = OpenDatabase::open(&settings).await?;
    let db = database.db.clone();

    // 1. A TTL index or daily collections (BENCH_DAY_EVENTS=0 skips it).
    let daily = "events_20261001";
    for (name, models) in [(EVENTS, events::indexes()), (daily, events::indexes())] {
        db.collection::<Document>(name)
            .create_indexes(models)
            .await?;
    }
    // The app creates the roll-ups' indexes at start (`startup::indexes`); the bench made
    // none, so its roll-up reads scanned the collections (BENCH_ROLLUP_INDEXES=false, as before).
    if std::env::var("BENCH_ROLLUP_INDEXES").as_deref() != Ok("false") {
        for (name, models) in rollup::indexes() {
            db.collection::<Document>(name)
                .create_indexes(models)
                .await?;
        }
    }
    // The TTL index as the app has it, with a retention the bench's October 2026 events
    // outlive: with 30 days, the TTL monitor may delete most of them while the bench runs
    // once the clock is past November (BENCH_RETENTION_DAYS=30, as before).
    events::ensure_retention(&db, env_or("BENCH_RETENTION_DAYS", 3_650) as u32).await?;
    if day_events > 0 {
        layouts(&db, day_events, daily).await?;
    }
    rollups_and_reports(&db, rollup_events).await?;
    database.close().await;
    Ok(())
}

/// Part 1: a day of events inserted into `events` and into a collection of its own, and expired
/// both ways.
async fn layouts(db: &Db, day_events: u64, daily: &str) -> anyhow::Result<()> {
    let ttl_insert = insert(db, EVENTS, day_events, 1).await?;
    let daily_insert = insert(db, daily, day_events, 1).await?;
    let end_of_day = bson::DateTime::from_chrono(
        Utc.with_ymd_and_hms(2026, 10, 2, 0, 0, 0)
            .single()
            .expect("valid"),
    );
    let started = Instant::now();
    let deleted = db
        .collection::<Document>(EVENTS)
        .delete_many(doc! { "at": { "$lt": end_of_day } })
        .await?
        .deleted_count;
    let ttl_expire = started.elapsed();
    let started = Instant::now();
    db.collection::<Document>(daily).drop().await?;
    let daily_expire = started.elapsed();
    let rate = |d: Duration| day_events as f64 / d.as_secs_f64();
    println!("one day of {day_events} events, embedded store on disk:");
    println!("| layout | insert (events/s) | expire the day |");
    println!("|---|---|---|");
    println!(
        "| one collection, TTL index | {:.0} | {:.0} ms (delete of {deleted}) |",
        rate(ttl_insert),
        ttl_expire.as_secs_f64() * 1000.0
    );
    println!(
        "| a collection per day | {:.0} | {:.1} ms (drop) |",
        rate(daily_insert),
        daily_expire.as_secs_f64() * 1000.0
    );

    Ok(())
}

/// Parts 2 and 3: a month of events rolled up from scratch (unless BENCH_ROLLUP=false), and the
/// report's queries over it.
async fn rollups_and_reports(db: &Db, rollup_events: u64) -> anyhow::Result<()> {
    let took = insert(db, EVENTS, rollup_events, 30).await?;
    println!(
        "{rollup_events} events over 30 days inserted in {:.1} s ({:.0}/s)",
        took.as_secs_f64(),
        rollup_events as f64 / took.as_secs_f64()
    );
    // One minute past midnight after the 30th: the hours are built to 23:00 on the 30th and the
    // dimension documents to its start, so the report's tables read the whole of the 30th from
    // the events: the longest tail they ever read.
    let now = bson::DateTime::from_chrono(
        Utc.with_ymd_and_hms(2026, 10, 31, 0, 1, 0)
            .single()
            .expect("valid"),
    );
    if std::env::var("BENCH_ROLLUP").as_deref() != Ok("false") {
        roll_up(db, now, rollup_events).await?;
    }
    // BENCH_SETTLE_SECONDS: wait before the reports, so the store's background work after the
    // bulk insert (its snapshot) is over, or not, when they run.
    let settle = std::env::var("BENCH_SETTLE_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(settle)).await;
    let kept = db
        .collection::<Document>(EVENTS)
        .estimated_document_count()
        .await?;
    println!("events kept when the reports run: {kept}");
    if std::env::var("BENCH_PROBE").as_deref() == Ok("true") {
        probe(db).await?;
    }
    // BENCH_REPORT_RUNS: time the reports that many times in a row (the machine is shared).
    for _ in 0..env_or("BENCH_REPORT_RUNS", 1) {
        reports(db, rollup_events).await?;
    }
    Ok(())
}

/// Part 2: every level built from scratch, then a run with nothing due.
async fn roll_up(db: &Db, now: bson::DateTime, rollup_events: u64) -> anyhow::Result<()> {
    let started = Instant::now();
    let report = rollup::roll_up(db, now).await?;
    let rolled = started.elapsed();
    let mut documents = Vec::new();
    for level in Level::ALL {
        let n = db
            .collection::<Document>(level.collection())
            .count_documents(doc! {})
            .await?;
        documents.push(format!("{} {n}", level.unit()));
    }
    let mut levels: Vec<String> = report
        .built
        .iter()
        .map(|b| format!("{} {:.1} s", b.level.unit(), b.took.as_secs_f64()))
        .collect();
    if let Some((_, _, took)) = report.dimensions {
        let n = db
            .collection::<Document>(dimensions::DIMENSIONS)
            .count_documents(doc! {})
            .await?;
        let hourly = db
            .collection::<Document>(dimensions::HOURLY)
            .count_documents(doc! {})
            .await?;
        levels.push(format!("dimensions {:.1} s", took.as_secs_f64()));
        documents.push(format!("dimension {n}, hourly dimension {hourly}"));
    }
    println!(
        "roll-up of {rollup_events} events from scratch: {:.1} s ({}; documents: {})",
        rolled.as_secs_f64(),
        levels.join(", "),
        documents.join(", ")
    );
    let started = Instant::now();
    rollup::roll_up(db, now).await?;
    println!(
        "a second run with nothing due: {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(())
}

/// Time `f`, in milliseconds.
async fn timed<T>(
    f: impl std::future::Future<Output = Result<T, bazaar::db::DbError>>,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    f.await?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Part 3: the report's queries over the 30 days, each timed from the events alone (the
/// reports before the dimension roll-ups) and as Admin → Analytics now reads them (roll-ups
/// for the complete periods, events after the watermarks), side by side in one run.
async fn reports(db: &Db, rollup_events: u64) -> anyhow::Result<()> {
    let range = Range::new(
        Day::parse("2026-10-01").expect("day"),
        Day::parse("2026-10-30").expect("day"),
    )
    .expect("range");
    let view = events::VIEW;
    let mut rows = vec![
        (
            "visitors and views by day",
            timed(traffic::series(db, range, Level::Day, Source::Events)).await?,
            timed(rolled::series(db, range, Level::Day)).await?,
        ),
        (
            "visitors over the range",
            timed(traffic::visitors(db, range, Source::Events)).await?,
            timed(rolled::visitors(db, range)).await?,
        ),
    ];
    for (what, field, dim) in [
        ("top pages", "path", Dim::Path),
        ("referrers", "referrer", Dim::Referrer),
        ("campaigns", "utm_campaign", Dim::UtmCampaign),
        ("utm sources", "utm_source", Dim::UtmSource),
        ("devices", "device", Dim::Device),
        ("browsers", "browser", Dim::Browser),
    ] {
        rows.push((
            what,
            timed(traffic::top(db, range, view, field, 20)).await?,
            timed(rolled::top(db, range, dim, 20)).await?,
        ));
    }
    rows.push((
        "top searches",
        timed(traffic::searches(db, range, false, 20)).await?,
        timed(rolled::top(db, range, Dim::Search, 20)).await?,
    ));
    rows.push((
        "searches without results",
        timed(traffic::searches(db, range, true, 20)).await?,
        timed(rolled::top(db, range, Dim::NoResults, 20)).await?,
    ));
    rows.push((
        "funnel",
        timed(traffic::funnel(db, range)).await?,
        timed(rolled::funnel(db, range)).await?,
    ));
    rows.push((
        "slowest pages",
        timed(traffic::slowest(db, range, 5, 20)).await?,
        timed(rolled::slowest(db, range, 5, 20)).await?,
    ));
    println!("report queries over 30 days ({rollup_events} events):");
    println!("| report | events only (before) | roll-ups + events after them (now) |");
    println!("|---|---|---|");
    for (what, before, after) in rows {
        println!("| {what} | {before:.0} ms | {after:.1} ms |");
    }
    Ok(())
}

/// BENCH_PROBE=true: the plan and time of each query the dimension reads make (diagnosis).
async fn probe(db: &Db) -> anyhow::Result<()> {
    let from = bson::DateTime::from_chrono(
        Utc.with_ymd_and_hms(2026, 10, 1, 0, 0, 0)
            .single()
            .expect("t"),
    );
    let mid = bson::DateTime::from_chrono(
        Utc.with_ymd_and_hms(2026, 10, 30, 0, 0, 0)
            .single()
            .expect("t"),
    );
    let to = bson::DateTime::from_chrono(
        Utc.with_ymd_and_hms(2026, 10, 31, 0, 0, 0)
            .single()
            .expect("t"),
    );
    let finds = [
        (
            "dims path p1",
            dimensions::DIMENSIONS,
            doc! { "dim": "path", "key": "/products/p1", "at": { "$gte": from, "$lt": mid } },
        ),
        (
            "dims path all",
            dimensions::DIMENSIONS,
            doc! { "dim": "path", "at": { "$gte": from, "$lt": mid }, "key": { "$ne": bson::Bson::Null } },
        ),
        (
            "daily site",
            Level::Day.collection(),
            doc! { "path": bson::Bson::Null, "at": { "$gte": from, "$lt": mid } },
        ),
        (
            "hourly site",
            Level::Hour.collection(),
            doc! { "path": bson::Bson::Null, "at": { "$gte": mid, "$lt": to } },
        ),
        (
            "tail views",
            EVENTS,
            doc! { "kind": "view", "bot": false, "device": { "$exists": true, "$ne": bson::Bson::Null }, "at": { "$gte": mid, "$lt": to } },
        ),
    ];
    for (what, coll, filter) in finds {
        let explain = db
            .database()
            .run_command(doc! { "explain": { "find": coll, "filter": filter.clone() }, "verbosity": "executionStats" })
            .await?;
        let started = Instant::now();
        let n = futures::TryStreamExt::try_collect::<Vec<Document>>(
            db.collection::<Document>(coll).find(filter).await?,
        )
        .await?
        .len();
        let plan = format!("{:?}", explain.get("queryPlanner"));
        let stats = explain.get_document("executionStats").ok().map(|s| {
            format!(
                "examined {:?} keys {:?}",
                s.get("totalDocsExamined"),
                s.get("totalKeysExamined")
            )
        });
        println!(
            "{what}: {n} docs in {:.1} ms; {stats:?}; {}",
            started.elapsed().as_secs_f64() * 1000.0,
            &plan[..plan.len().min(400)]
        );
    }
    let tail = |group: Document| {
        vec![
            doc! { "$match": { "kind": "view", "bot": false, "at": { "$gte": mid, "$lt": to } } },
            doc! { "$group": group },
        ]
    };
    for (what, pipeline) in [
        (
            "tail count by device",
            tail(doc! { "_id": "$device", "count": { "$sum": 1 } }),
        ),
        (
            "tail addToSet hll by device",
            tail(doc! { "_id": "$device", "count": { "$sum": 1 }, "hll": { "$addToSet": "$hll" } }),
        ),
        (
            "tail push hll by device",
            tail(doc! { "_id": "$device", "count": { "$sum": 1 }, "hll": { "$push": "$hll" } }),
        ),
        (
            "tail addToSet visitor by device",
            tail(
                doc! { "_id": "$device", "count": { "$sum": 1 }, "v": { "$addToSet": "$visitor" } },
            ),
        ),
        (
            "tail addToSet hll by path",
            tail(doc! { "_id": "$path", "count": { "$sum": 1 }, "hll": { "$addToSet": "$hll" } }),
        ),
    ] {
        let started = Instant::now();
        let n = futures::TryStreamExt::try_collect::<Vec<Document>>(
            db.collection::<Document>(EVENTS)
                .aggregate(pipeline)
                .await?,
        )
        .await?
        .len();
        println!(
            "{what}: {n} rows in {:.1} ms",
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
    Ok(())
}
