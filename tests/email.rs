//! Email through a real SMTP exchange: the test runs an SMTP server on loopback
//! (`common::smtp`), points Bazaar at it and parses what arrives with a MIME parser. The order
//! confirmation after a checkout, the shipping notice, a reply notification and its one-click
//! unsubscribe; the mail server down for a while (messages wait, then go out once each); two
//! senders on one database (each message once); a permanent refusal (given up on, listed in
//! the admin); and the default with no mail server (`.eml` files listed on Admin → System).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bazaar::clock::SteppedClock;

use crate::common::shop::{product_with_stock, Shopper};
use crate::common::smtp::{Received, SmtpSink};
use crate::common::*;
use bazaar::checkout::orders;
use bazaar::config::EmailSettings;
use bazaar::mail::sender::{self, Transport};
use bazaar::mail::{self, Email, MailStatus};
use mailparse::{MailHeaderMap, ParsedMail};
use reqwest::StatusCode;

/// An app whose sender polls every 100 ms and talks plain SMTP to `sink`.
async fn app_sending_to(sink: &SmtpSink, extra: &[(&str, &str)]) -> TestApp {
    let port = sink.port.to_string();
    let mut env = vec![
        ("BAZAAR_EMAIL__SMTP_HOST", "127.0.0.1"),
        ("BAZAAR_EMAIL__SMTP_PORT", port.as_str()),
        ("BAZAAR_EMAIL__SMTP_SECURITY", "none"),
        ("BAZAAR_EMAIL__SEND_EVERY_MS", "100"),
        ("BAZAAR_EMAIL__RETRY_AFTER_SECS", "0"),
        ("BAZAAR_EMAIL__FROM", "shop@bazaar.test"),
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
    ];
    env.extend_from_slice(extra);
    spawn_app_with(&env).await
}

fn parse(received: &Received) -> ParsedMail<'_> {
    mailparse::parse_mail(&received.data).expect("a well-formed MIME message")
}

fn header(mail: &ParsedMail<'_>, name: &str) -> String {
    mail.headers
        .get_first_value(name)
        .unwrap_or_else(|| panic!("no {name} header"))
}

/// `(text part, html part)` of a multipart/alternative message, decoded.
fn parts(mail: &ParsedMail<'_>) -> (String, String) {
    assert_eq!(mail.ctype.mimetype, "multipart/alternative");
    let mut text = None;
    let mut html = None;
    for part in &mail.subparts {
        match part.ctype.mimetype.as_str() {
            "text/plain" => text = Some(part.get_body().expect("text body")),
            "text/html" => html = Some(part.get_body().expect("html body")),
            other => panic!("unexpected part {other}"),
        }
    }
    (text.expect("a text part"), html.expect("an HTML part"))
}

fn by_subject<'a>(got: &'a [Received], words: &str) -> Vec<&'a Received> {
    got.iter()
        .filter(|r| header(&parse(r), "Subject").contains(words))
        .collect()
}

async fn place_order(app: &TestApp, sku: &str) -> String {
    product_with_stock(&app.db, sku, 10).await;
    let shopper = Shopper::new(app).await;
    shopper.add(sku, "3").await;
    let placed = shopper.checkout("4242424242424242").await;
    assert_eq!(
        placed.status(),
        StatusCode::SEE_OTHER,
        "the order is placed"
    );
    let number = location(&placed)
        .rsplit('/')
        .next()
        .expect("an order number")
        .to_string();
    number
}

