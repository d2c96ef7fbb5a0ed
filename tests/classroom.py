"""GitHub Classroom in miniature for the tests: a bare "GitHub" remote per student, the
student's own clone, and the instructor's clone of it (what ``gh classroom clone`` writes)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["git", "classroom_repo", "push"]


def git(cwd: Path, *args: str, when: str | None = None) -> None:
    """Run git in ``cwd``; ``when`` sets the commit's dates, as a student's machine can."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@uni.example",
           "GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@uni.example"}
    if when:
        env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


def classroom_repo(tmp: Path, subs: Path, name: str) -> Path:
    """Make the repository ``name`` (e.g. ``week1-ada``); return the student's clone.

    A starter commit is pushed, then the instructor's clone is made under ``subs``.
    """
    remote = tmp / "github" / f"{name}.git"
    remote.mkdir(parents=True)
    git(remote, "init", "-q", "--bare", "-b", "main")
    work = tmp / "students" / name
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", str(remote))
    push(work, "README.md", f"{name}\n", "2026-12-01T09:00:00+00:00")
    subs.mkdir(parents=True, exist_ok=True)
    git(subs, "clone", "-q", str(remote), name)
    return work


def push(work: Path, name: str, text: str, when: str) -> None:
    """Write ``text`` to ``work/name``, commit it dated ``when`` and push it."""
    (work / name).parent.mkdir(parents=True, exist_ok=True)
    (work / name).write_text(text, encoding="utf-8")
    git(work, "add", name)
    git(work, "commit", "-qm", f"{name}", when=when)
    git(work, "push", "-q", "origin", "main")
