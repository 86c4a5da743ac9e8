//! What is wrong with a submitted form, field by field: every form (checkout, the admin's product
//! and content forms) collects its messages here and shows each next to its input.

use std::collections::BTreeMap;

/// Field name → the message shown next to it. The first message added for a field wins (it is
/// the most basic problem: "enter a title" before "the title is too long").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldErrors(BTreeMap<&'static str, String>);

impl FieldErrors {
    pub(crate) fn new() -> FieldErrors {
        FieldErrors::default()
    }

    /// Note `message` for `field`, unless it already has one.
    pub(crate) fn add(&mut self, field: &'static str, message: impl Into<String>) {
        self.0.entry(field).or_insert_with(|| message.into());
    }

    /// The message for `field`, if any.
    pub(crate) fn get(&self, field: &str) -> Option<&String> {
        self.0.get(field)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Add `other`'s messages, each unless its field already has one.
    pub(crate) fn extend(&mut self, other: FieldErrors) {
        for (field, message) in other.0 {
            self.add(field, message);
        }
    }

    /// The fields with a message, in name order.
    pub(crate) fn fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_message_for_a_field_wins() {
        let mut errors = FieldErrors::new();
        assert!(errors.is_empty());
        errors.add("title", "Enter a title.");
        errors.add("title", "The title is too long.");
        errors.add("email", "Enter an email address.");
        assert_eq!(
            errors.get("title").map(String::as_str),
            Some("Enter a title.")
        );
        assert_eq!(errors.fields().collect::<Vec<_>>(), ["email", "title"]);
        assert_eq!(errors.get("price"), None);
    }
}
