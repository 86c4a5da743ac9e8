//! Customer accounts through HTTP: signing in by the emailed link (read from a real SMTP
//! exchange) or code, what a link or code refuses (used, expired, forged, another browser's
//! code, five wrong codes), session renewal and "sign out everywhere", the account's orders
//! (guest orders claimed by email), saved addresses prefilling checkout, 50 sign-ins at once,
//! and the timing of known against unknown addresses.

use std::time::{Duration, Instant};

use crate::common::shop::{product_with_stock, Shopper};
use crate::common::smtp::{Received, SmtpSink};
use crate::common::*;
use bazaar::accounts::store;
use bazaar::domain::EmailAddress;
use bson::doc;
use mailparse::MailHeaderMap;
use reqwest::StatusCode;

/// An app whose sender delivers to `sink` every 100 ms.
pub(crate) async fn app_sending_to(sink: &SmtpSink, extra: &[(&str, &str)]) -> TestApp {
    let port = sink.port.to_string();
    let mut env = vec![
        ("BAZAAR_EMAIL__SMTP_HOST", "127.0.0.1"),
        ("BAZAAR_EMAIL__SMTP_PORT", port.as_str()),
        ("BAZAAR_EMAIL__SMTP_SECURITY", "none"),
        ("BAZAAR_EMAIL__SEND_EVERY_MS", "100"),
        ("BAZAAR_EMAIL__RETRY_AFTER_SECS", "0"),
        ("BAZAAR_EMAIL__FROM", "shop@bazaar.test"),
    ];
    env.extend_from_slice(extra);
    spawn_app_with(&env).await
}

/// The link path and the code in a sign-in email's text.
fn link_and_code(text: &str) -> (String, String) {
    let link = text
        .split_whitespace()
        .find(|w| w.contains("/account/sign-in/link/"))
        .expect("the email holds a sign-in link");
    let path = link[link.find("/account/").expect("a path")..].to_string();
    let code = text
        .lines()
        .map(str::trim)
        .find(|l| l.len() == 6 && l.bytes().all(|b| b.is_ascii_digit()))
        .expect("the email holds a 6-digit code")
        .to_string();
    (path, code)
}

/// The newest sign-in email to `to`, read from the outbox (tests that are not about delivery).
async fn outbox_sign_in(app: &TestApp, to: &str) -> (String, String) {
    let found = app
        .db
        .collection::<bson::Document>("outbox")
        .find_one(doc! { "kind": "sign-in", "to": to })
        .sort(doc! { "created": -1 })
        .await
        .expect("query")
        .expect("a sign-in email was queued");
    link_and_code(found.get_str("text").expect("text"))
}

/// The sign-in email to `to` as the SMTP server received it.
pub(crate) fn received_sign_in(got: &[Received], to: &str) -> (String, String) {
    let message = got
        .iter()
        .rev()
        .find(|r| r.to.iter().any(|t| t.contains(to)))
        .expect("a message to the address");
    let mail = mailparse::parse_mail(&message.data).expect("MIME");
    assert!(mail
        .headers
        .get_first_value("Subject")
        .is_some_and(|s| s.contains("Sign in")));
    let text = mail
        .subparts
        .iter()
        .find(|p| p.ctype.mimetype == "text/plain")
        .expect("a text part")
        .get_body()
        .expect("body");
    link_and_code(&text)
}

async fn ask_to_sign_in(visitor: &Shopper, email: &str) -> reqwest::Response {
    visitor.post("/account/sign-in", &[("email", email)]).await
}

/// Follow a link as a browser does: open it, press its button.
async fn follow_link(visitor: &Shopper, path: &str) -> reqwest::Response {
    let opened = visitor.get(path).await;
    if opened.status() != StatusCode::OK {
        return opened;
    }
    visitor.post(path, &[]).await
}

/// Whether `visitor` is signed in (the account page answers rather than sending to sign-in).
async fn signed_in(visitor: &Shopper) -> bool {
    let response = visitor.get("/account").await;
    match response.status() {
        StatusCode::OK => true,
        StatusCode::SEE_OTHER => {
            assert_eq!(location(&response), "/account/sign-in");
            false
        }
        other => panic!("/account answered {other}"),
    }
}

/// A visitor signed in as `email` through the code (read from the outbox).
async fn signed_in_visitor(app: &TestApp, email: &str) -> Shopper {
    let mut visitor = Shopper::new(app).await;
    let asked = ask_to_sign_in(&visitor, email).await;
    assert_eq!(asked.status(), StatusCode::SEE_OTHER, "{email}");
    let (_, code) = outbox_sign_in(app, &email.trim().to_lowercase()).await;
    let entered = visitor
        .post("/account/sign-in/code", &[("code", &code)])
        .await;
    assert_eq!(entered.status(), StatusCode::SEE_OTHER, "{email}");
    assert_eq!(location(&entered), "/account");
    visitor.refresh_token().await;
    visitor
}

fn session_cookie(visitor: &Shopper) -> String {
    use reqwest::cookie::CookieStore;
    let url: reqwest::Url = visitor.address.parse().expect("url");
    visitor
        .jar
        .cookies(&url)
        .and_then(|v| v.to_str().ok().map(str::to_string))
        .unwrap_or_default()
}

async fn guest_order(app: &TestApp, sku: &str, email: &str) -> String {
    let shopper = Shopper::new(app).await;
    shopper.add(sku, "1").await;
    let mut form = crate::common::shop::checkout_form("4242424242424242");
    form[0].1 = email.to_string();
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let placed = shopper.post("/checkout", &fields).await;
    assert_eq!(placed.status(), StatusCode::SEE_OTHER);
    location(&placed)
        .rsplit('/')
        .next()
        .expect("an order number")
        .to_string()
}

