"""spack.yaml (which Spack cannot run here): valid YAML, an environment with every dependency
of pnp, and the CUDA packages built for cuda_arch 80 (A100) and 90 (H100/H200)."""
import ast
import re
from pathlib import Path

import pytest
import yaml

SPACK_YAML = Path(__file__).resolve().parents[2] / "spack.yaml"


@pytest.fixture(scope="module")
def env():
    return yaml.safe_load(SPACK_YAML.read_text())["spack"]


def definitions(env, environ):
    """Expand the named spec lists as Spack does, for an environment `environ`."""
    out = {}
    for d in env["definitions"]:
        when = d.get("when")
        if when is not None and not eval(compile(ast.parse(when, mode="eval"), "when", "eval"),
                                         {"__builtins__": {}}, {"env": environ}):
            continue
        for name, specs in d.items():
            if name != "when":
                out.setdefault(name, []).extend(specs)
    return out


def expand(env, environ):
    """The environment's root specs, with $lists and matrices expanded."""
    defs = definitions(env, environ)
    specs = []

    def sub(item):
        return defs[item[1:]] if item.startswith("$") else [item]

    for item in env["specs"]:
        if isinstance(item, dict):
            rows = [[]]
            for dim in item["matrix"]:
                values = [v for x in dim for v in sub(x)]
                rows = [r + [v] for r in rows for v in values]
            specs.extend(" ".join(r) for r in rows)
        else:
            specs.extend(sub(item))
    return specs


def names(specs):
    return {re.match(r"[\w-]+", s).group(0): s for s in specs}


@pytest.mark.parametrize("arch,expected", [("80", "cuda_arch=80"), ("90", "cuda_arch=90"),
                                           ("", "cuda_arch=80,90")])
def test_every_dependency_with_its_variants(env, arch, expected):
    specs = names(expand(env, {"PNP_CUDA_ARCH": arch} if arch else {}))
    for pkg in ("openmpi", "cuda", "nccl", "hdf5", "py-torch", "tomlplusplus", "boost",
                "doctest", "cmake", "python", "py-h5py", "py-matplotlib", "py-pytest", "py-pyyaml"):
        assert pkg in specs, pkg
    assert "+mpi" in specs["hdf5"].split()
    assert "+program_options" in specs["boost"].split()
    torch = specs["py-torch"].split()
    assert "+cuda" in torch and "+nccl" in torch and "py-torch@2.11.0" in torch  # the pinned torch
    assert "+cuda" in specs["openmpi"].split()
    for pkg in ("openmpi", "nccl", "py-torch"):
        assert expected in specs[pkg].split(), pkg
    assert not any("cuda_arch" in specs[p] for p in ("hdf5", "boost", "cmake"))


def test_both_architectures_are_in_the_file(env):
    text = SPACK_YAML.read_text()
    assert "cuda_arch=80" in text and "cuda_arch=90" in text


def test_environment_settings(env):
    assert env["concretizer"]["unify"] is True
    assert env["view"] is True
    assert env["packages"]["mpi"]["require"] == ["openmpi"]
    assert set(env) <= {"definitions", "specs", "packages", "concretizer", "view", "config",
                        "include", "modules", "mirrors", "repos", "compilers"}


def test_every_spec_is_a_string(env):
    # An unquoted `pkg@1.2: +variant` is a YAML mapping, not a spec: Spack would reject it.
    for d in env["definitions"]:
        for name, specs in d.items():
            if name != "when":
                assert all(isinstance(s, str) for s in specs), (name, specs)
    for item in env["specs"]:
        assert isinstance(item, str) or all(isinstance(x, str) for dim in item["matrix"] for x in dim)
