//! Diagnostics: every user mistake gpuplan finds, as data.
//!
//! Stages never print and never stop at the first problem: they push [`Diagnostic`]s into a
//! [`Diagnostics`] collection and return it. The command layer renders the collection once,
//! as human text with source snippets ([`render::human`]) or as JSON ([`render::json`]).
//!
//! A diagnostic has a stable kebab-case [`Code`]; every code is registered in [`codes::ALL`]
//! and documented under its own heading in `docs/diagnostics.md` (a test enforces both).

pub mod codes;
pub mod render;

use std::ops::Range;

use serde::Serialize;

pub use codes::Code;

/// How bad a diagnostic is. Only errors make a command fail (exit code 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

/// Identifies one source text registered in [`Sources`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub(crate) usize);

/// A named source text (a manifest, a catalog file, a mig-parted config) that spans point into.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    fn new(name: String, text: String) -> Self {
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        Self { name, text, line_starts }
    }

    /// 1-based line and column (in characters) of a byte offset; offsets past the end clamp.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let start = self.line_starts[line];
        let column = self.text.get(start..offset).map_or(offset - start, |s| s.chars().count());
        (line + 1, column + 1)
    }

    /// Byte offset of a 1-based line and column (column counted in characters).
    pub fn offset(&self, line: usize, column: usize) -> usize {
        let Some(&start) = self.line_starts.get(line.saturating_sub(1)) else {
            return self.text.len();
        };
        let rest = &self.text[start..];
        let end = rest.find('\n').unwrap_or(rest.len());
        rest[..end].char_indices().nth(column.saturating_sub(1)).map_or(start + end, |(i, _)| start + i)
    }
}

/// All source texts of one run. Spans are byte ranges into one of them.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
}

impl Sources {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        self.files.push(SourceFile::new(name.into(), text.into()));
        FileId(self.files.len() - 1)
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0]
    }

    pub fn iter(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (FileId(i), f))
    }
}

/// A place in a source text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub file: FileId,
    pub range: Range<usize>,
}

impl Span {
    pub fn new(file: FileId, range: Range<usize>) -> Self {
        Self { file, range }
    }
}

/// A span with a message; the primary label says where the problem is, secondary ones give context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
    pub primary: bool,
}

/// One problem (or warning) found in the user's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub labels: Vec<Label>,
    pub help: Option<String>,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(code: Code, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, code, message)
    }

    pub fn warning(code: Code, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, code, message)
    }

    pub fn new(severity: Severity, code: Code, message: impl Into<String>) -> Self {
        Self { code, severity, message: message.into(), labels: Vec::new(), help: None, notes: Vec::new() }
    }

    /// Adds the primary label: where the problem is.
    #[must_use]
    pub fn at(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label { span, message: message.into(), primary: true });
        self
    }

    /// Adds a secondary label: context that explains the problem.
    #[must_use]
    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label { span, message: message.into(), primary: false });
        self
    }

    #[must_use]
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    #[must_use]
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

/// The problems a stage found, in the order it found them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.0.push(diagnostic);
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// Sorts by file and position so that output does not depend on the order checks ran in.
    pub fn sort(&mut self) {
        self.0.sort_by(|a, b| {
            let key = |d: &Diagnostic| {
                d.labels.iter().find(|l| l.primary).map(|l| (l.span.file, l.span.range.start))
            };
            key(a).cmp(&key(b)).then_with(|| a.code.cmp(b.code))
        });
    }
}

impl FromIterator<Diagnostic> for Diagnostics {
    fn from_iter<I: IntoIterator<Item = Diagnostic>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// The nearest candidate to `name` by edit distance, if it is close enough to be a likely typo.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(&lower, &c.to_ascii_lowercase()), c))
        .filter(|&(d, c)| d <= (c.len().max(name.len()) / 3).max(2))
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_round_trips() {
        let f = SourceFile::new("m".into(), "ab\ncdé\nf".into());
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(3), (2, 1));
        assert_eq!(f.line_col(8), (3, 1));
        assert_eq!(f.offset(2, 3), 5);
        assert_eq!(f.offset(3, 1), 8);
        assert_eq!(f.line_col(f.offset(2, 3)), (2, 3));
    }

    #[test]
    fn nearest_finds_typos_and_ignores_strangers() {
        assert_eq!(nearest("replicsa", ["replicas", "memory"]), Some("replicas"));
        assert_eq!(nearest("zzzz", ["replicas", "memory"]), None);
    }
}
