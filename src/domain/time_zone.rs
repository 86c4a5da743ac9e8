//! The site's time zone (Admin → Settings): instants are stored in UTC and shown to readers and
//! editors in this zone, and a time an editor types (a publication time) is read in it. Named
//! by its IANA name (`Europe/Paris`, `America/New_York`), with daylight saving time from the tz
//! database (`chrono-tz`), so "09:00 on the day the clocks change" means what the editor meant.

use std::fmt;
use std::str::FromStr;

use chrono::{NaiveDateTime, Offset, TimeZone as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An IANA time zone; UTC by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeZone(chrono_tz::Tz);

/// Why a time zone name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("“{0}” is not a time zone name; use one like Europe/Paris, America/New_York or UTC")]
pub struct UnknownTimeZone(pub String);

impl Default for TimeZone {
    fn default() -> Self {
        TimeZone(chrono_tz::UTC)
    }
}

impl TimeZone {
    pub fn utc() -> TimeZone {
        TimeZone::default()
    }

    /// The zone named `name` (an IANA name, as written in the tz database; surrounding spaces
    /// ignored).
    pub fn parse(name: &str) -> Result<TimeZone, UnknownTimeZone> {
        chrono_tz::Tz::from_str(name.trim())
            .map(TimeZone)
            .map_err(|_| UnknownTimeZone(name.trim().chars().take(60).collect()))
    }

    /// Whether this is UTC (the default).
    pub fn is_utc(&self) -> bool {
        *self == TimeZone::utc()
    }

    /// The IANA name (`Europe/Paris`).
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// `at` as a wall-clock time in this zone.
    pub fn local(&self, at: bson::DateTime) -> chrono::DateTime<chrono_tz::Tz> {
        at.to_chrono().with_timezone(&self.0)
    }

    /// `at` formatted with a `chrono` format string, in this zone.
    pub fn format(&self, at: bson::DateTime, format: &str) -> String {
        self.local(at).format(format).to_string()
    }

    /// The zone's abbreviation at `at` (`CET`, `CEST`, `EST`, `UTC`), or its offset (`+0530`)
    /// where the tz database has no letters for it: what a time shown to people ends with.
    pub fn abbreviation(&self, at: bson::DateTime) -> String {
        let local = self.local(at);
        let abbreviation = local.format("%Z").to_string();
        if abbreviation.starts_with(['+', '-']) {
            let seconds = local.offset().fix().local_minus_utc();
            let sign = if seconds < 0 { '-' } else { '+' };
            let minutes = seconds.unsigned_abs() / 60;
            format!("UTC{sign}{:02}:{:02}", minutes / 60, minutes % 60)
        } else {
            abbreviation
        }
    }

    /// `at` as "YYYY-MM-DD HH:MM ZONE", the form times take in the admin.
    pub fn minute_label(&self, at: bson::DateTime) -> String {
        format!(
            "{} {}",
            self.format(at, "%Y-%m-%d %H:%M"),
            self.abbreviation(at)
        )
    }

    /// The instant a wall-clock time in this zone names. A time the clocks skip (the hour lost
    /// when daylight saving starts) is taken as the same moment an hour later (as a wall clock
    /// reads it after the jump); a time that happens twice (the hour repeated when it ends) is
    /// the first of the two.
    pub fn instant(&self, local: NaiveDateTime) -> bson::DateTime {
        let resolved = match self.0.from_local_datetime(&local) {
            chrono::LocalResult::Single(t) => t,
            chrono::LocalResult::Ambiguous(first, _) => first,
            chrono::LocalResult::None => {
                // Read with the offset in force before the jump (a day earlier: transitions
                // are months apart), as a wall clock that had not been put forward yet would.
                let before = local - chrono::Duration::hours(24);
                let offset = self.0.offset_from_utc_datetime(&before).fix();
                let utc = local - chrono::Duration::seconds(i64::from(offset.local_minus_utc()));
                chrono::DateTime::<chrono::Utc>::from_naive_utc_and_offset(utc, chrono::Utc)
                    .with_timezone(&self.0)
            }
        };
        bson::DateTime::from_millis(resolved.timestamp_millis())
    }
}

impl fmt::Display for TimeZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for TimeZone {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// A stored name that is no longer a zone (edited in the database by hand) reads as UTC rather
/// than making the settings unreadable: every page reads them.
impl<'de> Deserialize<'de> for TimeZone {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(TimeZone::parse(&name).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> bson::DateTime {
        let t = NaiveDate::from_ymd_opt(y, m, d)
            .and_then(|d| d.and_hms_opt(h, min, 0))
            .expect("valid");
        bson::DateTime::from_millis(t.and_utc().timestamp_millis())
    }

    fn local(y: i32, m: u32, d: u32, h: u32, min: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, m, d)
            .and_then(|d| d.and_hms_opt(h, min, 0))
            .expect("valid")
    }

    #[test]
    fn times_are_shown_with_the_zones_summer_and_winter_offsets() {
        let paris = TimeZone::parse("Europe/Paris").expect("a zone");
        assert_eq!(
            paris.minute_label(utc(2026, 1, 15, 12, 0)),
            "2026-01-15 13:00 CET"
        );
        assert_eq!(
            paris.minute_label(utc(2026, 7, 15, 12, 0)),
            "2026-07-15 14:00 CEST"
        );
        assert_eq!(
            TimeZone::utc().minute_label(utc(2026, 7, 15, 12, 0)),
            "2026-07-15 12:00 UTC"
        );
        let kolkata = TimeZone::parse("Asia/Kolkata").expect("a zone");
        assert_eq!(
            kolkata.minute_label(utc(2026, 7, 15, 12, 0)),
            "2026-07-15 17:30 IST"
        );
    }

    #[test]
    fn typed_times_are_read_in_the_zone_across_daylight_saving_changes() {
        let paris = TimeZone::parse("Europe/Paris").expect("a zone");
        assert_eq!(
            paris.instant(local(2026, 1, 15, 13, 0)),
            utc(2026, 1, 15, 12, 0)
        );
        // 29 March 2026: 02:00 → 03:00; 02:30 does not exist and means 03:30 CEST (01:30 UTC).
        assert_eq!(
            paris.instant(local(2026, 3, 29, 2, 30)),
            utc(2026, 3, 29, 1, 30)
        );
        // 25 October 2026: 03:00 → 02:00; 02:30 happens twice; the first is 00:30 UTC.
        assert_eq!(
            paris.instant(local(2026, 10, 25, 2, 30)),
            utc(2026, 10, 25, 0, 30)
        );
        // Every shown minute reads back as the same instant.
        for at in [utc(2026, 1, 15, 12, 0), utc(2026, 7, 15, 12, 0)] {
            let shown = paris.local(at).naive_local();
            assert_eq!(paris.instant(shown), at);
        }
    }

    #[test]
    fn unknown_names_are_refused_and_a_bad_stored_name_reads_as_utc() {
        assert!(TimeZone::parse("Mars/Olympus_Mons").is_err());
        assert!(TimeZone::parse("").is_err());
        assert_eq!(TimeZone::parse(" UTC ").expect("a zone"), TimeZone::utc());
        let stored: TimeZone = serde_json::from_str("\"Nowhere/Land\"").expect("reads");
        assert_eq!(stored, TimeZone::utc());
        let named = TimeZone::parse("America/New_York").expect("a zone");
        assert_eq!(
            serde_json::to_string(&named).expect("writes"),
            "\"America/New_York\""
        );
    }
}
