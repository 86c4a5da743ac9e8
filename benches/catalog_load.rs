//! Load benchmark for the storefront. The first phase (`pages`, see `load/pages.rs`) starts
//! the real `bazaar` binary on a seeded catalog on disk and a minimal actix-web + askama server
//! (the ceiling), drives both with the same client and prints requests/s, p50, p99 and the
//! share of the ceiling for each main page, plus RSS, seeding and start-up time.
//!
//! The later phases: the product list, a category page and a product page, then
//! shopping sessions (add to cart + cart page, and a checkout), with 10 000 products on in-memory
//! docstore and 64 concurrent connections or sessions; then checkouts on the embedded store with
//! its data on disk, once with `database.write_concern = "durable"` and once with `"fast"`.
//!
//! A separate phase loads discussion pages with 100 and with 10 000 threaded comments: the first
//! page, a page deep into the discussion, and a permalink deep in a thread.
//!
//! A blog phase loads the tumblelog stream `/blog/` with 1 000 published posts of mixed types:
//! the first page and a page deep in the stream.
//!
//! `cargo bench -p bazaar --bench catalog_load` (BENCH_SECONDS, BENCH_PRODUCTS and
//! BENCH_CONNECTIONS override the defaults; BENCH_ONLY=pages runs only the pages phase
//! (BENCH_BASELINE=path/to/another/bazaar adds that binary on a copy of the same data,
//! BENCH_DEEP=0 leaves out the deep pages, BENCH_CATEGORY names the category, default music,
//! BENCH_POSTS the generated blog posts, default 1 000, BENCH_CONTENT=0 leaves out the content
//! pages, BENCH_PAGES=blog,tag measures only the pages whose label contains one of the words),
//! BENCH_ONLY=comments runs only the comments phase,
//! BENCH_ONLY=blog only the blog phase, BENCH_ONLY=durability only the on-disk checkouts).
//! Prints requests/s and latency percentiles.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "load/ceiling.rs"]
mod ceiling;
#[path = "load/client.rs"]
mod client;
#[path = "load/pages.rs"]
mod pages;

/// The allocator the `bazaar` binary uses (src/main.rs), so the ceiling server (this binary
/// started again) and the in-process phases measure the same allocator as the real server.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bazaar::config::Settings;
use bazaar::startup::{Application, OpenDatabase};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

use client::{gather, Outcome, PickPath as PickUrl};

