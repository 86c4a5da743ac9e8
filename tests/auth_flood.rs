//! A flood of wrong admin passwords: at most the configured number of argon2 checks run at once
//! and the process's memory stays flat. Alone in its own test binary so that the resident
//! memory it measures is the server's under the flood, not other tests'.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use bazaar::startup::Application;
use reqwest::StatusCode;

/// Resident memory of this process (the server runs in it), in bytes.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The app with a handle on its admin credentials' counters.
async fn spawn_counted(
    env: &[(&str, &str)],
) -> (
    String,
    actix_web::web::Data<bazaar::web::basic_auth::AdminCredentials>,
) {
    let mut vars = vec![NO_DEMO];
    vars.extend_from_slice(env);
    let app = Application::build(test_settings(&vars))
        .await
        .expect("the app starts");
    let address = format!("http://127.0.0.1:{}", app.port());
    let credentials = app.admin_credentials();
    tokio::spawn(app.run_until_stopped());
    (address, credentials)
}

#[tokio::test]
async fn a_flood_of_wrong_admin_passwords_runs_at_most_two_hash_checks_at_once_and_memory_stays_flat(
) {
    // A high failure threshold so this test exercises the concurrency bound alone.
    let (address, credentials) = spawn_counted(&[
        ("BAZAAR_ADMIN__MAX_CONCURRENT_VERIFICATIONS", "2"),
        ("BAZAAR_ADMIN__FAILURES_BEFORE_DELAY", "100000"),
        ("BAZAAR_SERVER__WORKERS", "2"),
    ])
    .await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    // One check first, so the allocator has already served one argon2 block.
    let warm = client
        .get(format!("{address}/admin"))
        .basic_auth(ADMIN_USER, Some("warm-up"))
        .send()
        .await
        .expect("answered");
    assert_eq!(warm.status(), StatusCode::UNAUTHORIZED);
    let baseline = resident_bytes();
    let peak = Arc::new(AtomicU64::new(baseline));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(resident_bytes(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let requests = (0..64).map(|i| {
        let client = client.clone();
        let path = if i % 2 == 0 {
            "/admin".to_string()
        } else {
            "/orders/BZ-000001".to_string()
        };
        let url = format!("{address}{path}");
        tokio::spawn(async move {
            let response = client
                .get(url)
                .basic_auth(ADMIN_USER, Some(format!("wrong-{i}")))
                .send()
                .await
                .expect("every request is answered");
            (path, response.status())
        })
    });
    let answers = futures::future::join_all(requests).await;
    sampling.store(false, Ordering::Relaxed);
    sampler.await.expect("sampler");
    for answer in answers {
        let (path, status) = answer.expect("request task");
        if path == "/admin" {
            assert!(
                status == StatusCode::UNAUTHORIZED || status == StatusCode::TOO_MANY_REQUESTS,
                "{path}: {status}"
            );
        } else {
            // The order page never says more than "not found" to a wrong password.
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
    }
    // 64 unbounded checks would need 64 × 19 MiB ≈ 1.2 GiB; two at a time need about 40 MiB.
    let grown = peak.load(Ordering::Relaxed).saturating_sub(baseline);
    assert!(
        grown < 160 * 1024 * 1024,
        "resident memory grew by {} MiB under the flood",
        grown / (1024 * 1024)
    );
    let stats = credentials.stats();
    assert!(stats.runs >= 2, "some checks ran: {stats:?}");
    assert!(
        stats.peak_concurrent <= 2,
        "at most two argon2 checks at once: {stats:?}"
    );
    // The site still answers.
    let health = client
        .get(format!("{address}/healthz"))
        .send()
        .await
        .expect("answered");
    assert_eq!(health.status(), StatusCode::OK);
}
