//! The shape of the code, checked for every crate of the workspace (each folder of
//! `crates/` and `benches/`): no function outside tests is longer than 150 lines and no
//! report renderer longer than 80; no module imports, directly or through others, a
//! module that imports it back (within one crate); no Markdown table delimiter is written
//! by hand outside servelab's table module; no `Result<_, String>` except the clap value
//! parsers. Run `cargo test -p servelab --test structure -- --nocapture` to see the
//! longest functions of each crate and the size of each module graph.
//!
//! How it counts: a small lexer blanks comments, strings and character literals (lines
//! are kept), then a function is every `fn` item with a body (free functions and
//! methods; a closure counts toward the function that holds it), and its length is the
//! lines from its `fn` to its closing brace, both included. Test code is left out:
//! every `#[cfg(test)]` item (most often `mod tests { .. }`), every file declared by
//! `#[cfg(test)] mod name;`, and the `tests/`, `benches/` and `examples/` folders beside
//! a crate's `src/`, which are never read; nor are the workspace's own `tests/` (the
//! end-to-end tests) and `fuzz/` (fuzz targets, not a workspace member).
//!
//! An import is any path a file names that starts at `crate::`, `super::`, `self::` or
//! a child module it declares, resolved to the file of the longest module prefix, and
//! on through that module's `use` of the name (a re-export, say) to the file that
//! defines it. `mod x;` itself is not an import, nor is a use of an ancestor's items (a
//! child's `super::Error`, or `crate::run` defined in `lib.rs`): a child is part of the
//! module that declares it, so a circle is one between sibling modules or their
//! descendants. A crate with both `lib.rs` and `main.rs` has two roots: `main.rs` is
//! then its own crate, using the library by name, and is not a node of the library's
//! graph.
//!
//! A `Result<_, String>` is allowed only in a function the same crate names as a clap
//! `value_parser = path::name` (in any of its files). Nothing is left out beyond all
//! that except the items of `EXCEPTIONS`, each with its reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest a function may be.
const MAX_FN_LINES: usize = 150;
/// Longest a report renderer may be: a report is a list of sections, each a small
/// function from the model to a table or sentences.
const MAX_RENDERER_LINES: usize = 80;

/// Files whose functions render reports (Markdown, SVG, HTML), relative to a crate's
/// `src/`: a file of one of these names, or any file under one of these folders.
const RENDERER_FILES: &[&str] = &[
    "markdown.rs",
    "summary.rs",
    "setup.rs",
    "plots.rs",
    "html.rs",
];
const RENDERER_DIRS: &[&str] = &["chart", "render"];

/// What each rule lets pass, and why: (rule, `crate/src/file`, reason). A rule names
/// a test below.
const EXCEPTIONS: &[(&str, &str, &str)] = &[(
    "markdown_tables",
    "rustnfs/src/nfs4/state/limits.rs",
    "rustnfs prints its NFSv4 state limits as a Markdown table in `--help` and the \
     README; servelab's `Table` lives in a binary at the top of the workspace, which \
     rustnfs cannot depend on",
)];

fn excepted(rule: &str, krate: &str, rel: &Path) -> bool {
    let at = format!("{krate}/src/{}", rel.display());
    EXCEPTIONS.iter().any(|&(r, f, _)| r == rule && f == at)
}

/// Every crate held to these rules, by folder name (`servelab`, `rustnfs`, `benches`):
/// each folder of `crates/` with a `Cargo.toml` and a `src/`, and `benches/`.
fn crates() -> Vec<String> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<String> = std::fs::read_dir(here.join(".."))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|dir| dir.join("Cargo.toml").is_file() && dir.join("src").is_dir())
        .map(|dir| dir.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out.push("benches".to_string());
    assert!(
        out.len() >= 11 && out.iter().any(|c| c == "rustnfs"),
        "the workspace's crates were not found: {out:?}"
    );
    out
}

/// A crate's folder, from its name.
fn crate_dir(krate: &str) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    if krate == "benches" {
        here.join("../../benches")
    } else {
        here.join("..").join(krate)
    }
}

/// One source file, read and blanked.
struct Source {
    /// Relative to its crate's `src/`.
    rel: PathBuf,
    /// The text with comments, strings and character literals replaced by spaces.
    code: Vec<u8>,
    /// The original text.
    raw: String,
    /// Byte ranges of `#[cfg(test)]` items.
    tests: Vec<(usize, usize)>,
}

