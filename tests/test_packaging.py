"""The wheel maps kernels/ and data_tools/ into the fastcep namespace and nothing else."""

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest
from envs import parent_site_packages

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    pytest.importorskip("setuptools")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (whl,) = out.glob("fastcep-*.whl")
    return whl


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"fastcep"}
    # every module of the tree, its folders included (a subpackage missing from pyproject.toml's
    # list would be left out of the wheel)
    root = pathlib.Path(__file__).resolve().parents[1]
    for folder, prefix in (
        ("fastcep", "fastcep"),
        ("kernels", "fastcep/kernels"),
        ("data_tools", "fastcep/data_tools"),
    ):
        for path in (root / folder).rglob("*.py"):
            rel = path.relative_to(root / folder).as_posix()
            if folder == "fastcep" and rel.split("/")[0] in ("kernels", "data_tools"):
                continue
            assert f"{prefix}/{rel}" in names, rel
    assert "fastcep/kernels/glm/probit.py" in names
    assert not any(n.startswith(("tests/", "bench/", "kernels/", "data_tools/")) for n in names)


def test_wheel_imports_in_a_fresh_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, capture_output=True
    )
    # dependencies (numpy, numba, ...) come from this interpreter's site-packages through
    # PYTHONPATH, which does not run .pth files, so an editable install of fastcep stays invisible
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(parent_site_packages()))
    code = (
        "import importlib.util, fastcep, fastcep.kernels, fastcep.data_tools;"
        "assert 'venv' in fastcep.__file__, fastcep.__file__;"
        "assert importlib.util.find_spec('kernels') is None;"
        "assert importlib.util.find_spec('data_tools') is None;"
        "print(fastcep.kernels.glm.probit.__name__)"
    )
    out = subprocess.run([str(py), "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "fastcep.kernels.glm.probit"


def test_kernel_caches_are_keyed_by_every_kernel_source(tmp_path):
    """numba re-validates a cache against its own file only: a changed leaf of another module
    must lead to another cache folder, and the older folders are removed."""
    from fastcep.kernels._cache import cache_folder, drop_stale_caches

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.py").write_text("x = 1\n")
    tree, first = cache_folder(src, root=tmp_path / "cache")
    assert cache_folder(src, root=tmp_path / "cache") == (tree, first)  # unchanged: the same
    first.mkdir(parents=True)
    (first / "a.f-1.py311.nbi").write_bytes(b"index")
    (src / "sub" / "b.py").write_text("y = 2\n")  # another module changed
    tree2, second = cache_folder(src, root=tmp_path / "cache")
    assert tree2 == tree and second != first
    second.mkdir()
    assert drop_stale_caches(tree, second) == 1
    assert not first.exists() and second.exists()
    # another checkout of the same sources does not share the folders
    other = tmp_path / "other"
    shutil.copytree(src, other)
    assert cache_folder(other, root=tmp_path / "cache")[0] != tree


def test_kernel_caches_are_not_written_beside_the_sources(tmp_path):
    """Caches inside an installed package outlive its uninstall and shadow a later install."""
    code = (  # (one cached leaf compiled into a fresh cache folder)
        "import fastcep.kernels as K; from fastcep.kernels.special import log_ndtr;"
        "assert abs(log_ndtr(0.0) + 0.6931471805599453) < 1e-15;"
        "print(K.CACHE_FOLDER)"
    )
    import fastcep.kernels

    beside = pathlib.Path(fastcep.kernels.__file__).parent
    before = set(beside.rglob("*.nb?"))
    env = dict(os.environ, FASTCEP_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    folder = pathlib.Path(out.stdout.strip())
    assert folder.is_relative_to(tmp_path / "cache")
    assert list(folder.rglob("*.nbi")) and list(folder.rglob("*.nbc"))
    assert set(beside.rglob("*.nb?")) <= before
