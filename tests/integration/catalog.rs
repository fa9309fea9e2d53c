//! The GPU catalog: embedded data against the driver tables, layout validity and enumeration,
//! user catalogs, `catalog import` and the `catalog` commands.

use std::collections::{BTreeMap, BTreeSet};

use gpuplan::catalog::layout::{self, LayoutError};
use gpuplan::catalog::{BUILTIN, Catalog, GpuModel, Trust, check_model, import, parse_entry};
use gpuplan::diagnostics::{Sources, codes};
use proptest::prelude::*;

use super::cli::gpuplan;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nvidia-smi");

fn builtin() -> Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(Catalog::builtin).clone()
}

/// Every MIG GPU with the set of its enumerated multisets (sorted names), computed once.
fn enumerations() -> &'static [(GpuModel, BTreeSet<Vec<String>>)] {
    static ALL: std::sync::OnceLock<Vec<(GpuModel, BTreeSet<Vec<String>>)>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        mig_gpus()
            .into_iter()
            .map(|gpu| {
                let set = layout::enumerate(&gpu)
                    .iter()
                    .map(|l| {
                        let mut p: Vec<String> = l.profiles().into_iter().map(str::to_owned).collect();
                        p.sort_unstable();
                        p
                    })
                    .collect();
                (gpu, set)
            })
            .collect()
    })
}

fn gpu(id: &str) -> GpuModel {
    builtin().get(id).cloned().unwrap_or_else(|| panic!("`{id}` is in the builtin catalog"))
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}")).expect("fixture exists")
}

// --- the embedded data --------------------------------------------------------------------------

#[test]
fn every_builtin_file_parses_and_passes_the_entry_rules() {
    let mut sources = Sources::new();
    for (name, text) in BUILTIN {
        let gpu = parse_entry(&mut sources, name, text).unwrap_or_else(|d| panic!("`{name}`: {d:?}"));
        assert!(check_model(&gpu).is_empty());
    }
    assert_eq!(builtin().len(), BUILTIN.len(), "two built-in files share an id");
}

#[test]
fn every_profile_row_records_its_source() {
    for gpu in builtin().iter() {
        assert!(!gpu.source.is_empty(), "`{}` has no source", gpu.id);
        for p in gpu.mig.iter().flat_map(|m| &m.profiles) {
            assert!(!p.source.is_empty(), "`{}` `{}` has no source", gpu.id, p.name);
            assert!(!p.name.contains("c."), "compute-instance profile `{}` in `{}`", p.name, gpu.id);
        }
    }
}

#[test]
fn pci_ids_aliases_and_labels_name_one_gpu_each() {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for gpu in builtin().iter() {
        let names = gpu.pci_ids.iter().chain(&gpu.aliases).chain(&gpu.product_labels).chain([&gpu.id]);
        for name in names.map(|n| n.to_ascii_lowercase()).collect::<BTreeSet<_>>() {
            if let Some(other) = seen.insert(name.clone(), gpu.id.clone()) {
                panic!("`{name}` names both `{other}` and `{}`", gpu.id);
            }
        }
    }
}

#[test]
fn the_issue_lists_every_mig_capable_gpu() {
    let expected = [
        ("A30", "0x20B710DE"),
        ("A100-SXM4-40GB", "0x20B010DE"),
        ("A100-PCIE-40GB", "0x20B110DE"),
        ("A100-SXM4-80GB", "0x20B210DE"),
        ("A100-PCIE-80GB", "0x20B510DE"),
        ("A800-SXM4-80GB", "0x20F310DE"),
        ("A800-PCIE-80GB", "0x20F510DE"),
        ("A800-PCIE-40GB", "0x20F610DE"),
        ("A800-SXM4-40GB", "0x20BD10DE"),
        ("H100-SXM5-80GB", "0x233010DE"),
        ("H100-PCIE-80GB", "0x233110DE"),
        ("H800-SXM5-80GB", "0x232410DE"),
        ("H800-PCIE-80GB", "0x232210DE"),
        ("H100-NVL", "0x232110DE"),
        ("H800-NVL", "0x233A10DE"),
        ("H100-96GB", "0x233D10DE"),
        ("GH200-96GB", "0x234210DE"),
        ("H20", "0x232910DE"),
        ("GH200-144GB", "0x234810DE"),
        ("H200-SXM", "0x233510DE"),
        ("H200-NVL", "0x233B10DE"),
        ("B200", "0x290110DE"),
        ("GB200", "0x294110DE"),
        ("B300", "0x318210DE"),
        ("GB300", "0x31C210DE"),
        ("RTX-PRO-6000-SERVER", "0x2BB510DE"),
        ("RTX-PRO-6000-WORKSTATION", "0x2BB110DE"),
        ("RTX-PRO-6000-MAX-Q", "0x2BB410DE"),
    ];
    let catalog = builtin();
    for (id, pci) in expected {
        let gpu = catalog.get(id).unwrap_or_else(|| panic!("`{id}` missing"));
        assert!(gpu.is_mig_capable(), "`{id}` is MIG-capable");
        assert_eq!(catalog.by_pci_id(pci).first().map(|g| g.id.as_str()), Some(id), "{pci}");
    }
    for id in ["L4", "L40", "L40S", "A10", "A10G", "T4", "RTX-6000-ADA", "A40"] {
        let gpu = catalog.get(id).unwrap_or_else(|| panic!("`{id}` missing"));
        assert!(!gpu.is_mig_capable() && layout::enumerate(gpu).is_empty(), "`{id}` has no MIG");
    }
    assert_eq!(catalog.get("NVIDIA-A100-SXM4-80GB").map(|g| g.id.as_str()), Some("A100-SXM4-80GB"));
}

/// A driver row: name, profile id, compute slices, memory slices, GiB as `-lgip` prints it, SMs
/// (0 when the table does not give them), max count, allowed starts, size.
type Row = (&'static str, u32, u8, u8, f64, u32, u8, &'static [u8], u8);

