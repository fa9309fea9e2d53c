//! Strict parsing of quantities: memory sizes, durations and request rates.
//!
//! A quantity is a decimal number (digits, an optional fraction, no exponent, no sign) directly
//! followed by a unit. Binary memory units (`KiB`, `MiB`, `GiB`, `TiB`) are powers of 1024;
//! decimal ones (`KB`, `MB`, `GB`, `TB`) are powers of 1000, as on GPU data sheets. Everything
//! else is an error that says what was expected.

/// Why a quantity did not parse: a message and a hint, both ready for a diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct UnitError {
    pub message: String,
    pub help: String,
    /// The quantity is well formed but its value is out of range (zero, absurdly large).
    pub out_of_range: bool,
}

impl UnitError {
    fn syntax(message: String, help: String) -> Self {
        Self { message, help, out_of_range: false }
    }

    fn range(message: String, help: impl Into<String>) -> Self {
        Self { message, help: help.into(), out_of_range: true }
    }
}

const MEMORY_UNITS: &[(&str, f64)] = &[
    ("KiB", 1024.0),
    ("MiB", 1_048_576.0),
    ("GiB", 1_073_741_824.0),
    ("TiB", 1_099_511_627_776.0),
    ("KB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("TB", 1e12),
];
const DURATION_UNITS: &[(&str, f64)] = &[("us", 0.001), ("ms", 1.0), ("s", 1000.0), ("m", 60_000.0)];
const RATE_UNITS: &[(&str, f64)] = &[("rps", 1.0), ("rpm", 1.0 / 60.0)];

/// Largest memory size accepted: 1 PiB, in MiB.
pub(super) const MAX_MEMORY_MIB: f64 = 1_073_741_824.0;
/// Longest duration accepted: one day, in milliseconds.
pub(super) const MAX_DURATION_MS: f64 = 86_400_000.0;
/// Highest rate accepted, in requests per second.
pub(super) const MAX_RATE_RPS: f64 = 1e9;

/// Parses a memory size into MiB, rounded up.
pub(super) fn memory_mib(text: &str) -> Result<u64, UnitError> {
    let bytes = quantity(text, "memory size", MEMORY_UNITS, "`10GiB`, `9600MiB` or `12GB`")?;
    let zero = "give the device memory one replica needs, such as `10GiB`";
    let over =
        (MAX_MEMORY_MIB, "is larger than any GPU (more than 1 PiB)", "check the unit: `GiB`, not `TiB`");
    Ok(in_range(text, (bytes / 1_048_576.0).ceil(), "memory", zero, over)? as u64)
}

/// Parses a duration into milliseconds.
pub(super) fn duration_ms(text: &str) -> Result<f64, UnitError> {
    let ms = quantity(text, "duration", DURATION_UNITS, "`300ms` or `1.5s`")?;
    let over = (MAX_DURATION_MS, "is longer than a day", "check the unit: `ms`, not `m`");
    in_range(text, ms, "duration", "give a positive duration, such as `300ms`", over)
}

/// Parses a request rate into requests per second.
pub(super) fn rate_rps(text: &str) -> Result<f64, UnitError> {
    let rps = quantity(text, "request rate", RATE_UNITS, "`40rps` or `600rpm`")?;
    let over = (MAX_RATE_RPS, "is above a billion requests per second", "check the number and the unit");
    in_range(text, rps, "rate", "give a positive rate, such as `40rps`", over)
}

/// Refuses a parsed `value` of `text` that is zero (`zero_help` says what to give) or above
/// `over.0` (`{what} `{text}` {over.1}`, with `over.2` as the hint).
fn in_range(
    text: &str,
    value: f64,
    what: &str,
    zero_help: &str,
    over: (f64, &str, &str),
) -> Result<f64, UnitError> {
    if value <= 0.0 {
        return Err(UnitError::range(format!("{what} `{text}` is zero"), zero_help));
    }
    let (max, too_large, help) = over;
    if value > max {
        return Err(UnitError::range(format!("{what} `{text}` {too_large}"), help));
    }
    Ok(value)
}

/// Splits `text` into a strict decimal number and a unit from `units`; returns number × factor.
fn quantity(text: &str, what: &str, units: &[(&str, f64)], examples: &str) -> Result<f64, UnitError> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit_names = units.iter().map(|(u, _)| format!("`{u}`")).collect::<Vec<_>>().join(", ");
    if number.is_empty() {
        return Err(UnitError::syntax(
            format!("`{text}` is not a {what}"),
            format!("write a number followed by a unit, such as {examples}"),
        ));
    }
    let well_formed = {
        let mut parts = number.split('.');
        let whole = parts.next().unwrap_or("");
        let fraction = parts.next();
        !whole.is_empty() && parts.next().is_none() && fraction.is_none_or(|f| !f.is_empty())
    };
    if !well_formed || number.len() > 32 {
        return Err(UnitError::syntax(
            format!("`{number}` in `{text}` is not a plain decimal number"),
            format!("write digits with an optional fraction, such as {examples}"),
        ));
    }
    if unit.is_empty() {
        return Err(UnitError::syntax(
            format!("{what} `{text}` has no unit"),
            format!("add a unit ({unit_names}), such as {examples}"),
        ));
    }
    let Some((_, factor)) = units.iter().find(|(u, _)| *u == unit) else {
        let hint = unit_hint(unit, units);
        return Err(UnitError::syntax(
            format!("unknown {what} unit `{unit}` in `{text}`"),
            match hint {
                Some(h) => format!("did you mean `{number}{h}`? units are {unit_names}"),
                None => format!("units are {unit_names} (no space between number and unit)"),
            },
        ));
    };
    let value: f64 = number.parse().map_err(|_| {
        UnitError::syntax(
            format!("`{number}` in `{text}` is not a number"),
            format!("write a number such as {examples}"),
        )
    })?;
    let scaled = value * factor;
    if !scaled.is_finite() {
        return Err(UnitError::range(
            format!("{what} `{text}` is too large"),
            format!("write a realistic value, such as {examples}"),
        ));
    }
    Ok(scaled)
}

