//! Admin edit conflicts: product and category saves carry the version their form was loaded
//! with, so a save computed from an older version lands nowhere and gets a 409 page instead of
//! silently overwriting someone else's change; stock movements never make a form stale.

use std::sync::Arc;

use crate::common::builders::CategoryBuilder;
use crate::common::shop::*;
use crate::common::*;
use bazaar::catalog::categories;
use bazaar::catalog::products::Product;
use reqwest::cookie::Jar;
use reqwest::StatusCode;

const APPROVED: &str = "4242 4242 4242 4242";

/// One admin in their own browser: own cookie jar, so own session and CSRF token.
struct Admin {
    address: String,
    client: reqwest::Client,
    _jar: Arc<Jar>,
}

impl Admin {
    fn new(app: &TestApp) -> Admin {
        let (client, jar) = new_client();
        Admin {
            address: app.address.clone(),
            client,
            _jar: jar,
        }
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.address))
            .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
            .send()
            .await
            .expect("request sent")
    }

    async fn page(&self, path: &str) -> scraper::Html {
        let response = self.get(path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        html(&body(response).await)
    }

    async fn post(&self, path: &str, fields: &[(String, String)]) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.address))
            .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
            .form(fields)
            .send()
            .await
            .expect("request sent")
    }
}

fn set(form: &mut [(String, String)], name: &str, value: &str) {
    let field = form
        .iter_mut()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("the form has no {name}"));
    field.1 = value.to_string();
}

fn edit_url(p: &Product) -> String {
    format!("/admin/products/{}/edit", p.id.to_hex())
}

#[tokio::test]
async fn of_two_admins_changing_different_fields_of_a_loaded_product_the_second_save_merges_both() {
    let app = spawn_app().await;
    let p = product_with_stock(&app.db, "conflict-1", 10).await;
    let (alice, bob) = (Admin::new(&app), Admin::new(&app));
    let mut alice_form = product_form(&alice.page(&edit_url(&p)).await);
    let mut bob_form = product_form(&bob.page(&edit_url(&p)).await);
    assert!(alice_form
        .iter()
        .any(|(k, v)| k == "edit_version" && !v.is_empty()));

    // Alice fixes the price and saves first: it lands.
    set(&mut alice_form, "retail_price", "9.99");
    let response = alice.post(&edit_url(&p), &alice_form).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);

    // Bob, from the page he loaded before, rewrites the description: merged with her price.
    set(&mut bob_form, "description", "Bob's better description.");
    let response = bob.post(&edit_url(&p), &bob_form).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let stored = stock(&app.db, "conflict-1").await;
    assert_eq!(stored.pricing.retail.cents(), 999, "Alice's price kept");
    assert_eq!(stored.description, "Bob's better description.");
    assert_eq!((stored.qty, stored.sold), (10, 0));
    let edit = bob.page(&edit_url(&p)).await;
    let flash = texts(&edit, ".flash").join(" ");
    assert!(
        flash.contains("Merged with the changes saved at") && flash.contains("Retail price"),
        "{flash}"
    );
}

