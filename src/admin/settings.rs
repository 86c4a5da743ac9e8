//! Admin → Settings: the shop's name, tagline, currency symbol and code, flat shipping rates and
//! what search engines and shared links are told (description, default social image,
//! organisation name, robots.txt rules), kept in the database (see `db::site`), so they change
//! without a restart and every instance agrees.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::db::site::{self, ShippingRates, SiteSettings};
use crate::domain::{Money, TimeZone};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, Layout};
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
pub struct SettingsPage {
    pub layout: Layout,
    pub form: SettingsForm,
    pub errors: HashMap<&'static str, String>,
}

impl SettingsPage {
    pub fn error(&self, field: &str) -> Option<&String> {
        self.errors.get(field)
    }
}

/// The form as posted (and as first shown, from the stored settings).
#[derive(serde::Deserialize, Default)]
pub struct SettingsForm {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub tagline: String,
    #[serde(default)]
    pub currency_symbol: String,
    #[serde(default)]
    pub shipping_base: String,
    #[serde(default)]
    pub shipping_per_half_kilo: String,
    /// The fields below, when a form does not send them (one from before they existed), keep
    /// their stored values (`SettingsForm::keep_missing`).
    #[serde(default)]
    pub currency_code: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub social_image: Option<String>,
    #[serde(default)]
    pub organisation: Option<String>,
    #[serde(default)]
    pub robots_txt: Option<String>,
    #[serde(default)]
    pub time_zone: Option<String>,
}

/// `text` with its first letter in upper case (an error message that starts a sentence).
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// A form field's text (empty when it was not sent).
fn text(field: &Option<String>) -> &str {
    field.as_deref().unwrap_or_default()
}

impl SettingsForm {
    fn of(settings: &SiteSettings) -> SettingsForm {
        SettingsForm {
            name: settings.name.clone(),
            tagline: settings.tagline.clone(),
            currency_symbol: settings.currency_symbol.clone(),
            shipping_base: settings.shipping.base_cents.amount(),
            shipping_per_half_kilo: settings.shipping.per_half_kilo_cents.amount(),
            currency_code: Some(settings.currency_code.clone()),
            description: Some(settings.description.clone()),
            social_image: Some(settings.social_image.clone()),
            organisation: Some(settings.organisation.clone()),
            robots_txt: Some(settings.robots_txt.clone()),
            time_zone: Some(settings.time_zone.name().to_string()),
        }
    }

    /// Fill the fields the form did not send with the `stored` values.
    fn keep_missing(&mut self, stored: &SiteSettings) {
        let keep = |field: &mut Option<String>, value: &str| {
            if field.is_none() {
                *field = Some(value.to_string());
            }
        };
        keep(&mut self.currency_code, &stored.currency_code);
        keep(&mut self.description, &stored.description);
        keep(&mut self.social_image, &stored.social_image);
        keep(&mut self.organisation, &stored.organisation);
        keep(&mut self.robots_txt, &stored.robots_txt);
        keep(&mut self.time_zone, stored.time_zone.name());
    }

