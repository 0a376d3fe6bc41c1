"""Numbers in human form (gpubench_nb.formats): worked examples, and never e-notation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpubench_nb import formats


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (30420.7, 3, "30,421"),  # the throughput the issue saw as 3.042e+04
        (3042.07, 4, "3,042"),
        (304.207, 3, "304"),
        (304.207, 4, "304.2"),
        (30.4207, 3, "30.4"),
        (0.304207, 3, "0.304"),
        (0.0304207, 3, "0.0304"),
        (9.996, 3, "10.0"),  # rounding up adds a digit: one decimal fewer
        (0.305, 4, "0.3050"),
        (1e-9, 3, "0.00000000100"),
        (123456789.0, 3, "123,456,789"),
        (0.0, 3, "0"),
        (1000, 3, "1,000"),  # ints keep every digit
        (None, 3, "—"),  # not recorded, never 0 (R4.3)
        (math.nan, 3, "—"),
        (True, 3, "true"),
    ],
)
def test_number(value, digits, expected) -> None:
    assert formats.number(value, digits) == expected


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15))
def test_number_never_writes_scientific_notation(value: float) -> None:
    text = formats.number(value, 4)
    assert "e" not in text and "E" not in text
    assert float(text.replace(",", "")) == pytest.approx(value, rel=6e-4, abs=1e-300)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.305, "305 ms"),
        (8.0, "8.00 s"),
        (0.0000123, "12.3 µs"),
        (125.4, "2 min 05 s"),
        (3725.0, "1 h 02 min"),
        (0.0, "0 s"),
        (None, "—"),
    ],
)
def test_seconds(value, expected) -> None:
    assert formats.seconds(value) == expected


def test_seconds_range_is_median_then_min_max() -> None:
    assert formats.seconds_range(0.81, 0.79, 0.83) == "810 ms (790 ms – 830 ms)"
    assert formats.seconds_range(8.0, None, None) == "8.00 s"
    assert formats.seconds_range(None, 1.0, 2.0) == "—"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(512, "512 B"), (120 * 2**20, "120 MiB"), (1.5 * 2**30, "1.50 GiB"), (None, "—")],
)
def test_size_bytes(value, expected) -> None:
    assert formats.size_bytes(value) == expected


def test_usd_is_exact_integer_cents() -> None:
    assert formats.usd(123456) == "USD 1,234.56"
    assert formats.usd(5) == "USD 0.05"
    assert formats.usd(-250) == "-USD 2.50"
    assert formats.usd(None) == "—"


def test_rate_and_count() -> None:
    assert formats.rate(30420.7) == "30,421 texts/s"
    assert formats.count(1000, "texts") == "1,000 texts"
    assert formats.count(None) == "—"


def test_price_marks_a_placeholder_and_never_an_empty_cell() -> None:
    """Issue 24 §3: an example price is never shown as a bare price."""
    assert formats.price(42_000) == "USD 420.00"
    assert formats.price(42_000, placeholder=True) == "USD 420.00 [PLACEHOLDER, not a quote]"
    assert formats.price(None, placeholder=True) == formats.NOT_RECORDED  # nothing to mark
