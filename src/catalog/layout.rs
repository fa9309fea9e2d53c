//! Layout validity: does a multiset of MIG profiles fit on one GPU, and where does each instance sit?
//!
//! In: a [`GpuModel`] and profile names (any order, repeats allowed). Out: a placement (every
//! instance with its start memory slice) or the precise reason the multiset cannot exist. This is
//! the one function every part of gpuplan uses to judge a MIG layout (the planner, the mig-parted
//! linter, the pictures in `PLAN.md` and `catalog show`). [`enumerate`] lists every valid layout of
//! a GPU and [`maximal`] those that no further instance fits into; both are built on the same
//! check, so the enumeration and [`validate`] agree by construction (and a property test checks it).
//!
//! A multiset is valid iff:
//! 1. every name is a GPU-instance profile of this GPU;
//! 2. each profile appears at most its `maxCount` times;
//! 3. at most one instance carries media extensions: a GPU has one set of extra media engines
//!    (OFA, the extra NVDEC/NVJPG), which a `+me` instance takes and a `+me.all` instance takes
//!    together with all other media engines, so `+me` and `+me.all` variants of any size exclude
//!    each other (A30's `1g.6gb+me` and `2g.12gb+me`, RTX PRO's `+me` / `+me.all`);
//!    `-me` and `+gfx` carry no shared limit beyond their own maximum;
//! 4. the compute slices add up to at most the GPU's compute slices;
//! 5. the instances can be given allowed starts whose memory intervals `[start, start + size)`
//!    do not overlap (checked by exhaustive search, largest instances first).
//!
//! Cost: measured in a debug build, [`enumerate`] plus [`maximal`] take 2–6 ms for a 7/8-slice GPU
//! (127 valid layouts, 44 maximal) and about 0.1 s for all 39 built-in GPUs, so the planner can
//! call them at start-up without a cache.
//!
//! Guarantees: no panics on any catalog entry that passed [`super::check_model`]; deterministic
//! results (the same multiset always gives the same placement, instances sorted by start).
//! The empty multiset (MIG enabled, no instances) is valid but not part of [`enumerate`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{GpuModel, MigGeometry, MigProfile};

/// One placed instance: the profile and the memory slice it starts at (read back from a
/// previous `plan.json` too, a missing field as its default).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct PlacedInstance {
    pub profile: String,
    pub start: u8,
}

/// A valid layout of one GPU: its instances with their placement, sorted by start.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Layout {
    pub instances: Vec<PlacedInstance>,
}

/// Why a multiset of profiles does not fit on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("`{gpu}` does not support MIG")]
    NotMigCapable { gpu: String },
    #[error("`{gpu}` has no MIG profile `{profile}`")]
    UnknownProfile { gpu: String, profile: String },
    #[error("{count} × `{profile}` exceeds its maximum of {max} per GPU")]
    TooMany { profile: String, count: usize, max: u8 },
    #[error(
        "{} instances take media extensions ({}) but a GPU has one set",
        profiles.len(),
        profiles.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
    )]
    MediaExtensions { profiles: Vec<String> },
    #[error("the instances need {needed} compute slices but the GPU has {available}")]
    ComputeExceeded { needed: u32, available: u8 },
    #[error("the instances need {needed} memory slices but the GPU has {available}")]
    MemoryExceeded { needed: u32, available: u8 },
    #[error("no placement of the instances at their allowed starts avoids overlapping memory slices")]
    NoPlacement,
}

/// Checks that `profiles` (names, any order, repeats allowed) fit on `gpu` and returns one
/// placement, instances sorted by start.
///
/// Deterministic: the same multiset always gives the same placement.
pub fn validate(gpu: &GpuModel, profiles: &[&str]) -> Result<Vec<PlacedInstance>, LayoutError> {
    let Some(mig) = &gpu.mig else {
        return Err(LayoutError::NotMigCapable { gpu: gpu.id.clone() });
    };
    let mut counts = vec![0usize; mig.profiles.len()];
    for name in profiles {
        let Some(i) = mig.profiles.iter().position(|p| p.name == *name) else {
            return Err(LayoutError::UnknownProfile { gpu: gpu.id.clone(), profile: (*name).to_owned() });
        };
        counts[i] += 1;
    }
    check_counts(mig, &counts)
}

