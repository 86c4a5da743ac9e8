//! The MongoDB wire protocol: message headers, OP_MSG (sections, checksum, flags), the legacy
//! OP_QUERY handshake and its OP_REPLY answer.
//! STUB: replaced by the wire module work.
