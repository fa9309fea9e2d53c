//! A warning for devices the memory headroom excludes by a hair.
//!
//! In: a model's memory (MiB), the headroom policy, and the GPUs of the pools it may use. Out: one
//! `memory-headroom-margin` warning per (GPU, device) that would fit the model without the
//! headroom's last few percent, naming the device and the margin. A plan that silently loses a
//! `1g.10gb` to a `memory: 10GB` is the reason: the planner then uses bigger devices (issue 14:
//! 17 → 19 GPUs on a benchmark scenario) and nothing says why.
//!
//! [`usable_mib`], the memory a device offers after the headroom, is the one rule that
//! `spec::validate`, the planner, its bounds and the verifier use (`plan::rules` re-exports it).

use crate::catalog::GpuModel;
use crate::diagnostics::{Diagnostic, Span, codes};

/// Memory a tenant may use on a device (a whole GPU or a MIG instance) of `mib` NVML MiB,
/// after `policy.memoryHeadroom` (validated to lie in 0–0.5; clamped here to 0–1 so that the
/// result is never negative whatever the caller passes).
pub fn usable_mib(mib: u64, headroom: f64) -> f64 {
    mib as f64 * (1.0 - headroom.clamp(0.0, 1.0))
}

/// Exclusions by less than this share of the usable memory are reported.
pub(super) const NEAR_MISS: f64 = 0.03;

/// The warnings for one model. `gpus` may repeat a GPU (several pools); each is judged once.
pub(super) fn near_misses(
    model: &str,
    memory_mib: u64,
    headroom: f64,
    gpus: &[&GpuModel],
    span: &Span,
) -> Vec<Diagnostic> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for gpu in gpus {
        if seen.contains(&gpu.id.as_str()) {
            continue;
        }
        seen.push(&gpu.id);
        let devices = std::iter::once(("a whole GPU".to_owned(), gpu.memory_mib))
            .chain(gpu.mig.iter().flat_map(|m| &m.profiles).map(|p| (format!("`{}`", p.name), p.memory_mib)));
        for (device, mib) in devices {
            let usable = usable_mib(mib, headroom);
            let need = memory_mib as f64;
            if need > usable && need <= usable * (1.0 + NEAR_MISS) && need <= mib as f64 {
                let margin = (need - usable) / usable * 100.0;
                out.push(
                    Diagnostic::warning(
                        codes::MEMORY_HEADROOM_MARGIN,
                        format!(
                            "model `{model}` misses {device} of `{}` by {margin:.2}%: it needs {memory_mib} MiB, {usable:.0} MiB are usable after the {:.0}% memory headroom",
                            gpu.id,
                            headroom * 100.0
                        ),
                    )
                    .at(span.clone(), "just above the usable memory")
                    .with_help("if the figure is generous, lower `memory` a little; or lower `policy.memoryHeadroom`"),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Span, near_misses};
    use crate::catalog::Catalog;
    use crate::diagnostics::FileId;

    #[test]
    fn warns_when_the_headroom_excludes_a_profile_by_a_hair() {
        let catalog = Catalog::builtin();
        let a100 = catalog.get("A100-SXM4-80GB").expect("in the catalog");
        let span = Span::new(FileId(0), 0..0);
        // 1g.10gb (and 1g.10gb+me): 9728 MiB, 98% usable = 9533.4; `memory: 10GB` (9537 MiB)
        // misses them by 0.04%.
        let d = near_misses("asr", 9537, 0.02, &[a100, a100], &span);
        assert_eq!(d.len(), 2, "{:?}", d.iter().map(|d| &d.message).collect::<Vec<_>>());
        assert!(d[0].message.contains("`1g.10gb`") && d[0].message.contains("0.04%"), "{}", d[0].message);
        assert!(near_misses("asr", 9000, 0.02, &[a100], &span).is_empty(), "fits");
        assert!(near_misses("asr", 11000, 0.02, &[a100], &span).is_empty(), "far above");
    }
}
