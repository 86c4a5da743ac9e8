//! The shop's identifiers: [`Sku`], [`Slug`], [`CartId`], [`OrderNumber`]. Each wraps the string
//! it is stored as; each is built from input through `parse` (or `TryFrom<&str>`) with the rules
//! the forms and the order lookup always applied, and reads as a `&str` through `as_str`.
//!
//! Reading from the database does not re-check the rules (`#[serde(transparent)]`): the values
//! there were parsed when they were written, and refusing one on read would make its whole
//! document (a product, a cart) unreadable, a migration by another name.

use std::fmt;

use serde::{Deserialize, Serialize};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::{is_nfc, UnicodeNormalization};

/// An identifier that does not follow its rules; says which kind of identifier it was meant to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid {what}")]
pub struct IdError {
    pub what: &'static str,
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }

            fn refused() -> IdError {
                IdError { what: $what }
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;
            fn try_from(text: &str) -> Result<$name, IdError> {
                $name::parse(text)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(text: String) -> Result<$name, IdError> {
                $name::parse(&text)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl From<$name> for bson::Bson {
            fn from(id: $name) -> bson::Bson {
                bson::Bson::String(id.0)
            }
        }
    };
}

string_id!(
    /// A product's stock-keeping unit: 1 to 40 ASCII letters, digits and dashes (the product
    /// form's rule). Unique among products.
    Sku,
    "SKU"
);

impl Sku {
    pub fn parse(text: &str) -> Result<Sku, IdError> {
        let ok = !text.is_empty()
            && text.len() <= 40
            && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        ok.then(|| Sku(text.to_string())).ok_or_else(Sku::refused)
    }
}

string_id!(
    /// A URL slug: runs of lowercase letters and digits of any script joined by single dashes,
    /// NFC-normalised, at most [`Slug::MAX_CHARS`] characters: what [`slugify`] makes of a name,
    /// and what the forms accept. A run may carry combining marks after its first character
    /// (Devanagari vowel signs and viramas, a dot left by lowercasing `İ`), which no precomposed
    /// letter replaces. ASCII slugs written before Unicode was allowed keep passing unchanged.
    ///
    /// Stored and compared as the text itself; a URL carries it percent-encoded
    /// (`/blog/caf%C3%A9-society`), which actix decodes back before routing.
    Slug,
    "slug"
);

impl Slug {
    /// The longest slug, in characters (a Japanese title of 100 characters is 300 bytes).
    pub const MAX_CHARS: usize = 100;

    pub fn parse(text: &str) -> Result<Slug, IdError> {
        let runs_ok = text.split('-').all(|run| {
            let mut chars = run.chars();
            chars
                .next()
                .is_some_and(|c| c.is_alphanumeric() && is_lowercase_stable(c))
                && chars.all(|c| {
                    (c.is_alphanumeric() || is_combining_mark(c)) && is_lowercase_stable(c)
                })
        });
        let ok = runs_ok && text.chars().count() <= Slug::MAX_CHARS && is_nfc(text);
        ok.then(|| Slug(text.to_string())).ok_or_else(Slug::refused)
    }

    /// The slug [`slugify`] makes of `name`; refused when nothing of it is left (a name of
    /// punctuation only).
    pub fn from_name(name: &str) -> Result<Slug, IdError> {
        Slug::parse(&slugify(name))
    }
}

/// True when lowercasing `c` gives `c` back: the slug is already in the one case it is stored in.
fn is_lowercase_stable(c: char) -> bool {
    let mut lower = c.to_lowercase();
    lower.next() == Some(c) && lower.next().is_none()
}

/// Turn a name into a URL slug ([`Slug`]'s rule): NFC-normalised (so "café" typed with a
/// combining accent gives the same slug as with `é`), letters and digits of every script kept
/// and lowercased, everything else collapsed into single dashes, no dash at either end, at most
/// [`Slug::MAX_CHARS`] characters. Empty when the name has no letter or digit.
pub fn slugify(name: &str) -> String {
    slugify_within(name, Slug::MAX_CHARS)
}

/// [`slugify`] bounded to `max_chars` characters (tags are shorter than slugs). The cut falls
/// between characters, and never between a letter and the combining marks that follow it (they
/// go with it), so a cut slug is still a slug.
pub fn slugify_within(name: &str, max_chars: usize) -> String {
    let mut chars: Vec<char> = Vec::with_capacity(name.len());
    // Whether the last character kept is part of a run (a mark may follow it).
    let mut in_run = false;
    for c in name.nfc() {
        if c.is_alphanumeric() || (in_run && is_combining_mark(c)) {
            chars.extend(c.to_lowercase());
            in_run = true;
        } else {
            if in_run {
                chars.push('-');
            }
            in_run = false;
        }
    }
    // Lowercasing can leave a sequence that is no longer composed (or composes further).
    let mut chars: Vec<char> = chars.into_iter().nfc().collect();
    if chars.len() > max_chars {
        let mut cut = max_chars;
        while cut > 0 && is_combining_mark(chars[cut]) {
            cut -= 1;
        }
        chars.truncate(cut);
    }
    while chars.last() == Some(&'-') {
        chars.pop();
    }
    chars.into_iter().collect()
}

string_id!(
    /// A cart's `_id`, which is also how its stock reservations name it. New carts get 128
    /// random bits as hex ([`CartId::random`]); parsing accepts 1 to 64 ASCII letters, digits,
    /// dashes and underscores, so it can never look like another [`super::StockHolder`].
    CartId,
    "cart id"
);

impl CartId {
    /// A holder's cart id read from storage, trusted as written (see the module's header).
    pub(in crate::domain) fn from_stored(stored: String) -> CartId {
        CartId(stored)
    }

    pub fn parse(text: &str) -> Result<CartId, IdError> {
        let ok = !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        ok.then(|| CartId(text.to_string()))
            .ok_or_else(CartId::refused)
    }

    /// A new cart id: 128 random bits as hex.
    pub fn random() -> CartId {
        use rand::RngCore;
        let mut bytes = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        CartId(hex::encode(bytes))
    }
}

string_id!(
    /// An order's number, `BZ-` and at least six digits (`BZ-000123`): what the shopper is told
    /// and types into the order lookup.
    OrderNumber,
    "order number"
);

impl OrderNumber {
    /// A holder's order number read from storage, trusted as written (see the module's header).
    pub(in crate::domain) fn from_stored(stored: String) -> OrderNumber {
        OrderNumber(stored)
    }

    /// `BZ-000123`, `bz-000123` or plain `123` (spaces around allowed) → `BZ-000123`.
    pub fn parse(text: &str) -> Result<OrderNumber, IdError> {
        let text = text.trim();
        let digits = match text.get(..3) {
            Some(prefix) if prefix.eq_ignore_ascii_case("BZ-") => &text[3..],
            _ => text,
        };
        if digits.is_empty() || digits.len() > 12 || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(OrderNumber::refused());
        }
        match digits.parse::<u64>() {
            Ok(n) if n > 0 => Ok(OrderNumber::from_sequence(n)),
            _ => Err(OrderNumber::refused()),
        }
    }

    /// An order number exactly as the shop writes it (`BZ-000123`), as in an order's address:
    /// `/orders/123` is not that order's page.
    pub fn parse_exact(text: &str) -> Result<OrderNumber, IdError> {
        OrderNumber::parse(text)
            .ok()
            .filter(|number| number.0 == text)
            .ok_or_else(OrderNumber::refused)
    }

    /// The number of the `n`th order.
    pub fn from_sequence(n: u64) -> OrderNumber {
        OrderNumber(format!("BZ-{n:06}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skus_are_letters_digits_and_dashes_up_to_forty() {
        assert_eq!(Sku::parse("bk-1").unwrap().as_str(), "bk-1");
        assert!(Sku::try_from("BULK000001").is_ok());
        assert!(Sku::parse("").is_err());
        assert!(Sku::parse("bk 1").is_err());
        assert!(Sku::parse("bk_1").is_err());
        assert!(Sku::parse(&"a".repeat(41)).is_err());
        assert_eq!(Sku::parse("é").unwrap_err().to_string(), "not a valid SKU");
    }

    #[test]
    fn slugs_are_what_slugify_would_make() {
        assert!(Slug::parse("blue-note-2").is_ok());
        for good in [
            "café-society",
            "ñandú",
            "日本のジャズ",
            "нина-симон",
            "नमस्ते",
            "ß",
        ] {
            assert!(Slug::parse(good).is_ok(), "{good:?} was refused");
        }
        let decomposed = "cafe\u{301}";
        for bad in [
            "", "-a", "a-", "a--b", "Blue", "a b", "Ñandú", decomposed, "\u{301}a", "a_b",
        ] {
            assert!(Slug::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(Slug::parse(&"a".repeat(100)).is_ok());
        assert!(Slug::parse(&"a".repeat(101)).is_err());
        assert!(Slug::parse(&"日".repeat(100)).is_ok());
        assert!(Slug::parse(&"日".repeat(101)).is_err());
    }

    #[test]
    fn slugify_keeps_letters_and_digits_of_every_script_in_lowercase() {
        assert_eq!(slugify("A Love Supreme (1965)!"), "a-love-supreme-1965");
        assert_eq!(slugify("  --Modal   Jazz-- "), "modal-jazz");
        assert_eq!(slugify("Café society"), "café-society");
        assert_eq!(slugify("Ñandú"), "ñandú");
        assert_eq!(slugify("日本のジャズ"), "日本のジャズ");
        assert_eq!(
            slugify("Nina Симон: 日本 tour, 1969"),
            "nina-симон-日本-tour-1969"
        );
        assert_eq!(slugify("नमस्ते दुनिया"), "नमस्ते-दुनिया");
        assert_eq!(slugify("İstanbul"), "i\u{307}stanbul");
        assert_eq!(slugify("!!! ---"), "");
    }

    #[test]
    fn slugify_gives_one_slug_for_composed_and_decomposed_accents() {
        let composed = "Caf\u{e9} Society";
        let decomposed = "Cafe\u{301} Society";
        assert_ne!(composed, decomposed);
        assert_eq!(slugify(composed), slugify(decomposed));
        assert_eq!(slugify(decomposed), "caf\u{e9}-society");
        // A mark with no letter before it is not a letter of its own.
        assert_eq!(slugify("\u{301}a \u{301}b"), "a-b");
    }

    #[test]
    fn slugify_cuts_at_a_character_never_inside_one_or_before_its_accent() {
        let long = "日本".repeat(60);
        let slug = slugify(&long);
        assert_eq!(slug.chars().count(), Slug::MAX_CHARS);
        assert!(Slug::parse(&slug).is_ok());
        // A letter typed with a combining accent counts once: it is composed before the cut.
        let accented = format!("{}e\u{301}", "a".repeat(99));
        assert_eq!(slugify(&accented), format!("{}é", "a".repeat(99)));
        let hindi = format!("{}नमस्ते", "a".repeat(98));
        let cut = slugify_within(&hindi, 100);
        assert_eq!(cut, format!("{}नम", "a".repeat(98)));
        let cut = slugify_within(&format!("{}स्ते", "a".repeat(99)), 100);
        assert_eq!(cut, "a".repeat(99), "a letter goes with its virama");
        // A cut just after a dash leaves no dash at the end.
        assert_eq!(slugify_within("ab cd", 3), "ab");
    }

    #[test]
    fn whatever_slugify_makes_parses_and_slugify_keeps_a_slug_as_it_is() {
        let mut text = String::new();
        for c in (0..0x3_0000u32).filter_map(char::from_u32) {
            let alone = slugify(&c.to_string());
            assert!(
                alone.is_empty() || Slug::parse(&alone).is_ok(),
                "{c:?} gave {alone:?}"
            );
            text.push(c);
        }
        for chunk in text.chars().collect::<Vec<_>>().chunks(37) {
            let chunk: String = chunk.iter().collect();
            let slug = slugify(&chunk);
            assert!(
                slug.is_empty() || Slug::parse(&slug).is_ok(),
                "{chunk:?} gave {slug:?}"
            );
            assert_eq!(slugify(&slug), slug, "slugify is idempotent on {slug:?}");
        }
        assert_eq!(Slug::from_name("Café society").unwrap(), "café-society");
        assert!(Slug::from_name("!!!").is_err());
    }

    #[test]
    fn cart_ids_are_random_hex_and_never_contain_a_colon() {
        let id = CartId::random();
        assert_eq!(id.as_str().len(), 32);
        assert!(id.as_str().chars().all(|c| c.is_ascii_hexdigit()));
        assert!(CartId::parse(id.as_str()).is_ok());
        assert_ne!(CartId::random(), id);
        assert!(CartId::parse("cancelled:BZ-000001").is_err());
        assert!(CartId::parse("").is_err());
    }

    #[test]
    fn order_numbers_are_read_with_or_without_the_prefix() {
        assert_eq!(OrderNumber::parse(" bz-000123 ").unwrap(), "BZ-000123");
        assert_eq!(OrderNumber::parse("123").unwrap(), "BZ-000123");
        assert_eq!(OrderNumber::parse("BZ-1234567").unwrap(), "BZ-1234567");
        for bad in [
            "",
            "BZ-",
            "abc",
            "0",
            "BZ-0",
            "BZ-12x",
            "99999999999999",
            "BZ 12",
        ] {
            assert!(OrderNumber::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(OrderNumber::from_sequence(42).to_string(), "BZ-000042");
        assert!(OrderNumber::parse_exact("BZ-000042").is_ok());
        for loose in ["42", "bz-000042", " BZ-000042", "BZ-0000042"] {
            assert!(
                OrderNumber::parse_exact(loose).is_err(),
                "{loose:?} was accepted"
            );
        }
    }

    #[test]
    fn identifiers_are_stored_as_bare_strings() {
        let sku = Sku::parse("bk-1").unwrap();
        assert_eq!(
            bson::to_bson(&sku).unwrap(),
            bson::Bson::String("bk-1".into())
        );
        assert_eq!(bson::Bson::from(&sku), bson::Bson::String("bk-1".into()));
        let read: OrderNumber = bson::from_bson(bson::Bson::String("BZ-000007".into())).unwrap();
        assert_eq!(read, OrderNumber::from_sequence(7));
    }
}
