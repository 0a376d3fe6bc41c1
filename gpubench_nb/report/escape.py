"""User text in the report's Markdown, shown as characters, never markup (nbconvert allows raw
HTML)."""

from __future__ import annotations

import html
import re
from typing import Any

# Markdown punctuation that could make a link (``[x](javascript:...)``), code or emphasis; `<`
# and `&` are HTML-escaped first, so raw HTML and autolinks cannot form either.
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]])")


def md_text(value: Any) -> str:
    """``value`` as literal text in Markdown: HTML escaped, link, code and emphasis punctuation
    backslashed, line breaks folded (a newline could start a heading or end a list item)."""
    text = html.escape(" ".join(str(value).split()), quote=False)
    return _MARKDOWN_SPECIALS.sub(r"\\\1", text)


def md_code(value: Any) -> str:
    """``value`` as an inline code span, its fence longer than any run of backticks inside."""
    text = " ".join(str(value).split())
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"