#[tokio::test]
async fn a_customer_signs_in_by_the_emailed_link_and_sees_the_guest_order_placed_with_that_email() {
    let sink = SmtpSink::start().await;
    let app = app_sending_to(&sink, &[]).await;
    product_with_stock(&app.db, "acct-1", 10).await;
    let mine = guest_order(&app, "acct-1", "Ada.Lovelace@Example.COM").await;
    let theirs = guest_order(&app, "acct-1", "someone.else@example.com").await;

    let mut visitor = Shopper::new(&app).await;
    let header = html(&body(visitor.get("/products").await).await);
    assert_eq!(texts(&header, ".header-account"), ["Sign in"]);
    let asked = ask_to_sign_in(&visitor, "  ada.lovelace@example.com ").await;
    assert_eq!(asked.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&asked), "/account/sign-in/code");
    let code_page = html(&body(visitor.get("/account/sign-in/code").await).await);
    assert!(texts(&code_page, "main p")
        .iter()
        .any(|p| p.contains("ada.lovelace@example.com")));

    // Two order confirmations, then the sign-in email.
    let got = sink.wait_for(3, Duration::from_secs(20)).await;
    let (link, code) = received_sign_in(&got, "ada.lovelace@example.com");
    // Once sent, the outbox keeps no usable copy of the link or the code.
    let mut kept = None;
    for _ in 0..100 {
        let message = app
            .db
            .collection::<bson::Document>("outbox")
            .find_one(doc! { "kind": "sign-in", "status": "sent" })
            .await
            .expect("query");
        if message.is_some() {
            kept = message;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kept = kept.expect("the sign-in email is marked sent");
    for part in ["text", "html"] {
        let body = kept.get_str(part).expect(part);
        assert_eq!(body, bazaar::mail::REDACTED);
        assert!(!body.contains(&code) && !body.contains("/account/sign-in/link/"));
    }

    let cookie_before = session_cookie(&visitor);
    let token_before = visitor.csrf.clone();
    let signed = follow_link(&visitor, &link).await;
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&signed), "/account");
    assert_ne!(
        session_cookie(&visitor),
        cookie_before,
        "the session cookie is renewed at sign-in"
    );
    // The form token of before the sign-in no longer works.
    let stale = visitor.post("/account/settings", &[]).await;
    assert_eq!(stale.status(), StatusCode::FORBIDDEN);
    visitor.refresh_token().await;
    assert_ne!(visitor.csrf, token_before, "a new CSRF token after sign-in");

    let account = html(&body(visitor.get("/account").await).await);
    assert_eq!(
        texts(&account, ".account-email"),
        ["ada.lovelace@example.com"]
    );
    let listed = texts(&account, ".account-order td a");
    assert_eq!(
        listed,
        [mine.as_str()],
        "only the order placed with this email"
    );
    assert_eq!(texts(&account, ".header-account"), ["Account"]);

    let order = html(&body(visitor.get(&format!("/account/orders/{mine}")).await).await);
    assert_eq!(texts(&order, ".order-status strong"), ["paid"]);
    let other = visitor.get(&format!("/account/orders/{theirs}")).await;
    assert_eq!(other.status(), StatusCode::NOT_FOUND);

    let stored = store::find_by_email(
        &app.db,
        &EmailAddress::parse("ada.lovelace@example.com").expect("valid"),
    )
    .await
    .expect("query")
    .expect("the account was created at the first sign-in");
    let claimed = bazaar::checkout::orders::by_number(&app.db, &order_number(&mine))
        .await
        .expect("query")
        .expect("order");
    assert_eq!(claimed.account_id, Some(stored.id));
}

