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

/// The stages, lowest first. A module may import from its own stage and those before it, never
/// from a later one (ARCHITECTURE.md). `bench` is the benchmark harness, above every stage.
const STAGES: &[&[&str]] = &[
    &["diagnostics"],
    &["catalog"],
    &["manifest"],
    &["spec"],
    &["measurements"],
    &["plan"],
    &["verify"],
    &["render"],
    &["pipeline"],
    &["day2"],
    &["simulate"],
    &["emit"],
    &["cli"],
    &["bench"],
];

fn stage_of(module: &str) -> Option<usize> {
    STAGES.iter().position(|names| names.contains(&module))
}

/// The library code of a file: test modules (`#[cfg(test)]` to the end of the file, as this
/// crate writes them) and `tests.rs` files may use the harness and are left out.
fn library_code(path: &Path, text: &str) -> Option<String> {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return None;
    }
    Some(text.split("#[cfg(test)]").next().unwrap_or_default().to_owned())
}

/// Every `crate::<module>` a piece of code names (in `use` lines and in paths).
fn crate_references(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

#[test]
fn no_stage_imports_from_a_later_stage() {
    let src = Path::new(ROOT).join("src");
    let mut upward = Vec::new();
    let mut unknown = std::collections::BTreeSet::new();
    for path in rust_files(&src) {
        let rel = path.strip_prefix(&src).expect("below src");
        let module = rel.iter().next().map(|m| m.to_string_lossy().trim_end_matches(".rs").to_owned());
        let Some(module) = module else { continue };
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(own) = stage_of(&module) else {
            unknown.insert(module);
            continue;
        };
        let text = std::fs::read_to_string(&path).expect("readable");
        let Some(code) = library_code(&path, &text) else { continue };
        for name in crate_references(&code) {
            match stage_of(&name) {
                Some(theirs) if theirs > own => {
                    upward.push(format!("{}: `{module}` uses `crate::{name}`", rel.display()))
                }
                Some(_) => {}
                None => {
                    unknown.insert(name);
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules missing from STAGES (add them in ARCHITECTURE.md's order): {unknown:?}"
    );
    assert!(upward.is_empty(), "imports from a later stage:\n{}", upward.join("\n"));
}

/// The planner's own modules that a piece of code names: `crate::plan::<m>` (also inside one
/// `{…}` group on the line) and, in a file directly below `src/plan/`, `super::<m>`.
fn plan_references(code: &str, top_level: bool) -> Vec<String> {
    let ident =
        |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let mut out = Vec::new();
    for line in code.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        let mut rest = line;
        while let Some(i) = rest.find("crate::plan::") {
            rest = &rest[i + "crate::plan::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or_default();
                out.extend(group.split(',').map(|x| ident(x.trim())).filter(|x| !x.is_empty()));
            } else {
                out.push(ident(rest));
            }
        }
        let mut rest = line;
        while top_level && let Some(i) = rest.find("super::") {
            rest = &rest[i + "super::".len()..];
            out.push(ident(rest));
        }
    }
    out
}

/// No import circle among the planner's modules (issue 20): the problem and its options, the
/// solvers, the cascade, layouts and bounds, assignment. `mod.rs` (the facade that declares
/// them and holds the public `Plan` types) is left out, and so is day 2 (`previous`, `replan`,
/// `rollout`), whose own circle issue 20's day-2 work breaks: drop them from `SKIP` then.
#[test]
fn the_planner_has_no_import_circle() {
    const SKIP: &[&str] = &["mod", "tests", "previous", "replan", "rollout"];
    let plan = Path::new(ROOT).join("src/plan");
    let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    let files = rust_files(&plan);
    let module_of = |p: &Path| {
        let rel = p.strip_prefix(&plan).expect("below src/plan");
        rel.iter().next().map(|m| m.to_string_lossy().trim_end_matches(".rs").to_owned()).unwrap_or_default()
    };
    let modules: std::collections::BTreeSet<String> = files.iter().map(|p| module_of(p)).collect();
    for path in &files {
        let module = module_of(path);
        let text = std::fs::read_to_string(path).expect("readable");
        let Some(code) = library_code(path, &text) else { continue };
        if SKIP.contains(&module.as_str()) {
            continue;
        }
        let top_level = path.parent() == Some(plan.as_path());
        for name in plan_references(&code, top_level) {
            if name != module && modules.contains(&name) && !SKIP.contains(&name.as_str()) {
                edges.entry(module.clone()).or_default().insert(name);
            }
        }
    }
    assert!(
        edges.contains_key("assign") && edges.contains_key("milp"),
        "the scan sees the planner: {edges:?}"
    );
    // Depth-first search; a module met again on the current path closes a circle.
    fn visit(
        m: &str,
        edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|x| x == m) {
            let mut circle = path[i..].to_vec();
            circle.push(m.to_owned());
            return Some(circle);
        }
        if !done.insert(m.to_owned()) {
            return None;
        }
        path.push(m.to_owned());
        for next in edges.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = std::collections::BTreeSet::new();
    for m in edges.keys() {
        let circle = visit(m, &edges, &mut Vec::new(), &mut done);
        assert!(circle.is_none(), "import circle in src/plan/: {}", circle.unwrap_or_default().join(" → "));
    }
}

/// Stages do no IO: only `cli` (and `emit`, the writer; `bench` is no stage) touches the
/// filesystem, the environment, the clock or the standard streams. The one exception is named:
/// `plan::plan_traced` times its trace lines (the trace is written to the writer it is given
/// and never changes the plan).
#[test]
fn stages_do_no_io() {
    let allowed = [("plan/mod.rs", "Instant::now")];
    let forbidden = [
        "std::fs",
        "fs::read",
        "fs::write",
        "File::open",
        "File::create",
        "std::env",
        "env::var",
        "SystemTime",
        "Instant::now",
        "std::io::stdout",
        "std::io::stderr",
        "io::stdin",
        "println!",
        "eprintln!",
        "print!(",
        "eprint!(",
    ];
    let src = Path::new(ROOT).join("src");
    let mut found = Vec::new();
    for path in rust_files(&src) {
        let rel = path.strip_prefix(&src).expect("below src");
        let module = rel.iter().next().map(|m| m.to_string_lossy().trim_end_matches(".rs").to_owned());
        if matches!(module.as_deref(), Some("cli" | "emit" | "bench" | "main" | "lib")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let Some(code) = library_code(&path, &text) else { continue };
        for (i, line) in code.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            if let Some(word) = forbidden.iter().find(|w| trimmed.contains(*w)) {
                if allowed.contains(&(rel.to_string_lossy().as_ref(), *word)) {
                    continue;
                }
                found.push(format!("{}:{}: `{word}` in {}", rel.display(), i + 1, trimmed));
            }
        }
    }
    assert!(found.is_empty(), "IO in a stage:\n{}", found.join("\n"));
}

/// Solver types never leave the planner, and templates never see the raw manifest: only
/// `src/plan/` names `good_lp`/`microlp`, and no file in `src/render/` names the manifest (the pipeline, a later stage, does).
#[test]
fn solver_and_manifest_types_stay_where_they_belong() {
    let src = Path::new(ROOT).join("src");
    let mut found = Vec::new();
    for path in rust_files(&src) {
        let rel = path.strip_prefix(&src).expect("below src").to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).expect("readable");
        let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
        let names = |word: &str| code.iter().any(|l| l.contains(word));
        if !rel.starts_with("plan/") && (names("good_lp") || names("microlp::")) {
            found.push(format!("{rel} names a solver type"));
        }
        if rel.starts_with("render/") && names("crate::manifest") {
            found.push(format!("{rel} names the raw manifest"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A `Spec` is built in one place, `Spec::from_parts` (which sorts pools and models as every
/// stage expects): no other file under `src/`, `tests/` or `benches/` writes a `Spec { … }`
/// literal; `spec::validate` and the benchmark harness call the constructor.
#[test]
fn only_spec_from_parts_builds_a_spec() {
    // Built from pieces so that this file does not match itself.
    let needle = ["Spec", " {"].concat();
    let mut found = Vec::new();
    for dir in ["src", "tests", "benches"] {
        for path in rust_files(&Path::new(ROOT).join(dir)) {
            let rel = path.strip_prefix(ROOT).expect("below the root").to_string_lossy().into_owned();
            if rel == "src/spec/mod.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                let literal = code.match_indices(&needle).any(|(at, _)| {
                    // Skip a path (`gpuplan::spec::`) to see what the type follows.
                    let before = code[..at]
                        .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
                        .trim_end();
                    let word_start = !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
                    word_start && !["struct", "impl", "->", "for", "enum"].iter().any(|k| before.ends_with(k))
                });
                if literal {
                    found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "build a `Spec` with `Spec::from_parts`:\n{}", found.join("\n"));
}

/// ARCHITECTURE.md's diagram shows every module of the library, and its code map has a heading
/// naming each module's source (`src/NAME/` or `src/NAME.rs`).
#[test]
fn the_architecture_map_shows_every_module() {
    let lib = std::fs::read_to_string(Path::new(ROOT).join("src/lib.rs")).expect("src/lib.rs");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    assert!(modules.len() > 10, "{modules:?}");
    let doc = std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let diagram = doc.split("```text").nth(1).and_then(|d| d.split("```").next()).expect("a diagram");
    let words: Vec<&str> = diagram.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
    let headings: Vec<&str> = doc.lines().filter(|l| l.starts_with("### ")).collect();
    let mut missing = Vec::new();
    for m in &modules {
        if !words.contains(m) {
            missing.push(format!("`{m}` is not in the diagram"));
        }
        let (dir, file) = (format!("`src/{m}/"), format!("src/{m}.rs"));
        if !headings.iter().any(|h| h.contains(&dir) || h.contains(&file)) {
            missing.push(format!("`{m}` has no code-map heading"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Rust source with every comment, string and character literal blanked to spaces (line breaks
/// kept), so that braces and `fn` are counted only where they are code.
fn code_only(text: &str) -> Vec<char> {
    let s: Vec<char> = text.chars().collect();
    let mut out = s.clone();
    let mut i = 0;
    while i < s.len() {
        match literal_end(&s, i) {
            Some(end) => {
                let end = end.min(s.len());
                out[i..end].iter_mut().filter(|c| **c != '\n').for_each(|c| *c = ' ');
                i = end;
            }
            None => i += 1,
        }
    }
    out
}

/// Where the comment or literal starting at `s[i]` ends (one past it), if one starts there:
/// line and nested block comments, strings with escapes, raw strings (`r#"…"#`, `br"…"`), and
/// character literals told apart from lifetimes (`'{'` and `'\u{7b}'` against `'a`).
fn literal_end(s: &[char], i: usize) -> Option<usize> {
    let at = |k: usize| s.get(i + k).copied().unwrap_or('\0');
    let find = |from: usize, pattern: &[char]| {
        (from..s.len()).find(|&j| s[j..].starts_with(pattern)).map_or(s.len(), |j| j + pattern.len())
    };
    // Past the closing `close` from `from` on, stepping over backslash escapes.
    let quoted = |from: usize, close: char| {
        let mut j = from;
        while j < s.len() && s[j] != close {
            j += if s[j] == '\\' { 2 } else { 1 };
        }
        j + 1
    };
    match (at(0), at(1)) {
        ('/', '/') => Some(find(i, &['\n']) - 1),
        ('/', '*') => {
            let (mut depth, mut j) = (0, i);
            while j < s.len() {
                if s[j..].starts_with(&['/', '*']) {
                    (depth, j) = (depth + 1, j + 2);
                } else if s[j..].starts_with(&['*', '/']) {
                    (depth, j) = (depth - 1, j + 2);
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            Some(j)
        }
        ('"', _) => Some(quoted(i + 1, '"')),
        ('\'', c) if c == '\\' || (c != '\0' && at(2) == '\'') => Some(quoted(i + 2, '\'')),
        ('r' | 'b', _) if i == 0 || !(s[i - 1].is_alphanumeric() || s[i - 1] == '_') => {
            let r = if at(0) == 'b' && at(1) == 'r' {
                i + 2
            } else if at(0) == 'r' {
                i + 1
            } else {
                return None;
            };
            let hashes = s[r..].iter().take_while(|&&c| c == '#').count();
            if s.get(r + hashes) != Some(&'"') {
                return None;
            }
            let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            Some(find(r + hashes + 1, &close))
        }
        _ => None,
    }
}

/// Every function with a body in `text`: (name, lines from its `fn` line to its closing brace,
/// both counted; the `fn` line's number). Nested functions count on their own and inside the
/// outer one.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let code = code_only(text);
    let line_of = |at: usize| code[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for i in 0..code.len().saturating_sub(3) {
        let keyword = code[i] == 'f'
            && code[i + 1] == 'n'
            && code[i + 2].is_whitespace()
            && (i == 0 || !ident(code[i - 1]));
        if !keyword {
            continue;
        }
        let name: String =
            code[i + 2..].iter().skip_while(|c| c.is_whitespace()).take_while(|&&c| ident(c)).collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` outside the signature's parentheses and brackets; a
        // `;` first means a declaration without a body.
        let (mut nesting, mut open) = (0i32, None);
        for (j, &c) in code.iter().enumerate().skip(i) {
            match c {
                '(' | '[' => nesting += 1,
                ')' | ']' => nesting -= 1,
                ';' if nesting == 0 => break,
                '{' if nesting == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut depth = 0;
        for (j, &c) in code.iter().enumerate().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                out.push((name, line_of(j) - line_of(i) + 1, line_of(i)));
                break;
            }
        }
    }
    out
}

#[test]
fn function_lengths_count_code_only() {
    let text = "fn a() {\n    let s = \"}\";\n    let r = r#\"{\"#;\n    // }\n    /* { /* } */ */\n    let c = '{';\n    let u = '\\u{7b}';\n    let l: &'static str = \"\";\n}\n\
                trait T {\n    fn declared(&self) -> [u8; 2];\n}\n\
                fn b<'a>(x: &'a [u8; 2]) -> impl Fn() + 'a\nwhere\n    u8: Copy,\n{\n    fn inner() {}\n    move || { let _ = x; }\n}\n";
    let found = function_lengths(text);
    let got: Vec<(&str, usize, usize)> =
        found.iter().map(|(n, len, line)| (n.as_str(), *len, *line)).collect();
    assert_eq!(got, [("a", 9, 1), ("b", 7, 13), ("inner", 1, 17)]);
}

/// Issue 20's bar for the whole of `src/`: no function of 150 lines or more, at most five over
/// 100 (lines from `fn` to the closing brace, by [`function_lengths`]).
#[test]
fn no_function_in_src_is_too_long() {
    let src = Path::new(ROOT).join("src");
    let mut long = Vec::new();
    for path in rust_files(&src) {
        let text = std::fs::read_to_string(&path).expect("readable");
        let rel = path.strip_prefix(&src).expect("below src").display().to_string();
        for (name, lines, line) in function_lengths(&text) {
            if lines > 100 {
                long.push((lines, format!("src/{rel}:{line} `{name}`: {lines} lines")));
            }
        }
    }
    long.sort_by(|a, b| b.cmp(a));
    let list = long.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>().join("\n");
    let longest = long.first().map_or(0, |(n, _)| *n);
    assert!(
        longest < 150 && long.len() <= 5,
        "the longest function has {longest} lines (the bar: under 150) and {} have over 100 (at most 5); \
         split them along their seams:\n{list}",
        long.len()
    );
}
