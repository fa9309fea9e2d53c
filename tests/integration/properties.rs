//! Properties of the planner over small generated inputs (1–2 pools of 1–3 nodes × 1–4 GPUs,
//! 1–5 models): plans pass the independent verifier; failures name the models that cannot be
//! served; the output does not depend on input order; small cases match a brute-force optimum.
//!
//! 64 cases per property by default; set `PROPTEST_CASES` to run more.

use std::collections::{BTreeMap, BTreeSet};

use gpuplan::bench::{self, A100, L4};
use gpuplan::catalog::{Catalog, GpuModel, layout};
use gpuplan::diagnostics::{Diagnostics, codes};
use gpuplan::plan::{self, Plan};
use gpuplan::spec::{Demand, Isolation, Model, Spec, Spread};
use gpuplan::verify;
use proptest::prelude::*;

/// A generated model: memory in GiB, compute in twentieths, replicas, isolation, spread, GPUs.
type ModelParams = (u64, u32, u32, u8, u8, Option<u32>);
/// A generated pool: GPU type (0 = A100, 1 = L4), nodes, GPUs per node.
type PoolParams = (u8, u32, u32);

fn model_params() -> impl Strategy<Value = ModelParams> {
    (
        prop_oneof![3 => 1u64..=24, 1 => 25u64..=80],
        1u32..=20,
        1u32..=3,
        0u8..3,
        0u8..3,
        prop_oneof![9 => Just(None), 1 => (1u32..=2).prop_map(Some)],
    )
}

fn pool_params() -> impl Strategy<Value = PoolParams> {
    (prop_oneof![3 => Just(0u8), 1 => Just(1u8)], 1u32..=3, 1u32..=4)
}

fn build(pools: &[PoolParams], models: &[ModelParams]) -> (Spec, Catalog) {
    let catalog = bench::catalog();
    let pools = pools
        .iter()
        .enumerate()
        .map(|(i, &(gpu, nodes, per_node))| {
            let name = format!("p{i}");
            let node_names = (1..=nodes).map(|n| format!("{name}-n{n}")).collect();
            bench::pool(&name, if gpu == 0 { A100 } else { L4 }, per_node, node_names)
        })
        .collect();
    let models = models
        .iter()
        .enumerate()
        .map(|(i, &(gib, twentieths, replicas, isolation, spread, gpus))| {
            let mut m = bench::model(&format!("m{i}"), gib * 1024, f64::from(twentieths) / 20.0, replicas);
            m.isolation =
                [Isolation::Shared, Isolation::Hardware, Isolation::Dedicated][usize::from(isolation)];
            m.spread = [Spread::None, Spread::Gpu, Spread::Node][usize::from(spread)];
            if let Some(n) = gpus {
                m.gpus = Some(n);
                m.compute = 1.0;
                m.memory_mib = gib * 1024 * u64::from(n);
            }
            m
        })
        .collect();
    (bench::spec("prop", pools, models), catalog)
}

/// Serialises a planning result so two results compare byte for byte.
fn fingerprint(result: &Result<Plan, Diagnostics>) -> String {
    match result {
        Ok(plan) => serde_json::to_string(plan).unwrap_or_else(|e| format!("unserialisable plan: {e}")),
        Err(diags) => {
            let lines: Vec<String> =
                diags.iter().map(|d| format!("{} {} {:?}", d.code, d.message, d.help)).collect();
            format!("error: {lines:?}")
        }
    }
}

/// Whether one replica of `m` has no way to run in any pool it may use: a model the planner must
/// name when it fails.
fn unplaceable_alone(spec: &Spec, catalog: &Catalog, m: &Model) -> bool {
    !spec.pools.iter().any(|pool| {
        let Some(gpu) = catalog.get(&pool.gpu) else { return false };
        let allowed = (m.pools.is_empty() || m.pools.contains(&pool.name))
            && (m.gpu_types.is_empty()
                || m.gpu_types.iter().any(|t| catalog.get(t).is_some_and(|g| g.id == gpu.id)));
        allowed && fits_one_replica(spec, gpu, pool.gpus_per_node, m)
    })
}

