//! MongoDB's error codes in one place, and the error type every layer returns.
//!
//! A command that fails replies `{ ok: 0, errmsg, code, codeName, ... }`; write errors for single
//! documents reuse the same type inside `writeErrors`.

use bson::{doc, Document};
use std::fmt;

/// The server error codes docstore can answer with (names as MongoDB spells them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InternalError,
    BadValue,
    NoSuchKey,
    FailedToParse,
    TypeMismatch,
    IllegalOperation,
    NamespaceNotFound,
    IndexNotFound,
    PathNotViable,
    ConflictingUpdateOperators,
    CursorNotFound,
    NamespaceExists,
    DollarPrefixedFieldName,
    InvalidIdField,
    NotSingleValueField,
    CommandNotFound,
    ImmutableField,
    InvalidOptions,
    InvalidNamespace,
    IndexOptionsConflict,
    IndexKeySpecsConflict,
    CannotCreateIndex,
    CommandNotSupported,
    InvalidPipelineOperator,
    CannotIndexParallelArrays,
    Location(i32),
    DuplicateKey,
    ConversionFailure,
    BSONObjectTooLarge,
    QueryExceededMemoryLimitNoDiskUseAllowed,
    InvalidBSON,
    ProtocolError,
    OperationNotSupportedInTransaction,
    Overflow,
    Unauthorized,
    AuthenticationFailed,
    MechanismUnavailable,
    /// The journal cannot be written: an I/O error or a read-only file system.
    LogWriteFailed,
    /// The journal cannot be written because the disk is full.
    OutOfDiskSpace,
    /// An `apiVersion` other than "1".
    APIVersionError,
    /// A command outside the Stable API version under `apiStrict: true`.
    APIStrictError,
    InvalidIndexSpecificationOption,
    DocumentValidationFailure,
    /// A command ran past its `maxTimeMS`.
    MaxTimeMSExpired,
}

impl ErrorCode {
    pub fn code(self) -> i32 {
        use ErrorCode::*;
        match self {
            InternalError => 1,
            BadValue => 2,
            NoSuchKey => 4,
            FailedToParse => 9,
            TypeMismatch => 14,
            Overflow => 15,
            Unauthorized => 13,
            AuthenticationFailed => 18,
            MechanismUnavailable => 334,
            IllegalOperation => 20,
            InvalidBSON => 22,
            NamespaceNotFound => 26,
            IndexNotFound => 27,
            PathNotViable => 28,
            ConflictingUpdateOperators => 40,
            CursorNotFound => 43,
            NamespaceExists => 48,
            DollarPrefixedFieldName => 52,
            InvalidIdField => 53,
            NotSingleValueField => 54,
            CommandNotFound => 59,
            ImmutableField => 66,
            CannotCreateIndex => 67,
            InvalidOptions => 72,
            InvalidNamespace => 73,
            IndexOptionsConflict => 85,
            IndexKeySpecsConflict => 86,
            CommandNotSupported => 115,
            InvalidPipelineOperator => 168,
            CannotIndexParallelArrays => 171,
            ProtocolError => 17,
            OperationNotSupportedInTransaction => 263,
            QueryExceededMemoryLimitNoDiskUseAllowed => 292,
            ConversionFailure => 241,
            BSONObjectTooLarge => 10334,
            DuplicateKey => 11000,
            LogWriteFailed => 42,
            OutOfDiskSpace => 14031,
            APIVersionError => 322,
            APIStrictError => 323,
            InvalidIndexSpecificationOption => 197,
            DocumentValidationFailure => 121,
            MaxTimeMSExpired => 50,
            Location(n) => n,
        }
    }

