//! What a product grid shows of a product: the card on listing pages, home shelves and tag
//! pages (`templates/partials/_product_card.html`).
//!
//! Grids read only these fields ([`ProductCard::projection`]), not the whole [`Product`]: a
//! listing page of twelve products spent about a third of its time decoding descriptions,
//! shipping data and each product's `details` into a map, none of which a card shows; and
//! the store answers a projection of plain paths by copying those parts as stored.
//!
//! [`Product`]: crate::catalog::model::Product

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use serde::Deserialize;

use crate::catalog::model::{self, Pricing, ProductType};
use crate::db::site;

/// One product in a grid, with the sort keys a listing's keyset links are made from.
#[derive(Debug, Clone, Deserialize)]
pub struct ProductCard {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub slug: String,
    #[serde(rename = "type")]
    pub(crate) kind: ProductType,
    pub(crate) title: String,
    /// The title sort's key.
    pub search_title: String,
    pub pricing: Pricing,
    #[serde(default)]
    pub(crate) photos: Vec<ObjectId>,
    /// Units on sale (not reserved by carts).
    pub(crate) qty: i64,
    #[serde(default)]
    pub details: CardDetails,
}

/// The one field of a product's `details` a card needs: the newest-first sort's key (any
/// value, as stored; a listing links around a product whose date is missing or not a date).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CardDetails {
    #[serde(default)]
    pub issue_date: Option<Bson>,
}

impl ProductCard {
    /// The fields a card reads: of `details` only the sort key, not the track listing or the
    /// cast, and never the moves in flight on the stock (`pending`), which only the stock ledger
    /// reads.
    pub(crate) fn projection() -> Document {
        doc! {
            "slug": 1, "type": 1, "title": 1, "search_title": 1, "pricing": 1, "photos": 1,
            "qty": 1, "details.issue_date": 1,
        }
    }

    pub(crate) fn url(&self) -> String {
        model::url_of(&self.slug)
    }

    /// URL of the first photo's thumbnail, if there is a photo.
    pub(crate) fn cover_url(&self) -> Option<String> {
        model::cover_url_of(&self.photos)
    }

    pub(crate) fn retail_price(&self) -> String {
        self.pricing.retail.display(&site::currency())
    }

    pub(crate) fn list_price(&self) -> String {
        self.pricing.list.display(&site::currency())
    }

    pub(crate) fn in_stock(&self) -> bool {
        self.qty > 0
    }

    /// On sale, but running low: the card says "Only N left".
    pub fn is_low_stock(&self) -> bool {
        self.in_stock() && model::is_low_stock(self.qty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::{AlbumDetails, Details, NewProduct, Shipping};

    #[test]
    fn a_card_reads_what_the_product_shows_from_the_projected_fields_alone() {
        let product = NewProduct {
            sku: crate::domain::Sku::parse("c1").unwrap(),
            slug: crate::domain::Slug::parse("card-test").unwrap(),
            title: "Card Test".into(),
            description: "Not on a card.".into(),
            list_price: crate::domain::Money::from_cents(2000),
            retail_price: crate::domain::Money::from_cents(1500),
            categories: vec![ObjectId::new()],
            details: Details::Album(AlbumDetails {
                title: "Card Test".into(),
                artist: "Someone".into(),
                genre: vec!["Jazz".into()],
                tracks: vec!["One".into(), "Two".into()],
                issue_date: bson::DateTime::from_millis(1_000_000),
                label: "Label".into(),
            }),
            qty: 3,
            featured: false,
            shipping: Shipping::default(),
        }
        .into_product(vec![ObjectId::new()], bson::DateTime::now())
        .unwrap();
        let mut product = product;
        product.photos = vec![ObjectId::new()];
        let stored = bson::to_document(&product).unwrap();
        let projection = ProductCard::projection();
        // The projection's paths (dotted ones into embedded documents), and `_id`.
        let mut projected = Document::new();
        for path in std::iter::once("_id").chain(projection.keys().map(String::as_str)) {
            let (mut from, mut to) = (&stored, &mut projected);
            let mut parts = path.split('.').peekable();
            while let Some(part) = parts.next() {
                if parts.peek().is_none() {
                    if let Some(value) = from.get(part) {
                        to.insert(part, value.clone());
                    }
                    break;
                }
                let Ok(inner) = from.get_document(part) else {
                    break;
                };
                if !to.contains_key(part) {
                    to.insert(part, Document::new());
                }
                from = inner;
                to = to.get_document_mut(part).expect("just inserted");
            }
        }
        let card: ProductCard = bson::from_document(projected).unwrap();
        assert_eq!(card.url(), product.url());
        assert_eq!(card.cover_url(), product.cover_url());
        assert!(card.cover_url().is_some());
        assert_eq!(card.retail_price(), product.retail_price());
        assert_eq!(
            card.list_price(),
            product.pricing.list.display(&crate::db::site::currency())
        );
        assert_eq!(card.in_stock(), product.in_stock());
        assert_eq!(card.is_low_stock(), product.is_low_stock());
        assert_eq!(
            card.details.issue_date,
            product.details.get("issue_date").cloned()
        );
    }
}
