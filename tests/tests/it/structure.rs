//! The shape of the code: no module of a crate imports, directly or through others, a module
//! that imports it back. Dependencies inside a crate point one way, so a newcomer can read a
//! module knowing only what is below it.
//!
//! A file imports another when it names `crate::a::b` (in a `use` tree or inline), or
//! `super::x`, and that path resolves to a module file of the same crate; a module brought in
//! by `use` and then named further (`routes::health::health`) counts too. Unit tests
//! (`#[cfg(test)] mod tests { … }` at the end of a file) are left out.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use regex::Regex;

/// The crates whose modules are checked (each has a `src/`).
const CRATES: &[&str] = &[
    "shared",
    "api",
    "worker",
    "dispatcher",
    "modctl",
    "dashboard",
];

type ModPath = Vec<String>;

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cycles = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        if src.is_dir() {
            for cycle in cycles_in(&src) {
                cycles.push(format!("{krate}: {}", cycle.join(" <-> ")));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between module files:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_check_finds_a_cycle_through_use_trees_and_super() {
    let dir = std::env::temp_dir().join(format!("structure-{}", uuid::Uuid::new_v4()));
    let write = |rel: &str, text: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod a; pub mod b; pub mod c;");
    write("a.rs", "use crate::{b::{self, Thing}, c};");
    write("b/mod.rs", "pub mod inner;\npub struct Thing;");
    write("b/inner.rs", "fn f() { super::super::c::g(); }");
    write(
        "c.rs",
        "pub fn g() { crate::a::h(); }\n#[cfg(test)]\nmod tests { use crate::b; }",
    );

    let cycles = cycles_in(&dir);
    std::fs::remove_dir_all(&dir).unwrap();

    assert_eq!(cycles, vec![vec!["a".to_owned(), "c".to_owned()]]);
}

/// Each set of two or more module files that import each other, directly or not.
fn cycles_in(src: &Path) -> Vec<Vec<String>> {
    let mods = modules(src);
    let graph: BTreeMap<&ModPath, BTreeSet<ModPath>> = mods
        .iter()
        .map(|(m, file)| (m, imports(&mods, m, file)))
        .collect();
    let reach = |from: &ModPath| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&ModPath, BTreeSet<ModPath>> =
        mods.keys().map(|m| (m, reach(m))).collect();
    let mut placed = BTreeSet::new();
    let mut cycles = Vec::new();
    for m in mods.keys() {
        if placed.contains(m) || !reachable[m].contains(m) {
            continue;
        }
        let members: Vec<&ModPath> = mods
            .keys()
            .filter(|other| {
                *other == m || (reachable[m].contains(*other) && reachable[other].contains(m))
            })
            .collect();
        placed.extend(members.iter().map(|p| (*p).clone()));
        cycles.push(members.iter().map(|p| name(p)).collect());
    }
    cycles
}

/// Every module file under `src`, by module path (`lib.rs` is the empty path).
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut parts: ModPath = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    parts.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    parts.pop();
                }
                found.insert(parts, path);
            }
        }
    }
    found
}

/// The module files `file` (module `m`) imports.
fn imports(mods: &BTreeMap<ModPath, PathBuf>, m: &ModPath, file: &Path) -> BTreeSet<ModPath> {
    let text = std::fs::read_to_string(file).unwrap();
    let unit_tests = Regex::new(r"(?s)#\[cfg\(test\)\]\s*mod tests\s*\{.*").unwrap();
    let text = unit_tests.replace(&text, "");
    let mut paths: Vec<ModPath> = Vec::new();
    let use_crate = Regex::new(r"(?s)\buse\s+crate::([^;]*);").unwrap();
    for tree in use_crate.captures_iter(&text) {
        let tree = tree[1].split_whitespace().collect::<Vec<_>>().join(" ");
        expand(&[], &tree, &mut paths);
    }
    let inline = Regex::new(r"(^|[^\w:])crate::((?:\w+::)*\w+)").unwrap();
    for found in inline.captures_iter(&text) {
        paths.push(found[2].split("::").map(str::to_owned).collect());
    }
    // A module brought in by `use` and then named further: `routes::health::health`.
    for path in paths.clone() {
        if let Some(last) = path.last().filter(|_| mods.contains_key(&path)) {
            let further = Regex::new(&format!(
                r"(^|[^\w:]){}::((?:\w+::)*\w+)",
                regex::escape(last)
            ))
            .unwrap();
            for found in further.captures_iter(&text) {
                let mut longer = path.clone();
                longer.extend(found[2].split("::").map(str::to_owned));
                paths.push(longer);
            }
        }
    }
    // `super` of `a/b.rs` and of `a/b/mod.rs` is `a`.
    let mut parent = m.clone();
    parent.pop();
    let supers = Regex::new(r"\bsuper::((?:\w+::)*\w+)").unwrap();
    for found in supers.captures_iter(&text) {
        let mut base = parent.clone();
        let mut rest: Vec<&str> = found[1].split("::").collect();
        // `super::super::x` climbs once more per extra `super`.
        while rest.first() == Some(&"super") {
            base.pop();
            rest.remove(0);
        }
        base.extend(rest.into_iter().map(str::to_owned));
        paths.push(base);
    }
    paths
        .iter()
        .filter_map(|path| resolve(mods, path))
        .filter(|target| target != m && !target.is_empty())
        .collect()
}

/// Expands a `use` tree (`{a::{b, c}, d}`) below `prefix` into paths.
fn expand(prefix: &[String], tree: &str, out: &mut Vec<ModPath>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let mut depth = 0;
        let mut item = String::new();
        for ch in inner.chars() {
            match ch {
                ',' if depth == 0 => {
                    expand(prefix, &item, out);
                    item.clear();
                    continue;
                }
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            item.push(ch);
        }
        expand(prefix, &item, out);
        return;
    }
    let (head, rest) = tree.split_once("::").unwrap_or((tree, ""));
    let head = head.split(" as ").next().unwrap_or("").trim();
    if head.is_empty() || head == "self" || head == "*" {
        out.push(prefix.to_vec());
        return;
    }
    let mut longer = prefix.to_vec();
    longer.push(head.to_owned());
    if rest.is_empty() {
        out.push(longer);
    } else {
        expand(&longer, rest, out);
    }
}

/// The longest prefix of `path` that is a module file.
fn resolve(mods: &BTreeMap<ModPath, PathBuf>, path: &[String]) -> Option<ModPath> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| mods.contains_key(prefix))
}

fn name(path: &ModPath) -> String {
    if path.is_empty() {
        "lib".to_owned()
    } else {
        path.join("/")
    }
}
