//! Running Bazaar in production, as an operator does: Prometheus scraping `/metrics`, `/readyz`
//! for the load balancer, request ids through JSON logs, the systemd unit and the nginx site in
//! `contrib/`, and the Grafana dashboard's queries naming metrics that exist.
//!
//! Prometheus, nginx and systemd-analyze come from Debian's packages (`prometheus`, `nginx`,
//! `systemd`), which `.ci/run` installs; without one of them a test prints why and passes,
//! except in CI (`CI` set), where its absence is a failure.

use crate::common;
use crate::common::builders::ProductBuilder;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::process::{self, BazaarProcess};

const TOKEN: &str = "operations-test-metrics-token";

/// `None` (and a message) when `program` is missing outside CI; a failure in CI.
fn tool(program: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install Debian's {package} package (see .ci/run)"
        );
        eprintln!("skipped: {program} is missing (apt-get install {package})");
    }
    found
}

/// A child process stopped when the test ends, however it ends: SIGTERM first, so nginx's master
/// takes its workers with it, then SIGKILL.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_bazaar(dir: &Path, extra: &[(&str, &str)]) -> BazaarProcess {
    let mut env: Vec<(&str, &str)> = vec![
        ("BAZAAR_DATABASE__URI", "memory"),
        ("BAZAAR_SERVER__HOST", "127.0.0.1"),
        ("BAZAAR_SERVER__PORT", "0"),
        ("BAZAAR_SERVER__WORKERS", "2"),
        ("BAZAAR_ADMIN__PASSWORD_HASH", common::admin_password_hash()),
    ];
    env.extend_from_slice(extra);
    process::launch(dir, env).wait(Duration::from_secs(60))
}

fn port_of(address: &str) -> u16 {
    address
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("address ends with a port")
}

async fn get_text(client: &reqwest::Client, url: &str) -> (u16, String) {
    let response = client.get(url).send().await.expect("request answered");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

async fn scrape(app: &common::TestApp) -> String {
    let response = app
        .client
        .get(app.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("metrics answered");
    assert_eq!(response.status(), 200, "/metrics with the token");
    response.text().await.expect("body")
}

/// The value of the sample `name{labels}` in an exposition, labels given as `key="value"` in the
/// exporter's order.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
        if metric != name {
            return None;
        }
        let all = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        all.then(|| value.parse().ok()).flatten()
    })
}

/// Every series name of an exposition (histogram parts reduced to their metric).
fn series_of(text: &str, metric: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(series, _)| series.to_string()))
        .filter(|series| series.split('{').next() == Some(metric))
        .collect()
}

#[tokio::test]
async fn metrics_are_not_found_without_a_token_and_refused_without_the_right_one() {
    let app = common::spawn_app().await;
    assert_eq!(app.get("/metrics").await.status(), 404);
    app.stop().await;

    let app = common::spawn_app_with(&[("BAZAAR_METRICS__TOKEN", TOKEN)]).await;
    let bare = app.get("/metrics").await;
    assert_eq!(bare.status(), 401);
    assert!(bare.headers().contains_key("www-authenticate"));
    let wrong = app
        .client
        .get(app.url("/metrics"))
        .bearer_auth("operations-test-metrics-tokem")
        .send()
        .await
        .expect("answered");
    assert_eq!(wrong.status(), 401);
    let text = scrape(&app).await;
    assert!(text.contains("bazaar_store_documents{collection=\"products\"}"));
    app.stop().await;
}