#[tokio::test]
async fn a_sign_in_link_works_once() {
    let app = spawn_app().await;
    let visitor = Shopper::new(&app).await;
    ask_to_sign_in(&visitor, "once@example.com").await;
    let (link, code) = outbox_sign_in(&app, "once@example.com").await;
    let first = follow_link(&visitor, &link).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);

    let other = Shopper::new(&app).await;
    let again = follow_link(&other, &link).await;
    assert_eq!(again.status(), StatusCode::GONE);
    assert!(!signed_in(&other).await, "no session from a used link");
    // The code of the used token is dead too.
    let late = visitor
        .post("/account/sign-in/code", &[("code", &code)])
        .await;
    assert_ne!(late.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn an_expired_link_and_code_are_refused() {
    let app = spawn_app().await;
    let visitor = Shopper::new(&app).await;
    ask_to_sign_in(&visitor, "late@example.com").await;
    let (link, code) = outbox_sign_in(&app, "late@example.com").await;
    app.clock.step_forward(Duration::from_secs(16 * 60));
    let entered = visitor
        .post("/account/sign-in/code", &[("code", &code)])
        .await;
    assert_eq!(entered.status(), StatusCode::GONE);
    let opened = visitor.get(&link).await;
    assert_eq!(opened.status(), StatusCode::GONE);
    let pressed = visitor.post(&link, &[]).await;
    assert_eq!(pressed.status(), StatusCode::GONE);
    assert!(!signed_in(&visitor).await);
}

#[tokio::test]
async fn a_forged_or_truncated_link_is_refused_and_gives_no_session() {
    let app = spawn_app().await;
    let visitor = Shopper::new(&app).await;
    ask_to_sign_in(&visitor, "forge@example.com").await;
    let (link, _) = outbox_sign_in(&app, "forge@example.com").await;
    let token = link.rsplit('/').next().expect("token").to_string();
    let mut flipped = token.clone().into_bytes();
    flipped[10] = if flipped[10] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).expect("ascii");
    for forged in [
        token[..63].to_string(),
        token[..32].to_string(),
        format!("{token}0"),
        token.to_uppercase(),
        flipped,
        "0".repeat(64),
        "not-a-token".to_string(),
    ] {
        let path = format!("/account/sign-in/link/{forged}");
        assert_eq!(
            visitor.get(&path).await.status(),
            StatusCode::GONE,
            "{forged}"
        );
        assert_eq!(
            visitor.post(&path, &[]).await.status(),
            StatusCode::GONE,
            "{forged}"
        );
    }
    assert!(!signed_in(&visitor).await);
    // The real one still works.
    assert_eq!(
        follow_link(&visitor, &link).await.status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn a_code_works_only_in_the_browser_that_asked_for_it() {
    let app = spawn_app().await;
    let asker = Shopper::new(&app).await;
    ask_to_sign_in(&asker, "bound@example.com").await;
    let (_, code) = outbox_sign_in(&app, "bound@example.com").await;

    // Another browser with no sign-in of its own, and one that asked for another address.
    let stranger = Shopper::new(&app).await;
    let refused = stranger
        .post("/account/sign-in/code", &[("code", &code)])
        .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert!(!signed_in(&stranger).await);
    let other = Shopper::new(&app).await;
    ask_to_sign_in(&other, "other@example.com").await;
    let refused = other
        .post("/account/sign-in/code", &[("code", &code)])
        .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert!(!signed_in(&other).await);

    let entered = asker
        .post("/account/sign-in/code", &[("code", &code)])
        .await;
    assert_eq!(entered.status(), StatusCode::SEE_OTHER);
    assert!(signed_in(&asker).await);
}

#[tokio::test]
async fn a_link_opened_in_another_browser_is_refused_and_still_works_where_it_was_asked_for() {
    let app = spawn_app().await;
    let asker = Shopper::new(&app).await;
    ask_to_sign_in(&asker, "linked@example.com").await;
    let (link, _) = outbox_sign_in(&app, "linked@example.com").await;

    // Someone who only reads the mail (another browser, no sign-in asked there).
    let reader = Shopper::new(&app).await;
    let opened = reader.get(&link).await;
    assert_eq!(opened.status(), StatusCode::FORBIDDEN);
    let page = body(opened).await;
    assert!(page.contains("asked for in another browser"), "{page}");
    assert_eq!(
        reader.post(&link, &[]).await.status(),
        StatusCode::FORBIDDEN
    );
    assert!(!signed_in(&reader).await);

    // The asking browser still signs in with it: the refusal used nothing.
    assert_eq!(
        follow_link(&asker, &link).await.status(),
        StatusCode::SEE_OTHER
    );
    assert!(signed_in(&asker).await);
}

#[tokio::test]
async fn five_wrong_codes_kill_the_token() {
    let app = spawn_app().await;
    let visitor = Shopper::new(&app).await;
    ask_to_sign_in(&visitor, "guess@example.com").await;
    let (link, code) = outbox_sign_in(&app, "guess@example.com").await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for n in 1..=5 {
        let response = visitor
            .post("/account/sign-in/code", &[("code", wrong)])
            .await;
        let expected = if n < 5 {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::GONE
        };
        assert_eq!(response.status(), expected, "wrong code {n}");
    }
    let right = visitor
        .post("/account/sign-in/code", &[("code", &code)])
        .await;
    // The token is dead and this browser's pending sign-in forgotten.
    assert_eq!(right.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        follow_link(&visitor, &link).await.status(),
        StatusCode::GONE
    );
    assert!(!signed_in(&visitor).await);
    let left = app
        .db
        .collection::<bson::Document>("sign_in_tokens")
        .count_documents(doc! {})
        .await
        .expect("count");
    assert_eq!(left, 0, "the dead token is deleted");
}

#[tokio::test]
async fn signing_out_everywhere_signs_out_a_second_client() {
    let app = spawn_app().await;
    let laptop = signed_in_visitor(&app, "two@example.com").await;
    let phone = signed_in_visitor(&app, "two@example.com").await;
    assert!(signed_in(&laptop).await && signed_in(&phone).await);

    let out = laptop.post("/account/sign-out-everywhere", &[]).await;
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(!signed_in(&laptop).await);
    assert!(
        !signed_in(&phone).await,
        "the other client is signed out too"
    );

    // Plain sign-out ends only its own session.
    let a = signed_in_visitor(&app, "two@example.com").await;
    let b = signed_in_visitor(&app, "two@example.com").await;
    let cookie = session_cookie(&a);
    assert_eq!(
        a.post("/account/sign-out", &[]).await.status(),
        StatusCode::SEE_OTHER
    );
    assert_ne!(session_cookie(&a), cookie, "a new cookie after sign-out");
    assert!(!signed_in(&a).await);
    assert!(signed_in(&b).await);
}

#[tokio::test]
async fn a_saved_default_address_prefills_checkout() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "acct-prefill", 5).await;
    let visitor = signed_in_visitor(&app, "Prefill@Example.com").await;
    let added = visitor
        .post(
            "/account/addresses",
            &[
                ("name", "Grace Hopper"),
                ("line1", "1 Navy Yard"),
                ("line2", "Building 4"),
                ("city", "Arlington"),
                ("postcode", "22202"),
                ("country", "United States"),
            ],
        )
        .await;
    assert_eq!(added.status(), StatusCode::SEE_OTHER);
    let second = visitor
        .post(
            "/account/addresses",
            &[
                ("name", "Grace Hopper"),
                ("line1", "2 Other Street"),
                ("city", "Boston"),
                ("postcode", "02101"),
                ("country", "United States"),
            ],
        )
        .await;
    assert_eq!(second.status(), StatusCode::SEE_OTHER);
    let list = html(&body(visitor.get("/account/addresses").await).await);
    assert_eq!(count(&list, ".saved-address"), 2);
    assert_eq!(
        count(&list, ".saved-address-default"),
        1,
        "the first is the default"
    );

    visitor.add("acct-prefill", "1").await;
    let form = html(&body(visitor.get("/checkout").await).await);
    let value = |name: &str| attr(&form, &format!("input[name={name}]"), "value");
    assert_eq!(value("email").as_deref(), Some("prefill@example.com"));
    assert_eq!(value("name").as_deref(), Some("Grace Hopper"));
    assert_eq!(value("street").as_deref(), Some("1 Navy Yard, Building 4"));
    assert_eq!(value("city").as_deref(), Some("Arlington"));
    assert_eq!(value("postcode").as_deref(), Some("22202"));
    assert_eq!(
        texts(&form, "select[name=country] option[selected]"),
        ["United States"]
    );

    // Make the second the default: it prefills instead.
    let account = store::find_by_email(
        &app.db,
        &EmailAddress::parse("prefill@example.com").expect("valid"),
    )
    .await
    .expect("query")
    .expect("account");
    let boston = account.addresses[1].id.to_hex();
    let made = visitor
        .post(&format!("/account/addresses/{boston}/default"), &[])
        .await;
    assert_eq!(made.status(), StatusCode::SEE_OTHER);
    let form = html(&body(visitor.get("/checkout").await).await);
    assert_eq!(
        attr(&form, "input[name=city]", "value").as_deref(),
        Some("Boston")
    );

    // A guest's checkout form is empty, as before.
    let guest = Shopper::new(&app).await;
    guest.add("acct-prefill", "1").await;
    let form = html(&body(guest.get("/checkout").await).await);
    assert_eq!(
        attr(&form, "input[name=email]", "value").as_deref(),
        Some("")
    );
}

