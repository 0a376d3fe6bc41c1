"""Issue 22 §8: the report is a web page; every user string in it is text, never markup.

Was: a bundle folder or an offer id holding ``<img src=x onerror=...>`` became a live element in
report.html (reports are shared: stored script injection). The same payload is put in each
user-derived field: bundle folder, experiment and variant ids, offer id, provider, notes, the
unit of work, and every string of a ledger.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpubench_nb.report import economics as costs
from gpubench_nb.report import render as report
from gpubench_nb.report.escape import md_code, md_text
from tests.support.golden import LEDGER, write_bundle

PAYLOAD = "<img src=x onerror=alert(1)>"
LIVE = re.compile(r"<img[^>]*onerror", re.IGNORECASE)


def _poisoned(root: Path) -> Path:
    bundle = write_bundle(root, f"run{PAYLOAD}", gpu=True)
    econ_path = bundle / "economics.json"
    econ = json.loads(econ_path.read_text(encoding="utf-8"))
    econ["note"] = f"note {PAYLOAD}"
    econ["unit_of_work"] = f"unit {PAYLOAD}"
    for offer in econ["offers"]:
        offer["offer_id"] = f"{offer['offer_id']}{PAYLOAD}"
        offer["provider"] = f"provider {PAYLOAD}"
    for variant in econ["variants"]:
        if variant["reason"]:
            variant["reason"] = f"reason {PAYLOAD}"
    econ_path.write_text(json.dumps(econ), encoding="utf-8")
    return bundle


def _ledger(root: Path) -> Path:
    data = json.loads(json.dumps(LEDGER))
    data["machine"]["hostname"] = f"host{PAYLOAD}"
    data["left_out"] = [{"bundle": f"outputs/{PAYLOAD}", "reason": f"reason {PAYLOAD}"}]
    path = root / "ledger.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def rendered(markdown: str) -> str:
    """The HTML nbconvert makes of a Markdown output (raw HTML passes through it)."""
    from nbconvert.filters.markdown import markdown2html

    return markdown2html(markdown)


def test_markdown_helpers_turn_markup_into_text() -> None:
    assert not LIVE.search(rendered(md_text(PAYLOAD)))
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered(md_text(PAYLOAD))
    link = "[click](javascript:alert(1))"
    assert "href" not in rendered(md_text(link)) and "href" not in rendered(md_code(link))
    assert "<h1" not in rendered("- " + md_text("a\n# heading"))  # no new line, no heading
    assert md_code("a`b") == "``a`b``" and md_code("`x`") == "`` `x` ``"
    assert not LIVE.search(rendered(md_code(PAYLOAD)))


def test_every_markdown_section_escapes_user_strings(tmp_path: Path) -> None:
    bundle = _poisoned(tmp_path)
    bundles = report.load_bundles([bundle])
    rows = report.summary_of(bundles)
    texts = [
        report.title_markdown(bundles),
        costs.economics_markdown(bundles),
        costs.break_even_markdown(bundles),
        report.memory_note(rows),
        report.warnings_markdown(rows),
        costs.ledger_markdown(str(_ledger(tmp_path))),
    ]
    for text in texts:
        assert not LIVE.search(rendered(text)), text
    joined = rendered("\n\n".join(texts))
    assert joined.count("&lt;img src=x onerror=alert(1)&gt;") >= 6  # shown, as text


@pytest.mark.slow
def test_report_html_holds_no_live_element_from_user_strings(tmp_path: Path) -> None:
    bundle = _poisoned(tmp_path)
    html = report.render_report(
        [bundle], tmp_path / "report.html", ledger=_ledger(tmp_path)
    ).read_text(encoding="utf-8")
    assert not LIVE.search(html)
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # the text is there, inert
