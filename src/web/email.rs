//! Email addresses typed by shoppers: the strict syntax (kept with the domain values,
//! `domain::email`, where accounts parse their normalised form) and `mailto:` links built only
//! from addresses that passed it.

pub(crate) use crate::domain::email::is_valid;

/// `mailto:` link for `address`, or `None` when it is not a valid address (e.g. an order
/// stored before the check was strict). `'` is percent-encoded; nothing else needs it.
pub(crate) fn mailto_href(address: &str) -> Option<String> {
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
