//! An outbox message as the bytes that go out: a MIME message with a plain-text and an HTML
//! part, `From` (the shop's name and `email.from`), `To`, `Subject`, `Date` (when the event
//! happened), the `Message-ID` derived from the outbox id, and, for messages someone subscribed
//! to, `List-Unsubscribe` with `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058).

use lettre::message::header::{Header, HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use lettre::Message;

use crate::mail::OutboxMessage;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `List-Unsubscribe: <https://…>`
#[derive(Debug, Clone)]
struct ListUnsubscribe(String);

impl Header for ListUnsubscribe {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("List-Unsubscribe")
    }

    fn parse(s: &str) -> Result<Self, BoxError> {
        Ok(ListUnsubscribe(s.to_string()))
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), format!("<{}>", self.0))
    }
}

/// `List-Unsubscribe-Post: List-Unsubscribe=One-Click`
#[derive(Debug, Clone)]
struct ListUnsubscribePost;

impl Header for ListUnsubscribePost {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("List-Unsubscribe-Post")
    }

    fn parse(_: &str) -> Result<Self, BoxError> {
        Ok(ListUnsubscribePost)
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), "List-Unsubscribe=One-Click".to_string())
    }
}

/// Why a stored message cannot be built (a bad address): permanent, retrying cannot help.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BuildError(pub String);

/// The message `m` as sent from `from` (with `shop_name` shown).
pub fn build(m: &OutboxMessage, from: &str, shop_name: &str) -> Result<Message, BuildError> {
    let from_address = from
        .parse()
        .map_err(|e| BuildError(format!("the sender address {from:?}: {e}")))?;
    let to: Mailbox =
        m.to.parse()
            .map_err(|e| BuildError(format!("the recipient address {:?}: {e}", m.to)))?;
    let millis = u64::try_from(m.created.timestamp_millis()).unwrap_or(0);
    let date = std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis);
    let mut builder = Message::builder()
        .from(Mailbox::new(Some(shop_name.to_string()), from_address))
        .to(to)
        .subject(m.subject.clone())
        .date(date)
        .message_id(Some(m.message_id(from)));
    if let Some(url) = &m.unsubscribe {
        builder = builder
            .header(ListUnsubscribe(url.clone()))
            .header(ListUnsubscribePost);
    }
    builder
        .multipart(MultiPart::alternative_plain_html(
            m.text.clone(),
            m.html.clone(),
        ))
        .map_err(|e| BuildError(e.to_string()))
}