#[tokio::test]
async fn of_two_admins_changing_the_same_field_the_second_gets_a_conflict_page_with_only_that_field_and_can_apply_theirs(
) {
    let app = spawn_app().await;
    let p = product_with_stock(&app.db, "conflict-2", 10).await;
    let (alice, bob) = (Admin::new(&app), Admin::new(&app));
    let mut alice_form = product_form(&alice.page(&edit_url(&p)).await);
    let mut bob_form = product_form(&bob.page(&edit_url(&p)).await);
    set(&mut alice_form, "retail_price", "9.99");
    set(&mut alice_form, "description", "Alice's description.");
    let response = alice.post(&edit_url(&p), &alice_form).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);

    set(&mut bob_form, "description", "Bob's better description.");
    set(&mut bob_form, "title", "Bob's title");
    let response = bob.post(&edit_url(&p), &bob_form).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_security_headers(response.headers(), "the conflict page");
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Changed since you opened it");
    assert_eq!(
        count(&doc, ".admin-page .conflict"),
        1,
        "in the admin layout"
    );
    // Only the field both changed differently: not the price (Alice's alone) nor the title.
    let differing = texts(&doc, ".conflict-field.differs h3");
    assert_eq!(differing, ["Description"]);
    assert_eq!(
        texts(&doc, ".conflict-stored pre"),
        ["Alice's description."]
    );
    assert_eq!(
        texts(&doc, ".conflict-theirs pre"),
        ["Bob's better description."]
    );
    assert_eq!(texts(&doc, ".stored-updated").len(), 1);
    assert_eq!(
        attr(&doc, "a.discard", "href").as_deref(),
        Some(edit_url(&p).as_str())
    );
    // Nothing was written: Alice's save stands.
    let stored = stock(&app.db, "conflict-2").await;
    assert_eq!(stored.pricing.retail.cents(), 999);
    assert_eq!(stored.description, "Alice's description.");

    // The re-apply form holds the stored version with all of Bob's changes over it.
    let reapply = product_form(&doc);
    let value = |name: &str| {
        reapply
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(value("retail_price"), "9.99");
    assert_eq!(value("title"), "Bob's title");
    assert_eq!(value("description"), "Bob's better description.");
    assert_eq!(
        Some(value("edit_version")),
        stored.edit_version.map(|v| v.to_hex())
    );
    let response = bob.post(&edit_url(&p), &reapply).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let stored = stock(&app.db, "conflict-2").await;
    assert_eq!(stored.pricing.retail.cents(), 999, "Alice's price kept");
    assert_eq!(stored.title, "Bob's title");
    assert_eq!(stored.description, "Bob's better description.");
}

#[tokio::test]
async fn of_sixteen_concurrent_saves_carrying_the_same_version_exactly_one_lands() {
    let app = spawn_app().await;
    let p = product_with_stock(&app.db, "conflict-16", 5).await;
    let admin = Admin::new(&app);
    let form = product_form(&admin.page(&edit_url(&p)).await);
    let saves = (0..16).map(|i| {
        let mut form = form.clone();
        set(&mut form, "title", &format!("Title number {i}"));
        let admin = &admin;
        let url = edit_url(&p);
        async move { admin.post(&url, &form).await.status() }
    });
    let statuses = futures::future::join_all(saves).await;
    let won = statuses
        .iter()
        .filter(|s| **s == StatusCode::SEE_OTHER)
        .count();
    let lost = statuses
        .iter()
        .filter(|s| **s == StatusCode::CONFLICT)
        .count();
    assert_eq!((won, lost), (1, 15), "{statuses:?}");
    let stored = stock(&app.db, "conflict-16").await;
    assert!(stored.title.starts_with("Title number "));
    assert_ne!(stored.edit_version, p.edit_version);
}

#[tokio::test]
async fn a_reservation_and_a_sale_between_loading_and_saving_the_form_neither_make_it_stale_nor_are_overwritten(
) {
    let app = spawn_app().await;
    let p = product_with_stock(&app.db, "conflict-stock", 10).await;
    let admin = Admin::new(&app);
    let mut form = product_form(&admin.page(&edit_url(&p)).await);
    // The product form never carries the stock counters.
    assert!(!form
        .iter()
        .any(|(k, _)| k == "qty" || k == "reserved" || k == "sold"));

    // One shopper buys 2; another holds 3 in their cart.
    let buyer = Shopper::new(&app).await;
    buyer.add("conflict-stock", "2").await;
    let response = buyer.checkout(APPROVED).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let holder = Shopper::new(&app).await;
    holder.add("conflict-stock", "3").await;
    let before = stock(&app.db, "conflict-stock").await;
    assert_eq!(before.sold, 2);
    assert_eq!(before.reservations.len(), 1);
    assert_eq!(before.reservations[0].qty, 3);
    assert_eq!(
        before.edit_version, p.edit_version,
        "stock left the version alone"
    );

    set(&mut form, "title", "Renamed while selling");
    let response = admin.post(&edit_url(&p), &form).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let after = stock(&app.db, "conflict-stock").await;
    assert_eq!(after.title, "Renamed while selling");
    assert_eq!((after.qty, after.sold), (5, 2));
    assert_eq!(after.reservations, before.reservations);
    assert_stock_invariant(&app.db, "conflict-stock", 10).await;
}

