//! The `changePolicy` block: how a re-plan treats the plan committed in the output directory
//! (day 2). Checked here, apart from the rest of the manifest, and called from one line of
//! [`super::validate`].
//!
//! In: the raw [`crate::manifest::ChangePolicy`] (or none). Out: a [`ChangePolicy`] with defaults
//! applied, or diagnostics for values out of range.

use serde::Serialize;

use super::error;
use crate::diagnostics::{Diagnostics, codes};
use crate::manifest::ChangePolicy as Raw;

pub use crate::manifest::words::ChangeMode;

/// The checked `changePolicy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangePolicy {
    pub mode: ChangeMode,
    /// Re-plan from scratch when that uses at least this many GPUs fewer than the minimal re-plan.
    pub reoptimize_when_saving_gpus: Option<u32>,
    /// Re-plan from scratch when that costs at least this much less per hour (priced pools).
    pub reoptimize_when_saving_cost_per_hour: Option<f64>,
    /// At most this many running nodes re-partitioned by one re-optimisation (`None`: no bound).
    pub max_repartitions: Option<u32>,
}

/// Checks the block; every problem is pushed to `diags`.
pub(super) fn validate(raw: Option<&Raw>, diags: &mut Diagnostics) -> ChangePolicy {
    let Some(raw) = raw else { return ChangePolicy::default() };
    let mut out = ChangePolicy {
        mode: raw.mode.as_ref().map_or(ChangeMode::Minimal, |m| m.value),
        ..Default::default()
    };
    if let Some(n) = &raw.reoptimize_when_saving_gpus {
        if (1..=i128::from(u32::MAX)).contains(&n.value) {
            out.reoptimize_when_saving_gpus = u32::try_from(n.value).ok();
        } else {
            let message =
                format!("`changePolicy.reoptimizeWhenSavingGpus` is {}; it must be at least 1", n.value);
            let help = "give a whole number of GPUs, 1 or more, or leave the field out to never re-partition only to save";
            diags.push(error(codes::INVALID_VALUE, &n.span, message, "out of range", help));
        }
    }
    if let Some(c) = &raw.reoptimize_when_saving_cost_per_hour {
        if c.value.is_finite() && c.value > 0.0 {
            out.reoptimize_when_saving_cost_per_hour = Some(c.value);
        } else {
            let message =
                format!("`changePolicy.reoptimizeWhenSavingCostPerHour` is {}; it must be above 0", c.value);
            let help = "give a cost per hour above 0, in the unit of the pools' `costPerGpuHour`";
            diags.push(error(codes::INVALID_VALUE, &c.span, message, "out of range", help));
        }
    }
    if let Some(n) = &raw.max_repartitions {
        if (1..=i128::from(u32::MAX)).contains(&n.value) {
            out.max_repartitions = u32::try_from(n.value).ok();
        } else {
            let message = format!("`changePolicy.maxRepartitions` is {}; it must be at least 1", n.value);
            let help = "give a whole number of nodes, 1 or more, or leave the field out for no bound";
            diags.push(error(codes::INVALID_VALUE, &n.span, message, "out of range", help));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{ChangeMode, ChangePolicy, Diagnostics, Raw, validate};
    use crate::diagnostics::{FileId, Span};
    use crate::manifest::Sp;

    fn sp<T>(value: T) -> Sp<T> {
        Sp { value, span: Span::new(FileId(0), 0..1) }
    }

    #[test]
    fn defaults_to_minimal_without_threshold() {
        let mut d = Diagnostics::new();
        assert_eq!(validate(None, &mut d), ChangePolicy::default());
        assert!(d.is_empty());
    }

    #[test]
    fn rejects_thresholds_out_of_range() {
        let mut d = Diagnostics::new();
        let raw = Raw {
            mode: Some(sp(ChangeMode::Full)),
            reoptimize_when_saving_gpus: Some(sp(0)),
            reoptimize_when_saving_cost_per_hour: Some(sp(-1.0)),
            max_repartitions: Some(sp(0)),
            span: None,
        };
        let p = validate(Some(&raw), &mut d);
        assert_eq!(p.mode, ChangeMode::Full);
        assert_eq!(d.iter().count(), 3);
        assert!(d.has_errors());
    }
}