    /// Check every field; errors by field name say what to fix.
    fn parse(&self) -> Result<SiteSettings, HashMap<&'static str, String>> {
        let mut errors = HashMap::new();
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control)
        {
            errors.insert(
                "name",
                format!("Enter the shop's name, at most {MAX_NAME} characters."),
            );
        }
        let tagline = self.tagline.trim();
        if tagline.chars().count() > MAX_TAGLINE || tagline.chars().any(char::is_control) {
            errors.insert(
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
            errors.insert(
                "currency_symbol",
                format!("Enter a symbol of 1 to {MAX_SYMBOL} characters without digits, e.g. $, € or CHF."),
            );
        }
        let code = text(&self.currency_code).trim().to_ascii_uppercase();
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
            errors.insert(
                "currency_code",
                "Enter the currency's three-letter ISO code, e.g. USD, EUR or CHF.".to_string(),
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
        let description = text(&self.description).trim();
        let organisation = text(&self.organisation).trim();
        let social_image = text(&self.social_image).trim();
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
            errors.insert(field, message);
        }
        if !social_image.is_empty()
            && (social_image.chars().count() > MAX_SOCIAL_IMAGE
                || (crate::web::links::local_path(social_image).is_none()
                    && !crate::web::meta::is_absolute_web_url(social_image)))
        {
            errors.insert(
                "social_image",
                format!(
                    "Enter a path on this site starting with / (e.g. /media/…/display) or an \
                     https:// address, at most {MAX_SOCIAL_IMAGE} characters."
                ),
            );
        }
        let robots_txt = text(&self.robots_txt).replace("\r\n", "\n");
        if robots_txt.chars().count() > MAX_ROBOTS
            || robots_txt
                .chars()
                .any(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        {
            errors.insert(
                "robots_txt",
                format!("Keep robots.txt to at most {MAX_ROBOTS} characters of plain text."),
            );
        }
        let time_zone = TimeZone::parse(text(&self.time_zone)).unwrap_or_else(|e| {
            errors.insert("time_zone", format!("{}.", capitalised(&e.to_string())));
            TimeZone::utc()
        });
        let mut money = |field: &'static str, value: &str| match Money::parse(value) {
            Ok(amount) if amount.cents() <= MAX_SHIPPING_CENTS => amount,
            _ => {
                errors.insert(
                    field,
                    "Enter an amount from 0 to 1000.00, e.g. 3.99.".to_string(),
                );
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

fn respond(status: StatusCode, page: &SettingsPage) -> Result<HttpResponse, AppError> {
    let html = page
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))?;
    Ok(html_response(status, html))
}

/// `GET /admin/settings`
pub async fn show(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, AppError> {
    let settings = site::load(&state.db).await?;
    respond(
        StatusCode::OK,
        &SettingsPage {
            layout: Layout::admin(&req),
            form: SettingsForm::of(&settings),
            errors: HashMap::new(),
        },
    )
}

/// `POST /admin/settings`: saved and in use from the next request on (every worker), or the
/// form again with what to fix (422).
pub async fn save(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<SettingsForm>,
) -> Result<HttpResponse, AppError> {
    let mut form = form.into_inner();
    form.keep_missing(&site::load(&state.db).await?);
    match form.parse() {
        Ok(settings) => {
            site::save(&state.db, &settings).await?;
            state.site.invalidate();
            flash::push(&req.get_session(), Level::Success, "Settings saved.");
            Ok(see_other("/admin/settings"))
        }
        Err(errors) => respond(
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
            currency_code: Some("eur".into()),
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
                .contains_key("shipping_base"));
        }
        for bad in ["", "12", "EURO€", "a b"] {
            assert!(form(bad, "1")
                .parse()
                .unwrap_err()
                .contains_key("currency_symbol"));
        }
    }

    #[test]
    fn discovery_fields_are_checked() {
        let with = |f: fn(&mut SettingsForm)| {
            let mut form = form("$", "1");
            f(&mut form);
            form.parse()
        };
        assert!(with(|f| f.currency_code = Some("US".into()))
            .unwrap_err()
            .contains_key("currency_code"));
        assert!(
            with(|f| f.social_image = Some("javascript:alert(1)".into()))
                .unwrap_err()
                .contains_key("social_image")
        );
        assert!(
            with(|f| f.social_image = Some("//evil.example/x.png".into()))
                .unwrap_err()
                .contains_key("social_image")
        );
        assert!(with(|f| f.description = Some("two\nlines".into()))
            .unwrap_err()
            .contains_key("description"));
        assert!(with(|f| f.robots_txt = Some("User-agent: *\u{0}".into()))
            .unwrap_err()
            .contains_key("robots_txt"));
        let ok = with(|f| f.social_image = Some("/static/images/card.png".into())).expect("valid");
        assert_eq!(ok.social_image, "/static/images/card.png");
    }
}
