//! Saved delivery addresses: `/account/addresses` lists them; add, edit, delete and "make
//! default" are forms. Each is checked with checkout's own rules (`checkout::required_text`,
//! `checkout::parse_country`), so a saved address is always one checkout accepts, and the
//! default one prefills the checkout form ([`AccountPrefill`]).

use crate::accounts::session::SignedIn;
use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use serde::Deserialize;

use crate::accounts::session::{self, to_sign_in};
use crate::accounts::store::{self, Account, SavedAddress, MAX_ADDRESSES};
use crate::checkout::pages::CheckoutPrefill;
use crate::checkout::{self, CheckoutForm};
use crate::db::Db;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::field_errors::FieldErrors;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, Layout};
use crate::web::{parse_object_id, see_other};

/// The address form as submitted: text, so bad input can be shown back.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AddressForm {
    pub(crate) name: String,
    pub(crate) line1: String,
    pub(crate) line2: String,
    pub(crate) city: String,
    pub(crate) postcode: String,
    pub(crate) country: String,
    /// A ticked "make this my default" box (any value).
    pub(crate) default: Option<String>,
}

impl AddressForm {
    /// The address with `id`, or a message per bad field.
    pub(crate) fn parse(&self, id: ObjectId) -> Result<SavedAddress, FieldErrors> {
        let mut errors = FieldErrors::new();
        let name = checkout::required_text(&mut errors, "name", &self.name, "name", 100);
        let line1 =
            checkout::required_text(&mut errors, "line1", &self.line1, "street address", 200);
        let line2 = checkout::optional_text(&mut errors, "line2", &self.line2, "second line", 200);
        let city = checkout::required_text(&mut errors, "city", &self.city, "city", 100);
        let postcode =
            checkout::required_text(&mut errors, "postcode", &self.postcode, "postcode", 20);
        let country = checkout::parse_country(&mut errors, "country", &self.country);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(SavedAddress {
            id,
            name,
            line1,
            line2,
            city,
            postcode,
            country,
            default: self.default.is_some(),
        })
    }

    fn of(address: &SavedAddress) -> AddressForm {
        AddressForm {
            name: address.name.clone(),
            line1: address.line1.clone(),
            line2: address.line2.clone(),
            city: address.city.clone(),
            postcode: address.postcode.clone(),
            country: address.country.clone(),
            default: address.default.then(|| "on".to_string()),
        }
    }

    /// The form as shown back: each field cut to a length no valid one exceeds.
    fn shown(&self) -> AddressForm {
        let cut = |s: &str| s.chars().take(250).collect::<String>();
        AddressForm {
            name: cut(&self.name),
            line1: cut(&self.line1),
            line2: cut(&self.line2),
            city: cut(&self.city),
            postcode: cut(&self.postcode),
            country: cut(&self.country),
            default: self.default.as_ref().map(|_| "on".to_string()),
        }
    }
}

#[derive(Template)]
#[template(path = "account/addresses.html")]
pub(crate) struct AddressesPage {
    pub(crate) layout: Layout,
    pub(crate) account: Account,
}

#[derive(Template)]
#[template(path = "account/address_form.html")]
pub(crate) struct AddressFormPage {
    pub(crate) layout: Layout,
    pub(crate) heading: &'static str,
    pub(crate) action: String,
    pub(crate) form: AddressForm,
    pub(crate) errors: FieldErrors,
    /// Only a new address offers "make default" (an existing one has its own button).
    pub(crate) is_new: bool,
}

impl AddressFormPage {
    pub(crate) fn error(&self, field: &str) -> Option<&String> {
        self.errors.get(field)
    }

    pub(crate) fn countries(&self) -> &'static [&'static str] {
        checkout::countries::COUNTRIES
    }

    pub(crate) fn is_country(&self, country: &&str) -> bool {
        self.form.country.trim().eq_ignore_ascii_case(country)
    }
}

fn form_page(page: AddressFormPage, status: StatusCode) -> Result<HttpResponse, AppError> {
    let html = page.render().map_err(|e| {
        AppError::Internal(anyhow::anyhow!("rendering the address form failed: {e}"))
    })?;
    Ok(html_response(status, html))
}

/// `GET /account/addresses`
pub(crate) async fn list(
    req: HttpRequest,
    SignedIn(account): SignedIn,
) -> Result<HttpResponse, AppError> {
    crate::web::layout::render(&AddressesPage {
        layout: Layout::public(&req),
        account,
    })
}

/// `GET /account/addresses/new`
pub(crate) async fn new_form(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    if session::current(&session, &state.db).await?.is_none() {
        return Ok(to_sign_in());
    }
    form_page(
        AddressFormPage {
            layout: Layout::public(&req),
            heading: "Add an address",
            action: "/account/addresses".to_string(),
            form: AddressForm::default(),
            errors: FieldErrors::new(),
            is_new: true,
        },
        StatusCode::OK,
    )
}

