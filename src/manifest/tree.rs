//! A spanned document tree shared by the YAML and TOML front ends.
//!
//! In: source text. Out: a [`Node`] tree (null, bool, integer, float, string, sequence, mapping
//! with spanned keys) in which every value carries the byte range it was read from, or syntax
//! diagnostics. Both formats produce the same tree for the same content, mappings keep the
//! order of the source, and the input size and nesting depth are capped before any value is
//! built, so no input can exhaust memory or the stack.

use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};

use crate::diagnostics::{Diagnostic, Diagnostics, FileId, SourceFile, Span, codes};

/// Largest manifest gpuplan reads, in bytes.
pub const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;
/// Deepest nesting of sequences and mappings gpuplan reads.
pub const MAX_DEPTH: usize = 32;

/// One value of the document with the byte range it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    pub span: Range<usize>,
}

/// The kinds of values both formats share. The children are [`Node`]s keyed by [`Key`]s in the
/// tree; the YAML front end reads them first as its own spanned nodes (`N` and `K`).
#[derive(Clone, Debug, PartialEq)]
pub enum Value<N = Node, K = Key> {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    /// A TOML date or time: never a valid manifest value, kept to say so.
    Datetime(String),
    Seq(Vec<N>),
    Map(Vec<(K, N)>),
}

/// A mapping key with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub name: String,
    pub span: Range<usize>,
}

impl Value {
    /// How the value is named in "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Datetime(_) => "a date-time",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

impl Node {
    /// The tree as JSON, for JSON Schema validation (maps keep their first duplicate-free order).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => i64::try_from(*i).map_or_else(|_| J::from(*i as f64), J::from),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Str(s) | Value::Datetime(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => {
                J::Object(entries.iter().map(|(k, v)| (k.name.clone(), v.to_json())).collect())
            }
        }
    }
}

/// Which front end reads a file, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Toml,
}

impl Format {
    /// `.toml` is TOML; everything else (`.yaml`, `.yml`, no extension, `-`) is YAML.
    pub fn from_name(name: &str) -> Self {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".toml") { Format::Toml } else { Format::Yaml }
    }
}

/// Parses a whole file into a tree, refusing oversized or too deeply nested input.
pub fn parse(file: FileId, source: &SourceFile, format: Format) -> Result<Node, Diagnostics> {
    let text = source.text.as_str();
    if text.len() > MAX_INPUT_BYTES {
        return Err(Diagnostics::from_iter([Diagnostic::error(
            codes::INPUT_TOO_LARGE,
            format!("the manifest is {} bytes, more than the limit of {MAX_INPUT_BYTES}", text.len()),
        )
        .at(Span::new(file, 0..0), "this file")
        .with_help("a manifest describes a cluster in a few kilobytes; split generated data out of it")]));
    }
    match format {
        Format::Yaml => yaml(file, source),
        Format::Toml => toml(file, source),
    }
}

fn too_deep(file: FileId, offset: usize) -> Diagnostics {
    Diagnostics::from_iter([Diagnostic::error(
        codes::INPUT_TOO_LARGE,
        format!("values are nested more than {MAX_DEPTH} levels deep"),
    )
    .at(Span::new(file, offset..offset), "too deep here")
    .with_help("a manifest needs a few levels of nesting; flatten this value")])
}

fn syntax(file: FileId, range: Range<usize>, message: impl Into<String>, help: &str) -> Diagnostics {
    Diagnostics::from_iter([Diagnostic::error(codes::SYNTAX, message)
        .at(Span::new(file, range), "here")
        .with_help(help)])
}

// --- YAML -------------------------------------------------------------------------------------

/// A YAML node read through serde-saphyr's span-aware wrapper.
struct YamlNode(serde_saphyr::Spanned<YamlValue>);

/// A YAML value before its children are converted: keys are still nodes of any kind.
type YamlValue = Value<YamlNode, YamlNode>;

impl<'de> Deserialize<'de> for YamlNode {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_saphyr::Spanned::<YamlValue>::deserialize(d).map(YamlNode)
    }
}

impl<'de> Deserialize<'de> for YamlValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(YamlVisitor)
    }
}

struct YamlVisitor;

