//! Measured per-profile throughput: the file format users benchmark their models into, and
//! importers for published profiles (ParvaGPU).
//!
//! In: CSV text. Out: [`MeasuredPoint`]s, or diagnostics with line and column.
//!
//! NOT WRITTEN YET: the parser below rejects every file; the measured-profiles issue fills it in.

use crate::diagnostics::{Diagnostic, Diagnostics, Sources, Span, codes};
use crate::spec::MeasuredPoint;

/// Parses a measured-points CSV file (format: `docs/measurements.md`).
pub fn parse_csv(sources: &mut Sources, name: &str, text: &str) -> Result<Vec<MeasuredPoint>, Diagnostics> {
    let file = sources.add(name, text);
    Err(Diagnostics::from_iter([Diagnostic::error(
        codes::INVALID_VALUE,
        "measured-point files are not supported yet",
    )
    .at(Span::new(file, 0..0), "this file")]))
}
