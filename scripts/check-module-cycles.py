#!/usr/bin/env python3
"""Reports module import cycles inside each crate of the workspace (issue 13).

For every crate root under crates/*/src (lib.rs, main.rs, bin/*.rs) the module tree is read from
its `mod` declarations, and each module's imports from `use` trees and from `crate::`/`super::`/
`self::` paths in its code. A path resolves to the longest module it names; when its next segment
is an item the module only re-exports (`pub use`), the re-export is followed to where the item is
defined, so importing `crate::ConfigError` depends on the module that defines it, not on lib.rs (and a
name the root imports from another crate is no dependency at all).
Test code (`#[cfg(test)]` items) and the crate root's own re-export lines are left out: they are
not part of the dependency structure the split is about.

Exit status 1 with every cycle (a strongly connected component of more than one module) and the
imports that close it; 0 with a one-line count otherwise. `--self-test` checks the checker on a
synthetic workspace with known cycles.
"""

import argparse
import os
import re
import sys
import tempfile

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM_DEF = re.compile(
    r"\b(?:fn|struct|enum|trait|type|const|static|union|mod|macro_rules!)\s+(" + IDENT + r")"
)
MOD_DECL = re.compile(r"(?:\bpub(?:\s*\([^)]*\))?\s+)?\bmod\s+(" + IDENT + r")\s*;")
USE_STMT = re.compile(r"(\bpub(?:\s*\([^)]*\))?\s+)?\buse\s+([^;]*);")
CODE_PATH = re.compile(r"(?<![A-Za-z0-9_:])((?:" + IDENT + r")(?:\s*::\s*(?:" + IDENT + r"|\*))+)")
CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")


