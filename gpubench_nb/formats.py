"""Numbers in human form: thousands separators, 3-4 significant digits, units, no e-notation."""

from __future__ import annotations

import math
from decimal import Decimal

NOT_RECORDED = "—"  # an empty cell is shown as a dash, never as 0 or NaN (R4.3)
# How a price from an offer marked ``placeholder: true`` is shown, everywhere.
PLACEHOLDER_MARK = "PLACEHOLDER, not a quote"


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: float | int | None, digits: int = 3) -> str:
    """``digits`` significant digits, thousands separators, never scientific notation; every
    integer digit kept (30,421, not 3.04e+04: the raw CSV shows them)."""
    if _missing(value):
        return NOT_RECORDED
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    value = float(value)
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value == 0:
        return "0"
    if abs(value) >= 10 ** (digits - 1):
        return f"{round(value):,}"
    exponent = math.floor(math.log10(abs(value)))
    decimals = digits - 1 - exponent
    rounded = round(value, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > exponent:  # 9.996 -> 10.0
        decimals = max(decimals - 1, 0)
    return format(Decimal(repr(round(value, decimals))), f",.{max(decimals, 0)}f")


def count(value: int | None, unit: str = "") -> str:
    """A whole count with separators and an optional unit: ``1,000 texts``."""
    if _missing(value):
        return NOT_RECORDED
    text = f"{int(value):,}"
    return f"{text} {unit}" if unit else text


def seconds(value: float | None) -> str:
    """A duration: ``305 ms``, ``8.00 s``, ``2 min 05 s``, ``1 h 02 min``; 3 significant digits."""
    if _missing(value):
        return NOT_RECORDED
    value = float(value)
    if value < 0:
        return f"-{seconds(-value)}"
    if value == 0:
        return "0 s"
    if value < 1e-3:
        return f"{number(value * 1e6)} µs"
    if value < 1:
        return f"{number(value * 1e3)} ms"
    if value < 60:
        return f"{number(value)} s"
    whole = round(value)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    minutes = round(value / 60)
    return f"{minutes // 60:,} h {minutes % 60:02d} min"


def seconds_range(median: float | None, low: float | None, high: float | None) -> str:
    """``0.810 s (0.790–0.830 s)``: the median and its min–max range (R3.5)."""
    if _missing(median):
        return NOT_RECORDED
    if _missing(low) or _missing(high):
        return seconds(median)
    return f"{seconds(median)} ({seconds(low)} – {seconds(high)})"


_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size_bytes(value: int | float | None) -> str:
    """Memory in binary units: ``512 B``, ``120 MiB``, ``1.50 GiB`` (2^10 steps)."""
    if _missing(value):
        return NOT_RECORDED
    value, unit = float(value), 0
    while abs(value) >= 1024 and unit < len(_BINARY_UNITS) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{int(value):,} B"
    return f"{number(value)} {_BINARY_UNITS[unit]}"


def rate(value: float | None, unit: str = "texts/s") -> str:
    """A throughput with its unit: ``30,421 texts/s``, ``12.3 texts/s``."""
    if _missing(value):
        return NOT_RECORDED
    return f"{number(value)} {unit}"


def usd(cents: int | None) -> str:
    """Integer US cents as dollars, exactly, without floats (R4.2): ``USD 1,234.56``."""
    if _missing(cents):
        return NOT_RECORDED
    cents = int(cents)
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    return f"{sign}USD {whole:,}.{part:02d}"


def price(cents: int | None, *, placeholder: bool = False) -> str:
    """A price: ``USD 420.00``, or ``USD 420.00 [PLACEHOLDER, not a quote]`` when the offer
    declares its prices invented examples: never shown as a bare price."""
    text = usd(cents)
    return f"{text} [{PLACEHOLDER_MARK}]" if placeholder and not _missing(cents) else text
