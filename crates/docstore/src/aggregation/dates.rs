//! Date expressions: parts of a date (`$year` … `$week`), `$dateToString` and `$dateTrunc`, in
//! UTC or a fixed offset ("+05:30"); named time zones other than UTC are refused as unsupported.

use super::expression::{Expression, Scope};
use crate::error::{Error, Result};
use crate::printing::{fmt_document, fmt_value, nullish, type_of};
use crate::value::{self, Number};
use bson::Bson;
#[cfg(test)]
use bson::Document;
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Year,
    Month,
    DayOfMonth,
    DayOfWeek,
    DayOfYear,
    Hour,
    Minute,
    Second,
    Millisecond,
    Week,
    IsoWeek,
    IsoWeekYear,
    IsoDayOfWeek,
}

#[derive(Debug, Clone)]
pub enum DateOp {
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

const DEFAULT_FORMAT_UTC: &str = "%Y-%m-%dT%H:%M:%S.%LZ";
const DEFAULT_FORMAT_OFFSET: &str = "%Y-%m-%dT%H:%M:%S.%L";

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

/// Milliseconds since the epoch of a value usable as a date (date, timestamp, ObjectId).
fn date_millis(v: &Bson) -> Option<i64> {
    match v {
        Bson::DateTime(d) => Some(d.timestamp_millis()),
        Bson::Timestamp(t) => Some(t.time as i64 * 1000),
        Bson::ObjectId(o) => Some(o.timestamp().timestamp_millis()),
        _ => None,
    }
}

fn require_date(v: &Bson) -> Result<i64> {
    date_millis(v).ok_or_else(|| {
        Error::location(
            16006,
            format!(
                "can't convert from BSON type {} to Date",
                value::type_name(v)
            ),
        )
    })
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

fn parse_offset(s: &str) -> Result<i64> {
    match s {
        "UTC" | "GMT" | "Z" | "Etc/UTC" | "Etc/GMT" | "Zulu" | "Etc/Zulu" | "Universal" => {
            return Ok(0)
        }
        _ => {}
    }
    let bytes = s.as_bytes();
    if let Some(sign) = bytes.first().filter(|b| **b == b'+' || **b == b'-') {
        let digits: String = s[1..].chars().filter(|c| *c != ':').collect();
        let parsed = match digits.len() {
            2 => digits.parse::<i64>().ok().map(|h| h * 60),
            4 => match (digits[..2].parse::<i64>(), digits[2..].parse::<i64>()) {
                (Ok(h), Ok(m)) if m < 60 => Some(h * 60 + m),
                _ => None,
            },
            _ => None,
        };
        if let Some(minutes) = parsed.filter(|_| digits.chars().all(|c| c.is_ascii_digit())) {
            return Ok(if *sign == b'-' { -minutes } else { minutes });
        }
        return Err(Error::location(
            40485,
            format!("unrecognized time zone identifier: \"{s}\""),
        ));
    }
    Err(Error::not_supported(format!(
        "the time zone \"{s}\" (only UTC and fixed offsets such as \"+05:30\" are)"
    )))
}

fn naive(ms: i64) -> Result<NaiveDateTime> {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|d| d.naive_utc())
        .ok_or_else(|| Error::bad_value(format!("date out of range: {ms}")))
}

fn part_value(part: Part, t: &NaiveDateTime) -> i64 {
    match part {
        Part::Year => t.year() as i64,
        Part::Month => t.month() as i64,
        Part::DayOfMonth => t.day() as i64,
        Part::DayOfWeek => t.weekday().num_days_from_sunday() as i64 + 1,
        Part::DayOfYear => t.ordinal() as i64,
        Part::Hour => t.hour() as i64,
        Part::Minute => t.minute() as i64,
        Part::Second => t.second() as i64,
        Part::Millisecond => (t.nanosecond() / 1_000_000).min(999) as i64,
        Part::Week => week_of_year(t),
        Part::IsoWeek => t.iso_week().week() as i64,
        Part::IsoWeekYear => t.iso_week().year() as i64,
        Part::IsoDayOfWeek => t.weekday().number_from_monday() as i64,
    }
}

/// Week of the year with weeks starting on Sunday; days before the first Sunday are week 0
/// (strftime's `%U`).
fn week_of_year(t: &NaiveDateTime) -> i64 {
    let yday = t.ordinal0() as i64;
    let wday = t.weekday().num_days_from_sunday() as i64;
    (yday + 7 - wday) / 7
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

/// Days from Sunday for a day name ("monday", "mon", any case).
fn day_of_week_from_name(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let names = [
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
    ];
    names
        .iter()
        .position(|n| *n == lower || n[..3] == lower)
        .map(|i| i as i64)
}

/// MongoDB counts bins from 2000-01-01T00:00:00 in the given time zone.
const REFERENCE_MS: i64 = 946_684_800_000;

fn truncate(local_ms: i64, unit: &str, bin: i64, week_start: i64) -> Result<i64> {
    let fixed = |unit_ms: i64, reference: i64| -> i64 {
        let span = unit_ms.saturating_mul(bin);
        reference + (local_ms - reference).div_euclid(span) * span
    };
    Ok(match unit {
        "millisecond" => fixed(1, REFERENCE_MS),
        "second" => fixed(1_000, REFERENCE_MS),
        "minute" => fixed(60_000, REFERENCE_MS),
        "hour" => fixed(3_600_000, REFERENCE_MS),
        "day" => fixed(86_400_000, REFERENCE_MS),
        "week" => {
            // 2000-01-01 was a Saturday (6 days from Sunday); start from the first `week_start`
            // day on or after it.
            let days_ahead = (week_start - 6).rem_euclid(7);
            fixed(7 * 86_400_000, REFERENCE_MS + days_ahead * 86_400_000)
        }
        "month" | "quarter" | "year" => {
            let months_per_unit = match unit {
                "month" => 1,
                "quarter" => 3,
                _ => 12,
            };
            let t = naive(local_ms)?;
            let months = (t.year() as i64 - 2000) * 12 + t.month0() as i64;
            let span = months_per_unit * bin;
            let start = months.div_euclid(span) * span;
            let year = 2000 + start.div_euclid(12);
            let month = start.rem_euclid(12) + 1;
            let day = NaiveDate::from_ymd_opt(year as i32, month as u32, 1)
                .ok_or_else(|| Error::bad_value("date out of range in $dateTrunc"))?;
            day.and_hms_opt(0, 0, 0)
                .map(|d| d.and_utc().timestamp_millis())
                .ok_or_else(|| Error::bad_value("date out of range in $dateTrunc"))?
        }
        other => {
            return Err(Error::location(
                5439014,
                format!(
                    "$dateTrunc parameter 'unit' value parsing failed :: caused by :: unknown \
                     time unit value: {other}"
                ),
            ))
        }
    })
}

fn validate_format(format: &str) -> Result<()> {
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.next() {
            None => {
                return Err(Error::location(
                    18535,
                    "Unmatched '%' at end of format string",
                ))
            }
            Some(
                'd' | 'G' | 'H' | 'j' | 'L' | 'm' | 'M' | 'S' | 'w' | 'u' | 'U' | 'V' | 'Y' | 'z'
                | 'Z' | '%' | 'b' | 'B',
            ) => {}
            Some(other) => {
                return Err(Error::location(
                    18536,
                    format!("Invalid format character '%{other}' in format string"),
                ))
            }
        }
    }
    Ok(())
}

/// `$dateToString` formatting of `ms` shifted by `offset_minutes`.
pub(crate) fn format_date(ms: i64, format: &str, offset_minutes: i64) -> Result<String> {
    validate_format(format)?;
    let t = naive(ms.saturating_add(offset_minutes * 60_000))?;
    if !(0..=9999).contains(&t.year()) {
        return Err(Error::location(
            18537,
            format!(
                "$dateToString is only defined on year 0-9999, tried to use year {}",
                t.year()
            ),
        ));
    }
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let mut out = String::with_capacity(format.len() + 8);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else {
            break;
        };
        match spec {
            'd' => out.push_str(&format!("{:02}", t.day())),
            'G' => out.push_str(&format!("{:04}", t.iso_week().year())),
            'H' => out.push_str(&format!("{:02}", t.hour())),
            'j' => out.push_str(&format!("{:03}", t.ordinal())),
            'L' => out.push_str(&format!("{:03}", (t.nanosecond() / 1_000_000).min(999))),
            'm' => out.push_str(&format!("{:02}", t.month())),
            'M' => out.push_str(&format!("{:02}", t.minute())),
            'S' => out.push_str(&format!("{:02}", t.second())),
            'w' => out.push_str(&(t.weekday().num_days_from_sunday() + 1).to_string()),
            'u' => out.push_str(&t.weekday().number_from_monday().to_string()),
            'U' => out.push_str(&format!("{:02}", week_of_year(&t))),
            'V' => out.push_str(&format!("{:02}", t.iso_week().week())),
            'Y' => out.push_str(&format!("{:04}", t.year())),
            'z' => {
                let sign = if offset_minutes < 0 { '-' } else { '+' };
                let abs = offset_minutes.abs();
                out.push_str(&format!("{sign}{:02}{:02}", abs / 60, abs % 60));
            }
            'Z' => {
                let sign = if offset_minutes < 0 { '-' } else { '+' };
                out.push_str(&format!("{sign}{}", offset_minutes.abs()));
            }
            'b' => out.push_str(&MONTHS[t.month0() as usize][..3]),
            'B' => out.push_str(MONTHS[t.month0() as usize]),
            _ => out.push('%'),
        }
    }
    Ok(out)
}

