//! Flash-sale benchmark: add-to-cart throughput when every shopper wants the same product,
//! against the same number of shoppers each adding a different one, and what a drop does to
//! an unrelated page meanwhile.
//!
//! The real application runs in process on in-memory docstore with `FLASH_PRODUCTS` products
//! (default 10 000). Every add is a new shopper's first: each connection loads a product page
//! once for a session cookie and its CSRF token, then posts `POST /cart/items` again and again
//! with that same fresh session, so each post starts a new cart (the session lives in the
//! cookie). Meanwhile 4 connections load an unrelated product page and their p99 is reported.
//!
//! Rows: the unrelated page alone; 64 and 256 shoppers on different products; 64 and 256 on
//! one product each (a fresh product per row, no holders at the start); 64 shoppers on a
//! product already held by `FLASH_HOLDERS` carts (default 10 000). Afterwards it checks the
//! invariants through the database: on every product `qty + reserved + sold` equals what
//! it held before the run and `qty >= 0` (no oversell), every cart line is reserved exactly,
//! and a drop of 500 shoppers racing for 100 units sells exactly 100.
//!
//! `cargo bench -p bazaar --bench flash_sale` (FLASH_SECONDS per row, default 5;
//! FLASH_PRODUCTS; FLASH_HOLDERS; FLASH_ONLY runs only the rows whose name contains it, e.g.
//! `FLASH_ONLY="256 shoppers, the same"` to profile one). The machine's other load skews the figures: compare runs
//! made together.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

// The GET client's other helpers serve the catalog benchmark.
#[allow(dead_code)]
#[path = "load/client.rs"]
mod client;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bazaar::catalog::products::{self, AlbumDetails, Details, NewProduct, Shipping};
use bazaar::config::Settings;
use bazaar::db::Db;
use bazaar::startup::{Application, OpenDatabase};
use bson::{doc, Document};
use client::{gather, Outcome};
use futures::TryStreamExt;

/// Connections loading the unrelated product page during each row.
const BYSTANDERS: u64 = 4;
/// Units each hot product starts with: enough that no add of a timed row is refused.
const HOT_STOCK: i64 = 1_000_000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(bench())
}

/// A product to shop for: its SKU and the page a shopper starts from.
#[derive(Clone)]
struct Item {
    sku: String,
    slug: String,
}