fn fits_one_replica(spec: &Spec, gpu: &GpuModel, per_node: u32, m: &Model) -> bool {
    let memory = gpu.memory_mib as f64 * (1.0 - spec.policy.memory_headroom);
    if let Some(n) = m.gpus {
        return n <= per_node && m.memory_mib as f64 / f64::from(n.max(1)) <= memory;
    }
    let whole = m.memory_mib as f64 <= memory && m.compute <= 1.0;
    let mig = m.isolation != Isolation::Dedicated
        && gpu.mig.as_ref().is_some_and(|mig| {
            mig.profiles.iter().any(|p| {
                m.memory_mib as f64 <= p.memory_mib as f64 * (1.0 - spec.policy.memory_headroom)
                    && m.compute <= f64::from(p.sms) / f64::from(gpu.sms)
            })
        });
    whole || mig
}

/// The fewest GPUs of one MIG-capable pool that serve `models` (replica demand, isolation
/// `hardware` or `dedicated`, spread `none` or `gpu`, single-GPU), by exhaustive search over
/// per-GPU configurations: each GPU holds one whole-GPU replica or a valid multiset of MIG
/// instances. `None` when `capacity` GPUs are not enough.
///
/// Each replica tries the smallest MIG profile that fits it: on the A100 tables the fitting
/// profiles form a chain (1g.10gb < 1g.20gb < 2g.20gb < 3g.40gb < 4g.40gb) in which a smaller
/// profile can replace a larger one at the same start without breaking the layout, and a whole
/// GPU dominates 7g.80gb. That keeps the search exact and small.
fn brute_force_gpus(gpu: &GpuModel, models: &[Model], capacity: u32) -> Option<u32> {
    let chain = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb"];
    let mut replicas: Vec<(usize, Option<&str>)> = Vec::new();
    for (i, m) in models.iter().enumerate() {
        let Demand::Replicas(n) = m.demand else { return None };
        let mig = if m.isolation == Isolation::Dedicated || m.gpus.is_some() {
            None
        } else {
            chain.iter().copied().find(|name| {
                gpu.profile(name).is_some_and(|p| {
                    m.memory_mib <= p.memory_mib && m.compute <= f64::from(p.sms) / f64::from(gpu.sms)
                })
            })
        };
        let whole_fits = m.memory_mib <= gpu.memory_mib && m.compute <= 1.0;
        if mig.is_none() && !whole_fits {
            return None;
        }
        replicas.extend((0..n).map(|_| (i, mig)));
    }
    // Biggest first: tighter bounds sooner.
    replicas.sort_by_key(|&(i, mig)| {
        (std::cmp::Reverse(mig.map_or(99, |p| chain.iter().position(|c| *c == p).unwrap_or(0))), i)
    });
    let spread_gpu: Vec<bool> = models.iter().map(|m| m.spread == Spread::Gpu).collect();
    let whole_ok: Vec<bool> =
        models.iter().map(|m| m.memory_mib <= gpu.memory_mib && m.compute <= 1.0).collect();
    let mut search =
        Search { gpu, replicas, spread_gpu, whole_ok, best: capacity + 1, memo: BTreeMap::new() };
    let mut bins = Vec::new();
    search.go(0, &mut bins);
    (search.best <= capacity).then_some(search.best)
}

/// One GPU in the brute-force search: `None` profiles = a whole GPU.
#[derive(Clone)]
struct Bin<'a> {
    whole: bool,
    profiles: Vec<&'a str>,
    models: BTreeSet<usize>,
}

struct Search<'a> {
    gpu: &'a GpuModel,
    replicas: Vec<(usize, Option<&'a str>)>,
    spread_gpu: Vec<bool>,
    whole_ok: Vec<bool>,
    best: u32,
    memo: BTreeMap<Vec<&'a str>, bool>,
}