def blank(text, start, end):
    """`text` with [start, end) replaced by spaces, newlines kept so line numbers survive."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def strip_comments_and_literals(src):
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif (m := re.match(r'b?r(#*)"', src[i:i + 260])) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            close = '"' + m.group(1)
            j = src.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", src[i:j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}'); anything else is a lifetime and stays.
            if src.startswith("\\", i + 1):
                j = src.find("'", i + 2)
                j = n if j < 0 else j + 1
            elif i + 2 < n and src[i + 2] == "'":
                j = i + 3
            else:
                out.append(c)
                i += 1
                continue
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def item_end(code, start):
    """End of the item starting at `start`: its first `;` or the `}` closing its first block."""
    depth = 0
    for j in range(start, len(code)):
        ch = code[j]
        if ch == ";" and depth == 0:
            return j + 1
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def strip_test_items(code):
    while m := CFG_TEST.search(code):
        j = m.end()
        while am := re.match(r"\s*#\s*\[", code[j:]):
            j = item_end_attr(code, j + am.end() - 1)
        code = blank(code, m.start(), item_end(code, j))
    return code


def item_end_attr(code, open_bracket):
    depth = 0
    for j in range(open_bracket, len(code)):
        if code[j] == "[":
            depth += 1
        elif code[j] == "]":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def expand_use_tree(tree):
    """`a::{b, c::{d as e, *}}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a','c','*'], None)]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    if tree.startswith("::"):
        tree = tree[2:]
    out = []

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        parts.append(cur)
        return [p.strip() for p in parts if p.strip()]

    def walk(prefix, s):
        brace = s.find("{")
        if brace >= 0:
            head = [p.strip() for p in s[:brace].split("::") if p.strip()]
            inner = s[brace + 1:s.rfind("}")]
            for part in split_top(inner):
                walk(prefix + head, part)
            return
        alias = None
        if " as " in s:
            s, alias = (x.strip() for x in s.split(" as ", 1))
        segs = prefix + [p.strip() for p in s.split("::") if p.strip()]
        if segs and segs[-1] == "self":
            segs = segs[:-1]
        if segs:
            out.append((segs, alias or (None if segs[-1] == "*" else segs[-1])))

    walk([], tree)
    return out


class Module:
    def __init__(self, path, file, code):
        self.path = path  # tuple of segments; () is the crate root
        self.file = file
        self.code = code
        self.children = set()
        self.defined = set(ITEM_DEF.findall(code))
        # What `crate::this::Name` can lead to besides items defined here: every `use` (private
        # ones too, for the module's descendants), to an absolute path or None when external.
        self.imports = {}
        self.glob_imports = []


def line_of(code, pos):
    return code.count("\n", 0, pos) + 1


class Crate:
    def __init__(self, name, root_file):
        self.name = name
        self.modules = {}
        self.load(root_file, (), os.path.dirname(root_file))
        for mod in self.modules.values():
            for m in USE_STMT.finditer(mod.code):
                for segs, alias in expand_use_tree(m.group(2)):
                    target = self.absolute(mod.path, segs)
                    if segs[-1] == "*":
                        if target is not None:
                            mod.glob_imports.append(tuple(target[:-1]))
                    elif alias and alias != "_":
                        mod.imports[alias] = None if target is None else tuple(target)

    def load(self, file, path, child_dir):
        with open(file, encoding="utf-8") as f:
            code = strip_test_items(strip_comments_and_literals(f.read()))
        mod = Module(path, file, code)
        self.modules[path] = mod
        for m in MOD_DECL.finditer(code):
            name = m.group(1)
            for cand in (os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")):
                if os.path.exists(cand):
                    mod.children.add(name)
                    sub_dir = os.path.dirname(cand) if cand.endswith("mod.rs") else os.path.join(child_dir, name)
                    self.load(cand, path + (name,), sub_dir)
                    break

    def absolute(self, here, segs):
        """Absolute segments of a path written in module `here`, or None if it leaves the crate."""
        segs = list(segs)
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("self", "super"):
            base = list(here)
            while segs and segs[0] in ("self", "super"):
                if segs.pop(0) == "super":
                    if not base:
                        return None
                    base.pop()
            return base + segs
        if segs[0] in self.modules[here].children:
            return list(here) + segs
        return None

    def resolve(self, segs, seen=None):
        """The module an absolute path depends on: the longest module it names, or, for an item
        that module only imports, the module the import leads to (None: another crate)."""
        seen = seen or set()
        k = len(segs)
        while k > 0 and tuple(segs[:k]) not in self.modules:
            k -= 1
        mod = self.modules[tuple(segs[:k])]
        if k == len(segs) or segs[k] == "*":
            return mod.path
        item = segs[k]
        if item in mod.defined or (mod.path, item) in seen:
            return mod.path
        seen.add((mod.path, item))
        if item in mod.imports:
            target = mod.imports[item]
            return None if target is None else self.resolve(list(target) + segs[k + 1:], seen)
        for glob in mod.glob_imports:
            if glob in self.modules:
                target = self.resolve(list(glob) + segs[k:], seen)
                if target != glob:
                    return target
        return mod.path

    def edges(self):
        """{(from, to): [(file, line, text)]} between distinct modules."""
        found = {}

        def note(mod, segs, pos, text):
            target = self.absolute(mod.path, segs)
            if target is None or not target:
                return
            dep = self.resolve(target)
            if dep is not None and dep != mod.path:
                found.setdefault((mod.path, dep), []).append((mod.file, line_of(mod.code, pos), text))

        for mod in self.modules.values():
            code = mod.code
            for m in USE_STMT.finditer(code):
                if not (m.group(1) and mod.path == ()):  # the root's re-exports are followed, not counted
                    for segs, _ in expand_use_tree(m.group(2)):
                        note(mod, segs, m.start(), "use " + "::".join(segs))
                code = blank(code, m.start(), m.end())
            for m in CODE_PATH.finditer(code):
                segs = [s.strip() for s in m.group(1).split("::")]
                if segs[0] in ("crate", "self", "super") or segs[0] in mod.children:
                    note(mod, segs, m.start(), "::".join(segs))
        return found


def name(path):
    return "::".join(path) or "crate"


def sccs(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    succ = {n: sorted({b for (a, b) in edges if a == n}) for n in nodes}
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter[0]
                counter[0] += 1
                stack.append(v)
                on_stack.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def crate_roots(workspace):
    crates_dir = os.path.join(workspace, "crates")
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        if not os.path.isdir(src):
            continue
        pkg = crate
        manifest = os.path.join(crates_dir, crate, "Cargo.toml")
        if os.path.exists(manifest):
            with open(manifest, encoding="utf-8") as f:
                m = re.search(r'^\s*name\s*=\s*"([^"]+)"', f.read(), re.M)
                pkg = m.group(1) if m else crate
        for root in ("lib.rs", "main.rs"):
            if os.path.exists(os.path.join(src, root)):
                yield (pkg if root == "lib.rs" else f"{pkg} (bin {root})"), os.path.join(src, root)
        bins = os.path.join(src, "bin")
        if os.path.isdir(bins):
            for b in sorted(os.listdir(bins)):
                if b.endswith(".rs"):
                    yield f"{pkg} (bin {b})", os.path.join(bins, b)


def check(workspace, out=sys.stdout):
    """Prints the report; returns the cycles as {crate: [[module names]]}."""
    cycles, n_modules, n_crates = {}, 0, 0
    for crate_name, root in crate_roots(workspace):
        crate = Crate(crate_name, root)
        n_crates += 1
        n_modules += len(crate.modules)
        edges = crate.edges()
        for comp in sccs(list(crate.modules), edges):
            if len(comp) < 2:
                continue
            cycles.setdefault(crate_name, []).append([name(p) for p in comp])
            print(f"{crate_name}: cycle among {len(comp)} modules: {', '.join(name(p) for p in comp)}", file=out)
            members = set(comp)
            for (a, b), where in sorted(edges.items()):
                if a in members and b in members:
                    file, line, text = where[0]
                    more = f" (+{len(where) - 1} more)" if len(where) > 1 else ""
                    rel = os.path.relpath(file, workspace)
                    print(f"    {name(a)} -> {name(b)}: {rel}:{line} {text}{more}", file=out)
    total = sum(len(c) for c in cycles.values())
    if total:
        print(f"{total} module cycle(s) in {len(cycles)} of {n_crates} crate roots", file=out)
    else:
        print(f"no module cycles: {n_crates} crate roots, {n_modules} modules", file=out)
    return cycles


SELF_TEST_TREE = {
    "crates/demo/Cargo.toml": '[package]\nname = "demo"\n',
    "crates/demo/src/lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub mod tree;\npub mod clean;\n"
    "pub use a::Alpha;\npub use c::Gamma;\nuse other_crate::ext;\nfn k() { clean::c(); }\n",
    # a <-> b through the root's re-export of Alpha and a `super::` path in code.
    "crates/demo/src/a.rs": "use crate::b::Beta;\npub struct Alpha(Beta);\n",
    "crates/demo/src/b.rs": "pub struct Beta;\npub fn f() -> crate::Alpha { super::a::Alpha(Beta) }\n",
    # c -> a only in tests, in comments and in strings: no cycle.
    "crates/demo/src/c.rs": "// use crate::b::Beta;\npub struct Gamma;\nconst S: &str = \"crate::b::Beta\";\n"
    "#[cfg(test)]\nmod tests {\n    use crate::b::Beta;\n    fn g() { let _ = '{'; }\n}\n",
    # tree re-exports its children (parent -> child); the children import each other through
    # the parent's re-exports, which resolve to the siblings, and share::Share <-> leaf::Leaf is
    # a cycle; `tree::top` importing the parent's own item and the parent using `top` is another.
    "crates/demo/src/tree/mod.rs": "mod leaf;\nmod share;\nmod top;\npub use leaf::Leaf;\n"
    "pub use share::Share;\npub struct Own;\nfn h() { top::t(); }\n",
    "crates/demo/src/tree/leaf.rs": "use super::Share;\npub struct Leaf(Share);\n",
    "crates/demo/src/tree/share.rs": "pub struct Share;\nimpl Share { fn l(&self) -> super::leaf::Leaf { todo!() } }\n",
    "crates/demo/src/tree/top.rs": "use super::Own;\npub fn t() {}\n",
    # One-way imports only (the root's import of another crate is no edge back): no cycle.
    "crates/demo/src/clean.rs": "use crate::c::Gamma;\nuse crate::{b::Beta, Gamma as G};\n"
    "use crate::ext::E;\npub fn c() {}\n",
}


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in SELF_TEST_TREE.items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        with open(os.devnull, "w") as devnull:
            cycles = check(tmp, devnull)
    got = sorted(sorted(c) for c in cycles.get("demo", []))
    want = [["a", "b"], ["tree", "tree::top"], ["tree::leaf", "tree::share"]]
    if got != want:
        print(f"self-test FAILED: cycles {got}, expected {want}")
        return 1
    print("self-test passed: the synthetic workspace's 3 cycles found, none invented")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspace", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="workspace root holding crates/ (default: this script's repository)")
    ap.add_argument("--self-test", action="store_true", help="check the checker on a synthetic workspace")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    return 1 if check(args.workspace) else 0


if __name__ == "__main__":
    sys.exit(main())
