//! Dotted field paths: reading values through embedded documents and arrays, the way MongoDB's
//! query matcher walks them (implicit traversal of arrays, numeric parts as array positions).
//!
//! The query matcher and sort, the text index (reading the fields it indexes) and `distinct`
//! all read documents through it, so it sits below `query` and `text` rather than inside `query`.

use bson::{Bson, Document};

/// A dotted path split once into its parts, with each part's array position precomputed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldPath {
    dotted: String,
    parts: Vec<String>,
    /// `Some(n)` when the part is a canonical decimal number ("0", "12", not "01") and so can
    /// address position `n` of an array.
    positions: Vec<Option<usize>>,
}

impl FieldPath {
    pub(crate) fn new(dotted: &str) -> FieldPath {
        let parts: Vec<String> = dotted.split('.').map(str::to_string).collect();
        let positions = parts.iter().map(|p| array_position(p)).collect();
        FieldPath {
            dotted: dotted.to_string(),
            parts,
            positions,
        }
    }

    /// The first part: the top-level field the path starts at.
    /// The path as written (`a.b.0`).
    pub(crate) fn dotted(&self) -> &str {
        &self.dotted
    }

    pub(crate) fn head(&self) -> &str {
        self.parts.first().map_or("", String::as_str)
    }
}

/// The array position a path part names, if it is written as MongoDB's canonical index
/// (all digits, no leading zero except "0" itself).
pub(crate) fn array_position(part: &str) -> Option<usize> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if part.len() > 1 && part.starts_with('0') {
        return None;
    }
    part.parse().ok()
}

/// What to do with an array found at the end of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeafArrays {
    /// Visit each element (with its position), then the array itself: what most operators see.
    Traverse,
    /// Visit only the array itself (`$size`, `$elemMatch`).
    NoTraversal,
}

/// The callback of [`walk_path`]: a value the path reaches (`None` = missing) and the position
/// in the outermost array traversed to reach it. Returning `true` stops the walk.
pub(crate) type Visit<'v, 'a> = dyn FnMut(Option<&'a Bson>, Option<usize>) -> bool + 'v;

/// Visit every value `path` reaches in `doc`, exactly as MongoDB's matcher enumerates them:
/// embedded documents are walked; an array in the middle of the path is fanned out into its
/// document elements (and its element at a numeric part's position); an array at the end is
/// handled per `leaf`. A missing field is visited once as `None`, except below an array, where
/// elements that cannot continue the path are skipped. Returns `true` if a visit returned `true`.
pub(crate) fn walk_path<'a>(
    doc: &'a Document,
    path: &FieldPath,
    leaf: LeafArrays,
    visit: &mut Visit<'_, 'a>,
) -> bool {
    walk_doc(doc, path, 0, leaf, visit)
}

/// Visit a standalone value as if it were the field at the end of a path (`$pull` conditions).
pub(crate) fn walk_value<'a>(value: &'a Bson, leaf: LeafArrays, visit: &mut Visit<'_, 'a>) -> bool {
    if let (Bson::Array(items), LeafArrays::Traverse) = (value, leaf) {
        for (i, item) in items.iter().enumerate() {
            if visit(Some(item), Some(i)) {
                return true;
            }
        }
    }
    visit(Some(value), None)
}

fn walk_doc<'a>(
    doc: &'a Document,
    path: &FieldPath,
    start: usize,
    leaf: LeafArrays,
    visit: &mut Visit<'_, 'a>,
) -> bool {
    let mut current = doc;
    let mut i = start;
    loop {
        let last = i + 1 == path.parts.len();
        match current.get(&path.parts[i]) {
            None => return visit(None, None),
            Some(value @ Bson::Document(inner)) => {
                if last {
                    return visit(Some(value), None);
                }
                current = inner;
                i += 1;
            }
            Some(value @ Bson::Array(items)) => {
                return walk_array(value, items, path, i + 1, leaf, visit)
            }
            // A scalar in the middle of the path: the rest of the path is missing.
            Some(value) => return visit(if last { Some(value) } else { None }, None),
        }
    }
}

/// `rest` is the index of the first path part below the array.
fn walk_array<'a>(
    whole: &'a Bson,
    items: &'a [Bson],
    path: &FieldPath,
    rest: usize,
    leaf: LeafArrays,
    visit: &mut Visit<'_, 'a>,
) -> bool {
    if rest == path.parts.len() {
        return walk_value(whole, leaf, visit);
    }
    let wanted_position = path.positions[rest];
    let offset_is_last = rest + 1 == path.parts.len();
    for (i, item) in items.iter().enumerate() {
        let offset_match = wanted_position == Some(i);
        match item {
            Bson::Document(inner) => {
                // Implicit traversal: report the outer array position for everything found.
                if walk_doc(inner, path, rest, leaf, &mut |v, _| visit(v, Some(i))) {
                    return true;
                }
                if offset_match {
                    let found = if offset_is_last {
                        visit(Some(item), None)
                    } else {
                        walk_doc(inner, path, rest + 1, leaf, visit)
                    };
                    if found {
                        return true;
                    }
                }
            }
            Bson::Array(nested) if offset_match => {
                let found = if offset_is_last {
                    visit(Some(item), None)
                } else {
                    walk_array(item, nested, path, rest + 1, leaf, visit)
                };
                if found {
                    return true;
                }
            }
            _ if offset_match && offset_is_last && visit(Some(item), None) => return true,
            _ => {}
        }
    }
    false
}