#[tokio::test]
async fn bad_address_and_settings_forms_come_back_with_messages() {
    let app = spawn_app().await;
    let visitor = signed_in_visitor(&app, "forms@example.com").await;
    let bad = visitor
        .post(
            "/account/addresses",
            &[("name", ""), ("line1", "x\u{1}y"), ("country", "Atlantis")],
        )
        .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let doc = html(&body(bad).await);
    let errors = texts(&doc, ".field-error");
    assert!(errors.len() >= 4, "{errors:?}");
    let long = "n".repeat(200);
    let bad = visitor
        .post("/account/settings", &[("display_name", &long)])
        .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let saved = visitor
        .post(
            "/account/settings",
            &[("display_name", " Ada "), ("notify_replies", "on")],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let account = store::find_by_email(
        &app.db,
        &EmailAddress::parse("forms@example.com").expect("valid"),
    )
    .await
    .expect("query")
    .expect("account");
    assert_eq!(account.display_name.as_deref(), Some("Ada"));
    assert!(account.notify_replies);
    // Someone else's (or no) address id is not found.
    let missing = visitor
        .post("/account/addresses/65a1b2c3d4e5f60718293a4b/delete", &[])
        .await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    // Signed out, the account pages send to the sign-in form.
    let guest = Shopper::new(&app).await;
    for path in ["/account", "/account/addresses", "/account/settings"] {
        let response = guest.get(path).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(location(&response), "/account/sign-in");
    }
}

#[tokio::test]
async fn sign_in_emails_are_limited_per_address() {
    let app = spawn_app_with(&[("BAZAAR_ACCOUNTS__SIGN_INS_PER_EMAIL_PER_HOUR", "2")]).await;
    let visitor = Shopper::new(&app).await;
    for _ in 0..2 {
        let ok = ask_to_sign_in(&visitor, "limited@example.com").await;
        assert_eq!(ok.status(), StatusCode::SEE_OTHER);
    }
    let refused = ask_to_sign_in(&visitor, "LIMITED@example.com").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let other = ask_to_sign_in(&visitor, "free@example.com").await;
    assert_eq!(
        other.status(),
        StatusCode::SEE_OTHER,
        "another address is not limited"
    );
    let bad = ask_to_sign_in(&visitor, "not an address").await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn fifty_concurrent_sign_ins_with_distinct_emails_all_succeed() {
    let app = spawn_app_with(&[("BAZAAR_ACCOUNTS__SIGN_INS_PER_CLIENT_PER_HOUR", "1000")]).await;
    let app = &app;
    let tasks = (0..50).map(|i| async move {
        let email = format!("crowd{i}@example.com");
        let visitor = signed_in_visitor(app, &email).await;
        signed_in(&visitor).await
    });
    let results = futures::future::join_all(tasks).await;
    assert!(results.iter().all(|ok| *ok), "{results:?}");
    let accounts = app
        .db
        .collection::<bson::Document>("accounts")
        .count_documents(doc! {})
        .await
        .expect("count");
    assert_eq!(accounts, 50);
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::test]
async fn known_and_unknown_addresses_take_the_same_time_to_ask_for_a_sign_in() {
    let app = spawn_app_with(&[("BAZAAR_ACCOUNTS__SIGN_INS_PER_CLIENT_PER_HOUR", "1000")]).await;
    const N: usize = 30;
    for i in 0..N {
        let email = EmailAddress::parse(&format!("known{i}@example.com")).expect("valid");
        store::upsert_on_sign_in(&app.db, &email)
            .await
            .expect("account");
    }
    let visitor = Shopper::new(&app).await;
    // Warm up the paths once each.
    ask_to_sign_in(&visitor, "warm-known@example.com").await;
    ask_to_sign_in(&visitor, "warm-unknown@example.com").await;
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for i in 0..N {
        // Interleaved, so a slow moment of the machine falls on both.
        for (kind, samples) in [("known", &mut known), ("unknown", &mut unknown)] {
            let email = format!("{kind}{i}@example.com");
            let started = Instant::now();
            let response = ask_to_sign_in(&visitor, &email).await;
            samples.push(started.elapsed());
            assert_eq!(response.status(), StatusCode::SEE_OTHER, "{email}");
        }
    }
    let (k, u) = (median(known), median(unknown));
    println!("sign-in request, median of {N}: known address {k:?}, unknown address {u:?}");
    let (slow, fast) = if k > u { (k, u) } else { (u, k) };
    assert!(
        slow.as_secs_f64() <= fast.as_secs_f64() * 2.0 + 0.005,
        "known {k:?} vs unknown {u:?}"
    );
}

#[tokio::test]
async fn the_account_queries_use_their_indexes() {
    let app = spawn_app().await;
    let email = EmailAddress::parse("explain@example.com").expect("valid");
    assert_uses_index(
        &app.db,
        "account by email",
        "accounts",
        doc! { "email": email.as_str() },
        doc! {},
    )
    .await;
    let ranges = bazaar::checkout::orders::claim_candidate_queries(&email);
    assert_eq!(ranges.len(), 4, "two letters, each in both cases");
    for filter in ranges {
        assert_uses_index(&app.db, "orders to claim", "orders", filter, doc! {}).await;
    }
    let (filter, sort) = bazaar::checkout::orders::account_query(bson::oid::ObjectId::new());
    assert_uses_index(&app.db, "a customer's orders", "orders", filter, sort).await;
}

/// The path of the newest privacy confirmation link emailed to `to` (read from the outbox).
async fn outbox_privacy_link(app: &TestApp, to: &str) -> String {
    let found = app
        .db
        .collection::<bson::Document>("outbox")
        .find_one(doc! { "kind": "privacy", "to": to })
        .sort(doc! { "created": -1 })
        .await
        .expect("query")
        .expect("a privacy confirmation was queued");
    let text = found.get_str("text").expect("text");
    let link = text
        .split_whitespace()
        .find(|w| w.contains("/account/privacy/confirm/"))
        .expect("the email holds a confirmation link");
    link[link.find("/account/").expect("a path")..].to_string()
}

async fn comment_as(app: &TestApp, slug: &str, name: &str, email: &str, text: &str) {
    let commenter = Shopper::new(app).await;
    let posted = commenter
        .post(
            &format!("/products/{slug}/comments"),
            &[
                ("name", name),
                ("email", email),
                ("text", text),
                ("website", ""),
            ],
        )
        .await;
    assert_eq!(posted.status(), StatusCode::SEE_OTHER, "{name}'s comment");
}

#[tokio::test]
async fn the_data_export_holds_exactly_this_customers_account_addresses_orders_and_comments() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "acct-export", 10).await;
    let mine = guest_order(&app, "acct-export", "Export.Me@example.com").await;
    let theirs = guest_order(&app, "acct-export", "someone.else@example.com").await;
    comment_as(
        &app,
        product.slug.as_str(),
        "Exporter",
        "export.me@example.com",
        "My own words",
    )
    .await;
    comment_as(
        &app,
        product.slug.as_str(),
        "Other",
        "someone.else@example.com",
        "Not mine",
    )
    .await;

    let visitor = signed_in_visitor(&app, "export.me@example.com").await;
    let added = visitor
        .post(
            "/account/addresses",
            &[
                ("name", "Export Me"),
                ("line1", "3 Data Lane"),
                ("city", "Leeds"),
                ("postcode", "LS1 1AA"),
                ("country", "United Kingdom"),
            ],
        )
        .await;
    assert_eq!(added.status(), StatusCode::SEE_OTHER);
    let page = html(&body(visitor.get("/account/privacy").await).await);
    assert_eq!(count(&page, ".privacy-export-form"), 1);

    let asked = visitor.post("/account/privacy/export", &[]).await;
    assert_eq!(asked.status(), StatusCode::SEE_OTHER);
    let link = outbox_privacy_link(&app, "export.me@example.com").await;
    // Opening the link uses nothing; pressing its button downloads.
    let opened = visitor.get(&link).await;
    assert_eq!(opened.status(), StatusCode::OK);
    let downloaded = visitor.post(&link, &[]).await;
    assert_eq!(downloaded.status(), StatusCode::OK);
    assert!(downloaded
        .headers()
        .get("content-disposition")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("attachment")));
    let data: serde_json::Value =
        serde_json::from_str(&downloaded.text().await.expect("body")).expect("JSON");

    assert_eq!(data["account"]["email"], "export.me@example.com");
    let addresses = data["addresses"].as_array().expect("addresses");
    assert_eq!(addresses.len(), 1);
    assert_eq!(addresses[0]["line1"], "3 Data Lane");
    let orders: Vec<&str> = data["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .filter_map(|o| o["number"].as_str())
        .collect();
    assert_eq!(orders, [mine.as_str()], "only this customer's order");
    assert!(!orders.contains(&theirs.as_str()));
    let comments: Vec<&str> = data["comments"]
        .as_array()
        .expect("comments")
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect();
    assert_eq!(comments, ["My own words"], "only this customer's comment");
    let whole = data.to_string();
    assert!(!whole.contains("someone.else"), "nobody else's data");

    // The link worked once.
    let again = visitor.post(&link, &[]).await;
    assert_eq!(again.status(), StatusCode::GONE);
    // A forged or truncated link is refused.
    let forged = visitor
        .get(&format!("/account/privacy/confirm/{}", "0".repeat(64)))
        .await;
    assert_eq!(forged.status(), StatusCode::GONE);
    let truncated = visitor.post(&link[..link.len() - 1], &[]).await;
    assert_eq!(truncated.status(), StatusCode::GONE);
}

