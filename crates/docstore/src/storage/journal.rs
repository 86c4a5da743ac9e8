//! Journal segments: framing, checksums, group commit. STUB.
