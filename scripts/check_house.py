#!/usr/bin/env python3
"""The repository's house rules, checked on the tracked files (ctest `house_rules`).

  1. No tracked file refers to a path outside the repository (the steering checkout beside it).
  2. docs/ is documentation, not a lab notebook: fewer than 60 tracked files, and no tracked
     file anywhere is a log.
  3. The modes are decided once: the quoted mode words ("layer", "fused", "post", "pre") appear
     in src/ only in the configuration's parser and printers (src/config/).
  4. No source file outside test/ is over 600 lines.
  5. No function outside test/ is over 120 lines (counted by lizard, C++, CUDA and Python).
  6. Every repository path a tracked file names exists (relative to the root or to the file),
     and nothing cites the removed lab notebook (docs/measurements) or design-decisions.md;
     "COMMIT:PATH" (a file in git history), wildcards and NAME placeholders are not paths.

Exit 0 when every rule holds, 1 with one line per breach, 77 (skipped) outside a git checkout.
  scripts/check_house.py [--root DIR]
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
MAX_DOCS_FILES = 60
SOURCE_SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".py"}
# Built from pieces so that this file does not match its own patterns.
OUTSIDE = re.compile(r"\.\./" + "shared" + r"|\b" + "DES" + r"IGN\.md")
# The check and its self-test name breaches on purpose.
SELF = {"scripts/check_house.py", "test/docs/test_check_house.py"}
MODE_WORDS = re.compile(r'"(layer|fused|post|pre)"')
REPO_PATH = re.compile(r"(?<![\w./:-])((?:\.\./)*(?:docs|scripts|input|jobs|models|python|postprocess|src|include|apps"
                       r"|test|cmake)/[\w./-]*[\w-]\.(?:md|csv|h5|png|pdf|toml|py|sh|cpp|hpp|cu|cuh|sbatch|txt|ipynb))")
REMOVED = re.compile(r"(?<![0-9a-f]:)(?<![\w/-])(?:docs/)?measurements/20\d\d|design-decisions\.md")


def tracked(root):
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def is_text(path):
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return b"\0" not in data[:8192]


def text_lines(root, files):
    """(file, line number, line) of every tracked text file but the check's own."""
    for f in files:
        p = root / f
        if f in SELF or not is_text(p):
            continue
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            yield f, i, line


def outside_references(root, files):
    for f, i, line in text_lines(root, files):
        if OUTSIDE.search(line):
            yield f"{f}:{i}: refers to a path outside the repository: {line.strip()[:120]}"


def dangling_paths(root, files):
    for f, i, line in text_lines(root, files):
        for m in REPO_PATH.finditer(line):
            ref = m.group(1)
            if "*" in ref or "<" in ref or re.search(r"/[A-Z]+\.", ref):
                continue
            if not (root / ref).exists() and not (root / f).parent.joinpath(ref).exists():
                yield f"{f}:{i}: names {ref}, which does not exist"
        if REMOVED.search(line):
            yield f"{f}:{i}: cites the removed lab notebook or design-decisions.md: {line.strip()[:120]}"


def notebook(files):
    docs = [f for f in files if f.startswith("docs/")]
    if len(docs) >= MAX_DOCS_FILES:
        yield f"docs/ tracks {len(docs)} files (at most {MAX_DOCS_FILES - 1})"
    for f in files:
        if f.endswith(".log"):
            yield f"{f}: a tracked log (results belong in docs/results with their provenance)"


def mode_strings(root, files):
    for f in files:
        if not f.startswith("src/") or f.startswith("src/config/"):
            continue
        for i, line in enumerate((root / f).read_text(errors="replace").splitlines(), 1):
            if MODE_WORDS.search(line):
                yield f"{f}:{i}: a mode compared or quoted as a string outside src/config: {line.strip()[:120]}"


def sources(files):
    return [f for f in files
            if Path(f).suffix in SOURCE_SUFFIXES and not f.startswith("test/") and "/tests/" not in f]


def long_files(root, files):
    for f in sources(files):
        n = len((root / f).read_text(errors="replace").splitlines())
        if n > MAX_FILE_LINES:
            yield f"{f}: {n} lines (at most {MAX_FILE_LINES} outside test/)"


def long_functions(root, files):
    try:
        import lizard
    except ImportError:
        yield "lizard is not installed (scripts/bootstrap.sh installs it): function lengths not checked"
        return
    for f in sources(files):
        text = (root / f).read_text(errors="replace")
        # lizard picks its reader by the name's suffix; CUDA is C++ to it.
        name = f if Path(f).suffix not in {".cu", ".cuh"} else f + ".cpp"
        for fn in lizard.analyze_file.analyze_source_code(name, text).function_list:
            if fn.length > MAX_FUNCTION_LINES:
                yield (f"{f}:{fn.start_line}: {fn.name} is {fn.length} lines "
                       f"(at most {MAX_FUNCTION_LINES} outside test/)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=Path(__file__).resolve().parent.parent, type=Path)
    root = ap.parse_args().root.resolve()
    if not (root / ".git").exists():
        print(f"check_house: {root} is not a git checkout; skipped")
        return 77
    files = [f for f in tracked(root) if (root / f).is_file()]
    breaches = [*outside_references(root, files), *dangling_paths(root, files), *notebook(files), *mode_strings(root, files),
                *long_files(root, files), *long_functions(root, files)]
    for b in breaches:
        print(b)
    print(f"check_house: {len(files)} tracked files, {len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
