"""User text inside the report's Markdown and HTML: shown as text, never as markup.

A report is shared; a bundle folder, an offer id, a provider, a note or a variant id holding
``<img src=x onerror=...>`` must reach the page as those characters, not as an element. Every
string taken from a user's files or folder names goes through one of these before it is put
into Markdown (nbconvert renders Markdown with raw HTML allowed) or into an HTML fragment.
"""

from __future__ import annotations

import html
import re
from typing import Any

# Markdown punctuation that could make a link (``[x](javascript:...)``), code or emphasis; `<`
# and `&` are HTML-escaped first, so raw HTML and autolinks cannot form either.
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]])")


def md_text(value: Any) -> str:
    """``value`` as literal text in Markdown: HTML escaped, the punctuation of links, code and
    emphasis backslashed, line breaks folded into spaces (a newline could start a heading or
    end a list item)."""
    text = " ".join(str(value).split())
    text = html.escape(text, quote=False)
    return _MARKDOWN_SPECIALS.sub(r"\\\1", text)


def md_code(value: Any) -> str:
    """``value`` as an inline code span (a path, an id): HTML cannot escape a code span, and a
    fence longer than any run of backticks inside keeps the span closed."""
    text = " ".join(str(value).split())
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def html_text(value: Any) -> str:
    """``value`` as text inside an HTML element or attribute."""
    return html.escape(str(value), quote=True)


__all__ = ["html_text", "md_code", "md_text"]
