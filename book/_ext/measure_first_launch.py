"""Launch links for Measure First that sphinx-book-theme 1.3 does not make on its own.

The theme builds Binder and Colab links from the repository settings in ``_config.yml``
and offers the executed notebook as a ``.ipynb`` download. Two things are missing:

* **Codespaces.** The theme has no Codespaces provider, so this extension adds an
  "Open in Codespaces" entry to the page's launch menu.
* **Colab.** Colab opens ``.ipynb`` files from GitHub only, and the chapters are
  MyST markdown. The theme would link Colab to the ``.md`` source, which Colab cannot
  read. The book workflow publishes the built site, executed notebooks included
  (``_sources/<page>.ipynb``), on the ``gh-pages`` branch, so the Colab link points
  there instead.

* **One repository URL.** ``repository.url`` in ``_config.yml`` is the one place that
  names the public repository (the one ``course student-repo --url`` writes): the
  substitutions ``{{ repo }}`` and ``{{ graded_week1 }}`` ... (a link to each graded
  notebook in ``assignments/``) are made from it here, so no chapter or setting repeats it.

A notebook opened in Colab, or downloaded and run in a fresh environment, has no
``course_lib``; the downloadable copy therefore gets one first cell that installs it
from the repository when it is missing (and does nothing where it is installed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

__all__ = ["setup", "repository_substitutions"]

SETUP_TAG = "measure-first-setup"


def setup(app: Any) -> dict[str, Any]:
    app.add_config_value("measure_first_notebooks_branch", "gh-pages", "html")
    # before myst reads its settings (builder-inited)
    app.connect("config-inited", _add_substitutions)
    # 502: after sphinx-book-theme's launch and download buttons (priority 501), which
    # copy the executed notebook into _sources and build the theme's own links.
    app.connect("html-page-context", _add_launch_links, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def _add_launch_links(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    group = _launch_group(context)
    if group is None:  # not a notebook page
        return
    options = app.config.html_theme_options
    org, repo = _org_repo(options.get("repository_url", ""))
    if org is None:
        return
    branch = options.get("repository_branch") or "main"
    group["buttons"].insert(
        0,
        {
            "type": "link",
            "text": "Codespaces",
            "tooltip": "Open the course repository in GitHub Codespaces",
            "icon": "fab fa-github",
            "url": f"https://codespaces.new/{org}/{repo}/tree/{branch}?quickstart=1",
            "label": "codespaces-button",
        },
    )
    ipynb = context.get("ipynb_source")  # set by the theme for markdown notebooks
    if not ipynb:
        return
    pages_branch = app.config.measure_first_notebooks_branch
    for button in group["buttons"]:
        if button.get("text") == "Colab":
            colab = options.get("launch_buttons", {}).get("colab_url", "").rstrip("/")
            button["url"] = f"{colab}/github/{org}/{repo}/blob/{pages_branch}/_sources/{ipynb}"
    _prepare_download(app, Path(app.outdir) / "_sources" / ipynb,
                      f"git+https://github.com/{org}/{repo}@{branch}")


def repository_substitutions(url: str, branch: str, assignments: list[str]) -> dict[str, str]:
    """MyST substitutions that link to the repository and to each graded notebook in it.

    Examples
    --------
    >>> subs = repository_substitutions("https://github.com/org/pub", "main", ["week1"])
    >>> subs["graded_week1"]
    '[`assignments/week1/week1.ipynb`](https://github.com/org/pub/blob/main/assignments/week1/week1.ipynb)'
    """
    url = url.rstrip("/")
    subs = {"repo": url}
    for name in assignments:
        path = f"assignments/{name}/{name}.ipynb"
        subs[f"graded_{name}"] = f"[`{path}`]({url}/blob/{branch}/{path})"
    return subs


def _add_substitutions(app: Any, config: Any) -> None:
    options = config.html_theme_options or {}
    url = options.get("repository_url", "")
    if not url:
        return
    folder = Path(app.srcdir) / "assignments"
    names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    made = repository_substitutions(url, options.get("repository_branch") or "main", names)
    # a substitution written in _config.yml wins over the one made here
    config.myst_substitutions = {**made, **(config.myst_substitutions or {})}


def _launch_group(context: dict) -> dict | None:
    for button in context.get("header_buttons", []):
        if button.get("label") == "launch-buttons":
            return button
    return None


def _org_repo(url: str) -> tuple[str | None, str | None]:
    if "github.com/" not in url:
        return None, None
    parts = url.rstrip("/").split("github.com/")[-1].split("/")
    return (parts[0], parts[1]) if len(parts) >= 2 else (None, None)


def _prepare_download(app: Any, path: Path, requirement: str) -> None:
    if not path.exists():
        return
    nb = _with_cached_outputs(app, nbformat.read(path, as_version=4))
    if not any(SETUP_TAG in cell.get("metadata", {}).get("tags", []) for cell in nb.cells):
        nb.cells.insert(0, _setup_cell(requirement))
    nbformat.write(nb, path)


def _with_cached_outputs(app: Any, nb: Any) -> Any:
    """The notebook with its executed outputs, also when they came from the cache.

    MyST-NB 1.4 writes the *unexecuted* notebook to jupyter_execute/ when a page's
    outputs come from the execution cache (it saves the notebook it parsed, not the
    one merged with the cache), and sphinx-book-theme offers that file for download.
    Merge the cached outputs back in, so the download and Colab get what the page shows.
    """
    if any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"):
        return nb
    cache_path = getattr(getattr(app.env, "mystnb_config", None), "execution_cache_path", "")
    if not cache_path:
        return nb
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(cache_path).merge_match_into_notebook(nb)
    except KeyError:  # not in the cache (execution off, or excluded): keep it as it is
        return nb
    return merged


def _setup_cell(requirement: str) -> Any:
    code = (
        "# Hosted notebooks (Colab, a fresh kernel) start without course_lib: install it\n"
        "# from the course repository when it is missing. Does nothing where it is installed.\n"
        "import importlib.util, subprocess, sys\n"
        'if importlib.util.find_spec("course_lib") is None:\n'
        f'    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "{requirement}"], check=True)'
    )
    return nbformat.v4.new_code_cell(code, metadata={"tags": [SETUP_TAG]})
