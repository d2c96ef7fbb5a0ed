"""Every figure of the book gets alt text written from its own titles and axis labels.

A chapter's figure reaches the page as a PNG in a cell's output, which myst-nb renders
as an ``<img>``; unless the cell's metadata gives ``mystnb: image: alt:``, Sphinx then
writes the image's file name (a hash) as its alt text, and a screen reader reads the
hash. ``course_lib.book.setup`` records every figure a chapter shows, with alt text
written from its labels (``course_lib.book.figure_alt``), in the metadata of the output
that holds the PNG (media type ``course_lib.book.MIME``). myst-nb reads only ``width``
and ``height`` from an output's metadata and has no setting for the rest, so this
extension wraps its ``NbElementRenderer.render_image`` for the build's process and
gives the image that alt text. Alt text set in a cell's metadata still wins.
"""

from __future__ import annotations

from typing import Any

__all__ = ["setup", "alt_text"]


def setup(app: Any) -> dict[str, Any]:
    from myst_nb.core.render import NbElementRenderer

    original = NbElementRenderer.render_image
    if not getattr(original, "_measure_first_alt", False):
        NbElementRenderer.render_image = _with_alt(original)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def alt_text(output_metadata: dict[str, Any]) -> str | None:
    """The alt text recorded for a figure's output, or None when it has no record."""
    from course_lib.book import MIME, figure_alt

    labels = output_metadata.get(MIME)
    if not isinstance(labels, dict) or not labels.get("axes"):
        return None
    return labels.get("alt") or figure_alt(labels)


def _with_alt(render_image: Any) -> Any:
    def render_image_with_alt(self: Any, data: Any) -> list[Any]:
        nodes = render_image(self, data)
        text = alt_text(data.output_metadata or {})
        for node in nodes:
            if text and not node.get("alt"):
                node["alt"] = text
        return nodes

    render_image_with_alt._measure_first_alt = True
    return render_image_with_alt
