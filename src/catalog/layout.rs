//! Layout validity: does a multiset of MIG profiles fit on one GPU, and where does each instance sit?
//!
//! This is the one function every part of gpuplan uses to judge a MIG layout (the planner, the
//! mig-parted linter, the pictures in `PLAN.md`).

use super::{GpuModel, MigProfile};

/// One placed instance: the profile and the memory slice it starts at.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct PlacedInstance {
    pub profile: String,
    pub start: u8,
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
    #[error("the instances need {needed} compute slices but the GPU has {available}")]
    ComputeExceeded { needed: u32, available: u8 },
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
    let mut resolved: Vec<&MigProfile> = Vec::with_capacity(profiles.len());
    for name in profiles {
        let profile = gpu.profile(name).ok_or_else(|| LayoutError::UnknownProfile {
            gpu: gpu.id.clone(),
            profile: (*name).to_owned(),
        })?;
        resolved.push(profile);
    }
    for p in &mig.profiles {
        let count = resolved.iter().filter(|r| r.name == p.name).count();
        if count > usize::from(p.max_count) {
            return Err(LayoutError::TooMany { profile: p.name.clone(), count, max: p.max_count });
        }
    }
    let needed: u32 = resolved.iter().map(|p| u32::from(p.compute_slices)).sum();
    if needed > u32::from(mig.compute_slices) {
        return Err(LayoutError::ComputeExceeded { needed, available: mig.compute_slices });
    }
    // Place the largest instances first: they have the fewest allowed starts.
    resolved.sort_by(|a, b| {
        b.size.cmp(&a.size).then(a.starts.len().cmp(&b.starts.len())).then(a.name.cmp(&b.name))
    });
    let mut used = vec![false; usize::from(mig.memory_slices)];
    let mut placed = Vec::with_capacity(resolved.len());
    if place(&resolved, &mut used, &mut placed) {
        let mut out: Vec<PlacedInstance> = resolved
            .iter()
            .zip(&placed)
            .map(|(p, &start)| PlacedInstance { profile: p.name.clone(), start })
            .collect();
        out.sort_by(|a, b| a.start.cmp(&b.start).then(a.profile.cmp(&b.profile)));
        Ok(out)
    } else {
        Err(LayoutError::NoPlacement)
    }
}

fn place(rest: &[&MigProfile], used: &mut [bool], placed: &mut Vec<u8>) -> bool {
    let Some((first, rest)) = rest.split_first() else { return true };
    for &start in &first.starts {
        let range = usize::from(start)..usize::from(start) + usize::from(first.size);
        if range.end > used.len() || used[range.clone()].iter().any(|&u| u) {
            continue;
        }
        used[range.clone()].iter_mut().for_each(|u| *u = true);
        placed.push(start);
        if place(rest, used, placed) {
            return true;
        }
        placed.pop();
        used[range].iter_mut().for_each(|u| *u = false);
    }
    false
}