/// Hit the URLs `pick` chooses from `connections` concurrent clients for `duration`.
async fn run_load(base: &str, connections: u64, duration: Duration, pick: PickUrl) -> Outcome {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for c in 0..connections {
        // One client per connection: each keeps its own keep-alive connection, like a browser.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .expect("client");
        let base = base.to_string();
        let pick = Arc::clone(&pick);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let mut i = c * 7919;
            while Instant::now() < deadline {
                let url = format!("{base}{}", pick(i));
                i += 1;
                let t = Instant::now();
                match client.get(&url).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        latencies.push(t.elapsed().as_micros() as u64);
                    }
                    _ => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    gather(tasks, started).await
}

/// What each shopping session repeats.
#[derive(Clone, Copy)]
enum Shopping {
    /// Add one unit of a product (cycling over 20, so the cart stays a realistic size), then
    /// load the cart page; one iteration is both requests.
    AddAndViewCart,
    /// Add one unit and pay for it; the timed part is the checkout POST alone.
    Checkout,
}

/// The CSRF token from a page's first form.
fn csrf_token(page: &str) -> Option<String> {
    let doc = scraper::Html::parse_document(page);
    let selector = scraper::Selector::parse("input[name=csrf_token]").ok()?;
    let token = doc.select(&selector).next()?.value().attr("value")?;
    Some(token.to_string())
}

/// One shopper: a cookie-keeping client with its session's CSRF token.
async fn start_session(base: &str, slug: &str) -> Option<(reqwest::Client, String)> {
    let client = reqwest::Client::builder()
        .cookie_store(true)
        .pool_max_idle_per_host(1)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let page = client
        .get(format!("{base}/products/{slug}"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let token = csrf_token(&page)?;
    Some((client, token))
}

async fn post_ok(client: &reqwest::Client, url: &str, form: &[(&str, &str)]) -> bool {
    match client.post(url).form(form).send().await {
        Ok(r) => {
            let ok = r.status().is_redirection();
            let _ = r.bytes().await;
            ok
        }
        Err(_) => false,
    }
}

/// Run `connections` shopping sessions doing `what` for `duration`.
async fn run_sessions(
    base: &str,
    connections: u64,
    duration: Duration,
    skus: Arc<Vec<String>>,
    what: Shopping,
) -> Outcome {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for c in 0..connections {
        let base = base.to_string();
        let skus = Arc::clone(&skus);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let Some((client, token)) = start_session(&base, "kind-of-blue-edition-1").await else {
                return (latencies, 1);
            };
            let mut i = c as usize * 20;
            let card = [
                ("email", "bench@example.com"),
                ("name", "Bench Shopper"),
                ("street", "1 Load Street"),
                ("city", "Testville"),
                ("postcode", "12345"),
                ("country", "Benchland"),
                ("card_number", "4242424242424242"),
                ("expiry", "12/39"),
                ("cvc", "123"),
                ("csrf_token", token.as_str()),
            ];
            while Instant::now() < deadline {
                let sku = &skus[(c as usize * 20 + i % 20) % skus.len()];
                i += 1;
                let add = [
                    ("sku", sku.as_str()),
                    ("qty", "1"),
                    ("csrf_token", token.as_str()),
                ];
                let cart_items = format!("{base}/cart/items");
                let t = Instant::now();
                let ok = match what {
                    Shopping::AddAndViewCart => {
                        post_ok(&client, &cart_items, &add).await
                            && match client.get(format!("{base}/cart")).send().await {
                                Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
                                _ => false,
                            }
                    }
                    Shopping::Checkout => {
                        if !post_ok(&client, &cart_items, &add).await {
                            errors += 1;
                            continue;
                        }
                        let t = Instant::now();
                        let paid = post_ok(&client, &format!("{base}/checkout"), &card).await;
                        if paid {
                            latencies.push(t.elapsed().as_micros() as u64);
                        } else {
                            errors += 1;
                        }
                        continue;
                    }
                };
                if ok {
                    latencies.push(t.elapsed().as_micros() as u64);
                } else {
                    errors += 1;
                }
            }
            (latencies, errors)
        }));
    }
    gather(tasks, started).await
}

fn report(name: &str, o: &Outcome) {
    println!(
        "| {name} | {:.0} | {:.1} | {:.1} | {} |",
        o.per_second(),
        o.percentile_ms(50.0),
        o.percentile_ms(99.0),
        o.errors
    );
}

