//! Admin → Settings: the shop's name, tagline, currency symbol and code, flat shipping rates and
//! what search engines and shared links are told (description, default social image,
//! organisation name, robots.txt rules), kept in the database (see `db::site`), so they change
//! without a restart and every instance agrees.

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::admin::form::Submitted;
use crate::db::site::{self, ShippingRates, SiteSettings};
use crate::domain::{Money, TimeZone};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::field_errors::FieldErrors;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, render_status, Layout};
use crate::web::see_other;

const MAX_NAME: usize = 100;
const MAX_TAGLINE: usize = 200;
const MAX_SYMBOL: usize = 4;
const MAX_DESCRIPTION: usize = 300;
const MAX_ORGANISATION: usize = 100;
const MAX_SOCIAL_IMAGE: usize = 500;
const MAX_ROBOTS: usize = 10_000;
/// Highest accepted shipping charge: $1,000.00.
const MAX_SHIPPING_CENTS: i64 = 100_000;

#[derive(Template)]
#[template(path = "admin/settings.html")]
pub(crate) struct SettingsPage {
    pub(crate) layout: Layout,
    pub(crate) form: SettingsForm,
    pub(crate) errors: FieldErrors,
}

impl SettingsPage {
    pub(crate) fn error(&self, field: &str) -> Option<&String> {
        self.errors.get(field)
    }
}

/// The form's values as typed (and as first shown, from the stored settings).
#[derive(Default)]
pub(crate) struct SettingsForm {
    pub(crate) name: String,
    pub(crate) tagline: String,
    pub(crate) currency_symbol: String,
    pub(crate) shipping_base: String,
    pub(crate) shipping_per_half_kilo: String,
    pub(crate) currency_code: String,
    pub(crate) description: String,
    pub(crate) social_image: String,
    pub(crate) organisation: String,
    pub(crate) robots_txt: String,
    pub(crate) time_zone: String,
}

/// `text` with its first letter in upper case (an error message that starts a sentence).
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

impl SettingsForm {
    fn of(settings: &SiteSettings) -> SettingsForm {
        SettingsForm {
            name: settings.name.clone(),
            tagline: settings.tagline.clone(),
            currency_symbol: settings.currency_symbol.clone(),
            shipping_base: settings.shipping.base_cents.amount(),
            shipping_per_half_kilo: settings.shipping.per_half_kilo_cents.amount(),
            currency_code: settings.currency_code.clone(),
            description: settings.description.clone(),
            social_image: settings.social_image.clone(),
            organisation: settings.organisation.clone(),
            robots_txt: settings.robots_txt.clone(),
            time_zone: settings.time_zone.name().to_string(),
        }
    }

    /// What `form` sent, as typed. The fields added after the first settings page keep their
    /// `stored` values when a form does not send them (one opened before they existed).
    fn read(form: &Submitted, stored: &SiteSettings) -> SettingsForm {
        let sent = |name: &str| form.raw(name).unwrap_or_default().to_string();
        let or_stored = |name: &str, value: &str| form.raw(name).unwrap_or(value).to_string();
        SettingsForm {
            name: sent("name"),
            tagline: sent("tagline"),
            currency_symbol: sent("currency_symbol"),
            shipping_base: sent("shipping_base"),
            shipping_per_half_kilo: sent("shipping_per_half_kilo"),
            currency_code: or_stored("currency_code", &stored.currency_code),
            description: or_stored("description", &stored.description),
            social_image: or_stored("social_image", &stored.social_image),
            organisation: or_stored("organisation", &stored.organisation),
            robots_txt: or_stored("robots_txt", &stored.robots_txt),
            time_zone: or_stored("time_zone", stored.time_zone.name()),
        }
    }

