"""report.html: 90_report.ipynb executed over the bundles, then exported to one HTML file.

Kept apart from ``report.render`` (what the notebook's cells call) so that the process that
starts the kernel, ``gpubench-nb run`` or ``report``, never imports what only the kernel needs
(matplotlib, the figures; issue 25).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.errors import BundleError
from gpubench_nb.kernel import papermill_module, papermill_options
from gpubench_nb.notebook_files import notebook_path
from gpubench_nb.report.bundles import load_bundles, parse_bundle_dirs
from gpubench_nb.report.economics import ledger_markdown

NOTEBOOK_NAME = "90_report.ipynb"
# nbconvert's lab template loads require.js, MathJax and Mermaid from a CDN; the report needs
# none of them, and a file forwarded by e-mail or opened offline must not fetch anything.
_SELF_CONTAINED = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block data_png scoped -%}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
 alt="{{ (cell | get_metadata('alt')) or 'a figure of this report' | escape_html }}">
</div>
{%- endblock data_png -%}
"""  # the lab template has no alt text; each figure cell carries its own in metadata "alt"


def render_report(
    bundle_dirs: Sequence[str | os.PathLike[str]],
    out_html: str | os.PathLike[str],
    *,
    allow_mismatch: bool = False,
    ledger: str | os.PathLike[str] | None = None,
) -> Path:
    """Execute 90_report.ipynb over ``bundle_dirs`` and write a self-contained HTML file.

    The executed notebook is kept beside the HTML, in ``notebooks/`` (R5.6). Unlike bundles
    are refused before any kernel starts (R2.1).
    """
    papermill = papermill_module()  # without an unused 1 s grammar (issue 25)
    dirs = [str(Path(d).resolve()) for d in parse_bundle_dirs(bundle_dirs)]
    load_bundles(dirs, allow_mismatch=allow_mismatch)
    ledger_path = str(Path(ledger).resolve()) if ledger is not None else ""
    if ledger_path:
        ledger_markdown(ledger_path)  # an unusable ledger is refused before any kernel starts
    out_html = Path(out_html).resolve()
    name = (
        "90_report.ipynb" if out_html.name == "report.html" else f"90_report-{out_html.stem}.ipynb"
    )
    executed = out_html.parent / "notebooks" / name
    executed.parent.mkdir(parents=True, exist_ok=True)
    partial = executed.with_name(f".{executed.stem}.partial.ipynb")
    try:
        notebook = papermill.execute_notebook(
            str(notebook_path(NOTEBOOK_NAME)),
            str(partial),
            parameters={
                "bundle_dirs": dirs,
                "allow_mismatch": bool(allow_mismatch),
                "ledger": ledger_path,
            },
            kernel_name="python3",
            cwd=str(Path.cwd()),  # never the installed package's folder (issue 21)
            progress_bar=False,
            log_output=False,
            # Written once, when done (or failed): saving the growing notebook after each of
            # its ~35 cells cost ~0.6 s of JSON for a file nobody reads until then (issue 25).
            request_save_on_cell_execute=False,
            **papermill_options(),  # IPC transport: no TCP warning from ipykernel (issue 16)
        )
        os.replace(partial, executed)
    except papermill.PapermillExecutionError as exc:
        os.replace(partial, executed)  # keep the failed notebook for the reader, then raise
        raise BundleError(
            f"{NOTEBOOK_NAME} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}; "
            f"the executed notebook is kept at {executed}; no report.html was written"
        ) from None
    finally:
        partial.unlink(missing_ok=True)  # a kernel that never started leaves no stray file
    write_text_atomic(out_html, _html(notebook))
    return out_html


def _html(notebook: object) -> str:
    """The executed notebook (papermill's own, already in memory: not read back) as one
    self-contained HTML page: no code, no prompts, images embedded."""
    import jinja2
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"gpubench_report.html.j2": _SELF_CONTAINED})],
        template_file="gpubench_report.html.j2",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        embed_images=True,
    )
    html, _ = exporter.from_notebook_node(
        notebook, resources={"metadata": {"name": "gpubench-nb report"}}
    )
    return html
