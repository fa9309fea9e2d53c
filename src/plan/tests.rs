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
    profiles: &[crate::plan::layouts::ProfileInfo],
) -> Vec<Vec<u8>> {
    fn grow(
        gpu: &crate::catalog::GpuModel,
        profiles: &[crate::plan::layouts::ProfileInfo],
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

/// A time-slicing brute-force model: memory in GiB, compute in twentieths, replicas, shared.
type TsModel = (u64, u32, u32, bool);

/// The fewest GPUs of a pool of one-GPU L4 nodes (no MIG) that serve `models` (replica demand,
/// spread none), by exhaustive search over partitions of the replicas into GPUs, with the
/// verifier's rules: a GPU holds one replica exclusively (memory ≤ the GPU's, compute ≤ 1), or
/// `s ≥ 2` replicas of `shared` models time-sliced `k` ways, `s ≤ k ≤ maxTimeSlicingReplicas`,
/// each within `1/k` of the memory and their compute together within the efficiency (on a
/// one-GPU node the tenants of the node's shared resource are exactly the GPU's, so "any k of
/// them" is "all of them"; `k = s` gives the largest slot). `None` when `capacity` GPUs are not
/// enough.
fn brute_force_time_slicing(spec: &crate::spec::Spec, gpu_mib: u64, capacity: u32) -> Option<u32> {
    let policy = &spec.policy;
    let usable = gpu_mib as f64 * (1.0 - policy.memory_headroom);
    let mut replicas: Vec<usize> = Vec::new();
    for (i, m) in spec.models.iter().enumerate() {
        let crate::spec::Demand::Replicas(n) = m.demand else { return None };
        replicas.extend(std::iter::repeat_n(i, n as usize));
    }
    let group_ok = |g: &[usize]| -> bool {
        let ms: Vec<&crate::spec::Model> = g.iter().map(|&i| &spec.models[i]).collect();
        if let [m] = ms[..] {
            return m.memory_mib as f64 <= usable && m.compute <= 1.0 + 1e-9;
        }
        let k = g.len() as u32;
        k <= policy.max_time_slicing_replicas
            && ms.iter().all(|m| {
                m.isolation == crate::spec::Isolation::Shared && m.memory_mib as f64 <= usable / f64::from(k)
            })
            && ms.iter().map(|m| m.compute).sum::<f64>() <= policy.time_slicing_efficiency + 1e-9
    };
    fn go(
        next: usize,
        replicas: &[usize],
        groups: &mut Vec<Vec<usize>>,
        best: &mut u32,
        ok: &dyn Fn(&[usize]) -> bool,
    ) {
        if groups.len() as u32 >= *best {
            return;
        }
        let Some(&r) = replicas.get(next) else {
            if groups.iter().all(|g| ok(g)) {
                *best = groups.len() as u32;
            }
            return;
        };
        for gi in 0..groups.len() {
            groups[gi].push(r);
            // Adding a tenant to a shared group never makes it valid again: prune.
            if groups[gi].len() < 2 || ok(&groups[gi]) {
                go(next + 1, replicas, groups, best, ok);
            }
            groups[gi].pop();
        }
        groups.push(vec![r]);
        go(next + 1, replicas, groups, best, ok);
        groups.pop();
    }
    let mut best = capacity + 1;
    go(0, &replicas, &mut Vec::new(), &mut best, &group_ok);
    (best <= capacity).then_some(best)
}

#[test]
fn brute_force_time_slicing_knows_combined_compute() {
    let mut a = crate::bench::model("a", 8 * 1024, 0.5, 1);
    a.isolation = crate::spec::Isolation::Shared;
    let mut b = crate::bench::model("b", 8 * 1024, 0.2, 1);
    b.isolation = crate::spec::Isolation::Shared;
    let names = vec!["n1".to_owned(), "n2".to_owned()];
    let spec = crate::bench::spec("t", vec![crate::bench::pool("l4", "L4", 1, names)], vec![a, b.clone()]);
    assert_eq!(brute_force_time_slicing(&spec, 23034, 2), Some(1));
    let mut c = b.clone();
    c.name = "c".into();
    c.compute = 0.3;
    let names = vec!["n1".to_owned(), "n2".to_owned()];
    let mut heavy = crate::bench::model("a", 8 * 1024, 0.5, 1);
    heavy.isolation = crate::spec::Isolation::Shared;
    let spec = crate::bench::spec("t", vec![crate::bench::pool("l4", "L4", 1, names)], vec![heavy, c]);
    // 0.5 + 0.3 > 0.76: two GPUs.
    assert_eq!(brute_force_time_slicing(&spec, 23034, 2), Some(2));
}

/// 64 cases per property (CI stays fast); `PROPTEST_CASES=1024` runs more locally.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: cases(), ..Default::default() })]

    /// Issue 13: on small pools of one-GPU nodes with time-slicing, the bound valid for every
    /// plan is at most the true optimum, "optimal" is never claimed above it, and the planner
    /// reaches it (tenants judged by their combined compute).
    #[test]
    fn small_time_slicing_cases_reach_the_brute_force_optimum(
        nodes in 1u32..=4,
        params in proptest::collection::vec((1u64..=20, 1u32..=19, 1u32..=2, proptest::bool::weighted(0.8)), 1..=4),
    ) {
        use proptest::prelude::*;
        prop_assume!(params.iter().map(|m| m.2).sum::<u32>() <= 6);
        let models: Vec<crate::spec::Model> = params
            .iter()
            .enumerate()
            .map(|(i, &(gib, twentieths, replicas, shared)): (usize, &TsModel)| {
                let mut m = crate::bench::model(&format!("m{i}"), gib * 1024, f64::from(twentieths) / 20.0, replicas);
                m.isolation = if shared { crate::spec::Isolation::Shared } else { crate::spec::Isolation::Hardware };
                m
            })
            .collect();
        let names = (1..=nodes).map(|n| format!("n{n}")).collect();
        let spec = crate::bench::spec("brute", vec![crate::bench::pool("l4", "L4", 1, names)], models);
        let catalog = Catalog::builtin();
        let gpu_mib = catalog.get("L4").map_or(0, |g| g.memory_mib);
        let optimum = brute_force_time_slicing(&spec, gpu_mib, nodes);
        match crate::plan::plan(&spec, &catalog) {
            Ok(plan) => {
                let q = &plan.quality;
                let violations = crate::verify::check(&spec, &catalog, &plan);
                prop_assert!(violations.is_empty(), "{violations:?}\n{:?}", plan.pools);
                prop_assert!(optimum.is_some_and(|o| q.gpus.lower_bound <= o), "bound {} above the optimum {optimum:?}", q.gpus.lower_bound);
                if q.proof == crate::plan::Proof::Optimal {
                    prop_assert_eq!(Some(q.gpus.used), optimum, "called optimal above the optimum");
                }
                prop_assert_eq!(Some(q.gpus.used), optimum, "planner vs brute force: {:?}", plan.pools);
            }
            Err(d) => prop_assert!(optimum.is_none(), "the planner failed ({:?}) but {optimum:?} GPUs suffice", d.iter().map(|d| &d.message).collect::<Vec<_>>()),
        }
    }
}

/// The index of the layout of `pool` holding exactly `want` ((profile, instances); every other
/// profile none).
fn layout_of(pool: &crate::plan::problem::PoolCtx<'_>, want: &[(usize, u8)]) -> usize {
    pool.layouts
        .iter()
        .position(|l| {
            l.counts.iter().enumerate().all(|(p, &c)| c == want.iter().find(|x| x.0 == p).map_or(0, |x| x.1))
        })
        .expect("layout")
}

/// A manifest of one node of two A100s (pool `a100`, node `n1`) and `models`.
fn one_a100_node(models: Vec<crate::spec::Model>) -> crate::spec::Spec {
    let pool = crate::bench::pool("a100", "A100-SXM4-80GB", 2, vec!["n1".to_owned()]);
    crate::bench::spec("t", vec![pool], models)
}

/// `fleet-100-priced` (HiGHS): the optimiser's counts laid out without the placement-time
/// check put a `spread: gpu` model on `1g.10gb` and `2g.20gb` instances of one node where a GPU
/// holds one of each (the device plugin may then hand both replicas that GPU). Trading the
/// `2g.20gb` replica's instance with another model's `1g.20gb` one keeps every layout and the
/// cost, and the node passes the rule.
#[test]
fn untangling_trades_instances_until_spread_gpu_replicas_cannot_share_a_gpu() {
    use crate::plan::assign::{Assignment, Dev, NodeA, PoolA, untangle_mig_spread};
    use crate::plan::problem::Kind;
    let mut s = crate::bench::model("s", 4 * 1024, 0.1, 2);
    s.spread = crate::spec::Spread::Gpu;
    let x = crate::bench::model("x", 15 * 1024, 0.1, 2);
    let spec = one_a100_node(vec![s, x]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let names: Vec<&str> = problem.pools[0].profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names[..3], ["1g.10gb", "1g.20gb", "2g.20gb"]);
    // Models by name: 0 = s, 1 = x. GPU 0: 1g.10gb (s) + 2g.20gb (x); GPU 1: 1g.20gb (x) + 2g.20gb (s).
    let mig = |counts: [u8; 5], tenants: Vec<(usize, usize)>| Dev::Mig { counts: counts.to_vec(), tenants };
    let node = NodeA {
        gpus: vec![mig([1, 0, 1, 0, 0], vec![(0, 0), (2, 1)]), mig([0, 1, 1, 0, 0], vec![(2, 0), (1, 1)])],
    };
    assert_eq!(node.mig_spread_clashes(&problem), 1);
    let replicas = [(0, Kind::Mig(0)), (0, Kind::Mig(2)), (1, Kind::Mig(1)), (1, Kind::Mig(2))]
        .into_iter()
        .map(|(m, kind)| ((m, 0, kind), 1))
        .collect();
    let mut a = Assignment { pools: vec![PoolA { nodes: vec![node] }], replicas, repaired: 0 };
    assert!(untangle_mig_spread(&problem, &mut a));
    let node = &a.pools[0].nodes[0];
    assert!(node.mig_spread_ok(&problem));
    assert_eq!(
        node.gpus,
        [mig([1, 0, 1, 0, 0], vec![(0, 0), (2, 1)]), mig([0, 1, 1, 0, 0], vec![(2, 1), (1, 0)])],
        "same layouts, `s` on the 1g.20gb instance"
    );
    let want: std::collections::BTreeMap<_, _> =
        [((0, 0, Kind::Mig(0)), 1), ((0, 0, Kind::Mig(1)), 1), ((1, 0, Kind::Mig(2)), 2)]
            .into_iter()
            .collect();
    assert_eq!(a.replicas, want);
}

/// When no trade helps (two replicas of one `spread: gpu` model on a GPU with two `1g.10gb`
/// instances, nothing else to trade with), one replica is taken off and placed again by first
/// fit with the rule enforced: on the other node's GPU.
#[test]
fn replacing_moves_what_no_trade_can_untangle() {
    use crate::plan::assign::{Assignment, Dev, NodeA, PoolA, replace_mig_spread, untangle_mig_spread};
    use crate::plan::problem::Kind;
    let mut s = crate::bench::model("s", 4 * 1024, 0.1, 2);
    s.spread = crate::spec::Spread::Gpu;
    let pool = crate::bench::pool("a100", "A100-SXM4-80GB", 1, vec!["n1".to_owned(), "n2".to_owned()]);
    let spec = crate::bench::spec("t", vec![pool], vec![s]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let mig = |counts: [u8; 5], tenants: Vec<(usize, usize)>| Dev::Mig { counts: counts.to_vec(), tenants };
    let nodes = vec![
        NodeA { gpus: vec![mig([2, 0, 0, 0, 0], vec![(0, 0), (0, 0)])] },
        NodeA { gpus: vec![Dev::Unused] },
    ];
    let replicas = [((0, 0, Kind::Mig(0)), 2)].into_iter().collect();
    let mut a = Assignment { pools: vec![PoolA { nodes }], replicas, repaired: 0 };
    assert!(!untangle_mig_spread(&problem, &mut a));
    assert!(replace_mig_spread(&problem, &mut a));
    let gpus: Vec<&Dev> = a.pools[0].nodes.iter().flat_map(|n| &n.gpus).collect();
    assert_eq!(gpus, [&mig([1, 0, 0, 0, 0], vec![(0, 0)]), &mig([1, 0, 0, 0, 0], vec![(0, 0)])]);
    assert_eq!(a.replicas.get(&(0, 0, Kind::Mig(0))), Some(&2));
    assert_eq!(a.repaired, 1);
}
/// The docs' example (docs/planner.md, "Limits" before the MILP modelled it): one node of 4
/// A100s, two `spread: gpu` replicas (`s`) and two others (`o`), each needing a `3g.40gb`
/// instance. On `3g`+`3g` GPUs the device plugin may hand both `s` replicas the two instances
/// of one GPU; `4g`+`3g` on two GPUs serves all four with one `3g` per GPU. The optimiser's
/// counts must lay out exactly with the rule enforced (before: `3g`+`3g` layouts, which the
/// decomposition could not lay out, and the small-input search had to find the plan).
fn docs_example() -> crate::spec::Spec {
    let mut s = crate::bench::model("s", 30 * 1024, 0.3, 2);
    s.spread = crate::spec::Spread::Gpu;
    let o = crate::bench::model("o", 30 * 1024, 0.3, 2);
    let pool = crate::bench::pool("a100", "A100-SXM4-80GB", 4, vec!["n1".to_owned()]);
    crate::bench::spec("t", vec![pool], vec![s, o])
}

/// The MILP's same-profile condition: with both `s` replicas on `3g.40gb`, the node may hold no
/// GPU with two `3g` instances, so the counts lay out exactly (before: `3g`+`3g` twice).
#[test]
fn the_optimisers_counts_for_spread_gpu_replicas_on_one_profile_lay_out() {
    use crate::plan::problem::Kind;
    let spec = docs_example();
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let s = problem.models.iter().position(|m| m.name() == "s").expect("model s");
    let three_g = problem.pools[0].profiles.iter().position(|p| p.name == "3g.40gb").expect("3g.40gb");
    let pins = [((s, 0, Kind::Mig(three_g)), 2)].into_iter().collect();
    let goal = crate::plan::milp::Goal::Plan { cost_bound: None, gpu_floor: None };
    let r = crate::plan::milp::solve(&problem, goal, &pins).expect("solves");
    assert!((r.cost - 2.0).abs() < 1e-9, "cost {}", r.cost);
    let a = crate::plan::assign::decompose(&problem, &r.counts, &r.replicas, false);
    assert!(
        a.is_some_and(|a| a.gpus_used() == 2),
        "the counts do not lay out: {:?} {:?}",
        r.replicas,
        r.counts
    );
}

/// The MILP's condition for a `spread: gpu` model on several MIG profiles of a pool (issue 23):
/// on one node of two A100s, with one replica of `s` pinned to `1g.10gb` and one to `2g.20gb`,
/// no GPU of the node may hold both profiles (the device plugin could give both replicas
/// instances of that GPU). Without these rows (the plain program, [`crate::plan::milp::solve`])
/// the counts put both profiles on both GPUs (one layout for the two is the objective's
/// tie-break), which no placement can lay out under the rule.
#[test]
fn the_optimisers_counts_for_a_spread_gpu_model_on_two_profiles_lay_out() {
    use crate::plan::problem::Kind;
    let mut s = crate::bench::model("s", 9 * 1024, 0.1, 2);
    s.spread = crate::spec::Spread::Gpu;
    let pool = crate::bench::pool("a100", "A100-SXM4-80GB", 2, vec!["n1".to_owned()]);
    let spec = crate::bench::spec("t", vec![pool], vec![s]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let q = |name: &str| problem.pools[0].profiles.iter().position(|p| p.name == name).expect(name);
    let pins =
        [((0, 0, Kind::Mig(q("1g.10gb"))), 1), ((0, 0, Kind::Mig(q("2g.20gb"))), 1)].into_iter().collect();
    let goal = crate::plan::milp::Goal::Plan { cost_bound: None, gpu_floor: None };
    let r = crate::plan::milp::solve_with_profile_rows(&problem, goal, &pins).expect("solves");
    let both = problem.pools[0]
        .layouts
        .iter()
        .zip(&r.counts[0].layouts)
        .filter(|&(l, &g)| g > 0 && l.counts[q("1g.10gb")] > 0 && l.counts[q("2g.20gb")] > 0)
        .count();
    assert_eq!(both, 0, "a layout with both profiles: {:?}", r.counts);
    let a = crate::plan::assign::decompose(&problem, &r.counts, &r.replicas, false);
    assert!(a.is_some_and(|a| a.gpus_used() == 2), "the counts do not lay out: {:?}", r.counts);
}

/// Issue 23, spread inside the optimiser: one pool of two nodes of two A100s, counted as two
/// `3g.40gb`+`3g.40gb` GPUs and two `4g.40gb`+`3g.40gb` ones, for `s` (`spread: gpu`, three
/// replicas on `3g.40gb`), `o` (three more) and `w` (two on `4g.40gb`). Dealt round robin, each
/// node holds one GPU of each layout, so the device plugin could hand two `s` replicas the two
/// `3g` instances of one GPU: one `s` replica per node, the third re-placed by first fit. The
/// assignment program puts both `3g`+`3g` GPUs on one node (one `s`, three `o`) and both
/// `4g`+`3g` ones on the other (two `s`, one per GPU, and `w`): every replica placed, none
/// re-placed.
#[test]
fn the_assignment_program_lays_out_spread_gpu_replicas_that_dealing_cannot() {
    use crate::plan::milp::PoolCounts;
    use crate::plan::problem::Kind;
    let mut s = crate::bench::model("s", 30 * 1024, 0.1, 3);
    s.spread = crate::spec::Spread::Gpu;
    let o = crate::bench::model("o", 30 * 1024, 0.1, 3);
    let w = crate::bench::model("w", 30 * 1024, 0.1, 2);
    let pool = crate::bench::pool("a100", "A100-SXM4-80GB", 2, vec!["n1".to_owned(), "n2".to_owned()]);
    let spec = crate::bench::spec("t", vec![pool], vec![s, o, w]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let pool = &problem.pools[0];
    let q = |name: &str| pool.profiles.iter().position(|p| p.name == name).expect(name);
    let (three, four) = (q("3g.40gb"), q("4g.40gb"));
    let mut layouts = vec![0; pool.layouts.len()];
    layouts[layout_of(pool, &[(three, 2)])] = 2;
    layouts[layout_of(pool, &[(four, 1), (three, 1)])] = 2;
    let counts = vec![PoolCounts { layouts, nodes: 2, ..PoolCounts::default() }];
    let model = |name: &str| problem.models.iter().position(|m| m.name() == name).expect(name);
    let replicas: std::collections::BTreeMap<_, _> = [
        ((model("s"), 0, Kind::Mig(three)), 3),
        ((model("o"), 0, Kind::Mig(three)), 3),
        ((model("w"), 0, Kind::Mig(four)), 2),
    ]
    .into_iter()
    .collect();
    let dealt = crate::plan::assign::decompose(&problem, &counts, &replicas, true);
    assert!(
        dealt.is_none_or(|a| a.repaired > 0),
        "dealing laid the counts out: the test no longer shows what the program adds"
    );
    let a = crate::plan::assign::decompose_program(&problem, &counts, &replicas).expect("lays out");
    assert_eq!(a.repaired, 0);
    assert_eq!(a.gpus_used(), 4);
    assert!(a.pools[0].nodes.iter().all(|n| n.mig_spread_ok(&problem)));
    assert_eq!(a.replicas, replicas);
}

/// One node of two A100s; counts of one `7×1g` GPU for seven `1g` replicas, two of them of the
/// `spread: gpu` model `s`. No lay-out keeps both `s` replicas on `1g`: the node's `7×1g` GPU
/// lets the device plugin hand them two instances of it, and without that GPU `o`'s five find
/// no room. The program on the counted profiles places six (the seventh re-placed by first
/// fit); allowed `s`'s other profiles, it opens a second GPU for one `s` replica on a profile
/// that no GPU of the node holds beside `1g`, and places all seven.
#[test]
fn the_assignment_program_moves_a_spread_gpu_model_to_another_profile() {
    use crate::plan::milp::PoolCounts;
    use crate::plan::problem::Kind;
    let mut s = crate::bench::model("s", 8 * 1024, 0.1, 2);
    s.spread = crate::spec::Spread::Gpu;
    let o = crate::bench::model("o", 8 * 1024, 0.1, 5);
    let spec = one_a100_node(vec![s, o]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let pool = &problem.pools[0];
    let one = pool.profiles.iter().position(|p| p.name == "1g.10gb").expect("1g.10gb");
    let mut layouts = vec![0; pool.layouts.len()];
    layouts[layout_of(pool, &[(one, 7)])] = 1;
    let counts = vec![PoolCounts { layouts, nodes: 1, ..PoolCounts::default() }];
    let model = |name: &str| problem.models.iter().position(|m| m.name() == name).expect(name);
    let replicas: std::collections::BTreeMap<_, _> =
        [((model("s"), 0, Kind::Mig(one)), 2), ((model("o"), 0, Kind::Mig(one)), 5)].into_iter().collect();
    let dealt = crate::plan::assign::decompose(&problem, &counts, &replicas, true);
    assert!(dealt.is_none_or(|a| a.repaired > 0), "dealing laid the counts out");
    let a = crate::plan::assign::decompose_program(&problem, &counts, &replicas).expect("lays out");
    assert_eq!(a.repaired, 0, "{:?}", a.replicas);
    assert_eq!(a.gpus_used(), 2);
    assert!(a.pools[0].nodes.iter().all(|n| n.mig_spread_ok(&problem)));
    let on = |m: &str, k: Kind| a.replicas.get(&(model(m), 0, k)).copied().unwrap_or(0);
    assert_eq!(on("o", Kind::Mig(one)), 5);
    assert_eq!(on("s", Kind::Mig(one)), 1, "{:?}", a.replicas);
    let s_total: u32 = a.replicas.iter().filter(|(k, _)| k.0 == model("s")).map(|(_, &n)| n).sum();
    assert_eq!(s_total, 2);
}

/// A dual bound proves a cost where it is less than one price step below it (every plan
/// costs `Σ price × GPUs`, so the next cheaper plan is a step below), after the objective's
/// lower levels are taken off; never where the prices have no whole-cent step.
#[test]
fn a_dual_bound_proves_a_cost_only_within_one_price_step() {
    use crate::plan::bounds::price_step;
    use crate::plan::milp::{cost_floor, proves};
    assert!(price_step(&[0.8, 2.4, 4.0]).is_some_and(|s| (s - 0.8).abs() < 1e-12));
    assert!(price_step(&[2.4, 4.0, 1.1, 0.8, 1.6, 5.2]).is_some_and(|s| (s - 0.1).abs() < 1e-12));
    assert_eq!(price_step(&[0.805, 2.4]), None);
    // An objective of 1000 × cost plus lower levels worth at most 3: a dual bound of 100,500
    // bounds every plan's cost below by 100.497 (less the tolerance).
    let floor = cost_floor(100_500.0, 3.0);
    assert!(floor < 100.497 && floor > 100.496, "{floor}");
    // Steps of one GPU (unpriced): 101 GPUs are proven, 102 are not.
    assert!(proves(floor, 101.0, 1.0));
    assert!(!proves(floor, 102.0, 1.0));
    // A step of 1/8 (prices of $0.10 over a cheapest $0.80): only a cost below 100.621.
    assert!(proves(floor, 100.5, 0.125));
    assert!(!proves(floor, 100.625, 0.125));
    assert!(!proves(floor, 100.5, 0.0), "no step: nothing proven");
    // A floor exactly one step below proves nothing (a plan there may exist).
    assert!(!proves(99.0, 100.0, 1.0));
}

/// The model bounds are raised to the solver's proven optimum where the plan does not undercut
/// it (its counts may not lay out, the plan above), kept where the plan does better (made
/// outside the model) or nothing is proven; on priced pools the cost bound is raised and the
/// GPU one kept (the program minimised cost, not GPUs).
#[test]
fn a_proven_optimum_raises_the_model_bounds_unless_the_plan_undercuts_it() {
    let spec = one_a100_node(vec![crate::bench::model("o", 8 * 1024, 0.1, 5)]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let a = crate::plan::assign::ffd(&problem).expect("first fit plans");
    assert_eq!(a.gpus_used(), 1);
    assert_eq!(super::proven_bounds(&problem, &a, Some(1.0), 0, None), (1, None));
    assert_eq!(super::proven_bounds(&problem, &a, Some(0.5), 0, None), (1, None));
    assert_eq!(super::proven_bounds(&problem, &a, Some(1.0), 3, None), (3, None));
    assert_eq!(super::proven_bounds(&problem, &a, Some(2.0), 0, None), (0, None));
    assert_eq!(super::proven_bounds(&problem, &a, None, 0, None), (0, None));
    let mut priced = spec.clone();
    priced.pools[0].cost_per_gpu_hour = Some(2.4);
    let problem = crate::plan::problem::build(&priced, &catalog);
    let a = crate::plan::assign::ffd(&problem).expect("first fit plans");
    let (gpus, cost) = super::proven_bounds(&problem, &a, Some(a.cost(&problem)), 0, Some(1.0));
    assert_eq!(gpus, 0);
    assert!(cost.is_some_and(|c| (c - 2.4).abs() < 1e-9), "{cost:?}");
    let kept = super::proven_bounds(&problem, &a, Some(2.0 * a.cost(&problem)), 0, Some(1.0));
    assert_eq!(kept, (0, Some(1.0)));
}

#[test]
fn spread_gpu_replicas_on_one_node_plan_on_two_gpus() {
    let spec = docs_example();
    let catalog = Catalog::builtin();
    let plan = crate::plan::plan(&spec, &catalog).expect("plans");
    let violations = crate::verify::check(&spec, &catalog, &plan);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(plan.quality.gpus.used, 2, "{:?}", plan.pools);
    let reasons: Vec<&String> = plan.models.iter().flat_map(|m| &m.reasons).collect();
    assert!(
        reasons.iter().all(|r| !r.contains("first fit placed") && !r.contains("exhaustive")),
        "{reasons:?}"
    );
}

/// Issue 23: any manifest for which some strategy of the planner finds a plan compiles. Over
/// stress fleets of 8 and 16 GPUs (priced with compute shares, and the time-sliced family priced
/// or not, at a fill where some have no plan), whenever first fit, first fit in other orders or
/// its backtracking search finds an assignment, `plan` returns a plan. (The unpriced mixed family
/// is left out here: its microlp solves take tens of seconds each in a debug build; the stress
/// benchmark covers it.)
#[test]
fn any_manifest_some_strategy_plans_compiles() {
    use crate::bench::stress::{Shape, fleet};
    let mut planned = 0;
    for seed in 0..5 {
        for gpus in [8, 16] {
            for (priced, compute, time_sliced) in
                [(true, true, false), (false, true, true), (true, true, true)]
            {
                let shape = Shape { gpus, priced, compute, fill: 0.8, time_sliced };
                let (spec, catalog) = fleet(shape, seed);
                let problem = crate::plan::problem::build(&spec, &catalog);
                if crate::plan::infeasible::unservable(&problem).has_errors() {
                    continue;
                }
                let found = crate::plan::assign::ffd(&problem).is_some()
                    || crate::plan::assign::ffd_reordered(&problem).is_some()
                    || crate::plan::assign::ffd_search(&problem).is_ok();
                let result = crate::plan::plan(&spec, &catalog);
                if found {
                    planned += 1;
                    assert!(
                        result.is_ok(),
                        "{shape:?} seed {seed}: a strategy found a plan, the planner failed: {:?}",
                        result.err()
                    );
                }
            }
        }
    }
    assert!(planned > 12, "only {planned} fleets had a plan: the test would prove little");
}

/// Issue 23: more capacity never gives a dearer plan. Over stress fleets of 8 GPUs (the families
/// of the test above), each fleet is planned as generated and with one more node in one of its
/// pools; where both plans are proven (`optimal` or `model-optimal`: the larger fleet's model
/// holds every plan of the smaller one, its added node unused), the larger fleet's objective
/// (cost when priced, else GPUs) is at most the smaller's, and a fleet that plans still plans
/// with the node added. On larger fleets, where plans are not proven, the stress benchmark's
/// `--monotone` column reports it.
#[test]
fn a_node_more_never_gives_a_dearer_proven_plan() {
    use crate::bench::stress::{Shape, fleet};
    use crate::plan::Proof;
    use crate::spec::Nodes;
    let objective = |p: &crate::plan::Plan| p.quality.cost.used.unwrap_or(f64::from(p.quality.gpus.used));
    let mut compared = 0;
    for seed in 0..6 {
        for (priced, compute, time_sliced) in [(true, true, false), (false, true, true), (true, true, true)] {
            let shape = Shape { gpus: 8, priced, compute, fill: 0.6, time_sliced };
            let (spec, catalog) = fleet(shape, seed);
            let Ok(small) = crate::plan::plan(&spec, &catalog) else { continue };
            let mut larger = spec.clone();
            let pi = (seed as usize) % larger.pools.len();
            let pool = &mut larger.pools[pi];
            if let Nodes::Named(names) = &mut pool.nodes {
                names.push(format!("{}-added", pool.name));
            }
            let large = crate::plan::plan(&larger, &catalog);
            let large = large.unwrap_or_else(|e| {
                panic!("{shape:?} seed {seed}: planned, and failed with a node more: {e:?}")
            });
            if small.quality.proof == Proof::Unproven || large.quality.proof == Proof::Unproven {
                continue;
            }
            compared += 1;
            let (before, after) = (objective(&small), objective(&large));
            assert!(
                after <= before + 1e-6,
                "{shape:?} seed {seed}: {before} before, {after} with a node more in pool {pi}"
            );
        }
    }
    assert!(compared >= 6, "only {compared} fleets compared: the test would prove little");
}

/// A small fleet on one L4 pool allowing `mps` and `timeSlicing` (as
/// `tests/fixtures/mps/per-node.yaml`): two models MPS packs four to a GPU, one refusing MPS.
fn mps_fleet() -> (crate::spec::Spec, Catalog) {
    use crate::bench;
    let latency = crate::spec::Latency { p99_ms: 25.0, baseline_ms: Some(10.0), baseline_gpu: None };
    let models = ["asr", "tts", "guardrails"]
        .iter()
        .map(|n| {
            let mut m = bench::model(n, 4_096, 0.15, 4);
            m.isolation = crate::spec::Isolation::Shared;
            m.latency = (*n != "guardrails").then_some(latency.clone());
            m.allow_mps = *n != "guardrails";
            m
        })
        .collect();
    let mut pool = bench::pool("l4", bench::L4, 2, (1..=6).map(|n| format!("l4-{n}")).collect());
    pool.sharing.mps = true;
    (bench::spec("mps", vec![pool], models), bench::catalog())
}

#[test]
fn without_mps_keeps_the_cheaper_plan_the_mps_one_on_ties_and_skips_proven_plans() {
    use crate::plan::assign::{self, Dev};
    use crate::plan::strategy::{self, Candidate, Inputs, Method, Step};
    let (spec, catalog) = mps_fleet();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let plain_spec = strategy::spec_without_mps(&spec).expect("the pool allows `mps`");
    assert!(plain_spec.pools.iter().all(|p| !p.sharing.mps && p.sharing.time_slicing));
    let plain = crate::plan::problem::build(&plain_spec, &catalog);
    let good = assign::ffd(&plain).expect("first fit plans without MPS");
    // The same plan with one idle GPU switched on: a dearer plan "with MPS".
    let mut worse = good.clone();
    let idle = worse.pools[0].nodes.iter_mut().flat_map(|n| n.gpus.iter_mut()).find(|d| **d == Dev::Unused);
    *idle.expect("an idle GPU") = Dev::Whole { tenant: None };
    let valid = crate::plan::bounds::LowerBound { gpus: 0, cost_per_hour: None };
    let inputs = Inputs {
        goal: crate::plan::milp::Goal::Bound,
        guide: None,
        relaxed: None,
        bound: None,
        large: false,
        preferred: None,
        valid: &valid,
        planner: None,
        improve: true,
    };
    let mut tracer = crate::plan::Tracer { out: None, t0: std::time::Instant::now() };
    let candidate = |a: &assign::Assignment, proved| Candidate {
        assignment: a.clone(),
        method: Method::FfdKeptNoSolution,
        proved,
        searched: false,
        proven: None,
        sound: None,
    };
    let plain_plan = || Some(Candidate { method: Method::FfdBeatOptimiser, ..candidate(&good, true) });
    let kept =
        strategy::without_mps(&problem, &inputs, candidate(&worse, false), |_| plain_plan(), &mut tracer);
    assert_eq!(kept.assignment.gpus_used(), good.gpus_used());
    assert!(!kept.proved);
    assert!(matches!(kept.method, Method::Then { by: Step::WithoutMps, .. }), "{:?}", kept.method);
    assert!(kept.method.sentence().contains("without MPS"), "{}", kept.method.sentence());
    // A tie keeps the plan with MPS.
    let kept =
        strategy::without_mps(&problem, &inputs, candidate(&good, false), |_| plain_plan(), &mut tracer);
    assert_eq!(kept.method, Method::FfdKeptNoSolution);
    // A proven plan is not planned again.
    let mut asked = false;
    let kept = strategy::without_mps(
        &problem,
        &inputs,
        candidate(&worse, true),
        |_| {
            asked = true;
            None
        },
        &mut tracer,
    );
    assert!(!asked && kept.assignment.gpus_used() == worse.gpus_used());
}

/// Issue 23: the 128-GPU stress fleet "mixed, compute", seed 2 (`stress --sizes 128 --fill 0.4`),
/// on which first fit finds nothing and the optimiser's optimal counts (61 GPUs) lay out on no
/// node, plans: the MILP's `spread: gpu` rows for models that share a MIG profile, or the
/// backtracking lay-out of its replica choices, gives a plan, which passes the verifier and
/// is no cheaper than the bounds it reports.
#[test]
fn the_stress_fleet_whose_optimal_counts_lay_out_nowhere_plans() {
    use crate::bench::stress::{Shape, fleet};
    let shape = Shape { gpus: 128, priced: false, compute: true, fill: 0.4, time_sliced: false };
    let (spec, catalog) = fleet(shape, 2);
    let problem = crate::plan::problem::build(&spec, &catalog);
    assert!(crate::plan::assign::ffd(&problem).is_none(), "first fit plans it: the test would prove little");
    let plan = crate::plan::plan(&spec, &catalog).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(crate::verify::check(&spec, &catalog, &plan).len(), 0);
    let q = &plan.quality;
    assert!(
        q.gpus.lower_bound <= q.gpus.model_lower_bound && q.gpus.model_lower_bound <= q.gpus.used,
        "{q:?}"
    );
}

/// A model's `gpuTypes` resolve through the catalog in the planner and the bounds as in the
/// verifier: an alias names the pool's GPU (the spec stage stores catalog ids; a `Spec` built by other
/// code may hold an alias, and the planner compared catalog ids only).
#[test]
fn a_gpu_type_alias_allows_the_pools_gpu_in_the_planner_and_the_bounds() {
    let pool = crate::bench::pool("a100", crate::bench::A100, 2, vec!["n1".to_owned()]);
    let mut m = crate::bench::model("asr", 8_192, 0.2, 2);
    m.gpu_types = vec!["a100-80gb-sxm".to_owned()];
    let spec = crate::bench::spec("alias", vec![pool], vec![m]);
    let catalog = crate::bench::catalog();
    let problem = crate::plan::problem::build(&spec, &catalog);
    assert!(!problem.models[0].options.is_empty(), "{:?}", problem.models[0].rejected);
    let plan = crate::plan::plan(&spec, &catalog).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(crate::verify::check(&spec, &catalog, &plan).len(), 0);
    assert!(plan.quality.gpus.lower_bound >= 1 && plan.quality.gpus.lower_bound <= plan.quality.gpus.used);
}

/// Large programs get a node budget in proportion to their columns (issue 23, ninth round):
/// the 1,024-GPU stress fleet's 5,881 columns leave 102 nodes, a solve with more work
/// multiplies it, and programs that are not large keep the full limit.
#[cfg(feature = "highs")]
#[test]
fn a_large_program_explores_nodes_in_proportion_to_its_columns() {
    use crate::plan::milp::{PER_NODE_COLUMN_NODES, column_budget, highs_node_limit};
    assert_eq!(highs_node_limit(5_881, true, 1), 102);
    assert_eq!(highs_node_limit(5_881, true, 8), 816);
    assert_eq!(highs_node_limit(5_881, false, 1), 50_000);
    assert_eq!(highs_node_limit(60_000, true, 1), 10);
    assert_eq!(highs_node_limit(10_000_000, true, 1), 1, "at least the root's node");
    // The program per node: four times a large program's budget (issue 23's 100-GPU fleet of
    // six types, "mixed" seed 2: 3,242 columns).
    assert_eq!(column_budget(3_242, PER_NODE_COLUMN_NODES), 740);
    assert_eq!(column_budget(10, PER_NODE_COLUMN_NODES), 50_000, "at most HiGHS's node limit");
    assert_eq!(highs_node_limit(0, true, 1), 50_000, "never above the usual limit");
}

/// Issue 23: a priced program's cost proven by HiGHS's dual bound (a stop inside the relative
/// gap, less than one price step below the plan) is the cost a zero-gap solve finds, and the
/// floor the dual bound gives is never above it, on priced stress fleets of 32 to 64 GPUs
/// (widened to every layout a plan may trim to, `problem::widened`, where their programs prove).
#[cfg(feature = "highs")]
#[test]
fn a_cost_the_dual_bound_proves_is_the_zero_gap_optimum() {
    use crate::bench::stress::{Shape, fleet};
    use crate::plan::milp::{Goal, MilpError, Pins, solve, solve_exact};
    let (mut proven, mut solved) = (0, 0);
    for (gpus, compute, time_sliced, seed) in [
        (32, false, false, 0),
        (48, true, false, 1),
        (64, false, false, 2),
        (64, true, false, 3),
        (48, true, true, 0),
        (64, true, true, 3),
    ] {
        let shape = Shape { gpus, priced: true, compute, fill: 0.4, time_sliced };
        let (spec, catalog) = fleet(shape, seed);
        // Widened, so that the program's rows hold for every plan and it proves something.
        let problem = crate::plan::problem::widened(&crate::plan::problem::build(&spec, &catalog));
        let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
        let (r, exact) = match (solve(&problem, goal, &Pins::new()), solve_exact(&problem, goal)) {
            (Ok(r), Ok(exact)) => (r, exact),
            (Err(MilpError::Infeasible), Err(MilpError::Infeasible)) => continue,
            (r, exact) => panic!("{gpus} GPUs, seed {seed}: {:?}, {:?}", r.err(), exact.err()),
        };
        solved += 1;
        assert!(exact.optimal, "{gpus} GPUs, seed {seed}: the zero-gap solve stopped early");
        let floor = r.floor.expect("HiGHS gives a dual bound");
        assert!(floor <= exact.cost + 1e-9, "{gpus} GPUs, seed {seed}: floor {floor} above {}", exact.cost);
        if r.optimal {
            proven += 1;
            assert!(
                (r.cost - exact.cost).abs() < 1e-6,
                "{gpus} GPUs, seed {seed}: {} proven, {}",
                r.cost,
                exact.cost
            );
        }
    }
    assert!(solved >= 3 && proven > 0, "{solved} solved, {proven} proven: the test checks little");
}

/// Issue 23: a solve stopped at a node limit, either solver, gives a floor (HiGHS's dual bound,
/// microlp's best bound) that is never above the optimum a zero-gap solve finds, and a cost it
/// calls proven is that optimum, on small priced and unpriced stress fleets.
#[test]
fn a_floor_at_a_node_limit_is_never_above_the_optimum() {
    use crate::bench::stress::{Shape, fleet};
    use crate::plan::milp::{Goal, solve_exact, solve_with_nodes};
    let (mut floors, mut compared) = (0, 0);
    for (gpus, priced, compute, seed) in
        [(16, true, false, 1), (16, false, true, 2), (24, true, true, 3), (32, true, false, 4)]
    {
        let shape = Shape { gpus, priced, compute, fill: 0.4, time_sliced: false };
        let (spec, catalog) = fleet(shape, seed);
        let problem = crate::plan::problem::widened(&crate::plan::problem::build(&spec, &catalog));
        let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
        let Ok(exact) = solve_exact(&problem, goal) else { continue };
        if !exact.optimal {
            continue;
        }
        compared += 1;
        for nodes in [1, 16, 256] {
            let Ok(r) = solve_with_nodes(&problem, goal, nodes) else { continue };
            if let Some(floor) = r.floor {
                floors += 1;
                assert!(
                    floor <= exact.cost + 1e-9,
                    "{gpus} GPUs, seed {seed}, {nodes} nodes: floor {floor} above {}",
                    exact.cost
                );
            }
            if r.optimal {
                assert!(
                    (r.cost - exact.cost).abs() < 1e-6,
                    "{gpus} GPUs, seed {seed}, {nodes} nodes: {} proven, {}",
                    r.cost,
                    exact.cost
                );
            }
        }
    }
    assert!(
        compared >= 2 && floors >= 3,
        "{compared} fleets compared, {floors} floors: the test checks little"
    );
}

/// The program per node: each named node of a pool without layouts running today becomes a
/// pool of its own (options copied per node, consecutive nodes of one pool paired as twins);
/// an autoscaled pool stays whole; an assignment of the split problem maps back node for node
/// at the same cost.
#[test]
fn the_split_problem_has_a_pool_per_named_node_and_merges_back() {
    use crate::plan::problem::build;
    let mut auto = crate::bench::pool("l4", "L4", 2, Vec::new());
    auto.nodes = crate::spec::Nodes::Autoscaled { min: 0, max: 2 };
    let a100 = crate::bench::pool(
        "a100",
        "A100-SXM4-80GB",
        2,
        vec!["n2".to_owned(), "n1".to_owned(), "n3".to_owned()],
    );
    let mut spread = crate::bench::model("s", 8 * 1024, 0.0, 3);
    spread.spread = crate::spec::Spread::Node;
    let models = vec![spread, crate::bench::model("m", 18 * 1024, 0.0, 4)];
    let spec = crate::bench::spec("t", vec![a100, auto], models);
    let catalog = Catalog::builtin();
    let problem = build(&spec, &catalog);
    let split = crate::plan::per_node::split(&problem).expect("a pool of three named nodes splits");
    let names: Vec<(&str, Vec<String>)> =
        split.problem.pools.iter().map(|p| (p.name(), p.named.clone())).collect();
    assert_eq!(
        names,
        [
            ("a100", vec!["n1".to_owned()]),
            ("a100", vec!["n2".to_owned()]),
            ("a100", vec!["n3".to_owned()]),
            ("l4", Vec::new())
        ]
    );
    assert_eq!(split.origin, [0, 0, 0, 1]);
    assert_eq!(split.twins, [(0, 1), (1, 2)]);
    for (m, s) in problem.models.iter().zip(&split.problem.models) {
        let per_pool = |pi: usize| m.options.iter().filter(|o| o.pool == pi).count();
        for (j, &pi) in split.origin.iter().enumerate() {
            assert_eq!(s.options.iter().filter(|o| o.pool == j).count(), per_pool(pi), "{} on {j}", m.name());
        }
    }
    let a = crate::plan::assign::ffd(&split.problem).expect("first fit plans the split problem");
    let merged = split.merge(problem.pools.len(), a.clone());
    assert_eq!(merged.pools[0].nodes.len(), 3);
    assert_eq!((merged.gpus_used(), merged.cost(&problem)), (a.gpus_used(), a.cost(&split.problem)));
    let total = |r: &std::collections::BTreeMap<_, u32>| r.values().sum::<u32>();
    assert_eq!(total(&merged.replicas), total(&a.replicas));
    assert!(merged.replicas.keys().all(|k| k.1 < problem.pools.len()));
}

/// A plan cut node by node (the program per node's start): each node's replicas go to its own
/// one-node pool, nodes in order of decreasing GPUs used (the twins' rows), a multi-GPU
/// replica counted once; summed per pool they are the plan's replicas.
#[test]
fn a_plan_cut_per_node_keeps_each_nodes_replicas_fullest_node_first() {
    let a100 = crate::bench::pool(
        "a100",
        "A100-SXM4-80GB",
        4,
        vec!["n1".to_owned(), "n2".to_owned(), "n3".to_owned()],
    );
    let l4 = crate::bench::pool("l4", "L4", 2, vec!["m1".to_owned()]);
    let mut pair = crate::bench::model("pair", 100 * 1024, 0.0, 2);
    pair.gpus = Some(2);
    pair.pools = vec!["a100".to_owned()];
    let mut spread = crate::bench::model("s", 8 * 1024, 0.0, 3);
    spread.spread = crate::spec::Spread::Node;
    let models = vec![pair, spread, crate::bench::model("m", 18 * 1024, 0.0, 5)];
    let spec = crate::bench::spec("t", vec![a100, l4], models);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let split = crate::plan::per_node::split(&problem).expect("a pool of three named nodes splits");
    let mut a = crate::plan::assign::ffd(&problem).expect("first fit plans it");
    // The fullest node last, so that the cut must reorder.
    a.pools[0].nodes.reverse();
    let fullest = a.pools[0].nodes.iter().max_by_key(|n| n.gpus_used()).expect("three nodes");
    assert!(fullest.gpus_used() > a.pools[0].nodes[0].gpus_used(), "the test needs an unequal first node");
    let cut = split.cut(&problem, &a);
    let mut summed = std::collections::BTreeMap::new();
    for (&(m, j, kind), &n) in &cut {
        *summed.entry((m, split.origin[j], kind)).or_insert(0u32) += n;
    }
    assert_eq!(summed, a.replicas);
    let first: std::collections::BTreeMap<_, _> =
        cut.iter().filter(|(k, _)| k.1 == 0).map(|(&(m, _, kind), &n)| ((m, kind), n)).collect();
    assert_eq!(first, fullest.replicas(&problem));
    let pair = problem.models.iter().position(|m| m.name() == "pair").expect("the model pair");
    let pairs: u32 = cut
        .iter()
        .filter(|(k, _)| k.0 == pair && k.2 == crate::plan::problem::Kind::Whole(2))
        .map(|(_, &n)| n)
        .sum();
    assert_eq!(pairs, 2, "two replicas of two GPUs each: {cut:?}");
}

/// A neighbourhood of a plan ([`crate::plan::milp::solve_neighbourhood`]) keeps every held
/// node's replicas as the plan has them, zero where it has none, and places the rest on the
/// free node: here three replicas on node 0, where the program alone would use two nodes (it
/// counts nodes).
#[test]
fn a_neighbourhood_holds_every_other_nodes_replicas() {
    let names = vec!["n1".to_owned(), "n2".to_owned(), "n3".to_owned()];
    let a100 = crate::bench::pool("a100", "A100-SXM4-80GB", 4, names);
    let spec = crate::bench::spec("t", vec![a100], vec![crate::bench::model("m", 78 * 1024, 0.0, 6)]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let split = crate::plan::per_node::split(&problem).expect("a pool of three named nodes splits");
    let kind =
        split.problem.models[0].options.iter().find(|o| o.pool == 1).expect("an option on node 1").kind;
    let plan: crate::plan::milp::Pins = [((0, 1, kind), 2), ((0, 2, kind), 1)].into_iter().collect();
    let free = std::collections::BTreeSet::from([0]);
    let goal = crate::plan::milp::Goal::Plan { cost_bound: None, gpu_floor: None };
    let r =
        crate::plan::milp::solve_neighbourhood(&split.problem, goal, plan.clone(), &free).expect("it solves");
    let held: crate::plan::milp::Pins =
        r.replicas.iter().filter(|(k, n)| k.1 != 0 && **n > 0).map(|(&k, &n)| (k, n)).collect();
    assert_eq!(held, plan, "the held nodes as the plan has them");
    let on_free: u32 = r.replicas.iter().filter(|(k, _)| k.1 == 0).map(|(_, &n)| n).sum();
    assert_eq!(on_free, 3, "{:?}", r.replicas);
    assert!(!r.optimal && r.floor.is_none(), "a neighbourhood proves nothing");
}

/// The exact rows bound every plan only on the candidates of
/// [`crate::plan::per_node::Split::with_spread_layouts`]: on a split without them the program
/// per node's result is a restriction (no optimum, no floor), on one with them it proves.
/// HiGHS, as the step per node.
#[cfg(feature = "highs")]
#[test]
fn the_exact_rows_prove_only_on_the_spread_layouts() {
    use crate::plan::milp::{Goal, NodeRows, Pins};
    let names = vec!["n1".to_owned(), "n2".to_owned()];
    let a100 = crate::bench::pool("a100", "A100-SXM4-80GB", 2, names);
    let mut by_gpu = crate::bench::model("by-gpu", 9 * 1024, 0.0, 3);
    by_gpu.spread = crate::spec::Spread::Gpu;
    let spec = crate::bench::spec("t", vec![a100], vec![by_gpu]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let plain = crate::plan::per_node::split(&problem).expect("a pool of two named nodes splits");
    let exact = plain.clone().with_spread_layouts();
    assert!(!plain.spread_layouts && exact.spread_layouts);
    let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
    let on_plain = plain.solve(goal, &Pins::new(), NodeRows::Exact, Pins::new(), 1).expect("it solves");
    assert!(!on_plain.optimal && on_plain.floor.is_none(), "a restriction proves nothing");
    let on_exact = exact.solve(goal, &Pins::new(), NodeRows::Exact, Pins::new(), 1).expect("it solves");
    assert!(on_exact.optimal, "a small program per node is solved to optimality");
    assert!((on_exact.cost - on_plain.cost).abs() < 1e-9, "{} against {}", on_exact.cost, on_plain.cost);
}

/// No pool splits where none has two named nodes, or where every multi-node pool runs a
/// layout today (its nodes are not interchangeable, and the day-2 re-plan owns them).
#[test]
fn a_problem_without_a_splittable_pool_is_not_split() {
    let one = crate::bench::pool("a100", "A100-SXM4-80GB", 2, vec!["n1".to_owned()]);
    let spec = crate::bench::spec("t", vec![one], vec![crate::bench::model("m", 8 * 1024, 0.0, 2)]);
    let catalog = Catalog::builtin();
    assert!(crate::plan::per_node::split(&crate::plan::problem::build(&spec, &catalog)).is_none());
    let mut two = crate::bench::pool("a100", "A100-SXM4-80GB", 2, vec!["n1".to_owned(), "n2".to_owned()]);
    two.current = vec![crate::spec::CurrentNode {
        node: "n1".to_owned(),
        gpus: vec![vec!["3g.40gb".to_owned(), "4g.40gb".to_owned()], Vec::new()],
    }];
    let spec = crate::bench::spec("t", vec![two], vec![crate::bench::model("m", 8 * 1024, 0.0, 2)]);
    assert!(crate::plan::per_node::split(&crate::plan::problem::build(&spec, &catalog)).is_none());
}

/// The models of the property tests over small fleets: per model (GiB of memory, compute in
/// twentieths, replicas, isolation index, spread index).
fn generated_models(params: &[(u64, u32, u32, u8, u8)]) -> Vec<crate::spec::Model> {
    params
        .iter()
        .enumerate()
        .map(|(i, &(gib, twentieths, replicas, isolation, spread))| {
            let mut m =
                crate::bench::model(&format!("m{i}"), gib * 1024, f64::from(twentieths) / 20.0, replicas);
            m.isolation = [
                crate::spec::Isolation::Shared,
                crate::spec::Isolation::Hardware,
                crate::spec::Isolation::Dedicated,
            ][usize::from(isolation)];
            m.spread = [crate::spec::Spread::None, crate::spec::Spread::Gpu, crate::spec::Spread::Node]
                [usize::from(spread)];
            m
        })
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: cases(), ..Default::default() })]

    /// Why the program per node bounds every plan (`per_node`'s module header): a plan, cut
    /// node by node and its nodes renumbered by decreasing GPUs, meets every row of the split
    /// program, with either set of `spread: gpu` rows. First fit's plan of the split problem
    /// (valid: the placement routine keeps every node rule) with its spread models pinned node
    /// by node and its cost as a cap must leave the program feasible, at most that cost.
    #[test]
    fn a_first_fit_plan_cut_per_node_is_a_solution_of_the_program_per_node(
        pools in proptest::collection::vec((proptest::bool::weighted(0.75), 2u32..=3, 1u32..=4), 1..=2),
        params in proptest::collection::vec((1u64..=40, 0u32..=12, 1u32..=3, 0u8..3, 0u8..3), 1..=5),
    ) {
        use crate::plan::milp::{Goal, NodeRows, Pins};
        let pools = pools
            .iter()
            .enumerate()
            .map(|(i, &(a100, nodes, per_node))| {
                let names = (1..=nodes).map(|n| format!("p{i}-n{n}")).collect();
                crate::bench::pool(&format!("p{i}"), if a100 { "A100-SXM4-80GB" } else { "L4" }, per_node, names)
            })
            .collect();
        let models = generated_models(&params);
        let spec = crate::bench::spec("p", pools, models);
        let catalog = Catalog::builtin();
        let problem = crate::plan::problem::build(&spec, &catalog);
        let split = crate::plan::per_node::split(&problem).expect("a pool of two or more named nodes splits");
        let Some(a) = crate::plan::assign::ffd(&split.problem) else { return Ok(()) };
        // Renumber each pool's nodes by decreasing GPUs used (stable), as the twins' rows ask.
        let used = |j: usize| a.pools[j].nodes.iter().flat_map(|n| &n.gpus).filter(|d| **d != crate::plan::assign::Dev::Unused).count();
        let mut to = vec![0; split.origin.len()];
        for pi in 0..problem.pools.len() {
            let mut mine: Vec<usize> = (0..split.origin.len()).filter(|&j| split.origin[j] == pi).collect();
            let slots = mine.clone();
            mine.sort_by_key(|&j| std::cmp::Reverse(used(j)));
            for (slot, j) in slots.into_iter().zip(mine) {
                to[j] = slot;
            }
        }
        let pins: Pins = a.replicas.iter().map(|(&(m, j, kind), &n)| ((m, to[j], kind), n)).collect();
        let cost = a.cost(&split.problem);
        let goal = Goal::Plan { cost_bound: Some(cost), gpu_floor: None };
        let exact = split.clone().with_spread_layouts();
        for (rows, split) in [(NodeRows::Exact, &exact), (NodeRows::Trimmed, &split)] {
            match split.solve(goal, &pins, rows, Pins::new(), 1) {
                Ok(r) => proptest::prop_assert!(r.cost <= cost + 1e-6, "{rows:?}: {} above first fit's {cost}", r.cost),
                Err(e) => proptest::prop_assert!(false, "first fit's plan is no solution of the program per node ({rows:?}): {e:?}"),
            }
        }
    }
}

/// The cascade's step per node (HiGHS): a plan far above the planner's bound (first fit's,
/// with two idle GPUs switched on) is replaced by the program per node's counts laid out on
/// the split problem and mapped back node for node; the plan passes the verifier, its method
/// says how it was found, and a plan within the target is left alone.
#[cfg(feature = "highs")]
#[test]
fn the_program_per_node_replaces_a_plan_outside_the_target_with_one_that_verifies() {
    use crate::plan::assign::{self, Dev};
    use crate::plan::milp::{Goal, Pins, solve};
    use crate::plan::strategy::{self, Candidate, Inputs, Method};
    let nodes = (1..=4).map(|n| format!("n{n}")).collect();
    let pool = crate::bench::pool("a100", "A100-SXM4-80GB", 2, nodes);
    let mut by_node = crate::bench::model("by-node", 8 * 1024, 0.0, 3);
    by_node.spread = crate::spec::Spread::Node;
    let mut by_gpu = crate::bench::model("by-gpu", 30 * 1024, 0.0, 2);
    by_gpu.spread = crate::spec::Spread::Gpu;
    let models = vec![by_node, by_gpu, crate::bench::model("plain", 18 * 1024, 0.0, 4)];
    let spec = crate::bench::spec("t", vec![pool], models);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let good = assign::ffd(&problem).expect("first fit plans it");
    let mut worse = good.clone();
    for _ in 0..2 {
        let idle =
            worse.pools[0].nodes.iter_mut().flat_map(|n| n.gpus.iter_mut()).find(|d| **d == Dev::Unused);
        *idle.expect("an idle GPU") = Dev::Whole { tenant: None };
    }
    let relaxed = solve(&problem, Goal::Bound, &Pins::new()).expect("the relaxation solves");
    let valid = crate::plan::bounds::valid_bound(&problem);
    let inputs = Inputs {
        goal: Goal::Plan { cost_bound: None, gpu_floor: None },
        guide: Some(&relaxed),
        relaxed: Some(&relaxed),
        bound: Some(relaxed.cost),
        large: false,
        preferred: None,
        valid: &valid,
        planner: None,
        improve: true,
    };
    let mut tracer = crate::plan::Tracer { out: None, t0: std::time::Instant::now() };
    let candidate = |a: &assign::Assignment| Candidate {
        assignment: a.clone(),
        method: Method::FfdKeptNoSolution,
        proved: false,
        searched: false,
        proven: None,
        sound: None,
    };
    assert!(worse.gpus_used() as f64 > relaxed.objective + 1.0, "the plan must be outside the target");
    let c = strategy::per_node(&problem, &inputs, candidate(&worse), &mut tracer);
    assert!(c.assignment.gpus_used() < worse.gpus_used(), "{} GPUs", c.assignment.gpus_used());
    assert!(matches!(c.method, Method::PerNode { .. }), "{:?}", c.method);
    assert!(c.method.sentence().contains("node by node"), "{}", c.method.sentence());
    assert_eq!(c.assignment.pools[0].nodes.len(), 4);
    let figures = crate::plan::build::Figures {
        valid,
        model: crate::plan::bounds::LowerBound { gpus: 0, cost_per_hour: None },
        solver_proved: c.proved,
        ffd: None,
        method: c.method.sentence(),
    };
    let plan = crate::plan::build::build(&problem, &c.assignment, &figures).expect("the plan builds");
    let violations = crate::verify::check(&spec, &catalog, &plan);
    assert!(violations.is_empty(), "{violations:?}");
    // Within the target of the relaxation: nothing to do.
    let kept = strategy::per_node(&problem, &inputs, candidate(&c.assignment), &mut tracer);
    assert_eq!(kept.method, Method::FfdKeptNoSolution);
}

/// Two replicas of a model on `1g.10gb` instances of two GPUs of one node: the search that
/// empties GPUs moves the second GPU's replica to an instance added to the first GPU's layout,
/// and the plan uses one GPU with the same replicas.
#[test]
fn emptying_a_gpu_moves_its_replicas_to_room_on_the_gpus_in_use() {
    use crate::plan::assign::{Assignment, Dev, NodeA, PoolA, empty_gpus};
    use crate::plan::problem::Kind;
    let spec = one_a100_node(vec![crate::bench::model("x", 4 * 1024, 0.1, 2)]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let mig = |counts: [u8; 5], tenants: Vec<(usize, usize)>| Dev::Mig { counts: counts.to_vec(), tenants };
    let one = || mig([1, 0, 0, 0, 0], vec![(0, 0)]);
    let replicas = [((0, 0, Kind::Mig(0)), 2)].into_iter().collect();
    let a = Assignment {
        pools: vec![PoolA { nodes: vec![NodeA { gpus: vec![one(), one()] }] }],
        replicas,
        repaired: 0,
    };
    let b = empty_gpus(&problem, &a).expect("one GPU emptied");
    assert_eq!(b.gpus_used(), 1);
    let gpus: Vec<&Dev> = b.pools[0].nodes.iter().flat_map(|n| &n.gpus).collect();
    assert_eq!(gpus, [&mig([2, 0, 0, 0, 0], vec![(0, 0), (0, 0)]), &Dev::Unused]);
    assert_eq!(b.replicas, a.replicas);
}

/// The same two replicas of a `spread: gpu` model: on one GPU the device plugin could hand
/// both the same GPU, so no GPU is emptied.
#[test]
fn emptying_a_gpu_keeps_spread_gpu_replicas_apart() {
    use crate::plan::assign::{Assignment, Dev, NodeA, PoolA, empty_gpus};
    use crate::plan::problem::Kind;
    let mut s = crate::bench::model("s", 4 * 1024, 0.1, 2);
    s.spread = crate::spec::Spread::Gpu;
    let spec = one_a100_node(vec![s]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let one = || Dev::Mig { counts: vec![1, 0, 0, 0, 0], tenants: vec![(0, 0)] };
    let replicas = [((0, 0, Kind::Mig(0)), 2)].into_iter().collect();
    let a = Assignment {
        pools: vec![PoolA { nodes: vec![NodeA { gpus: vec![one(), one()] }] }],
        replicas,
        repaired: 0,
    };
    assert!(empty_gpus(&problem, &a).is_none());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: cases(), ..Default::default() })]

    /// The search that empties GPUs, from first fit's plans in every order of small fleets
    /// (A100 and L4 pools, priced or not, so that GPUs may open in a cheaper pool; models with
    /// compute, isolation and spread), the kicks around it, and pairs of nodes re-packed by
    /// their own programs: where any of them finds a cheaper plan, it is cheaper, every model
    /// keeps its replicas, and the plan passes the verifier.
    #[test]
    fn an_emptied_plan_is_cheaper_keeps_every_replica_and_verifies(
        pools in proptest::collection::vec((proptest::bool::weighted(0.6), 1u32..=3, 1u32..=4, 0u8..3), 1..=3),
        params in proptest::collection::vec((1u64..=40, 0u32..=12, 1u32..=4, 0u8..3, 0u8..3), 1..=6),
    ) {
        let pools = pools
            .iter()
            .enumerate()
            .map(|(i, &(a100, nodes, per_node, price))| {
                let names = (1..=nodes).map(|n| format!("p{i}-n{n}")).collect();
                let mut p = crate::bench::pool(&format!("p{i}"), if a100 { "A100-SXM4-80GB" } else { "L4" }, per_node, names);
                p.cost_per_gpu_hour = (price > 0).then_some(f64::from(price));
                p
            })
            .collect::<Vec<_>>();
        // Prices on every pool or none.
        let priced = pools.iter().all(|p| p.cost_per_gpu_hour.is_some());
        let pools = pools
            .into_iter()
            .map(|mut p| {
                if !priced {
                    p.cost_per_gpu_hour = None;
                }
                p
            })
            .collect();
        let models = generated_models(&params);
        let spec = crate::bench::spec("p", pools, models);
        let catalog = Catalog::builtin();
        let problem = crate::plan::problem::build(&spec, &catalog);
        let starts = crate::plan::assign::ffd_every_order(&problem);
        let emptied = starts.iter().map(|a| (a, crate::plan::assign::empty_gpus(&problem, a)));
        // And the kicks around it, fewer than the planner gives (the test's time).
        let kicked = starts.iter().map(|a| (a, crate::plan::assign::KickBudget::new().kicked(&problem, a, 40, |_| false)));
        // And pairs of nodes re-packed by their own programs.
        let repacked = starts
            .iter()
            .map(|a| (a, crate::plan::repack::repacked(&problem, a, |_| false)));
        for (a, b) in emptied.chain(kicked).chain(repacked) {
            let Some(b) = b else { continue };
            proptest::prop_assert!(b.cost(&problem) < a.cost(&problem) - 1e-9, "{} not below {}", b.cost(&problem), a.cost(&problem));
            proptest::prop_assert_eq!(replicas_per_model(&b), replicas_per_model(a));
            let verified = built_and_verified(&spec, &catalog, &problem, &b);
            proptest::prop_assert!(verified.is_ok(), "{:?}", verified.err());
        }
    }
}

/// The pure-Rust build's last word before `planner-failed` (`milp::solve_every_row`): the
/// program with every row says "infeasible" for three 70 GiB replicas on one node of two
/// A100s, and not for two.
#[test]
fn the_program_with_every_row_proves_an_overfull_node_infeasible() {
    let catalog = Catalog::builtin();
    let of = |replicas| one_a100_node(vec![crate::bench::model("x", 70 * 1024, 0.0, replicas)]);
    let (three, two) = (of(3), of(2));
    assert!(matches!(
        crate::plan::milp::solve_every_row(&crate::plan::problem::build(&three, &catalog)),
        Err(crate::plan::milp::MilpError::Infeasible)
    ));
    assert!(crate::plan::milp::solve_every_row(&crate::plan::problem::build(&two, &catalog)).is_ok());
}

/// The program with every row keeps its proof where a plan may trim a GPU below the candidate
/// layouts: the 128-GPU stress fleet "mixed", seed 1 (fill 0.4), which HiGHS proves infeasible,
/// is infeasible on the problem widened to every layout a plan may trim to only with the
/// `spread: gpu` rows, and the pure-Rust build said `planner-failed` when the widened re-solve
/// left them out.
#[test]
fn the_program_with_every_row_proves_a_trim_sensitive_fleet_infeasible() {
    use crate::bench::stress::{Shape, fleet};
    let shape = Shape { gpus: 128, priced: false, compute: false, fill: 0.4, time_sliced: false };
    let (spec, catalog) = fleet(shape, 1);
    let problem = crate::plan::problem::build(&spec, &catalog);
    assert!(crate::plan::problem::trims_matter(&problem), "the fleet's layouts trim below their candidates");
    assert!(matches!(
        crate::plan::milp::solve_every_row(&problem),
        Err(crate::plan::milp::MilpError::Infeasible)
    ));
}

/// The bound's relaxation carries the `spread: gpu` rows on MIG in both builds (the pure-Rust
/// build leaves them out of its integer programs on problems that are not small): on a 32-GPU
/// six-type stress fleet, which is not small, the relaxation's optimum is 16.5 GPUs, HiGHS's
/// and microlp's alike (the pure-Rust build's was 15.875 without them, so its model bound was a
/// GPU lower: 16 against 17).
#[test]
fn the_bounds_relaxation_has_the_spread_rows_in_both_builds() {
    use crate::bench::stress::{Shape, fleet_of_every_type};
    let shape = Shape { gpus: 32, priced: false, compute: false, fill: 0.4, time_sliced: false };
    let (spec, catalog) = fleet_of_every_type(shape, 2);
    let problem = crate::plan::problem::build(&spec, &catalog);
    assert!(!problem.small, "the fleet must not be small: small problems always have the rows");
    let relaxed =
        crate::plan::milp::solve(&problem, crate::plan::milp::Goal::Bound, &crate::plan::milp::Pins::new())
            .expect("a relaxation");
    assert!((relaxed.objective - 16.5).abs() < 1e-6, "relaxation {}", relaxed.objective);
}

/// A relaxation's counts rounded up ([`crate::plan::milp::MilpResult::counts_up`]) are whole,
/// at least its counts rounded to the nearest and at most one above each, and above some of
/// them where the relaxation is fractional (16.5 GPUs on this 32-GPU six-type stress fleet);
/// an integer program has none. The relaxation's lay-out keeps the cheaper of the two roundings.
#[test]
fn a_relaxations_counts_rounded_up_lie_within_one_above_the_nearest() {
    use crate::bench::stress::{Shape, fleet_of_every_type};
    use crate::plan::milp::{Goal, Pins, solve};
    let shape = Shape { gpus: 32, priced: false, compute: false, fill: 0.4, time_sliced: false };
    let (spec, catalog) = fleet_of_every_type(shape, 2);
    let problem = crate::plan::problem::build(&spec, &catalog);
    let relaxed = solve(&problem, Goal::Bound, &Pins::new()).expect("a relaxation");
    assert_eq!(relaxed.counts_up.len(), relaxed.counts.len());
    let pairs = |near: &crate::plan::milp::PoolCounts, up: &crate::plan::milp::PoolCounts| {
        let mut v: Vec<(u64, u64)> = near.layouts.iter().copied().zip(up.layouts.iter().copied()).collect();
        v.extend(near.ts.values().copied().zip(up.ts.values().copied()));
        v.extend(near.ts_nodes.values().copied().zip(up.ts_nodes.values().copied()));
        v.extend(near.mig_ts_nodes.values().copied().zip(up.mig_ts_nodes.values().copied()));
        v.extend(near.mig_ts.values().flatten().copied().zip(up.mig_ts.values().flatten().copied()));
        v.push((near.whole_nodes, up.whole_nodes));
        v.push((near.nodes, up.nodes));
        v
    };
    let all: Vec<(u64, u64)> =
        relaxed.counts.iter().zip(&relaxed.counts_up).flat_map(|(n, u)| pairs(n, u)).collect();
    assert!(all.iter().all(|&(n, u)| n <= u && u <= n + 1), "{all:?}");
    assert!(all.iter().any(|&(n, u)| u == n + 1), "the relaxation is fractional: some count rounds up");
    let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
    let integer = solve(&problem, goal, &Pins::new()).expect("a plan's counts");
    assert!(integer.counts_up.is_empty(), "an integer program's counts are whole already");
    let totals = crate::plan::rounding::exact_totals(&problem, &relaxed.replicas);
    let near = crate::plan::assign::decompose(&problem, &relaxed.counts, &totals, true).expect("a lay-out");
    let kept = crate::plan::strategy::relaxation_lay_out(&problem, &relaxed, &totals).expect("a lay-out");
    assert!(kept.cost(&problem) <= near.cost(&problem) + 1e-9);
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &kept), Ok(()));
}

/// Three models (one `spread: gpu` with dedicated GPUs) on one-GPU A100 nodes and three-GPU L4
/// nodes, where the search that empties GPUs stops above the best plan.
fn stuck_fleet() -> crate::spec::Spec {
    let pools = vec![
        crate::bench::pool("p0", "A100-SXM4-80GB", 1, (1..=3).map(|n| format!("p0-n{n}")).collect()),
        crate::bench::pool("p1", "L4", 3, (1..=2).map(|n| format!("p1-n{n}")).collect()),
    ];
    let models = generated_models(&[(21, 8, 3, 2, 1), (4, 0, 2, 0, 0), (14, 3, 2, 0, 0)]);
    crate::bench::spec("p", pools, models)
}

/// Where the search that empties GPUs stops, the kicks go on: first fit's plan of three models
/// (one `spread: gpu` with dedicated GPUs) on one-GPU A100 nodes and three-GPU L4 nodes,
/// emptied as far as single GPUs can leave, uses 6 GPUs; 200 kicks find a plan of fewer (4), with
/// every model's replicas, that the verifier accepts. (Found by drawing small fleets: kicks
/// beat the descent on about one in a hundred.)
#[test]
fn kicks_find_a_cheaper_plan_where_emptying_single_gpus_stops() {
    let spec = stuck_fleet();
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let first = crate::plan::assign::ffd_every_order(&problem).into_iter().next().expect("first fit plans");
    let emptied = crate::plan::assign::empty_gpus(&problem, &first).unwrap_or(first);
    let kicked = crate::plan::assign::KickBudget::new()
        .kicked(&problem, &emptied, 200, |_| false)
        .expect("a cheaper plan");
    assert_eq!(emptied.gpus_used(), 6);
    assert!(
        kicked.gpus_used() < emptied.gpus_used(),
        "{} against {}",
        kicked.gpus_used(),
        emptied.gpus_used()
    );
    assert_eq!(replicas_per_model(&kicked), replicas_per_model(&emptied));
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &kicked), Ok(()));
}

