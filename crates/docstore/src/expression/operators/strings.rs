//! String operators: concatenation, case, substrings, splitting, trimming and regular expressions.

use super::*;
use crate::pattern::{Pattern, PatternError};

pub(super) fn concat(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut out = String::new();
    for a in args {
        match a {
            v if nullish(v) => return null(),
            Some(Bson::String(s)) => out.push_str(s),
            other => {
                return Err(Error::location(
                    16702,
                    format!("$concat only supports strings, not {}", type_of(other)),
                ))
            }
        }
    }
    some(Bson::String(out))
}

/// A value as a string the way `$toLower`, `$substr` and friends coerce it (`null` is "").
pub(crate) fn coerce_to_string(v: &Option<Bson>) -> Result<String> {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(String::new()),
        Some(Bson::String(s)) | Some(Bson::Symbol(s)) | Some(Bson::JavaScriptCode(s)) => {
            Ok(s.clone())
        }
        Some(Bson::Int32(i)) => Ok(i.to_string()),
        Some(Bson::Int64(i)) => Ok(i.to_string()),
        Some(Bson::Double(d)) => Ok(fmt_double(*d)),
        Some(Bson::Decimal128(d)) => Ok(d.to_string()),
        Some(Bson::DateTime(d)) => dates::format_default(d.timestamp_millis()),
        Some(Bson::Timestamp(t)) => Ok(format!("Timestamp({}, {})", t.time, t.increment)),
        other => Err(Error::location(
            16007,
            format!("can't convert from BSON type {} to String", type_of(other)),
        )),
    }
}

pub(super) fn to_lower(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::String(
        coerce_to_string(&args[0])?.to_ascii_lowercase(),
    ))
}

pub(super) fn to_upper(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::String(
        coerce_to_string(&args[0])?.to_ascii_uppercase(),
    ))
}

pub(super) fn int32_arg(
    v: &Option<Bson>,
    name: &str,
    what: &str,
    codes: (i32, i32),
) -> Result<i64> {
    let Some(b) = v.as_ref().filter(|b| value::is_number(b)) else {
        return Err(Error::location(
            codes.0,
            format!(
                "{name}: {what} must be a numeric type (is BSON type {})",
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
                    "{name}: {what} cannot be represented as a 32-bit integral value: {}",
                    fmt_value(b)
                ),
            )
        })
}

pub(super) fn substr_cp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let s = coerce_to_string(&args[0])?;
    let start = int32_arg(&args[1], "$substrCP", "starting index", (34450, 34451))?;
    let len = int32_arg(&args[2], "$substrCP", "length", (34452, 34453))?;
    if start < 0 {
        return Err(Error::location(
            34454,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    }
    if len < 0 {
        return Err(Error::location(
            34455,
            "$substrCP: length must be a nonnegative integer.",
        ));
    }
    some(Bson::String(
        s.chars().skip(start as usize).take(len as usize).collect(),
    ))
}

pub(super) fn substr_bytes(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let s = coerce_to_string(&args[0])?;
    let to_i64 = |v: &Option<Bson>, code: i32, what: &str| -> Result<i64> {
        match v.as_ref().and_then(Number::from_bson) {
            Some(n) => Ok(n.as_f64() as i64),
            None => Err(Error::location(
                code,
                format!(
                    "$substrBytes: {what} must be a numeric type (is BSON type {})",
                    type_of(v)
                ),
            )),
        }
    };
    let start = to_i64(&args[1], 16034, "starting index")?;
    let len = to_i64(&args[2], 16035, "length")?;
    let bytes = s.as_bytes();
    if start < 0 || start as usize >= bytes.len() {
        return some(Bson::String(String::new()));
    }
    let start = start as usize;
    let end = if len < 0 {
        bytes.len()
    } else {
        start.saturating_add(len as usize).min(bytes.len())
    };
    if !s.is_char_boundary(start) {
        return Err(Error::location(
            28656,
            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
        ));
    }
    if !s.is_char_boundary(end) {
        return Err(Error::location(
            28657,
            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
        ));
    }
    some(Bson::String(s[start..end].to_string()))
}

pub(super) fn str_len_cp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        Some(Bson::String(s)) => some(Bson::Int32(s.chars().count() as i32)),
        other => Err(Error::location(
            34471,
            format!(
                "$strLenCP requires a string argument, found: {}",
                type_of(other)
            ),
        )),
    }
}