impl Source {
    fn line_of(&self, at: usize) -> usize {
        self.code[..at].iter().filter(|&&b| b == b'\n').count() + 1
    }

    fn in_tests(&self, at: usize) -> bool {
        self.tests.iter().any(|&(a, b)| a <= at && at < b)
    }

    fn is_renderer(&self) -> bool {
        let name = self.rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        RENDERER_FILES.contains(&name)
            || self
                .rel
                .components()
                .any(|c| RENDERER_DIRS.contains(&c.as_os_str().to_str().unwrap_or("")))
    }
}

/// Replaces comments and the contents of string and character literals with spaces,
/// keeping every newline (so byte offsets and lines stay those of the file).
fn blank(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let clear = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| i + p);
                clear(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                clear(&mut out, i, j);
                i = j;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !is_ident(b[i - 1])) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let start = i + 2 + hashes;
                let mut close = b"\"".to_vec();
                close.extend(std::iter::repeat_n(b'#', hashes));
                let end = find(b, start, &close).map_or(b.len(), |p| p + close.len());
                clear(&mut out, start, end.saturating_sub(close.len()).max(start));
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                clear(&mut out, i + 1, j.min(b.len()));
                i = j + 1;
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    let end = b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map_or(b.len(), |p| i + 2 + p);
                    clear(&mut out, i + 1, end);
                    i = end + 1;
                } else if let Some(len) = std::str::from_utf8(&b[i + 1..(i + 6).min(b.len())])
                    .ok()
                    .or_else(|| std::str::from_utf8(&b[i + 1..(i + 5).min(b.len())]).ok())
                    .and_then(|s| s.chars().next())
                    .map(char::len_utf8)
                    .filter(|&len| b.get(i + 1 + len) == Some(&b'\''))
                {
                    clear(&mut out, i + 1, i + 1 + len);
                    i += 2 + len;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// The offset just past the brace that closes the one at `open`.
fn matching_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Every occurrence of the word `word` (not part of a longer identifier).
fn words<'a>(code: &'a [u8], word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let w = word.as_bytes();
    (0..code.len().saturating_sub(w.len()) + 1).filter(move |&i| {
        &code[i..i + w.len()] == w
            && (i == 0 || !is_ident(code[i - 1]))
            && code.get(i + w.len()).is_none_or(|&c| !is_ident(c))
    })
}

/// The end of the item starting at `from`: its closing brace, or its `;` when it has no
/// body.
fn item_end(code: &[u8], from: usize) -> usize {
    let mut k = from;
    let mut parens = 0i32;
    while k < code.len() {
        match code[k] {
            b'(' | b'[' => parens += 1,
            b')' | b']' => parens -= 1,
            b';' if parens == 0 => return k + 1,
            b'{' if parens == 0 => return matching_brace(code, k),
            _ => {}
        }
        k += 1;
    }
    code.len()
}

fn read(src: &Path, rel: &Path) -> Source {
    parse(rel, std::fs::read_to_string(src.join(rel)).unwrap())
}

/// A file's text, blanked, with its test items found.
fn parse(rel: &Path, raw: String) -> Source {
    let code = blank(&raw);
    let tests = words(&code, "cfg")
        .filter(|&i| {
            let after = &code[i + 3..];
            let t: String = after
                .iter()
                .take(16)
                .map(|&c| c as char)
                .filter(|c| !c.is_whitespace())
                .collect();
            t.starts_with("(test)]") && i >= 2 && code[..i].ends_with(b"#[")
        })
        .map(|i| {
            let close = find(&code, i, b"]").unwrap() + 1;
            (i, item_end(&code, close))
        })
        .collect();
    Source {
        rel: rel.to_path_buf(),
        code,
        raw,
        tests,
    }
}

