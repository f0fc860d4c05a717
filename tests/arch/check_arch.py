#!/usr/bin/python3
"""check_arch.py — every dependency between src/ modules against the allowed
direction written in docs/architecture-deps.txt.

A module is a top-level folder of src/ (src/runtime/drivers/ belongs to
runtime).  Two kinds of arrow are found in the sources, not in the build
files, because one include root and one daemon that links every library
let anything through the compiler and the linker:

  * an include: `#include "X/…"` in a file of module M is the arrow M -> X;
  * a use of a name another module defines: every non-static function
    defined in a module's .c files, every `static inline` function and
    function-like macro of its headers, and every non-static global it
    defines (named sbx_…).  The module is where a name is defined, not its
    prefix (isolation defines sbx_cg_*, runtime sbx_sandbox_*, obs
    sbx_audit_*, store sq_*/pg_*, image img_*).  A name a file uses (called,
    or passed as a callback) that only other modules define is the arrow
    M -> X.

Each arrow not listed in the rules file fails with file:line, the arrow and
what crossed it.  An `except` line of the rules file allows one file one
arrow (work in progress, with its reason); one no longer used fails too, so
the file stays true.  The drawing in docs/architecture.md (the code block
after its "checked against docs/architecture-deps.txt" marker) must list the
same arrows (every module's arrow to common is implied).

  check_arch.py [--src DIR] [--rules FILE]   check (exit 1 on a forbidden arrow)
  check_arch.py --arrows                      print every arrow with its count
  check_arch.py --self-test                   prove the check bites (temp copies)
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
DEFINE_FN = re.compile(r"^\s*#\s*define\s+(\w+)\(")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else",
            "defined", "__attribute__", "_Static_assert", "typeof", "__typeof__"}


def strip_comments_and_strings(text):
    """The text with comments and string/char literals blanked, line breaks
    kept so offsets map to the same line numbers."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_of(rel):
    """'runtime/drivers/gvisor.c' -> 'runtime'."""
    return rel.split("/", 1)[0]


def source_files(src):
    for dirpath, _, names in os.walk(src):
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                full = os.path.join(dirpath, name)
                yield os.path.relpath(full, src).replace(os.sep, "/"), full


def top_level_definitions(clean):
    """(name, is_static, is_function) for every definition at brace depth 0:
    functions (a ')' followed by '{') and initialised globals."""
    defs = []
    depth = 0
    stmt_start = 0
    i, n = 0, len(clean)
    while i < n:
        c = clean[i]
        if c == "#" and (i == 0 or clean[i - 1] == "\n") and depth == 0:
            while i < n and clean[i] != "\n":  # skip a preprocessor line (and continuations)
                if clean[i] == "\\" and i + 1 < n and clean[i + 1] == "\n":
                    i += 1
                i += 1
            stmt_start = i
            continue
        if c == "{":
            if depth == 0:
                head = clean[stmt_start:i]
                m = re.search(r"\b(\w+)\s*\(([^()]|\([^()]*\))*\)\s*(__attribute__\s*\(\(.*\)\)\s*)?$",
                              head, re.S)
                if m and "=" not in head and m.group(1) not in KEYWORDS:
                    defs.append((m.group(1), bool(re.search(r"\bstatic\b", head)), True))
                else:
                    g = re.search(r"\b(\w+)\s*(\[[^\]]*\])*\s*=\s*$", head, re.S)
                    if g and not re.search(r"\b(static|typedef)\b", head):
                        defs.append((g.group(1), False, False))
            depth += 1
        elif c == "}":
            depth = max(depth - 1, 0)
            if depth == 0:
                stmt_start = i + 1
        elif c == ";" and depth == 0:
            head = clean[stmt_start:i]
            g = re.search(r"\b(\w+)\s*(\[[^\]]*\])*\s*=", head)
            if g and "(" not in head[:g.start()] and not re.search(r"\b(static|typedef|extern)\b", head):
                defs.append((g.group(1), False, False))
            stmt_start = i + 1
        i += 1
    return defs