#[tokio::test]
async fn deleting_an_account_keeps_its_orders_anonymised_with_stock_and_totals_unchanged() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "acct-erase", 10).await;
    let mine = guest_order(&app, "acct-erase", "erase.me@example.com").await;
    let theirs = guest_order(&app, "acct-erase", "keep.me@example.com").await;
    let visitor = signed_in_visitor(&app, "erase.me@example.com").await;
    let order_before = bazaar::checkout::orders::by_number(&app.db, &order_number(&mine))
        .await
        .expect("query")
        .expect("order");
    let theirs_before = bazaar::checkout::orders::by_number(&app.db, &order_number(&theirs))
        .await
        .expect("query")
        .expect("order");
    let product_before = crate::common::shop::product(&app.db, "acct-erase").await;

    let asked = visitor.post("/account/privacy/delete", &[]).await;
    assert_eq!(asked.status(), StatusCode::SEE_OTHER);
    let link = outbox_privacy_link(&app, "erase.me@example.com").await;
    assert!(signed_in(&visitor).await, "asking deletes nothing");
    let confirmed = follow_link(&visitor, &link).await;
    assert_eq!(confirmed.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&confirmed), "/");
    assert!(
        !signed_in(&visitor).await,
        "the deleting browser is signed out"
    );

    let email = EmailAddress::parse("erase.me@example.com").expect("valid");
    assert!(store::find_by_email(&app.db, &email)
        .await
        .expect("query")
        .is_none());
    let order = bazaar::checkout::orders::by_number(&app.db, &order_number(&mine))
        .await
        .expect("query")
        .expect("the order is kept");
    let placeholder = bazaar::accounts::privacy::PLACEHOLDER;
    assert_eq!(order.name, placeholder);
    assert_eq!(order.email, placeholder);
    assert_eq!(order.address.street, placeholder);
    assert_eq!(order.address.city, placeholder);
    assert_eq!(order.address.postcode, placeholder);
    assert_eq!(order.address.country, placeholder);
    assert_eq!(order.account_id, None);
    assert_eq!(order.items, order_before.items);
    assert_eq!(order.total, order_before.total);
    assert_eq!(order.subtotal, order_before.subtotal);
    assert_eq!(order.status, order_before.status);
    assert_eq!(order.payment, order_before.payment);
    let theirs_after = bazaar::checkout::orders::by_number(&app.db, &order_number(&theirs))
        .await
        .expect("query")
        .expect("order");
    assert_eq!(
        theirs_after, theirs_before,
        "another customer's order is untouched"
    );
    let product_after = crate::common::shop::product(&app.db, "acct-erase").await;
    assert_eq!(product_after.qty, product_before.qty);
    assert_eq!(product_after.sold, product_before.sold);
    crate::common::shop::assert_stock_invariant(&app.db, "acct-erase", 10).await;

    // Signing in again with the address makes a new, empty account: the old orders are nobody's.
    let back = signed_in_visitor(&app, "erase.me@example.com").await;
    let account = html(&body(back.get("/account").await).await);
    assert_eq!(count(&account, ".account-order"), 0);
}