const ALL7: &[u8] = &[0, 1, 2, 3, 4, 5, 6];
const EVEN4: &[u8] = &[0, 2, 4, 6];
const EVEN3: &[u8] = &[0, 2, 4];
const HALVES: &[u8] = &[0, 4];
const FIRST: &[u8] = &[0];

/// Hand-copied from `reference/domain.md` §1.2–1.3 (real `nvidia-smi mig -lgip/-lgipp` output;
/// A100-40GB memory from its MiB column).
const DRIVER_TABLES: &[(&str, &[Row])] = &[
    (
        "H100-SXM5-80GB",
        &[
            ("1g.10gb", 19, 1, 1, 9.75, 16, 7, ALL7, 1),
            ("1g.10gb+me", 20, 1, 1, 9.75, 16, 1, ALL7, 1),
            ("1g.20gb", 15, 1, 2, 19.62, 26, 4, EVEN4, 2),
            ("2g.20gb", 14, 2, 2, 19.62, 32, 3, EVEN3, 2),
            ("3g.40gb", 9, 3, 4, 39.50, 60, 2, HALVES, 4),
            ("4g.40gb", 5, 4, 4, 39.50, 64, 1, FIRST, 4),
            ("7g.80gb", 0, 7, 8, 79.25, 132, 1, FIRST, 8),
        ],
    ),
    (
        "H100-NVL",
        &[
            ("1g.12gb", 19, 1, 1, 10.75, 16, 7, ALL7, 1),
            ("1g.12gb+me", 20, 1, 1, 10.75, 16, 1, ALL7, 1),
            ("1g.24gb", 15, 1, 2, 21.62, 26, 4, EVEN4, 2),
            ("2g.24gb", 14, 2, 2, 21.62, 32, 3, EVEN3, 2),
            ("3g.47gb", 9, 3, 4, 46.38, 60, 2, HALVES, 4),
            ("4g.47gb", 5, 4, 4, 46.38, 64, 1, FIRST, 4),
            ("7g.94gb", 0, 7, 8, 93.12, 132, 1, FIRST, 8),
        ],
    ),
    (
        "H200-SXM",
        &[
            ("1g.18gb", 19, 1, 1, 16.00, 16, 7, ALL7, 1),
            ("1g.18gb+me", 20, 1, 1, 16.00, 16, 1, ALL7, 1),
            ("1g.35gb", 15, 1, 2, 32.25, 26, 4, EVEN4, 2),
            ("2g.35gb", 14, 2, 2, 32.25, 32, 3, EVEN3, 2),
            ("3g.71gb", 9, 3, 4, 69.50, 60, 2, HALVES, 4),
            ("4g.71gb", 5, 4, 4, 69.50, 64, 1, FIRST, 4),
            ("7g.141gb", 0, 7, 8, 139.75, 132, 1, FIRST, 8),
        ],
    ),
    (
        "A100-SXM4-40GB",
        &[
            ("1g.5gb", 19, 1, 1, 4864.0 / 1024.0, 14, 7, ALL7, 1),
            ("1g.5gb+me", 20, 1, 1, 4864.0 / 1024.0, 14, 1, ALL7, 1),
            ("1g.10gb", 15, 1, 2, 9856.0 / 1024.0, 14, 4, EVEN4, 2),
            ("2g.10gb", 14, 2, 2, 9856.0 / 1024.0, 28, 3, EVEN3, 2),
            ("3g.20gb", 9, 3, 4, 19968.0 / 1024.0, 42, 2, HALVES, 4),
            ("4g.20gb", 5, 4, 4, 19968.0 / 1024.0, 56, 1, FIRST, 4),
            ("7g.40gb", 0, 7, 8, 40192.0 / 1024.0, 98, 1, FIRST, 8),
        ],
    ),
];

fn assert_rows_match(gpu: &GpuModel, rows: &[Row]) {
    let mig = gpu.mig.as_ref().unwrap_or_else(|| panic!("`{}` has MIG", gpu.id));
    assert_eq!((mig.compute_slices, mig.memory_slices), (7, 8), "`{}` slices", gpu.id);
    let names: Vec<&str> = mig.profiles.iter().map(|p| p.name.as_str()).collect();
    let expected: Vec<&str> = rows.iter().map(|r| r.0).collect();
    assert_eq!(names, expected, "`{}` profile names", gpu.id);
    for &(name, id, cs, ms, gib, sms, max, starts, size) in rows {
        let p = gpu.profile(name).unwrap_or_else(|| panic!("`{}` has `{name}`", gpu.id));
        let what = format!("`{}` `{name}`", gpu.id);
        assert_eq!((p.id, p.compute_slices, p.memory_slices, p.max_count), (id, cs, ms, max), "{what}");
        assert_eq!((p.starts.as_slice(), p.size), (starts, size), "{what} placements");
        if sms > 0 {
            assert_eq!(p.sms, sms, "{what} SMs");
        }
        let expected_mib = gib * 1024.0;
        let error = (p.memory_mib as f64 - expected_mib).abs() / expected_mib;
        assert!(error <= 0.01, "{what}: {} MiB is not within 1% of {expected_mib:.0}", p.memory_mib);
    }
}

#[test]
fn driver_rows_of_h100_h100_nvl_h200_and_a100_40gb_match_the_reference_tables() {
    for (id, rows) in DRIVER_TABLES {
        assert_rows_match(&gpu(id), rows);
    }
}