fn main() -> anyhow::Result<()> {
    if std::env::var_os(ceiling::CHILD_ENV).is_some() {
        return Ok(ceiling::serve()?);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let connections = env_or("BENCH_CONNECTIONS", 64);
    let seconds = env_or("BENCH_SECONDS", 10);
    bazaar::telemetry::init("error", bazaar::telemetry::LogFormat::Text);
    let only = std::env::var("BENCH_ONLY").ok();
    let runs = |phase: &str| only.as_deref().is_none_or(|o| o == phase);
    if runs("pages") {
        pages::run(env_or("BENCH_PRODUCTS", 10_000), connections, seconds).await?;
    }
    if only.as_deref() == Some("pages") {
        return Ok(());
    }
    println!("| page | requests/s | p50 ms | p99 ms | errors |");
    println!("|---|---|---|---|---|");
    if runs("comments") {
        storefront(connections, seconds).await?;
    }
    if runs("blog") {
        blog(connections, seconds).await?;
    }
    if runs("durability") {
        for concern in ["durable", "fast"] {
            checkout_on_disk(concern, connections, seconds).await?;
        }
    }
    Ok(())
}

/// Settings for a site on in-memory docstore on a free local port.
fn memory_settings() -> anyhow::Result<Settings> {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Ok(Settings::load(
        Some(&root.join("config.toml")),
        vec![
            ("BAZAAR_DATABASE__URI".to_string(), "memory".to_string()),
            ("BAZAAR_SERVER__HOST".to_string(), "127.0.0.1".to_string()),
            ("BAZAAR_SERVER__PORT".to_string(), "0".to_string()),
            ("BAZAAR_LOG__LEVEL".to_string(), "error".to_string()),
        ],
    )?)
}

/// Posts in the blog phase, on top of the demo tumblelog.
const BLOG_POSTS: usize = 1_000;

/// The tumblelog stream with [`BLOG_POSTS`] published posts of every type (entries, quotes,
/// links, videos and photos), one hour apart, inserted directly through the driver.
async fn blog(connections: u64, seconds: u64) -> anyhow::Result<()> {
    use bazaar::content::model::{self, Author, Metadata, Node};
    use bazaar::content::store as nodes;
    use bson::oid::ObjectId;

    let settings = memory_settings()?;
    let database = OpenDatabase::open(&settings).await?;
    bazaar::startup::indexes::ensure_indexes(&database.db).await?;
    bazaar::demo::run(&database.db).await?;
    let db = &database.db;
    // Photo posts show the demo photo's picture, so every stored file they name exists.
    let photo = nodes::collection(db)
        .find_one(bson::doc! { "metadata.section": "blog", "metadata.type": "photo" })
        .await?
        .ok_or_else(|| anyhow::anyhow!("the demo blog has no photo post"))?;
    let now = bson::DateTime::now().timestamp_millis();
    let posts: Vec<Node> = (0..BLOG_POSTS)
        .map(|i| {
            let (kind, detail) = match i % 5 {
                0 => (
                    model::NodeType::Entry,
                    bson::doc! { "text": format!(
                        "Post {i}: *a record* we keep returning to, and [why](/products/kind-of-blue).\n\n\
                         > Some notes are better left unplayed."
                    ) },
                ),
                1 => (
                    model::NodeType::Quote,
                    bson::doc! { "text": format!("Quote number {i}."), "source": "A reader" },
                ),
                2 => (
                    model::NodeType::Link,
                    bson::doc! {
                        "url": format!("https://example.com/reading/{i}"),
                        "text": format!("Further reading {i}"),
                    },
                ),
                3 => (
                    model::NodeType::Video,
                    bson::doc! {
                        "url": "https://www.youtube.com/watch?v=zqNTltOGh5c",
                        "provider": "youtube",
                    },
                ),
                _ => (model::NodeType::Photo, photo.metadata.detail.clone()),
            };
            let published = bson::DateTime::from_millis(now - (i as i64 + 1) * 3_600_000);
            Node {
                id: ObjectId::new(),
                metadata: Metadata {
                    kind,
                    section: "blog".into(),
                    slug: bazaar::domain::Slug::parse(&format!("bench-post-{i}")).expect("a valid slug"),
                    title: format!("Bench post {i}"),
                    created: published,
                    updated: published,
                    updated_by: None,
                    published: Some(published),
                    live: true,
                    author: Author {
                        name: "Bench".into(),
                    },
                    tags: vec!["jazz".into(), format!("bench-{}", i % 7)],
                    nonce: bazaar::domain::EditVersion::new(),
                    locked: None,
                    comment_count: (i % 13) as i64,
                    comments_closed: false,
                    summary: None,
                    media: None,
                    detail,
                },
            }
        })
        .collect();
    nodes::collection(db).insert_many(posts).await?;
    let total = nodes::collection(db)
        .count_documents(bson::doc! { "metadata.section": "blog" })
        .await?;
    let pages = total.div_ceil(bazaar::content::pages::PAGE_SIZE as u64);
    let deep = (pages * 3 / 4).max(1);
    println!(
        "blog: {total} posts ({pages} pages), {connections} connections, {seconds} s per page"
    );

    let app = Application::build_with_database(settings, database)
        .await
        .map_err(|(e, _)| e)?;
    let base = format!("http://127.0.0.1:{}", app.port());
    let handle = app.server_handle();
    let server = tokio::spawn(app.run_until_stopped());
    let cases: Vec<(String, PickUrl)> = vec![
        (
            format!("blog, {total} posts: first page (/blog/)"),
            Arc::new(|_| "/blog/".to_string()),
        ),
        (
            format!("blog, {total} posts: a deep page (/blog/?page={deep} of {pages})"),
            Arc::new(move |_| format!("/blog/?page={deep}")),
        ),
    ];
    for (name, pick) in cases {
        run_load(
            &base,
            connections,
            Duration::from_secs(1),
            Arc::clone(&pick),
        )
        .await;
        let o = run_load(&base, connections, Duration::from_secs(seconds), pick).await;
        report(&name, &o);
    }
    handle.stop(true).await;
    let _ = server.await;
    Ok(())
}

/// Every product's stock set high, so every add succeeds and the figures measure the writes;
/// returns up to 2 000 SKUs to shop for.
async fn stock_up(db: &bazaar::db::Db) -> anyhow::Result<Arc<Vec<String>>> {
    use futures::TryStreamExt;
    db.collection::<bson::Document>(bazaar::catalog::products::COLLECTION)
        .update_many(
            bson::doc! {},
            bson::doc! { "$set": { "qty": 1_000_000_i64 } },
        )
        .await?;
    let skus: Vec<String> = db
        .collection::<bson::Document>(bazaar::catalog::products::COLLECTION)
        .find(bson::doc! {})
        .projection(bson::doc! { "sku": 1 })
        .limit(2_000)
        .await?
        .try_collect::<Vec<_>>()
        .await?
        .iter()
        .filter_map(|d| d.get_str("sku").ok().map(str::to_string))
        .collect();
    Ok(Arc::new(skus))
}

/// Checkouts on the embedded store with its data in a temporary directory, with
/// `database.write_concern = concern`: what journaling every promise to a shopper costs.
async fn checkout_on_disk(concern: &str, connections: u64, seconds: u64) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let settings = Settings::load(
        Some(&root.join("config.toml")),
        vec![
            ("BAZAAR_DATABASE__URI".to_string(), "embedded".to_string()),
            (
                "BAZAAR_DATABASE__PATH".to_string(),
                dir.path().display().to_string(),
            ),
            (
                "BAZAAR_DATABASE__WRITE_CONCERN".to_string(),
                concern.to_string(),
            ),
            ("BAZAAR_SERVER__HOST".to_string(), "127.0.0.1".to_string()),
            ("BAZAAR_SERVER__PORT".to_string(), "0".to_string()),
            ("BAZAAR_LOG__LEVEL".to_string(), "error".to_string()),
        ],
    )?;
    let app = Application::build(settings).await?;
    // Generated editions too, as the sessions start on the first edition's page.
    bazaar::demo::catalog::seed_bulk(app.db(), 200)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let skus = stock_up(app.db()).await?;
    let base = format!("http://127.0.0.1:{}", app.port());
    let handle = app.server_handle();
    let server = tokio::spawn(app.run_until_stopped());
    let o = run_sessions(
        &base,
        connections,
        Duration::from_secs(seconds),
        skus,
        Shopping::Checkout,
    )
    .await;
    report(
        &format!("checkout on disk, database.write_concern = \"{concern}\""),
        &o,
    );
    handle.stop(true).await;
    let _ = server.await;
    Ok(())
}