class Tree:
    """The sources of one src/ tree: cleaned text, and who defines what."""

    def __init__(self, src):
        self.src = src
        self.files = {}                              # rel -> cleaned text
        self.raw = {}                                # rel -> original lines
        self.defined = collections.defaultdict(set)  # name -> modules
        self.local = collections.defaultdict(set)    # rel -> static names of that file
        for rel, full in source_files(src):
            with open(full, encoding="utf-8", errors="replace") as f:
                text = f.read()
            clean = strip_comments_and_strings(text)
            self.files[rel] = clean
            self.raw[rel] = text.split("\n")
            mod = module_of(rel)
            header = rel.endswith(".h")
            for name, static, is_fn in top_level_definitions(clean):
                if name == "main" or (not is_fn and not name.startswith("sbx")):
                    continue  # every program has one; a short global reads like a local
                if static and not header:
                    self.local[rel].add(name)
                else:
                    self.defined[name].add(mod)
            if header:
                for line in clean.split("\n"):
                    m = DEFINE_FN.match(line)
                    if m:
                        self.defined[m.group(1)].add(mod)
        self.modules = sorted({module_of(r) for r in self.files if "/" in r})

    def arrows(self):
        """(from, to, rel, line, what) for every cross-module include and use."""
        found = []
        for rel, clean in sorted(self.files.items()):
            mod = module_of(rel)
            for lineno, line in enumerate(clean.split("\n"), 1):
                raw = self.raw[rel][lineno - 1]
                m = INCLUDE.match(raw)
                if m:
                    target = m.group(1).split("/", 1)[0]
                    if "/" in m.group(1) and target in self.modules and target != mod:
                        found.append((mod, target, rel, lineno, '#include "%s"' % m.group(1)))
                    continue
                if line.lstrip().startswith("#") and not re.match(r"\s*#\s*define\b", line):
                    continue
                for tok in set(IDENT.findall(line)):
                    owners = self.defined.get(tok)
                    if not owners or mod in owners or tok in self.local[rel]:
                        continue
                    # A name two other modules define (two programs) is one
                    # use: allowed when either module is.
                    found.append((mod, "|".join(sorted(owners)), rel, lineno, tok + "()"
                                  if re.search(r"\b%s\s*\(" % tok, line) else tok))
        return found


def read_rules(path):
    """{module: set(allowed targets)} and [(rel, target, lineno)] exceptions."""
    allowed, exceptions = {}, []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.match(r"^except\s+(\S+)\s*->\s*(\w+)$", line)
            if m:
                exceptions.append((m.group(1), m.group(2), lineno))
                continue
            m = re.match(r"^(\w+)\s*->\s*([\w\s]*)$", line)
            if not m:
                raise SystemExit("%s:%d: cannot read %r" % (path, lineno, line))
            allowed.setdefault(m.group(1), set()).update(m.group(2).split())
    return allowed, exceptions


DOC_MARKER = "checked against docs/architecture-deps.txt"