#[tokio::test]
async fn requests_are_counted_by_route_template_and_random_paths_add_one_series_only() {
    let app = common::spawn_app_with(&[
        ("BAZAAR_METRICS__TOKEN", TOKEN),
        ("BAZAAR_METRICS__DATABASE_COMMANDS", "true"),
    ])
    .await;
    for sku in ["m1", "m2", "m3"] {
        ProductBuilder::new(sku).build(&app.db).await;
    }
    let route = [("route", "/products/{slug}"), ("status", "2xx")];
    let before = sample(&scrape(&app).await, "bazaar_http_requests_total", &route).unwrap_or(0.0);
    let doc = common::page(&app, "/products").await;
    let products: Vec<String> = doc
        .select(&scraper::Selector::parse("a[href^='/products/']").expect("selector"))
        .filter_map(|a| a.value().attr("href"))
        .filter(|h| !h.contains('?'))
        .map(str::to_string)
        .take(3)
        .collect();
    assert!(!products.is_empty(), "the catalog lists products");
    for path in &products {
        assert_eq!(app.get(path).await.status(), 200, "{path}");
    }
    let text = scrape(&app).await;
    let after = sample(&text, "bazaar_http_requests_total", &route).expect("product pages counted");
    // Other tests in this binary may serve product pages meanwhile: at least ours are counted.
    assert!(
        after - before >= products.len() as f64,
        "{before} → {after}"
    );

    let series = series_of(&text, "bazaar_http_requests_total").len();
    for i in 0..200 {
        let path = format!("/no-such-page-{i}/x{}", i * 7919);
        assert_eq!(app.get(&path).await.status(), 404);
    }
    let text = scrape(&app).await;
    let grown = series_of(&text, "bazaar_http_requests_total");
    assert!(
        grown.len() <= series + 1,
        "200 random paths added {} series: {grown:#?}",
        grown.len() - series
    );
    assert!(grown.iter().all(|s| !s.contains("no-such-page")));
    assert!(
        sample(
            &text,
            "bazaar_http_requests_total",
            // Other tests' unmatched requests (a POST, a 405) are series of their own.
            &[("route", "unmatched"), ("method", "GET"), ("status", "4xx")]
        )
        .unwrap_or(0.0)
            >= 200.0
    );
    // The database commands those pages sent are timed too.
    assert!(sample(&text, "bazaar_db_commands_total", &[("command", "find")]).unwrap_or(0.0) > 0.0);
    app.stop().await;
}

#[tokio::test]
async fn the_grafana_dashboard_queries_only_metrics_that_exist() {
    let app = common::spawn_app_with(&[("BAZAAR_METRICS__TOKEN", TOKEN)]).await;
    // Traffic and a job run, so the labelled metrics have series.
    let _ = app.get("/").await;
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo_root().join("contrib/grafana-dashboard.json"))
            .expect("dashboard file"),
    )
    .expect("the dashboard is JSON");
    let exposition = scrape(&app).await;
    let declared: BTreeSet<&str> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let names = regex::Regex::new(r"\b((?:bazaar|docstore|process)_[a-z_]+)").expect("regex");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "the dashboard has its panels");
    let mut queried = BTreeSet::new();
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            for m in names.captures_iter(expr) {
                let name = m[1]
                    .trim_end_matches("_bucket")
                    .trim_end_matches("_sum")
                    .trim_end_matches("_count")
                    .to_string();
                queried.insert(name);
            }
        }
    }
    // Described metrics are declared (# HELP / # TYPE) only once recorded; the ones the
    // dashboard needs must all be known to the code.
    let known: BTreeSet<&str> = bazaar::metrics::ALL.iter().copied().collect();
    for name in &queried {
        assert!(
            known.contains(name.as_str()),
            "the dashboard queries {name}, which Bazaar does not keep"
        );
    }
    for name in [
        "bazaar_http_requests_total",
        "bazaar_store_documents",
        "process_open_fds",
    ] {
        assert!(declared.contains(name), "{name} is exposed: {exposition}");
    }
    app.stop().await;
}