async fn bench() -> anyhow::Result<()> {
    let seconds = Duration::from_secs(env_or("FLASH_SECONDS", 5));
    let products = env_or("FLASH_PRODUCTS", 10_000);
    let holders = env_or("FLASH_HOLDERS", 10_000);
    bazaar::telemetry::init("error", bazaar::telemetry::LogFormat::Text);
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let settings = Settings::load(
        Some(&root.join("config.toml")),
        vec![
            ("BAZAAR_DATABASE__URI".to_string(), "memory".to_string()),
            ("BAZAAR_SERVER__HOST".to_string(), "127.0.0.1".to_string()),
            ("BAZAAR_SERVER__PORT".to_string(), "0".to_string()),
            ("BAZAAR_LOG__LEVEL".to_string(), "error".to_string()),
            // Every shopper comes from 127.0.0.1: lift the per-address cart limit.
            (
                "BAZAAR_CART__NEW_CARTS_PER_HOUR".to_string(),
                "1000000".to_string(),
            ),
        ],
    )?;
    let database = OpenDatabase::open(&settings).await?;
    bazaar::startup::indexes::ensure_indexes(&database.db).await?;
    bazaar::demo::run(&database.db).await?;
    let seeding = Instant::now();
    bazaar::demo::catalog::seed_bulk(&database.db, products.saturating_sub(36))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let db = database.db.clone();
    let everyday = stock_up(&db).await?;
    let hot: Vec<Item> = {
        let mut hot = Vec::new();
        for name in ["hot-64", "hot-256", "hot-held", "sell-out"] {
            let stock = if name == "sell-out" { 100 } else { HOT_STOCK };
            hot.push(hot_product(&db, name, stock).await?);
        }
        hot
    };
    let held = hold(&db, &hot[2], holders).await?;
    let received = stock_totals(&db).await?;
    println!(
        "flash sale: {products} products, {held} carts holding the held product, seeded in \
         {:.1} s; {} s per row, {BYSTANDERS} connections on an unrelated product page",
        seeding.elapsed().as_secs_f64(),
        seconds.as_secs()
    );

    let app = Application::build_with_database(settings, database)
        .await
        .map_err(|(e, _)| e)?;
    let addr = format!("127.0.0.1:{}", app.port());
    let base = format!("http://{addr}");
    let handle = app.server_handle();
    let server = tokio::spawn(app.run_until_stopped());

    let bystander = everyday[everyday.len() - 1].slug.clone();
    let bystander_path = format!("/products/{bystander}");
    let quiet = client::run(
        &addr,
        BYSTANDERS,
        seconds,
        Arc::new(move |_| bystander_path.clone()),
    )
    .await;
    println!();
    println!("| scenario | adds/s | p50 ms | p99 ms | refused | errors | unrelated page p99 ms |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| no drop (the unrelated page alone) | - | - | - | - | {} | {:.1} |",
        quiet.errors,
        quiet.percentile_ms(99.0)
    );
    let spread: Arc<Vec<Item>> = Arc::new(everyday[..everyday.len() - 1].to_vec());
    let rows: Vec<(String, u64, Arc<Vec<Item>>)> = vec![
        (
            "64 shoppers, different products".into(),
            64,
            Arc::clone(&spread),
        ),
        (
            "256 shoppers, different products".into(),
            256,
            Arc::clone(&spread),
        ),
        (
            "64 shoppers, the same product".into(),
            64,
            Arc::new(vec![hot[0].clone()]),
        ),
        (
            "256 shoppers, the same product".into(),
            256,
            Arc::new(vec![hot[1].clone()]),
        ),
        (
            format!("64 shoppers, the same product held by {held} carts"),
            64,
            Arc::new(vec![hot[2].clone()]),
        ),
    ];
    let only = std::env::var("FLASH_ONLY").unwrap_or_default();
    for (name, shoppers, items) in rows {
        if !name.contains(only.as_str()) {
            continue;
        }
        // Sessions first: the unrelated page is measured while the adds run, not meanwhile.
        let ready = sessions(&base, shoppers, &items).await;
        let bystander_path = format!("/products/{bystander}");
        let (adds, during) = tokio::join!(
            adds_in_sessions(&base, ready, seconds, items),
            client::run(
                &addr,
                BYSTANDERS,
                seconds,
                Arc::new(move |_| bystander_path.clone()),
            )
        );
        let (adds, refused) = adds;
        println!(
            "| {name} | {:.0} | {:.1} | {:.1} | {refused} | {} | {:.1} |",
            adds.per_second(),
            adds.percentile_ms(50.0),
            adds.percentile_ms(99.0),
            adds.errors + during.errors,
            during.percentile_ms(99.0)
        );
    }

    // The drop itself: 500 shoppers at once for the last 100 units.
    let (sold_out, _) =
        add_to_carts(&base, 500, Duration::ZERO, Arc::new(vec![hot[3].clone()])).await;

    println!();
    let last = products::by_sku(&db, &bazaar::domain::Sku::parse(&hot[3].sku)?)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the sell-out product vanished"))?;
    let holding = bazaar::stock::reservations_of(&db, &last.sku).await?.len();
    println!(
        "sell-out: 500 shoppers for 100 units: {} added, {} left on sale, {holding} reservations",
        sold_out.requests, last.qty,
    );
    anyhow::ensure!(
        sold_out.requests == 100 && last.qty == 0 && holding == 100 && last.reserved == 100,
        "the sell-out did not sell exactly 100"
    );
    check_invariants(&db, &received).await?;
    println!(
        "invariants: stock invariant on every product, no oversell, every cart line reserved: ok"
    );
    // Stopping the server shuts the database client down: checks first.
    handle.stop(true).await;
    let _ = server.await;
    Ok(())
}

/// Every generated product's stock set high, so every add of a "different products" row
/// succeeds; returns up to 2 000 of them.
async fn stock_up(db: &Db) -> anyhow::Result<Vec<Item>> {
    let coll = db.collection::<Document>(products::COLLECTION);
    coll.update_many(doc! {}, doc! { "$set": { "qty": HOT_STOCK } })
        .await?;
    let found: Vec<Document> = coll
        .find(doc! { "status": { "$nin": ["draft", "archived"] } })
        .projection(doc! { "sku": 1, "slug": 1 })
        .limit(2_000)
        .await?
        .try_collect()
        .await?;
    Ok(found
        .iter()
        .filter_map(|d| {
            Some(Item {
                sku: d.get_str("sku").ok()?.to_string(),
                slug: d.get_str("slug").ok()?.to_string(),
            })
        })
        .collect())
}

