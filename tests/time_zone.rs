//! The site's time zone (Admin → Settings): times are stored in UTC, shown to readers and
//! editors in the zone, and publication times are typed in it.

use crate::common::builders::NodeBuilder;
use crate::common::*;
use crate::discovery::{as_pairs, set_field, settings_form};
use bazaar::content::store;
use bson::DateTime;
use reqwest::StatusCode;

fn utc(text: &str) -> DateTime {
    DateTime::parse_rfc3339_str(text).expect("an RFC 3339 time")
}

async fn set_zone(app: &TestApp, zone: &str) -> reqwest::Response {
    let token = csrf_token(&admin_page(app, "/admin/settings").await).expect("form");
    let mut form = settings_form(app).await;
    set_field(&mut form, "csrf_token", &token);
    set_field(&mut form, "time_zone", zone);
    app.post_admin_form("/admin/settings", &as_pairs(&form))
        .await
}

#[tokio::test]
async fn an_unknown_time_zone_is_refused_with_a_message_and_nothing_is_saved() {
    let app = spawn_app().await;
    let refused = set_zone(&app, "Mars/Olympus_Mons").await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(refused).await);
    assert!(
        texts(&doc, "#error-time_zone")[0].contains("not a time zone name"),
        "{:?}",
        texts(&doc, "#error-time_zone")
    );
    assert_eq!(
        attr(&doc, "#time_zone", "value").as_deref(),
        Some("Mars/Olympus_Mons"),
        "the typed value comes back"
    );
    let stored = bazaar::db::site::load(&app.db).await.expect("settings");
    assert_eq!(stored.time_zone.name(), "UTC");
}

#[tokio::test]
async fn readers_see_dates_in_the_sites_zone_and_editors_type_times_in_it() {
    let app = spawn_app().await;
    // 23:30 UTC on 30 June is already 1 July in Paris (CEST, UTC+2).
    NodeBuilder::post("late-night")
        .title("Late night")
        .text("Hello.")
        .published(Some(utc("2026-06-30T23:30:00Z")))
        .tags(&["night"])
        .build(&app.db)
        .await;
    let before = page(&app, "/blog/late-night").await;
    assert_eq!(texts(&before, ".node-meta time"), ["30 June 2026"]);
    // The stream and the tag page, viewed now, keep their rendered cards in the content cache
    // (`web::rendered`): the views after the change below come from that cache.
    let stream = page(&app, "/blog/").await;
    assert_eq!(texts(&stream, ".node-meta time"), ["30 June 2026"]);
    let tagged = page(&app, "/tags/night").await;
    assert_eq!(texts(&tagged, ".tag-nodes time"), ["30 June 2026"]);

    assert_eq!(
        set_zone(&app, "Europe/Paris").await.status(),
        StatusCode::SEE_OTHER
    );
    let after = page(&app, "/blog/late-night").await;
    assert_eq!(texts(&after, ".node-meta time"), ["1 July 2026"]);
    assert_eq!(
        attr(&after, ".node-meta time", "datetime").as_deref(),
        Some("2026-06-30T23:30:00Z"),
        "machines still read the instant in UTC"
    );
    // The cached pages' parts are made again for the new settings.
    let stream = page(&app, "/blog/").await;
    assert_eq!(texts(&stream, ".node-meta time"), ["1 July 2026"]);
    let tagged = page(&app, "/tags/night").await;
    assert_eq!(texts(&tagged, ".tag-nodes time"), ["1 July 2026"]);

    // The editor shows and reads the publication time in Paris time.
    let draft = NodeBuilder::post("scheduled")
        .text("Soon.")
        .draft()
        .build(&app.db)
        .await;
    let edit = format!("/admin/content/{}/edit", draft.id.to_hex());
    let doc = admin_page(&app, &edit).await;
    assert!(texts(&doc, "label[for=field-published_at]")[0].contains("Europe/Paris"));
    let form = form_fields(&doc, "form.edit-form");
    let mut fields: Vec<(&str, &str)> =
        form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    fields.retain(|(k, _)| *k != "published_at");
    fields.push(("published_at", "2030-01-15T10:00"));
    fields.push(("action", "schedule"));
    let saved = app.post_admin_form(&edit, &fields).await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let stored = store::by_id(&app.db, draft.id)
        .await
        .expect("read")
        .expect("node");
    assert_eq!(
        stored.metadata.published,
        Some(utc("2030-01-15T09:00:00Z")),
        "10:00 in Paris in January is 09:00 UTC"
    );
    let doc = admin_page(&app, &edit).await;
    assert_eq!(
        attr(&doc, "#field-published_at", "value").as_deref(),
        Some("2030-01-15T10:00")
    );
    let flashes = texts(&doc, ".flash-success").join(" ");
    assert!(flashes.contains("2030-01-15 10:00 CET"), "{flashes}");
    // The revision list names times with the zone's abbreviation.
    assert!(texts(&doc, ".revision-list a")
        .iter()
        .all(|r| r.ends_with("CET") || r.ends_with("CEST")));
}