impl<'de> Visitor<'de> for YamlVisitor {
    type Value = YamlValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E>(self) -> Result<YamlValue, E> {
        Ok(YamlValue::Null)
    }
    fn visit_none<E>(self) -> Result<YamlValue, E> {
        Ok(YamlValue::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<YamlValue, D::Error> {
        d.deserialize_any(YamlVisitor)
    }
    fn visit_bool<E>(self, v: bool) -> Result<YamlValue, E> {
        Ok(YamlValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<YamlValue, E> {
        Ok(YamlValue::Int(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<YamlValue, E> {
        Ok(YamlValue::Int(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<YamlValue, E> {
        Ok(YamlValue::Int(v))
    }
    fn visit_u128<E>(self, v: u128) -> Result<YamlValue, E> {
        Ok(YamlValue::Int(i128::try_from(v).unwrap_or(i128::MAX)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<YamlValue, E> {
        Ok(YamlValue::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<YamlValue, E> {
        Ok(YamlValue::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<YamlValue, E> {
        Ok(YamlValue::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, _v: &[u8]) -> Result<YamlValue, E> {
        Err(E::custom("binary values are not allowed in a manifest"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<YamlValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<YamlNode>()? {
            items.push(item);
        }
        Ok(YamlValue::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<YamlValue, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<YamlNode, YamlNode>()? {
            entries.push((k, v));
        }
        Ok(YamlValue::Map(entries))
    }
}

/// Byte range of a serde-saphyr location; the end is found by walking `len` characters.
fn yaml_range(text: &str, loc: &serde_saphyr::Location) -> Range<usize> {
    let span = loc.span();
    let Some(start) = span.byte_offset().and_then(|o| usize::try_from(o).ok()) else {
        return 0..0;
    };
    let start = start.min(text.len());
    let end = match span.byte_len().and_then(|l| usize::try_from(l).ok()) {
        Some(len) => start.saturating_add(len).min(text.len()),
        None => {
            let chars = usize::try_from(span.len()).unwrap_or(0);
            text.get(start..)
                .map_or(start, |rest| start + rest.char_indices().nth(chars).map_or(rest.len(), |(i, _)| i))
        }
    };
    match (text.is_char_boundary(start), text.is_char_boundary(end)) {
        (true, true) => start..end,
        (true, false) => start..start,
        _ => 0..0,
    }
}

fn yaml(file: FileId, source: &SourceFile) -> Result<Node, Diagnostics> {
    let text = source.text.as_str();
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.max_documents = 16;
    // A manifest needs few aliases; these bounds stop alias bombs long before they cost time.
    budget.max_aliases = 1_000;
    budget.max_anchors = 1_000;
    budget.max_recorded_anchor_events = 20_000;
    budget.max_nodes = 200_000;
    let options = serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        budget: Some(budget),
    };
    let docs = match serde_saphyr::from_multiple_with_options::<YamlNode>(text, options) {
        Ok(docs) => docs,
        Err(err) => return Err(yaml_error(file, source, &err)),
    };
    let mut docs = docs.into_iter();
    let Some(first) = docs.next() else {
        return Err(syntax(
            file,
            0..0,
            "the manifest is empty",
            "start from `examples/voice-pipeline/gpuplan.yaml`",
        ));
    };
    if let Some(second) = docs.next() {
        let range = yaml_range(text, &second.0.referenced);
        // Point at the `---` that starts the second document when it is on the line above.
        let before = text.get(..range.start).unwrap_or("");
        let marker = before.rfind("---").map_or(range.clone(), |i| i..i + 3);
        return Err(Diagnostics::from_iter([Diagnostic::error(
            codes::MULTIPLE_DOCUMENTS,
            "the manifest holds more than one YAML document",
        )
        .at(Span::new(file, marker), "a second document starts here")
        .with_help(
            "a manifest is one document: remove the `---` separator, or put each plan in its own file",
        )]));
    }
    Ok(convert_yaml(text, first))
}

fn convert_yaml(text: &str, node: YamlNode) -> Node {
    let span = yaml_range(text, &node.0.referenced);
    let value = match node.0.value {
        YamlValue::Null => Value::Null,
        YamlValue::Bool(b) => Value::Bool(b),
        YamlValue::Int(i) => Value::Int(i),
        YamlValue::Float(f) => Value::Float(f),
        YamlValue::Str(s) => Value::Str(s),
        // The YAML visitor reads dates as strings; this arm only completes the match.
        YamlValue::Datetime(s) => Value::Datetime(s),
        YamlValue::Seq(items) => Value::Seq(items.into_iter().map(|n| convert_yaml(text, n)).collect()),
        YamlValue::Map(entries) => Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| {
                    let key = convert_yaml(text, k);
                    let name = match key.value {
                        Value::Str(s) => s,
                        Value::Int(i) => i.to_string(),
                        Value::Bool(b) => b.to_string(),
                        Value::Float(f) => f.to_string(),
                        Value::Null => "null".to_owned(),
                        // A collection as a key is legal YAML but never a manifest field.
                        _ => "<complex key>".to_owned(),
                    };
                    (Key { name, span: key.span }, convert_yaml(text, v))
                })
                .collect(),
        ),
    };
    let span = flow_extent(text, span, &value);
    Node { value, span }
}

/// A flow collection (`[a, b]`, `{k: v}`) spans up to its closing bracket, so that a label
/// underlines all of it; block collections keep the span of their first token.
fn flow_extent(text: &str, span: Range<usize>, value: &Value) -> Range<usize> {
    let close = match (text.as_bytes().get(span.start), value) {
        (Some(b'['), Value::Seq(_)) => b']',
        (Some(b'{'), Value::Map(_)) => b'}',
        _ => return span,
    };
    let last_child = match value {
        Value::Seq(items) => items.iter().map(|n| n.span.end).max(),
        Value::Map(entries) => entries.iter().map(|(k, v)| k.span.end.max(v.span.end)).max(),
        _ => None,
    };
    let from = last_child.unwrap_or(span.start + 1).max(span.start + 1);
    match text.as_bytes().get(from..).and_then(|rest| rest.iter().position(|b| *b == close)) {
        Some(i) => span.start..from + i + 1,
        None => span,
    }
}

fn yaml_error(file: FileId, source: &SourceFile, err: &serde_saphyr::Error) -> Diagnostics {
    let message = err.to_string();
    let offset = err.location().map_or(0, |l| {
        l.span().byte_offset().and_then(|o| usize::try_from(o).ok()).unwrap_or_else(|| {
            source.offset(usize::try_from(l.line()).unwrap_or(1), usize::try_from(l.column()).unwrap_or(1))
        })
    });
    let offset = offset.min(source.text.len());
    let first = message.lines().next().unwrap_or("invalid YAML").trim();
    // serde-saphyr prefixes its own position; the label carries ours.
    let first = strip_position(first);
    let lower = first.to_ascii_lowercase();
    let budget = ["budget", "alias", "anchor", "events", "nodes", "limit"].iter().any(|w| lower.contains(w));
    let deep = ["depth", "nesting", "recursion"].iter().any(|w| lower.contains(w));
    if deep || budget {
        if lower.contains("document") {
            return Diagnostics::from_iter([Diagnostic::error(
                codes::MULTIPLE_DOCUMENTS,
                "the manifest holds more than one YAML document",
            )
            .at(Span::new(file, offset..offset), "here")
            .with_help("a manifest is one document: remove the `---` separators")]);
        }
        if deep {
            return too_deep(file, offset);
        }
        return Diagnostics::from_iter([Diagnostic::error(
            codes::INPUT_TOO_LARGE,
            format!("the manifest exceeds gpuplan's reading limits: {}", lowercase_first(first)),
        )
        .at(Span::new(file, offset..offset), "limit reached here")
        .with_help(
            "a manifest has a few thousand values and few aliases; expand or remove anchors that multiply",
        )]);
    }
    if let Some(rest) = first.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest).trim();
        return syntax(
            file,
            offset..offset,
            format!("duplicate key `{key}`"),
            "a key appears once per mapping: remove or rename one of them",
        );
    }
    syntax(
        file,
        offset..offset,
        format!("invalid YAML: {}", lowercase_first(first)),
        "check the indentation and quoting around this position",
    )
}

fn strip_position(message: &str) -> &str {
    // Messages look like `error: line 3 column 5: mapping values are not allowed`.
    let mut rest = message.trim_start_matches("error:").trim();
    if rest.starts_with("line ")
        && let Some(i) = rest.find(": ")
    {
        rest = &rest[i + 2..];
    }
    rest.trim_end_matches('.')
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

// --- TOML -------------------------------------------------------------------------------------

fn toml(file: FileId, source: &SourceFile) -> Result<Node, Diagnostics> {
    let text = source.text.as_str();
    if let Some(offset) = toml_too_deep(text) {
        return Err(too_deep(file, offset));
    }
    match toml::de::DeTable::parse(text) {
        Ok(table) => {
            let span = table.span();
            Ok(Node { value: convert_toml_table(table.into_inner()), span })
        }
        Err(err) => {
            let range = err.span().unwrap_or(0..0);
            let range = range.start.min(text.len())..range.end.min(text.len());
            let message = err.message().lines().next().unwrap_or("invalid TOML").trim().trim_end_matches('.');
            Err(syntax(
                file,
                range,
                format!("invalid TOML: {}", lowercase_first(message)),
                "check the quoting, brackets and table headers around this position",
            ))
        }
    }
}

/// The offset where bracket nesting first exceeds [`MAX_DEPTH`], ignoring strings and comments.
fn toml_too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut comment = false;
    for (i, c) in text.char_indices() {
        if comment {
            comment = c != '\n';
            continue;
        }
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '#' => comment = true,
            '[' | '{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(i);
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

fn convert_toml_table(table: toml::de::DeTable<'_>) -> Value {
    let mut entries: Vec<(Key, Node)> = table
        .into_iter()
        .map(|(k, v)| {
            let span = k.span();
            (Key { name: k.into_inner().into_owned(), span }, convert_toml(v))
        })
        .collect();
    // The parser sorts keys; the tree keeps the order of the file, as YAML does.
    entries.sort_by_key(|(k, _)| k.span.start);
    Value::Map(entries)
}

fn convert_toml(node: toml::Spanned<toml::de::DeValue<'_>>) -> Node {
    use toml::de::DeValue;
    let span = node.span();
    let value = match node.into_inner() {
        DeValue::String(s) => Value::Str(s.into_owned()),
        DeValue::Integer(i) => {
            let digits: String = i.as_str().chars().filter(|c| *c != '_').collect();
            let digits = digits.trim_start_matches('+');
            let (negative, digits) = match digits.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, digits),
            };
            let digits = if i.radix() == 10 { digits } else { digits.get(2..).unwrap_or("") };
            match i128::from_str_radix(digits, i.radix()) {
                Ok(v) => Value::Int(if negative { -v } else { v }),
                Err(_) => Value::Float(if negative { f64::NEG_INFINITY } else { f64::INFINITY }),
            }
        }
        DeValue::Float(f) => {
            let s: String = f.as_str().chars().filter(|c| *c != '_').collect();
            let v = match s.trim_start_matches(['+', '-']) {
                "inf" => f64::INFINITY,
                "nan" => f64::NAN,
                _ => s.parse().unwrap_or(f64::NAN),
            };
            Value::Float(if s.starts_with('-') && !v.is_sign_negative() { -v } else { v })
        }
        DeValue::Boolean(b) => Value::Bool(b),
        DeValue::Datetime(d) => Value::Datetime(d.to_string()),
        DeValue::Array(items) => Value::Seq(items.into_iter().map(convert_toml).collect()),
        DeValue::Table(table) => convert_toml_table(table),
    };
    Node { value, span }
}

#[cfg(test)]
mod tests {
    use super::{Diagnostics, Format, MAX_INPUT_BYTES, Node, Value, codes, parse};
    use crate::diagnostics::Sources;

    fn tree(name: &str, text: &str) -> Result<Node, Diagnostics> {
        let mut sources = Sources::new();
        let file = sources.add(name, text);
        parse(file, sources.get(file), Format::from_name(name))
    }

    fn strip(node: &Node) -> serde_json::Value {
        node.to_json()
    }

    #[test]
    fn yaml_and_toml_give_the_same_tree() {
        let y = tree("m.yaml", "a: 1\nb:\n  - x: \"s\"\n    y: 1.5\nc: true\n").expect("yaml parses");
        let t = tree("m.toml", "a = 1\nc = true\n[[b]]\nx = \"s\"\ny = 1.5\n").expect("toml parses");
        assert_eq!(strip(&y), strip(&t));
    }

    #[test]
    fn spans_point_at_values_and_keys() {
        let text = "name: voice\nreplicas: 12\n";
        let node = tree("m.yaml", text).expect("parses");
        let Value::Map(entries) = &node.value else { panic!("a map") };
        assert_eq!(&text[entries[1].0.span.clone()], "replicas");
        assert_eq!(&text[entries[1].1.span.clone()], "12");
        let text = "name = \"voice\"\nreplicas = 12\n";
        let node = tree("m.toml", text).expect("parses");
        let Value::Map(entries) = &node.value else { panic!("a map") };
        assert_eq!(&text[entries[1].0.span.clone()], "replicas");
        assert_eq!(&text[entries[1].1.span.clone()], "12");
    }

    #[test]
    fn yaml_strict_scalars_stay_strings() {
        let node = tree("m.yaml", "a: yes\nb: 017\nc: 1_000\n").expect("parses");
        assert_eq!(node.to_json(), serde_json::json!({"a": "yes", "b": "017", "c": "1_000"}));
    }

    #[test]
    fn multiple_yaml_documents_are_rejected() {
        let err = tree("m.yaml", "a: 1\n---\nb: 2\n").expect_err("two documents");
        assert_eq!(err.0[0].code, codes::MULTIPLE_DOCUMENTS);
    }

    #[test]
    fn deep_nesting_is_rejected_in_both_formats() {
        let deep = format!("a: {}{}\n", "[".repeat(200), "]".repeat(200));
        assert_eq!(tree("m.yaml", &deep).expect_err("too deep").0[0].code, codes::INPUT_TOO_LARGE);
        let deep = format!("a = {}{}\n", "[".repeat(200), "]".repeat(200));
        assert_eq!(tree("m.toml", &deep).expect_err("too deep").0[0].code, codes::INPUT_TOO_LARGE);
    }

    #[test]
    fn oversized_input_is_rejected_before_parsing() {
        let big = "#".repeat(MAX_INPUT_BYTES + 1);
        assert_eq!(tree("m.yaml", &big).expect_err("too large").0[0].code, codes::INPUT_TOO_LARGE);
    }
}