#[tokio::test]
async fn the_retention_job_erases_only_accounts_unused_and_without_orders_for_the_period() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "acct-retain", 10).await;
    let _ = signed_in_visitor(&app, "abandoned@example.com").await;
    let _ = signed_in_visitor(&app, "recent.buyer@example.com").await;
    let _ = signed_in_visitor(&app, "active@example.com").await;
    let bought = guest_order(&app, "acct-retain", "recent.buyer@example.com").await;
    let three_years_ago = bson::DateTime::from_millis(
        bson::DateTime::now().timestamp_millis() - 3 * 365 * 86_400_000,
    );
    for stale in ["abandoned@example.com", "recent.buyer@example.com"] {
        app.db
            .collection::<bson::Document>("accounts")
            .update_one(
                doc! { "email": stale },
                doc! { "$set": { "last_seen": three_years_ago } },
            )
            .await
            .expect("update");
    }
    let erased = bazaar::accounts::privacy::erase_abandoned_now(&app.db, 730)
        .await
        .expect("sweep");
    assert_eq!(erased, 1);
    let exists = |e: &'static str| {
        let db = app.db.clone();
        async move {
            store::find_by_email(&db, &EmailAddress::parse(e).expect("valid"))
                .await
                .expect("query")
                .is_some()
        }
    };
    assert!(!exists("abandoned@example.com").await);
    assert!(
        exists("recent.buyer@example.com").await,
        "ordered within the period"
    );
    assert!(exists("active@example.com").await, "seen within the period");
    let order = bazaar::checkout::orders::by_number(&app.db, &order_number(&bought))
        .await
        .expect("query")
        .expect("order");
    assert_eq!(order.email, "recent.buyer@example.com");
    assert_eq!(
        bazaar::accounts::privacy::erase_abandoned_now(&app.db, 0)
            .await
            .expect("sweep"),
        0
    );
}

