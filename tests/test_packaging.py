"""The wheel maps kernels/ and data_tools/ into the fastcep namespace and nothing else."""

import os
import pathlib
import subprocess
import sys
import sysconfig
import zipfile

import pytest

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
    env = dict(os.environ, PYTHONPATH=sysconfig.get_paths()["purelib"])
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


def test_stale_kernel_caches_are_dropped_when_a_source_changes(tmp_path):
    """numba re-validates a cache against its own file only: a changed leaf must drop them all."""
    from fastcep.kernels import drop_stale_caches

    (tmp_path / "a.py").write_text("x = 1\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    (cache / "a.f-1.py311.nbi").write_bytes(b"index")
    (cache / "a.f-1.py311.1.nbc").write_bytes(b"code")
    assert drop_stale_caches(tmp_path)  # no stamp yet: dropped, stamped
    assert not list(cache.glob("*.nb?"))
    (cache / "a.f-1.py311.nbi").write_bytes(b"index")
    assert not drop_stale_caches(tmp_path)  # sources unchanged: kept
    assert (cache / "a.f-1.py311.nbi").exists()
    (tmp_path / "b.py").write_text("y = 2\n")  # another module changed
    assert drop_stale_caches(tmp_path)
    assert not (cache / "a.f-1.py311.nbi").exists()