/// On a large program, a plan outside the target gets a few kicks after the search that
/// empties GPUs (`strategy::emptied`, issue 23: the pure-Rust build's 1,024-GPU stress fleets,
/// where the search alone stopped above the target): the stuck fleet marked large, first fit's
/// plan emptied as far as single GPUs leave (6 GPUs) and then kicked to 4, the optimum, which
/// the verifier accepts; the step is named in the plan's reasons. Within the target already,
/// the plan is kept as it is.
#[test]
fn a_large_programs_plan_outside_the_target_gets_kicks_after_the_search() {
    use crate::plan::strategy::{self, Candidate, Inputs, Method, Step};
    let spec = stuck_fleet();
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let first = crate::plan::assign::ffd_every_order(&problem).into_iter().next().expect("first fit plans");
    let searched = crate::plan::assign::empty_gpus(&problem, &first).unwrap_or_else(|| first.clone());
    assert_eq!(searched.gpus_used(), 6, "the search alone must stop above the optimum");
    let valid = crate::plan::bounds::valid_bound(&problem);
    let inputs = |bound: f64| Inputs {
        goal: crate::plan::milp::Goal::Bound,
        guide: None,
        relaxed: None,
        bound: Some(bound),
        large: true,
        preferred: None,
        valid: &valid,
        planner: None,
        improve: true,
    };
    let candidate = || Candidate {
        assignment: first.clone(),
        method: Method::FfdKeptNoSolution,
        proved: false,
        searched: false,
        proven: None,
        sound: None,
    };
    let mut tracer = crate::plan::Tracer { out: None, t0: std::time::Instant::now() };
    let kicked = strategy::emptied(&problem, &inputs(4.0), candidate(), &mut tracer);
    assert_eq!(kicked.assignment.gpus_used(), 4);
    assert!(matches!(kicked.method, Method::Then { by: Step::EmptyGpusOnce, .. }), "{:?}", kicked.method);
    assert!(kicked.method.sentence().contains("kicks"), "{}", kicked.method.sentence());
    assert_eq!(replicas_per_model(&kicked.assignment), replicas_per_model(&first));
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &kicked.assignment), Ok(()));
    // Within the target of a bound at first fit's own GPUs already: neither the search nor
    // the kicks run.
    let kept = strategy::emptied(&problem, &inputs(first.gpus_used() as f64), candidate(), &mut tracer);
    assert_eq!(kept.method, Method::FfdKeptNoSolution);
    assert_eq!(kept.assignment.gpus_used(), first.gpus_used());
}

