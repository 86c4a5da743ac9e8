//! Date expressions: parts of a date (`$year` … `$week`), `$dateToString` and `$dateTrunc`, in
//! UTC or a fixed offset ("+05:30"); named time zones other than UTC are refused as unsupported.
//! The calendar arithmetic is `expression::dates`; this module parses the operators' arguments
//! and evaluates them.

use super::{Expression, Scope};
use crate::error::{Error, Result};
use crate::expression::dates::{
    date_millis, day_of_week_from_name, format_date, naive, parse_offset, part_value, require_date,
    truncate, validate_format, Part, DEFAULT_FORMAT_OFFSET, DEFAULT_FORMAT_UTC,
};
use crate::printing::{fmt_document, fmt_value, nullish, type_of};
use crate::value::{self, Number};
use bson::Bson;

#[derive(Debug, Clone)]
pub(crate) enum DateOp {
    Part {
        part: Part,
        date: Expression,
        timezone: Option<Expression>,
    },
    ToString {
        date: Expression,
        format: Option<Expression>,
        timezone: Option<Expression>,
        on_null: Option<Expression>,
    },
    Trunc {
        date: Expression,
        unit: Expression,
        bin_size: Option<Expression>,
        timezone: Option<Expression>,
        start_of_week: Option<Expression>,
    },
}

fn part_for(name: &str) -> Option<(&'static str, Part)> {
    Some(match name {
        "$year" => ("$year", Part::Year),
        "$month" => ("$month", Part::Month),
        "$dayOfMonth" => ("$dayOfMonth", Part::DayOfMonth),
        "$dayOfWeek" => ("$dayOfWeek", Part::DayOfWeek),
        "$dayOfYear" => ("$dayOfYear", Part::DayOfYear),
        "$hour" => ("$hour", Part::Hour),
        "$minute" => ("$minute", Part::Minute),
        "$second" => ("$second", Part::Second),
        "$millisecond" => ("$millisecond", Part::Millisecond),
        "$week" => ("$week", Part::Week),
        "$isoWeek" => ("$isoWeek", Part::IsoWeek),
        "$isoWeekYear" => ("$isoWeekYear", Part::IsoWeekYear),
        "$isoDayOfWeek" => ("$isoDayOfWeek", Part::IsoDayOfWeek),
        _ => return None,
    })
}

/// Parse a date operator; `Ok(None)` when `name` is not one.
pub(crate) fn parse(name: &str, arg: &Bson) -> Result<Option<DateOp>> {
    if let Some((static_name, part)) = part_for(name) {
        return parse_part(static_name, part, arg).map(Some);
    }
    match name {
        "$dateToString" => {
            let Bson::Document(d) = arg else {
                return Err(Error::location(
                    18629,
                    "$dateToString only supports an object as its argument",
                ));
            };
            let mut date = None;
            let mut format = None;
            let mut timezone = None;
            let mut on_null = None;
            for (k, v) in d {
                let e = Some(Expression::parse(v)?);
                match k.as_str() {
                    "date" => date = e,
                    "format" => {
                        if let Bson::String(f) = v {
                            validate_format(f)?;
                        }
                        format = e
                    }
                    "timezone" => timezone = e,
                    "onNull" => on_null = e,
                    _ => {
                        return Err(Error::location(
                            18534,
                            format!("Unrecognized argument to $dateToString: {k}"),
                        ))
                    }
                }
            }
            let date = date.ok_or_else(|| {
                Error::location(18628, "Missing 'date' parameter to $dateToString")
            })?;
            Ok(Some(DateOp::ToString {
                date,
                format,
                timezone,
                on_null,
            }))
        }
        "$dateTrunc" => {
            let Bson::Document(d) = arg else {
                return Err(Error::location(
                    5439007,
                    "$dateTrunc only supports an object as its argument",
                ));
            };
            let mut date = None;
            let mut unit = None;
            let mut bin_size = None;
            let mut timezone = None;
            let mut start_of_week = None;
            for (k, v) in d {
                let e = Some(Expression::parse(v)?);
                match k.as_str() {
                    "date" => date = e,
                    "unit" => unit = e,
                    "binSize" => bin_size = e,
                    "timezone" => timezone = e,
                    "startOfWeek" => start_of_week = e,
                    _ => {
                        return Err(Error::location(
                            5439008,
                            format!(
                                "Unrecognized argument to $dateTrunc: {k}. Expected arguments \
                                 are date, unit, and optionally, binSize, timezone, and \
                                 startOfWeek."
                            ),
                        ))
                    }
                }
            }
            Ok(Some(DateOp::Trunc {
                date: date.ok_or_else(|| {
                    Error::location(5439009, "Missing 'date' parameter to $dateTrunc")
                })?,
                unit: unit.ok_or_else(|| {
                    Error::location(5439010, "Missing 'unit' parameter to $dateTrunc")
                })?,
                bin_size,
                timezone,
                start_of_week,
            }))
        }
        _ => Ok(None),
    }
}