#[tokio::test]
async fn the_admin_lists_customers_shows_one_and_exports_or_anonymises_it_for_a_support_request() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "acct-admin", 10).await;
    let first = guest_order(&app, "acct-admin", "first.customer@example.com").await;
    guest_order(&app, "acct-admin", "first.customer@example.com").await;
    let other = guest_order(&app, "acct-admin", "second.customer@example.com").await;
    comment_as(
        &app,
        product.slug.as_str(),
        "First",
        "first.customer@example.com",
        "A first comment",
    )
    .await;
    let _ = signed_in_visitor(&app, "first.customer@example.com").await;
    let _ = signed_in_visitor(&app, "second.customer@example.com").await;

    let list = html(&body(app.get_admin("/admin/customers").await).await);
    let mut emails = texts(&list, ".customer-email");
    emails.sort();
    assert_eq!(
        emails,
        ["first.customer@example.com", "second.customer@example.com"]
    );
    let found = html(&body(app.get_admin("/admin/customers?q=FIRST.cust").await).await);
    assert_eq!(
        texts(&found, ".customer-email"),
        ["first.customer@example.com"]
    );
    assert_eq!(texts(&found, ".customer-orders"), ["2"]);
    let none = html(&body(app.get_admin("/admin/customers?q=.*").await).await);
    assert_eq!(count(&none, ".customer-row"), 0, "the search is literal");

    let account = store::find_by_email(
        &app.db,
        &EmailAddress::parse("first.customer@example.com").expect("valid"),
    )
    .await
    .expect("query")
    .expect("account");
    let page_path = format!("/admin/customers/{}", account.id.to_hex());
    let page = html(&body(app.get_admin(&page_path).await).await);
    assert_eq!(count(&page, ".customer-order"), 2);
    assert!(texts(&page, ".customer-comment blockquote")
        .iter()
        .any(|t| t == "A first comment"));
    let token = csrf_token(&page).expect("the customer page has forms");
    let missing = app
        .get_admin(&format!(
            "/admin/customers/{}",
            bson::oid::ObjectId::new().to_hex()
        ))
        .await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    let export_path = format!("{page_path}/export");
    let refused = app.post_admin_form(&export_path, &[]).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN, "no CSRF token");
    let exported = app
        .post_admin_form(&export_path, &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(exported.status(), StatusCode::OK);
    let data: serde_json::Value =
        serde_json::from_str(&exported.text().await.expect("body")).expect("JSON");
    let numbers: Vec<&str> = data["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .filter_map(|o| o["number"].as_str())
        .collect();
    assert_eq!(numbers.len(), 2);
    assert!(numbers.contains(&first.as_str()));
    assert!(!numbers.contains(&other.as_str()));

    let confirm_path = format!("{page_path}/anonymise");
    let confirm = html(&body(app.get_admin(&confirm_path).await).await);
    assert_eq!(count(&confirm, ".delete-consequences li"), 4);
    let still = store::find_by_id(&app.db, account.id).await.expect("query");
    assert!(still.is_some(), "opening the confirmation deletes nothing");
    let done = app
        .post_admin_form(&confirm_path, &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&done), "/admin/customers");
    assert!(store::find_by_id(&app.db, account.id)
        .await
        .expect("query")
        .is_none());
    let kept = bazaar::checkout::orders::by_number(&app.db, &order_number(&first))
        .await
        .expect("query")
        .expect("order kept");
    assert_eq!(kept.email, bazaar::accounts::privacy::PLACEHOLDER);
    let untouched = bazaar::checkout::orders::by_number(&app.db, &order_number(&other))
        .await
        .expect("query")
        .expect("order");
    assert_eq!(untouched.email, "second.customer@example.com");
    let list = html(&body(app.get_admin("/admin/customers").await).await);
    assert_eq!(
        texts(&list, ".customer-email"),
        ["second.customer@example.com"]
    );
}

#[tokio::test]
async fn a_customers_comment_name_is_theirs_alone_and_their_comments_are_marked_verified() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "acct-names", 5).await;
    let comments_path = format!("/products/{}/comments", product.slug.as_str());
    let ada = signed_in_visitor(&app, "ada.names@example.com").await;
    let saved = ada
        .post(
            "/account/settings",
            &[("display_name", "Ada Verified"), ("notify_replies", "on")],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);

    // Anonymous, in the same or a lookalike spelling: refused.
    let anonymous = Shopper::new(&app).await;
    for name in [
        "Ada Verified",
        "ada  verified",
        "ＡＤＡ Verified",
        "A.d.a Verified",
    ] {
        let refused = anonymous
            .post(
                &comments_path,
                &[("name", name), ("text", "pretending"), ("website", "")],
            )
            .await;
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY, "{name}");
    }
    // Another signed-in account: refused too, both for a comment and as its own display name.
    let bob = signed_in_visitor(&app, "bob.names@example.com").await;
    let refused = bob
        .post(
            &comments_path,
            &[
                ("name", "ada verified"),
                ("text", "pretending"),
                ("website", ""),
            ],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let taken = bob
        .post("/account/settings", &[("display_name", "ADA VERIFIED")])
        .await;
    assert_eq!(taken.status(), StatusCode::BAD_REQUEST);
    let staff = bob
        .post("/account/settings", &[("display_name", "Moderator")])
        .await;
    assert_eq!(staff.status(), StatusCode::BAD_REQUEST);

    // Ada herself posts under it: recorded with the account, shown verified.
    let posted = ada
        .post(
            &comments_path,
            &[
                ("name", "Ada Verified"),
                ("text", "Really me"),
                ("website", ""),
            ],
        )
        .await;
    assert_eq!(posted.status(), StatusCode::SEE_OTHER);
    let account = store::find_by_email(
        &app.db,
        &EmailAddress::parse("ada.names@example.com").expect("valid"),
    )
    .await
    .expect("query")
    .expect("account");
    let stored = app
        .db
        .collection::<bazaar::comments::Comment>("comments")
        .find_one(doc! { "text": "Really me" })
        .await
        .expect("query")
        .expect("the comment");
    assert_eq!(stored.account_id, Some(account.id));
    assert!(stored.verified);
    // Bob posting under a name of his own is recorded with his account, but not verified.
    let plain = bob
        .post(
            &comments_path,
            &[("name", "Bob"), ("text", "Just Bob"), ("website", "")],
        )
        .await;
    assert_eq!(plain.status(), StatusCode::SEE_OTHER);
    let page = html(
        &body(
            anonymous
                .get(&format!("/products/{}", product.slug.as_str()))
                .await,
        )
        .await,
    );
    assert_eq!(texts(&page, ".verified-badge"), ["✓ verified"]);
    // The collection and field the comments area reads are the accounts area's.
    assert_eq!(bazaar::comments::identity::ACCOUNTS, store::COLLECTION);
    assert_eq!(
        account.display_key.as_deref(),
        Some(bazaar::comments::names::comparison_key("Ada Verified").as_str())
    );
}