/// Replicas per model of an assignment, whatever their devices.
fn replicas_per_model(a: &crate::plan::assign::Assignment) -> std::collections::BTreeMap<usize, u32> {
    let mut n = std::collections::BTreeMap::new();
    for (&(m, ..), &c) in &a.replicas {
        *n.entry(m).or_insert(0u32) += c;
    }
    n
}

/// Whether assignment `a` of `spec`'s problem builds into a plan the verifier accepts: the
/// build error or the violations otherwise.
fn built_and_verified(
    spec: &crate::spec::Spec,
    catalog: &Catalog,
    problem: &crate::plan::problem::Problem<'_>,
    a: &crate::plan::assign::Assignment,
) -> Result<(), String> {
    let figures = crate::plan::build::Figures {
        valid: crate::plan::bounds::valid_bound(problem),
        model: crate::plan::bounds::LowerBound { gpus: 0, cost_per_hour: None },
        solver_proved: false,
        ffd: None,
        method: String::new(),
    };
    let plan = crate::plan::build::build(problem, a, &figures).map_err(|e| format!("{e:?}"))?;
    let violations = crate::verify::check(spec, catalog, &plan);
    if violations.is_empty() { Ok(()) } else { Err(format!("{violations:?}")) }
}

/// Where the search that empties GPUs stops, re-packing pairs of nodes by their own programs
/// goes on: the fleet of the kicks' test above, first fit's plan emptied as far as single GPUs
/// can leave (6 GPUs), re-packed on fewer (5 with microlp's node budget, 4 with HiGHS's),
/// with every model's replicas, and the verifier accepts it.
#[test]
fn repacking_pairs_of_nodes_finds_a_cheaper_plan_where_emptying_stops() {
    let spec = stuck_fleet();
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let first = crate::plan::assign::ffd_every_order(&problem).into_iter().next().expect("first fit plans");
    let emptied = crate::plan::assign::empty_gpus(&problem, &first).unwrap_or(first);
    let repacked = crate::plan::repack::repacked(&problem, &emptied, |_| false).expect("a cheaper plan");
    assert_eq!(emptied.gpus_used(), 6);
    assert!(repacked.gpus_used() < 6, "{} GPUs", repacked.gpus_used());
    assert_eq!(replicas_per_model(&repacked), replicas_per_model(&emptied));
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &repacked), Ok(()));
}