#[tokio::test]
async fn an_order_confirmation_arrives_by_smtp_with_both_parts_the_lines_totals_and_address() {
    let sink = SmtpSink::start().await;
    let app = app_sending_to(&sink, &[]).await;
    let number = place_order(&app, "mail-conf").await;
    let order = orders::by_number(&app.db, &order_number(&number))
        .await
        .expect("query")
        .expect("the order");

    let got = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 1, "one message");
    assert_eq!(got[0].to, vec!["<ada@example.com>".to_string()]);
    assert_eq!(
        got[0].from, "<shop@bazaar.test>",
        "the envelope sender is email.from"
    );
    let mail = parse(&got[0]);
    assert!(header(&mail, "Subject").contains(&number));
    assert!(header(&mail, "From").contains("shop@bazaar.test"));
    assert!(header(&mail, "To").contains("ada@example.com"));
    assert_eq!(
        header(&mail, "Message-ID"),
        format!("<order-placed.{number}@bazaar.test>"),
        "derived from the outbox id"
    );
    let date = mailparse::dateparse(&header(&mail, "Date")).expect("an RFC 5322 date");
    assert!((date - order.created.timestamp_millis() / 1000).abs() <= 2);
    assert!(mail.headers.get_first_value("List-Unsubscribe").is_none());

    let (text, html) = parts(&mail);
    for part in [&text, &html] {
        assert!(part.contains(&number));
        assert!(part.contains("Mail-conf product") || part.contains(&order.items[0].title));
        assert!(part.contains(&order.subtotal_display()), "subtotal");
        assert!(part.contains(&order.shipping_display()), "shipping");
        assert!(part.contains(&order.total_display()), "total");
        assert!(part.contains("12 St James"), "street");
        assert!(part.contains("SW1Y 4JH"));
        assert!(
            part.contains(&format!("{}/orders/{number}", app.address)),
            "order link"
        );
    }
    assert!(text.contains(&format!("3 x {}", order.items[0].title)));
    let doc = scraper::Html::parse_document(&html);
    assert_eq!(
        texts(&doc, ".order-lines .total"),
        vec![order.total_display()]
    );
    let stored = mail::by_id(&app.db, &format!("order-placed/{number}"))
        .await
        .expect("query")
        .expect("the outbox message");
    assert_eq!(stored.status, MailStatus::Sent);
    assert_eq!(stored.attempts, 1);
    app.stop().await;
}