/// The labels GPU feature discovery put on a real H100 80GB HBM3 node with MIG in mixed mode
/// (NVIDIA's cloud-native-docs, vendored in `tests/data/nvidia/`): total memory, product name,
/// and each MIG device's memory (MiB, within 1%: GFD reports the usable memory) and SMs.
#[test]
fn catalog_agrees_with_the_labels_of_a_real_h100_node() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/nvidia/cloud-native-docs__gpu-operator__manifests__output__mig-mixed-node-labels.json"
    );
    let text = std::fs::read_to_string(path).expect("vendored labels are readable");
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&text).expect("labels parse");
    let h100 = gpu("H100-SXM5-80GB");
    assert_eq!(labels["nvidia.com/gpu.memory"], h100.memory_mib.to_string());
    assert!(h100.product_labels.contains(&labels["nvidia.com/gpu.product"]), "{:?}", h100.product_labels);
    let mut checked = 0;
    for (key, value) in &labels {
        let Some(profile) = key.strip_prefix("nvidia.com/mig-").and_then(|k| k.strip_suffix(".memory"))
        else {
            continue;
        };
        let p = h100.profile(profile).unwrap_or_else(|| panic!("`{profile}` in the catalog"));
        let mib: f64 = value.parse().expect("MiB");
        let error = (p.memory_mib as f64 - mib).abs() / mib;
        assert!(error <= 0.01, "`{profile}`: catalog {} MiB, node {mib} MiB", p.memory_mib);
        let sms = &labels[&format!("nvidia.com/mig-{profile}.multiprocessors")];
        assert_eq!(*sms, p.sms.to_string(), "`{profile}` SMs");
        checked += 1;
    }
    assert_eq!(checked, 3, "the node has 1g.10gb, 2g.20gb and 3g.40gb devices");
}

// --- layout validity ----------------------------------------------------------------------------