/// [`validate`] for a map of profile name → count, as mig-parted writes layouts.
pub fn validate_counts(
    gpu: &GpuModel,
    counts: &BTreeMap<String, u32>,
) -> Result<Vec<PlacedInstance>, LayoutError> {
    let Some(mig) = &gpu.mig else {
        return Err(LayoutError::NotMigCapable { gpu: gpu.id.clone() });
    };
    let mut vector = vec![0usize; mig.profiles.len()];
    for (name, &count) in counts {
        let Some(i) = mig.profiles.iter().position(|p| &p.name == name) else {
            return Err(LayoutError::UnknownProfile { gpu: gpu.id.clone(), profile: name.clone() });
        };
        vector[i] += usize::try_from(count).unwrap_or(usize::MAX);
    }
    check_counts(mig, &vector)
}

/// The rule set on a count vector (one count per profile of `mig`, in catalog order).
fn check_counts(mig: &MigGeometry, counts: &[usize]) -> Result<Vec<PlacedInstance>, LayoutError> {
    for (p, &count) in mig.profiles.iter().zip(counts) {
        if count > usize::from(p.max_count) {
            return Err(LayoutError::TooMany { profile: p.name.clone(), count, max: p.max_count });
        }
    }
    let media: Vec<String> = mig
        .profiles
        .iter()
        .zip(counts)
        .filter(|(p, _)| p.takes_media_extensions())
        .flat_map(|(p, &c)| std::iter::repeat_n(p.name.clone(), c))
        .collect();
    if media.len() > 1 {
        return Err(LayoutError::MediaExtensions { profiles: media });
    }
    let sum = |f: fn(&MigProfile) -> u8| -> u32 {
        mig.profiles
            .iter()
            .zip(counts)
            .map(|(p, &c)| u32::from(f(p)) * u32::try_from(c).unwrap_or(u32::MAX))
            .sum()
    };
    let needed = sum(|p| p.compute_slices);
    if needed > u32::from(mig.compute_slices) {
        return Err(LayoutError::ComputeExceeded { needed, available: mig.compute_slices });
    }
    let memory = sum(|p| p.size);
    if memory > u32::from(mig.memory_slices) {
        return Err(LayoutError::MemoryExceeded { needed: memory, available: mig.memory_slices });
    }
    place_counts(mig, counts).ok_or(LayoutError::NoPlacement)
}

/// Searches starts for every instance; `None` when no non-overlapping assignment exists.
fn place_counts(mig: &MigGeometry, counts: &[usize]) -> Option<Vec<PlacedInstance>> {
    // Largest instances first (fewest starts), then by name: a fixed order keeps results stable.
    let mut order: Vec<usize> = (0..mig.profiles.len()).filter(|&i| counts[i] > 0).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&mig.profiles[a], &mig.profiles[b]);
        pb.size.cmp(&pa.size).then(pa.starts.len().cmp(&pb.starts.len())).then(pa.name.cmp(&pb.name))
    });
    let items: Vec<&MigProfile> =
        order.iter().flat_map(|&i| std::iter::repeat_n(&mig.profiles[i], counts[i])).collect();
    let mut starts = Vec::with_capacity(items.len());
    if !search(&items, 0, &mut starts) {
        return None;
    }
    let mut out: Vec<PlacedInstance> = items
        .iter()
        .zip(&starts)
        .map(|(p, &start)| PlacedInstance { profile: p.name.clone(), start })
        .collect();
    out.sort_by(|a, b| a.start.cmp(&b.start).then(a.profile.cmp(&b.profile)));
    Some(out)
}

fn interval(start: u8, size: u8) -> Option<u64> {
    let end = u32::from(start) + u32::from(size);
    if size == 0 || end > 64 {
        return None;
    }
    let ones = if size >= 64 { u64::MAX } else { (1u64 << size) - 1 };
    Some(ones << start)
}

/// Depth-first search; instances of the same profile take increasing starts (symmetry breaking).
fn search(items: &[&MigProfile], used: u64, starts: &mut Vec<u8>) -> bool {
    let depth = starts.len();
    let Some(item) = items.get(depth) else { return true };
    let min_start = match (depth.checked_sub(1).and_then(|d| items.get(d)), starts.last()) {
        (Some(prev), Some(&s)) if prev.name == item.name => Some(s),
        _ => None,
    };
    for &start in &item.starts {
        if min_start.is_some_and(|m| start <= m) {
            continue;
        }
        let Some(mask) = interval(start, item.size) else { continue };
        if used & mask != 0 {
            continue;
        }
        starts.push(start);
        if search(items, used | mask, starts) {
            return true;
        }
        starts.pop();
    }
    false
}