/// Issue 23: the pooled `spread: gpu` rows on MIG read the candidate layouts' instances, and a
/// plan may trim a GPU to fewer (a 32-GPU stress fleet: A30 GPUs trimmed to `2g.12gb + 1g.6gb`,
/// a `spread: gpu` replica on the one `1g.6gb`, where the only candidate holding that layout has
/// two). With HiGHS the pooled program then "proved" $56.20/h while the kicks found a verified
/// plan of $55.30/h. Such a program's proofs bound nothing the plan reports, and the plan's
/// replicas meet the same program on the problem widened to every layout a plan may trim to.
#[test]
fn a_plan_that_trims_a_gpu_is_not_cut_by_the_bounds() {
    use crate::bench::stress::{Shape, fleet};
    use crate::plan::milp::{Goal, Pins, solve};
    use crate::plan::problem::{build, trims_matter, widened};
    let shape = Shape { gpus: 32, priced: true, compute: true, fill: 0.7, time_sliced: false };
    let (spec, catalog) = fleet(shape, 1);
    let problem = build(&spec, &catalog);
    assert!(trims_matter(&problem), "the fleet's A30 layouts trim below their candidates");
    assert!(!trims_matter(&widened(&problem)));
    let valid = crate::plan::bounds::valid_bound(&problem);
    let mut tracer = crate::plan::Tracer { out: None, t0: std::time::Instant::now() };
    let solved = super::solve(&problem, &valid, None, Some(&super::plans_grown), &mut tracer)
        .unwrap_or_else(|_| panic!("the fleet plans"));
    let a = &solved.candidate.assignment;
    assert_eq!(built_and_verified(&spec, &catalog, &problem, a), Ok(()));
    let cost = a.cost(&problem);
    let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
    let pooled = solve(&problem, goal, &Pins::new()).unwrap_or_else(|e| panic!("{e:?}"));
    // HiGHS writes the pooled `spread: gpu` rows; microlp leaves them out of programs that are
    // not small, which then bound every plan.
    assert_eq!(pooled.cuts_trims, cfg!(feature = "highs"), "the pooled program's rows may cut the plan");
    for proven in [pooled.sound_proven(), solved.candidate.sound] {
        assert!(proven.is_none_or(|p| p <= cost + 1e-6), "{proven:?} proven above a plan of {cost}");
    }
    let on_wide =
        solve(&widened(&problem), goal, &a.replicas).unwrap_or_else(|e| panic!("the plan's replicas: {e:?}"));
    assert!(on_wide.cost <= cost + 1e-6, "{} above the plan's {cost}", on_wide.cost);
    let bound = solved.cost_bound.unwrap_or(f64::INFINITY);
    let unit = problem.unit_price.unwrap_or(1.0);
    assert!(bound <= cost * unit + 1e-6, "the cost bound ${bound} above the plan's ${}", cost * unit);
}