#[test]
fn accepts_h100_layouts_with_a_placement() {
    let h100 = gpu("H100-SXM5-80GB");
    let cases: &[&[&str]] = &[
        &["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],
        &["4g.40gb", "3g.40gb"],
        &["2g.20gb", "2g.20gb", "2g.20gb", "1g.20gb"],
        &["4g.40gb", "1g.20gb", "1g.20gb"],
        &["1g.10gb"; 7],
    ];
    for case in cases {
        let placed = layout::validate(&h100, case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
        assert_eq!(placed.len(), case.len());
        let mut used = [false; 8];
        for instance in &placed {
            let p = h100.profile(&instance.profile).expect("known profile");
            assert!(p.starts.contains(&instance.start), "{case:?}: start {} not allowed", instance.start);
            for slot in instance.start..instance.start + p.size {
                assert!(!std::mem::replace(&mut used[usize::from(slot)], true), "{case:?} overlaps");
            }
        }
    }
    let balanced = layout::validate(&h100, cases[0]).expect("valid");
    assert!(balanced.iter().any(|i| i.profile == "3g.40gb" && i.start == 4), "{balanced:?}");
}

#[test]
fn rejects_h100_layouts_with_the_right_reason() {
    let h100 = gpu("H100-SXM5-80GB");
    let mut seven_and_double = vec!["1g.10gb"; 7];
    seven_and_double.push("1g.20gb");
    type Reason = fn(&LayoutError) -> bool;
    let cases: Vec<(Vec<&str>, Reason)> = vec![
        (vec!["4g.40gb", "4g.40gb"], |e| matches!(e, LayoutError::TooMany { max: 1, count: 2, .. })),
        (vec!["1g.10gb"; 8], |e| matches!(e, LayoutError::TooMany { max: 7, count: 8, .. })),
        (vec!["1g.10gb+me", "1g.10gb+me"], |e| matches!(e, LayoutError::TooMany { max: 1, .. })),
        (vec!["1g.20gb"; 5], |e| matches!(e, LayoutError::TooMany { max: 4, count: 5, .. })),
        (vec!["3g.40gb", "3g.40gb", "1g.10gb"], |e| {
            matches!(e, LayoutError::MemoryExceeded { needed: 9, available: 8 })
        }),
        (vec!["3g.40gb", "4g.40gb", "1g.10gb"], |e| {
            matches!(e, LayoutError::ComputeExceeded { needed: 8, available: 7 })
        }),
        (seven_and_double, |e| matches!(e, LayoutError::ComputeExceeded { needed: 8, available: 7 })),
        (
            vec!["3g.20gb"],
            |e| matches!(e, LayoutError::UnknownProfile { profile, .. } if profile == "3g.20gb"),
        ),
    ];
    for (case, expected) in cases {
        let err = layout::validate(&h100, &case).expect_err("rejected");
        assert!(expected(&err), "{case:?}: wrong reason: {err}");
    }
}

#[test]
fn media_extensions_are_shared_across_me_variants() {
    let a30 = gpu("A30");
    assert!(layout::validate(&a30, &["1g.6gb+me", "2g.12gb"]).is_ok());
    let err = layout::validate(&a30, &["1g.6gb+me", "2g.12gb+me"]).expect_err("one media set");
    assert!(matches!(err, LayoutError::MediaExtensions { .. }), "{err}");
    let rtx = gpu("RTX-PRO-6000-SERVER");
    let err = layout::validate(&rtx, &["1g.24gb+me", "1g.24gb+me.all"]).expect_err("one media set");
    assert!(matches!(err, LayoutError::MediaExtensions { .. }), "{err}");
    assert!(layout::validate(&rtx, &["1g.24gb-me", "1g.24gb-me", "1g.24gb+gfx", "1g.24gb+me.all"]).is_ok());
}

#[test]
fn non_mig_gpus_reject_every_layout() {
    let err = layout::validate(&gpu("L4"), &["1g.10gb"]).expect_err("no MIG");
    assert!(matches!(err, LayoutError::NotMigCapable { .. }));
}

#[test]
fn maximal_layouts_of_h100_include_the_known_full_layouts() {
    let h100 = gpu("H100-SXM5-80GB");
    let maximal: Vec<BTreeMap<String, u32>> = layout::maximal(&h100).iter().map(|l| l.counts()).collect();
    let has = |pairs: &[(&str, u32)]| {
        let wanted: BTreeMap<String, u32> = pairs.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect();
        maximal.contains(&wanted)
    };
    assert!(has(&[("7g.80gb", 1)]));
    assert!(has(&[("4g.40gb", 1), ("3g.40gb", 1)]));
    assert!(has(&[("1g.10gb", 7)]));
    assert!(has(&[("3g.40gb", 1), ("2g.20gb", 1), ("1g.10gb", 2)]));
    assert!(!has(&[("4g.40gb", 1)]), "a lone 4g leaves room for more");
    for layout in layout::maximal(&h100) {
        let counts = layout.counts();
        for p in h100.profile_names() {
            let mut bigger: Vec<&str> = layout.profiles();
            bigger.push(p);
            assert!(layout::validate(&h100, &bigger).is_err(), "{counts:?} + `{p}` still fits");
        }
    }
}

#[test]
fn every_mig_gpu_enumerates_a_maximal_layout_among_its_layouts() {
    // Timing is the planner benchmark's business, not a test's; this checks the enumeration
    // of every built-in GPU terminates with consistent results.
    for gpu in builtin().iter().filter(|g| g.is_mig_capable()) {
        let all = layout::enumerate(gpu);
        let maximal = layout::maximal(gpu);
        assert!(!maximal.is_empty(), "{}: no maximal layout", gpu.id);
        for m in &maximal {
            assert!(all.contains(m), "{}: maximal layout {m:?} not enumerated", gpu.id);
        }
    }
}

fn mig_gpus() -> Vec<GpuModel> {
    builtin().iter().filter(|g| g.is_mig_capable()).cloned().collect()
}

#[test]
fn every_enumerated_layout_is_accepted_with_its_own_placement() {
    for gpu in mig_gpus() {
        let all = layout::enumerate(&gpu);
        let distinct: BTreeSet<Vec<&str>> = all
            .iter()
            .map(|l| {
                let mut p = l.profiles();
                p.sort_unstable();
                p
            })
            .collect();
        assert_eq!(distinct.len(), all.len(), "`{}` enumerates a multiset twice", gpu.id);
        for l in &all {
            assert_eq!(layout::validate(&gpu, &l.profiles()).as_ref(), Ok(&l.instances), "`{}`", gpu.id);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn validator_and_enumeration_agree(gpu_index in 0usize..64, picks in proptest::collection::vec(0usize..16, 0..9)) {
        let all = enumerations();
        let (gpu, set) = &all[gpu_index % all.len()];
        let names: Vec<&str> = gpu.profile_names().collect();
        let chosen: Vec<&str> = picks.iter().map(|&i| names[i % names.len()]).collect();
        let mut sorted: Vec<String> = chosen.iter().map(|&n| n.to_owned()).collect();
        sorted.sort_unstable();
        let enumerated = set.contains(&sorted);
        let valid = layout::validate(gpu, &chosen).is_ok();
        prop_assert_eq!(valid && !chosen.is_empty(), enumerated, "{:?} on {}", chosen, gpu.id);
    }

    #[test]
    fn importer_never_panics(lgip in ".{0,400}", lgipp in ".{0,200}", query in ".{0,200}") {
        let mut sources = Sources::new();
        let query_file = sources.add("query", query.clone());
        let mut info = import::parse_query(query_file, &query).unwrap_or_default();
        info.name.get_or_insert_with(|| "NVIDIA Test GPU".to_owned());
        let _ = import::import(&mut sources, ("lgip", &lgip), ("lgipp", &lgipp), &info, Some(query_file));
    }

    #[test]
    fn importer_never_panics_on_damaged_real_output(cut in 0usize..4000, junk in "[ |0-9a-z{}:/.,+-]{0,12}") {
        let lgip = fixture("h100-sxm5-80gb.lgip.txt");
        let lgipp = fixture("h100-sxm5-80gb.lgipp.txt");
        let at = (cut % (lgip.len() + 1)).min(lgip.len());
        let at = (0..=at).rev().find(|&i| lgip.is_char_boundary(i)).unwrap_or(0);
        let damaged = format!("{}{junk}{}", &lgip[..at], &lgip[at..]);
        let mut sources = Sources::new();
        let info = import::DeviceInfo {
            name: Some("NVIDIA H100 80GB HBM3".into()),
            memory_mib: Some(81559),
            ..Default::default()
        };
        let _ = import::import(&mut sources, ("lgip", &damaged), ("lgipp", &lgipp), &info, None);
        let _ = import::import(&mut sources, ("lgip", &lgip), ("lgipp", &damaged), &info, None);
    }
}

// --- user catalogs ------------------------------------------------------------------------------

const USER_A100: &str = r#"id: A100-SXM4-80GB
name: "NVIDIA A100-SXM4-80GB"
memoryMib: 81920
sms: 108
"#;

#[test]
fn user_entry_with_an_existing_id_overrides_it_with_a_warning() {
    let mut sources = Sources::new();
    let (catalog, diagnostics) = Catalog::load(&mut sources, &[("mine/a100.yaml".into(), USER_A100.into())]);
    assert!(!catalog.get("A100-SXM4-80GB").expect("still there").is_mig_capable());
    assert_eq!(diagnostics.iter().map(|d| d.code).collect::<Vec<_>>(), [codes::CATALOG_OVERRIDE]);
    assert!(!diagnostics.has_errors());
}

#[test]
fn user_entry_with_a_new_id_extends_the_catalog() {
    let text = USER_A100.replace("id: A100-SXM4-80GB", "id: MY-GPU");
    let mut sources = Sources::new();
    let (catalog, diagnostics) = Catalog::load(&mut sources, &[("mine/my.yaml".into(), text)]);
    assert!(diagnostics.is_empty());
    assert_eq!(catalog.len(), BUILTIN.len() + 1);
}

#[test]
fn two_user_files_with_one_id_are_an_error() {
    let text = USER_A100.replace("id: A100-SXM4-80GB", "id: MY-GPU");
    let files = [("a.yaml".to_owned(), text.clone()), ("b.yaml".to_owned(), text)];
    let mut sources = Sources::new();
    let (_, diagnostics) = Catalog::load(&mut sources, &files);
    assert_eq!(diagnostics.iter().map(|d| d.code).collect::<Vec<_>>(), [codes::CATALOG_DUPLICATE_ID]);
}

#[test]
fn bad_catalog_files_get_coded_diagnostics_with_positions() {
    let cases = [
        ("memoryMib: lots", codes::WRONG_TYPE),
        ("colour: green", codes::UNKNOWN_FIELD),
        (
            "mig: { computeSlices: 7, memorySlices: 8, profiles: [{ name: 1g.10gb, id: 19, computeSlices: 1, memorySlices: 1, memoryMib: 9984, sms: 16, maxCount: 7, starts: [7, 8], size: 1 }] }",
            codes::CATALOG_INVALID_ENTRY,
        ),
    ];
    for (extra, code) in cases {
        let text = format!(
            "{}{extra}\n",
            USER_A100.replace(
                "memoryMib: 81920\n",
                if extra.starts_with("memoryMib") { "" } else { "memoryMib: 81920\n" }
            )
        );
        let mut sources = Sources::new();
        let (_, diagnostics) = Catalog::load(&mut sources, &[("bad.yaml".into(), text)]);
        let d = diagnostics.iter().next().unwrap_or_else(|| panic!("`{extra}` is rejected"));
        assert_eq!(d.code, code, "{extra}: {}", d.message);
        let span = &d.labels[0].span;
        let (line, _) = sources.get(span.file).line_col(span.range.start);
        assert!(line >= 4, "`{extra}` points at line {line}");
    }
}

// --- catalog import -----------------------------------------------------------------------------

fn import_files(lgip: &str, lgipp: &str, query: &str) -> Result<GpuModel, gpuplan::diagnostics::Diagnostics> {
    let mut sources = Sources::new();
    let text = fixture(query);
    let query_file = sources.add(query, text.clone());
    let info = import::parse_query(query_file, &text)?;
    import::import(
        &mut sources,
        ("lgip", &fixture(lgip)),
        ("lgipp", &fixture(lgipp)),
        &info,
        Some(query_file),
    )
}

fn import_fixture(stem: &str) -> Result<GpuModel, gpuplan::diagnostics::Diagnostics> {
    import_files(&format!("{stem}.lgip.txt"), &format!("{stem}.lgipp.txt"), &format!("{stem}.query.txt"))
}

#[test]
fn importing_real_output_reproduces_the_driver_tables() {
    for (stem, id, label, pci) in [
        ("h100-sxm5-80gb", "H100-SXM5-80GB", "NVIDIA-H100-80GB-HBM3", "0x233010DE"),
        ("h100-nvl", "H100-NVL", "NVIDIA-H100-NVL", "0x232110DE"),
        ("a100-sxm4-40gb", "A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", "0x20B010DE"),
    ] {
        let imported = import_fixture(stem).unwrap_or_else(|d| panic!("{stem}: {d:?}"));
        let rows = DRIVER_TABLES.iter().find(|(i, _)| *i == id).map(|(_, r)| *r).expect("table");
        assert_rows_match(&imported, rows);
        assert_eq!(imported.product_labels, [label]);
        assert_eq!(imported.pci_ids, [pci]);
        assert!(imported.mig.iter().flat_map(|m| &m.profiles).all(|p| p.trust == Trust::Driver));
        let builtin = gpu(id);
        assert_eq!(imported.memory_mib, builtin.memory_mib, "{stem} total memory");
    }
}

#[test]
fn malformed_nvidia_smi_output_is_a_clear_error() {
    let mut sources = Sources::new();
    let info = import::DeviceInfo {
        name: Some("NVIDIA H100 80GB HBM3".into()),
        memory_mib: Some(81559),
        ..Default::default()
    };
    let h100_lgipp = fixture("h100-sxm5-80gb.lgipp.txt");
    let h100_lgip = fixture("h100-sxm5-80gb.lgip.txt");
    let cases = [
        (fixture("malformed-row.lgip.txt"), h100_lgipp.clone(), "cannot read the row of `3g.40gb`"),
        (h100_lgip.clone(), fixture("malformed.lgipp.txt"), "cannot read this placement line"),
        (h100_lgip.clone(), fixture("missing-placement.lgipp.txt"), "no placements for profile `7g.80gb`"),
        (fixture("no-mig.lgip.txt"), h100_lgipp.clone(), "no GPU-instance profile rows found"),
        (h100_lgip.clone(), String::new(), "no placement lines found"),
        (
            format!("{h100_lgip}\nsomething else\n"),
            h100_lgipp.clone(),
            "not part of `nvidia-smi mig -lgip` output",
        ),
        (
            h100_lgip.clone(),
            format!("{h100_lgipp}GPU  0 Profile ID 0 Placement: {{0}}\n"),
            "cannot read this placement line",
        ),
        (
            h100_lgip.replace("MIG 1g.10gb  ", "MIG 1c.1g.10gb"),
            h100_lgipp.clone(),
            "compute-instance profile",
        ),
    ];
    for (lgip, lgipp, message) in cases {
        let diagnostics =
            import::import(&mut sources, ("lgip", &lgip), ("lgipp", &lgipp), &info, None).expect_err(message);
        let d = diagnostics.iter().next().expect("a diagnostic");
        assert_eq!(d.code, codes::NVIDIA_SMI_PARSE);
        assert!(d.message.contains(message), "{} does not say {message}", d.message);
    }
}

#[test]
fn import_command_writes_an_entry_that_loads_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("h100-nvl.yaml");
    let lgip = std::fs::read_to_string(format!("{FIXTURES}/h100-nvl.lgip.txt")).expect("fixture");
    let lgipp = std::fs::read_to_string(format!("{FIXTURES}/h100-nvl.lgipp.txt")).expect("fixture");
    std::fs::write(dir.path().join("lgip.txt"), lgip).expect("write");
    std::fs::write(dir.path().join("lgipp.txt"), lgipp).expect("write");
    // A GPU the catalog does not have: no PCI id, a new name and id.
    let run = gpuplan()
        .current_dir(dir.path())
        .args(["catalog", "import", "--lgip", "lgip.txt", "--lgipp", "lgipp.txt"])
        .args(["--name", "NVIDIA Test 94GB", "--memory-mib", "95830", "--sms", "132", "--out"])
        .arg(&out)
        .output()
        .expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let text = std::fs::read_to_string(&out).expect("written");
    let mut sources = Sources::new();
    let entry = parse_entry(&mut sources, "h100-nvl.yaml", &text).expect("loads back");
    assert_eq!(entry.id, "TEST-94GB");
    let show = gpuplan()
        .args(["catalog", "show", "TEST-94GB", "--catalog"])
        .arg(dir.path().join("h100-nvl.yaml"))
        .output()
        .expect("runs");
    assert_eq!(show.status.code(), Some(0), "{}", String::from_utf8_lossy(&show.stderr));
    assert!(String::from_utf8_lossy(&show.stdout).contains("3g.47gb"));
}

#[test]
fn importing_a_gpu_the_catalog_has_merges_into_its_entry_and_keeps_its_aliases() {
    let run = gpuplan()
        .args(["catalog", "import", "--lgip", &format!("{FIXTURES}/h200-580.lgip.txt")])
        .args(["--lgipp", &format!("{FIXTURES}/h200-580.lgipp.txt")])
        .args(["--query", &format!("{FIXTURES}/h200-580.query.xml")])
        .output()
        .expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stderr).contains("merged into the catalog entry `H200-SXM`"));
    let text = String::from_utf8(run.stdout).expect("utf-8");
    let mut sources = Sources::new();
    let merged = parse_entry(&mut sources, "h200.yaml", &text).expect("loads back");
    let builtin = gpu("H200-SXM");
    assert_eq!(merged.id, "H200-SXM");
    assert_eq!(merged.aliases, builtin.aliases, "aliases kept");
    assert_eq!(merged.memory_mib, builtin.memory_mib);
    assert_eq!(merged.driver.as_deref(), Some("580.159.04"));
    let key = |g: &GpuModel| {
        g.mig
            .iter()
            .flat_map(|m| &m.profiles)
            .map(|p| {
                (
                    p.name.clone(),
                    p.id,
                    p.memory_mib,
                    p.sms,
                    p.max_count,
                    p.starts.clone(),
                    p.size,
                    p.driver.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&merged), key(&builtin), "the catalog's H200 rows are the driver's, to the MiB");
}

#[test]
fn import_that_would_shadow_an_existing_entry_is_refused() {
    let run = gpuplan()
        .args(["catalog", "import", "--lgip", &format!("{FIXTURES}/h100-nvl.lgip.txt")])
        .args(["--lgipp", &format!("{FIXTURES}/h100-nvl.lgipp.txt")])
        .args(["--query", &format!("{FIXTURES}/h100-nvl.query.txt"), "--id", "MY-H100-NVL"])
        .output()
        .expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("error[catalog-import-conflict]") && stderr.contains("`H100-NVL`"), "{stderr}");
}

#[test]
fn nvidia_user_guide_examples_import_including_singular_placement_lines() {
    let mut sources = Sources::new();
    let info = import::DeviceInfo {
        name: Some("NVIDIA A100-SXM4-40GB".into()),
        memory_mib: Some(40960),
        ..Default::default()
    };
    let gpu = import::import(
        &mut sources,
        ("lgip", &fixture("mig-user-guide-a100.lgip.txt")),
        ("lgipp", &fixture("mig-user-guide-a100.lgipp.txt")),
        &info,
        None,
    )
    .unwrap_or_else(|d| panic!("{d:?}"));
    let p = gpu.profile("7g.40gb").expect("7g row");
    assert_eq!((p.starts.as_slice(), p.size), (&[0u8][..], 8));
    assert_eq!(gpu.profile("4g.20gb").map(|p| p.starts.clone()), Some(vec![0]));
    assert_eq!(gpu.profile_names().count(), 7);
}

#[test]
fn placement_lines_with_every_spelling_and_attribute_profiles_parse() {
    let mut sources = Sources::new();
    let lgip = "\
|   0  MIG 1g.24gb            14     4/4        23.12      No     46     1     0   |
|                                                              1     1     0   |
|   0  MIG 1g.24gb+me.all     65     1/1        23.12      No     46     1     0   |
|   0  MIG 1g.24gb+gfx        47     4/4        23.12      No     46     1     0   |
|   0  MIG 4g.96gb            0      1/1        95.00      No     188    4     0   |
";
    let lgipp = "GPU 0 Profile ID 14 Placements: {0,1,2,3}:1\nGPU 0 Profile ID 65 Placements : {0,1,2,3}:1\n\
                 GPU  0 Profile ID 47 Placements:{0, 1, 2, 3}:1\nGPU  0 Profile ID  0 Placement : {0}:4\n";
    let info = import::DeviceInfo {
        name: Some("NVIDIA Synthetic".into()),
        memory_mib: Some(97887),
        ..Default::default()
    };
    let gpu = import::import(&mut sources, ("lgip", lgip), ("lgipp", lgipp), &info, None)
        .unwrap_or_else(|d| panic!("{d:?}"));
    assert_eq!(gpu.profile("1g.24gb+me.all").map(|p| p.attributes.clone()), Some(vec!["+me.all".to_owned()]));
    assert_eq!(gpu.profile("1g.24gb+gfx").map(|p| p.starts.clone()), Some(vec![0, 1, 2, 3]));
    assert_eq!(gpu.profile("4g.96gb").map(|p| p.size), Some(4));
}

#[test]
fn missing_fb_memory_usage_is_an_error_not_a_guess() {
    let query = fixture("h100-sxm5-80gb.query.txt");
    let cut: String = query.lines().filter(|l| !l.contains("FB Memory Usage")).collect::<Vec<_>>().join("\n");
    let mut sources = Sources::new();
    let file = sources.add("query", cut.clone());
    let info = import::parse_query(file, &cut).expect("text parses");
    assert_eq!(info.memory_mib, None, "`Total` outside `FB Memory Usage` is not the total memory");
    let err = import::import(
        &mut sources,
        ("lgip", &fixture("h100-sxm5-80gb.lgip.txt")),
        ("lgipp", &fixture("h100-sxm5-80gb.lgipp.txt")),
        &info,
        Some(file),
    )
    .expect_err("no total memory");
    assert!(err.iter().any(|d| d.message.contains("FB Memory Usage")));
}

#[test]
fn xml_query_gives_memory_pci_id_and_driver() {
    let mut sources = Sources::new();
    let text = fixture("h200-580.query.xml");
    let file = sources.add("q.xml", text.clone());
    let info = import::parse_query(file, &text).expect("XML parses");
    assert_eq!(info.memory_mib, Some(143_771));
    assert_eq!(info.pci_id.as_deref(), Some("0x233510DE"));
    assert_eq!(info.driver.as_deref(), Some("580.159.04"));
    assert_eq!(info.name.as_deref(), Some("NVIDIA H200"));
    assert!(import::parse_query(file, "<nvidia_smi_log><gpu>").is_err());
}

#[test]
fn driver_rows_name_no_other_gpu_and_nothing_borrowed() {
    let catalog = Catalog::builtin();
    let norm =
        |s: &str| s.to_ascii_lowercase().chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>();
    let names = |g: &GpuModel| -> Vec<String> {
        std::iter::once(&g.id)
            .chain(&g.aliases)
            .chain(&g.product_labels)
            .chain(std::iter::once(&g.name))
            .map(|n| norm(n))
            .collect()
    };
    let mut bad = Vec::new();
    for g in catalog.iter() {
        let own = names(g);
        for p in g.mig.iter().flat_map(|m| &m.profiles).filter(|p| p.trust == Trust::Driver) {
            let lower = p.source.to_ascii_lowercase();
            for word in
                ["scaled", "scaling", "borrowed", "inferred", "assumed", "same as", " as 1g", "sibling"]
            {
                if lower.contains(word) {
                    bad.push(format!("{} {}: says `{word}`", g.id, p.name));
                }
            }
            let source = norm(&p.source);
            for other in catalog.iter().filter(|o| o.id != g.id) {
                for n in names(other)
                    .into_iter()
                    .filter(|n| n.len() >= 4 && !own.iter().any(|o| o.contains(n.as_str())))
                {
                    if source.contains(&n) {
                        bad.push(format!("{} {}: names `{}` ({n})", g.id, p.name, other.id));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "driver rows with borrowed sources:\n{}", bad.join("\n"));
}

#[test]
fn import_command_reports_malformed_input_with_exit_1() {
    let run = gpuplan()
        .args(["catalog", "import", "--color", "never", "--name", "NVIDIA H100 80GB HBM3"])
        .args(["--lgip", &format!("{FIXTURES}/malformed-row.lgip.txt")])
        .args(["--lgipp", &format!("{FIXTURES}/h100-sxm5-80gb.lgipp.txt")])
        .output()
        .expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("error[nvidia-smi-parse]") && stderr.contains("malformed-row.lgip.txt:18:"),
        "{stderr}"
    );
}

// --- catalog list / show ------------------------------------------------------------------------

#[test]
fn show_draws_the_maximal_layouts_of_h100() {
    let run = gpuplan().args(["catalog", "show", "h100-80gb"]).output().expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(0));
    insta::assert_snapshot!("catalog-show-h100", String::from_utf8_lossy(&run.stdout));
}

#[test]
fn list_and_show_speak_json() {
    let list = gpuplan().args(["catalog", "list", "--format", "json"]).output().expect("runs gpuplan");
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).expect("JSON list");
    assert_eq!(rows.as_array().map(Vec::len), Some(BUILTIN.len()));
    let show = gpuplan().args(["catalog", "show", "A30", "--format", "json"]).output().expect("runs gpuplan");
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).expect("JSON show");
    assert_eq!(shown["gpu"]["id"], "A30");
    assert!(shown["maximalLayouts"].as_array().is_some_and(|l| !l.is_empty()));
}

#[test]
fn show_of_an_unknown_gpu_suggests_the_nearest_id() {
    let run = gpuplan().args(["catalog", "show", "H100-SMX5-80GB"]).output().expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("did you mean `H100-SXM5-80GB`"));
}

#[test]
fn import_help_is_reviewed() {
    let out = gpuplan().args(["catalog", "import", "--help"]).env("COLUMNS", "100").output().expect("runs");
    insta::assert_snapshot!("gpuplan-catalog-import", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn attributes_may_be_left_out_of_user_files() {
    let text = format!(
        "{}mig: {{ computeSlices: 7, memorySlices: 8, profiles: [{{ name: 1g.10gb+me, id: 20, computeSlices: 1, memorySlices: 1, memoryMib: 9984, sms: 16, maxCount: 1, starts: [0, 1, 2, 3, 4, 5, 6], size: 1 }}] }}\n",
        USER_A100.replace("id: A100-SXM4-80GB", "id: MY-GPU")
    );
    let mut sources = Sources::new();
    let (catalog, diagnostics) = Catalog::load(&mut sources, &[("my.yaml".into(), text)]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let profile = catalog.get("MY-GPU").and_then(|g| g.profile("1g.10gb+me")).expect("loaded");
    assert_eq!(profile.attributes, ["+me"]);
    assert!(profile.takes_media_extensions());
}

#[test]
fn catalog_folders_are_read_by_the_commands() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("a100.yaml"), USER_A100).expect("written");
    let run = gpuplan().args(["catalog", "list", "--color", "never", "--catalog"]).arg(dir.path()).output();
    let run = run.expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&run.stderr).contains("warning[catalog-override]"));
    std::fs::write(dir.path().join("broken.yaml"), "id: X\nname: x\nmemoryMib: [1]\nsms: 1\n")
        .expect("written");
    let run = gpuplan().args(["catalog", "list", "--color", "never", "--catalog"]).arg(dir.path()).output();
    let run = run.expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("error[wrong-type]") && stderr.contains("broken.yaml:3:"), "{stderr}");
}