impl Layout {
    /// The profile names, one per instance, in placement order.
    pub fn profiles(&self) -> Vec<&str> {
        self.instances.iter().map(|i| i.profile.as_str()).collect()
    }

    /// Profile name → number of instances, as mig-parted's `mig-devices` writes it.
    pub fn counts(&self) -> BTreeMap<String, u32> {
        let mut counts = BTreeMap::new();
        for i in &self.instances {
            *counts.entry(i.profile.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// Compute slices the layout uses on `gpu`.
    pub fn compute_slices(&self, gpu: &GpuModel) -> u32 {
        self.instances
            .iter()
            .filter_map(|i| gpu.profile(&i.profile))
            .map(|p| u32::from(p.compute_slices))
            .sum()
    }

    /// A one-line picture on the memory-slice grid, e.g. `|2g.20gb |1g.10gb|1g.10gb|3g.40gb ...|`.
    pub fn picture(&self, gpu: &GpuModel) -> String {
        picture(gpu, &self.instances)
    }
}

/// Draws placed instances on `gpu`'s memory-slice grid: one cell per memory slice, an instance
/// spans its slices, free slices show `-`. Names that do not fit are cut.
pub fn picture(gpu: &GpuModel, instances: &[PlacedInstance]) -> String {
    let Some(mig) = &gpu.mig else { return "|whole GPU|".to_owned() };
    let width = mig
        .profiles
        .iter()
        .filter(|p| p.size == 1)
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(7)
        .clamp(4, 14);
    let mut out = String::from("|");
    let mut slot = 0u8;
    let mut sorted: Vec<&PlacedInstance> = instances.iter().collect();
    sorted.sort();
    sorted.sort_by_key(|i| i.start);
    let mut iter = sorted.into_iter().peekable();
    while slot < mig.memory_slices {
        let here = iter.peek().filter(|i| i.start == slot).copied();
        let (label, size) = match here {
            Some(instance) => {
                iter.next();
                let size = gpu.profile(&instance.profile).map_or(1, |p| p.size.max(1));
                (instance.profile.as_str(), size)
            }
            None => ("-", 1),
        };
        let cell = usize::from(size) * width + usize::from(size) - 1;
        let text: String = label.chars().take(cell).collect();
        out.push_str(&format!("{text:<cell$}|"));
        slot = slot.saturating_add(size);
    }
    out
}

/// How many count vectors [`enumerate`] examines at most. Today's GPUs need a few thousand; the
/// bound keeps a pathological user catalog entry (dozens of profiles on 32 slices) from hanging
/// start-up, at the price of an incomplete list for such an entry.
pub const MAX_CANDIDATES: usize = 1_000_000;

/// Every valid non-empty layout of `gpu` (as multisets, each with its placement), ordered by
/// compute slices used (most first), then memory slices, then profile names. Empty for non-MIG GPUs.
/// Complete unless the entry has more than [`MAX_CANDIDATES`] candidate multisets.
pub fn enumerate(gpu: &GpuModel) -> Vec<Layout> {
    enumerate_counts(gpu).into_iter().map(|(_, layout)| layout).collect()
}

fn enumerate_counts(gpu: &GpuModel) -> Vec<(Vec<usize>, Layout)> {
    let Some(mig) = &gpu.mig else { return Vec::new() };
    let mut found = Vec::new();
    let mut counts = vec![0usize; mig.profiles.len()];
    let mut budget = MAX_CANDIDATES;
    walk(mig, 0, &mut counts, 0, 0, 0, &mut budget, &mut found);
    let key = |(counts, layout): &(Vec<usize>, Layout)| {
        let compute: u32 =
            mig.profiles.iter().zip(counts).map(|(p, &c)| u32::from(p.compute_slices) * c as u32).sum();
        let memory: u32 = mig.profiles.iter().zip(counts).map(|(p, &c)| u32::from(p.size) * c as u32).sum();
        (std::cmp::Reverse(compute), std::cmp::Reverse(memory), layout.profiles().join(","))
    };
    found.sort_by_cached_key(key);
    found
}

/// Chooses a count for profile `i`, pruning on the sums that any valid layout must respect.
#[allow(clippy::too_many_arguments, reason = "a private recursive helper; the state is its arguments")]
fn walk(
    mig: &MigGeometry,
    i: usize,
    counts: &mut Vec<usize>,
    compute: u32,
    memory: u32,
    media: usize,
    budget: &mut usize,
    found: &mut Vec<(Vec<usize>, Layout)>,
) {
    if *budget == 0 {
        return;
    }
    let Some(p) = mig.profiles.get(i) else {
        *budget -= 1;
        if counts.iter().any(|&c| c > 0)
            && let Ok(instances) = check_counts(mig, counts)
        {
            found.push((counts.clone(), Layout { instances }));
        }
        return;
    };
    for c in 0..=usize::from(p.max_count) {
        let c32 = c as u32;
        let compute = compute + u32::from(p.compute_slices) * c32;
        let memory = memory + u32::from(p.size) * c32;
        let media = media + if p.takes_media_extensions() { c } else { 0 };
        if compute > u32::from(mig.compute_slices) || memory > u32::from(mig.memory_slices) || media > 1 {
            break;
        }
        counts[i] = c;
        walk(mig, i + 1, counts, compute, memory, media, budget, found);
    }
    counts[i] = 0;
}

/// The valid layouts that no further instance fits into, in [`enumerate`]'s order.
pub fn maximal(gpu: &GpuModel) -> Vec<Layout> {
    let all = enumerate_counts(gpu);
    let set: BTreeSet<&Vec<usize>> = all.iter().map(|(c, _)| c).collect();
    all.iter()
        .filter(|(counts, _)| {
            (0..counts.len()).all(|i| {
                let mut bigger = counts.clone();
                bigger[i] += 1;
                !set.contains(&bigger)
            })
        })
        .map(|(_, layout)| layout.clone())
        .collect()
}

/// The profile of `gpu` a user most likely meant by `name`, for "did you mean" hints: the profile
/// with the same compute size and attributes (`3g.20gb` → `3g.40gb` on an 80GB GPU), else the
/// nearest name by edit distance.
pub fn suggest_profile<'a>(gpu: &'a GpuModel, name: &str) -> Option<&'a str> {
    let shape = |n: &str| -> Option<(String, Vec<String>)> {
        let (g, _) = n.split_once("g.")?;
        Some((g.to_owned(), super::name_attributes(n)))
    };
    let wanted = shape(name);
    let same: Vec<&str> = gpu.profile_names().filter(|p| wanted.is_some() && shape(p) == wanted).collect();
    crate::diagnostics::nearest(name, same.iter().copied())
        .or_else(|| same.first().copied())
        .or_else(|| crate::diagnostics::nearest(name, gpu.profile_names()))
}

#[cfg(test)]
mod tests {
    use super::{GpuModel, picture, suggest_profile, validate};
    use crate::catalog::Catalog;

