//! Sessions, CSRF tokens and flash messages, driven through the admin dashboard's seed form
//! (the foundation's one state-changing form).

use crate::common::*;
use reqwest::StatusCode;

async fn dashboard_token(app: &TestApp) -> String {
    dashboard_token_for(app, &app.client).await
}

/// The System page's demo-data form token as seen by `client` (another visitor when it is not
/// `app.client`).
async fn dashboard_token_for(app: &TestApp, client: &reqwest::Client) -> String {
    let response = client
        .get(app.url("/admin/system"))
        .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    csrf_token(&html(&body(response).await)).expect("the demo-data form has a CSRF token")
}

#[tokio::test]
async fn a_post_without_a_csrf_token_gets_the_403_page() {
    let app = spawn_app().await;
    // Even with a session (the dashboard was visited), a missing token is refused.
    dashboard_token(&app).await;
    let response = app.post_admin_form("/admin/seed", &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Forbidden");
    assert!(texts(&doc, "main p")
        .iter()
        .any(|p| p.contains("did not come from this site")));
    // An error under /admin stays in the admin layout, with its navigation.
    let nav = texts(&doc, "header nav a");
    assert!(
        nav.iter().any(|a| a == "Dashboard") && nav.iter().any(|a| a == "View site"),
        "{nav:?}"
    );
}

#[tokio::test]
async fn a_post_to_any_address_without_a_token_is_refused_before_routing() {
    let app = spawn_app().await;
    for path in ["/", "/some/future/form"] {
        let response = app.post_form(path, &[("name", "value")]).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let response = app.client.delete(app.url("/")).send().await.expect("sent");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_wrong_or_foreign_csrf_token_is_refused() {
    let app = spawn_app().await;
    let mine = dashboard_token(&app).await;
    let response = app
        .post_admin_form("/admin/seed", &[("csrf_token", "0123456789abcdef")])
        .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);

    // Another visitor's valid token does not work in this session.
    let (other, _) = new_client();
    let theirs = dashboard_token_for(&app, &other).await;
    assert_ne!(mine, theirs, "each session has its own token");
    let response = app
        .post_admin_form("/admin/seed", &[("csrf_token", theirs.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_post_with_the_token_succeeds_and_its_flash_message_is_shown_once() {
    // With the demo data in place, the demo-data form is a POST that changes nothing and
    // answers with a known flash message.
    let app = spawn_app_with_demo().await;
    let token = dashboard_token(&app).await;
    let response = app
        .post_admin_form("/admin/seed", &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok()),
        Some("/admin/system")
    );

    let doc = html(&body(app.get_admin("/admin/system").await).await);
    assert_eq!(
        texts(&doc, ".flash"),
        vec!["Demo data is already in place; nothing was added."]
    );
    assert_eq!(count(&doc, ".flash-success"), 1);

    let doc = html(&body(app.get_admin("/admin/system").await).await);
    assert_eq!(
        count(&doc, ".flash"),
        0,
        "a flash message is shown only once"
    );
}

#[tokio::test]
async fn the_session_survives_across_requests() {
    let app = spawn_app().await;
    let first = dashboard_token(&app).await;
    let second = dashboard_token(&app).await;
    assert_eq!(first, second, "the same session keeps its CSRF token");

    // A client without the cookie is a different session.
    let (stranger, _) = new_client();
    assert_ne!(dashboard_token_for(&app, &stranger).await, first);
}

#[tokio::test]
async fn the_session_cookie_is_http_only_same_site_lax_and_not_secure_without_tls() {
    let app = spawn_app().await;
    let response = app.get_admin("/admin/system").await;
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("bazaar_session="))
        .expect("a session cookie is set when a form needs a token")
        .to_string();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(!cookie.contains("Secure"), "{cookie}");

    let tls_app = spawn_app_with(&[("BAZAAR_SERVER__TLS", "true")]).await;
    let response = tls_app.get_admin("/admin/system").await;
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("bazaar_session="))
        .expect("session cookie")
        .to_string();
    assert!(cookie.contains("Secure"), "{cookie}");
}

#[tokio::test]
async fn sessions_survive_a_restart_because_the_generated_key_is_kept_in_the_data_directory() {
    let data = tempfile::tempdir().expect("tempdir");
    let path = data.path().to_string_lossy().to_string();
    let env = [
        ("BAZAAR_DATABASE__URI", "embedded"),
        ("BAZAAR_DATABASE__PATH", path.as_str()),
    ];

    // The demo data in place makes the demo-data form a POST with a known flash message.
    let app = spawn_app_with_demo_and(&env).await;
    let token = dashboard_token(&app).await;
    let response = app
        .post_admin_form("/admin/seed", &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let cookie = app
        .cookie_header()
        .expect("the client holds the session cookie");
    app.stop().await;
    assert!(data.path().join("session.key").exists());

    // Same data directory, new process-level state: the old cookie still opens the session.
    let app = spawn_app_with_demo_and(&env).await;
    let response = reqwest::Client::new()
        .get(app.url("/admin/system"))
        .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
        .header("cookie", cookie)
        .send()
        .await
        .expect("sent");
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, ".flash"),
        vec!["Demo data is already in place; nothing was added."],
        "the flash stored before the restart is shown after it"
    );
    assert_eq!(csrf_token(&doc), Some(token));
    app.stop().await;
}

#[tokio::test]
async fn an_oversized_form_gets_the_400_page() {
    let app = spawn_app().await;
    let token = dashboard_token(&app).await;
    // Past the largest form any field allows (the editor's longest text, URL-encoded).
    let filler = "x".repeat(bazaar::web::csrf::MAX_FORM_BYTES + 1024);
    let response = app
        .post_admin_form(
            "/admin/seed",
            &[("csrf_token", token.as_str()), ("notes", filler.as_str())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Bad request");
    // An error under /admin stays in the admin layout, with its navigation.
    let nav = texts(&doc, "header nav a");
    assert!(
        nav.iter().any(|a| a == "Dashboard") && nav.iter().any(|a| a == "View site"),
        "{nav:?}"
    );
}