/// The catalog pages and shopping on in-memory docstore with `BENCH_PRODUCTS` products.
async fn storefront(connections: u64, seconds: u64) -> anyhow::Result<()> {
    let products = env_or("BENCH_PRODUCTS", 10_000);
    let settings = memory_settings()?;
    let database = OpenDatabase::open(&settings).await?;
    bazaar::startup::indexes::ensure_indexes(&database.db).await?;
    bazaar::demo::run(&database.db).await?;
    let only_comments = std::env::var("BENCH_ONLY").is_ok_and(|v| v == "comments");
    let seeding = Instant::now();
    let demo = 36;
    let added = if only_comments {
        0
    } else {
        bazaar::demo::catalog::seed_bulk(&database.db, products.saturating_sub(demo))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?
    };
    let discussions = [
        (
            100,
            seed_discussion(&database.db, "maiden-voyage", 100).await?,
        ),
        (
            10_000,
            seed_discussion(&database.db, "brilliant-corners", 10_000).await?,
        ),
    ];
    println!(
        "catalog: {} products ({added} generated in {:.1} s), {connections} connections, {seconds} s per page",
        added + demo,
        seeding.elapsed().as_secs_f64()
    );
    let db = database.db.clone();
    let app = Application::build_with_database(settings, database)
        .await
        .map_err(|(e, _)| e)?;
    let base = format!("http://127.0.0.1:{}", app.port());
    let handle = app.server_handle();
    let server = tokio::spawn(app.run_until_stopped());

    println!("| page | requests/s | p50 ms | p99 ms | errors |");
    println!("|---|---|---|---|---|");
    for (size, d) in discussions {
        let cases: Vec<(String, PickUrl)> = vec![
            (
                format!("discussion, {size} comments: first page (/products/{{slug}})"),
                {
                    let url = d.first_page.clone();
                    Arc::new(move |_| url.clone())
                },
            ),
            (
                format!("discussion, {size} comments: a page 3/4 in (?after=)"),
                {
                    let url = d.deep_page.clone();
                    Arc::new(move |_| url.clone())
                },
            ),
            (format!("discussion, {size} comments: deep permalink"), {
                let url = d.deep_permalink.clone();
                Arc::new(move |_| url.clone())
            }),
        ];
        for (name, pick) in cases {
            run_load(
                &base,
                connections,
                Duration::from_secs(1),
                Arc::clone(&pick),
            )
            .await;
            let o = run_load(&base, connections, Duration::from_secs(seconds), pick).await;
            report(&name, &o);
        }
    }
    if only_comments {
        handle.stop(true).await;
        let _ = server.await;
        return Ok(());
    }

    let pages = (products / 12).max(1);
    let cases: Vec<(&str, PickUrl)> = vec![
        (
            "product list (/products?page=N, newest)",
            Arc::new(move |i| format!("/products?page={}", 1 + i % pages.min(50))),
        ),
        (
            "category page (/categories/jazz?page=N)",
            Arc::new(|i| format!("/categories/jazz?page={}", 1 + i % 20)),
        ),
        (
            "product page (/products/{slug})",
            Arc::new(move |i| {
                let edition = 1 + i % (products / 36).max(1);
                format!("/products/kind-of-blue-edition-{edition}")
            }),
        ),
    ];
    for (name, pick) in cases {
        // Warm up caches and connections first.
        run_load(
            &base,
            connections,
            Duration::from_secs(1),
            Arc::clone(&pick),
        )
        .await;
        let o = run_load(&base, connections, Duration::from_secs(seconds), pick).await;
        report(name, &o);
    }
    let skus = stock_up(&db).await?;
    for (name, what) in [
        (
            "add to cart + cart page (one session each)",
            Shopping::AddAndViewCart,
        ),
        (
            "checkout in memory (add 1, then the timed POST /checkout)",
            Shopping::Checkout,
        ),
    ] {
        let o = run_sessions(
            &base,
            connections,
            Duration::from_secs(seconds),
            Arc::clone(&skus),
            what,
        )
        .await;
        report(name, &o);
    }
    handle.stop(true).await;
    let _ = server.await;
    Ok(())
}

