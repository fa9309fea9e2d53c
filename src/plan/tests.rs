//! Unit tests of the planner's internal pieces; whole-plan behaviour is tested in
//! `tests/integration/plan.rs`.

use crate::catalog::Catalog;
use crate::plan::layouts;
use crate::plan::problem::usable_profiles;

fn a100() -> crate::catalog::GpuModel {
    Catalog::builtin().get("A100-SXM4-80GB").cloned().expect("builtin A100")
}

#[test]
fn usable_profiles_skip_media_and_whole_gpu_profiles() {
    let names: Vec<String> = usable_profiles(&a100()).into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb"]);
}

#[test]
fn every_enumerated_layout_is_valid_and_maximal_ones_admit_no_more() {
    let gpu = a100();
    let profiles = usable_profiles(&gpu);
    let all = layouts::all(&gpu, &profiles);
    assert!(all.len() > 20, "only {} layouts", all.len());
    for l in &all {
        let names = l.names(&profiles);
        assert!(crate::catalog::layout::validate(&gpu, &names).is_ok(), "{}", l.key);
    }
    let max = layouts::maximal(&gpu, &profiles);
    assert!(max.iter().any(|l| l.key == "4g.40gb,3g.40gb"));
    assert!(max.iter().any(|l| l.key == "3g.40gb,2g.20gb,1g.10gb,1g.10gb"));
    assert!(!max.iter().any(|l| l.key == "3g.40gb,3g.40gb,1g.10gb"));
    for l in &max {
        for p in &profiles {
            let mut names = l.names(&profiles);
            names.push(&p.name);
            assert!(crate::catalog::layout::validate(&gpu, &names).is_err(), "{} + {}", l.key, p.name);
        }
    }
}

#[test]
fn seven_small_instances_is_a_maximal_layout() {
    let gpu = a100();
    let profiles = usable_profiles(&gpu);
    let max = layouts::maximal(&gpu, &profiles);
    assert!(max.iter().any(|l| l.key == "1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb"));
}

/// The former private enumeration: a depth-first search over count vectors of the usable
/// profiles on top of `validate` (validity is downward closed, so stopping at the first invalid
/// extension finds every valid multiset).
fn reference_all(
    gpu: &crate::catalog::GpuModel,
    profiles: &[crate::plan::problem::ProfileInfo],
) -> Vec<Vec<u8>> {
    fn grow(
        gpu: &crate::catalog::GpuModel,
        profiles: &[crate::plan::problem::ProfileInfo],
        from: usize,
        counts: &mut Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    ) {
        for q in from..profiles.len() {
            counts[q] += 1;
            if layouts::from_counts(gpu, profiles, counts.clone()).is_some() {
                out.push(counts.clone());
                grow(gpu, profiles, q, counts, out);
            }
            counts[q] -= 1;
        }
    }
    let mut out = Vec::new();
    grow(gpu, profiles, 0, &mut vec![0u8; profiles.len()], &mut out);
    out.sort();
    out
}

#[test]
fn layouts_from_the_catalog_enumeration_match_a_search_over_usable_profiles() {
    for gpu in Catalog::builtin().iter() {
        let profiles = usable_profiles(gpu);
        let mut ours: Vec<Vec<u8>> = layouts::all(gpu, &profiles).into_iter().map(|l| l.counts).collect();
        ours.sort();
        let reference = reference_all(gpu, &profiles);
        assert_eq!(ours, reference, "{}", gpu.id);
        let set: std::collections::BTreeSet<&Vec<u8>> = reference.iter().collect();
        let mut want: Vec<&Vec<u8>> = reference
            .iter()
            .filter(|c| {
                (0..c.len()).all(|q| {
                    let mut bigger = (*c).clone();
                    bigger[q] += 1;
                    !set.contains(&bigger)
                })
            })
            .collect();
        want.sort();
        let max = layouts::maximal(gpu, &profiles);
        let mut got: Vec<&Vec<u8>> = max.iter().map(|l| &l.counts).collect();
        got.sort();
        assert_eq!(got, want, "{}", gpu.id);
        let keys: Vec<&String> = max.iter().map(|l| &l.key).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{}: sorted by key", gpu.id);
    }
}
