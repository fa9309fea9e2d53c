//! Renders diagnostics for people (codespan-reporting snippets) and for machines (JSON).

use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor};
use serde::Serialize;

use super::{Diagnostic, Severity, Sources};

/// Renders diagnostics as text with source snippets and carets, like rustc.
pub fn human(sources: &Sources, diagnostics: &[Diagnostic], color: bool) -> String {
    let mut files = SimpleFiles::new();
    for (_, file) in sources.iter() {
        files.add(file.name.as_str(), file.text.as_str());
    }
    let mut buffer = if color { termcolor::Buffer::ansi() } else { termcolor::Buffer::no_color() };
    let config = term::Config::default();
    for diagnostic in diagnostics {
        let rendered = to_codespan(diagnostic);
        if term::emit(&mut buffer, &config, &files, &rendered).is_err() {
            // A span that no longer fits its file is our bug; still show the message.
            use std::io::Write as _;
            let _ = writeln!(
                buffer,
                "{}[{}]: {}",
                severity_word(diagnostic.severity),
                diagnostic.code,
                diagnostic.message
            );
        }
    }
    String::from_utf8_lossy(buffer.as_slice()).into_owned()
}

fn severity_word(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

fn to_codespan(d: &Diagnostic) -> cs::Diagnostic<usize> {
    let severity = match d.severity {
        Severity::Error => cs::Severity::Error,
        Severity::Warning => cs::Severity::Warning,
        Severity::Note => cs::Severity::Note,
    };
    let labels = d
        .labels
        .iter()
        .map(|l| {
            let style = if l.primary { cs::LabelStyle::Primary } else { cs::LabelStyle::Secondary };
            cs::Label::new(style, l.span.file.0, l.span.range.clone()).with_message(&l.message)
        })
        .collect();
    let mut notes = Vec::new();
    if let Some(help) = &d.help {
        notes.push(format!("help: {help}"));
    }
    notes.extend(d.notes.iter().map(|n| format!("note: {n}")));
    cs::Diagnostic::new(severity)
        .with_code(d.code)
        .with_message(&d.message)
        .with_labels(labels)
        .with_notes(notes)
}

/// The JSON form of one diagnostic; field names are part of gpuplan's stable interface.
#[derive(Debug, Serialize)]
pub struct JsonDiagnostic<'a> {
    pub code: &'a str,
    pub severity: Severity,
    pub message: &'a str,
    pub labels: Vec<JsonLabel<'a>>,
    pub help: Option<&'a str>,
    pub notes: &'a [String],
}

#[derive(Debug, Serialize)]
pub struct JsonLabel<'a> {
    pub file: &'a str,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub message: &'a str,
    pub primary: bool,
}

/// Converts diagnostics to their JSON form (file, 1-based line and column for every label).
pub fn json<'a>(sources: &'a Sources, diagnostics: &'a [Diagnostic]) -> Vec<JsonDiagnostic<'a>> {
    diagnostics
        .iter()
        .map(|d| JsonDiagnostic {
            code: d.code,
            severity: d.severity,
            message: &d.message,
            labels: d
                .labels
                .iter()
                .map(|l| {
                    let file = sources.get(l.span.file);
                    let (line, column) = file.line_col(l.span.range.start);
                    let (end_line, end_column) = file.line_col(l.span.range.end);
                    JsonLabel {
                        file: &file.name,
                        line,
                        column,
                        end_line,
                        end_column,
                        message: &l.message,
                        primary: l.primary,
                    }
                })
                .collect(),
            help: d.help.as_deref(),
            notes: &d.notes,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::{Span, codes};

    #[test]
    fn human_rendering_shows_code_snippet_and_help() {
        let mut sources = Sources::new();
        let file = sources.add("gpuplan.yaml", "models:\n  - name: asr\n    replicsa: 2\n");
        let d = Diagnostic::error(codes::UNKNOWN_FIELD, "unknown field `replicsa`")
            .at(Span::new(file, 26..34), "not a field of a model")
            .with_help("did you mean `replicas`?");
        let text = human(&sources, std::slice::from_ref(&d), false);
        assert!(text.contains("error[unknown-field]: unknown field `replicsa`"), "{text}");
        assert!(text.contains("gpuplan.yaml:3:5"), "{text}");
        assert!(text.contains("help: did you mean `replicas`?"), "{text}");
        let json = serde_json::to_value(json(&sources, &[d])).expect("serialises");
        assert_eq!(json[0]["labels"][0]["line"], 3);
        assert_eq!(json[0]["labels"][0]["column"], 5);
    }
}
