# Turns `gpuplan --format json diff` into a pull-request comment (docs/ci.md).
# Copy to .github/gpuplan-comment.jq. Keys: docs/ci.md, "The JSON summary".
.summary as $s
| $s.objects as $o
| "### gpuplan: \($o.add) to add, \($o.change) to change, \($o.destroy) to destroy\n"
+ ([$o.byKind | to_entries[] | "- \(.key): +\(.value.add) ~\(.value.change) -\(.value.destroy)"]
   + [$o.disruptions[] | "- **\(.)**"]
   + (if $o.cost == null then [] else
       ["- cost: \($o.cost.beforePerHour) → \($o.cost.afterPerHour) \($o.cost.currency // "")/h"] end)
   + (if $s.gpusBefore == null then ["- no committed plan to compare with: a first plan"] else
       ["- GPUs: \($s.gpusBefore) → \($s.gpusAfter)"]
       + [$s.modelsAdded[] | "- added `\(.model)` (\(.replicas) replicas)"]
       + [$s.modelsRemoved[] | "- removed `\(.model)` (\(.replicas) replicas)"]
       + [$s.modelsChanged[] | "- `\(.model)`: \(.replicasBefore) → \(.replicasAfter) replicas, \(.moved) moved"]
       + ["- nodes to drain: \($s.nodesRepartitioned | length) (\($s.waves | length) waves)"] end)
   | join("\n"))
