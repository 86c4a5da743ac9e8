//! Set operators: union, intersection, difference, equality, subsets, and `$anyElementTrue`/`$allElementsTrue`.

use super::*;

pub(super) fn push_distinct(set: &mut Vec<Bson>, v: &Bson) {
    if !set.iter().any(|x| values_equal(x, v)) {
        set.push(v.clone());
    }
}

pub(super) fn set_operands<'a>(
    name: &str,
    args: &'a [Option<Bson>],
    code: i32,
) -> Result<Option<Vec<&'a Vec<Bson>>>> {
    let mut out = Vec::new();
    for a in args {
        match a {
            v if nullish(v) => return Ok(None),
            Some(Bson::Array(items)) => out.push(items),
            other => {
                return Err(Error::location(
                    code,
                    format!(
                        "All operands of {name} must be arrays. One argument is of type: {}",
                        type_of(other)
                    ),
                ))
            }
        }
    }
    Ok(Some(out))
}

pub(super) fn set_union(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(arrays) = set_operands("$setUnion", args, 17043)? else {
        return null();
    };
    let mut out = Vec::new();
    for items in arrays {
        for v in items {
            push_distinct(&mut out, v);
        }
    }
    some(Bson::Array(out))
}

pub(super) fn set_intersection(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(arrays) = set_operands("$setIntersection", args, 17047)? else {
        return null();
    };
    let Some((first, rest)) = arrays.split_first() else {
        return some(Bson::Array(vec![]));
    };
    let mut out = Vec::new();
    for v in first.iter() {
        if rest.iter().all(|a| a.iter().any(|x| values_equal(x, v))) {
            push_distinct(&mut out, v);
        }
    }
    some(Bson::Array(out))
}

pub(super) fn set_difference(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (a, b) = (&args[0], &args[1]);
    if nullish(a) || nullish(b) {
        return null();
    }
    let Some(Bson::Array(left)) = a else {
        return Err(Error::location(
            17048,
            format!(
                "both operands of $setDifference must be arrays. First argument is of type: {}",
                type_of(a)
            ),
        ));
    };
    let Some(Bson::Array(right)) = b else {
        return Err(Error::location(
            17049,
            format!(
                "both operands of $setDifference must be arrays. Second argument is of type: {}",
                type_of(b)
            ),
        ));
    };
    let mut out = Vec::new();
    for v in left {
        if !right.iter().any(|x| values_equal(x, v)) {
            push_distinct(&mut out, v);
        }
    }
    some(Bson::Array(out))
}

pub(super) fn set_equals(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut arrays = Vec::new();
    for a in args {
        match a {
            Some(Bson::Array(items)) => arrays.push(items),
            other => {
                return Err(Error::location(
                    17044,
                    format!(
                        "All operands of $setEquals must be arrays. One argument is of type: {}",
                        type_of(other)
                    ),
                ))
            }
        }
    }
    let contains_all =
        |a: &Vec<Bson>, b: &Vec<Bson>| a.iter().all(|v| b.iter().any(|x| values_equal(x, v)));
    let first = arrays[0];
    some(Bson::Boolean(
        arrays
            .iter()
            .all(|a| contains_all(first, a) && contains_all(a, first)),
    ))
}

pub(super) fn set_is_subset(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(Bson::Array(left)) = &args[0] else {
        return Err(Error::location(
            17046,
            format!(
                "both operands of $setIsSubset must be arrays. First argument is of type: {}",
                type_of(&args[0])
            ),
        ));
    };
    let Some(Bson::Array(right)) = &args[1] else {
        return Err(Error::location(
            17042,
            format!(
                "both operands of $setIsSubset must be arrays. Second argument is of type: {}",
                type_of(&args[1])
            ),
        ));
    };
    some(Bson::Boolean(
        left.iter()
            .all(|v| right.iter().any(|x| values_equal(x, v))),
    ))
}

pub(super) fn element_truth(args: &[Option<Bson>], name: &str, any: bool) -> Result<Option<Bson>> {
    let Some(Bson::Array(items)) = &args[0] else {
        return Err(Error::location(
            17041,
            format!(
                "{name}'s argument must be an array, but is {}",
                type_of(&args[0])
            ),
        ));
    };
    some(Bson::Boolean(if any {
        items.iter().any(is_truthy)
    } else {
        items.iter().all(is_truthy)
    }))
}

pub(super) fn any_element_true(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    element_truth(args, "$anyElementTrue", true)
}

pub(super) fn all_elements_true(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    element_truth(args, "$allElementsTrue", false)
}
