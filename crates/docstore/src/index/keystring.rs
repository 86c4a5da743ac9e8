//! Order-preserving byte encoding of BSON values: `encode(a) < encode(b)` exactly when MongoDB
//! orders `a` before `b`. STUB: replaced by the index module work.