    pub fn name(self) -> String {
        use ErrorCode::*;
        let s = match self {
            InternalError => "InternalError",
            BadValue => "BadValue",
            NoSuchKey => "NoSuchKey",
            FailedToParse => "FailedToParse",
            TypeMismatch => "TypeMismatch",
            Overflow => "Overflow",
            Unauthorized => "Unauthorized",
            AuthenticationFailed => "AuthenticationFailed",
            MechanismUnavailable => "MechanismUnavailable",
            IllegalOperation => "IllegalOperation",
            InvalidBSON => "InvalidBSON",
            NamespaceNotFound => "NamespaceNotFound",
            IndexNotFound => "IndexNotFound",
            PathNotViable => "PathNotViable",
            ConflictingUpdateOperators => "ConflictingUpdateOperators",
            CursorNotFound => "CursorNotFound",
            NamespaceExists => "NamespaceExists",
            DollarPrefixedFieldName => "DollarPrefixedFieldName",
            InvalidIdField => "InvalidIdField",
            NotSingleValueField => "NotSingleValueField",
            CommandNotFound => "CommandNotFound",
            ImmutableField => "ImmutableField",
            CannotCreateIndex => "CannotCreateIndex",
            InvalidOptions => "InvalidOptions",
            InvalidNamespace => "InvalidNamespace",
            IndexOptionsConflict => "IndexOptionsConflict",
            IndexKeySpecsConflict => "IndexKeySpecsConflict",
            CommandNotSupported => "CommandNotSupported",
            InvalidPipelineOperator => "InvalidPipelineOperator",
            CannotIndexParallelArrays => "CannotIndexParallelArrays",
            ProtocolError => "ProtocolError",
            OperationNotSupportedInTransaction => "OperationNotSupportedInTransaction",
            QueryExceededMemoryLimitNoDiskUseAllowed => "QueryExceededMemoryLimitNoDiskUseAllowed",
            ConversionFailure => "ConversionFailure",
            BSONObjectTooLarge => "BSONObjectTooLarge",
            DuplicateKey => "DuplicateKey",
            LogWriteFailed => "LogWriteFailed",
            OutOfDiskSpace => "OutOfDiskSpace",
            APIVersionError => "APIVersionError",
            APIStrictError => "APIStrictError",
            InvalidIndexSpecificationOption => "InvalidIndexSpecificationOption",
            DocumentValidationFailure => "DocumentValidationFailure",
            MaxTimeMSExpired => "MaxTimeMSExpired",
            Location(n) => return format!("Location{n}"),
        };
        s.to_string()
    }
}

/// An error as the client will see it: code, message and optional extra reply fields
/// (for example `keyPattern`/`keyValue` on duplicate keys).
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    pub(crate) extra: Option<Document>,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            extra: None,
        }
    }

    /// MongoDB's numbered assertion errors ("Location40324" and friends).
    pub(crate) fn location(code: i32, message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Location(code), message)
    }

    pub(crate) fn bad_value(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadValue, message)
    }

    pub(crate) fn failed_to_parse(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::FailedToParse, message)
    }

    pub(crate) fn type_mismatch(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::TypeMismatch, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, message)
    }

    /// A feature docstore deliberately does not implement; the message names it.
    pub(crate) fn not_supported(feature: impl fmt::Display) -> Self {
        Self::new(
            ErrorCode::CommandNotSupported,
            format!("{feature} is not supported by docstore"),
        )
    }

    pub(crate) fn with_extra(mut self, extra: Document) -> Self {
        self.extra = Some(extra);
        self
    }

    /// Whether the server refused to open its data directory because of damage that
    /// `docstore::repair` can salvage; the damage is described under `extra.damage`.
    pub fn needs_repair(&self) -> bool {
        self.extra
            .as_ref()
            .is_some_and(|e| e.get_bool("needsRepair") == Ok(true))
    }

    /// The description of the damage when [`Error::needs_repair`].
    pub fn damage(&self) -> Option<&str> {
        self.extra.as_ref()?.get_str("damage").ok()
    }

    pub(crate) fn code_number(&self) -> i32 {
        self.code.code()
    }

    /// The reply document of a failed command.
    pub(crate) fn to_command_reply(&self) -> Document {
        let mut reply = doc! {
            "ok": 0.0,
            "errmsg": self.message.clone(),
            "code": self.code.code(),
            "codeName": self.code.name(),
        };
        if let Some(extra) = &self.extra {
            for (k, v) in extra {
                reply.insert(k.clone(), v.clone());
            }
        }
        reply
    }

    /// One entry of a write command's `writeErrors` array.
    pub(crate) fn to_write_error(&self, index: usize) -> Document {
        let mut entry = doc! {
            "index": index as i32,
            "code": self.code.code(),
            "errmsg": self.message.clone(),
        };
        if let Some(extra) = &self.extra {
            for (k, v) in extra {
                entry.insert(k.clone(), v.clone());
            }
        }
        entry
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.name(),
            self.code.code(),
            self.message
        )
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_codes_are_named_like_mongodb() {
        let e = Error::location(40324, "Unrecognized pipeline stage name: '$nope'");
        let reply = e.to_command_reply();
        assert_eq!(reply.get_i32("code").unwrap(), 40324);
        assert_eq!(reply.get_str("codeName").unwrap(), "Location40324");
    }

    #[test]
    fn duplicate_key_write_error_carries_extra_fields() {
        let e = Error::new(ErrorCode::DuplicateKey, "E11000 duplicate key error")
            .with_extra(doc! { "keyPattern": { "a": 1 }, "keyValue": { "a": 1 } });
        let w = e.to_write_error(3);
        assert_eq!(w.get_i32("index").unwrap(), 3);
        assert_eq!(w.get_i32("code").unwrap(), 11000);
        assert!(w.get_document("keyPattern").is_ok());
    }
}