#[tokio::test]
async fn readyz_is_503_while_a_text_index_is_missing_and_200_once_it_exists() {
    let app = common::spawn_app().await;
    // As while a large collection's text index is still being built after start-up.
    app.db
        .collection::<bson::Document>("products")
        .drop_index(bazaar::search::PRODUCT_INDEX)
        .await
        .expect("index dropped");
    let (status, body) = get_text(&app.client, &app.url("/readyz")).await;
    assert_eq!(status, 503, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["ready"], false);
    let pending = answer["pending"].to_string();
    assert!(pending.contains("products"), "{pending}");
    // Liveness is not readiness: the process and the database are fine.
    assert_eq!(app.get("/healthz").await.status(), 200);

    bazaar::startup::indexes::ensure_indexes(&app.db)
        .await
        .expect("indexes created");
    let (status, body) = get_text(&app.client, &app.url("/readyz")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, r#"{"ready":true,"pending":[]}"#);
    app.stop().await;
}

#[tokio::test]
async fn a_trusted_proxys_request_id_is_on_every_json_log_line_of_its_request() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bazaar = start_bazaar(
        dir.path(),
        &[
            ("BAZAAR_LOG__FORMAT", "json"),
            // Every database command is a debug line inside the request's span.
            ("BAZAAR_LOG__LEVEL", "bazaar=debug,info"),
            ("BAZAAR_LOG__DATABASE_COMMANDS", "true"),
            ("BAZAAR_SERVER__TRUSTED_PROXIES", "127.0.0.1, ::1"),
        ],
    );
    let client = reqwest::Client::new();
    let response = client
        .get(format!("{}/products", bazaar.address))
        .header("X-Request-Id", "proxy-req-0042")
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-request-id"], "proxy-req-0042");
    // A header that is not a sane token is replaced by a fresh id.
    let replaced = client
        .get(format!("{}/", bazaar.address))
        .header("X-Request-Id", "<script>")
        .send()
        .await
        .expect("answered");
    let fresh = replaced.headers()["x-request-id"].to_str().expect("ascii");
    assert!(
        fresh.len() == 16 && fresh.bytes().all(|b| b.is_ascii_hexdigit()),
        "{fresh}"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = bazaar.log_text();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let ours: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["span"]["id"] == "proxy-req-0042")
        .collect();
    let commands = ours
        .iter()
        .filter(|l| l["fields"]["message"] == "database command")
        .count();
    assert!(
        commands >= 1,
        "the page's database commands carry its id:\n{log}"
    );
    assert!(
        ours.iter()
            .any(|l| l["fields"]["message"] == "request" && l["fields"]["status"] == 200),
        "the request line carries its id:\n{log}"
    );
}

#[tokio::test]
async fn an_untrusted_peers_forwarding_headers_are_ignored() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bazaar = start_bazaar(dir.path(), &[]);
    let response = reqwest::Client::new()
        .get(format!("{}/", bazaar.address))
        .header("X-Request-Id", "spoofed-id")
        .send()
        .await
        .expect("answered");
    assert_ne!(response.headers()["x-request-id"], "spoofed-id");
}

