//! Calendar arithmetic for the date expressions and conversions: the parts of a date
//! (`$year` … `$week`), `$dateToString` formats, `$dateTrunc` bins, fixed UTC offsets and the
//! date strings `$toDate` accepts. A leaf below `expression` and `operators`: plain values in,
//! plain values out, no expression trees.

use crate::error::{Error, Result};
use crate::value;
use bson::Bson;
#[cfg(test)]
use bson::Document;
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};

/// A part of a date, as the operator of the same name returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
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

/// `$dateToString`'s format when none is given, in UTC and at another offset.
pub(crate) const DEFAULT_FORMAT_UTC: &str = "%Y-%m-%dT%H:%M:%S.%LZ";
pub(crate) const DEFAULT_FORMAT_OFFSET: &str = "%Y-%m-%dT%H:%M:%S.%L";

/// Milliseconds since the epoch of a value usable as a date (date, timestamp, ObjectId).
pub(crate) fn date_millis(v: &Bson) -> Option<i64> {
    match v {
        Bson::DateTime(d) => Some(d.timestamp_millis()),
        Bson::Timestamp(t) => Some(t.time as i64 * 1000),
        Bson::ObjectId(o) => Some(o.timestamp().timestamp_millis()),
        _ => None,
    }
}

/// The milliseconds of a date operand, or MongoDB's error for a value that is not a date.
pub(crate) fn require_date(v: &Bson) -> Result<i64> {
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

/// A time zone name as minutes east of UTC: UTC's names and fixed offsets (`+05:30`,
/// `-0130`); named zones are refused as unsupported.
pub(crate) fn parse_offset(s: &str) -> Result<i64> {
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

/// The calendar date and time `ms` milliseconds after the epoch.
pub(crate) fn naive(ms: i64) -> Result<NaiveDateTime> {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|d| d.naive_utc())
        .ok_or_else(|| Error::bad_value(format!("date out of range: {ms}")))
}

/// The value of one part of a date.
pub(crate) fn part_value(part: Part, t: &NaiveDateTime) -> i64 {
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

/// Days from Sunday for a day name ("monday", "mon", any case).
pub(crate) fn day_of_week_from_name(s: &str) -> Option<i64> {
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

/// `$dateTrunc` of the local time `local_ms` to `bin` `unit`s, weeks starting `week_start` days
/// after Sunday.
pub(crate) fn truncate(local_ms: i64, unit: &str, bin: i64, week_start: i64) -> Result<i64> {
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

/// Refuse a `$dateToString` format with an unknown `%` specifier.
pub(crate) fn validate_format(format: &str) -> Result<()> {
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
pub(crate) fn parts_of(ms: i64) -> Document {
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

    // 2021-03-04T05:06:07.089Z, a Thursday.
    const T: i64 = 1_614_834_367_089;

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
    fn date_strings_parse_with_and_without_offsets() {
        assert_eq!(parse_date_string("2021-03-04T05:06:07.089Z"), Some(T));
        assert_eq!(parse_date_string("2021-03-04T06:06:07.089+01:00"), Some(T));
        assert_eq!(parse_date_string("1970-01-02"), Some(86_400_000));
        assert_eq!(parse_date_string("not a date"), None);
    }
}