#[test]
fn import_reads_one_input_from_stdin() {
    use std::io::Write as _;
    let mut child = gpuplan()
        .args([
            "catalog",
            "import",
            "--lgip",
            "-",
            "--name",
            "NVIDIA H100 80GB HBM3",
            "--memory-mib",
            "81559",
        ])
        .args(["--lgipp", &format!("{FIXTURES}/h100-sxm5-80gb.lgipp.txt")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("runs gpuplan");
    let lgip = fixture("h100-sxm5-80gb.lgip.txt");
    child.stdin.take().expect("stdin").write_all(lgip.as_bytes()).expect("writes");
    let out = child.wait_with_output().expect("finishes");
    assert_eq!(out.status.code(), Some(0));
    let yaml = String::from_utf8_lossy(&out.stdout);
    let mut sources = Sources::new();
    let entry = parse_entry(&mut sources, "stdout", &yaml).expect("valid entry");
    assert_eq!(
        (entry.id.as_str(), entry.memory_mib),
        ("H100-SXM5-80GB", 81559),
        "merged into the entry of that name"
    );
    assert_rows_match(&entry, DRIVER_TABLES[0].1);
}

/// DESIGN.md: on today's 7/8-slice tables, per-profile maxima, the media limit and the slice sums
/// decide validity; the placement search must agree on every multiset.
#[test]
fn on_seven_slice_gpus_the_sums_decide_and_the_search_agrees() {
    let h100 = gpu("H100-SXM5-80GB");
    let profiles = &h100.mig.as_ref().expect("MIG").profiles;
    let mut counts = vec![0u8; profiles.len()];
    let mut checked = 0;
    loop {
        let names: Vec<&str> = profiles
            .iter()
            .zip(&counts)
            .flat_map(|(p, &c)| std::iter::repeat_n(p.name.as_str(), usize::from(c)))
            .collect();
        let sum = |f: fn(&gpuplan::catalog::MigProfile) -> u8| -> u32 {
            profiles.iter().zip(&counts).map(|(p, &c)| u32::from(f(p)) * u32::from(c)).sum()
        };
        let media: u8 =
            profiles.iter().zip(&counts).filter(|(p, _)| p.takes_media_extensions()).map(|(_, &c)| c).sum();
        let by_sums = sum(|p| p.compute_slices) <= 7 && sum(|p| p.size) <= 8 && media <= 1;
        assert_eq!(layout::validate(&h100, &names).is_ok(), by_sums, "{names:?}");
        checked += 1;
        // Next count vector within the maxima (odometer order).
        let mut i = 0;
        while i < counts.len() && counts[i] == profiles[i].max_count {
            counts[i] = 0;
            i += 1;
        }
        if i == counts.len() {
            break;
        }
        counts[i] += 1;
    }
    assert_eq!(checked, 8 * 2 * 5 * 4 * 3 * 2 * 2);
}

// --- name resolution ------------------------------------------------------------------------------

#[test]
fn every_name_of_a_gpu_resolves_to_it_however_it_is_spelt() {
    let catalog = Catalog::builtin();
    let mut ambiguous = Vec::new();
    for g in catalog.iter() {
        let names =
            std::iter::once(&g.id).chain(&g.aliases).chain(&g.product_labels).chain(std::iter::once(&g.name));
        for n in names {
            for spelling in [n.clone(), n.to_ascii_lowercase(), n.replace('-', " "), n.replace(' ', "-")] {
                match catalog.get(&spelling) {
                    Some(found) => assert_eq!(found.id, g.id, "`{spelling}`"),
                    None => ambiguous.push(format!("{} `{spelling}`", g.id)),
                }
            }
        }
    }
    assert!(ambiguous.is_empty(), "names that do not resolve: {ambiguous:?}");
}

#[test]
fn names_people_type_resolve_or_get_the_right_suggestion() {
    let catalog = Catalog::builtin();
    for (typed, id) in [
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"),
        ("nvidia h100 80gb hbm3", "H100-SXM5-80GB"),
        ("h100_sxm5_80gb", "H100-SXM5-80GB"),
        ("H100-SXM5-80G", "H100-SXM5-80GB"),
    ] {
        assert_eq!(catalog.get(typed).map(|g| g.id.as_str()), Some(id), "`{typed}`");
    }
    let suggest = |typed: &str| catalog.suggest(typed);
    assert_eq!(suggest("H100-80G-SXM").first().copied(), Some("H100-SXM5-80GB"));
    assert!(suggest("H100 SXM").contains(&"H100-SXM5-80GB"), "{:?}", suggest("H100 SXM"));
    assert!(!suggest("H100 SXM").iter().any(|s| s.starts_with("H200")));
    let h100 = suggest("H100");
    assert!(h100.iter().all(|s| s.starts_with("H100")) && !h100.is_empty(), "{h100:?}");
}

#[test]
fn catalog_show_suggests_h100_variants_for_h100() {
    let run = gpuplan().args(["catalog", "show", "H100"]).output().expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("did you mean one of `H100-") && !stderr.contains("A10`"), "{stderr}");
}

#[test]
fn catalog_show_prints_provenance() {
    let run = gpuplan().args(["catalog", "show", "H200"]).output().expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("provenance") && stdout.contains("driver 580.159.04"), "{stdout}");
}