/// Issue 23: where the planner fails without knowing whether a plan exists, its note names an
/// addition with which first fit plans. Three replicas of a 60 GiB model on one node of two
/// A100s: one more node.
#[test]
fn a_failure_names_the_nodes_with_which_a_plan_exists() {
    let spec = one_a100_node(vec![crate::bench::model("big", 60 * 1024, 0.1, 3)]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    assert_eq!(
        super::infeasible::addition_note(&problem, Some(&super::plans_grown)).as_deref(),
        Some(
            "with 1 more node(s) in pool `a100` (2 × A100-SXM4-80GB each), gpuplan finds a plan; whether the nodes there now can hold one is not known"
        )
    );
    let fits = one_a100_node(vec![crate::bench::model("big", 60 * 1024, 0.1, 2)]);
    assert_eq!(
        super::infeasible::addition_note(
            &crate::plan::problem::build(&fits, &catalog),
            Some(&super::plans_grown)
        ),
        None
    );
}

/// Issue 23: the addition of nodes a `capacity-exceeded` names is confirmed by planning with it
/// as the planner does, not by first fit alone, and on a fleet whose plans may trim a GPU it is
/// solved on the problem widened to every layout a plan may trim to first. An 8-GPU six-type
/// priced stress fleet (seed 2, fill 1.0): first fit needed 3 more A100 nodes and 4 more L4
/// nodes; one A100 node and one A30 node suffice. HiGHS only: the pure-Rust cascade does not
/// plan the fleet grown by those two nodes, and names first fit's addition as before.
#[cfg(feature = "highs")]
#[test]
fn the_addition_named_is_one_the_planner_plans_with() {
    use crate::bench::stress::{Shape, fleet_of_every_type};
    let shape = Shape { gpus: 8, priced: true, compute: false, fill: 1.0, time_sliced: false };
    let (spec, catalog) = fleet_of_every_type(shape, 2);
    let problem = crate::plan::problem::build(&spec, &catalog);
    assert!(crate::plan::problem::trims_matter(&problem));
    let diags = super::infeasible::explain(
        &problem,
        &crate::plan::milp::MilpError::Infeasible,
        Some(&super::plans_grown),
    );
    let helps: Vec<&str> = diags.0.iter().filter_map(|d| d.help.as_deref()).collect();
    assert_eq!(
        helps,
        [
            "add 1 × A100-SXM4-80GB node(s) (8 GPU(s) each) to pool `a100-sxm4-80gb`",
            "add 1 × A30 node(s) (4 GPU(s) each) to pool `a30`"
        ]
    );
}

/// A 16-GPU six-type stress fleet (fill 0.7, seed 1: 36 GPUs, one node a pool) whose
/// `spread: gpu` model asks for 31 hardware-isolated replicas: the plain program's counts do
/// not lay out, and only the rows of several profiles prove that no plan exists. HiGHS said
/// `planner-failed` ("a planner limitation"); now its program with every row proves it, and
/// the failure names an addition of nodes with which gpuplan plans. microlp stops at its node
/// limit on that program (also with eight times the nodes), so the pure-Rust build still
/// fails, with a note naming the addition.
#[test]
fn a_fleet_only_the_rows_of_several_profiles_refuse_names_an_addition() {
    use crate::bench::stress::{Shape, fleet_of_every_type};
    let shape = Shape { gpus: 16, priced: false, compute: false, fill: 0.7, time_sliced: false };
    let (spec, catalog) = fleet_of_every_type(shape, 1);
    let diags = crate::plan::plan(&spec, &catalog).expect_err("no plan exists");
    let codes: Vec<&str> = diags.0.iter().map(|d| d.code).collect();
    if cfg!(feature = "highs") {
        assert_eq!(codes, [crate::diagnostics::codes::CAPACITY_EXCEEDED], "{diags:?}");
        let help = diags.0[0].help.as_deref().unwrap_or_default();
        assert!(help.starts_with("add 1 × ") && !help.contains("at least"), "{help}");
    } else {
        assert_eq!(codes, [crate::diagnostics::codes::PLANNER_FAILED], "{diags:?}");
        let named = diags.0[0]
            .notes
            .iter()
            .any(|n| n.contains("more node(s) in pool") && n.contains("gpuplan finds a plan"));
        assert!(named, "{diags:?}");
    }
}

/// `capacity-exceeded`'s help names a confirmed addition as what to add, and one that gpuplan
/// did not plan with as only that: never as a number of nodes a plan needs ("at least N" said
/// so of an addition nothing proved).
#[test]
fn an_unconfirmed_addition_is_not_named_as_what_a_plan_needs() {
    use crate::plan::infeasible::addition_help;
    let spec = one_a100_node(vec![crate::bench::model("x", 15 * 1024, 0.1, 2)]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let pool = &problem.pools[0];
    let confirmed = addition_help(pool, 9, true);
    assert!(confirmed == "add 9 × A100-SXM4-80GB node(s) (2 GPU(s) each) to pool `a100`", "{confirmed}");
    let unconfirmed = addition_help(pool, 9, false);
    assert!(unconfirmed.contains("no plan even with 9 more"), "{unconfirmed}");
    assert!(unconfirmed.contains("not known") && !unconfirmed.contains("at least"), "{unconfirmed}");
    assert!(!unconfirmed.starts_with("add 9"), "{unconfirmed}");
}

/// A six-type stress fleet of 8 GPUs (fill 0.55, seed 1: 36 GPUs, one node a pool) that
/// plans only on every GPU it has: a `spread: gpu` model asks for 36 replicas. The pure-Rust
/// build's plain counts do not lay out, its program with every row stops without a solution,
/// and it ended in `planner-failed` where HiGHS plans; laid out pool by pool, each pool's share
/// solved by a program of its own with every row and the replicas a pool could not hold placed
/// by the completion, the program's replica choices give a verified plan on the 36 GPUs in
/// either build.
#[test]
fn a_fleet_that_needs_every_gpu_is_laid_out_pool_by_pool() {
    use crate::bench::stress::{Shape, fleet_of_every_type};
    use crate::plan::milp::{Goal, Pins, solve_with_relaxed_spread_rows};
    let shape = Shape { gpus: 8, priced: false, compute: false, fill: 0.55, time_sliced: false };
    let (spec, catalog) = fleet_of_every_type(shape, 1);
    let problem = crate::plan::problem::build(&spec, &catalog);
    assert_eq!(problem.pools.iter().map(|p| p.max_nodes).collect::<Vec<_>>(), [1; 6]);
    assert!(crate::plan::assign::ffd(&problem).is_none(), "first fit alone finds no plan");
    // The cascade's goal: first fit has no plan to cap the cost, the model's bound is 36 GPUs.
    let goal = Goal::Plan { cost_bound: None, gpu_floor: Some(36.0) };
    let r = solve_with_relaxed_spread_rows(&problem, goal, &Pins::new()).expect("counts");
    let a = crate::plan::repack::pool_by_pool(&problem, &r.replicas).expect("a plan");
    assert_eq!(a.gpus_used(), 36);
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &a), Ok(()));
}

