//! Blocks of a page's text that show the shop's live settings instead of words written once.
//!
//! A paragraph holding only `{shipping-rates}` becomes the table of the configured shipping
//! rates (Admin → Settings), computed by the function checkout charges with
//! (`db::site::ShippingRates::for_weight`): the Shipping page cannot promise one price while
//! checkout charges another, and a change of rates needs no edit of the page. The table is an
//! askama partial (`content/_shipping_rates.html`), so the settings' text is escaped.

use askama::Template;

use crate::db::site::{self, SiteSettings};
use crate::domain::Money;

/// What an author writes, on a paragraph of its own, where the rate table goes.
pub(crate) const SHIPPING_RATES: &str = "{shipping-rates}";

/// [`SHIPPING_RATES`] as the Markdown renderer leaves it.
const SHIPPING_RATES_PARAGRAPH: &str = "<p>{shipping-rates}</p>";

/// `html` (rendered, sanitised Markdown) with every live block filled in from the request's
/// settings.
pub(crate) fn fill(html: String) -> String {
    if !html.contains(SHIPPING_RATES_PARAGRAPH) {
        return html;
    }
    match shipping_table(&site::current()) {
        Ok(table) => html.replace(SHIPPING_RATES_PARAGRAPH, &table),
        Err(e) => {
            // The page still shows; only the table is missing.
            tracing::error!(error = %e, "shipping rate table not rendered");
            html
        }
    }
}

/// `text` without the live blocks' markers, for excerpts and search (which show words, not
/// tables).
pub(crate) fn strip(text: &str) -> String {
    text.replace(SHIPPING_RATES, "")
}

#[derive(Template)]
#[template(path = "content/_shipping_rates.html")]
struct ShippingTable {
    rows: Vec<(String, String)>,
    /// The charge for each started 500 g past the table's last row (`None` when weight costs
    /// nothing).
    further: Option<String>,
    last: String,
}

fn shipping_table(settings: &SiteSettings) -> Result<String, askama::Error> {
    let currency = settings.currency();
    let rates = settings.shipping;
    let rows: Vec<(String, String)> = rates
        .table()
        .into_iter()
        .map(|(grams, charge)| (weight_label(grams), charge.display(&currency)))
        .collect();
    let last = rates
        .table()
        .last()
        .map(|(grams, _)| weight_label(*grams))
        .unwrap_or_default();
    let further = (rates.per_half_kilo_cents > Money::ZERO)
        .then(|| rates.per_half_kilo_cents.display(&currency));
    ShippingTable {
        rows,
        further,
        last,
    }
    .render()
}

/// `500 g`, `1 kg`, `2.5 kg`.
pub(crate) fn weight_label(grams: i64) -> String {
    if grams < 1_000 {
        format!("{grams} g")
    } else if grams % 1_000 == 0 {
        format!("{} kg", grams / 1_000)
    } else {
        let kilos = format!("{:.3}", grams as f64 / 1_000.0);
        format!("{} kg", kilos.trim_end_matches('0').trim_end_matches('.'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_read_in_grams_below_a_kilo_and_kilos_above() {
        assert_eq!(weight_label(500), "500 g");
        assert_eq!(weight_label(1_000), "1 kg");
        assert_eq!(weight_label(2_500), "2.5 kg");
    }

    #[test]
    fn the_table_shows_the_charge_checkout_computes_for_each_weight() {
        let settings = SiteSettings::default();
        let html = fill("<p>Rates:</p>\n<p>{shipping-rates}</p>\n".to_string());
        for (grams, charge) in settings.shipping.table() {
            let row = format!(
                "<td>up to {}</td><td>{}</td>",
                weight_label(grams),
                charge.display(&settings.currency())
            );
            assert!(html.contains(&row), "{row} in {html}");
        }
        assert!(!html.contains(SHIPPING_RATES), "{html}");
    }

    #[test]
    fn a_marker_inside_other_text_is_left_as_written() {
        let html = "<p>write {shipping-rates} for the table</p>".to_string();
        assert_eq!(fill(html.clone()), html);
    }
}
