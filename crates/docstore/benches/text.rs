//! Text search: `$text` latency per query shape (one word, several words, a phrase, a negation)
//! at each collection size, and what the text index costs in memory per document.
//!
//! `cargo bench -p docstore --bench text`. `TEXT_DOCS` sets the sizes (comma-separated, default
//! `10000,100000`), `TEXT_QUERIES` the timed queries per shape and size (default 50). The
//! queries are the storefront's: `$text` sorted by `{$meta: "textScore"}` then `_id`, the score
//! projected, `limit(21)` (one page and one more, see the app's `search::search`).

use bson::{doc, Document};
use docstore::{Config, Server};
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection};
use std::time::{Duration, Instant};

/// The query shapes timed, with their search strings.
const SHAPES: &[(&str, &str)] = &[
    ("one word", "jazz"),
    ("several words", "jazz piano night"),
    ("phrase", "\"kind of blue\""),
    ("negation", "jazz -blue"),
];

/// Filler vocabulary: product text is mostly words that are rare on their own.
const FILLER: usize = 5_000;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sizes() -> Vec<u64> {
    let raw = std::env::var("TEXT_DOCS").unwrap_or_else(|_| "10000,100000".to_string());
    let sizes: Vec<u64> = raw
        .split(',')
        .filter_map(|s| s.trim().replace('_', "").parse().ok())
        .filter(|&n| n > 0)
        .collect();
    if sizes.is_empty() {
        vec![10_000, 100_000]
    } else {
        sizes
    }
}

/// Resident set size of this process in bytes (`VmRSS` in `/proc/self/status`).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

/// A deterministic pseudo-random number from `i` and a salt.
fn mix(i: u64, salt: u64) -> u64 {
    let mut x = i
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(salt.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 29)
}

/// A filler word (letters only, so it is one token and never a stop word).
fn filler(n: u64) -> String {
    let mut n = n % FILLER as u64;
    let mut word = String::from("q");
    loop {
        word.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
        if n == 0 {
            break;
        }
    }
    word
}

/// A product-like document: about 1 in 8 is jazz, 1 in 12 mentions blue, 1 in 40 says "kind
/// of blue", 1 in 30 piano, 1 in 25 night; the description is 30 filler words.
fn product(i: u64) -> Document {
    let r = |salt| mix(i, salt);
    let mut title: Vec<String> = (0..3).map(|k| filler(r(k))).collect();
    if r(10) % 12 == 0 {
        title.push("Blue".into());
    }
    if r(11) % 40 == 0 {
        title.push("Kind of Blue".into());
    }
    if r(12) % 25 == 0 {
        title.push("Night".into());
    }
    let genre = if r(13) % 8 == 0 { "Jazz" } else { "Rock" };
    let mut description: Vec<String> = (0..30).map(|k| filler(r(100 + k))).collect();
    if r(14) % 30 == 0 {
        description.push("solo piano".into());
    }
    if r(15) % 16 == 0 {
        description.push("a kind of jazz".into());
    }
    doc! {
        "_id": i as i64,
        "title": title.join(" "),
        "details": { "artist": format!("{} {}", filler(r(20)), filler(r(21))), "genre": [genre] },
        "tags": [filler(r(30)), filler(r(31))],
        "description": description.join(" "),
    }
}

async fn client(uri: &str) -> Client {
    let mut o = ClientOptions::parse(uri).await.unwrap();
    o.max_pool_size = Some(8);
    Client::with_options(o).unwrap()
}

/// Loads `n` documents, then builds the text index; returns the RSS growth per document of the
/// documents and of the index.
async fn load(c: &Collection<Document>, n: u64) -> (f64, f64) {
    let before = rss_bytes();
    let mut next = 0u64;
    while next < n {
        let batch: Vec<Document> = (next..(next + 10_000).min(n)).map(product).collect();
        next += batch.len() as u64;
        c.insert_many(batch).await.unwrap();
    }
    let loaded = rss_bytes();
    let weights = doc! {
        "title": 10, "details.artist": 6, "details.genre": 3, "tags": 3, "description": 1,
    };
    let mut keys = Document::new();
    for field in weights.keys() {
        keys.insert(field.clone(), "text");
    }
    c.client()
        .database(&c.namespace().db)
        .run_command(doc! {
            "createIndexes": c.name(),
            "indexes": [{
                "key": keys, "name": "search", "weights": weights,
                "language_override": "search_language",
            }],
        })
        .await
        .unwrap();
    let indexed = rss_bytes();
    (
        loaded.saturating_sub(before) as f64 / n as f64,
        indexed.saturating_sub(loaded) as f64 / n as f64,
    )
}