async fn hot_product(db: &Db, name: &str, stock: i64) -> anyhow::Result<Item> {
    let title = format!("Limited edition {name}");
    let p = products::create(
        db,
        NewProduct {
            sku: bazaar::domain::Sku::parse(&format!("drop-{name}")).expect("a valid SKU"),
            slug: bazaar::domain::Slug::parse(&format!("drop-{name}")).expect("a valid slug"),
            title: title.clone(),
            description: "Only while stocks last.".to_string(),
            list_price: bazaar::domain::Money::from_cents(5000),
            retail_price: bazaar::domain::Money::from_cents(4000),
            categories: Vec::new(),
            details: Details::Album(AlbumDetails {
                title,
                artist: "The Droppers".to_string(),
                genre: vec!["Jazz".to_string()],
                tracks: vec!["One".to_string()],
                issue_date: bson::DateTime::from_millis(0),
                label: "Drop".to_string(),
            }),
            qty: stock,
            featured: false,
            shipping: Shipping {
                weight: 300,
                ..Shipping::default()
            },
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Item {
        sku: p.sku.to_string(),
        slug: p.slug.to_string(),
    })
}

/// `holders` carts, each holding one unit of `item` with its reservation, written directly
/// (carts one by one, the reservations in one update): returns how many.
async fn hold(db: &Db, item: &Item, holders: u64) -> anyhow::Result<u64> {
    use bazaar::cart::{self, store, CartLine, LineDetails};
    let now = db.now();
    let mut entries = Vec::new();
    for _ in 0..holders {
        let c = cart::create(db).await?;
        let line = CartLine {
            sku: bazaar::domain::Sku::parse(&item.sku)?,
            qty: 1,
            details: LineDetails {
                title: item.slug.clone(),
                slug: item.slug.clone(),
                price: bazaar::domain::Money::from_cents(4000),
                weight: 300,
            },
        };
        anyhow::ensure!(
            store::push_line(db, &c.id, &line, now).await?,
            "a new cart refused its line"
        );
        entries.push(doc! {
            "sku": &item.sku, "cart_id": c.id, "qty": 1_i64, "timestamp": now, "ops": [],
        });
    }
    let moved = db
        .collection::<Document>(products::COLLECTION)
        .update_one(
            doc! { "sku": &item.sku, "qty": { "$gte": holders as i64 } },
            doc! { "$inc": { "qty": -(holders as i64), "reserved": holders as i64 } },
        )
        .await?;
    if moved.modified_count == 1 {
        db.collection::<Document>(bazaar::stock::COLLECTION)
            .insert_many(entries)
            .await?;
    }
    anyhow::ensure!(
        moved.modified_count == 1,
        "the holders' reservations were not made"
    );
    Ok(holders)
}

/// `shoppers` connections adding one unit of a product from `items` (in turn) to a new cart
/// each time, for `duration` (or once each for a zero duration). Returns the successful adds
/// (timed) and how many were refused (sold out).
async fn add_to_carts(
    base: &str,
    shoppers: u64,
    duration: Duration,
    items: Arc<Vec<Item>>,
) -> (Outcome, u64) {
    let sessions = sessions(base, shoppers, &items).await;
    adds_in_sessions(base, sessions, duration, items).await
}

/// One fresh session per shopper, each from the page of the product it starts with.
async fn sessions(base: &str, shoppers: u64, items: &[Item]) -> Vec<Option<Session>> {
    let mut sessions = Vec::new();
    for s in 0..shoppers {
        let item = &items[s as usize % items.len()];
        sessions.push(fresh_session(base, &item.slug).await);
    }
    sessions
}

/// A client keeping no cookies, a session cookie and its CSRF token.
type Session = (reqwest::Client, String, String);

/// [`add_to_carts`] with the sessions made beforehand, so the timed part is the adds alone.
async fn adds_in_sessions(
    base: &str,
    sessions: Vec<Option<Session>>,
    duration: Duration,
    items: Arc<Vec<Item>>,
) -> (Outcome, u64) {
    let started = Instant::now();
    let deadline = started + duration;
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (s, session) in sessions.into_iter().enumerate() {
        let (base, items, refused) = (base.to_string(), Arc::clone(&items), Arc::clone(&refused));
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let Some((client, cookie, token)) = session else {
                return (latencies, 1);
            };
            let mut i = s * 7919;
            loop {
                let item = &items[i % items.len()];
                i += 1;
                let t = Instant::now();
                let sent = client
                    .post(format!("{base}/cart/items"))
                    .header(reqwest::header::COOKIE, &cookie)
                    .form(&[
                        ("csrf_token", token.as_str()),
                        ("sku", &item.sku),
                        ("qty", "1"),
                    ])
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status() == reqwest::StatusCode::SEE_OTHER => {
                        let to_cart = r
                            .headers()
                            .get(reqwest::header::LOCATION)
                            .is_some_and(|l| l.as_bytes() == b"/cart");
                        let _ = r.bytes().await;
                        if to_cart {
                            latencies.push(t.elapsed().as_micros() as u64);
                        } else {
                            refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    _ => errors += 1,
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
            (latencies, errors)
        }));
    }
    let outcome = gather(tasks, started).await;
    (outcome, refused.load(std::sync::atomic::Ordering::Relaxed))
}

/// A new visitor: a client that keeps no cookies, the session cookie a product page set, and
/// the CSRF token of that session.
async fn fresh_session(base: &str, slug: &str) -> Option<Session> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let response = client
        .get(format!("{base}/products/{slug}"))
        .send()
        .await
        .ok()?;
    let cookie: Vec<String> = response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_string))
        .collect();
    let page = response.text().await.ok()?;
    let html = scraper::Html::parse_document(&page);
    let selector = scraper::Selector::parse("input[name=csrf_token]").ok()?;
    let token = html
        .select(&selector)
        .next()?
        .value()
        .attr("value")?
        .to_string();
    Some((client, cookie.join("; "), token))
}

