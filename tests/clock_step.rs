//! The release of a shop whose server clock is stepped back while it serves, as an NTP step or a
//! hand correction does: the real `bazaar` binary under Debian's libfaketime (`faketime`
//! package), its wall clock moved through a timestamp file while the monotonic clock runs on.
//! Published posts must stay published, in the blog, its feed and on their permalinks.
//!
//! Without libfaketime the test prints why and passes, except in CI (`CI` set), where `.ci/run`
//! installs it and its absence is a failure.

use crate::common;
use std::path::Path;
use std::time::Duration;

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The post links `/blog/` lists.
async fn blog_posts(client: &reqwest::Client, address: &str) -> Vec<String> {
    let page = client
        .get(format!("{address}/blog/"))
        .send()
        .await
        .expect("blog served");
    assert!(
        page.status().is_success(),
        "/blog/ answered {}",
        page.status()
    );
    let doc = common::html(&page.text().await.expect("body"));
    let links = scraper::Selector::parse("main a[href^='/blog/']").expect("selector");
    let mut posts: Vec<String> = doc
        .select(&links)
        .filter_map(|a| a.value().attr("href"))
        .filter(|h| h.len() > "/blog/".len() && !h.contains('?') && !h.ends_with(".atom"))
        .map(str::to_string)
        .collect();
    posts.sort();
    posts.dedup();
    posts
}

async fn feed_entries(client: &reqwest::Client, address: &str) -> usize {
    let feed = client
        .get(format!("{address}/blog/feed.atom"))
        .send()
        .await
        .expect("feed served")
        .text()
        .await
        .expect("body");
    feed.matches("<entry>").count()
}

fn step_clock(file: &Path, offset: &str) {
    std::fs::write(file, format!("{offset}\n")).expect("faketime file written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_posts_stay_published_when_the_servers_clock_steps_back_a_month() {
    if !Path::new(LIBFAKETIME).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the faketime package (see .ci/run)"
        );
        eprintln!("skipped: {LIBFAKETIME} is missing (apt-get install faketime)");
        return;
    }
    let home = tempfile::tempdir().expect("temp dir");
    let clock = home.path().join("faketime");
    step_clock(&clock, "+0");
    let clock_path = clock.display().to_string();
    let launched = common::process::launch(
        home.path(),
        [
            ("LD_PRELOAD", LIBFAKETIME),
            ("FAKETIME_TIMESTAMP_FILE", clock_path.as_str()),
            ("FAKETIME_NO_CACHE", "1"),
            // An NTP step moves the wall clock only.
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ("BAZAAR_DATABASE__URI", "memory"),
            ("BAZAAR_SERVER__HOST", "127.0.0.1"),
            ("BAZAAR_SERVER__PORT", "0"),
            ("BAZAAR_SERVER__WORKERS", "1"),
            ("BAZAAR_LOG__LEVEL", "warn"),
            ("BAZAAR_CART__JOBS_EVERY_SECS", "1"),
            ("BAZAAR_ADMIN__PASSWORD_HASH", common::admin_password_hash()),
        ],
    );
    let mut process = launched.wait(Duration::from_secs(120));
    let address = process.address.clone();
    let client = reqwest::Client::new();
    let before = blog_posts(&client, &address).await;
    assert!(!before.is_empty(), "the demo blog has posts");
    let feed_before = feed_entries(&client, &address).await;
    assert!(feed_before > 0);
    // The demo posts were published days ago; a month back they would all be "in the future".
    step_clock(&clock, "-30d");
    // Past the caches' 5 s bound, so nothing is served from before the step.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after = blog_posts(&client, &address).await;
    assert_eq!(
        after, before,
        "the blog lists the same posts after the step"
    );
    assert_eq!(feed_entries(&client, &address).await, feed_before);
    for post in &before {
        let page = client
            .get(format!("{address}{post}"))
            .send()
            .await
            .expect("post served");
        assert!(
            page.status().is_success(),
            "{post} answered {} after the clock stepped back",
            page.status()
        );
    }
    // And forward again: nothing changes either.
    step_clock(&clock, "+0");
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(blog_posts(&client, &address).await, before);
    process.kill();
}