fn parse_part(name: &'static str, part: Part, arg: &Bson) -> Result<DateOp> {
    match arg {
        Bson::Document(d) if d.keys().next().is_some_and(|k| !k.starts_with('$')) => {
            let mut date = None;
            let mut timezone = None;
            for (k, v) in d {
                match k.as_str() {
                    "date" => date = Some(Expression::parse(v)?),
                    "timezone" => timezone = Some(Expression::parse(v)?),
                    _ => {
                        return Err(Error::location(
                            40535,
                            format!("unrecognized option to {name}: \"{k}\""),
                        ))
                    }
                }
            }
            let date = date.ok_or_else(|| {
                Error::location(
                    40539,
                    format!(
                        "missing 'date' argument to {name}, provided: {}",
                        fmt_document(d)
                    ),
                )
            })?;
            Ok(DateOp::Part {
                part,
                date,
                timezone,
            })
        }
        Bson::Array(items) => {
            if items.len() != 1 {
                return Err(Error::location(
                    40536,
                    format!(
                        "{name} accepts exactly one argument if given an array, but was given {}",
                        items.len()
                    ),
                ));
            }
            Ok(DateOp::Part {
                part,
                date: Expression::parse(&items[0])?,
                timezone: None,
            })
        }
        other => Ok(DateOp::Part {
            part,
            date: Expression::parse(other)?,
            timezone: None,
        }),
    }
}

/// A time zone as minutes east of UTC. `Ok(None)` means the argument was null.
fn timezone_offset(tz: &Option<Expression>, scope: &Scope) -> Result<Option<i64>> {
    let Some(expr) = tz else {
        return Ok(Some(0));
    };
    let v = expr.eval(scope)?;
    match &v {
        v if nullish(v) => Ok(None),
        Some(Bson::String(s)) => parse_offset(s).map(Some),
        other => Err(Error::location(
            40517,
            format!(
                "timezone must evaluate to a string, found {}",
                type_of(other)
            ),
        )),
    }
}

