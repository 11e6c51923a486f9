//! The "no circles inside a crate" convention as a check: every module's references to
//! other modules of its crate (`crate::…`, `super::…`, `self::…` and its own child
//! modules, `use` groups included) form a graph, and a strongly connected component of
//! more than one module is a cycle to untie.
//!
//! The crate root (`lib.rs`, `main.rs`) is left out: it is the façade that declares
//! and re-exports everything, so edges through it say nothing about layering. Test
//! modules (everything from the first `#[cfg(test)]` on) and comments are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// A module path inside one crate, such as `["tools", "scripts"]`; the root is empty.
type ModulePath = Vec<String>;

/// One cycle, as the modules in it (sorted) and the file of the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cycle {
    /// The crate's source folder, relative to the workspace root.
    pub(crate) source_root: PathBuf,
    /// The modules in the cycle, as `a::b`.
    pub(crate) modules: Vec<String>,
}

/// The cycles of every crate whose sources sit under `root`'s `crates/` and `bin/`
/// folders and in `xtask/`.
///
/// # Errors
/// When a source folder cannot be read.
pub(crate) fn find(root: &Path) -> anyhow::Result<Vec<Cycle>> {
    let mut source_roots = Vec::new();
    for parent in ["crates", "bin"] {
        let Ok(entries) = std::fs::read_dir(root.join(parent)) else {
            continue;
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("could not list {parent}"))?;
            let src = PathBuf::from(parent).join(entry.file_name()).join("src");
            if root.join(&src).is_dir() {
                source_roots.push(src);
            }
        }
    }
    source_roots.push(PathBuf::from("xtask/src"));
    source_roots.sort();
    let mut cycles = Vec::new();
    for source_root in source_roots {
        let mut files = BTreeMap::new();
        collect(&root.join(&source_root), &mut Vec::new(), &mut files)?;
        for modules in crate_cycles(&files) {
            cycles.push(Cycle {
                source_root: source_root.clone(),
                modules,
            });
        }
    }
    Ok(cycles)
}

/// Reads every module file under `directory` (the module `prefix`) into `files`.
fn collect(
    directory: &Path,
    prefix: &mut ModulePath,
    files: &mut BTreeMap<ModulePath, String>,
) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(directory).with_context(|| format!("could not list {directory:?}"))?;
    let mut entries: Vec<_> = entries.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            // `src/bin/` holds separate crates.
            if prefix.is_empty() && name == "bin" {
                continue;
            }
            prefix.push(name);
            collect(&path, prefix, files)?;
            prefix.pop();
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let mut module = prefix.clone();
            let is_root = prefix.is_empty() && matches!(stem, "lib" | "main");
            if stem != "mod" && !is_root {
                module.push(stem.to_owned());
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("could not read {path:?}"))?;
            files.insert(module, text);
        }
    }
    Ok(())
}

/// The cycles among `files` (module path → source), each as sorted module names.
fn crate_cycles(files: &BTreeMap<ModulePath, String>) -> Vec<Vec<String>> {
    let modules: BTreeSet<&ModulePath> = files.keys().collect();
    let mut edges: BTreeMap<&ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (module, text) in files {
        if module.is_empty() {
            continue;
        }
        let targets = edges.entry(module).or_default();
        for path in references(module, text) {
            let Some(target) = deepest_module(&modules, &path) else {
                continue;
            };
            if !target.is_empty() && target != *module {
                targets.insert(target);
            }
        }
    }
    let mut cycles: Vec<Vec<String>> = strongly_connected(&edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| component.iter().map(|module| module.join("::")).collect())
        .collect();
    cycles.sort();
    cycles
}

/// The longest prefix of `path` that is a module of the crate.
fn deepest_module(modules: &BTreeSet<&ModulePath>, path: &[String]) -> Option<ModulePath> {
    (0..=path.len())
        .rev()
        .map(|length| path[..length].to_vec())
        .find(|prefix| modules.contains(prefix))
}

/// Every crate-relative path `text` (the source of `module`) names.
fn references(module: &ModulePath, text: &str) -> Vec<ModulePath> {
    let code = code_of(text);
    let children = child_modules(&code);
    let bytes = code.as_bytes();
    let mut paths = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let starts_word = index == 0 || !is_path_char(bytes[index - 1]);
        if !starts_word || !is_ident_start(bytes[index]) {
            index += 1;
            continue;
        }
        let word_end = ident_end(bytes, index);
        let word = &code[index..word_end];
        let followed_by_path = code[word_end..].starts_with("::");
        let base: Option<ModulePath> = match word {
            "crate" if followed_by_path => Some(Vec::new()),
            "self" if followed_by_path => Some(module.clone()),
            "super" if followed_by_path => {
                // `super::super::…` climbs once per `super`.
                let mut base = module.clone();
                base.pop();
                let mut cursor = word_end;
                while code[cursor..].starts_with("::super") {
                    base.pop();
                    cursor += "::super".len();
                }
                paths_from(&code, cursor, &base, &mut paths);
                None
            }
            child if followed_by_path && children.contains(child) => {
                let mut base = module.clone();
                base.push(child.to_owned());
                Some(base)
            }
            _ => None,
        };
        if let Some(base) = base {
            paths_from(&code, word_end, &base, &mut paths);
        }
        index = word_end;
    }
    paths
}

