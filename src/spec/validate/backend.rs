//! The device backend of each pool (`cluster.backend`, `backend` on a pool) and, for pools on
//! the DRA backend, their GPUs' UUIDs (`current[].uuids`): docs/dra.md.
//!
//! A `dra` pool must have named nodes (an autoscaled pool has no UUIDs to pin: refused with
//! `dra-autoscaled-pool`), and every node of it exactly `gpusPerNode` well-formed UUIDs, none
//! repeated in the inventory (`dra-missing-uuids`, `invalid-gpu-uuid`).

use std::collections::BTreeMap;

use super::{CheckedPool, Validator};
use crate::diagnostics::{Span, codes};
use crate::manifest::{self as raw, Manifest, Sp};
use crate::spec::error;
use crate::spec::{Backend, DraPool, Nodes};

/// The command that writes the UUIDs, named in the diagnostics.
const IMPORT_COMMAND: &str = "gpuplan current import --resource-slices FILE";

impl Validator<'_> {
    /// Sets [`crate::spec::Pool::dra`] on every checked pool whose backend is `dra`.
    pub(super) fn backends(&mut self, m: &Manifest, pools: &mut [CheckedPool]) {
        let default = m.cluster.as_ref().and_then(|c| c.backend.as_ref());
        let mut seen: BTreeMap<String, Span> = BTreeMap::new();
        for raw_pool in &m.inventory.pools {
            let Some(checked) = pools.iter_mut().find(|c| c.pool.name == raw_pool.name.value) else {
                continue;
            };
            let backend = raw_pool.backend.as_ref().or(default);
            let Some(Sp { value: Backend::Dra, span }) = backend else { continue };
            checked.pool.dra = self.dra_pool(raw_pool, &checked.pool.nodes, span, &mut seen);
        }
    }

    fn dra_pool(
        &mut self,
        p: &raw::Pool,
        nodes: &Nodes,
        backend: &Span,
        seen: &mut BTreeMap<String, Span>,
    ) -> Option<DraPool> {
        let Nodes::Named(names) = nodes else {
            self.push(
                error(
                    codes::DRA_AUTOSCALED_POOL,
                    backend,
                    format!("pool `{}` is autoscaled and cannot use the `dra` backend", p.name.value),
                    "`dra` here",
                    "its nodes and GPU UUIDs exist only once the autoscaler creates them, so no claim \
                     can be pinned to a planned device; set `backend: devicePlugin` on the pool",
                )
                .with_label(p.name.span.clone(), "autoscaled pool"),
            );
            return None;
        };
        let gpus_per_node = usize::try_from(p.gpus_per_node.value).unwrap_or(0);
        let mut uuids = BTreeMap::new();
        let mut ok = true;
        for node in names {
            let current = p.current.iter().flatten().find(|c| &c.node.value == node);
            let Some(list) = current.and_then(|c| c.uuids.as_ref()) else {
                let span = current.map_or(&p.name.span, |c| &c.node.span);
                self.push(
                    error(
                        codes::DRA_MISSING_UUIDS,
                        span,
                        format!("node `{node}` of pool `{}` (backend `dra`) has no GPU UUIDs", p.name.value),
                        "no `uuids`",
                        format!(
                            "every claim names its GPU by UUID: run `{IMPORT_COMMAND}` on the output of \
                             `kubectl get resourceslices -o json` and paste its `current` entries"
                        ),
                    )
                    .with_label(backend.clone(), "`dra` here"),
                );
                ok = false;
                continue;
            };
            ok &= self.uuid_list(node, list, gpus_per_node, current.and_then(|c| c.span.as_ref()), seen);
            uuids.insert(node.clone(), list.iter().map(|u| u.value.clone()).collect());
        }
        ok.then_some(DraPool { uuids })
    }

    /// Checks one node's UUIDs: the count, the form, no repeats across the inventory.
    fn uuid_list(
        &mut self,
        node: &str,
        list: &[Sp<String>],
        gpus_per_node: usize,
        span: Option<&Span>,
        seen: &mut BTreeMap<String, Span>,
    ) -> bool {
        let mut ok = true;
        if list.len() != gpus_per_node {
            // Underline the list itself (from its first UUID to its last), else the node.
            let listed = list
                .first()
                .zip(list.last())
                .map(|(a, b)| Span::new(a.span.file, a.span.range.start..b.span.range.end));
            if let Some(span) = listed.as_ref().or(span) {
                self.push(error(
                    codes::INVALID_GPU_UUID,
                    span,
                    format!(
                        "node `{node}` lists {} GPU UUIDs, but the pool has {gpus_per_node} GPUs per node",
                        list.len()
                    ),
                    "wrong number of UUIDs",
                    format!("give one UUID per GPU, by index, as `{IMPORT_COMMAND}` writes them"),
                ));
            }
            ok = false;
        }
        for u in list {
            if !well_formed(&u.value) {
                self.push(error(
                    codes::INVALID_GPU_UUID,
                    &u.span,
                    format!("`{}` is not a GPU UUID", u.value),
                    "not `GPU-…`",
                    "a GPU UUID is `GPU-` and hexadecimal digits with dashes, as `nvidia-smi -L` prints it \
                     (MIG devices are pinned by their parent GPU's UUID)",
                ));
                ok = false;
            } else if let Some(first) = seen.get(&u.value.to_ascii_lowercase()) {
                self.push(
                    error(
                        codes::INVALID_GPU_UUID,
                        &u.span,
                        format!("GPU UUID `{}` appears twice in the inventory", u.value),
                        "second use",
                        "every GPU has its own UUID; re-run the import",
                    )
                    .with_label(first.clone(), "first use"),
                );
                ok = false;
            } else {
                seen.insert(u.value.to_ascii_lowercase(), u.span.clone());
            }
        }
        ok
    }
}

/// `GPU-` then hexadecimal digits and dashes (NVML's form), at least 8 digits.
pub(crate) fn well_formed(uuid: &str) -> bool {
    let Some(rest) = uuid.strip_prefix("GPU-") else { return false };
    rest.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        && rest.chars().filter(char::is_ascii_hexdigit).count() >= 8
        && !rest.starts_with('-')
        && !rest.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::well_formed;

    #[test]
    fn uuids_have_nvml_form() {
        assert!(well_formed("GPU-2fa81118-5a5f-aa66-7660-471eed407181"));
        assert!(!well_formed("MIG-2fa81118-5a5f-aa66-7660-471eed407181"));
        assert!(!well_formed("GPU-"));
        assert!(!well_formed("GPU-zz"));
        assert!(!well_formed("GPU-2fa81118-"));
    }
}
