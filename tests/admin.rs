//! The admin section: HTTP Basic auth on every method and path, and the dashboard.

use crate::common::*;
use reqwest::StatusCode;

fn realm(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

#[tokio::test]
async fn admin_without_credentials_gets_401_with_a_basic_challenge() {
    let app = spawn_app().await;
    let response = app.get("/admin").await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(realm(&response).is_some_and(|r| r.starts_with("Basic realm=\"Bazaar admin\"")));
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Sign-in required");
    assert_eq!(
        count(&doc, "footer.site-footer"),
        1,
        "the 401 page is in the layout"
    );
}

#[tokio::test]
async fn admin_with_wrong_credentials_gets_401() {
    let app = spawn_app().await;
    for (user, password) in [
        (ADMIN_USER, "wrong password"),
        ("root", ADMIN_PASSWORD),
        (ADMIN_USER, ""),
    ] {
        let response = app
            .client
            .get(app.url("/admin"))
            .basic_auth(user, Some(password))
            .send()
            .await
            .expect("sent");
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "{user}:{password}"
        );
        assert!(realm(&response).is_some());
    }
    // Not Basic at all.
    let response = app
        .client
        .get(app.url("/admin"))
        .bearer_auth("token")
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn admin_with_the_right_credentials_shows_the_dashboard_in_the_admin_layout() {
    // The System page's counts are checked against every collection the demo data fills.
    let app = spawn_app_with_demo().await;
    let response = app.get_admin("/admin").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Dashboard");
    assert_eq!(count(&doc, "body.area-admin"), 1);
    assert_eq!(
        texts(&doc, "header nav a"),
        vec![
            "Dashboard",
            "Products",
            "Categories",
            "Orders",
            "Customers",
            "Carts",
            "Stock",
            "Content",
            "Media",
            "Menus",
            "Comments",
            "Analytics",
            "System",
            "Settings",
            "View site"
        ]
    );
    // The database facts are on the System page.
    let response = app.get_admin("/admin/system").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert!(texts(&doc, ".facts dd")
        .iter()
        .any(|d| d.contains("embedded docstore, in memory")));
    // Real counts: the seeded settings document and demo catalog, by collection name.
    // The collections' table only: the background jobs' table (filled when another test of
    // this binary ran the jobs, whose statuses are kept per process) has the same class.
    let rows = texts(
        &doc,
        "section[aria-labelledby=collections-heading] table.counts tbody tr",
    );
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r.trim_end_matches(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(
        names,
        [
            "accounts",
            "assets.chunks",
            "assets.files",
            "carts",
            "categories",
            "comments",
            // The traffic log (its TTL index is made at start-up).
            "events",
            "gateway_charges",
            "leases",
            "nodes",
            "orders",
            "outbox",
            // Deep pages' kept anchors (their TTL index is made at start-up).
            "page_anchors",
            "payments",
            "privacy_requests",
            "products",
            "redirects",
            "reservations",
            "revisions",
            "settings",
            "sign_in_limits",
            "sign_in_tokens",
            "stats.daily",
            "stats.monthly",
            "traffic.daily",
            "traffic.dimensions",
            "traffic.dimensions.hourly",
            "traffic.hourly",
            "traffic.monthly",
            "traffic.weekly"
        ],
        "{rows:?}"
    );
    assert!(rows.contains(&"settings1".to_string()), "{rows:?}");
    assert!(
        csrf_token(&doc).is_some(),
        "the admin form carries a CSRF token"
    );

    // The trailing-slash spelling is the same page.
    assert_eq!(app.get_admin("/admin/").await.status(), StatusCode::OK);
}

#[tokio::test]
async fn every_method_and_path_under_admin_needs_credentials_before_anything_else() {
    let app = spawn_app().await;
    // A POST without credentials and without a CSRF token is 401, not 403.
    let response = app.post_form("/admin/seed", &[]).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    for method in [
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
        reqwest::Method::PATCH,
    ] {
        let response = app
            .client
            .request(method.clone(), app.url("/admin"))
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{method}");
    }
    // Paths that do not exist do not reveal so without credentials.
    assert_eq!(
        app.get("/admin/no-such-screen").await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.get_admin("/admin/no-such-screen").await.status(),
        StatusCode::NOT_FOUND
    );
    // A percent-encoded spelling of the same path is still the admin area.
    assert_eq!(app.get("/%61dmin").await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.get("/admin%2F").await.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_environment_override_changes_the_admin_user_name() {
    let app = spawn_app_with(&[("BAZAAR_ADMIN__USERNAME", "manager")]).await;
    assert_eq!(
        app.get_admin("/admin").await.status(),
        StatusCode::UNAUTHORIZED,
        "the default user name no longer works"
    );
    let response = app
        .client
        .get(app.url("/admin"))
        .basic_auth("manager", Some(ADMIN_PASSWORD))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(texts(&doc, ".lead strong"), vec!["manager"]);
}

#[tokio::test]
async fn without_a_configured_hash_a_generated_password_opens_the_admin() {
    let settings = bazaar::config::Settings::load(
        Some(&repo_root().join("config.toml")),
        [
            ("BAZAAR_DATABASE__URI", "memory"),
            ("BAZAAR_SERVER__PORT", "0"),
            ("BAZAAR_SERVER__WORKERS", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    )
    .expect("settings");
    assert!(settings.admin.password_hash.is_none());
    let app = bazaar::startup::Application::build(settings)
        .await
        .expect("starts");
    let password = app
        .generated_admin_password()
        .expect("a password was generated")
        .to_string();
    assert!(password.len() >= 20);
    let url = format!("http://127.0.0.1:{}/admin", app.port());
    tokio::spawn(app.run_until_stopped());
    let client = reqwest::Client::new();
    let ok = client
        .get(&url)
        .basic_auth("admin", Some(&password))
        .send()
        .await
        .expect("sent");
    assert_eq!(ok.status(), StatusCode::OK);
    let wrong = client
        .get(&url)
        .basic_auth("admin", Some("guess"))
        .send()
        .await
        .expect("sent");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
}