/// Per product, `qty + reserved + sold`: what it has received (the stock invariant).
async fn stock_totals(db: &Db) -> anyhow::Result<HashMap<String, i64>> {
    let all: Vec<products::Product> = products::collection(db)
        .find(doc! {})
        .await?
        .try_collect()
        .await?;
    Ok(all
        .into_iter()
        .map(|p| (p.sku.to_string(), p.qty + p.reserved + p.sold))
        .collect())
}

/// The stock invariant against `received`, no oversell, and every active cart's lines held
/// exactly by reservations (and no reservation without its line).
async fn check_invariants(db: &Db, received: &HashMap<String, i64>) -> anyhow::Result<()> {
    use bazaar::cart::{self, CartStatus};
    let all: Vec<products::Product> = products::collection(db)
        .find(doc! {})
        .await?
        .try_collect()
        .await?;
    let mut reserved: HashMap<(String, String), i64> = HashMap::new();
    let held: Vec<bazaar::stock::Reservation> = db
        .collection::<bazaar::stock::Reservation>(bazaar::stock::COLLECTION)
        .find(doc! {})
        .await?
        .try_collect()
        .await?;
    let mut held_of: HashMap<String, i64> = HashMap::new();
    for r in &held {
        *held_of.entry(r.sku.to_string()).or_default() += r.qty;
        if r.qty != 0 {
            *reserved
                .entry((r.holder.to_string(), r.sku.to_string()))
                .or_default() += r.qty;
        }
    }
    for p in &all {
        anyhow::ensure!(p.qty >= 0, "{}: oversold, qty {}", p.sku, p.qty);
        anyhow::ensure!(
            Some(&(p.qty + p.reserved + p.sold)) == received.get(p.sku.as_str()),
            "{}: qty {} + reserved {} + sold {} differs from {:?} before the run",
            p.sku,
            p.qty,
            p.reserved,
            p.sold,
            received.get(p.sku.as_str())
        );
        let in_reservations = held_of.get(p.sku.as_str()).copied().unwrap_or(0);
        anyhow::ensure!(
            in_reservations == p.reserved,
            "{}: reservations hold {in_reservations}, the product counts {} reserved",
            p.sku,
            p.reserved
        );
    }
    let carts: Vec<cart::Cart> = cart::collection(db)
        .find(doc! {})
        .await?
        .try_collect()
        .await?;
    for c in &carts {
        let in_use = matches!(c.status, CartStatus::Active | CartStatus::Pending);
        for line in &c.items {
            let held = reserved
                .remove(&(c.id.to_string(), line.sku.to_string()))
                .unwrap_or(0);
            let expected = if in_use { line.qty } else { 0 };
            anyhow::ensure!(
                held == expected,
                "cart {} line {}: holds {} but {held} reserved",
                c.id,
                line.sku,
                line.qty
            );
        }
    }
    anyhow::ensure!(
        reserved.values().all(|n| *n == 0),
        "{} reservations without a cart line",
        reserved.values().filter(|n| **n != 0).count()
    );
    Ok(())
}
