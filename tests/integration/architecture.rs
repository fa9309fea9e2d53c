//! ARCHITECTURE.md's rules that a scan of the source can check.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A clone is all that building, testing and benchmarking need: no source file names a path
/// outside the repository (the team's reference shelf beside it, or an absolute workspace path).
#[test]
fn no_source_file_reads_outside_the_repository() {
    // Built from pieces so that this file does not match itself.
    let needles = [
        ["..", "/shared"].concat(),
        ["shared", "/reference"].concat(),
        ["/work", "/"].concat(),
        ["\"/..", "/"].concat(),
        ["join(\"..", "/"].concat(),
        ["join(\"..", "\")"].concat(),
    ];
    let mut found = Vec::new();
    for dir in ["src", "tests", "benches"] {
        for path in rust_files(&Path::new(ROOT).join(dir)) {
            let text = std::fs::read_to_string(&path).expect("readable");
            for (i, line) in text.lines().enumerate() {
                if needles.iter().any(|n| line.contains(n.as_str())) {
                    found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "paths outside the repository:\n{}", found.join("\n"));
}