/// The addresses the comments phase loads for one discussion.
struct BenchDiscussion {
    first_page: String,
    deep_page: String,
    deep_permalink: String,
}

/// Give the product `slug` `n` comments in threads of ten (a top-level comment, a chain of four
/// replies and two shorter branches), one second apart, inserted directly in batches.
async fn seed_discussion(
    db: &bazaar::db::Db,
    slug: &str,
    n: usize,
) -> anyhow::Result<BenchDiscussion> {
    use bazaar::comments::{self, slugs, Author, Comment, CommentStatus};
    use bson::oid::ObjectId;
    let product = bazaar::catalog::products::by_slug(db, &bazaar::domain::Slug::parse(slug)?)
        .await?
        .ok_or_else(|| anyhow::anyhow!("demo product {slug} is missing"))?;
    // Each reply's parent, by position in the thread (0 is the top-level comment).
    const PARENT: [usize; 10] = [0, 0, 1, 2, 3, 0, 5, 0, 7, 8];
    let start = bson::DateTime::now().timestamp_millis() - (n as i64 + 10) * 1000;
    let mut batch: Vec<Comment> = Vec::with_capacity(1000);
    let mut thread: Vec<(String, String, ObjectId)> = Vec::with_capacity(10);
    let mut full_slugs: Vec<String> = Vec::with_capacity(n);
    let mut deep_permalink = String::new();
    for i in 0..n {
        let (t, k) = (i / 10, i % 10);
        let posted = bson::DateTime::from_millis(start + i as i64 * 1000);
        let part = if k == 0 {
            format!("{t:04x}")
        } else {
            format!("{k:04x}")
        };
        let timed = format!("{}:{part}", slugs::stamp(posted));
        let (slug, full_slug, parent_id) = if k == 0 {
            thread.clear();
            (part, timed, None)
        } else {
            let (ps, pf, pid) = &thread[PARENT[k]];
            (format!("{ps}/{part}"), format!("{pf}/{timed}"), Some(*pid))
        };
        let id = ObjectId::new();
        thread.push((slug.clone(), full_slug.clone(), id));
        if t == n / 10 / 2 && k == 2 {
            deep_permalink = slug.clone();
        }
        full_slugs.push(full_slug.clone());
        batch.push(Comment {
            id,
            discussion_id: product.id,
            parent_id,
            slug: bazaar::comments::CommentPath::parse(&slug)
                .expect("the bench's slugs are well-formed"),
            full_slug,
            posted,
            author: Author {
                name: format!("Reader {i}"),
            },
            text: format!("Comment {i}: what a record. https://example.com/{i}"),
            status: CommentStatus::Visible,
            staff: false,
            email: None,
            notify: false,
            deleted_at: None,
            deleted_from: None,
            account_id: None,
            verified: false,
        });
        if batch.len() == 1000 {
            comments::store::collection(db)
                .insert_many(std::mem::take(&mut batch))
                .await?;
        }
    }
    if !batch.is_empty() {
        comments::store::collection(db).insert_many(batch).await?;
    }
    comments::store::adjust_count(db, comments::DiscussionKind::Product, product.id, n as i64)
        .await?;
    full_slugs.sort();
    let after = &full_slugs[full_slugs.len() * 3 / 4];
    let qs = form_urlencoded::Serializer::new(String::new())
        .append_pair("after", after)
        .finish();
    Ok(BenchDiscussion {
        first_page: format!("/products/{slug}"),
        deep_page: format!("/products/{slug}?{qs}"),
        deep_permalink: format!("/products/{slug}/comments/{deep_permalink}"),
    })
}
