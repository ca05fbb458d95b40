//! Five-field cron schedules, read on the clocks of an IANA time zone.

use std::collections::BTreeSet;

use chrono::{
    DateTime, Datelike, Duration, DurationRound, LocalResult, NaiveDate, NaiveDateTime, TimeZone,
    Timelike, Utc,
};
use chrono_tz::Tz;

/// A parsed five-field schedule: minute, hour, day of month, month, day of week, read in a time
/// zone ([`Schedule::next_after`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minutes: BTreeSet<u32>,
    hours: BTreeSet<u32>,
    days: BTreeSet<u32>,
    months: BTreeSet<u32>,
    weekdays: BTreeSet<u32>,
    /// Day of month and day of week both restricted: either matches (cron's rule).
    either_day: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Schedule {
    /// `"*/15 6-20 * * mon-fri"` and the like: `*`, numbers, names of months and weekdays,
    /// ranges `a-b`, lists `a,b`, steps `*/n` and `a-b/n`; Sunday is 0 or 7.
    ///
    /// # Errors
    ///
    /// What is wrong, for the caller to read.
    pub fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(format!(
                "a schedule has five fields (minute hour day-of-month month day-of-week), not {}",
                fields.len()
            ));
        };
        let mut weekdays = field(weekday, 0, 7, &WEEKDAYS, 0, "day of week")?;
        if weekdays.remove(&7) {
            weekdays.insert(0);
        }
        let schedule = Self {
            minutes: field(minute, 0, 59, &[], 0, "minute")?,
            hours: field(hour, 0, 23, &[], 0, "hour")?,
            days: field(day, 1, 31, &[], 1, "day of month")?,
            months: field(month, 1, 12, &MONTHS, 1, "month")?,
            weekdays,
            either_day: day != "*" && weekday != "*",
        };
        if schedule.next_after(Utc::now(), Tz::UTC).is_none() {
            return Err(format!("the schedule {text:?} never fires"));
        }
        Ok(schedule)
    }

    fn day_matches(&self, at: NaiveDateTime) -> bool {
        let day = self.days.contains(&at.day());
        let weekday = self.weekdays.contains(&at.weekday().num_days_from_sunday());
        if self.either_day {
            day || weekday
        } else {
            day && weekday
        }
    }

    /// The first minute strictly after `after` that the schedule names on the clocks of `zone`
    /// (`None` if none within five years). A local time the clocks skip (the hour lost when
    /// summer time starts) does not happen; one they show twice (the hour repeated when it ends)
    /// happens once, the first time.
    pub fn next_after(&self, after: DateTime<Utc>, zone: Tz) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&zone).naive_local();
        let mut at = local.duration_trunc(Duration::minutes(1)).ok()? + Duration::minutes(1);
        let limit = local + Duration::days(5 * 366);
        while at <= limit {
            if !self.months.contains(&at.month()) {
                let (year, month) = if at.month() == 12 {
                    (at.year() + 1, 1)
                } else {
                    (at.year(), at.month() + 1)
                };
                at = NaiveDate::from_ymd_opt(year, month, 1)?.and_hms_opt(0, 0, 0)?;
            } else if !self.day_matches(at) {
                at = (at + Duration::days(1))
                    .duration_trunc(Duration::days(1))
                    .ok()?;
            } else if !self.hours.contains(&at.hour()) {
                at = (at + Duration::hours(1))
                    .duration_trunc(Duration::hours(1))
                    .ok()?;
            } else if !self.minutes.contains(&at.minute()) {
                at += Duration::minutes(1);
            } else {
                match zone.from_local_datetime(&at) {
                    LocalResult::Single(time) | LocalResult::Ambiguous(time, _)
                        if time.to_utc() > after =>
                    {
                        return Some(time.to_utc());
                    }
                    _ => at += Duration::minutes(1),
                }
            }
        }
        None
    }
}

/// The time zone an IANA name (`Europe/Madrid`) names; none is UTC.
///
/// # Errors
///
/// A name the tz database does not know, as the official server words it.
pub fn zone(name: Option<&str>) -> Result<Tz, String> {
    match name {
        None => Ok(Tz::UTC),
        Some(name) => name.parse().map_err(|_| {
            format!(
                "Invalid timezone: '{name}'. Use IANA timezone format (e.g. 'America/New_York')."
            )
        }),
    }
}

/// One field: its values within `min..=max` (`names[i]` stands for `i + first_name`).
fn field(
    text: &str,
    min: u32,
    max: u32,
    names: &[&str],
    first_name: u32,
    what: &str,
) -> Result<BTreeSet<u32>, String> {
    let value = |token: &str| -> Result<u32, String> {
        let lower = token.to_ascii_lowercase();
        names
            .iter()
            .position(|name| *name == lower)
            .map(|i| i as u32 + first_name)
            .or_else(|| token.parse().ok())
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| format!("{what}: {token:?} is not a value from {min} to {max}"))
    };
    let mut values = BTreeSet::new();
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (
                range,
                step.parse::<u32>()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("{what}: the step {step:?} is not a positive number"))?,
            ),
            None => (item, 1),
        };
        let (low, high) = match range {
            "*" => (min, max),
            _ => match range.split_once('-') {
                Some((low, high)) => (value(low)?, value(high)?),
                None if item.contains('/') => (value(range)?, max),
                None => {
                    let one = value(range)?;
                    (one, one)
                }
            },
        };
        if low > high {
            return Err(format!("{what}: the range {range:?} is backwards"));
        }
        values.extend((low..=high).step_by(step as usize));
    }
    Ok(values)
}
