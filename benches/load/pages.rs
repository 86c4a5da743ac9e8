//! The storefront pages against the ceiling: seeds a catalog into a temporary directory with
//! `bazaar seed --products N`, starts the real `bazaar` binary on it (default settings, embedded
//! store on disk) and the ceiling server, and drives each page and the ceiling with the same
//! client, one after the other, so every share of the ceiling is measured side by side.
//!
//! `BENCH_BASELINE=/path/to/another/bazaar` also starts that binary (e.g. a release build of
//! `main`) on a copy of the same data and measures it in the same run: before/after figures.
//! `BENCH_LOG_VARIANT=1` adds this build with `log.level = "warn"`: what the request log costs.
//! `BENCH_PAGES=blog,tag` measures only the pages whose label contains one of those words.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ceiling;
use crate::client::{self, Connection, Outcome, PickPath};

/// A child process killed when dropped.
struct Process {
    name: String,
    child: Child,
}

impl Process {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `VmRSS` and `VmHWM` (peak) of a process, in MB.
fn memory_mb(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Total size of the files under `dir`, in MB.
fn dir_mb(dir: &Path) -> f64 {
    fn walk(p: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(p) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => walk(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    }
    walk(dir) as f64 / 1_048_576.0
}

/// A `bazaar` command on the data in `data` with its built-in default settings (it runs in the
/// data's parent directory, which has no config.toml; a baseline build knows only its own
/// settings). The request log is at its default level, written to a discarded stderr.
fn bazaar(binary: &Path, data: &Path) -> Command {
    let mut cmd = Command::new(binary);
    cmd.env_remove("BAZAAR_CONFIG")
        .env("BAZAAR_DATABASE__URI", "embedded")
        .env("BAZAAR_DATABASE__PATH", data)
        .env_remove("RUST_LOG")
        .current_dir(data.parent().unwrap_or(data))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Seed `products` generated products and `posts` generated blog posts into `data`; returns the
/// seconds taken and the seeding process's peak RSS in MB.
fn seed(binary: &Path, data: &Path, products: u64, posts: u64) -> anyhow::Result<(f64, f64)> {
    let started = Instant::now();
    let mut child = bazaar(binary, data)
        .args(["seed", "--products", &products.to_string()])
        .args(["--posts", &posts.to_string()])
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut peak: f64 = 0.0;
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::ensure!(status.success(), "bazaar seed failed: {status}");
            break;
        }
        peak = peak.max(memory_mb(child.id()).1);
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok((started.elapsed().as_secs_f64(), peak))
}

/// Start `bazaar` on `data` and wait until `/healthz` answers; returns the process, its
/// address and the start-up time.
async fn start(
    name: &str,
    binary: &Path,
    data: &Path,
    env: &[(&str, &str)],
) -> anyhow::Result<(Process, String, f64)> {
    let port = free_port()?;
    let started = Instant::now();
    let child = bazaar(binary, data)
        .envs(env.iter().copied())
        .env("BAZAAR_SERVER__HOST", "127.0.0.1")
        .env("BAZAAR_SERVER__PORT", port.to_string())
        .env("BAZAAR_CART__JOBS_EVERY_SECS", "0")
        .spawn()?;
    let process = Process {
        name: name.to_string(),
        child,
    };
    let addr = format!("127.0.0.1:{port}");
    loop {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "{name} did not answer /healthz within 10 minutes"
        );
        if let Ok(r) = Connection::new(&addr).get("/healthz").await {
            if r.status == 200 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((process, addr, started.elapsed().as_secs_f64()))
}

/// Start the ceiling server (this binary again, see [`ceiling::CHILD_ENV`]).
fn start_ceiling() -> anyhow::Result<(Process, String)> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(ceiling::CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    let port: u16 = line
        .trim()
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("the ceiling server said {line:?}"))?;
    Ok((
        Process {
            name: "ceiling".into(),
            child,
        },
        format!("127.0.0.1:{port}"),
    ))
}

/// The highest `page=N` linked from the page at `path` (the listing's last page).
async fn last_page(addr: &str, path: &str) -> anyhow::Result<u64> {
    let r = Connection::new(addr).get(path).await?;
    anyhow::ensure!(r.status == 200, "{path} answered {}", r.status);
    let html = String::from_utf8_lossy(&r.body);
    Ok(html
        .match_indices("page=")
        .filter_map(|(i, _)| {
            let digits: String = html[i + 5..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<u64>().ok()
        })
        .max()
        .unwrap_or(1))
}

/// Settings every measured server gets: the per-address search limit lifted, since every
/// request of the load comes from one address (the concurrency bound stays as configured).
const SERVER_ENV: &[(&str, &str)] = &[("BAZAAR_SEARCH__PER_CLIENT_PER_MINUTE", "1000000")];

/// The `before=` address of the blog page that starts with generated post `i`: its publication
/// time (read from its page, whole seconds) and the largest id, so the page holds that post and
/// the older ones. Only this build reads such addresses.
async fn blog_page_from(addr: &str, i: u64) -> anyhow::Result<String> {
    let path = format!("/blog/generated-post-{i}");
    let r = Connection::new(addr).get(&path).await?;
    anyhow::ensure!(r.status == 200, "{path} answered {}", r.status);
    let html = String::from_utf8_lossy(&r.body);
    let (_, rest) = html
        .split_once("<time datetime=\"")
        .ok_or_else(|| anyhow::anyhow!("{path} shows no date"))?;
    let stamp = rest.split('"').next().unwrap_or_default();
    let at = chrono::DateTime::parse_from_rfc3339(stamp)?;
    // The page shows whole seconds; the post was published within that second.
    let millis = at.timestamp_millis() + 999;
    Ok(format!("/blog/?before={millis}.ffffffffffffffffffffffff"))
}

/// A load run after a one-second warm-up; the worst latency includes the warm-up, so the first
/// requests after start-up (cold caches) count.
async fn measure(addr: &str, connections: u64, seconds: u64, pick: &PickPath) -> Outcome {
    let warm = client::run(addr, connections, Duration::from_secs(1), Arc::clone(pick)).await;
    let mut o = client::run(
        addr,
        connections,
        Duration::from_secs(seconds),
        Arc::clone(pick),
    )
    .await;
    o.errors += warm.errors;
    if warm.max_ms() > o.max_ms() {
        o.latencies_us.push(*warm.latencies_us.last().unwrap_or(&0));
    }
    o
}

/// Run the pages phase: `BENCH_PRODUCTS` products (default 10 000).
pub async fn run(products: u64, connections: u64, seconds: u64) -> anyhow::Result<()> {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_bazaar"));
    let baseline = std::env::var_os("BENCH_BASELINE").map(PathBuf::from);
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let posts: u64 = std::env::var("BENCH_POSTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let (seed_secs, seed_peak) = seed(&binary, &data, products, posts)?;
    println!(
        "pages: {products} generated products and {posts} generated posts seeded in {seed_secs:.1} s \
         (peak RSS {seed_peak:.0} MB), data directory {:.1} MB; {connections} connections, \
         {seconds} s per page after 1 s warm-up",
        dir_mb(&data)
    );
    let mut servers: Vec<(Process, String)> = Vec::new();
    // Copies of the data for the other servers, made before any server holds it.
    let copy = |name: &str| -> anyhow::Result<PathBuf> {
        let to = dir.path().join(name);
        let status = Command::new("cp").arg("-a").arg(&data).arg(&to).status()?;
        anyhow::ensure!(status.success(), "copying the data for {name} failed");
        Ok(to)
    };
    let baseline_data = baseline.as_ref().map(|_| copy("baseline")).transpose()?;
    let quiet_data = match std::env::var("BENCH_LOG_VARIANT") {
        Ok(v) if v == "1" => Some(copy("quiet")?),
        _ => None,
    };
    let (p, addr, startup) = start("bazaar", &binary, &data, SERVER_ENV).await?;
    println!("bazaar: start-up until /healthz answers {startup:.2} s");
    servers.push((p, addr));
    if let (Some(old), Some(old_data)) = (&baseline, &baseline_data) {
        let (p, addr, startup) = start("baseline", old, old_data, SERVER_ENV).await?;
        println!("baseline ({}): start-up {startup:.2} s", old.display());
        servers.push((p, addr));
    }
    if let Some(quiet) = &quiet_data {
        // The same build without the per-request log line: what the request log costs.
        let (p, addr, _) = start(
            "bazaar, log.level=warn",
            &binary,
            quiet,
            &[SERVER_ENV, &[("BAZAAR_LOG__LEVEL", "warn")]].concat(),
        )
        .await?;
        servers.push((p, addr));
    }
    let (ceiling, ceiling_addr) = start_ceiling()?;

    let first = &servers[0].1;
    let list_last = last_page(first, "/products").await?;
    let category = std::env::var("BENCH_CATEGORY").unwrap_or_else(|_| "music".to_string());
    let cat_last = last_page(first, &format!("/categories/{category}")).await?;
    let editions = (products / 36).max(1);
    let mut cases: Vec<(String, PickPath)> = vec![
        ("/healthz".into(), Arc::new(|_| "/healthz".to_string())),
        (
            "product page /products/kind-of-blue-edition-N".into(),
            Arc::new(move |i| format!("/products/kind-of-blue-edition-{}", 1 + i % editions)),
        ),
        (
            "/products?page=20".into(),
            Arc::new(|_| "/products?page=20".to_string()),
        ),
        ("/ (home)".into(), Arc::new(|_| "/".to_string())),
        (format!("/categories/{category}?page=2"), {
            let c = category.clone();
            Arc::new(move |_| format!("/categories/{c}?page=2"))
        }),
    ];
    if std::env::var("BENCH_DEEP").map_or(true, |v| v != "0") {
        for (label, path) in [
            (
                format!("/products middle page ({})", list_last / 2),
                format!("/products?page={}", list_last.div_ceil(2)),
            ),
            (
                format!("/products last page ({list_last})"),
                format!("/products?page={list_last}"),
            ),
            (
                format!("/categories/{category} last page ({cat_last})"),
                format!("/categories/{category}?page={cat_last}"),
            ),
            (
                "filtered /products?type=book&page=2".into(),
                "/products?type=book&page=2".into(),
            ),
        ] {
            cases.push((label, Arc::new(move |_| path.clone())));
        }
    }
    // The content half: streams, a post, a tag page, the gallery, a feed and search. Pages
    // only this build understands (keyset addresses) are measured on it alone.
    let mut this_build_only: Vec<String> = Vec::new();
    if std::env::var("BENCH_CONTENT").map_or(true, |v| v != "0") && posts > 0 {
        let middle = posts / 2;
        let last = posts.saturating_sub(bazaar::content::pages::PAGE_SIZE as u64);
        let mut content: Vec<(String, String)> = vec![
            ("/blog/ (first page)".into(), "/blog/".into()),
            ("/blog/?page=50".into(), "/blog/?page=50".into()),
            (
                format!("a blog post (/blog/generated-post-{middle})"),
                format!("/blog/generated-post-{middle}"),
            ),
            (
                "tag page /tags/generated-3".into(),
                "/tags/generated-3".into(),
            ),
            ("/gallery/".into(), "/gallery/".into()),
            ("/blog/feed.atom".into(), "/blog/feed.atom".into()),
            ("/search?q=jazz".into(), "/search?q=jazz".into()),
        ];
        for (label, i) in [("middle", middle), ("last", last)] {
            let name = format!("/blog/ {label} page, from post {i} (keyset)");
            content.push((name.clone(), blog_page_from(first, i).await?));
            this_build_only.push(name);
        }
        for (label, path) in content {
            cases.push((label, Arc::new(move |_| path.clone())));
        }
    }
    if let Ok(only) = std::env::var("BENCH_PAGES") {
        let words: Vec<&str> = only
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .collect();
        cases.retain(|(name, _)| words.iter().any(|w| name.contains(w)));
    }
    println!();
    println!(
        "| page | server | requests/s | p50 ms | p99 ms | max ms | share of ceiling | errors |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let ceiling_pick: PickPath = Arc::new(|_| "/".to_string());
    for (name, pick) in &cases {
        let top = measure(&ceiling_addr, connections, seconds, &ceiling_pick).await;
        println!(
            "| {name} | ceiling | {:.0} | {:.2} | {:.2} | {:.1} | 100% | {} |",
            top.per_second(),
            top.percentile_ms(50.0),
            top.percentile_ms(99.0),
            top.max_ms(),
            top.errors
        );
        let only_first = this_build_only.contains(name);
        for (process, addr) in servers.iter().take(if only_first { 1 } else { usize::MAX }) {
            let o = measure(addr, connections, seconds, pick).await;
            println!(
                "| {name} | {} | {:.0} | {:.2} | {:.2} | {:.1} | {:.1}% | {} |",
                process.name,
                o.per_second(),
                o.percentile_ms(50.0),
                o.percentile_ms(99.0),
                o.max_ms(),
                100.0 * o.per_second() / top.per_second().max(1.0),
                o.errors
            );
        }
    }
    println!();
    for (process, _) in &servers {
        let (rss, peak) = memory_mb(process.pid());
        println!(
            "{}: RSS after the load {rss:.0} MB (peak {peak:.0} MB)",
            process.name
        );
    }
    let (rss, _) = memory_mb(ceiling.pid());
    println!("ceiling: RSS {rss:.0} MB");
    Ok(())
}