#[tokio::test]
async fn a_product_stored_without_a_version_saves_once_from_a_form_that_had_none_and_gets_one() {
    let app = spawn_app().await;
    let p = product_with_stock(&app.db, "conflict-old", 1).await;
    app.db
        .collection::<bson::Document>("products")
        .update_one(
            bson::doc! { "_id": p.id },
            bson::doc! { "$unset": { "edit_version": "" } },
        )
        .await
        .expect("unset");
    let admin = Admin::new(&app);
    let mut form = product_form(&admin.page(&edit_url(&p)).await);
    assert!(form
        .iter()
        .any(|(k, v)| k == "edit_version" && v.is_empty()));
    set(&mut form, "title", "First save");
    let first = admin.post(&edit_url(&p), &form).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    assert!(stock(&app.db, "conflict-old").await.edit_version.is_some());
    // The same unversioned form again is now stale.
    set(&mut form, "title", "Second save");
    let second = admin.post(&edit_url(&p), &form).await;
    assert_eq!(second.status(), StatusCode::CONFLICT);
    assert_eq!(stock(&app.db, "conflict-old").await.title, "First save");
}

/// `(id, version)` of a category from the admin tree page.
fn category(doc: &scraper::Html, slug: &str) -> (String, String) {
    let id = attr(doc, &format!("#category-{slug}"), "data-id").expect("tree entry");
    let version = attr(doc, &format!("#category-{slug}"), "data-version").expect("version");
    (id, version)
}

fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn a_category_rename_or_move_computed_from_an_older_tree_gets_a_409_and_changes_nothing() {
    let app = spawn_app().await;
    let jazz = CategoryBuilder::new("jazz").build(&app.db).await;
    CategoryBuilder::new("bop")
        .parent(&jazz)
        .build(&app.db)
        .await;
    CategoryBuilder::new("rock").build(&app.db).await;
    let (alice, bob) = (Admin::new(&app), Admin::new(&app));
    let alice_doc = alice.page("/admin/categories").await;
    let bob_doc = bob.page("/admin/categories").await;
    let alice_token = csrf_token(&alice_doc).expect("token");
    let bob_token = csrf_token(&bob_doc).expect("token");
    let (jazz, jazz_version) = category(&alice_doc, "jazz");
    let (bop, bop_version) = category(&bob_doc, "bop");

    // Alice renames Jazz.
    let response = alice
        .post(
            &format!("/admin/categories/{jazz}/rename"),
            &fields(&[
                ("csrf_token", &alice_token),
                ("name", "Jazz & Blues"),
                ("slug", "jazz-blues"),
                ("edit_version", &jazz_version),
            ]),
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);

    // Bob, from the page he loaded before, renames Jazz too: refused and explained.
    let (_, bob_jazz_version) = category(&bob_doc, "jazz");
    let response = bob
        .post(
            &format!("/admin/categories/{jazz}/rename"),
            &fields(&[
                ("csrf_token", &bob_token),
                ("name", "Jazz Music"),
                ("slug", "jazz-music"),
                ("edit_version", &bob_jazz_version),
            ]),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let doc = html(&body(response).await);
    let message = texts(&doc, ".category-conflict").join(" ");
    assert!(message.contains("“Jazz Music”"), "{message}");
    assert!(message.contains("Jazz & Blues"), "{message}");
    assert_eq!(
        count(&doc, "#category-jazz-blues"),
        1,
        "the current tree is shown"
    );
    let stored = categories::by_slug(&app.db, &crate::common::slug("jazz-blues"))
        .await
        .expect("query");
    assert!(stored.is_some(), "Alice's rename stands");

    // Bop's path ran through Jazz, so its version moved with the rename: Bob's move of Bop,
    // computed from the old tree, is refused too.
    let (rock, rock_version) = category(&bob_doc, "rock");
    let response = bob
        .post(
            &format!("/admin/categories/{bop}/move"),
            &fields(&[
                ("csrf_token", &bob_token),
                ("parent", &format!("{rock}:{rock_version}")),
                ("edit_version", &bop_version),
            ]),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let moved = categories::by_slug(&app.db, &crate::common::slug("bop"))
        .await
        .expect("query")
        .expect("bop");
    assert_ne!(moved.parent.map(|p| p.to_hex()), Some(rock.clone()));

    // From a fresh page both work.
    let doc = bob.page("/admin/categories").await;
    let (_, bop_version) = category(&doc, "bop");
    let (_, rock_version) = category(&doc, "rock");
    let response = bob
        .post(
            &format!("/admin/categories/{bop}/move"),
            &fields(&[
                ("csrf_token", &bob_token),
                ("parent", &format!("{rock}:{rock_version}")),
                ("edit_version", &bop_version),
            ]),
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let moved = categories::by_slug(&app.db, &crate::common::slug("bop"))
        .await
        .expect("query")
        .expect("bop");
    assert_eq!(moved.parent.map(|p| p.to_hex()), Some(rock));
}

#[tokio::test]
async fn on_the_product_conflict_page_each_conflicting_field_can_keep_the_stored_version() {
    let app = spawn_app().await;
    let p = product_with_stock(&app.db, "conflict-choice", 10).await;
    let (alice, bob) = (Admin::new(&app), Admin::new(&app));
    let mut alice_form = product_form(&alice.page(&edit_url(&p)).await);
    let mut bob_form = product_form(&bob.page(&edit_url(&p)).await);
    set(&mut alice_form, "description", "Alice's description.");
    set(&mut alice_form, "title", "Alice's title");
    assert_eq!(
        alice.post(&edit_url(&p), &alice_form).await.status(),
        StatusCode::SEE_OTHER
    );
    set(&mut bob_form, "description", "Bob's description.");
    set(&mut bob_form, "title", "Bob's title");
    set(&mut bob_form, "retail_price", "7.50");
    let response = bob.post(&edit_url(&p), &bob_form).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, ".saved-by"),
        [ADMIN_USER],
        "who saved the other version"
    );
    // A choice per conflicting field, joined to the re-apply form by its id.
    let radios =
        scraper::Selector::parse("input[type=radio][form=conflict-form]").expect("selector");
    let names: std::collections::BTreeSet<String> = doc
        .select(&radios)
        .filter_map(|r| r.value().attr("name").map(str::to_string))
        .collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["choice_description", "choice_title"]
    );
    assert_eq!(
        attr(&doc, "input[name=choice_title][checked]", "value").as_deref(),
        Some("mine"),
        "mine is the default: what the form below holds"
    );
    // Bob keeps Alice's title and his own description; his price (his change alone) stays.
    let mut reapply = product_form(&doc);
    let hidden = |name: &str| attr(&doc, &format!("input[name={name}]"), "value").expect(name);
    reapply.push(("choice_title".into(), "stored".into()));
    reapply.push(("stored_title".into(), hidden("stored_title")));
    reapply.push(("choice_description".into(), "mine".into()));
    reapply.push(("stored_description".into(), hidden("stored_description")));
    assert_eq!(
        bob.post(&edit_url(&p), &reapply).await.status(),
        StatusCode::SEE_OTHER
    );
    let stored = product(&app.db, "conflict-choice").await;
    assert_eq!(stored.title, "Alice's title");
    assert_eq!(stored.description, "Bob's description.");
    assert_eq!(stored.pricing.retail.cents(), 750);
}
