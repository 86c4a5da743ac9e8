//! Email addresses typed by shoppers: a strict, conservative syntax, and `mailto:` links built
//! only from addresses that passed it.
//!
//! The accepted form is `local@domain` where the local part is letters, digits and `. _ + - '`
//! (no leading, trailing or doubled dot) and the domain is two or more DNS labels of letters,
//! digits and inner hyphens. That refuses quoted local parts and the rarer RFC 5322 characters
//! (`? & = % #` among them), which is what would let an address smuggle headers such as
//! `?bcc=` into a `mailto:` link.

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

/// `mailto:` link for `address`, or `None` when it is not a valid address (e.g. an order
/// stored before the check was strict). `'` is percent-encoded; nothing else needs it.
pub fn mailto_href(address: &str) -> Option<String> {
    if !is_valid(address) {
        return None;
    }
    Some(format!("mailto:{}", address.replace('\'', "%27")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_addresses_are_accepted() {
        for good in [
            "ada@example.com",
            "ada.lovelace+shop@mail.example.co.uk",
            "o'brien@example.ie",
            "x_y-z@sub-domain.example",
        ] {
            assert!(is_valid(good), "{good}");
        }
    }

    #[test]
    fn addresses_that_could_carry_mailto_headers_are_refused() {
        for bad in [
            "a@example.com?bcc=x@evil.example&subject=hi",
            "a@example.com?subject=hi",
            "a?cc=b@example.com",
            "a%40b@example.com",
            "a#x@example.com",
            "a@example.com\r\nBcc: b@example.com",
            "a b@example.com",
            "",
            "@example.com",
            "a@",
            "a@localhost",
            "a@-example.com",
            "a@example..com",
            ".a@example.com",
            "a..b@example.com",
            "a@1.2.3.4",
            "\"quoted\"@example.com",
        ] {
            assert!(!is_valid(bad), "{bad:?}");
            assert_eq!(mailto_href(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_mailto_link_is_the_address_itself() {
        assert_eq!(
            mailto_href("ada@example.com").as_deref(),
            Some("mailto:ada@example.com")
        );
        assert_eq!(
            mailto_href("o'brien@example.ie").as_deref(),
            Some("mailto:o%27brien@example.ie")
        );
    }
}
