//! MIG layouts the planner may choose: every valid multiset of the usable profiles, and the
//! maximal ones (no further instance fits).
//!
//! In: a [`GpuModel`] and its usable profiles. Out: [`Layout`]s with counts per profile and the
//! exact placement from [`crate::catalog::layout::validate`], sorted by a stable key.
//!
//! Built on [`crate::catalog::layout::enumerate`]: its layouts are filtered to those using only
//! the usable profiles (no media attributes, no whole-GPU profile) and maximised again among
//! them, since a layout maximal over all profiles may lose an instance to the filter (e.g.
//! `4g.40gb` + `1g.10gb+me` + two `1g.10gb` becomes a layout with room for one more `1g.10gb`).
//! The catalog's own [`crate::catalog::layout::maximal`] cannot be filtered afterwards for the
//! same reason. Each layout's placement is re-derived with [`crate::catalog::layout::validate`],
//! which gives the same placement for the same multiset, so the result does not depend on the
//! enumeration order. Complete unless the GPU has more than
//! [`crate::catalog::layout::MAX_CANDIDATES`] candidate multisets (no real GPU comes close).

use crate::catalog::GpuModel;
use crate::catalog::layout::{self, PlacedInstance};

/// One usable MIG profile of a pool's GPU.
#[derive(Clone, Debug)]
pub(crate) struct ProfileInfo {
    pub name: String,
    pub memory_mib: u64,
    pub sms: u32,
    pub compute_slices: u8,
    pub memory_slices: u8,
}

/// A valid MIG layout of one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Instances per usable profile (same indices as the pool's profile list).
    pub counts: Vec<u8>,
    /// Where every instance sits, sorted by start.
    pub placed: Vec<PlacedInstance>,
    /// Stable sort key and human name, e.g. `3g.40gb,2g.20gb,1g.10gb` (largest first).
    pub key: String,
}

impl Layout {
    /// Profile names, one per instance, largest first.
    pub(super) fn names<'p>(&self, profiles: &'p [ProfileInfo]) -> Vec<&'p str> {
        let mut out = Vec::new();
        for (q, &c) in self.counts.iter().enumerate().rev() {
            if let Some(p) = profiles.get(q) {
                out.extend(std::iter::repeat_n(p.name.as_str(), usize::from(c)));
            }
        }
        out
    }
}

fn make(gpu: &GpuModel, profiles: &[ProfileInfo], counts: Vec<u8>) -> Option<Layout> {
    let mut names: Vec<&str> = Vec::new();
    for (q, &c) in counts.iter().enumerate().rev() {
        names.extend(std::iter::repeat_n(profiles.get(q)?.name.as_str(), usize::from(c)));
    }
    if names.is_empty() {
        return None;
    }
    let placed = layout::validate(gpu, &names).ok()?;
    Some(Layout { key: names.join(","), counts, placed })
}

/// Every valid non-empty layout of the usable profiles, sorted by key.
pub(crate) fn all(gpu: &GpuModel, profiles: &[ProfileInfo]) -> Vec<Layout> {
    let mut out: Vec<Layout> = layout::enumerate(gpu)
        .iter()
        .filter_map(|l| {
            let mut counts = vec![0u8; profiles.len()];
            for name in l.profiles() {
                let q = profiles.iter().position(|p| p.name == name)?;
                counts[q] = counts[q].checked_add(1)?;
            }
            make(gpu, profiles, counts)
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// The valid layouts of the usable profiles to which no further usable instance can be added.
#[cfg(test)]
pub(crate) fn maximal(gpu: &GpuModel, profiles: &[ProfileInfo]) -> Vec<Layout> {
    maximal_of(all(gpu, profiles))
}

/// The maximal layouts among `every` (all valid layouts of some profiles, from [`all`]).
pub(crate) fn maximal_of(every: Vec<Layout>) -> Vec<Layout> {
    maximal_in(every, |_| true)
}

/// The layouts among `every` (all valid layouts of some profiles, from [`all`]) to which no
/// instance of a profile `q` with `grows(q)` can be added: [`maximal_of`] when every profile
/// grows.
pub(crate) fn maximal_in(every: Vec<Layout>, grows: impl Fn(usize) -> bool) -> Vec<Layout> {
    let valid: std::collections::BTreeSet<Vec<u8>> = every.iter().map(|l| l.counts.clone()).collect();
    every
        .into_iter()
        .filter(|l| {
            (0..l.counts.len()).filter(|&q| grows(q)).all(|q| {
                let mut c = l.counts.clone();
                c[q] += 1;
                !valid.contains(&c)
            })
        })
        .collect()
}

/// The layout of a GPU that runs these profiles today, if they are usable and valid.
pub(crate) fn from_names(gpu: &GpuModel, profiles: &[ProfileInfo], names: &[String]) -> Option<Layout> {
    let mut counts = vec![0u8; profiles.len()];
    for n in names {
        let q = profiles.iter().position(|p| &p.name == n)?;
        counts[q] = counts[q].checked_add(1)?;
    }
    make(gpu, profiles, counts)
}

/// The layout with exactly these counts, if valid.
pub(crate) fn from_counts(gpu: &GpuModel, profiles: &[ProfileInfo], counts: Vec<u8>) -> Option<Layout> {
    make(gpu, profiles, counts)
}