#[tokio::test]
async fn a_customer_edits_their_comment_within_the_window_only_and_deletes_it() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "acct-edit", 5).await;
    let comments_path = format!("/products/{}/comments", product.slug.as_str());
    let writer = signed_in_visitor(&app, "writer@example.com").await;
    let posted = writer
        .post(
            &comments_path,
            &[("name", "Writer"), ("text", "First draft"), ("website", "")],
        )
        .await;
    assert_eq!(posted.status(), StatusCode::SEE_OTHER);
    let stored = app
        .db
        .collection::<bazaar::comments::Comment>("comments")
        .find_one(doc! { "text": "First draft" })
        .await
        .expect("query")
        .expect("the comment");
    let id = stored.id.to_hex();
    let list = html(&body(writer.get("/account/comments").await).await);
    assert_eq!(texts(&list, ".own-comment-text"), ["First draft"]);
    assert_eq!(count(&list, ".own-comment-edit"), 1);

    let edit_path = format!("/account/comments/{id}");
    let edited = writer.post(&edit_path, &[("text", "Second draft")]).await;
    assert_eq!(edited.status(), StatusCode::SEE_OTHER);
    let empty = writer.post(&edit_path, &[("text", "  ")]).await;
    assert_eq!(empty.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let text_now = |db: bazaar::db::Db| async move {
        bazaar::comments::store::by_id(&db, stored.id)
            .await
            .expect("query")
            .expect("comment")
    };
    assert_eq!(text_now(app.db.clone()).await.text, "Second draft");

    // Someone else cannot touch it.
    let other = signed_in_visitor(&app, "other.writer@example.com").await;
    let theirs = other.post(&edit_path, &[("text", "Hijacked")]).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    let theirs = other.post(&format!("{edit_path}/delete"), &[]).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);

    // Past the 15-minute window: no edit link, and an edit changes nothing.
    let twenty_minutes_ago =
        bson::DateTime::from_millis(app.db.now().timestamp_millis() - 20 * 60_000);
    app.db
        .collection::<bson::Document>("comments")
        .update_one(
            doc! { "_id": stored.id },
            doc! { "$set": { "posted": twenty_minutes_ago } },
        )
        .await
        .expect("update");
    let list = html(&body(writer.get("/account/comments").await).await);
    assert_eq!(count(&list, ".own-comment-edit"), 0);
    let late = writer.post(&edit_path, &[("text", "Too late")]).await;
    assert_eq!(late.status(), StatusCode::SEE_OTHER);
    assert_eq!(text_now(app.db.clone()).await.text, "Second draft");
    let late_form = writer.get(&edit_path).await;
    assert_eq!(late_form.status(), StatusCode::SEE_OTHER);

    // Deleting works at any time.
    let deleted = writer.post(&format!("{edit_path}/delete"), &[]).await;
    assert_eq!(deleted.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        text_now(app.db.clone()).await.status,
        bazaar::comments::CommentStatus::Deleted
    );
    let list = html(&body(writer.get("/account/comments").await).await);
    assert_eq!(count(&list, ".own-comment"), 0);
}

#[tokio::test]
async fn of_two_accounts_taking_one_display_name_at_once_exactly_one_gets_it() {
    use bazaar::accounts::store::{self, SettingsSaved};
    let app = spawn_app().await;
    let email = |e: &str| bazaar::domain::EmailAddress::parse(e).expect("an address");
    let a = store::upsert_on_sign_in(&app.db, &email("a@example.com"))
        .await
        .expect("a");
    let b = store::upsert_on_sign_in(&app.db, &email("b@example.com"))
        .await
        .expect("b");
    for round in 0..10 {
        let name = format!("Night Owl {round}");
        let (x, y) = futures::join!(
            store::set_comment_settings(&app.db, a.id, Some(&name), false),
            store::set_comment_settings(&app.db, b.id, Some(&name), false),
        );
        let outcomes = [x.expect("a saves"), y.expect("b saves")];
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| **o == SettingsSaved::Saved)
                .count(),
            1,
            "{outcomes:?}"
        );
        assert!(outcomes.contains(&SettingsSaved::NameTaken));
    }
    // Accounts without a display name are many and never collide.
    store::set_comment_settings(&app.db, a.id, None, false)
        .await
        .expect("cleared");
    store::set_comment_settings(&app.db, b.id, None, false)
        .await
        .expect("cleared");
}
