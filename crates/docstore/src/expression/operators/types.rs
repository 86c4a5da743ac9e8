//! Type operators and conversion: `$type`, `$isNumber`, `$convert` and the `$toX` shorthands.

use super::*;

pub(super) fn type_op(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::String(type_of(&args[0]).to_string()))
}

pub(super) fn is_number(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(
        args[0].as_ref().is_some_and(value::is_number),
    ))
}

pub(super) fn convert_to(args: &[Option<Bson>], target: &str) -> Result<Option<Bson>> {
    if nullish(&args[0]) {
        return null();
    }
    convert(args[0].clone(), Some(Bson::String(target.to_string())))
}

pub(super) fn conversion_failure(msg: String) -> Error {
    Error::new(
        ErrorCode::ConversionFailure,
        format!("{msg} in $convert with no onError value"),
    )
}

pub(super) fn unsupported_conversion(from: &Bson, to: &str) -> Error {
    conversion_failure(format!(
        "Unsupported conversion from {} to {to}",
        value::type_name(from)
    ))
}

/// `$convert` of a non-null `input` to the type named (or numbered) by `to`.
pub(crate) fn convert(input: Option<Bson>, to: Option<Bson>) -> Result<Option<Bson>> {
    let target: String = match &to {
        t if nullish(t) => return null(),
        Some(Bson::String(s)) => s.clone(),
        Some(n) if value::is_number(n) => {
            let code = Number::from_bson(n)
                .and_then(Number::as_i64_exact)
                .unwrap_or(0);
            match code {
                1 => "double",
                2 => "string",
                7 => "objectId",
                8 => "bool",
                9 => "date",
                16 => "int",
                18 => "long",
                19 => "decimal",
                _ => {
                    return Err(Error::bad_value(format!(
                        "In $convert, numeric 'to' argument is not a valid type: {code}"
                    )))
                }
            }
            .to_string()
        }
        Some(other) => {
            return Err(Error::failed_to_parse(format!(
                "$convert's 'to' argument must be a string or number, but is {}",
                value::type_name(other)
            )))
        }
        None => return null(),
    };
    let Some(v) = input else {
        return null();
    };
    if matches!(v, Bson::Null | Bson::Undefined) {
        return null();
    }
    let out = match target.as_str() {
        "double" => Bson::Double(match &v {
            Bson::Boolean(b) => f64::from(u8::from(*b)),
            Bson::DateTime(d) => d.timestamp_millis() as f64,
            Bson::String(s) => parse_double(s)?,
            n if value::is_number(n) => num(n),
            other => return Err(unsupported_conversion(other, "double")),
        }),
        "int" | "long" => {
            let long = target == "long";
            let i: i64 = match &v {
                Bson::Boolean(b) => i64::from(*b),
                Bson::Int32(i) => *i as i64,
                Bson::Int64(i) => *i,
                Bson::DateTime(d) if long => d.timestamp_millis(),
                Bson::Double(_) | Bson::Decimal128(_) => {
                    let d = num(&v);
                    if d.is_nan() {
                        return Err(conversion_failure(
                            "Attempt to convert NaN value to integer type".to_string(),
                        ));
                    }
                    let t = d.trunc();
                    let fits = if long {
                        (-9.223372036854776e18..9.223372036854776e18).contains(&t)
                    } else {
                        (i32::MIN as f64..=i32::MAX as f64).contains(&t)
                    };
                    if !fits {
                        return Err(conversion_failure(format!(
                            "Conversion would overflow target type: {}",
                            fmt_value(&v)
                        )));
                    }
                    t as i64
                }
                Bson::String(s) => {
                    let parsed: std::result::Result<i64, _> = s.parse();
                    match parsed {
                        Ok(i) => i,
                        Err(_) => {
                            return Err(conversion_failure(format!(
                                "Failed to parse number '{s}': Did not consume whole string."
                            )))
                        }
                    }
                }
                other => return Err(unsupported_conversion(other, &target)),
            };
            if long {
                Bson::Int64(i)
            } else {
                match i32::try_from(i) {
                    Ok(x) => Bson::Int32(x),
                    Err(_) => {
                        return Err(conversion_failure(format!(
                            "Conversion would overflow target type: {}",
                            fmt_value(&v)
                        )))
                    }
                }
            }
        }
        "decimal" => match &v {
            Bson::Boolean(b) => Bson::Decimal128(value::f64_to_decimal(f64::from(u8::from(*b)))),
            Bson::String(s) => match s.parse::<bson::Decimal128>() {
                Ok(d) => Bson::Decimal128(d),
                Err(_) => return Err(conversion_failure(format!("Failed to parse number '{s}'"))),
            },
            Bson::Decimal128(_) => v.clone(),
            Bson::Int32(i) => Bson::Decimal128(
                i.to_string()
                    .parse()
                    .unwrap_or_else(|_| value::f64_to_decimal(*i as f64)),
            ),
            Bson::Int64(i) => Bson::Decimal128(
                i.to_string()
                    .parse()
                    .unwrap_or_else(|_| value::f64_to_decimal(*i as f64)),
            ),
            Bson::Double(d) => Bson::Decimal128(value::f64_to_decimal(*d)),
            Bson::DateTime(d) => {
                Bson::Decimal128(value::f64_to_decimal(d.timestamp_millis() as f64))
            }
            other => return Err(unsupported_conversion(other, "decimal")),
        },
        "string" => Bson::String(match &v {
            Bson::Boolean(b) => b.to_string(),
            Bson::ObjectId(o) => o.to_hex(),
            Bson::String(_)
            | Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::Double(_)
            | Bson::Decimal128(_)
            | Bson::DateTime(_) => coerce_to_string(&Some(v.clone()))?,
            other => return Err(unsupported_conversion(other, "string")),
        }),
        "bool" => Bson::Boolean(match &v {
            Bson::Boolean(b) => *b,
            n if value::is_number(n) => is_truthy(n),
            Bson::MinKey | Bson::MaxKey => {
                return Err(unsupported_conversion(&v, "bool"));
            }
            _ => true,
        }),
        "date" => Bson::DateTime(match &v {
            Bson::DateTime(d) => *d,
            Bson::Int64(i) => bson::DateTime::from_millis(*i),
            Bson::Double(_) | Bson::Decimal128(_) => {
                let d = num(&v);
                if !d.is_finite() || d.abs() >= 9.2e18 {
                    return Err(conversion_failure(format!(
                        "Conversion would overflow target type: {}",
                        fmt_value(&v)
                    )));
                }
                bson::DateTime::from_millis(d.trunc() as i64)
            }
            Bson::String(s) => match dates::parse_date_string(s) {
                Some(ms) => bson::DateTime::from_millis(ms),
                None => {
                    return Err(conversion_failure(format!(
                        "Error parsing date string '{s}'"
                    )))
                }
            },
            Bson::ObjectId(o) => bson::DateTime::from_millis(o.timestamp().timestamp_millis()),
            Bson::Timestamp(t) => bson::DateTime::from_millis(t.time as i64 * 1000),
            other => return Err(unsupported_conversion(other, "date")),
        }),
        "objectId" => match &v {
            Bson::ObjectId(_) => v.clone(),
            Bson::String(s) => match ObjectId::parse_str(s) {
                Ok(o) => Bson::ObjectId(o),
                Err(_) => {
                    return Err(conversion_failure(format!(
                        "Failed to parse objectId '{s}': Invalid string length for parsing to \
                         OID, expected 24 but found {}",
                        s.len()
                    )))
                }
            },
            other => return Err(unsupported_conversion(other, "objectId")),
        },
        other => {
            return Err(Error::bad_value(format!("Unknown type name: {other}")));
        }
    };
    some(out)
}

pub(super) fn parse_double(s: &str) -> Result<f64> {
    let t = s.trim();
    let lowered = t.to_ascii_lowercase();
    let special = match lowered.as_str() {
        "nan" => Some(f64::NAN),
        "infinity" | "inf" => Some(f64::INFINITY),
        "-infinity" | "-inf" => Some(f64::NEG_INFINITY),
        _ => None,
    };
    if let Some(x) = special {
        return Ok(x);
    }
    if t.len() != s.len() || t.is_empty() {
        return Err(conversion_failure(format!(
            "Failed to parse number '{s}': Did not consume whole string."
        )));
    }
    t.parse::<f64>().map_err(|_| {
        conversion_failure(format!(
            "Failed to parse number '{s}': Did not consume whole string."
        ))
    })
}