    /// Check every field; errors by field name say what to fix.
    fn parse(&self) -> Result<SiteSettings, FieldErrors> {
        let mut errors = FieldErrors::new();
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control)
        {
            errors.add(
                "name",
                format!("Enter the shop's name, at most {MAX_NAME} characters."),
            );
        }
        let tagline = self.tagline.trim();
        if tagline.chars().count() > MAX_TAGLINE || tagline.chars().any(char::is_control) {
            errors.add(
                "tagline",
                format!("Keep the tagline to at most {MAX_TAGLINE} characters on one line."),
            );
        }
        let symbol = self.currency_symbol.trim();
        if symbol.is_empty()
            || symbol.chars().count() > MAX_SYMBOL
            || symbol
                .chars()
                .any(|c| c.is_control() || c.is_ascii_digit() || c.is_whitespace())
        {
            errors.add(
                "currency_symbol",
                format!("Enter a symbol of 1 to {MAX_SYMBOL} characters without digits, e.g. $, € or CHF."),
            );
        }
        let code = self.currency_code.trim().to_ascii_uppercase();
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
            errors.add(
                "currency_code",
                "Enter the currency's three-letter ISO code, e.g. USD, EUR or CHF.",
            );
        }
        let one_line = |field: &'static str, value: &str, max: usize, what: &str| {
            (value.chars().count() > max || value.chars().any(char::is_control)).then(|| {
                (
                    field,
                    format!("Keep the {what} to at most {max} characters on one line."),
                )
            })
        };
        let description = self.description.trim();
        let organisation = self.organisation.trim();
        let social_image = self.social_image.trim();
        for (field, message) in [
            one_line("description", description, MAX_DESCRIPTION, "description"),
            one_line(
                "organisation",
                organisation,
                MAX_ORGANISATION,
                "organisation name",
            ),
        ]
        .into_iter()
        .flatten()
        {
            errors.add(field, message);
        }
        if !social_image.is_empty()
            && (social_image.chars().count() > MAX_SOCIAL_IMAGE
                || (crate::web::links::local_path(social_image).is_none()
                    && !crate::web::meta::is_absolute_web_url(social_image)))
        {
            errors.add(
                "social_image",
                format!(
                    "Enter a path on this site starting with / (e.g. /media/…/display) or an \
                     https:// address, at most {MAX_SOCIAL_IMAGE} characters."
                ),
            );
        }
        let robots_txt = self.robots_txt.replace("\r\n", "\n");
        if robots_txt.chars().count() > MAX_ROBOTS
            || robots_txt
                .chars()
                .any(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        {
            errors.add(
                "robots_txt",
                format!("Keep robots.txt to at most {MAX_ROBOTS} characters of plain text."),
            );
        }
        let time_zone = TimeZone::parse(&self.time_zone).unwrap_or_else(|e| {
            errors.add("time_zone", format!("{}.", capitalised(&e.to_string())));
            TimeZone::utc()
        });
        let mut money = |field: &'static str, value: &str| match Money::parse(value) {
            Ok(amount) if amount.cents() <= MAX_SHIPPING_CENTS => amount,
            _ => {
                errors.add(field, "Enter an amount from 0 to 1000.00, e.g. 3.99.");
                Money::ZERO
            }
        };
        let base_cents = money("shipping_base", &self.shipping_base);
        let per_half_kilo_cents = money("shipping_per_half_kilo", &self.shipping_per_half_kilo);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(SiteSettings {
            name: name.to_string(),
            tagline: tagline.to_string(),
            currency_symbol: symbol.to_string(),
            shipping: ShippingRates {
                base_cents,
                per_half_kilo_cents,
            },
            currency_code: code,
            description: description.to_string(),
            social_image: social_image.to_string(),
            organisation: organisation.to_string(),
            robots_txt: robots_txt.trim().to_string(),
            time_zone,
            // Not on this form: `site::save` leaves the stored menus alone (Admin → Menus).
            menus: site::Menus::default(),
        })
    }
}

/// `GET /admin/settings`
pub(crate) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let settings = site::load(&state.db).await?;
    render(&SettingsPage {
        layout: Layout::admin(&req),
        form: SettingsForm::of(&settings),
        errors: FieldErrors::new(),
    })
}

/// `POST /admin/settings`: saved and in use from the next request on (every worker), or the
/// form again with what to fix (422).
pub(crate) async fn save(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let form = SettingsForm::read(
        &Submitted::from_pairs(form.into_inner()),
        &site::load(&state.db).await?,
    );
    match form.parse() {
        Ok(settings) => {
            site::save(&state.db, &settings).await?;
            state.site.invalidate();
            flash::push(&req.get_session(), Level::Success, "Settings saved.");
            Ok(see_other("/admin/settings"))
        }
        Err(errors) => render_status(
            StatusCode::UNPROCESSABLE_ENTITY,
            &SettingsPage {
                layout: Layout::admin(&req),
                form,
                errors,
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(symbol: &str, base: &str) -> SettingsForm {
        SettingsForm {
            name: "Corner Records".into(),
            tagline: "Vinyl".into(),
            currency_symbol: symbol.into(),
            shipping_base: base.into(),
            shipping_per_half_kilo: "1".into(),
            currency_code: "eur".into(),
            ..SettingsForm::of(&SiteSettings::default())
        }
    }

    #[test]
    fn amounts_and_symbols_are_checked() {
        let ok = form("€", "4.50").parse().expect("valid");
        assert_eq!(ok.shipping.base_cents.cents(), 450);
        assert_eq!(ok.shipping.per_half_kilo_cents.cents(), 100);
        assert_eq!(ok.currency_symbol, "€");
        assert_eq!(ok.currency_code, "EUR");
        assert_eq!(ok.robots_txt, site::DEFAULT_ROBOTS_TXT.trim());
        for bad in ["-1", "abc", "1001", "1.234"] {
            assert!(form("$", bad)
                .parse()
                .unwrap_err()
                .get("shipping_base")
                .is_some());
        }
        for bad in ["", "12", "EURO€", "a b"] {
            assert!(form(bad, "1")
                .parse()
                .unwrap_err()
                .get("currency_symbol")
                .is_some());
        }
    }

    #[test]
    fn discovery_fields_are_checked() {
        let with = |f: fn(&mut SettingsForm)| {
            let mut form = form("$", "1");
            f(&mut form);
            form.parse()
        };
        assert!(with(|f| f.currency_code = "US".into())
            .unwrap_err()
            .get("currency_code")
            .is_some());
        assert!(with(|f| f.social_image = "javascript:alert(1)".into())
            .unwrap_err()
            .get("social_image")
            .is_some());
        assert!(with(|f| f.social_image = "//evil.example/x.png".into())
            .unwrap_err()
            .get("social_image")
            .is_some());
        assert!(with(|f| f.description = "two\nlines".into())
            .unwrap_err()
            .get("description")
            .is_some());
        assert!(with(|f| f.robots_txt = "User-agent: *\u{0}".into())
            .unwrap_err()
            .get("robots_txt")
            .is_some());
        let ok = with(|f| f.social_image = "/static/images/card.png".into()).expect("valid");
        assert_eq!(ok.social_image, "/static/images/card.png");
    }
}