/// The program that extends the pools, with additions excluded, names one that is not within
/// any of them, no smaller than the first: the smallest additions come in turn.
#[test]
fn an_excluded_addition_is_not_named_again() {
    use crate::bench::stress::{Shape, fleet_of_every_type};
    let shape = Shape { gpus: 8, priced: true, compute: false, fill: 1.0, time_sliced: false };
    let (spec, catalog) = fleet_of_every_type(shape, 2);
    let problem = crate::plan::problem::build(&spec, &catalog);
    // The program's measure of an addition: GPUs weighted by their price.
    let added = |extra: &[u64]| -> f64 {
        problem.pools.iter().zip(extra).map(|(p, &e)| f64::from(p.gpn()) * p.weight * e as f64).sum()
    };
    let first = crate::plan::milp::solve_extend(&problem, &[]).expect("the extension program solves");
    assert!(first.extra_nodes.iter().any(|&e| e > 0), "{:?}", first.extra_nodes);
    let mut excluded = vec![first.extra_nodes.clone()];
    for _ in 0..3 {
        let next =
            crate::plan::milp::solve_extend(&problem, &excluded).expect("the extension program solves");
        for e in &excluded {
            assert!(
                next.extra_nodes.iter().zip(e).any(|(n, e)| n > e),
                "{:?} is within the excluded {e:?}",
                next.extra_nodes
            );
        }
        assert!(
            added(&next.extra_nodes) >= added(&first.extra_nodes) - 1e-9,
            "{:?} below {:?}",
            next.extra_nodes,
            first.extra_nodes
        );
        excluded.push(next.extra_nodes);
    }
}