/// Reads the path (or `use` tree) that follows `base` at `cursor` (which is at
/// `::…`) and pushes every full path it names.
fn paths_from(code: &str, cursor: usize, base: &ModulePath, paths: &mut Vec<ModulePath>) {
    let bytes = code.as_bytes();
    let mut path = base.clone();
    let mut cursor = cursor;
    loop {
        if !code[cursor..].starts_with("::") {
            break;
        }
        cursor += 2;
        while cursor < bytes.len() && bytes[cursor].is_ascii_whitespace() {
            cursor += 1;
        }
        if cursor < bytes.len() && bytes[cursor] == b'{' {
            // A use group: each comma-separated tree continues the path so far.
            let close = matching_brace(bytes, cursor);
            let inner = &code[cursor + 1..close];
            for tree in split_top_level(inner) {
                let tree = tree.trim();
                if tree.is_empty() || tree == "self" {
                    paths.push(path.clone());
                    continue;
                }
                let rewritten = format!("::{tree}");
                paths_from(&rewritten, 0, &path, paths);
            }
            return;
        }
        if cursor < bytes.len() && is_ident_start(bytes[cursor]) {
            let end = ident_end(bytes, cursor);
            path.push(code[cursor..end].to_owned());
            cursor = end;
        } else {
            break;
        }
    }
    paths.push(path);
}

/// The index of the `}` closing the `{` at `open` (or the end of the text).
fn matching_brace(bytes: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (offset, byte) in bytes[open..].iter().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return open + offset;
                }
            }
            _ => {}
        }
    }
    bytes.len()
}

/// Splits a use group's inside at its top-level commas.
fn split_top_level(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (index, byte) in inner.bytes().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(&inner[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

/// The source without comments, without re-exports and without the test modules at
/// its end. A re-export (`pub use child::Thing;`) makes a module a façade for what
/// its children hold; it is not a use, so a child may still use its parent.
fn code_of(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    let mut in_reexport = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if in_reexport || trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use ")
        {
            in_reexport = !trimmed.trim_end().ends_with(';');
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line.split(" // ").next().unwrap_or(line));
        code.push('\n');
    }
    code
}

/// The child modules a file declares (`mod x;`, `pub(crate) mod x;`).
fn child_modules(code: &str) -> BTreeSet<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line.split("mod ").nth(1)?;
            let before = &line[..line.len() - rest.len() - "mod ".len()];
            let is_declaration = before.is_empty() || before.trim_end().starts_with("pub");
            let name = rest.strip_suffix(';')?;
            (is_declaration && name.bytes().all(is_path_char)).then(|| name.to_owned())
        })
        .collect()
}

fn is_ident_start(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_'
}

fn is_path_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b':'
}

fn ident_end(bytes: &[u8], start: usize) -> usize {
    let mut end = start;
    while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
        end += 1;
    }
    end
}

/// Tarjan's strongly connected components of `edges`.
fn strongly_connected<'a>(
    edges: &'a BTreeMap<&'a ModulePath, BTreeSet<ModulePath>>,
) -> Vec<Vec<&'a ModulePath>> {
    struct State<'a> {
        edges: &'a BTreeMap<&'a ModulePath, BTreeSet<ModulePath>>,
        index: BTreeMap<&'a ModulePath, usize>,
        low: BTreeMap<&'a ModulePath, usize>,
        stack: Vec<&'a ModulePath>,
        on_stack: BTreeSet<&'a ModulePath>,
        components: Vec<Vec<&'a ModulePath>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a ModulePath) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        let targets = state.edges.get(node).into_iter().flatten();
        for target in targets {
            // Only modules that have sources of their own take part.
            let Some((&target, _)) = state.edges.get_key_value(target) else {
                continue;
            };
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[target].min(state.low[node]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.index[target].min(state.low[node]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member);
                if member == node {
                    break;
                }
            }
            component.sort();
            state.components.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for &node in edges.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.components
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> BTreeMap<ModulePath, String> {
        files
            .iter()
            .map(|(module, text)| {
                let path = if module.is_empty() {
                    Vec::new()
                } else {
                    module.split("::").map(str::to_owned).collect()
                };
                (path, (*text).to_owned())
            })
            .collect()
    }

    #[test]
    fn a_use_group_a_super_path_and_a_child_module_all_count_as_edges() {
        let files = crate_of(&[
            ("", "mod a; mod b; mod tools;"),
            ("a", "use crate::{b::Thing, tools::x};"),
            ("b", "fn f() { super::a::g(); }"),
            ("tools", "mod scripts;\nfn f() { scripts::register(); }"),
            ("tools::scripts", "use super::helper;"),
        ]);
        let cycles = crate_cycles(&files);
        assert_eq!(
            cycles,
            vec![
                vec!["a".to_owned(), "b".to_owned()],
                vec!["tools".to_owned(), "tools::scripts".to_owned()]
            ]
        );
    }

    #[test]
    fn layers_comments_tests_and_the_root_make_no_cycle() {
        let files = crate_of(&[
            ("", "mod a; mod b; pub use a::A; pub use b::B;"),
            (
                "a",
                "use crate::b::B;\n// crate::a is mentioned by b only in comments",
            ),
            (
                "b",
                "use crate::B;\n// see crate::a::A\n#[cfg(test)]\nmod tests { use crate::a::A; }",
            ),
        ]);
        assert!(crate_cycles(&files).is_empty());
    }
}
