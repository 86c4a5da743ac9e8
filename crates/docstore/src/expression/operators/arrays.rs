//! Array operators: element access, slicing, ranges, and conversion to and from objects.

use super::*;

pub(super) fn size(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        Some(Bson::Array(items)) => some(Bson::Int32(items.len() as i32)),
        other => Err(Error::location(
            17124,
            format!(
                "The argument to $size must be an array. Type of argument was: {}",
                type_of(other)
            ),
        )),
    }
}

pub(super) fn array_elem_at(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (arr, idx) = (&args[0], &args[1]);
    if nullish(arr) || nullish(idx) {
        return null();
    }
    let Some(Bson::Array(items)) = arr else {
        return Err(Error::location(
            28689,
            format!(
                "$arrayElemAt's first argument must be an array, but is {}",
                type_of(arr)
            ),
        ));
    };
    let Some(i) = idx.as_ref().filter(|v| value::is_number(v)) else {
        return Err(Error::location(
            28690,
            format!(
                "$arrayElemAt's second argument must be a numeric value, but is {}",
                type_of(idx)
            ),
        ));
    };
    let i = Number::from_bson(i)
        .and_then(Number::as_i64_exact)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or_else(|| {
            Error::location(
                28691,
                format!(
                    "$arrayElemAt's second argument must be representable as a 32-bit integer: {}",
                    fmt_value(i)
                ),
            )
        })?;
    Ok(element_at(items, i))
}

pub(super) fn element_at(items: &[Bson], i: i64) -> Option<Bson> {
    let len = items.len() as i64;
    let pos = if i < 0 { len + i } else { i };
    if pos < 0 || pos >= len {
        return None;
    }
    items.get(pos as usize).cloned()
}

pub(super) fn first_or_last(args: &[Option<Bson>], name: &str, last: bool) -> Result<Option<Bson>> {
    match &args[0] {
        None => Ok(None),
        Some(Bson::Null) | Some(Bson::Undefined) => null(),
        Some(Bson::Array(items)) => Ok(element_at(items, if last { -1 } else { 0 })),
        other => Err(Error::location(
            28689,
            format!(
                "{name}'s argument must be an array, but is {}",
                type_of(other)
            ),
        )),
    }
}

pub(super) fn first(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    first_or_last(args, "$first", false)
}

pub(super) fn last(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    first_or_last(args, "$last", true)
}

pub(super) fn in_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(Bson::Array(items)) = &args[1] else {
        return Err(Error::location(
            40081,
            format!(
                "$in requires an array as a second argument, found: {}",
                type_of(&args[1])
            ),
        ));
    };
    let needle = comparable(&args[0]);
    some(Bson::Boolean(items.iter().any(|v| values_equal(v, needle))))
}

pub(super) fn slice(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    if args.iter().any(nullish) {
        return null();
    }
    let Some(Bson::Array(items)) = &args[0] else {
        return Err(Error::location(
            28724,
            format!(
                "First argument to $slice must be an array, but is of type: {}",
                type_of(&args[0])
            ),
        ));
    };
    let int_arg = |i: usize, codes: (i32, i32), which: &str| -> Result<i64> {
        let v = &args[i];
        let Some(b) = v.as_ref().filter(|b| value::is_number(b)) else {
            return Err(Error::location(
                codes.0,
                format!(
                    "{which} argument to $slice must be a numeric value, but was of type: {}",
                    type_of(v)
                ),
            ));
        };
        Number::from_bson(b)
            .and_then(Number::as_i64_exact)
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| {
                Error::location(
                    codes.1,
                    format!(
                        "{which} argument to $slice can't be represented as a 32-bit integer: {}",
                        fmt_value(b)
                    ),
                )
            })
    };
    let len = items.len() as i64;
    let (start, count) = if args.len() == 2 {
        let n = int_arg(1, (28725, 28726), "Second")?;
        if n >= 0 {
            (0, n)
        } else {
            ((len + n).max(0), -n)
        }
    } else {
        let pos = int_arg(1, (28725, 28726), "Second")?;
        let n = int_arg(2, (28727, 28728), "Third")?;
        if n <= 0 {
            return Err(Error::location(
                28729,
                format!("Third argument to $slice must be positive: {n}"),
            ));
        }
        let start = if pos < 0 {
            (len + pos).max(0)
        } else {
            pos.min(len)
        };
        (start, n)
    };
    let start = start as usize;
    let end = start.saturating_add(count as usize).min(items.len());
    some(Bson::Array(items[start..end].to_vec()))
}

pub(super) fn concat_arrays(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut out = Vec::new();
    for a in args {
        match a {
            v if nullish(v) => return null(),
            Some(Bson::Array(items)) => out.extend(items.iter().cloned()),
            other => {
                return Err(Error::location(
                    28664,
                    format!("$concatArrays only supports arrays, not {}", type_of(other)),
                ))
            }
        }
    }
    some(Bson::Array(out))
}

pub(super) fn is_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(matches!(args[0], Some(Bson::Array(_)))))
}

pub(super) fn reverse_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        v if nullish(v) => null(),
        Some(Bson::Array(items)) => some(Bson::Array(items.iter().rev().cloned().collect())),
        other => Err(Error::location(
            34435,
            format!(
                "The argument to $reverseArray must be an array, but was of type: {}",
                type_of(other)
            ),
        )),
    }
}