/// Whole counts of GPUs per pool lift a bound the relaxation leaves a fraction of a GPU below:
/// three replicas that need half a GPU each (`3g.40gb`) on one cheap A100 and eight H100s at
/// twice its price. The relaxation serves the third on half an H100 (weighted cost 2); every
/// plan pays a whole H100 for it (3), and the relaxation with whole counts says so in both
/// builds, where the cost's integrality over the prices alone cannot (2 is one H100's price).
#[test]
fn whole_counts_of_gpus_per_pool_lift_the_cost_bound_to_the_optimum() {
    use crate::plan::milp::{self, Goal, Pins};
    let mut cheap = crate::bench::pool("a100", "A100-SXM4-80GB", 1, vec!["a100-1".to_owned()]);
    cheap.cost_per_gpu_hour = Some(2.0);
    let mut dear = crate::bench::pool("h100", "H100-SXM5-80GB", 8, vec!["h100-1".to_owned()]);
    dear.cost_per_gpu_hour = Some(4.0);
    let mut m = crate::bench::model("asr", 35 * 1024, 0.0, 3);
    m.isolation = crate::spec::Isolation::Hardware;
    let spec = crate::bench::spec("whole", vec![cheap, dear], vec![m]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let relaxed =
        milp::solve(&problem, Goal::CostBound { gpu_floor: None }, &Pins::new()).expect("a relaxation");
    assert!((relaxed.cost - 2.0).abs() < 1e-6, "relaxation {}", relaxed.cost);
    let whole = milp::solve_whole_bound(&problem, None).expect("a bound");
    assert!(whole > 3.0 - 1e-4 && whole <= 3.0, "bound {whole}");
    // Stopped after one node, before any solution of the relaxation (microlp), the least
    // bound of the open nodes still holds: between the relaxation and the optimum.
    let early = milp::whole_bound_within(&problem, None, 1).expect("a bound without a solution");
    assert!(early > 2.0 - 1e-4 && early <= 3.0, "bound {early}");
    let plan = crate::plan::plan(&spec, &catalog).expect("plans");
    assert_eq!(plan.quality.cost.used, Some(6.0));
    assert_eq!(plan.quality.cost.model_lower_bound, Some(6.0));
}

/// The cascade's last step before a failure, in the HiGHS build: the program written node by
/// node with the exact rows (`strategy::per_node_rescue`). On the stuck fleet its counts lay
/// out as a plan with every model's replicas that the verifier accepts; with a `spread: gpu`
/// model of dedicated GPUs that wants more replicas than the fleet has GPUs, it proves that no
/// plan exists, and the diagnostic names what the fleet lacks (two more one-GPU nodes, as the
/// planner's own path says) instead of `planner-failed`. The pure-Rust build does not run it
/// (microlp finds no solution of that program at the sizes where the step is needed).
#[test]
fn the_program_per_node_is_the_last_step_before_a_failure() {
    let catalog = Catalog::builtin();
    let mut tracer = super::Tracer { out: None, t0: std::time::Instant::now() };
    let spec = stuck_fleet();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let rescued = crate::plan::strategy::per_node_rescue(&problem, false, None, &mut tracer);
    if !cfg!(feature = "highs") {
        assert!(rescued.is_none());
        return;
    }
    let a = rescued.expect("the step runs").expect("a plan");
    let first = crate::plan::assign::ffd_every_order(&problem).into_iter().next().expect("first fit plans");
    assert_eq!(replicas_per_model(&a), replicas_per_model(&first));
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &a), Ok(()));
    let mut over = stuck_fleet();
    over.models[0].demand = crate::spec::Demand::Replicas(10);
    let problem = crate::plan::problem::build(&over, &catalog);
    let planner: &dyn Fn(&crate::plan::problem::Problem<'_>) -> bool = &super::plans_grown;
    let failed = crate::plan::strategy::per_node_rescue(&problem, false, Some(planner), &mut tracer)
        .expect("the step runs")
        .expect_err("no plan");
    let codes: Vec<&str> = failed.iter().map(|d| d.code).collect();
    assert_eq!(codes, [crate::plan::codes::CAPACITY_EXCEEDED]);
    assert!(failed.iter().any(|d| d.help.as_deref().is_some_and(|h| h.contains("add 2 ×"))), "{failed:?}");
}

