//! The emails an order sends its shopper: the confirmation when it is placed, the shipping
//! notice and the cancellation, each a plain-text and an HTML part rendered from
//! `templates/email/order.*` and queued in the outbox with an id derived from the order number,
//! in the same step as the change they announce.

use askama::Template;

use crate::checkout::model::Order;
use crate::db::{Db, DbError};
use crate::domain::Currency;
use crate::mail::{self, Email};

/// Which order email.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OrderEmail {
    Placed,
    Shipped,
    Cancelled,
}

impl OrderEmail {
    fn kind(&self) -> &'static str {
        match self {
            OrderEmail::Placed => "placed",
            OrderEmail::Shipped => "shipped",
            OrderEmail::Cancelled => "cancelled",
        }
    }

    /// The outbox id: one message of each kind per order.
    pub(crate) fn outbox_id(&self, order_number: &str) -> String {
        format!("order-{}/{order_number}", self.kind())
    }
}

#[derive(Template)]
#[template(path = "email/order.txt")]
struct OrderText<'a> {
    kind: &'a str,
    currency: &'a Currency,
    order: &'a Order,
    order_url: &'a str,
    shop: &'a str,
}

#[derive(Template)]
#[template(path = "email/order.html")]
struct OrderHtml<'a> {
    kind: &'a str,
    currency: &'a Currency,
    subject: &'a str,
    order: &'a Order,
    order_url: &'a str,
    shop: &'a str,
}

/// The email `which` for `order`, with links under `site` (the public address) and amounts in
/// `currency` (emails are often rendered by background jobs, outside any request, so the
/// currency is passed rather than read from the request's settings).
pub(crate) fn render(
    which: OrderEmail,
    order: &Order,
    site: &str,
    shop: &str,
    currency: &Currency,
) -> Result<Email, DbError> {
    let subject = match which {
        OrderEmail::Placed => format!("Your order {} at {shop}", order.number),
        OrderEmail::Shipped => format!("Your order {} has shipped", order.number),
        OrderEmail::Cancelled => format!("Your order {} is cancelled", order.number),
    };
    let order_url = mail::absolute(site, &order.url());
    let kind = which.kind();
    let failed = |e: askama::Error| DbError::Invalid(format!("rendering an order email: {e}"));
    let text = OrderText {
        kind,
        currency,
        order,
        order_url: &order_url,
        shop,
    }
    .render()
    .map_err(failed)?;
    let html = OrderHtml {
        kind,
        currency,
        subject: &subject,
        order,
        order_url: &order_url,
        shop,
    }
    .render()
    .map_err(failed)?;
    Ok(Email {
        id: which.outbox_id(order.number.as_str()),
        kind: match which {
            OrderEmail::Placed => "order-placed",
            OrderEmail::Shipped => "order-shipped",
            OrderEmail::Cancelled => "order-cancelled",
        },
        to: order.email.clone(),
        subject,
        text,
        html,
        unsubscribe: None,
        secret: false,
    })
}

/// Queue email `which` for `order` (once per order and kind, however often this runs).
pub(crate) async fn queue(db: &Db, which: OrderEmail, order: &Order) -> Result<(), DbError> {
    let settings = crate::db::site::load(db).await?;
    let currency = settings.currency();
    let email = render(
        which,
        order,
        &mail::site_address(db),
        &settings.name,
        &currency,
    )?;
    mail::enqueue(db, email).await?;
    Ok(())
}
