//! Update paths: parsing dotted field paths, the order in which mongod applies them, and walking
//! or creating them inside a document (arrays are addressed only by numeric parts, never implicitly).

use super::format;
use crate::error::{Error, ErrorCode, Result};
use bson::{Bson, Document};
use std::cmp::Ordering;

/// mongod refuses to pad an array by more than this many nulls (`$set: {"a.5000000": 1}`).
const MAX_ARRAY_PADDING: usize = 1_500_000;

/// mongod's EmptyFieldName.
const EMPTY_FIELD_NAME: i32 = 56;
/// mongod's CannotBackfillArray.
const CANNOT_BACKFILL_ARRAY: i32 = 34;

/// Splits and validates an update path (`a.b.$[x]`).
pub(super) fn split(path: &str) -> Result<Vec<String>> {
    if path.is_empty() {
        return Err(Error::location(
            EMPTY_FIELD_NAME,
            "An empty update path is not valid.",
        ));
    }
    let parts: Vec<String> = path.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(Error::location(
            EMPTY_FIELD_NAME,
            format!("The update path '{path}' contains an empty field name, which is not allowed."),
        ));
    }
    Ok(parts)
}

/// `$[]` gives `Some("")`, `$[id]` gives `Some("id")`, anything else `None`.
pub(super) fn array_filter_identifier(part: &str) -> Option<&str> {
    part.strip_prefix("$[")?.strip_suffix(']')
}

pub(super) fn is_positional(part: &str) -> bool {
    part == "$"
}

/// An array index written as a path part: decimal digits only.
pub(super) fn parse_index(part: &str) -> Option<usize> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

fn is_numeric(part: &str) -> bool {
    !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit())
}

/// mongod (5.0+) applies update paths in this order: field names bytewise, but two numeric
/// parts by their numeric value, so `a.2` comes before `a.10`.
pub(super) fn compare_parts(a: &str, b: &str) -> Ordering {
    if is_numeric(a) && is_numeric(b) {
        let (ta, tb) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
        ta.len()
            .cmp(&tb.len())
            .then_with(|| ta.cmp(tb))
            .then_with(|| a.len().cmp(&b.len()))
    } else {
        a.as_bytes().cmp(b.as_bytes())
    }
}

pub(super) fn compare_paths(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let ord = compare_parts(x, y);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

/// Whether `a` is `b` or one of its ancestors.
pub(super) fn is_prefix(a: &[String], b: &[String]) -> bool {
    a.len() <= b.len() && a.iter().zip(b.iter()).all(|(x, y)| x == y)
}

pub(super) fn child<'a>(value: &'a Bson, part: &str) -> Option<&'a Bson> {
    match value {
        Bson::Document(d) => d.get(part),
        Bson::Array(items) => parse_index(part).and_then(|i| items.get(i)),
        _ => None,
    }
}

pub(super) fn child_mut<'a>(value: &'a mut Bson, part: &str) -> Option<&'a mut Bson> {
    match value {
        Bson::Document(d) => d.get_mut(part),
        Bson::Array(items) => parse_index(part).and_then(move |i| items.get_mut(i)),
        _ => None,
    }
}

pub(super) fn get<'a>(root: &'a Bson, parts: &[String]) -> Option<&'a Bson> {
    let mut current = root;
    for part in parts {
        current = child(current, part)?;
    }
    Some(current)
}

pub(super) fn get_mut<'a>(root: &'a mut Bson, parts: &[String]) -> Option<&'a mut Bson> {
    let mut current = root;
    for part in parts {
        current = child_mut(current, part)?;
    }
    Some(current)
}

/// How many leading parts of `parts` exist in `root`.
pub(super) fn existing_depth(root: &Bson, parts: &[String]) -> usize {
    let mut current = root;
    for (depth, part) in parts.iter().enumerate() {
        match child(current, part) {
            Some(next) => current = next,
            None => return depth,
        }
    }
    parts.len()
}

/// Creates `parts[depth..]` below the existing element at `parts[..depth]` and stores `value` at
/// the end. Intermediate parts become embedded documents (even numeric ones); an array parent is
/// padded with nulls up to a numeric part.
pub(super) fn create(root: &mut Bson, parts: &[String], depth: usize, value: Bson) -> Result<()> {
    let Some(first) = parts.get(depth) else {
        return Err(Error::internal(
            "update path creation past the end of the path",
        ));
    };
    let mut wrapped = value;
    for part in parts[depth + 1..].iter().rev() {
        let mut d = Document::new();
        d.insert(part.clone(), wrapped);
        wrapped = Bson::Document(d);
    }
    let parent_name = if depth == 0 {
        ""
    } else {
        parts[depth - 1].as_str()
    };
    let Some(parent) = get_mut(root, &parts[..depth]) else {
        return Err(Error::internal("update path parent vanished"));
    };
    match parent {
        Bson::Document(d) => {
            d.insert(first.clone(), wrapped);
            Ok(())
        }
        Bson::Array(items) => {
            let Some(index) = parse_index(first) else {
                return Err(not_viable(first, parent_name, parent));
            };
            if index.saturating_sub(items.len()) > MAX_ARRAY_PADDING {
                return Err(Error::location(
                    CANNOT_BACKFILL_ARRAY,
                    format!("can't backfill more than {MAX_ARRAY_PADDING} elements"),
                ));
            }
            items.resize(index.max(items.len()), Bson::Null);
            items.push(wrapped);
            Ok(())
        }
        other => Err(not_viable(first, parent_name, other)),
    }
}

fn not_viable(field: &str, parent_name: &str, parent: &Bson) -> Error {
    Error::new(
        ErrorCode::PathNotViable,
        format!(
            "Cannot create field '{field}' in element {{{}}}",
            format::element(parent_name, parent)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &str) -> Vec<String> {
        split(p).unwrap()
    }

    #[test]
    fn numeric_parts_sort_by_value_and_names_bytewise() {
        assert_eq!(compare_parts("2", "10"), Ordering::Less);
        assert_eq!(compare_parts("b", "a"), Ordering::Greater);
        assert_eq!(compare_parts("B", "a"), Ordering::Less);
        assert_eq!(
            compare_paths(&parts("a.b"), &parts("a.b.c")),
            Ordering::Less
        );
    }

    #[test]
    fn empty_path_parts_are_refused_with_code_56() {
        let e = split("a..b").unwrap_err();
        assert_eq!(e.code_number(), 56);
        assert_eq!(
            e.message,
            "The update path 'a..b' contains an empty field name, which is not allowed."
        );
    }

    #[test]
    fn array_filter_identifiers_are_recognised() {
        assert_eq!(array_filter_identifier("$[]"), Some(""));
        assert_eq!(array_filter_identifier("$[elem]"), Some("elem"));
        assert_eq!(array_filter_identifier("$"), None);
        assert_eq!(array_filter_identifier("x"), None);
    }
}
