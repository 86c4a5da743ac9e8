//! Dotted field paths: reading values through embedded documents and arrays.
//! STUB: replaced by the query module work.
