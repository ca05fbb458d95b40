//! Durations in configuration: `500ms`, `30s`, `2m`, `1h`, `90d`, or a bare number of seconds.

use std::time::Duration;

/// Parses a duration as people write them in environment variables and flags.
///
/// # Errors
///
/// A message saying what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 500ms, 30s, 2m, 1h, 90d)"))?;
    let seconds = match unit.trim() {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        "d" => number * 86_400.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, m, h or d"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is out of range"))
}

/// `--run-timeout`: a day when not given, as on the official server; `0` for no limit.
pub(crate) fn run_timeout(given: Option<Duration>) -> Option<Duration> {
    match given {
        None => Some(mostrador_worker::config::RUN_TIMEOUT_DEFAULT),
        Some(limit) if limit.is_zero() => None,
        limit => limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5 days").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn runs_time_out_after_a_day_unless_the_operator_says_otherwise() {
        assert_eq!(run_timeout(None), Some(Duration::from_secs(86_400)));
        assert_eq!(run_timeout(Some(Duration::ZERO)), None, "0: no limit");
        assert_eq!(
            run_timeout(Some(Duration::from_secs(60))),
            Some(Duration::from_secs(60))
        );
    }
}
