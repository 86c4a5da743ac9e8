//! The edit-conflict token: a fresh random value stored on a document at every save. A form
//! carries the one it was loaded with, and a save only matches the document if it is still the
//! same, so of two people editing at once the second is shown the conflict instead of silently
//! overwriting the first. Stored as the bare `ObjectId` it always was (products and categories
//! name the field `edit_version`, content nodes `nonce`).

use std::fmt;

use bson::oid::ObjectId;
use serde::{Deserialize, Serialize};

/// One version of an editable document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EditVersion(ObjectId);

impl EditVersion {
    /// A version no save has used before.
    #[allow(clippy::new_without_default)] // a default would hide that each call is a new version
    pub fn new() -> EditVersion {
        EditVersion(ObjectId::new())
    }

    /// The version a form sent back (24 hex digits).
    pub fn parse(text: &str) -> Result<EditVersion, bson::oid::Error> {
        ObjectId::parse_str(text).map(EditVersion)
    }

    /// As a form carries it.
    pub fn to_hex(self) -> String {
        self.0.to_hex()
    }

    pub fn object_id(self) -> ObjectId {
        self.0
    }
}

impl From<ObjectId> for EditVersion {
    fn from(id: ObjectId) -> EditVersion {
        EditVersion(id)
    }
}

impl fmt::Display for EditVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_hex())
    }
}

impl From<EditVersion> for bson::Bson {
    fn from(version: EditVersion) -> bson::Bson {
        bson::Bson::ObjectId(version.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_survives_the_round_trip_through_a_form() {
        let version = EditVersion::new();
        assert_eq!(EditVersion::parse(&version.to_hex()).unwrap(), version);
        assert!(EditVersion::parse("not-a-version").is_err());
        assert_ne!(EditVersion::new(), version);
    }

    #[test]
    fn a_version_is_stored_as_a_bare_object_id() {
        let version = EditVersion::new();
        assert_eq!(
            bson::to_bson(&version).unwrap(),
            bson::Bson::ObjectId(version.object_id())
        );
    }
}