#[test]
fn every_throughput_figure_cites_a_public_datasheet() {
    let mut with = 0;
    for gpu in builtin().iter() {
        let Some(t) = &gpu.throughput else { continue };
        with += 1;
        assert!(
            t.source.contains("datasheet") && t.source.contains("nvidia.com"),
            "`{}`: throughput figures must cite the vendor datasheet they come from: {}",
            gpu.id,
            t.source
        );
        // Both figures appear in the cited text, so a reader can check them against the source
        // (a dense figure derived by halving says so).
        let bw = t.memory_bandwidth_gbps;
        let bw_text = if bw >= 1000.0 { format!("{} TB/s", bw / 1000.0) } else { format!("{bw} GB/s") };
        let bw_grouped = format!("{},{:03} GB/s", (bw as u64) / 1000, (bw as u64) % 1000);
        assert!(
            t.source.contains(&bw_text) || t.source.contains(&bw_grouped),
            "`{}`: {bw} not in {}",
            gpu.id,
            t.source
        );
        assert!(
            t.source.contains(&format!("{} TFLOPS", t.fp16_dense_tflops)) || t.source.contains("halved"),
            "`{}`: {} not in {}",
            gpu.id,
            t.fp16_dense_tflops,
            t.source
        );
    }
    assert!(with >= 16, "the documented list of GPUs with figures (docs/catalog.md)");
}
