//! The `changePolicy` block: how a re-plan treats the plan committed in the output directory
//! (day 2). Checked here, apart from the rest of the manifest, and called from one line of
//! [`super::validate`].
//!
//! In: the raw [`crate::manifest::ChangePolicy`] (or none). Out: a [`ChangePolicy`] with defaults
//! applied, or diagnostics for values out of range.

use serde::Serialize;

use super::error;
use crate::diagnostics::{Diagnostics, codes};
use crate::manifest::{ChangePolicy as Raw, Sp};

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
    let whole = |n: &i128| u32::try_from(*n).ok().filter(|n| *n >= 1);
    let gpus = raw.reoptimize_when_saving_gpus.as_ref();
    out.reoptimize_when_saving_gpus = in_range(diags, gpus, &SAVING_GPUS, whole);
    let cost = raw.reoptimize_when_saving_cost_per_hour.as_ref();
    out.reoptimize_when_saving_cost_per_hour =
        in_range(diags, cost, &SAVING_COST, |c: &f64| Some(*c).filter(|c| c.is_finite() && *c > 0.0));
    out.max_repartitions = in_range(diags, raw.max_repartitions.as_ref(), &MAX_REPARTITIONS, whole);
    out
}

/// What a bounded field of the block is called, its bound in words and the hint when a value
/// is out of it.
struct Bound {
    key: &'static str,
    bound: &'static str,
    help: &'static str,
}

const SAVING_GPUS: Bound = Bound {
    key: "reoptimizeWhenSavingGpus",
    bound: "at least 1",
    help: "give a whole number of GPUs, 1 or more, or leave the field out to never re-partition only to save",
};
const SAVING_COST: Bound = Bound {
    key: "reoptimizeWhenSavingCostPerHour",
    bound: "above 0",
    help: "give a cost per hour above 0, in the unit of the pools' `costPerGpuHour`",
};
const MAX_REPARTITIONS: Bound = Bound {
    key: "maxRepartitions",
    bound: "at least 1",
    help: "give a whole number of nodes, 1 or more, or leave the field out for no bound",
};

/// A field of the block, when `accept` takes its value; else an `invalid-value` error that
/// says the field's bound and hint.
fn in_range<T: std::fmt::Display, V>(
    diags: &mut Diagnostics,
    value: Option<&Sp<T>>,
    field: &Bound,
    accept: impl Fn(&T) -> Option<V>,
) -> Option<V> {
    let v = value?;
    let out = accept(&v.value);
    if out.is_none() {
        let message = format!("`changePolicy.{}` is {}; it must be {}", field.key, v.value, field.bound);
        diags.push(error(codes::INVALID_VALUE, &v.span, message, "out of range", field.help));
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
        let messages: Vec<&str> = d.iter().map(|x| x.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "`changePolicy.reoptimizeWhenSavingGpus` is 0; it must be at least 1",
                "`changePolicy.reoptimizeWhenSavingCostPerHour` is -1; it must be above 0",
                "`changePolicy.maxRepartitions` is 0; it must be at least 1",
            ]
        );
        assert_eq!(p.reoptimize_when_saving_gpus, None);
    }
}
