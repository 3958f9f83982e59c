"""scripts/check_house.py must fail on each house rule broken in a small git repository, and pass
on one that keeps them all."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "check_house.py")


def repo(tmp_path, files):
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    return subprocess.run([sys.executable, SCRIPT, "--root", str(tmp_path)], capture_output=True, text=True)


CLEAN = {"src/a.cpp": "int f() { return 1; }\n", "docs/design.md": "See docs/design.md and src/a.cpp.\n"}


def body(lines):
    return "int g() {\n" + "".join(f"  int v{i} = {i};\n" for i in range(lines)) + "  return 0;\n}\n"


def test_clean_repository_passes(tmp_path):
    r = repo(tmp_path, CLEAN)
    assert r.returncode == 0, r.stdout
    assert "0 breaches" in r.stdout


def test_each_rule_fails(tmp_path):
    cases = {
        "outside": {"README.md": "read ../" + "shared/DES" + "IGN.md\n"},
        "dangling": {"docs/x.md": "see docs/missing.md\n"},
        "notebook": {"docs/run.log": "x\n"},
        "mode string": {"src/b.cpp": 'bool p(const char* m) { return m == std::string("fused"); }\n'},
        "long file": {"src/c.hpp": "int x;\n" * 601},
        "long function": {"src/d.cpp": body(130)},
    }
    for name, files in cases.items():
        d = tmp_path / name.replace(" ", "_")
        r = repo(d, {**CLEAN, **files})
        assert r.returncode == 1, f"{name}: {r.stdout}"
        assert "1 breaches" in r.stdout, f"{name}: {r.stdout}"


def test_mode_words_allowed_in_config(tmp_path):
    r = repo(tmp_path, {**CLEAN, "src/config/config.cpp": 'const char* names[] = {"none", "pre", "post", "fused"};\n'})
    assert r.returncode == 0, r.stdout
