//! Email addresses: the strict syntax every form checks ([`is_valid`]) and [`EmailAddress`],
//! an address in its normalised form (trimmed, lowercased) — the one key an account, its
//! sign-in tokens and rate limits, and the orders it claims are matched by.
//!
//! The accepted form is `local@domain` where the local part is letters, digits and `. _ + - '`
//! (no leading, trailing or doubled dot) and the domain is two or more DNS labels of letters,
//! digits and inner hyphens. That refuses quoted local parts and the rarer RFC 5322 characters
//! (`? & = % #` among them), which is what would let an address smuggle headers such as
//! `?bcc=` into a `mailto:` link.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest address a mail system can route.
const MAX_ADDRESS: usize = 254;
const MAX_LOCAL: usize = 64;
const MAX_LABEL: usize = 63;

/// Whether `address` is an email address of the strict form described above.
pub fn is_valid(address: &str) -> bool {
    if address.len() > MAX_ADDRESS {
        return false;
    }
    let Some((local, domain)) = address.rsplit_once('@') else {
        return false;
    };
    valid_local(local) && valid_domain(domain)
}

fn valid_local(local: &str) -> bool {
    !local.is_empty()
        && local.len() <= MAX_LOCAL
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-' | b'\''))
}

fn valid_domain(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= MAX_LABEL
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        // The top-level domain is never all digits (that would be an IP address).
        && labels
            .last()
            .is_some_and(|tld| !tld.bytes().all(|b| b.is_ascii_digit()))
}

/// The normalised form of any stored or typed address (trimmed, lowercased), whether or not it
/// is valid: what an order's email is compared with an account's by.
pub fn normalise(address: &str) -> String {
    address.trim().to_lowercase()
}

/// A valid email address in its normalised form (trimmed, ASCII-lowercased). Two spellings of
/// one mailbox (`Ada@Example.com `, `ada@example.com`) are one `EmailAddress`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EmailAddress(String);

/// Text that is not an email address of the accepted form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid email address")]
pub struct EmailError;

impl EmailAddress {
    pub fn parse(text: &str) -> Result<EmailAddress, EmailError> {
        let normalised = normalise(text);
        if is_valid(&normalised) {
            Ok(EmailAddress(normalised))
        } else {
            Err(EmailError)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<EmailAddress> for bson::Bson {
    fn from(email: EmailAddress) -> bson::Bson {
        bson::Bson::String(email.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_spellings_of_one_address_are_one_email_address() {
        let a = EmailAddress::parse("  Ada@Example.COM ").expect("valid");
        let b = EmailAddress::parse("ada@example.com").expect("valid");
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "ada@example.com");
    }

    #[test]
    fn text_that_is_not_an_address_is_refused() {
        for bad in [
            "",
            "ada",
            "ada@",
            "a@example.com?bcc=x@evil.example",
            "a b@example.com",
        ] {
            assert!(EmailAddress::parse(bad).is_err(), "{bad:?}");
        }
    }
}