/// The unit the user most likely meant: Kubernetes spellings (`Gi`), wrong case, stray spaces.
fn unit_hint<'a>(unit: &str, units: &'a [(&'a str, f64)]) -> Option<&'a str> {
    let trimmed = unit.trim();
    let kube = format!("{trimmed}B");
    units
        .iter()
        .map(|(u, _)| *u)
        .find(|u| *u == trimmed || *u == kube || u.eq_ignore_ascii_case(trimmed))
        .or_else(|| crate::diagnostics::nearest(trimmed, units.iter().map(|(u, _)| *u)))
}

#[cfg(test)]
mod tests {
    use super::{duration_ms, memory_mib, rate_rps};

    #[test]
    fn memory_units_are_binary_or_decimal() {
        assert_eq!(memory_mib("10GiB"), Ok(10240));
        assert_eq!(memory_mib("9600MiB"), Ok(9600));
        assert_eq!(memory_mib("12GB"), Ok(11445)); // 12e9 / 2^20 = 11444.09, rounded up
        assert_eq!(memory_mib("1.5GiB"), Ok(1536));
    }

    #[test]
    fn bare_numbers_and_unknown_units_are_rejected_with_hints() {
        let e = memory_mib("10").expect_err("no unit");
        assert!(e.message.contains("has no unit"), "{e:?}");
        let e = memory_mib("10Gi").expect_err("kube unit");
        assert!(e.help.contains("`10GiB`"), "{e:?}");
        let e = memory_mib("10 GiB").expect_err("space");
        assert!(e.help.contains("`10GiB`"), "{e:?}");
        assert!(memory_mib("1e309GiB").is_err());
        assert!(memory_mib("-1GiB").is_err());
        assert!(memory_mib("1..2GiB").is_err());
        assert!(memory_mib("0GiB").is_err());
        assert!(memory_mib("99999999999999999999GiB").is_err());
    }

    #[test]
    fn durations_and_rates_convert() {
        assert_eq!(duration_ms("300ms"), Ok(300.0));
        assert_eq!(duration_ms("1.5s"), Ok(1500.0));
        assert_eq!(duration_ms("250us"), Ok(0.25));
        assert_eq!(rate_rps("40rps"), Ok(40.0));
        assert_eq!(rate_rps("600rpm"), Ok(10.0));
        assert!(duration_ms("300").is_err());
        assert!(rate_rps("40").is_err());
        assert!(duration_ms("2d").is_err());
    }
}
