//! The bazaar binary killed with SIGKILL in the middle of concurrent checkouts, then restarted on
//! the same data directory: no order a shopper saw confirmed is lost, every charge the gateway
//! made has exactly one order or was refunded, and every product's stock still adds up.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bazaar::cart::{self, CartStatus};
use bazaar::catalog::products::{self, Product};
use bazaar::checkout::gateway::{StoredCharge, TEST_GATEWAY_CHARGES};
use bazaar::checkout::orders::{self, Order};
use bazaar::checkout::payments::{self, PaymentRecord};
use bazaar::config::Settings;
use bazaar::db::Db;
use bazaar::startup::OpenDatabase;
use bson::doc;
use futures::TryStreamExt;

use crate::common::process::{self, BazaarProcess};

/// A checkout pending this long after the crash is recovered (seconds); well above how long a
/// checkout takes here, so recovery never mistakes a live one for a crashed one.
const RECOVER_AFTER_SECS: u64 = 3;
const SHOPPERS: usize = 8;
/// Units of every product on sale at the start.
const STOCK: i64 = 5_000;

/// The environment the binary runs with: embedded store in `dir`, any free port, the jobs every
/// second so recovery runs soon after a restart.
fn server_env(dir: &Path) -> Vec<(String, String)> {
    [
        ("BAZAAR_DATABASE__URI", "embedded"),
        ("BAZAAR_DATABASE__PATH", &dir.display().to_string()),
        ("BAZAAR_SERVER__HOST", "127.0.0.1"),
        ("BAZAAR_SERVER__PORT", "0"),
        ("BAZAAR_SERVER__WORKERS", "2"),
        ("BAZAAR_LOG__LEVEL", "warn"),
        ("BAZAAR_CART__JOBS_EVERY_SECS", "1"),
        (
            "BAZAAR_CART__RECOVER_CHECKOUT_AFTER_SECS",
            &RECOVER_AFTER_SECS.to_string(),
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The bazaar binary running as a child process on the data directory.
struct Server {
    process: BazaarProcess,
}

impl Server {
    fn start(dir: &Path) -> Server {
        Server {
            process: process::launch(dir, server_env(dir)).wait(Duration::from_secs(60)),
        }
    }

    /// SIGKILL: no request finishes, nothing is flushed.
    fn kill(mut self) {
        self.process.kill();
    }

    /// SIGTERM, then wait for the store to close.
    fn stop(mut self) {
        let pid = self.process.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM sent");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.process.child.try_wait().expect("wait") {
                assert!(
                    status.success(),
                    "bazaar exited with {status}; its log:\n{}",
                    self.process.log_text()
                );
                return;
            }
            if Instant::now() > deadline {
                self.process.kill();
                panic!("bazaar did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_lines(&self, containing: &str) -> usize {
        self.process.log_lines(containing)
    }

    fn address(&self) -> &str {
        &self.process.address
    }
}

/// The data directory opened in-process (the server must be stopped).
async fn open_store(dir: &Path) -> OpenDatabase {
    let settings = Settings::load(None, server_env(dir)).expect("settings");
    OpenDatabase::open(&settings).await.expect("store opens")
}

async fn all<T>(db: &Db, collection: &str) -> Vec<T>
where
    T: serde::de::DeserializeOwned + Send + Sync + Unpin,
{
    db.collection::<T>(collection)
        .find(doc! {})
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("read")
}

fn units_held(p: &Product) -> i64 {
    p.qty + p.reserved + p.sold
}

/// Everything is settled when no cart is stuck paying and no payment attempt is unfinished.
async fn unsettled(db: &Db) -> (usize, usize) {
    let carts: Vec<cart::Cart> = all(db, cart::COLLECTION).await;
    let pending = carts
        .iter()
        .filter(|c| c.status == CartStatus::Pending)
        .count();
    let attempts: Vec<PaymentRecord> = all(db, payments::COLLECTION).await;
    let open = attempts.iter().filter(|a| a.state.is_unfinished()).count();
    (pending, open)
}

/// The promises of the issue, checked on the data directory after recovery.
async fn assert_nothing_lost(
    db: &Db,
    received: &BTreeMap<String, i64>,
    confirmed: &BTreeSet<String>,
    round: usize,
) {
    let all_orders: Vec<Order> = all(db, orders::COLLECTION).await;
    let numbers: BTreeSet<String> = all_orders.iter().map(|o| o.number.to_string()).collect();
    let lost: Vec<&String> = confirmed.difference(&numbers).collect();
    assert!(
        lost.is_empty(),
        "round {round}: orders confirmed to shoppers are gone: {lost:?}"
    );
    let mut by_cart: HashMap<&str, Vec<&Order>> = HashMap::new();
    for o in &all_orders {
        by_cart.entry(o.cart_id.as_str()).or_default().push(o);
    }
    let charges: Vec<StoredCharge> = all(db, TEST_GATEWAY_CHARGES).await;
    let mut refunded = 0;
    for charge in &charges {
        let orders_for = by_cart
            .get(charge.idempotency_key.as_str())
            .cloned()
            .unwrap_or_default();
        if charge.refunded {
            refunded += 1;
            assert!(
                orders_for.is_empty(),
                "round {round}: charge {} was refunded but has an order",
                charge.reference
            );
        } else {
            assert_eq!(
                orders_for.len(),
                1,
                "round {round}: charge {} (cart {}) has {} orders and no refund",
                charge.reference,
                charge.idempotency_key,
                orders_for.len()
            );
            assert_eq!(orders_for[0].payment.reference, charge.reference);
            assert_eq!(orders_for[0].total, charge.amount);
        }
    }
    let charged: BTreeSet<&str> = charges
        .iter()
        .filter(|c| !c.refunded)
        .map(|c| c.reference.as_str())
        .collect();
    for o in &all_orders {
        assert!(
            charged.contains(o.payment.reference.as_str()),
            "round {round}: order {} has no charge",
            o.number
        );
    }
    // Stock moves the kill interrupted are finished as the jobs would after their grace period.
    bazaar::stock::recover_pending(db, std::time::Duration::ZERO)
        .await
        .expect("recover pending stock moves");
    let all_products: Vec<Product> = all(db, products::COLLECTION).await;
    let reservations: Vec<bazaar::stock::Reservation> = all(db, bazaar::stock::COLLECTION).await;
    for p in &all_products {
        assert!(p.qty >= 0, "round {round}: {} qty {}", p.sku, p.qty);
        assert_eq!(
            units_held(p),
            received[p.sku.as_str()],
            "round {round}: {}: qty {} + reserved {} + sold {} != received",
            p.sku,
            p.qty,
            p.reserved,
            p.sold
        );
        let held: i64 = reservations
            .iter()
            .filter(|r| r.sku == p.sku)
            .map(|r| r.qty)
            .sum();
        assert_eq!(
            held, p.reserved,
            "round {round}: {}: reservations hold {held}, the product counts {}",
            p.sku, p.reserved
        );
    }
    eprintln!(
        "round {round}: {} orders ({} confirmed to shoppers so far), {} charges, {refunded} refunded",
        all_orders.len(),
        confirmed.len(),
        charges.len()
    );
}

/// One shopper buying one unit at a time until the server goes away; returns the order numbers
/// the shop confirmed (a redirect to the order page).
async fn shop(
    address: String,
    products: Arc<Vec<(String, String)>>,
    who: usize,
    stop: Arc<AtomicBool>,
) -> Vec<String> {
    let mut confirmed = Vec::new();
    let Ok(client) = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
    else {
        return confirmed;
    };
    let (_, slug) = &products[who % products.len()];
    let Ok(page) = client
        .get(format!("{address}/products/{slug}"))
        .send()
        .await
    else {
        return confirmed;
    };
    let Ok(page) = page.text().await else {
        return confirmed;
    };
    let token = {
        let doc = scraper::Html::parse_document(&page);
        let selector = scraper::Selector::parse("input[name=csrf_token]").expect("selector");
        match doc
            .select(&selector)
            .next()
            .and_then(|e| e.value().attr("value"))
        {
            Some(t) => t.to_string(),
            None => return confirmed,
        }
    };
    let mut n = who * 13;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let (sku, _) = &products[n % products.len()];
        let added = client
            .post(format!("{address}/cart/items"))
            .form(&[("sku", sku.as_str()), ("qty", "1"), ("csrf_token", &token)])
            .send()
            .await;
        if added.is_err() {
            break;
        }
        // Now and then a declined card, so declined attempts are in the mix too.
        let card = if n.is_multiple_of(7) {
            "4000000000000002"
        } else {
            "4242424242424242"
        };
        let paid = client
            .post(format!("{address}/checkout"))
            .form(&[
                ("email", "crash@example.com"),
                ("name", "Crash Tester"),
                ("street", "1 Kill Street"),
                ("city", "Signal"),
                ("postcode", "9"),
                ("country", "United States"),
                ("card_number", card),
                ("expiry", "12/39"),
                ("cvc", "123"),
                ("csrf_token", &token),
            ])
            .send()
            .await;
        let Ok(paid) = paid else { break };
        let location = paid
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if let Some(number) = location.strip_prefix("/orders/") {
            confirmed.push(number.to_string());
        }
    }
    confirmed
}

/// Restart until recovery has settled every interrupted checkout, then check everything.
async fn restart_and_check(
    dir: &Path,
    received: &BTreeMap<String, i64>,
    confirmed: &BTreeSet<String>,
    round: usize,
) {
    for attempt in 0..5 {
        let server = Server::start(dir);
        // The jobs run every second and take a checkout pending this long for a crashed one.
        tokio::time::sleep(Duration::from_secs(RECOVER_AFTER_SECS + 2)).await;
        let recovered = server.log_lines("recovered") + server.log_lines("refunded");
        server.stop();
        let store = open_store(dir).await;
        let (pending, open) = unsettled(&store.db).await;
        if pending + open == 0 {
            if recovered > 0 {
                eprintln!("round {round}: recovery logged {recovered} lines");
            }
            assert_nothing_lost(&store.db, received, confirmed, round).await;
            store.close().await;
            return;
        }
        eprintln!(
            "round {round}, restart {attempt}: {pending} carts pending, {open} payments open; \
             waiting for recovery"
        );
        store.close().await;
    }
    panic!("round {round}: recovery never settled the interrupted checkouts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn orders_confirmed_before_a_sigkill_survive_and_every_charge_has_its_order_or_a_refund() {
    let started = Instant::now();
    let data = tempfile::tempdir().expect("tempdir");
    let dir: PathBuf = data.path().to_path_buf();
    // First start seeds the demo catalog; then plenty of stock, so shoppers never run out.
    Server::start(&dir).stop();
    let (received, catalog) = {
        let store = open_store(&dir).await;
        store
            .db
            .collection::<bson::Document>(products::COLLECTION)
            .update_many(doc! {}, doc! { "$set": { "qty": STOCK } })
            .await
            .expect("stock received");
        let all_products: Vec<Product> = all(&store.db, products::COLLECTION).await;
        store.close().await;
        let received: BTreeMap<String, i64> = all_products
            .iter()
            .map(|p| (p.sku.to_string(), units_held(p)))
            .collect();
        let catalog: Vec<(String, String)> = all_products
            .iter()
            .map(|p| (p.sku.to_string(), p.slug.to_string()))
            .collect();
        (received, Arc::new(catalog))
    };
    assert!(!catalog.is_empty(), "the demo catalog was seeded");
    let mut confirmed = BTreeSet::new();
    for (round, kill_after_ms) in [700_u64, 1_300, 2_100].into_iter().enumerate() {
        let server = Server::start(&dir);
        let stop = Arc::new(AtomicBool::new(false));
        let shoppers: Vec<_> = (0..SHOPPERS)
            .map(|who| {
                tokio::spawn(shop(
                    server.address().to_string(),
                    Arc::clone(&catalog),
                    who,
                    Arc::clone(&stop),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(kill_after_ms)).await;
        server.kill();
        stop.store(true, Ordering::Relaxed);
        let before = confirmed.len();
        for s in shoppers {
            confirmed.extend(s.await.expect("shopper task"));
        }
        eprintln!(
            "round {round}: killed after {kill_after_ms} ms with {} new orders confirmed",
            confirmed.len() - before
        );
        restart_and_check(&dir, &received, &confirmed, round).await;
    }
    assert!(
        !confirmed.is_empty(),
        "the shoppers placed orders before the kills"
    );
    eprintln!(
        "crash test: {} orders confirmed over 3 kills in {:.1} s",
        confirmed.len(),
        started.elapsed().as_secs_f64()
    );
}