#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    let Some(analyze) = tool("systemd-analyze", "systemd") else {
        return;
    };
    let unit = std::fs::read_to_string(common::repo_root().join("contrib/bazaar.service"))
        .expect("unit file");
    assert!(unit.contains("ExecStart=/usr/local/bin/bazaar serve"));
    for hardening in [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "StateDirectory=bazaar",
        "DynamicUser=yes",
    ] {
        assert!(unit.contains(hardening), "the unit sets {hardening}");
    }
    // Verified as installed, with the binary where the unit expects it (here: the built one).
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bazaar.service");
    let unit = unit.replace(
        "/usr/local/bin/bazaar",
        &PathBuf::from(env!("CARGO_BIN_EXE_bazaar"))
            .display()
            .to_string(),
    );
    std::fs::write(&path, unit).expect("unit written");
    let out = Command::new(analyze)
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify: {}\n{stderr}",
        out.status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_bazaar_and_answers_queries_about_it() {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let bazaar = start_bazaar(dir.path(), &[("BAZAAR_METRICS__TOKEN", TOKEN)]);
    let client = reqwest::Client::new();
    const HOME_VISITS: usize = 7;
    for _ in 0..HOME_VISITS {
        assert_eq!(
            get_text(&client, &format!("{}/", bazaar.address)).await.0,
            200
        );
    }
    let prometheus_port = common::free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: bazaar\n    authorization:\n      credentials: {TOKEN}\n\
             \x20   static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            port_of(&bazaar.address)
        ),
    )
    .expect("config written");
    let _prometheus = Killed(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );
    let query = |q: &str| {
        let url = reqwest::Url::parse_with_params(
            &format!("http://127.0.0.1:{prometheus_port}/api/v1/query"),
            &[("query", q)],
        )
        .expect("url");
        let client = client.clone();
        async move {
            let text = client.get(url).send().await.ok()?.text().await.ok()?;
            let answer: serde_json::Value = serde_json::from_str(&text).ok()?;
            let value = answer["data"]["result"][0]["value"][1]
                .as_str()?
                .to_string();
            value.parse::<f64>().ok()
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut home = None;
    while Instant::now() < deadline {
        home = query(r#"sum(bazaar_http_requests_total{route="/",status="2xx"})"#).await;
        if home.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Only this test visited the home page of this process, and Prometheus never does.
    assert_eq!(
        home,
        Some(HOME_VISITS as f64),
        "Prometheus's count of home page views"
    );
    assert_eq!(
        query(r#"up{job="bazaar"}"#).await,
        Some(1.0),
        "the scrape succeeds"
    );
    let products = query(r#"bazaar_store_documents{collection="products"}"#).await;
    assert!(products.is_some_and(|n| n > 0.0), "{products:?}");
    assert!(query("process_resident_memory_bytes")
        .await
        .is_some_and(|b| b > 1e6));
}

/// A self-signed certificate for `localhost`, made with the openssl command line.
fn self_signed_certificate(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let openssl = tool("openssl", "openssl")?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new(openssl)
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl made a certificate");
    Some((cert, key))
}

/// `curl` over TLS to nginx, from the loopback address `from`: status line and headers, body.
fn curl(url: &str, from: &str, extra: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sk", "--interface", from, "-D", "-", "--max-time", "20"])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_ascii_lowercase(), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_nginx_cookies_are_secure_hsts_is_sent_clients_are_told_apart_and_links_are_absolute(
) {
    let Some(nginx) = tool("nginx", "nginx") else {
        return;
    };
    if tool("curl", "curl").is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((cert, key)) = self_signed_certificate(dir.path()) else {
        return;
    };
    let https_port = common::free_port();
    let http_port = common::free_port();
    let public_url = format!("https://localhost:{https_port}");
    // With a public URL set, Bazaar prints that, not the port it listens on: choose the port.
    let bazaar_port = common::free_port().to_string();
    let _bazaar = start_bazaar(
        dir.path(),
        &[
            ("BAZAAR_SERVER__PORT", &bazaar_port),
            ("BAZAAR_SERVER__TLS", "true"),
            ("BAZAAR_SERVER__PUBLIC_URL", &public_url),
            ("BAZAAR_SERVER__TRUSTED_PROXIES", "127.0.0.1"),
            ("BAZAAR_CART__NEW_CARTS_PER_HOUR", "1"),
        ],
    );
    let site = std::fs::read_to_string(common::repo_root().join("contrib/nginx.conf"))
        .expect("site file")
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{bazaar_port}"))
        .replace("listen 80;", &format!("listen {http_port};"))
        .replace("listen [::]:80;", "")
        .replace(
            "listen 443 ssl http2;",
            &format!("listen {https_port} ssl http2;"),
        )
        .replace("listen [::]:443 ssl http2;", "")
        .replace(
            "/etc/ssl/certs/shop.example.com.pem",
            &cert.display().to_string(),
        )
        .replace(
            "/etc/ssl/private/shop.example.com.key",
            &key.display().to_string(),
        )
        .replace(
            "/var/cache/nginx/bazaar",
            &dir.path().join("cache").display().to_string(),
        )
        .replace("server_name shop.example.com;", "server_name localhost;");
    let site_path = dir.path().join("site.conf");
    std::fs::write(&site_path, site).expect("site written");
    let main = format!(
        "daemon off;\npid {pid};\nerror_log {err} warn;\nworker_processes 1;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {tmp}/body;\n  proxy_temp_path {tmp}/proxy;\n\
         \x20 fastcgi_temp_path {tmp}/fastcgi;\n  uwsgi_temp_path {tmp}/uwsgi;\n  scgi_temp_path {tmp}/scgi;\n\
         \x20 include {site};\n}}\n",
        pid = dir.path().join("nginx.pid").display(),
        err = dir.path().join("nginx-error.log").display(),
        tmp = dir.path().display(),
        site = site_path.display(),
    );
    let main_path = dir.path().join("nginx.conf");
    std::fs::write(&main_path, main).expect("nginx.conf written");
    let test = Command::new(&nginx)
        .arg("-t")
        .arg("-c")
        .arg(&main_path)
        .output()
        .expect("nginx -t runs");
    assert!(
        test.status.success(),
        "nginx accepts contrib/nginx.conf: {}",
        String::from_utf8_lossy(&test.stderr)
    );
    let _nginx = Killed(
        Command::new(&nginx)
            .arg("-c")
            .arg(&main_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts"),
    );
    let home = format!("{public_url}/");
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut head, mut body) = (String::new(), String::new());
    while Instant::now() < deadline {
        (head, body) = curl(&home, "127.0.0.2", &[]);
        if head.starts_with("http/2 200") || head.starts_with("http/1.1 200") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        head.contains(" 200"),
        "home page through nginx: {head}{body}\nnginx: {}",
        std::fs::read_to_string(dir.path().join("nginx-error.log")).unwrap_or_default()
    );
    assert!(head.contains("strict-transport-security:"), "HSTS: {head}");
    assert!(
        head.contains("x-request-id:"),
        "nginx's request id comes back: {head}"
    );
    assert!(body.contains("<html"), "the home page");
    // Plain HTTP is sent to HTTPS.
    let (plain, _) = curl(&format!("http://localhost:{http_port}/"), "127.0.0.2", &[]);
    assert!(
        plain.contains(" 301") && plain.contains("location: https://localhost"),
        "{plain}"
    );

    // A new cart per client address per hour: the second client is another address.
    let csrf = |body: &str| {
        let doc = common::html(body);
        common::attr(&doc, "input[name=csrf_token]", "value").expect("a form with a CSRF token")
    };
    let product = common::html(&body)
        .select(&scraper::Selector::parse("a[href^='/products/']").expect("selector"))
        .filter_map(|a| a.value().attr("href").map(str::to_string))
        .find(|h| !h.contains('?'))
        .expect("the home page links a product");
    let jar = |name: &str| dir.path().join(name).display().to_string();
    let add_to_cart = |from: &str, cookies: &str, claimed: &str| {
        let (_, page) = curl(
            &format!("{public_url}{product}"),
            from,
            &["-c", cookies, "-b", cookies],
        );
        let sku = common::attr(&common::html(&page), "input[name=sku]", "value")
            .expect("the product page has an add form");
        let token = csrf(&page);
        curl(
            &format!("{public_url}/cart/items"),
            from,
            &[
                "-c",
                cookies,
                "-b",
                cookies,
                "-H",
                &format!("X-Forwarded-For: {claimed}"),
                "-H",
                &format!("Origin: {public_url}"),
                "--data-urlencode",
                &format!("csrf_token={token}"),
                "--data-urlencode",
                &format!("sku={sku}"),
                "--data-urlencode",
                "qty=1",
            ],
        )
    };
    let first = jar("first.cookies");
    // Added: to the cart; refused: back to the product page with the reason.
    // (Header order varies from response to response, so the location is looked for line by
    // line: it may be the last header, with no line end after it in the captured head.)
    let added = |head: &str| {
        head.contains(" 303") && head.lines().any(|l| l.trim_end() == "location: /cart")
    };
    let (head, _) = add_to_cart("127.0.0.2", &first, "198.51.100.1");
    assert!(added(&head), "the first cart of 127.0.0.2: {head}");
    let set_cookie = head
        .lines()
        .find(|l| l.starts_with("set-cookie:"))
        .expect("the session cookie is set");
    assert!(set_cookie.contains("; secure"), "{set_cookie}");
    assert!(set_cookie.contains("; httponly"), "{set_cookie}");
    // The same client claiming another address through X-Forwarded-For is still itself.
    let (head, _) = add_to_cart("127.0.0.2", &jar("second.cookies"), "198.51.100.2");
    assert!(
        head.contains(" 303") && !added(&head),
        "a second cart from 127.0.0.2 is refused: {head}"
    );
    // Another client address gets its own allowance.
    let (head, _) = add_to_cart("127.0.0.3", &jar("third.cookies"), "198.51.100.2");
    assert!(added(&head), "the first cart of 127.0.0.3: {head}");

    // Absolute links use the public address.
    let (head, feed) = curl(&format!("{public_url}/blog/feed.atom"), "127.0.0.2", &[]);
    assert!(head.contains(" 200"), "{head}");
    assert!(feed.contains(&format!("{public_url}/blog/")), "{feed}");
    // Static files are cached by nginx.
    let css = regex::Regex::new(r#"/static/[^"]+\.css\?v=[0-9a-f]+"#)
        .expect("regex")
        .find(&body_of_home(&home))
        .map(|m| m.as_str().to_string())
        .expect("the stylesheet link");
    let _ = curl(&format!("{public_url}{css}"), "127.0.0.2", &[]);
    let (head, _) = curl(&format!("{public_url}{css}"), "127.0.0.2", &[]);
    assert!(head.contains("x-cache-status: hit"), "{head}");
}

fn body_of_home(url: &str) -> String {
    curl(url, "127.0.0.2", &[]).1
}