#[tokio::test]
async fn marking_an_order_shipped_or_cancelling_one_sends_its_notice() {
    let sink = SmtpSink::start().await;
    let app = app_sending_to(&sink, &[]).await;
    let shipped = place_order(&app, "mail-ship").await;
    let cancelled = place_order(&app, "mail-cancel").await;
    let token =
        csrf_token(&admin_page(&app, &format!("/admin/orders/{shipped}")).await).expect("token");
    let response = app
        .post_admin_form(
            &format!("/admin/orders/{shipped}/ship"),
            &[("csrf_token", token.as_str())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let response = app
        .post_admin_form(
            &format!("/admin/orders/{cancelled}/cancel"),
            &[("csrf_token", token.as_str())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    // Two confirmations, the shipping notice, the cancellation.
    let got = sink.wait_for(4, Duration::from_secs(20)).await;
    let notice = by_subject(&got, &format!("{shipped} has shipped"));
    assert_eq!(notice.len(), 1);
    let (text, html) = parts(&parse(notice[0]));
    assert!(text.contains("is on its way") && html.contains("is on its way"));
    let cancel = by_subject(&got, &format!("{cancelled} is cancelled"));
    assert_eq!(cancel.len(), 1);
    let (text, _) = parts(&parse(cancel[0]));
    assert!(text.contains("refunded"));
    // Shipping again is refused and queues nothing more.
    assert!(!orders::mark_shipped(&app.db, &order_number(&shipped))
        .await
        .expect("query"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.received().len(), 4);
    app.stop().await;
}

/// The link in `<…>` of a `List-Unsubscribe` header.
fn unsubscribe_link(mail: &ParsedMail<'_>) -> String {
    header(mail, "List-Unsubscribe")
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_string()
}

#[tokio::test]
async fn a_reply_notifies_a_commenter_who_asked_and_the_one_click_unsubscribe_stops_the_next() {
    let sink = SmtpSink::start().await;
    let app = app_sending_to(&sink, &[]).await;
    let product = product_with_stock(&app.db, "mail-reply", 5).await;
    let shopper = Shopper::new(&app).await;
    let posted = shopper
        .post(
            &format!("/products/{}/comments", product.slug),
            &[
                ("name", "Ana"),
                ("email", "ana@example.com"),
                ("notify", "yes"),
                ("text", "Which pressing is this?"),
                ("website", ""),
            ],
        )
        .await;
    assert_eq!(posted.status(), StatusCode::SEE_OTHER);
    let slug = location(&posted)
        .rsplit_once("#comment-")
        .expect("an anchor")
        .1
        .replace('-', "/");
    let reply = |text: &'static str| {
        let shopper = &shopper;
        let path = format!("/products/{}/comments/{slug}", product.slug);
        async move {
            shopper
                .post(&path, &[("name", "Ben"), ("text", text), ("website", "")])
                .await
        }
    };
    assert_eq!(reply("The 1997 one.").await.status(), StatusCode::SEE_OTHER);
    let got = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(got[0].to, vec!["<ana@example.com>".to_string()]);
    let mail = parse(&got[0]);
    assert!(header(&mail, "Subject").contains("Ben replied"));
    assert_eq!(
        header(&mail, "List-Unsubscribe-Post"),
        "List-Unsubscribe=One-Click"
    );
    let (text, html_part) = parts(&mail);
    assert!(text.contains("The 1997 one.") && html_part.contains("The 1997 one."));
    let link = unsubscribe_link(&mail);
    assert!(link.starts_with(&app.address), "{link}");
    assert!(text.contains(&link), "the link is in the text too");
    // Ana's email is never shown on the page.
    let page = body(shopper.get(&format!("/products/{}", product.slug)).await).await;
    assert!(!page.contains("ana@example.com"));

    // A forged signature is not found, and changes nothing.
    let forged = format!("{}0", &link[..link.len() - 1]);
    let forged = if forged == link {
        format!("{}1", &link[..link.len() - 1])
    } else {
        forged
    };
    let response = reqwest::Client::new()
        .post(&forged)
        .form(&[("List-Unsubscribe", "One-Click")])
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // The one-click POST as a mail provider sends it: no cookie, no CSRF token (RFC 8058).
    let response = reqwest::Client::new()
        .post(&link)
        .form(&[("List-Unsubscribe", "One-Click")])
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(count(&doc, ".unsubscribed"), 1);
    // The next reply sends nothing.
    assert_eq!(
        reply("Or the 2005 one.").await.status(),
        StatusCode::SEE_OTHER
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(sink.received().len(), 1, "no email after unsubscribing");
    app.stop().await;
}

fn test_email(i: usize) -> Email {
    Email {
        id: format!("test/{i}"),
        kind: "test",
        to: format!("person{i}@example.com"),
        subject: format!("Message {i}"),
        text: format!("Hello {i}"),
        html: format!("<p>Hello {i}</p>"),
        unsubscribe: None,
        secret: false,
    }
}

fn message_ids(got: &[Received]) -> HashMap<String, usize> {
    let mut ids = HashMap::new();
    for r in got {
        *ids.entry(header(&parse(r), "Message-ID")).or_insert(0) += 1;
    }
    ids
}

#[tokio::test]
async fn while_the_mail_server_is_down_messages_wait_and_go_out_once_each_when_it_is_back() {
    let mut sink = SmtpSink::start().await;
    let app = app_sending_to(&sink, &[("BAZAAR_EMAIL__MAX_ATTEMPTS", "100")]).await;
    sink.stop().await;
    for i in 0..5 {
        assert!(mail::enqueue(&app.db, test_email(i)).await.expect("queued"));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // One read of every message (two counts would see a message claimed between them twice).
    let all: Vec<(String, MailStatus)> = {
        use futures::TryStreamExt;
        mail::collection(&app.db)
            .find(bson::doc! {})
            .await
            .expect("find")
            .try_collect::<Vec<_>>()
            .await
            .expect("messages")
            .into_iter()
            .map(|m| (m.id, m.status))
            .collect()
    };
    assert_eq!(all.len(), 5, "{all:?}");
    assert!(
        all.iter()
            .all(|(_, s)| matches!(s, MailStatus::Pending | MailStatus::Sending)),
        "all wait while the server is down: {all:?}"
    );
    let first = mail::by_id(&app.db, "test/0")
        .await
        .expect("query")
        .expect("message");
    assert!(first.attempts >= 1, "it was tried");
    assert!(first.last_error.is_some(), "and the failure recorded");
    sink.resume().await;
    let got = sink.wait_for(5, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = if sink.received().len() > got.len() {
        sink.received()
    } else {
        got
    };
    let ids = message_ids(&got);
    assert_eq!(ids.len(), 5, "every message arrived");
    assert!(ids.values().all(|n| *n == 1), "none twice: {ids:?}");
    assert_eq!(
        mail::count(&app.db, MailStatus::Sent).await.expect("count"),
        5
    );
    app.stop().await;
}

fn smtp_settings(sink: &SmtpSink) -> EmailSettings {
    let port = sink.port.to_string();
    test_settings(&[
        ("BAZAAR_EMAIL__SMTP_HOST", "127.0.0.1"),
        ("BAZAAR_EMAIL__SMTP_PORT", port.as_str()),
        ("BAZAAR_EMAIL__SMTP_SECURITY", "none"),
        ("BAZAAR_EMAIL__FROM", "shop@bazaar.test"),
    ])
    .email
}

#[tokio::test]
async fn two_senders_on_one_database_send_each_message_exactly_once() {
    let sink = SmtpSink::start().await;
    let (_server, db) = memory_db("two-senders").await;
    for i in 0..30 {
        mail::enqueue(&db, test_email(i)).await.expect("queued");
    }
    let settings = smtp_settings(&sink);
    let transport = Transport::from_settings(&settings).expect("transport");
    let (a, b) = tokio::join!(
        sender::send_due(&db, &transport, &settings, "instance-a", "Bazaar"),
        sender::send_due(&db, &transport, &settings, "instance-b", "Bazaar"),
    );
    let (a, b) = (a.expect("sender a"), b.expect("sender b"));
    assert_eq!(a.sent + b.sent, 30);
    let ids = message_ids(&sink.received());
    assert_eq!(ids.len(), 30);
    assert!(ids.values().all(|n| *n == 1), "each once: {ids:?}");
    assert!(a.sent > 0 && b.sent > 0, "both took part: {a:?} {b:?}");
}

#[tokio::test]
async fn a_sender_that_dies_after_sending_leaves_at_most_one_duplicate_with_the_same_message_id() {
    let sink = SmtpSink::start().await;
    let (_server, db) = memory_db("died-after-send").await;
    let clock = Arc::new(SteppedClock::default());
    let db = db.with_clock(clock.clone());
    mail::enqueue(&db, test_email(1)).await.expect("queued");
    let settings = smtp_settings(&sink);
    let transport = Transport::from_settings(&settings).expect("transport");
    // A sender claims the message and sends it, then dies before recording the outcome.
    let claimed = sender::claim(&db, "doomed")
        .await
        .expect("claim")
        .expect("due");
    let built = bazaar::mail::message::build(&claimed, &settings.from, "Bazaar").expect("built");
    use lettre::AsyncTransport;
    let lettre_transport =
        lettre::AsyncSmtpTransport::<lettre::Tokio1Executor>::builder_dangerous("127.0.0.1")
            .port(sink.port)
            .tls(lettre::transport::smtp::client::Tls::None)
            .build();
    lettre_transport.send(built).await.expect("sent");
    // Another sender cannot take it while the claim runs…
    let report = sender::send_due(&db, &transport, &settings, "survivor", "Bazaar")
        .await
        .expect("pass");
    assert_eq!(report.sent, 0, "the claim still holds");
    // …and re-sends it once the claim ran out: the one documented duplicate, same Message-ID.
    clock.step_forward(sender::CLAIM_FOR + Duration::from_secs(1));
    let report = sender::send_due(&db, &transport, &settings, "survivor", "Bazaar")
        .await
        .expect("pass");
    assert_eq!(report.sent, 1);
    let ids = message_ids(&sink.received());
    assert_eq!(ids.len(), 1, "one Message-ID");
    assert_eq!(ids.values().copied().collect::<Vec<_>>(), vec![2]);
    let stored = mail::by_id(&db, "test/1")
        .await
        .expect("query")
        .expect("message");
    assert_eq!(stored.status, MailStatus::Sent);
    // The dead sender's late record cannot overwrite the survivor's.
    assert!(!sender::record(&db, &claimed, Ok(()), &settings)
        .await
        .expect("query"));
    let report = sender::send_due(&db, &transport, &settings, "survivor", "Bazaar")
        .await
        .expect("pass");
    assert_eq!(
        report,
        sender::SendReport::default(),
        "nothing more to send"
    );
}

#[tokio::test]
async fn a_message_refused_for_good_is_given_up_on_and_listed_as_failed_in_the_admin() {
    let sink = SmtpSink::start().await;
    sink.refuse(true);
    let app = app_sending_to(&sink, &[]).await;
    mail::enqueue(&app.db, test_email(7)).await.expect("queued");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let m = mail::by_id(&app.db, "test/7")
            .await
            .expect("query")
            .expect("message");
        if m.status == MailStatus::Failed {
            assert_eq!(m.attempts, 1, "a 5xx is not retried");
            assert!(
                m.last_error.as_deref().unwrap_or_default().contains("554")
                    || m.last_error
                        .as_deref()
                        .unwrap_or_default()
                        .contains("refused"),
                "{:?}",
                m.last_error
            );
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never given up on");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let doc = admin_page(&app, "/admin/system").await;
    let failed = texts(&doc, ".mail-failed li");
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("Message 7") && failed[0].contains("person7@example.com"));
    // "Send again" queues it once more; the server now accepts it.
    sink.refuse(false);
    let token = csrf_token(&doc).expect("token");
    let response = app
        .post_admin_form(
            "/admin/mail/retry",
            &[("csrf_token", token.as_str()), ("id", "test/7")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let got = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn temporary_failures_are_retried_up_to_the_bound_then_given_up_on() {
    let mut sink = SmtpSink::start().await;
    let app = app_sending_to(&sink, &[("BAZAAR_EMAIL__MAX_ATTEMPTS", "3")]).await;
    sink.stop().await;
    mail::enqueue(&app.db, test_email(9)).await.expect("queued");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let m = mail::by_id(&app.db, "test/9")
            .await
            .expect("query")
            .expect("message");
        if m.status == MailStatus::Failed {
            assert_eq!(m.attempts, 3);
            assert!(m.last_error.is_some());
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never given up on");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}

#[tokio::test]
async fn without_a_mail_server_messages_are_written_as_eml_files_listed_on_the_system_page() {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().display().to_string();
    let app = spawn_app_with(&[
        ("BAZAAR_EMAIL__FOLDER", path.as_str()),
        ("BAZAAR_EMAIL__SEND_EVERY_MS", "100"),
    ])
    .await;
    let number = place_order(&app, "mail-eml").await;
    let file = folder.path().join(format!("order-placed_{number}.eml"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !file.exists() {
        assert!(tokio::time::Instant::now() < deadline, "no .eml file");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let bytes = std::fs::read(&file).expect("readable");
    let parsed = mailparse::parse_mail(&bytes).expect("MIME");
    assert!(header(&parsed, "Subject").contains(&number));
    let (text, _) = parts(&parsed);
    assert!(text.contains(&number));
    let doc = admin_page(&app, "/admin/system").await;
    assert!(texts(&doc, ".mail-transport")[0].contains(&path));
    assert!(texts(&doc, ".mail-files li")
        .iter()
        .any(|f| f.contains(&format!("order-placed_{number}.eml"))));
    app.stop().await;
}

#[tokio::test]
async fn every_outbox_query_uses_an_index() {
    let (_server, db) = memory_db("outbox-explain").await;
    bazaar::startup::indexes::ensure_indexes(&db)
        .await
        .expect("indexes");
    let (filter, sort) = sender::claim_query(db.now());
    assert_uses_index(&db, "the sender's claim", mail::COLLECTION, filter, sort).await;
    assert_uses_index(
        &db,
        "the waiting count",
        mail::COLLECTION,
        mail::waiting_query(),
        bson::doc! {},
    )
    .await;
    let (filter, sort) = mail::list_query(MailStatus::Failed);
    assert_uses_index(
        &db,
        "the admin's failed list",
        mail::COLLECTION,
        filter,
        sort,
    )
    .await;
}