/// A date in `$dateToString`'s default format, as `$toString` and `$concat` coercion print it.
pub(crate) fn format_default(ms: i64) -> Result<String> {
    format_date(ms, DEFAULT_FORMAT_UTC, 0)
}

/// Parse the date strings `$toDate`/`$convert` accept: ISO 8601 dates, with or without a time,
/// fraction and offset (no offset means UTC).
pub(crate) fn parse_date_string(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(s) {
        return Some(d.timestamp_millis());
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%d %H:%M:%S%.f%z",
        "%Y-%m-%d %H:%M:%S%.f%:z",
    ] {
        if let Ok(d) = DateTime::parse_from_str(s, fmt) {
            return Some(d.timestamp_millis());
        }
    }
    let s = s.strip_suffix('Z').unwrap_or(s);
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(d.and_utc().timestamp_millis());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc().timestamp_millis())
}

/// Evaluate a whole document of date parts, used by tests and `$dateToParts`-like helpers.
#[cfg(test)]
fn parts_of(ms: i64) -> Document {
    let t = naive(ms).expect("in range");
    let mut d = Document::new();
    for (name, part) in [
        ("year", Part::Year),
        ("month", Part::Month),
        ("dayOfMonth", Part::DayOfMonth),
        ("dayOfWeek", Part::DayOfWeek),
        ("dayOfYear", Part::DayOfYear),
        ("hour", Part::Hour),
        ("minute", Part::Minute),
        ("second", Part::Second),
        ("millisecond", Part::Millisecond),
        ("week", Part::Week),
    ] {
        d.insert(name, part_value(part, &t) as i32);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn week_counts_from_the_first_sunday() {
        // 2021-01-01 is a Friday: week 0 until Saturday 2nd, week 1 from Sunday 3rd.
        let jan = |day: u32| {
            NaiveDate::from_ymd_opt(2021, 1, day)
                .and_then(|d| d.and_hms_opt(12, 0, 0))
                .map(|d| d.and_utc().timestamp_millis())
                .expect("valid date")
        };
        assert_eq!(parts_of(jan(2)).get_i32("week").ok(), Some(0));
        assert_eq!(parts_of(jan(3)).get_i32("week").ok(), Some(1));
        assert_eq!(parts_of(jan(3)).get_i32("dayOfWeek").ok(), Some(1));
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

    #[test]
    fn date_strings_parse_with_and_without_offsets() {
        assert_eq!(parse_date_string("2021-03-04T05:06:07.089Z"), Some(T));
        assert_eq!(parse_date_string("2021-03-04T06:06:07.089+01:00"), Some(T));
        assert_eq!(parse_date_string("1970-01-02"), Some(86_400_000));
        assert_eq!(parse_date_string("not a date"), None);
    }
}