/// One storefront search; returns the documents it found.
async fn search(c: &Collection<Document>, text: &str) -> usize {
    let mut cursor = c
        .find(doc! { "$text": { "$search": text } })
        .projection(doc! { "title": 1, "score": { "$meta": "textScore" } })
        .sort(doc! { "score": { "$meta": "textScore" }, "_id": 1 })
        .limit(21)
        .await
        .unwrap();
    let mut got = 0;
    while cursor.advance().await.unwrap() {
        got += 1;
    }
    got
}

fn percentile(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    times[((times.len() as f64 * q) as usize).min(times.len() - 1)]
}

/// Index keys and documents the storefront's query for `text` examines (`explain`), as
/// "keys/docs".
async fn examined(c: &Collection<Document>, text: &str) -> String {
    let explained = c
        .client()
        .database(&c.namespace().db)
        .run_command(doc! {
            "explain": {
                "find": c.name(),
                "filter": { "$text": { "$search": text } },
                "projection": { "title": 1, "score": { "$meta": "textScore" } },
                "sort": { "score": { "$meta": "textScore" }, "_id": 1 },
                "limit": 21,
            },
            "verbosity": "executionStats",
        })
        .await
        .unwrap();
    let stats = explained.get_document("executionStats").ok();
    let field = |name: &str| {
        stats
            .and_then(|s| s.get(name))
            .map(|v| v.to_string())
            .unwrap_or_else(|| "?".to_string())
    };
    format!(
        "{}/{}",
        field("totalKeysExamined"),
        field("totalDocsExamined")
    )
}

/// How many documents match `text` in all (no limit), for the table.
async fn matching(c: &Collection<Document>, text: &str) -> u64 {
    c.count_documents(doc! { "$text": { "$search": text } })
        .await
        .unwrap()
}

#[tokio::main]
async fn main() {
    let sizes = sizes();
    let queries: usize = env_or("TEXT_QUERIES", 50);
    println!("docstore $text (in-process server, official driver, {queries} timed queries/shape)");
    let server = Server::start(Config::in_memory()).await.unwrap();
    let c = client(&server.uri()).await;
    let db = c.database("bench");
    let mut collections = Vec::new();
    for &n in &sizes {
        let items = db.collection::<Document>(&format!("products_{n}"));
        let (doc_bytes, index_bytes) = load(&items, n).await;
        println!(
            "{n:>8} docs: RSS per document {doc_bytes:.0} B for the documents, \
             {index_bytes:.0} B for the text index"
        );
        collections.push((n, items));
    }
    println!(
        "{:>8} {:<14} {:>9} {:>10} {:>10} {:>10} {:>16}",
        "docs", "shape", "matching", "p50 (ms)", "p99 (ms)", "max (ms)", "keys/docs exam."
    );
    for (n, items) in &collections {
        for (shape, text) in SHAPES {
            // Warm-up (and the result count, which must not change between builds).
            let found = search(items, text).await;
            let mut times = Vec::with_capacity(queries);
            for _ in 0..queries {
                let start = Instant::now();
                assert_eq!(search(items, text).await, found);
                times.push(start.elapsed());
            }
            let total = matching(items, text).await;
            let p50 = percentile(&mut times, 0.5);
            let p99 = percentile(&mut times, 0.99);
            let max = *times.last().unwrap();
            let examined = examined(items, text).await;
            println!(
                "{:>8} {:<14} {:>9} {:>10.2} {:>10.2} {:>10.2} {:>16}",
                n,
                shape,
                total,
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3,
                max.as_secs_f64() * 1e3,
                examined
            );
        }
    }
    db.drop().await.unwrap();
    drop(c);
    server.shutdown().await;
}
