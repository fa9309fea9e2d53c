//! Builds a [`Spec`] from a [`Manifest`], collecting every problem.
//!
//! WALKING SKELETON: checks units, catalog ids and enums; the full rule set comes with the
//! manifest issue.

use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostic, Diagnostics, Span, codes, nearest};
use crate::manifest::Manifest;

use super::*;

/// Checks a manifest against the catalog. Returns the spec and any warnings, or every problem.
pub fn validate(manifest: &Manifest, catalog: &Catalog) -> Result<(Spec, Diagnostics), Diagnostics> {
    let mut diags = Diagnostics::new();
    let span = manifest.file.map(|f| Span::new(f, 0..0));
    let error = |message: String| {
        let d = Diagnostic::error(codes::INVALID_VALUE, message);
        match &span {
            Some(s) => d.at(s.clone(), "in this manifest"),
            None => d,
        }
    };
    let mut pools = Vec::new();
    for raw in &manifest.inventory.pools {
        let Some(gpu) = catalog.get(&raw.gpu) else {
            let mut d = error(format!("unknown GPU `{}`", raw.gpu));
            if let Some(n) = nearest(&raw.gpu, catalog.ids()) {
                d = d.with_help(format!("did you mean `{n}`?"));
            }
            diags.push(d);
            continue;
        };
        pools.push(Pool {
            name: raw.name.clone(),
            gpu: gpu.id.clone(),
            gpus_per_node: raw.gpus_per_node,
            nodes: Nodes::Named(raw.nodes.clone()),
            cost_per_gpu_hour: raw.cost_per_gpu_hour,
            node_selector: BTreeMap::new(),
            taints: Vec::new(),
            current: Vec::new(),
            span: span.clone(),
        });
    }
    let mut models = Vec::new();
    for raw in &manifest.models {
        let Some(memory_mib) = parse_memory_mib(&raw.memory) else {
            diags.push(
                error(format!("`{}` is not a memory size", raw.memory))
                    .with_help("write a number and a unit, such as `10GiB` or `9600MiB`"),
            );
            continue;
        };
        let isolation = match raw.isolation.as_deref().unwrap_or("hardware") {
            "hardware" => Isolation::Hardware,
            "shared" => Isolation::Shared,
            "dedicated" => Isolation::Dedicated,
            other => {
                diags.push(error(format!("unknown isolation `{other}`")));
                continue;
            }
        };
        let spread = match raw.spread.as_deref().unwrap_or("none") {
            "none" => Spread::None,
            "gpu" => Spread::Gpu,
            "node" => Spread::Node,
            other => {
                diags.push(error(format!("unknown spread `{other}`")));
                continue;
            }
        };
        models.push(Model {
            name: raw.name.clone(),
            image: raw.image.clone(),
            command: Vec::new(),
            args: Vec::new(),
            env: raw.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            ports: Vec::new(),
            memory_mib,
            compute: raw.compute.unwrap_or(if raw.gpus.is_some() { 1.0 } else { 0.1 }),
            demand: Demand::Replicas(raw.replicas.unwrap_or(1)),
            isolation,
            gpus: raw.gpus,
            latency: None,
            spread,
            pools: Vec::new(),
            gpu_types: Vec::new(),
            priority: 0,
            llm: raw.gpus.is_some(),
            span: span.clone(),
        });
    }
    if diags.has_errors() {
        return Err(diags);
    }
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    models.sort_by(|a, b| a.name.cmp(&b.name));
    let spec = Spec {
        name: manifest.metadata.name.clone(),
        cluster: Cluster {
            namespace: manifest.cluster.namespace.clone().unwrap_or_else(|| "default".into()),
            operator_namespace: manifest
                .cluster
                .operator_namespace
                .clone()
                .unwrap_or_else(|| "gpu-operator".into()),
            mig_strategy: MigStrategy::Mixed,
            time_slicing: TimeSlicingOptions {
                rename_by_default: true,
                fail_requests_greater_than_one: true,
            },
            output: OutputOptions { cluster_policy_patch: true, helm_values: true, argocd: None, flux: None },
        },
        pools,
        models,
        policy: Policy {
            llm_never_time_sliced: true,
            max_time_slicing_replicas: 8,
            memory_headroom: 0.0,
            time_slicing_efficiency: 0.9,
        },
    };
    Ok((spec, diags))
}

fn parse_memory_mib(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let mib = match unit.trim() {
        "GiB" => value * 1024.0,
        "MiB" => value,
        "GB" => value * 1e9 / 1_048_576.0,
        "MB" => value * 1e6 / 1_048_576.0,
        _ => return None,
    };
    (mib.is_finite() && mib > 0.0 && mib < 1e12).then(|| mib.ceil() as u64)
}