    fn h100() -> GpuModel {
        Catalog::builtin().get("H100-SXM5-80GB").cloned().expect("H100 in the builtin catalog")
    }

    #[test]
    fn places_balanced_layout_with_the_3g_at_start_4() {
        let placed = validate(&h100(), &["1g.10gb", "3g.40gb", "1g.10gb", "2g.20gb"]).expect("valid");
        let three = placed.iter().find(|i| i.profile == "3g.40gb").expect("3g placed");
        assert_eq!(three.start, 4);
    }

    #[test]
    fn picture_spans_instances_over_their_slices() {
        let gpu = h100();
        let placed = validate(&gpu, &["4g.40gb", "3g.40gb"]).expect("valid");
        let picture = picture(&gpu, &placed);
        assert!(picture.starts_with("|4g.40gb"), "{picture}");
        assert_eq!(picture.matches('|').count(), 3, "{picture}");
    }

    #[test]
    fn suggests_the_profile_of_the_same_shape() {
        assert_eq!(suggest_profile(&h100(), "3g.20gb"), Some("3g.40gb"));
        assert_eq!(suggest_profile(&h100(), "1g.10gb+me"), Some("1g.10gb+me"));
        assert_eq!(suggest_profile(&h100(), "1g.10gbb"), Some("1g.10gb"));
    }

    #[test]
    fn seven_small_instances_leave_the_last_slice_free() {
        let gpu = h100();
        let placed = validate(&gpu, &["1g.10gb"; 7]).expect("valid");
        assert!(picture(&gpu, &placed).ends_with(&format!("|{:<10}|", "-")), "{}", picture(&gpu, &placed));
    }
}