pub(super) fn str_len_bytes(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        Some(Bson::String(s)) => some(Bson::Int32(s.len() as i32)),
        other => Err(Error::location(
            34473,
            format!(
                "$strLenBytes requires a string argument, found: {}",
                type_of(other)
            ),
        )),
    }
}

pub(super) fn split(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (input, sep) = (&args[0], &args[1]);
    if nullish(input) || nullish(sep) {
        return null();
    }
    let Some(Bson::String(s)) = input else {
        return Err(Error::location(
            40085,
            format!(
                "$split requires an expression that evaluates to a string as a first argument, \
                 found: {}",
                type_of(input)
            ),
        ));
    };
    let Some(Bson::String(d)) = sep else {
        return Err(Error::location(
            40086,
            format!(
                "$split requires an expression that evaluates to a string as a second \
                 argument, found: {}",
                type_of(sep)
            ),
        ));
    };
    if d.is_empty() {
        return Err(Error::location(
            40087,
            "$split requires a non-empty separator",
        ));
    }
    some(Bson::Array(
        s.split(d.as_str())
            .map(|p| Bson::String(p.to_string()))
            .collect(),
    ))
}

pub(super) fn strcasecmp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let a = coerce_to_string(&args[0])?.to_ascii_lowercase();
    let b = coerce_to_string(&args[1])?.to_ascii_lowercase();
    some(Bson::Int32(match a.cmp(&b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }))
}

pub(super) fn index_of_cp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let input = &args[0];
    if nullish(input) {
        return null();
    }
    let Some(Bson::String(s)) = input else {
        return Err(Error::location(
            40093,
            format!(
                "$indexOfCP requires a string as the first argument, found: {}",
                type_of(input)
            ),
        ));
    };
    let Some(Bson::String(needle)) = &args[1] else {
        return Err(Error::location(
            40094,
            format!(
                "$indexOfCP requires a string as the second argument, found: {}",
                type_of(&args[1])
            ),
        ));
    };
    let chars: Vec<char> = s.chars().collect();
    let needle: Vec<char> = needle.chars().collect();
    let bound = |i: usize, code: i32| -> Result<Option<usize>> {
        match args.get(i) {
            None => Ok(None),
            Some(v) => {
                let n = Number::from_bson(comparable(v))
                    .and_then(Number::as_i64_exact)
                    .ok_or_else(|| {
                        Error::location(
                            code,
                            format!(
                                "$indexOfCP requires an integral index, found {}",
                                type_of(v)
                            ),
                        )
                    })?;
                if n < 0 {
                    return Err(Error::location(
                        code + 1,
                        format!("$indexOfCP requires a nonnegative index, found: {n}"),
                    ));
                }
                Ok(Some(n as usize))
            }
        }
    };
    let start = bound(2, 40096)?.unwrap_or(0);
    let end = bound(3, 40096)?.unwrap_or(chars.len()).min(chars.len());
    let mut i = start;
    while i + needle.len() <= end {
        if chars[i..i + needle.len()] == needle[..] {
            return some(Bson::Int32(i as i32));
        }
        i += 1;
    }
    some(Bson::Int32(-1))
}

