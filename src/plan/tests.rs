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