def check_doc(doc_path, allowed, out):
    """The drawing's arrows against the rules; returns how many differ."""
    if not doc_path or not os.path.exists(doc_path):
        return 0
    with open(doc_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next((i for i, l in enumerate(lines) if DOC_MARKER in l), None)
    if start is None:
        print("%s: no drawing marked %r" % (doc_path, DOC_MARKER), file=out)
        return 1
    drawn, i = {}, start + 1
    while i < len(lines) and not lines[i].startswith("```"):
        i += 1
    for j in range(i + 1, len(lines)):
        if lines[j].startswith("```"):
            break
        m = re.match(r"^(\w+)\s+─►\s+(.*)$", lines[j])
        if m:
            targets = re.sub(r"\(.*?\)", "", m.group(2))  # (a remark) is no arrow
            drawn[m.group(1)] = (set(re.findall(r"\w+", targets)), j + 1)
    bad = 0
    for mod, targets in sorted(allowed.items()):
        want = targets - {"common"}
        have, lineno = drawn.get(mod, (set(), start + 1))
        have = have - {"common", "only"}
        if want != have:
            print("%s:%d: the drawing has %s -> %s, %s allows %s" % (
                doc_path, lineno, mod, " ".join(sorted(have)) or "(nothing)",
                "docs/architecture-deps.txt", " ".join(sorted(want)) or "(common only)"), file=out)
            bad += 1
    for mod in sorted(set(drawn) - set(allowed)):
        print("%s:%d: the drawing names module %s, which the rules do not" % (
            doc_path, drawn[mod][1], mod), file=out)
        bad += 1
    return bad


def check(src, rules_path, out=sys.stdout, doc_path=None):
    tree = Tree(src)
    allowed, exceptions = read_rules(rules_path)
    excepted = {(rel, tgt) for rel, tgt, _ in exceptions}
    used_exceptions = set()
    bad = check_doc(doc_path, allowed, out)
    for mod in tree.modules:
        if mod not in allowed:
            print("%s: module src/%s/ has no line in %s" % (rules_path, mod, rules_path), file=out)
            bad += 1
    for frm, to, rel, lineno, what in tree.arrows():
        owners = to.split("|")
        if any(t in allowed.get(frm, ()) for t in owners):
            continue
        hit = [t for t in owners if (rel, t) in excepted]
        if hit:
            used_exceptions.add((rel, hit[0]))
            continue
        print("src/%s:%d: forbidden arrow %s -> %s: %s" % (rel, lineno, frm, to, what), file=out)
        bad += 1
    for rel, tgt, lineno in exceptions:
        if (rel, tgt) not in used_exceptions:
            print("%s:%d: exception %s -> %s is no longer used: delete the line"
                  % (rules_path, lineno, rel, tgt), file=out)
            bad += 1
    return bad


def print_arrows(src):
    counts = collections.Counter()
    for frm, to, *_ in Tree(src).arrows():
        counts[(frm, to)] += 1
    for (frm, to), n in sorted(counts.items()):
        print("%-10s -> %-10s %d" % (frm, to, n))


def self_test(src, rules_path):
    """Inject one forbidden include and one forbidden call into temporary
    copies of src/ and require the check to name each with its file:line."""
    if check(src, rules_path, out=open(os.devnull, "w")):
        print("self-test: the tree itself does not pass; run the check first")
        return 1
    cases = [
        ("isolation/iso.h", '#include "runtime/driver.h"\n', "isolation -> runtime"),
        ("store/store.c", "static void sbx_arch_probe(void) { sbx_core_start(0, 0, 0); }\n",
         "store -> core: sbx_core_start()"),
        ("common/util.c", "static void sbx_arch_probe2(void) { (void)sbx_h_healthz; }\n",
         "common -> api: sbx_h_healthz"),
    ]
    failed = 0
    for rel, line, expect in cases:
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "src")
            shutil.copytree(src, copy)
            with open(os.path.join(copy, rel), "a", encoding="utf-8") as f:
                f.write(line)
            with open(os.path.join(copy, rel), encoding="utf-8") as f:
                want_line = sum(1 for _ in f)
            res = subprocess.run([sys.executable, __file__, "--src", copy, "--rules", rules_path],
                                 capture_output=True, text=True)
            want = "src/%s:%d: forbidden arrow %s" % (rel, want_line, expect)
            if res.returncode != 1 or want not in res.stdout:
                print("self-test FAILED: injected %r into %s; wanted %r, got rc=%d:\n%s"
                      % (line.strip(), rel, want, res.returncode, res.stdout))
                failed += 1
            else:
                print("self-test ok: %s" % want)
    # A drawing that disagrees with the rules is reported.
    with tempfile.TemporaryDirectory() as tmp:
        doc = os.path.join(tmp, "architecture.md")
        with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
            text = f.read()
        with open(doc, "w", encoding="utf-8") as f:
            f.write(re.sub(r"^api(\s+)─► core", r"api\1─► core runtime", text, count=1, flags=re.M))
        out = subprocess.run([sys.executable, __file__, "--src", src, "--rules", rules_path,
                              "--doc", doc], capture_output=True, text=True)
        if out.returncode != 1 or "the drawing has api -> core runtime" not in out.stdout:
            print("self-test FAILED: a drawing with an extra arrow passed:\n" + out.stdout)
            failed += 1
        else:
            print("self-test ok: a drawing that disagrees with the rules is reported")
    # A stale exception is reported too.
    with tempfile.TemporaryDirectory() as tmp:
        rules = os.path.join(tmp, "deps.txt")
        shutil.copy(rules_path, rules)
        with open(rules, "a", encoding="utf-8") as f:
            f.write("except api/router.c -> store\n")
        out = subprocess.run([sys.executable, __file__, "--src", src, "--rules", rules],
                             capture_output=True, text=True)
        if out.returncode != 1 or "api/router.c -> store is no longer used" not in out.stdout:
            print("self-test FAILED: a stale exception passed:\n" + out.stdout)
            failed += 1
        else:
            print("self-test ok: a stale exception is reported")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(ROOT, "src"))
    ap.add_argument("--rules", default=os.path.join(ROOT, "docs", "architecture-deps.txt"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "architecture.md"),
                    help="the drawing to compare with the rules ('' to skip)")
    ap.add_argument("--arrows", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.arrows:
        print_arrows(a.src)
        return 0
    if a.self_test:
        return self_test(a.src, a.rules)
    bad = check(a.src, a.rules, doc_path=a.doc)
    if bad:
        print("%d forbidden arrow(s); the allowed direction is %s (docs/architecture.md)"
              % (bad, os.path.relpath(a.rules, ROOT)))
        return 1
    print("architecture: every arrow between src/ modules is allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
