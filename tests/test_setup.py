"""Tests for the set-up a newcomer relies on: pyproject, lock file, Makefile, CI, Codespaces, README."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


# --- pyproject.toml and requirements.lock -------------------------------------------------


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def lock() -> dict[str, Version]:
    return _read_lock(ROOT / "requirements.lock")


def _requirements(project: dict) -> list[Requirement]:
    declared = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        declared += extra
    return [Requirement(r) for r in declared]


def test_pyproject_names_the_package_and_python(project):
    assert project["name"] == "course_lib"
    python = SpecifierSet(project["requires-python"])
    assert "3.11" in python and "3.12" in python
    assert "3.10" not in python


def test_jupyter_book_is_held_below_2(project):
    (book,) = [r for r in _requirements(project) if canonicalize_name(r.name) == "jupyter-book"]
    assert "2.0" not in book.specifier and "1.0.4" in book.specifier


def test_every_dependency_has_a_lower_bound(project):
    for req in _requirements(project):
        assert any(s.operator in (">=", "==", "~=") for s in req.specifier), f"{req} has no lower bound"


def test_every_declared_dependency_is_pinned_in_the_lock(project, lock):
    for req in _requirements(project):
        name = canonicalize_name(req.name)
        assert name in lock, f"{req.name} is declared in pyproject.toml but not pinned in requirements.lock"
        assert req.specifier.contains(lock[name], prereleases=True), (
            f"requirements.lock pins {req.name}=={lock[name]}, outside pyproject's {req.specifier}"
        )


def test_extras_of_declared_dependencies_are_pinned_too(project, lock):
    # dask[distributed] pulls in more packages; a lock that forgets them is not reproducible
    for req in _requirements(project):
        for extra in req.extras:
            needed = [
                Requirement(r)
                for r in importlib.metadata.requires(req.name) or []
                if Requirement(r).marker is not None and Requirement(r).marker.evaluate({"extra": extra})
            ]
            assert needed, f"{req.name}[{extra}] declares no packages"
            for sub in needed:
                assert canonicalize_name(sub.name) in lock, f"{sub.name} (from {req}) is not in requirements.lock"


def test_the_lock_pins_exact_versions_and_jupyterlab(lock):
    assert "jupyterlab" in lock, "Codespaces opens JupyterLab from the course environment"
    text = (ROOT / "requirements.lock").read_text()
    for line in _lock_lines(text):
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+\-]+", line), f"not an exact pin: {line!r}"


def test_this_environment_is_the_locked_one(lock):
    # make test runs in .venv, built from the lock: a different version here means a stale venv
    wrong = {}
    for name, pinned in lock.items():
        try:
            installed = Version(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            wrong[name] = "missing"
            continue
        if installed != pinned:
            wrong[name] = f"{installed} installed, {pinned} locked"
    assert not wrong, f"environment differs from requirements.lock (run `make venv`): {wrong}"


def test_py_spy_runs_from_beside_this_python():
    # Week 4 looks for the program there: the book's kernel runs the venv's Python
    # without the venv's bin folder on PATH (make book does not activate it).
    program = Path(sys.executable).with_name("py-spy")
    assert program.is_file(), f"no py-spy beside {sys.executable} (run `make venv`)"
    done = subprocess.run([str(program), "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("py-spy"), done


# --- Makefile -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def makefile() -> dict:
    return _parse_makefile((ROOT / "Makefile").read_text())


def test_demo_and_test_depend_on_the_venv_stamp(makefile):
    rules = makefile["rules"]
    (stamp,) = rules["venv"]["prereqs"]
    assert stamp.startswith(".venv/")
    assert stamp in rules["demo"]["prereqs"] and stamp in rules["test"]["prereqs"]
    # the stamp is stale when either file that defines the environment changes
    assert {"pyproject.toml", "requirements.lock"} <= set(rules[stamp]["prereqs"])
    recipe = "\n".join(rules[stamp]["recipe"])
    assert "pip install -q -r requirements.lock" in recipe
    assert recipe.rstrip().endswith(f"touch {stamp}"), "the stamp is written only after a full install"


def test_demo_and_test_run_the_right_command(makefile):
    rules = makefile["rules"]
    # the demo starts with the library's ETL demo; later steps (grading, book) follow it
    assert rules["demo"]["recipe"][0] == ".venv/bin/python -m course_lib.demo"
    # two pytest-xdist workers, whole groups each (tests/conftest.py); TEST_WORKERS=0: one process
    assert rules["test"]["recipe"] == [".venv/bin/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder"]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_itself_installs_before_demo_and_test():
    def dry_run(target: str) -> list[str]:
        # -n prints without running; -B pretends the stamp is stale. Drop the variables an
        # outer make (as in `make test`) passes down, so this make is not a sub-make.
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
        out = subprocess.run(
            ["make", "--no-print-directory", "-n", "-B", target],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True,
        )
        return out.stdout.splitlines()

    install = dry_run("venv")
    assert any("-r requirements.lock" in line for line in install)
    demo = dry_run("demo")
    assert demo[: len(install) + 1] == install + [".venv/bin/python -m course_lib.demo"]
    assert dry_run("test") == install + [".venv/bin/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder"]


# --- .ci/run ---------------------------------------------------------------------------------


def test_ci_script_is_executable_and_runs_make_test():
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK), ".ci/run must be executable (git update-index --chmod=+x)"
    commands = [line.strip() for line in script.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "make test" in commands


@pytest.mark.parametrize("status", [0, 3])
def test_ci_script_exits_with_the_status_of_make_test(tmp_path, status):
    # a stand-in `make` first on PATH records its arguments and fails on request
    fake = tmp_path / "make"
    fake.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/args"\nexit {status}\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True)
    assert done.returncode == status
    assert (tmp_path / "args").read_text().split() == ["test"]


# --- Codespaces -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def devcontainer() -> dict:
    # plain JSON on purpose (no comments), so any tool can read it
    return json.loads((ROOT / ".devcontainer" / "devcontainer.json").read_text())


def test_devcontainer_uses_python_3_11(devcontainer):
    assert re.search(r"python:3\.11(\b|-)", devcontainer["image"]), devcontainer["image"]


def test_devcontainer_has_the_python_and_jupyter_extensions(devcontainer):
    extensions = devcontainer["customizations"]["vscode"]["extensions"]
    assert {"ms-python.python", "ms-toolsai.jupyter"} <= set(extensions)


def test_devcontainer_installs_through_make_in_a_prebuild_step(devcontainer, makefile):
    # updateContentCommand is what a Codespaces prebuild runs; postCreateCommand is not
    assert devcontainer["updateContentCommand"] == "make venv"
    assert "postCreateCommand" not in devcontainer and "postAttachCommand" not in devcontainer
    assert "venv" in makefile["rules"]
    interpreter = devcontainer["customizations"]["vscode"]["settings"]["python.defaultInterpreterPath"]
    assert interpreter.endswith("/.venv/bin/python"), "VS Code should use the environment make built"


def test_devcontainer_puts_the_venv_first_on_every_path(devcontainer):
    path = devcontainer["remoteEnv"]["PATH"]
    assert path.startswith("${containerWorkspaceFolder}/.venv/bin:")
    assert path.endswith(":${containerEnv:PATH}"), "the image's own PATH must stay after it"


def test_devcontainer_starts_jupyterlab_once_from_a_script_that_exists(devcontainer):
    command = devcontainer["postStartCommand"].split()
    assert command[0] == "sh" and (ROOT / command[1]).is_file()
    script = (ROOT / command[1]).read_text()
    assert "nohup setsid" in script and "port_retries=0" in script and "kill -0" in script
    assert devcontainer["portsAttributes"]["8888"]["label"] == "JupyterLab"
    assert devcontainer["forwardPorts"] == [8888]


@pytest.mark.parametrize("codespace", [True, False])
def test_jupyterlab_listens_on_loopback_and_needs_a_token_outside_a_codespace(codespace, tmp_path):
    # The script as the devcontainer runs it, with a stand-in `jupyter` that records its
    # arguments: a server on 0.0.0.0 with an empty token let anyone who could reach the
    # port run code as the student.
    root = tmp_path / "repo"
    (root / ".devcontainer").mkdir(parents=True)
    shutil.copy(ROOT / ".devcontainer" / "start-jupyterlab.sh", root / ".devcontainer")
    fake = root / ".venv" / "bin" / "jupyter"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path / 'args'}\n")
    fake.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "JUPYTERLAB_PORT": "8899",
           "JUPYTERLAB_LOG": str(tmp_path / "lab.log"), "JUPYTERLAB_PIDFILE": str(tmp_path / "lab.pid")}
    if codespace:
        env.update(CODESPACES="true", CODESPACE_NAME="octo-lab", GITHUB_CODESPACES_PORT_FORWARDING_DOMAIN="app.github.dev")
    out = subprocess.run(["sh", ".devcontainer/start-jupyterlab.sh"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=30, check=True).stdout
    for _ in range(100):  # the server is started detached: wait for its arguments
        if (tmp_path / "args").is_file() and (tmp_path / "args").read_text().endswith("\n"):
            break
        time.sleep(0.05)
    args = (tmp_path / "args").read_text().splitlines()
    assert "--ip=127.0.0.1" in args and not any("0.0.0.0" in a for a in args)
    token = next(a for a in args if a.startswith("--IdentityProvider.token=")).split("=", 1)[1]
    if codespace:  # GitHub's sign-in guards the privately forwarded port
        assert token == ""
        assert "--ServerApp.local_hostnames=octo-lab-8899.app.github.dev" in args
        assert "--ServerApp.allow_origin=https://octo-lab-8899.app.github.dev" in args
        assert "https://octo-lab-8899.app.github.dev" in out
    else:
        assert re.fullmatch(r"[0-9a-f]{48}", token), token
        assert f"http://127.0.0.1:8899/lab?token={token}" in out
        assert not any("allow_origin" in a or "local_hostnames" in a for a in args)


def test_license_is_an_spdx_expression(project):
    assert project["license"] == "MIT"


# --- README ---------------------------------------------------------------------------------


def test_readme_opens_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"^```[a-z]*\n(.*?)^```", text, flags=re.M | re.S)
    assert first_block, "README has no code block"
    assert first_block.group(1).split("\n")[:-1] == ["make demo", "make test"]
    before = text[: first_block.start()]
    assert "\n## " not in before, "the commands come before any section"
    assert len(before.split()) < 80, "the commands come first, after at most a short introduction"


def test_readme_mentions_what_it_must():
    text = (ROOT / "README.md").read_text()
    for word in ("book", "course_lib", "grading", "Codespaces", "requirements.lock"):
        assert word in text, word


def test_readme_python_examples_run(capsys):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)
    assert blocks, "README shows the library in use"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert "share" in capsys.readouterr().out


# --- helpers ---------------------------------------------------------------------------------


def _lock_lines(text: str) -> list[str]:
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def _read_lock(path: Path) -> dict[str, Version]:
    pins = {}
    for line in _lock_lines(path.read_text()):
        name, _, version = line.partition("==")
        pins[canonicalize_name(name)] = Version(version)
    return pins


def _parse_makefile(text: str) -> dict:
    """Variables and rules of a simple Makefile, with ``$(VAR)`` expanded (enough for ours)."""
    variables: dict[str, str] = {}
    rules: dict[str, dict] = {}
    current: list[str] | None = None

    def expand(value: str) -> str:
        return re.sub(r"\$\((\w+)\)", lambda m: expand(variables.get(m.group(1), "")), value)

    for raw in text.splitlines():
        if raw.startswith("\t") and current is not None:
            current.append(expand(raw.strip().lstrip("@")))
            continue
        line = raw.split("#")[0].rstrip()
        if not line.strip():
            continue
        if m := re.match(r"^(\w+)\s*(?::=|\?=|=)\s*(.*)$", line):
            variables[m.group(1)] = m.group(2).strip()
            current = None
        elif m := re.match(r"^([^:=\s][^:=]*):(?!=)(.*)$", line):
            recipe: list[str] = []
            for target in expand(m.group(1)).split():
                rules[target] = {"prereqs": expand(m.group(2)).split(), "recipe": recipe}
            current = recipe
    return {"variables": variables, "rules": rules}