/// `POST /account/addresses`
pub(crate) async fn add(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    session: Session,
    state: web::Data<AppState>,
    form: web::Form<AddressForm>,
) -> Result<HttpResponse, AppError> {
    let mut errors = FieldErrors::new();
    if account.addresses.len() >= MAX_ADDRESSES {
        errors.add(
            "name",
            format!("You can keep {MAX_ADDRESSES} addresses; delete one to add another."),
        );
    }
    let parsed = form.parse(ObjectId::new());
    let address = match parsed {
        Ok(mut address) if errors.is_empty() => {
            // The first address is the default whatever the box says.
            address.default |= account.addresses.is_empty();
            address
        }
        Ok(_) => return add_again(&req, &form, errors),
        Err(more) => {
            errors.extend(more);
            return add_again(&req, &form, errors);
        }
    };
    if !store::add_address(&state.db, account.id, address).await? {
        let mut errors = FieldErrors::new();
        errors.add(
            "name",
            format!("You can keep {MAX_ADDRESSES} addresses; delete one to add another."),
        );
        return add_again(&req, &form, errors);
    }
    flash::push(&session, Level::Success, "Address saved.");
    Ok(see_other("/account/addresses"))
}

fn add_again(
    req: &HttpRequest,
    form: &AddressForm,
    errors: FieldErrors,
) -> Result<HttpResponse, AppError> {
    form_page(
        AddressFormPage {
            layout: Layout::public(req),
            heading: "Add an address",
            action: "/account/addresses".to_string(),
            form: form.shown(),
            errors,
            is_new: true,
        },
        StatusCode::BAD_REQUEST,
    )
}

/// `GET /account/addresses/{id}`
pub(crate) async fn edit_form(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = parse_object_id(&id)?;
    let address = account.address(&id).ok_or(AppError::NotFound)?;
    form_page(
        AddressFormPage {
            layout: Layout::public(&req),
            heading: "Edit address",
            action: format!("/account/addresses/{}", id.to_hex()),
            form: AddressForm::of(address),
            errors: FieldErrors::new(),
            is_new: false,
        },
        StatusCode::OK,
    )
}

/// `POST /account/addresses/{id}`
pub(crate) async fn update(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    session: Session,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<AddressForm>,
) -> Result<HttpResponse, AppError> {
    let id = parse_object_id(&id)?;
    if account.address(&id).is_none() {
        return Err(AppError::NotFound);
    }
    match form.parse(id) {
        Ok(address) => {
            if !store::update_address(&state.db, account.id, &address).await? {
                return Err(AppError::NotFound);
            }
            flash::push(&session, Level::Success, "Address saved.");
            Ok(see_other("/account/addresses"))
        }
        Err(errors) => form_page(
            AddressFormPage {
                layout: Layout::public(&req),
                heading: "Edit address",
                action: format!("/account/addresses/{}", id.to_hex()),
                form: form.shown(),
                errors,
                is_new: false,
            },
            StatusCode::BAD_REQUEST,
        ),
    }
}

/// `POST /account/addresses/{id}/delete`
pub(crate) async fn delete(
    SignedIn(account): SignedIn,
    session: Session,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = parse_object_id(&id)?;
    if !store::delete_address(&state.db, account.id, id).await? {
        return Err(AppError::NotFound);
    }
    flash::push(&session, Level::Success, "Address deleted.");
    Ok(see_other("/account/addresses"))
}

/// `POST /account/addresses/{id}/default`
pub(crate) async fn make_default(
    SignedIn(account): SignedIn,
    session: Session,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = parse_object_id(&id)?;
    if !store::set_default_address(&state.db, account.id, id).await? {
        return Err(AppError::NotFound);
    }
    flash::push(&session, Level::Success, "Default address changed.");
    Ok(see_other("/account/addresses"))
}

/// The checkout form of a signed-in customer: their email and default address (start-up
/// registers this as the app's [`CheckoutPrefill`]).
pub(crate) struct AccountPrefill;

impl CheckoutPrefill for AccountPrefill {
    fn prefill<'a>(
        &'a self,
        db: &'a Db,
        session: &'a Session,
    ) -> futures::future::LocalBoxFuture<'a, Option<CheckoutForm>> {
        Box::pin(async move {
            let account = match session::current(session, db).await {
                Ok(account) => account?,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the account to prefill checkout");
                    return None;
                }
            };
            let mut form = CheckoutForm {
                email: account.email.as_str().to_string(),
                ..CheckoutForm::default()
            };
            if let Some(address) = account.default_address() {
                form.name = address.name.clone();
                form.street = address.street();
                form.city = address.city.clone();
                form.postcode = address.postcode.clone();
                form.country = address.country.clone();
            }
            Some(form)
        })
    }
}