pub(super) fn index_of_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let items = match &args[0] {
        v if nullish(v) => return null(),
        Some(Bson::Array(items)) => items,
        other => {
            return Err(Error::location(
                40090,
                format!(
                    "$indexOfArray requires an array as a first argument, found: {}",
                    type_of(other)
                ),
            ))
        }
    };
    let index = |i: usize| -> Result<Option<usize>> {
        match args.get(i) {
            None => Ok(None),
            Some(v) => {
                let n = v
                    .as_ref()
                    .and_then(Number::from_bson)
                    .and_then(Number::as_i64_exact)
                    .ok_or_else(|| {
                        Error::location(
                            40096,
                            format!(
                                "$indexOfArray requires an integral starting index, found a \
                                 value of type: {}",
                                type_of(v)
                            ),
                        )
                    })?;
                if n < 0 {
                    return Err(Error::location(
                        40097,
                        format!("$indexOfArray requires a nonnegative starting index, found: {n}"),
                    ));
                }
                Ok(Some(n as usize))
            }
        }
    };
    let start = index(2)?.unwrap_or(0);
    let end = index(3)?.unwrap_or(items.len()).min(items.len());
    let needle = comparable(&args[1]);
    for (i, item) in items.iter().enumerate().take(end).skip(start) {
        if values_equal(item, needle) {
            return some(Bson::Int32(i as i32));
        }
    }
    some(Bson::Int32(-1))
}

pub(super) fn range(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let int = |i: usize, what: &str, codes: (i32, i32)| -> Result<i64> {
        let v = &args[i];
        let Some(b) = v.as_ref().filter(|b| value::is_number(b)) else {
            return Err(Error::location(
                codes.0,
                format!(
                    "$range requires a numeric {what}, found value of type: {}",
                    type_of(v)
                ),
            ));
        };
        Number::from_bson(b)
            .and_then(Number::as_i64_exact)
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| {
                Error::location(
                    codes.1,
                    format!(
                        "$range requires a {what} that can be represented as a 32-bit integer, \
                         found value: {}",
                        fmt_value(b)
                    ),
                )
            })
    };
    let start = int(0, "starting value", (34443, 34444))?;
    let end = int(1, "ending value", (34445, 34446))?;
    let step = if args.len() == 3 {
        int(2, "step value", (34447, 34448))?
    } else {
        1
    };
    if step == 0 {
        return Err(Error::location(
            34449,
            "$range requires a non-zero step value",
        ));
    }
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        out.push(Bson::Int32(i as i32));
        i += step;
    }
    some(Bson::Array(out))
}

pub(super) fn array_to_object(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let items = match &args[0] {
        v if nullish(v) => return null(),
        Some(Bson::Array(items)) => items,
        other => {
            return Err(Error::location(
                40386,
                format!(
                    "$arrayToObject requires an array input, found: {}",
                    type_of(other)
                ),
            ))
        }
    };
    let mut out = Document::new();
    for item in items {
        let (k, v) = match item {
            Bson::Array(pair) if pair.len() == 2 => match &pair[0] {
                Bson::String(k) => (k.clone(), pair[1].clone()),
                other => {
                    return Err(Error::location(
                        40395,
                        format!(
                            "$arrayToObject requires an array of key-value pairs, where the key \
                             must be of type string. Found key type: {}",
                            value::type_name(other)
                        ),
                    ))
                }
            },
            Bson::Document(d) if d.len() == 2 => match (d.get("k"), d.get("v")) {
                (Some(Bson::String(k)), Some(v)) => (k.clone(), v.clone()),
                _ => {
                    return Err(Error::location(
                        40393,
                        "$arrayToObject requires an object with keys 'k' and 'v'.",
                    ))
                }
            },
            _ => {
                return Err(Error::location(
                    40398,
                    "Unrecognised input type format for $arrayToObject",
                ))
            }
        };
        out.insert(k, v);
    }
    some(Bson::Document(out))
}

pub(super) fn object_to_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        v if nullish(v) => null(),
        Some(Bson::Document(d)) => some(Bson::Array(
            d.iter()
                .map(|(k, v)| Bson::Document(bson::doc! { "k": k.clone(), "v": v.clone() }))
                .collect(),
        )),
        other => Err(Error::location(
            40390,
            format!(
                "$objectToArray requires a document input, found: {}",
                type_of(other)
            ),
        )),
    }
}

/// Merge documents left to right; `null` and missing inputs are skipped.
pub(crate) fn merge_into(out: &mut Document, v: &Option<Bson>) -> Result<()> {
    match v {
        v if nullish(v) => Ok(()),
        Some(Bson::Document(d)) => {
            for (k, val) in d {
                out.insert(k.clone(), val.clone());
            }
            Ok(())
        }
        other => Err(Error::location(
            40400,
            format!(
                "$mergeObjects requires object inputs, but input {} is of type {}",
                other.as_ref().map(fmt_value).unwrap_or_default(),
                type_of(other)
            ),
        )),
    }
}

pub(super) fn merge_objects(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut out = Document::new();
    for a in args {
        merge_into(&mut out, a)?;
    }
    some(Bson::Document(out))
}