/// A `planner-failed` of the pure-Rust build, on a program the default build would also
/// solve node by node (`strategy::per_node_rescue`: not large, a pool of several named nodes),
/// says that the default build has that step; the HiGHS build's failure, a large program's
/// (the step does not run there either) and a proven one (no build finds a plan) do not.
#[test]
fn the_pure_rust_builds_failure_names_the_step_only_the_default_build_has() {
    use crate::plan::strategy::{Why, failure};
    let catalog = Catalog::builtin();
    let spec = stuck_fleet();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let names_highs = |harder: bool, proven: bool| {
        let stuck = crate::plan::assign::Stuck { model: None, proven };
        let why = Why::SolverFailed("node limit reached before a feasible solution".into());
        failure(&problem, &why, &stuck, harder, true, None)
            .iter()
            .any(|d| d.notes.iter().any(|n| n.contains("no HiGHS") && n.contains("node by node")))
    };
    assert_eq!(names_highs(true, false), !cfg!(feature = "highs"));
    assert!(!names_highs(false, false));
    assert!(!names_highs(true, true));
}

/// The pure-Rust build's last step before a failure (`strategy::completion`): replicas a
/// partial plan leaves out are placed by programs over one or two nodes
/// (`repack::completed`). First fit's plan of the stuck fleet with two of its `spread: gpu`
/// model's three replicas left out, completed, runs all three, and the verifier accepts it:
/// the rules hold on the nodes the programs rewrote and on those they left alone.
#[test]
fn replicas_a_partial_plan_leaves_out_are_placed_by_programs_over_a_few_nodes() {
    let catalog = Catalog::builtin();
    let spec = stuck_fleet();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let mut fewer = stuck_fleet();
    fewer.models[0].demand = crate::spec::Demand::Replicas(1);
    let partial =
        crate::plan::assign::ffd(&crate::plan::problem::build(&fewer, &catalog)).expect("first fit plans");
    let (&(m, pool, kind), _) = partial.replicas.iter().find(|(k, _)| k.0 == 0).expect("model 0 runs");
    let left = vec![(m, pool, kind); 2];
    let done = crate::plan::repack::completed(&problem, &partial, &left).expect("a completed plan");
    let full = crate::plan::assign::ffd_every_order(&problem).into_iter().next().expect("first fit plans");
    assert_eq!(replicas_per_model(&done), replicas_per_model(&full));
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &done), Ok(()));
}

/// On a large program, where the optimiser's path gave no plan of its own and the best the
/// rescue has is outside the target, the counts laid out as far as they go and completed by
/// programs over one or two nodes are a candidate (`strategy::rescue`): the stuck fleet marked
/// large, its optimal counts (4 GPUs) not laid out by the cascade, first fit's plans on 6 GPUs,
/// plans on 4 by that step; the same inputs on a program that is not large keep first fit.
/// (The 1,024-GPU stress fleets where microlp finds no solution: docs/benchmarks.md.)
#[test]
fn a_large_programs_rescue_completes_the_counts_where_first_fit_is_far() {
    use crate::plan::milp::{Goal, Pins};
    use crate::plan::strategy::{self, Inputs, Method, Step, Why};
    let catalog = Catalog::builtin();
    let spec = stuck_fleet();
    let problem = crate::plan::problem::build(&spec, &catalog);
    let counts =
        crate::plan::milp::solve(&problem, Goal::Plan { cost_bound: None, gpu_floor: None }, &Pins::new())
            .expect("the optimiser's counts");
    let valid = crate::plan::bounds::valid_bound(&problem);
    let mut tracer = crate::plan::Tracer { out: None, t0: std::time::Instant::now() };
    let rescued = |large: bool, tracer: &mut crate::plan::Tracer<'_>| {
        let inputs = Inputs {
            goal: Goal::Bound,
            guide: None,
            relaxed: None,
            bound: None,
            large,
            preferred: None,
            valid: &valid,
            planner: None,
            improve: true,
        };
        let ffd = crate::plan::assign::ffd(&problem);
        let counts = strategy::Counts { plain: &counts, spread_rows: None };
        strategy::rescue(&problem, &inputs, Why::NotDecomposed, ffd, None, Some(counts), tracer)
            .expect("a plan")
    };
    let large = rescued(true, &mut tracer);
    assert_eq!(large.assignment.gpus_used(), 4);
    assert!(matches!(large.method, Method::Fallback { by: Step::Completed, .. }), "{:?}", large.method);
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &large.assignment), Ok(()));
    let small = rescued(false, &mut tracer);
    assert_eq!(small.assignment.gpus_used(), 6);
}

/// Where no neighbourhood takes a missing replica, the completion asks a node for it instead of
/// another model's replicas there, which go where there is room (`repack::completed`, an
/// ejection chain): a dedicated 40 GiB replica that only the one A100 can hold, missing from a
/// partial plan whose small shared replica sits on that A100, is placed there, and the small
/// one moves to the L4; the verifier accepts the plan. Without the chain no program over the
/// A100's node (the only node the large model may use) takes it, and re-packing frees nothing.
#[test]
fn a_completion_ejects_a_replica_that_blocks_the_only_node_a_missing_one_fits() {
    let catalog = Catalog::builtin();
    let pools = vec![
        crate::bench::pool("p0", "A100-SXM4-80GB", 1, vec!["p0-n1".to_owned()]),
        crate::bench::pool("p1", "L4", 1, vec!["p1-n1".to_owned()]),
    ];
    let spec = crate::bench::spec("p", pools, generated_models(&[(40, 0, 1, 2, 0), (10, 0, 1, 0, 0)]));
    let problem = crate::plan::problem::build(&spec, &catalog);
    let mut fewer = spec.clone();
    fewer.models[0].demand = crate::spec::Demand::Replicas(0);
    fewer.pools[1].nodes = crate::spec::Nodes::Named(vec![]);
    let mut partial =
        crate::plan::assign::ffd(&crate::plan::problem::build(&fewer, &catalog)).expect("first fit plans");
    assert!(partial.replicas.keys().all(|k| k.0 == 1 && k.1 == 0), "{:?}", partial.replicas);
    // The L4 node, unused, as the full problem has it.
    partial.pools[1].nodes =
        vec![crate::plan::assign::NodeA { gpus: vec![crate::plan::assign::Dev::Unused] }];
    let kind = problem.models[0].options.iter().find(|o| o.pool == 0).expect("the A100 serves model 0").kind;
    let done =
        crate::plan::repack::completed(&problem, &partial, &vec![(0, 0, kind)]).expect("a completed plan");
    assert_eq!(replicas_per_model(&done), std::collections::BTreeMap::from([(0, 1), (1, 1)]));
    assert_eq!(done.gpus_used(), 2);
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &done), Ok(()));
}

/// The `spread: gpu` rows on MIG with their node counts continuous
/// (`milp::solve_with_relaxed_spread_rows`, the pure-Rust build's re-solve; in the HiGHS build
/// and on small problems the rows with whole counts) cut no plan: with the replicas of first
/// fit's plan pinned (a plan every rule passes), the program is never infeasible — on the
/// problem widened to every layout a plan may trim to where the rows on the candidate layouts
/// could cut a trimmed GPU. Stress fleets of 32 GPUs with `spread: gpu` models on MIG, not small
/// programs, so that the pure-Rust build writes the relaxed rows.
#[test]
fn the_spread_rows_with_continuous_node_counts_cut_no_plan() {
    use crate::bench::stress::{Shape, fleet};
    use crate::plan::milp::{Goal, MilpError, solve_with_relaxed_spread_rows};
    let shape = Shape { gpus: 32, priced: false, compute: false, fill: 0.4, time_sliced: false };
    let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
    let (mut solved, mut tried) = (0, 0);
    for seed in 0..6 {
        let (spec, catalog) = fleet(shape, seed);
        let problem = crate::plan::problem::build(&spec, &catalog);
        if problem.small || crate::plan::problem::is_large(&problem) || !problem.mig_spread_models {
            continue;
        }
        let Some(plan) = crate::plan::assign::ffd(&problem) else { continue };
        let wide =
            crate::plan::problem::trims_matter(&problem).then(|| crate::plan::problem::widened(&problem));
        let on = wide.as_ref().unwrap_or(&problem);
        tried += 1;
        match solve_with_relaxed_spread_rows(on, goal, &plan.replicas) {
            Ok(_) => solved += 1,
            Err(MilpError::Infeasible) => panic!("seed {seed}: the rows cut first fit's plan"),
            Err(MilpError::Solver(_)) => {}
        }
    }
    assert!(tried >= 2, "too few fleets with spread: gpu models on MIG: {tried}");
    assert!(solved >= 1, "no pinned program solved of {tried}");
}

/// A pool of more nodes than [`crate::plan::repack::WHOLE_POOL_NODES`] is laid out in chunks,
/// its share dealt among them one replica a node in turn: six A100 nodes of two GPUs, a
/// `spread: node` model with a replica for each node and a `spread: gpu` one with a replica for
/// each GPU plan on all twelve GPUs, and the optimiser's replica choices laid out chunk by chunk
/// give that verified plan.
#[test]
fn a_large_pool_is_laid_out_in_chunks() {
    use crate::plan::milp::{Goal, Pins, solve};
    use crate::spec::Spread;
    let nodes: Vec<String> = (1..=6).map(|i| format!("n{i}")).collect();
    let pool = crate::bench::pool("a100", "A100-SXM4-80GB", 2, nodes);
    let mut apart = crate::bench::model("apart", 15 * 1024, 0.1, 6);
    apart.spread = Spread::Node;
    let mut wide = crate::bench::model("wide", 9 * 1024, 0.1, 12);
    wide.spread = Spread::Gpu;
    let spec = crate::bench::spec("t", vec![pool], vec![apart, wide]);
    let catalog = Catalog::builtin();
    let problem = crate::plan::problem::build(&spec, &catalog);
    assert!(problem.pools[0].max_nodes as usize > crate::plan::repack::WHOLE_POOL_NODES);
    let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
    let r = solve(&problem, goal, &Pins::new()).expect("counts");
    let a = crate::plan::repack::pool_by_pool(&problem, &r.replicas).expect("a plan");
    assert_eq!(a.gpus_used(), 12);
    assert_eq!(built_and_verified(&spec, &catalog, &problem, &a), Ok(()));
}
