//! Admin → Settings: the shop's name, tagline, currency symbol and flat shipping rates, kept in
//! the database (see `db::site`), so they change without a restart and every instance agrees.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::catalog::listing::parse_dollars;
use crate::db::site::{self, ShippingRates, SiteSettings};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, Layout};
use crate::web::see_other;

const MAX_NAME: usize = 100;
const MAX_TAGLINE: usize = 200;
const MAX_SYMBOL: usize = 4;
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
}

fn dollars(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

impl SettingsForm {
    fn of(settings: &SiteSettings) -> SettingsForm {
        SettingsForm {
            name: settings.name.clone(),
            tagline: settings.tagline.clone(),
            currency_symbol: settings.currency_symbol.clone(),
            shipping_base: dollars(settings.shipping.base_cents),
            shipping_per_half_kilo: dollars(settings.shipping.per_half_kilo_cents),
        }
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
        let mut money = |field: &'static str, value: &str| match parse_dollars(value) {
            Some(cents) if cents <= MAX_SHIPPING_CENTS => cents,
            _ => {
                errors.insert(
                    field,
                    "Enter an amount from 0 to 1000.00, e.g. 3.99.".to_string(),
                );
                0
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
    let form = form.into_inner();
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
        }
    }

    #[test]
    fn amounts_and_symbols_are_checked() {
        let ok = form("€", "4.50").parse().expect("valid");
        assert_eq!(ok.shipping.base_cents, 450);
        assert_eq!(ok.shipping.per_half_kilo_cents, 100);
        assert_eq!(ok.currency_symbol, "€");
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
}