/// The value at `path` without array fan-out: each part is a field of a document or, for a
/// numeric part, a position in an array. `None` when any step is missing.
///
/// `get_path(&doc! {"items": [{"qty": 5}]}, "items.0.qty")` is `Some(&Bson::Int32(5))`.
pub(crate) fn get_path<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut current = doc.get(parts.next()?)?;
    for part in parts {
        current = match current {
            Bson::Document(inner) => inner.get(part)?,
            Bson::Array(items) => items.get(array_position(part)?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Every value a filter on `path` would look at, in order (missing values left out): through
/// arrays of documents, and for an array at the end of the path each element and then the array.
///
/// `collect_values(&doc! {"a": [{"b": 1}, {"b": [2, 3]}]}, "a.b")` is `[1, 2, 3, [2, 3]]`.
#[cfg(test)]
pub(crate) fn collect_values(doc: &Document, path: &str) -> Vec<Bson> {
    collect_path_values(doc, path, LeafArrays::Traverse)
}

/// The values at `path` with arrays along the way traversed and an array at the end handled per
/// `leaf`: with [`LeafArrays::NoTraversal`] a final array comes back whole, once (what
/// `distinct` needs before flattening one level).
pub(crate) fn collect_path_values(doc: &Document, path: &str, leaf: LeafArrays) -> Vec<Bson> {
    let path = FieldPath::new(path);
    let mut out = Vec::new();
    walk_path(doc, &path, leaf, &mut |value, _| {
        if let Some(value) = value {
            out.push(value.clone());
        }
        false
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn visited(doc: &Document, path: &str, leaf: LeafArrays) -> Vec<(Option<Bson>, Option<usize>)> {
        let path = FieldPath::new(path);
        let mut out = Vec::new();
        walk_path(doc, &path, leaf, &mut |v, pos| {
            out.push((v.cloned(), pos));
            false
        });
        out
    }

    #[test]
    fn get_path_follows_documents_and_array_positions() {
        let d = doc! {"a": {"b": [10, {"c": 7}]}};
        assert_eq!(get_path(&d, "a.b.0"), Some(&Bson::Int32(10)));
        assert_eq!(get_path(&d, "a.b.1.c"), Some(&Bson::Int32(7)));
        assert_eq!(get_path(&d, "a.b.2"), None);
        assert_eq!(get_path(&d, "a.b.c"), None);
        assert_eq!(get_path(&d, "a.x"), None);
    }

    #[test]
    fn collect_values_fans_out_through_arrays_like_a_filter() {
        let d = doc! {"a": [{"b": 1}, {"b": [2, 3]}, 4]};
        assert_eq!(
            collect_values(&d, "a.b"),
            vec![bson!(1), bson!(2), bson!(3), bson!([2, 3])]
        );
        assert_eq!(collect_values(&doc! {"x": 1}, "a.b"), Vec::<Bson>::new());
        assert_eq!(
            collect_path_values(&d, "a.b", LeafArrays::NoTraversal),
            vec![bson!(1), bson!([2, 3])]
        );
    }

    #[test]
    fn leaf_arrays_yield_elements_with_positions_then_the_array() {
        let d = doc! {"a": [5, 6]};
        assert_eq!(
            visited(&d, "a", LeafArrays::Traverse),
            vec![
                (Some(bson!(5)), Some(0)),
                (Some(bson!(6)), Some(1)),
                (Some(bson!([5, 6])), None)
            ]
        );
        assert_eq!(
            visited(&d, "a", LeafArrays::NoTraversal),
            vec![(Some(bson!([5, 6])), None)]
        );
    }

    #[test]
    fn missing_is_visited_once_but_not_below_scalar_array_elements() {
        assert_eq!(
            visited(&doc! {"a": 1}, "a.b", LeafArrays::Traverse),
            vec![(None, None)]
        );
        assert_eq!(
            visited(&doc! {"a": [1, 2]}, "a.b", LeafArrays::Traverse),
            vec![]
        );
        assert_eq!(
            visited(&doc! {"a": [{"c": 1}]}, "a.b", LeafArrays::Traverse),
            vec![(None, Some(0))]
        );
    }

    #[test]
    fn numeric_parts_address_positions_and_also_fields_named_like_numbers() {
        let d = doc! {"a": [{"b": 1}, {"0": {"b": 2}}]};
        assert_eq!(
            visited(&d, "a.0.b", LeafArrays::Traverse),
            vec![
                (None, Some(0)),
                (Some(bson!(1)), None),
                (Some(bson!(2)), Some(1))
            ]
        );
        assert!(array_position("01").is_none());
        assert_eq!(array_position("0"), Some(0));
    }

    #[test]
    fn nested_arrays_are_not_traversed_in_the_middle_of_a_path() {
        assert_eq!(
            visited(&doc! {"a": [[{"b": 1}]]}, "a.b", LeafArrays::Traverse),
            vec![]
        );
        assert_eq!(
            visited(&doc! {"a": [[{"b": 1}]]}, "a.0.b", LeafArrays::Traverse),
            vec![(Some(bson!(1)), Some(0))]
        );
    }
}