impl DateOp {
    pub(crate) fn eval(&self, scope: &Scope) -> Result<Option<Bson>> {
        match self {
            DateOp::Part {
                part,
                date,
                timezone,
                ..
            } => {
                let v = date.eval(scope)?;
                let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) else {
                    return Ok(Some(Bson::Null));
                };
                let ms = require_date(&v)?;
                let Some(offset) = timezone_offset(timezone, scope)? else {
                    return Ok(Some(Bson::Null));
                };
                let t = naive(ms.saturating_add(offset * 60_000))?;
                Ok(Some(Bson::Int32(part_value(*part, &t) as i32)))
            }
            DateOp::ToString {
                date,
                format,
                timezone,
                on_null,
            } => {
                let v = date.eval(scope)?;
                let format = match format {
                    None => None,
                    Some(f) => match f.eval(scope)? {
                        f if nullish(&f) => return Ok(Some(Bson::Null)),
                        Some(Bson::String(s)) => Some(s),
                        Some(other) => {
                            return Err(Error::location(
                                18533,
                                format!(
                                    "$dateToString requires that 'format' be a string, found: {} \
                                     with value {}",
                                    value::type_name(&other),
                                    fmt_value(&other)
                                ),
                            ))
                        }
                        None => return Ok(Some(Bson::Null)),
                    },
                };
                let Some(offset) = timezone_offset(timezone, scope)? else {
                    return Ok(Some(Bson::Null));
                };
                let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) else {
                    return match on_null {
                        Some(e) => e.eval(scope),
                        None => Ok(Some(Bson::Null)),
                    };
                };
                let ms = require_date(&v)?;
                let format = format.unwrap_or_else(|| {
                    if timezone.is_none() || offset == 0 {
                        DEFAULT_FORMAT_UTC
                    } else {
                        DEFAULT_FORMAT_OFFSET
                    }
                    .to_string()
                });
                format_date(ms, &format, offset).map(|s| Some(Bson::String(s)))
            }
            DateOp::Trunc {
                date,
                unit,
                bin_size,
                timezone,
                start_of_week,
            } => {
                let date = date.eval(scope)?;
                let unit = unit.eval(scope)?;
                let bin = match bin_size {
                    Some(b) => Some(b.eval(scope)?),
                    None => None,
                };
                let offset = timezone_offset(timezone, scope)?;
                if nullish(&date) || nullish(&unit) || bin.as_ref().is_some_and(nullish) {
                    return Ok(Some(Bson::Null));
                }
                let Some(offset) = offset else {
                    return Ok(Some(Bson::Null));
                };
                let date = date.unwrap_or(Bson::Null);
                let ms = date_millis(&date).ok_or_else(|| {
                    Error::location(
                        5439012,
                        format!(
                            "$dateTrunc requires 'date' to be a date, but got {}",
                            value::type_name(&date)
                        ),
                    )
                })?;
                let unit = match unit {
                    Some(Bson::String(u)) => u,
                    other => {
                        return Err(Error::location(
                            5439013,
                            format!(
                                "$dateTrunc requires 'unit' to be a string, but got {}",
                                type_of(&other)
                            ),
                        ))
                    }
                };
                let bin = match bin {
                    None => 1,
                    Some(b) => {
                        let v = b.unwrap_or(Bson::Null);
                        let n = Number::from_bson(&v)
                            .and_then(Number::as_i64_exact)
                            .ok_or_else(|| {
                                Error::location(
                                    5439017,
                                    format!(
                                        "$dateTrunc requires 'binSize' to be a 64-bit integer, \
                                         but got value '{}' of type {}",
                                        fmt_value(&v),
                                        value::type_name(&v)
                                    ),
                                )
                            })?;
                        if n <= 0 {
                            return Err(Error::location(
                                5439018,
                                format!(
                                    "$dateTrunc requires 'binSize' to be greater than 0, but got \
                                     value {n}"
                                ),
                            ));
                        }
                        n
                    }
                };
                let week_start = if unit == "week" {
                    match start_of_week {
                        None => 0,
                        Some(e) => match e.eval(scope)? {
                            s if nullish(&s) => return Ok(Some(Bson::Null)),
                            Some(Bson::String(s)) => {
                                day_of_week_from_name(&s).ok_or_else(|| {
                                    Error::location(
                                        5439016,
                                        format!(
                                            "$dateTrunc parameter 'startOfWeek' value cannot be \
                                         recognized as a day of a week: {s}"
                                        ),
                                    )
                                })?
                            }
                            other => {
                                return Err(Error::location(
                                    5439015,
                                    format!(
                                        "$dateTrunc requires 'startOfWeek' to be a string, but \
                                         got {}",
                                        type_of(&other)
                                    ),
                                ))
                            }
                        },
                    }
                } else {
                    0
                };
                let local = ms.saturating_add(offset * 60_000);
                let truncated = truncate(local, &unit, bin, week_start)?;
                Ok(Some(Bson::DateTime(bson::DateTime::from_millis(
                    truncated.saturating_sub(offset * 60_000),
                ))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expression::dates::{parse_date_string, parts_of};
    use bson::{bson, doc};

    // 2021-03-04T05:06:07.089Z, a Thursday.
    const T: i64 = 1_614_834_367_089;

    fn eval(expr: Bson) -> Result<Option<Bson>> {
        let root = doc! { "d": bson::DateTime::from_millis(T), "n": null, "s": "x" };
        Expression::parse(&expr)?.evaluate(&root, &doc! {})
    }

    fn ok(expr: Bson) -> Option<Bson> {
        eval(expr).unwrap_or_else(|e| panic!("evaluation failed: {e}"))
    }

    fn code(expr: Bson) -> i32 {
        match eval(expr) {
            Err(e) => e.code_number(),
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    #[test]
    fn date_parts_in_utc() {
        assert_eq!(
            parts_of(T),
            doc! {
                "year": 2021, "month": 3, "dayOfMonth": 4, "dayOfWeek": 5, "dayOfYear": 63,
                "hour": 5, "minute": 6, "second": 7, "millisecond": 89, "week": 9,
            }
        );
        assert_eq!(ok(bson!({ "$year": "$d" })), Some(Bson::Int32(2021)));
        assert_eq!(ok(bson!({ "$dayOfWeek": ["$d"] })), Some(Bson::Int32(5)));
        assert_eq!(
            ok(bson!({ "$hour": { "date": "$d", "timezone": "+02:30" } })),
            Some(Bson::Int32(7))
        );
        assert_eq!(ok(bson!({ "$month": "$n" })), Some(Bson::Null));
        assert_eq!(ok(bson!({ "$month": "$missing" })), Some(Bson::Null));
        assert_eq!(code(bson!({ "$month": "$s" })), 16006);
        assert_eq!(
            code(bson!({ "$hour": { "date": "$d", "timezone": "Europe/Paris" } })),
            115
        );
    }

    #[test]
    fn date_to_string_formats_like_mongodb() {
        assert_eq!(
            ok(bson!({ "$dateToString": { "date": "$d" } })),
            Some(bson!("2021-03-04T05:06:07.089Z"))
        );
        assert_eq!(
            ok(
                bson!({ "$dateToString": { "date": "$d", "format": "%Y/%m/%d %j %w %U %% %H:%M:%S.%L" } })
            ),
            Some(bson!("2021/03/04 063 5 09 % 05:06:07.089"))
        );
        assert_eq!(
            ok(
                bson!({ "$dateToString": { "date": "$d", "format": "%H:%M %z", "timezone": "-0130" } })
            ),
            Some(bson!("03:36 -0130"))
        );
        assert_eq!(
            ok(bson!({ "$dateToString": { "date": "$n", "onNull": "none" } })),
            Some(bson!("none"))
        );
        assert_eq!(
            ok(bson!({ "$dateToString": { "date": "$missing" } })),
            Some(Bson::Null)
        );
        assert_eq!(
            code(bson!({ "$dateToString": { "date": "$d", "format": "%Q" } })),
            18536
        );
        assert_eq!(code(bson!({ "$dateToString": { "format": "%Y" } })), 18628);
        assert_eq!(
            code(bson!({ "$dateToString": { "date": "$d", "format": 5 } })),
            18533
        );
    }

    #[test]
    fn date_trunc_floors_to_the_unit_and_bin() {
        let at = |s: &str| {
            Bson::DateTime(bson::DateTime::from_millis(
                parse_date_string(s).expect("date"),
            ))
        };
        assert_eq!(
            ok(bson!({ "$dateTrunc": { "date": "$d", "unit": "day" } })),
            Some(at("2021-03-04"))
        );
        assert_eq!(
            ok(bson!({ "$dateTrunc": { "date": "$d", "unit": "month" } })),
            Some(at("2021-03-01"))
        );
        assert_eq!(
            ok(bson!({ "$dateTrunc": { "date": "$d", "unit": "quarter" } })),
            Some(at("2021-01-01"))
        );
        assert_eq!(
            ok(bson!({ "$dateTrunc": { "date": "$d", "unit": "year" } })),
            Some(at("2021-01-01"))
        );
        assert_eq!(
            ok(bson!({ "$dateTrunc": { "date": "$d", "unit": "hour", "binSize": 2 } })),
            Some(at("2021-03-04T04:00:00Z"))
        );
        // Thursday the 4th: the week starting Sunday began on the 28th of February.
        assert_eq!(
            ok(bson!({ "$dateTrunc": { "date": "$d", "unit": "week" } })),
            Some(at("2021-02-28"))
        );
        assert_eq!(
            ok(bson!({ "$dateTrunc": { "date": "$d", "unit": "week", "startOfWeek": "monday" } })),
            Some(at("2021-03-01"))
        );
        assert_eq!(
            ok(bson!({ "$dateTrunc": { "date": "$n", "unit": "day" } })),
            Some(Bson::Null)
        );
        assert_eq!(
            code(bson!({ "$dateTrunc": { "date": "$d", "unit": "fortnight" } })),
            5439014
        );
        assert_eq!(code(bson!({ "$dateTrunc": { "date": "$d" } })), 5439010);
    }
}