fn sources(krate: &str) -> Vec<Source> {
    let src = crate_dir(krate).join("src");
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(src.join(&dir)).unwrap() {
            let e = e.unwrap();
            let rel = dir.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                stack.push(rel);
            } else if rel.extension().is_some_and(|x| x == "rs") {
                out.push(read(&src, &rel));
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    // A file declared by `#[cfg(test)] mod name;` is a test file as a whole.
    let test_files: Vec<PathBuf> = out.iter().flat_map(test_children).collect();
    out.retain(|s| !test_files.contains(&s.rel));
    out
}

/// The files of the child modules `s` declares under `#[cfg(test)]`.
fn test_children(s: &Source) -> Vec<PathBuf> {
    let dir = match s.rel.file_name().and_then(|n| n.to_str()) {
        Some("mod.rs" | "lib.rs" | "main.rs") => s.rel.parent().unwrap().to_path_buf(),
        _ => s.rel.with_extension(""),
    };
    s.tests
        .iter()
        .filter_map(|&(a, b)| {
            let text = String::from_utf8_lossy(&s.code[a..b]).into_owned();
            let decl = text[text.find(']')? + 1..].trim().to_string();
            let name = decl
                .strip_prefix("mod ")?
                .strip_suffix(';')?
                .trim()
                .to_string();
            Some([
                dir.join(format!("{name}.rs")),
                dir.join(name).join("mod.rs"),
            ])
        })
        .flatten()
        .collect()
}

/// A function outside tests: (file, name, first line, lines).
struct Function {
    file: PathBuf,
    name: String,
    line: usize,
    lines: usize,
    renderer: bool,
}

fn functions(s: &Source) -> Vec<Function> {
    let code = &s.code;
    words(code, "fn")
        .filter(|&i| !s.in_tests(i))
        .filter_map(|i| {
            let mut k = i + 2;
            while k < code.len() && code[k].is_ascii_whitespace() {
                k += 1;
            }
            let name_end = (k..code.len()).find(|&j| !is_ident(code[j]))?;
            if name_end == k {
                return None; // `fn(` — a function pointer type
            }
            let end = item_end(code, name_end);
            if code[end - 1] != b'}' {
                return None; // a trait method without a body
            }
            let (first, last) = (s.line_of(i), s.line_of(end - 1));
            Some(Function {
                file: s.rel.clone(),
                name: String::from_utf8_lossy(&code[k..name_end]).into_owned(),
                line: first,
                lines: last - first + 1,
                renderer: s.is_renderer(),
            })
        })
        .collect()
}

/// The module path of a file: `compare/run/mod.rs` → `[compare, run]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !["mod", "lib", "main"].contains(&stem) {
        parts.push(stem.to_string());
    }
    parts
}

/// `use a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e` (each as segments).
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    expand_use_named(tree).into_iter().map(|(_, p)| p).collect()
}