pub(crate) fn trim(
    name: &str,
    input: Option<Bson>,
    chars: Option<Option<Bson>>,
) -> Result<Option<Bson>> {
    if nullish(&input) {
        return null();
    }
    let Some(Bson::String(s)) = &input else {
        let shown = input.as_ref().map(fmt_value).unwrap_or_default();
        return Err(Error::location(
            50699,
            format!(
                "{name} requires its input to be a string, got {shown} (of type {}) instead.",
                type_of(&input)
            ),
        ));
    };
    let set: Vec<char> = match chars {
        None => vec![
            '\0', ' ', '\t', '\n', '\u{0B}', '\u{0C}', '\r', '\u{A0}', '\u{1680}', '\u{2000}',
            '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}',
            '\u{2008}', '\u{2009}', '\u{200A}', '\u{2028}', '\u{2029}', '\u{202F}', '\u{205F}',
            '\u{3000}',
        ],
        Some(c) if nullish(&c) => return null(),
        Some(Some(Bson::String(c))) => c.chars().collect(),
        Some(other) => {
            let shown = other.as_ref().map(fmt_value).unwrap_or_default();
            return Err(Error::location(
                50700,
                format!(
                    "{name} requires 'chars' to be a string, got {shown} (of type {}) instead.",
                    type_of(&other)
                ),
            ));
        }
    };
    let trimmed = match name {
        "$ltrim" => s.trim_start_matches(|c| set.contains(&c)),
        "$rtrim" => s.trim_end_matches(|c| set.contains(&c)),
        _ => s.trim_matches(|c| set.contains(&c)),
    };
    some(Bson::String(trimmed.to_string()))
}

/// Compile a MongoDB pattern and its options (`i m s x`) for the expression `op`.
pub(crate) fn build_regex(pattern: &str, options: &str, op: &str) -> Result<Pattern> {
    Pattern::new(pattern, options).map_err(|e| match e {
        PatternError::Flag(c) => {
            Error::location(51108, format!("{op}: invalid flag in regex options: {c}"))
        }
        PatternError::Syntax(e) => Error::location(51111, format!("Invalid Regex in {op}: {e}")),
    })
}

pub(crate) fn regex_match(
    input: Option<Bson>,
    regex: Option<Bson>,
    options: Option<Bson>,
) -> Result<Option<Bson>> {
    let options = match &options {
        None | Some(Bson::Null) | Some(Bson::Undefined) => None,
        Some(Bson::String(o)) => Some(o.clone()),
        Some(other) => {
            return Err(Error::location(
                51106,
                format!(
                    "$regexMatch needs 'options' to be of type string, found {}",
                    value::type_name(other)
                ),
            ))
        }
    };
    let (pattern, flags) = match &regex {
        r if nullish(r) => return some(Bson::Boolean(false)),
        Some(Bson::String(p)) => (p.clone(), options.unwrap_or_default()),
        Some(Bson::RegularExpression(r)) => {
            if options.is_some() && !r.options.is_empty() {
                return Err(Error::location(
                    51075,
                    "$regexMatch: regex option(s) specified in both 'regex' and 'option' fields",
                ));
            }
            (
                r.pattern.clone(),
                options.unwrap_or_else(|| r.options.clone()),
            )
        }
        _ => {
            return Err(Error::location(
                51105,
                "$regexMatch needs 'regex' to be of type string or regex",
            ))
        }
    };
    let text = match &input {
        i if nullish(i) => return some(Bson::Boolean(false)),
        Some(Bson::String(s)) => s,
        _ => {
            return Err(Error::location(
                51104,
                "$regexMatch needs 'input' to be of type string",
            ))
        }
    };
    let re = build_regex(&pattern, &flags, "$regexMatch")?;
    some(Bson::Boolean(re.is_match(text)?))
}

pub(crate) fn replace(
    all: bool,
    input: Option<Bson>,
    find: Option<Bson>,
    replacement: Option<Bson>,
) -> Result<Option<Bson>> {
    let name = if all { "$replaceAll" } else { "$replaceOne" };
    let check = |v: &Option<Bson>, what: &str, code: i32| -> Result<()> {
        match v {
            v if nullish(v) => Ok(()),
            Some(Bson::String(_)) => Ok(()),
            Some(other) => Err(Error::location(
                code,
                format!(
                    "{name} requires that '{what}' be a string, found: {}",
                    fmt_value(other)
                ),
            )),
            None => Ok(()),
        }
    };
    check(&input, "input", 51746)?;
    check(&find, "find", 51745)?;
    check(&replacement, "replacement", 51744)?;
    match (input, find, replacement) {
        (Some(Bson::String(s)), Some(Bson::String(f)), Some(Bson::String(r))) => {
            some(Bson::String(if all {
                s.replace(&f, &r)
            } else {
                s.replacen(&f, &r, 1)
            }))
        }
        _ => null(),
    }
}