impl<'a> Search<'a> {
    fn valid(&mut self, profiles: &[&'a str]) -> bool {
        let mut key = profiles.to_vec();
        key.sort_unstable();
        if let Some(&v) = self.memo.get(&key) {
            return v;
        }
        let v = layout::validate(self.gpu, &key).is_ok();
        self.memo.insert(key, v);
        v
    }

    fn go(&mut self, next: usize, bins: &mut Vec<Bin<'a>>) {
        if bins.len() as u32 >= self.best {
            return;
        }
        let Some(&(model, mig)) = self.replicas.get(next) else {
            self.best = bins.len() as u32;
            return;
        };
        if let Some(profile) = mig {
            for b in 0..bins.len() {
                if bins[b].whole || (self.spread_gpu[model] && bins[b].models.contains(&model)) {
                    continue;
                }
                let mut profiles = bins[b].profiles.clone();
                profiles.push(profile);
                if self.valid(&profiles) {
                    let saved = std::mem::replace(&mut bins[b].profiles, profiles);
                    let fresh = bins[b].models.insert(model);
                    self.go(next + 1, bins);
                    if fresh {
                        bins[b].models.remove(&model);
                    }
                    bins[b].profiles = saved;
                }
            }
            bins.push(Bin { whole: false, profiles: vec![profile], models: BTreeSet::from([model]) });
            self.go(next + 1, bins);
            bins.pop();
        }
        if self.whole_ok[model] {
            bins.push(Bin { whole: true, profiles: Vec::new(), models: BTreeSet::from([model]) });
            self.go(next + 1, bins);
            bins.pop();
        }
    }
}

/// A brute-force model: memory in GiB, compute in twentieths, replicas, dedicated, spread over GPUs.
type BruteModel = (u64, u32, u32, bool, bool);

/// Small single-pool A100 cases that the brute force can solve: hardware or dedicated isolation,
/// spread none or gpu, at most 6 replicas in total.
fn brute_force_case() -> impl Strategy<Value = (u32, u32, Vec<BruteModel>)> {
    (
        1u32..=2,
        1u32..=4,
        prop::collection::vec((1u64..=40, 1u32..=12, 1u32..=2, any::<bool>(), any::<bool>()), 1..=4),
    )
        .prop_filter("at most 6 replicas", |(_, _, models)| models.iter().map(|m| m.2).sum::<u32>() <= 6)
}

/// 64 cases per property (CI stays fast); `PROPTEST_CASES=1024` runs more locally.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn plans_pass_the_independent_verifier_and_failures_name_the_models(
        pools in prop::collection::vec(pool_params(), 1..=2),
        models in prop::collection::vec(model_params(), 1..=5),
    ) {
        let (spec, catalog) = build(&pools, &models);
        match plan::plan(&spec, &catalog) {
            Ok(plan) => {
                let violations = verify::check(&spec, &catalog, &plan);
                prop_assert!(violations.is_empty(), "violations: {violations:#?}");
            }
            Err(diags) => {
                prop_assert!(diags.has_errors(), "an error result without an error diagnostic");
                let text: String = diags
                    .iter()
                    .map(|d| format!("{} {:?} {:?} {:?}", d.message, d.labels.iter().map(|l| &l.message).collect::<Vec<_>>(), d.help, d.notes))
                    .collect();
                prop_assert!(
                    spec.models.iter().any(|m| text.contains(&format!("`{}`", m.name))),
                    "the diagnostics name no model: {text}"
                );
                for m in spec.models.iter().filter(|m| unplaceable_alone(&spec, &catalog, m)) {
                    prop_assert!(text.contains(&format!("`{}`", m.name)), "`{}` cannot run anywhere but is not named: {text}", m.name);
                }
            }
        }
    }

    #[test]
    fn less_demand_or_more_capacity_never_turns_a_plan_into_a_failure(
        pools in prop::collection::vec(pool_params(), 1..=2),
        models in prop::collection::vec(model_params(), 1..=5),
        pick in any::<u64>(),
    ) {
        let (spec, catalog) = build(&pools, &models);
        let Ok(_) = plan::plan(&spec, &catalog) else { return Ok(()) };
        let i = (pick % spec.models.len() as u64) as usize;
        // One replica fewer of one model (or the model removed).
        let mut less = spec.clone();
        match less.models[i].demand {
            Demand::Replicas(n) if n > 1 => less.models[i].demand = Demand::Replicas(n - 1),
            _ => {
                less.models.remove(i);
            }
        }
        if !less.models.is_empty() {
            let r = plan::plan(&less, &catalog);
            prop_assert!(r.is_ok(), "removing demand failed: {:?}", r.err().map(|d| d.iter().map(|d| d.message.clone()).collect::<Vec<_>>()));
        }
        // One node more in one pool.
        let mut more = spec.clone();
        let p = (pick as usize / 7) % more.pools.len();
        if let gpuplan::spec::Nodes::Named(names) = &mut more.pools[p].nodes {
            names.push("extra-node".to_owned());
        }
        let r = plan::plan(&more, &catalog);
        prop_assert!(r.is_ok(), "adding a node failed: {:?}", r.err().map(|d| d.iter().map(|d| d.message.clone()).collect::<Vec<_>>()));
    }

    #[test]
    fn the_suggested_capacity_makes_the_plan_feasible(
        pools in prop::collection::vec(pool_params(), 1..=2),
        models in prop::collection::vec(model_params(), 1..=5),
    ) {
        let (spec, catalog) = build(&pools, &models);
        let Err(diags) = plan::plan(&spec, &catalog) else { return Ok(()) };
        if !diags.iter().all(|d| d.code == "capacity-exceeded") {
            return Ok(());
        }
        let mut grown = spec.clone();
        for d in diags.iter() {
            let help = d.help.clone().unwrap_or_default();
            // "add N × GPU node(s) (G GPU(s) each) to pool `p`"
            let n: usize = help.split_whitespace().nth(1).and_then(|w| w.parse().ok()).unwrap_or(0);
            let pool = help.rsplit('`').nth(1).unwrap_or_default().to_owned();
            prop_assert!(n > 0 && !help.contains("at least"), "unconfirmed or unparsable help: {help}");
            let pool = grown.pools.iter_mut().find(|p| p.name == pool).expect("the help names a pool");
            if let gpuplan::spec::Nodes::Named(names) = &mut pool.nodes {
                for k in 0..n {
                    names.push(format!("added-{k}"));
                }
            }
        }
        let r = plan::plan(&grown, &catalog);
        prop_assert!(r.is_ok(), "the suggested addition does not plan: {:?}", r.err().map(|d| d.iter().map(|d| d.message.clone()).collect::<Vec<_>>()));
    }

    #[test]
    fn output_is_identical_twice_and_under_input_reordering(
        pools in prop::collection::vec(pool_params(), 1..=2),
        models in prop::collection::vec(model_params(), 1..=5),
        shuffle in any::<u64>(),
    ) {
        let (spec, catalog) = build(&pools, &models);
        let first = fingerprint(&plan::plan(&spec, &catalog));
        prop_assert_eq!(&first, &fingerprint(&plan::plan(&spec, &catalog)));
        let mut shuffled = spec.clone();
        let mut rng = bench::SplitMix64(shuffle);
        for i in (1..shuffled.models.len()).rev() {
            shuffled.models.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        if rng.next_u64() % 2 == 1 {
            shuffled.pools.reverse();
        }
        prop_assert_eq!(&first, &fingerprint(&plan::plan(&shuffled, &catalog)));
    }

    #[test]
    fn small_cases_use_as_few_gpus_as_a_brute_force_search((nodes, per_node, params) in brute_force_case()) {
        let catalog = bench::catalog();
        let Some(gpu) = catalog.get(A100) else { return Err(TestCaseError::fail("no A100 in the catalog")) };
        let models: Vec<Model> = params
            .iter()
            .enumerate()
            .map(|(i, &(gib, twentieths, replicas, dedicated, spread))| {
                let mut m = bench::model(&format!("m{i}"), gib * 1024, f64::from(twentieths) / 20.0, replicas);
                m.isolation = if dedicated { Isolation::Dedicated } else { Isolation::Hardware };
                m.spread = if spread { Spread::Gpu } else { Spread::None };
                m
            })
            .collect();
        let names = (1..=nodes).map(|n| format!("n{n}")).collect();
        let spec = bench::spec("brute", vec![bench::pool("a100", A100, per_node, names)], models);
        let optimum = brute_force_gpus(gpu, &spec.models, nodes * per_node);
        match plan::plan(&spec, &catalog) {
            Ok(plan) => {
                // The bound valid for every plan is at most the true optimum, and "optimal"
                // is never claimed above it.
                let q = &plan.quality;
                prop_assert!(optimum.is_some_and(|o| q.gpus.lower_bound <= o), "bound {} above the optimum {optimum:?}", q.gpus.lower_bound);
                if q.proof == plan::Proof::Optimal {
                    prop_assert_eq!(Some(q.gpus.used), optimum, "called optimal above the optimum");
                }
                // The brute force does not know that the device plugin picks the MIG instance
                // inside a node (two `spread: gpu` replicas may then share a GPU), so with
                // spread models it is a lower bound only; the planner enforces that rule and
                // may need more GPUs (docs/planner.md, Limits).
                if spec.models.iter().any(|m| m.spread == Spread::Gpu) {
                    prop_assert!(optimum.is_some_and(|o| plan.quality.gpus.used >= o), "planner below brute force");
                } else {
                    prop_assert_eq!(Some(plan.quality.gpus.used), optimum, "planner vs brute force");
                }
            }
            // With a `spread: gpu` model the brute force's plan may break the device plugin's
            // rule (two replicas handed instances of one GPU), so a refusal is allowed — but
            // only one the exhaustive search proved (`no-feasible-plan`), never the
            // planner's own failure. Example (found with PROPTEST_CASES=5000): one node of two
            // A100s, a `spread: gpu` model of two replicas needing `2g.20gb` and beside it a
            // replica needing `3g.40gb` and three needing `2g.20gb`: the brute force packs
            // two GPUs, and every such packing puts both spread replicas within reach of one
            // GPU's instances.
            Err(diags) if optimum.is_some() && spec.models.iter().any(|m| m.spread == Spread::Gpu) => prop_assert!(
                diags.iter().all(|d| d.code == codes::NO_FEASIBLE_PLAN),
                "the planner failed ({:?}) where the brute force found {:?} GPUs without the device plugin's rule",
                diags.iter().map(|d| &d.message).collect::<Vec<_>>(),
                optimum
            ),
            Err(diags) => prop_assert!(
                optimum.is_none(),
                "the planner failed ({:?}) but {:?} GPUs suffice",
                diags.iter().map(|d| &d.message).collect::<Vec<_>>(),
                optimum
            ),
        }
    }
}

#[test]
fn brute_force_packs_the_voice_pipeline_on_two_gpus() {
    let (spec, catalog) = bench::voice_pipeline();
    let Some(gpu) = catalog.get(A100) else { panic!("no A100 in the catalog") };
    assert_eq!(brute_force_gpus(gpu, &spec.models, 2), Some(2));
    assert_eq!(brute_force_gpus(gpu, &spec.models, 1), None);
    // Seven 1g.10gb-sized replicas share one GPU; an eighth needs a second one.
    let small = |n| vec![bench::model("s", 9_000, 0.1, n)];
    assert_eq!(brute_force_gpus(gpu, &small(7), 4), Some(1));
    assert_eq!(brute_force_gpus(gpu, &small(8), 4), Some(2));
    let mut spread = small(3);
    spread[0].spread = Spread::Gpu;
    assert_eq!(brute_force_gpus(gpu, &spread, 4), Some(3));
}