/// As `expand_use`, each path with the name it is known by in the file (its last
/// segment, or the name after `as`; `a::{self}` is `a`).
fn expand_use_named(tree: &str) -> Vec<(String, Vec<String>)> {
    fn go(prefix: &[String], tree: &str, out: &mut Vec<(String, Vec<String>)>) {
        let tree = tree.trim();
        if tree.is_empty() {
            return;
        }
        if let Some(open) = tree.find('{') {
            let head: Vec<String> = tree[..open]
                .split("::")
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            let close = tree.rfind('}').unwrap_or(tree.len());
            let inner = &tree[open + 1..close];
            let mut base = prefix.to_vec();
            base.extend(head);
            let (mut depth, mut start) = (0, 0);
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        go(&base, &inner[start..k], out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            go(&base, &inner[start..], out);
        } else {
            let mut parts = tree.split(" as ");
            let path = parts.next().unwrap_or(tree);
            let alias = parts.next().map(|a| a.trim().to_string());
            let mut p = prefix.to_vec();
            p.extend(
                path.split("::")
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty()),
            );
            if p.last().is_some_and(|l| l == "self") {
                p.pop();
            }
            let name = alias.or_else(|| p.last().cloned()).unwrap_or_default();
            out.push((name, p));
        }
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

/// The `use` trees of a file outside its tests, their text between `use` and `;`.
fn use_trees(s: &Source) -> Vec<String> {
    let code = &s.code;
    let text = String::from_utf8_lossy(code);
    words(code, "use")
        .filter(|&i| !s.in_tests(i))
        .map(|i| {
            let end = find(code, i, b";").unwrap_or(code.len());
            text[i + 3..end].to_string()
        })
        .collect()
}

/// Every path the file names outside its tests, as segments (a `use` tree expanded).
fn paths(s: &Source) -> Vec<Vec<String>> {
    let code = &s.code;
    let mut out: Vec<Vec<String>> = use_trees(s).iter().flat_map(|t| expand_use(t)).collect();
    // Paths in the code: `a::b::c` runs of identifiers.
    let mut i = 0;
    while i < code.len() {
        if is_ident(code[i]) && (i == 0 || !is_ident(code[i - 1]) && code[i - 1] != b':') {
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let start = j;
                while j < code.len() && is_ident(code[j]) {
                    j += 1;
                }
                segs.push(String::from_utf8_lossy(&code[start..j]).into_owned());
                if code.get(j..j + 2) == Some(b"::")
                    && code.get(j + 2).is_some_and(|&c| is_ident(c))
                {
                    j += 2;
                } else {
                    break;
                }
            }
            if segs.len() > 1 && !s.in_tests(i) {
                out.push(segs);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The child modules a file declares (`mod x;`, `pub mod x;`).
fn children(s: &Source) -> BTreeSet<String> {
    let code = &s.code;
    words(code, "mod")
        .filter(|&i| !s.in_tests(i))
        .filter_map(|i| {
            let text = String::from_utf8_lossy(&code[i + 3..item_end(code, i)]).into_owned();
            let name = text.trim().trim_end_matches(';').trim();
            (!name.contains('{') && !name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// Each file's imports, as the files they resolve to (itself left out).
fn import_graph(files: &[Source]) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    // Beside a `lib.rs`, `main.rs` is a crate of its own that names the library by its
    // crate name: it must declare no module, and it is no node of the library's graph.
    let has_lib = files.iter().any(|s| s.rel == Path::new("lib.rs"));
    let files: Vec<&Source> = files
        .iter()
        .filter(|s| {
            let second_root = has_lib && s.rel == Path::new("main.rs");
            assert!(
                !second_root || children(s).is_empty(),
                "main.rs beside lib.rs declares modules: the import graph would mix two crates"
            );
            !second_root
        })
        .collect();
    let by_module: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|s| (module_of(&s.rel), s.rel.clone()))
        .collect();
    // What each module's `use` lines (re-exports or not) bring in, by name: a path
    // through such a name goes on to the module that defines the item.
    let brought: BTreeMap<PathBuf, BTreeMap<String, Vec<String>>> = files
        .iter()
        .map(|s| {
            let (me, kids) = (module_of(&s.rel), children(s));
            let names = use_trees(s)
                .iter()
                .flat_map(|t| expand_use_named(t))
                .filter(|(name, _)| name != "*")
                .filter_map(|(name, p)| Some((name, absolute(&me, &kids, &p)?)))
                .collect();
            (s.rel.clone(), names)
        })
        .collect();
    let resolve = |mut abs: Vec<String>| {
        for _ in 0..8 {
            let n = (0..=abs.len())
                .rev()
                .find(|&n| by_module.contains_key(&abs[..n]))?;
            let file = &by_module[&abs[..n]];
            match abs.get(n).and_then(|name| brought[file].get(name)) {
                Some(to) if to[..] != abs[..] => {
                    let mut next = to.clone();
                    next.extend(abs[n + 1..].iter().cloned());
                    abs = next;
                }
                _ => return Some(file.clone()),
            }
        }
        None
    };
    let mut graph = BTreeMap::new();
    for s in files {
        let me = module_of(&s.rel);
        let kids = children(s);
        let mut edges = BTreeSet::new();
        for p in paths(s) {
            let Some(target) = absolute(&me, &kids, &p).and_then(&resolve) else {
                continue;
            };
            // A module's use of an ancestor's items (`super::Error`, or `crate::run`
            // defined in `lib.rs`) is no import: a child is part of the module that
            // declares it.
            if target != s.rel && !me.starts_with(&module_of(&target)) {
                edges.insert(target);
            }
        }
        graph.insert(s.rel.clone(), edges);
    }
    graph
}

/// The absolute module path of `p` as named in module `me` (which declares the child
/// modules `kids`), or `None` for a path outside the crate (`std::`, another crate).
fn absolute(me: &[String], kids: &BTreeSet<String>, p: &[String]) -> Option<Vec<String>> {
    let mut abs: Vec<String> = match p.first()?.as_str() {
        "crate" => Vec::new(),
        "self" => me.to_vec(),
        "super" => me[..me.len().saturating_sub(1)].to_vec(),
        first if kids.contains(first) => me.to_vec(),
        _ => return None,
    };
    let mut rest = p;
    if ["crate", "self", "super"].contains(&rest[0].as_str()) {
        rest = &rest[1..];
    }
    while rest.first().is_some_and(|x| x == "super") {
        abs.pop();
        rest = &rest[1..];
    }
    abs.extend(rest.iter().cloned());
    Some(abs)
}

/// The strongly connected components with more than one file (Tarjan).
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on_stack: BTreeSet<&'g PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'g>(st: &mut State<'g>, v: &'g PathBuf) {
        let n = st.index.len();
        st.index.insert(v, n);
        st.low.insert(v, n);
        st.stack.push(v);
        st.on_stack.insert(v);
        for w in st.graph.get(v).into_iter().flatten() {
            if !st.index.contains_key(w) {
                visit(st, w);
                let lw = st.low[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if st.on_stack.contains(w) {
                let iw = st.index[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = st.stack.pop().unwrap();
                st.on_stack.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                st.out.push(comp);
            }
        }
    }
    let mut st = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !st.index.contains_key(v) {
            visit(&mut st, v);
        }
    }
    st.out
}

#[test]
fn no_function_is_too_long() {
    let mut too_long = Vec::new();
    for krate in &crates() {
        let mut all: Vec<Function> = sources(krate).iter().flat_map(functions).collect();
        all.sort_by_key(|f| std::cmp::Reverse(f.lines));
        for f in all.iter().take(8) {
            eprintln!(
                "{krate}: {}:{} {} — {} lines{}",
                f.file.display(),
                f.line,
                f.name,
                f.lines,
                if f.renderer { " (renderer)" } else { "" }
            );
        }
        for f in all {
            let limit = if f.renderer {
                MAX_RENDERER_LINES
            } else {
                MAX_FN_LINES
            };
            if f.lines > limit {
                too_long.push(format!(
                    "{krate}/src/{}:{} {}: {} lines (limit {limit})",
                    f.file.display(),
                    f.line,
                    f.name,
                    f.lines
                ));
            }
        }
    }
    assert!(too_long.is_empty(), "too long:\n{}", too_long.join("\n"));
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let mut found = Vec::new();
    for krate in &crates() {
        let files = sources(krate);
        let graph = import_graph(&files);
        let edges: usize = graph.values().map(BTreeSet::len).sum();
        eprintln!(
            "{krate}: {} files, {edges} imports between them",
            graph.len()
        );
        for c in circles(&graph) {
            let names: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
            let ties: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{} -> {}", a.display(), b.display()))
                })
                .collect();
            found.push(format!(
                "{krate}: {} ({})",
                names.join(", "),
                ties.join("; ")
            ));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn markdown_tables_are_written_by_the_table_module_only() {
    let mut found = Vec::new();
    for krate in &crates() {
        for s in sources(krate) {
            let the_table_module = krate == "servelab" && s.rel == Path::new("table.rs");
            if the_table_module || excepted("markdown_tables", krate, &s.rel) {
                continue;
            }
            let mut offset = 0;
            for (n, line) in s.raw.lines().enumerate() {
                let hand_written = ["|---", "| ---", "|:--", "| :--"]
                    .iter()
                    .any(|d| line.contains(d));
                if hand_written && !s.in_tests(offset) {
                    found.push(format!(
                        "{krate}/src/{}:{}: {}",
                        s.rel.display(),
                        n + 1,
                        line.trim()
                    ));
                }
                offset += line.len() + 1;
            }
        }
    }
    assert!(
        found.is_empty(),
        "hand-written table delimiters:\n{}",
        found.join("\n")
    );
}

/// The names of the functions a crate gives clap as `value_parser = path::name`, in any
/// of its files (a parser in `config.rs` named by `cli.rs`'s `#[arg]`).
fn clap_value_parsers(files: &[Source]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in files {
        let text = String::from_utf8_lossy(&s.code);
        for (at, _) in text.match_indices("value_parser") {
            let rest = text[at + "value_parser".len()..].trim_start();
            let Some(rest) = rest.strip_prefix('=') else {
                continue;
            };
            let path: String = rest
                .trim_start()
                .chars()
                .take_while(|&c| is_ident(c as u8) || c == ':')
                .collect();
            if let Some(name) = path.rsplit("::").next().filter(|n| !n.is_empty()) {
                out.insert(name.to_string());
            }
        }
    }
    out
}

#[test]
fn string_errors_only_in_clap_value_parsers() {
    let mut found = Vec::new();
    for krate in &crates() {
        let files = sources(krate);
        let parsers = clap_value_parsers(&files);
        for s in files {
            let text = String::from_utf8_lossy(&s.code);
            for f in functions(&s) {
                let start = s
                    .raw
                    .lines()
                    .take(f.line - 1)
                    .map(|l| l.len() + 1)
                    .sum::<usize>();
                let sig_end = text[start..].find('{').map_or(text.len(), |p| start + p);
                let sig: String = text[start..sig_end].split_whitespace().collect();
                let string_error = sig.contains(",String>") && sig.contains("Result<");
                if string_error && !parsers.contains(&f.name) {
                    found.push(format!(
                        "{krate}/src/{}:{} {}",
                        s.rel.display(),
                        f.line,
                        f.name
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Result<_, String> outside clap value parsers:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_lexer_blanks_comments_and_literals() {
    let code = "let a = \"fn x() {\"; // fn y() {}\nlet c = '{'; let l: &'a str = r#\"}\"#;";
    let b = String::from_utf8(blank(code)).unwrap();
    assert!(!b.contains("fn"), "{b}");
    assert!(!b.contains('{') && !b.contains('}'), "{b}");
    assert!(b.contains("&'a str"), "{b}");
    assert_eq!(b.lines().count(), 2);
    assert_eq!(
        expand_use(" crate::a::{b, c::{d, e as f}}"),
        [
            vec!["crate", "a", "b"],
            vec!["crate", "a", "c", "d"],
            vec!["crate", "a", "c", "e"]
        ]
    );
}

#[test]
fn the_rules_find_what_they_look_for() {
    let crate_of = |files: &[(&str, &str)]| -> Vec<Source> {
        files
            .iter()
            .map(|(rel, text)| parse(Path::new(rel), text.to_string()))
            .collect()
    };
    // `b` takes `Thing` through the root's re-export, so its arrow goes to `a`, which
    // takes `B` from `b`: a circle. `c` uses its parent's item: no arrow.
    let files = crate_of(&[
        (
            "lib.rs",
            "mod a;\nmod b;\nmod c;\npub use a::Thing;\npub struct Root;\n",
        ),
        ("a.rs", "use crate::b::B;\npub struct Thing(B);\n"),
        (
            "b.rs",
            "pub struct B;\nfn f() -> crate::Thing { todo!() }\n",
        ),
        (
            "c.rs",
            "use super::Root;\n#[cfg(test)]\nmod tests { use crate::a::Thing; }\n",
        ),
    ]);
    let graph = import_graph(&files);
    let at = |f: &str| PathBuf::from(f);
    assert_eq!(graph[&at("b.rs")], BTreeSet::from([at("a.rs")]));
    assert!(graph[&at("c.rs")].is_empty(), "{graph:?}");
    assert_eq!(circles(&graph), [vec![at("a.rs"), at("b.rs")]]);

    // Lines from `fn` to its closing brace; test items are no functions.
    let f = parse(
        Path::new("x.rs"),
        "fn long() {\n    let s = \"}\";\n}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n"
            .to_string(),
    );
    let found: Vec<(String, usize)> = functions(&f)
        .into_iter()
        .map(|f| (f.name, f.lines))
        .collect();
    assert_eq!(found, [("long".to_string(), 3)]);

    // A clap parser is found by the `value_parser` that names it in another file.
    let files = crate_of(&[
        (
            "cli.rs",
            "#[arg(long, value_parser = crate::config::parse_x)]\nstruct A;\n",
        ),
        (
            "config.rs",
            "pub fn parse_x(s: &str) -> Result<u8, String> { todo!() }\n",
        ),
    ]);
    assert_eq!(
        clap_value_parsers(&files),
        BTreeSet::from(["parse_x".to_string()])
    );
}
