"""calcul-forfaits: a whole package total, and a cost per accepted corpus only if measured (R5)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict
from typing import NoReturn

from gpubench_nb import formats
from gpubench_nb.economics.offers import (
    DURATIONS_DAYS,
    PackageQuote,
    load_offers,
    package_quote,
    resolve_offer,
)
from gpubench_nb.errors import GpubenchError

PROG = "calcul-forfaits"


class _OneLineParser(argparse.ArgumentParser):
    """Bad arguments give one line on stderr and exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _whole(minimum: int, what: str, allowed: tuple[int, ...] = ()) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``minimum`` (one of ``allowed`` when given)."""

    def parse(text: str) -> int:
        with suppress(ValueError):
            if int(text) >= minimum and (not allowed or int(text) in allowed):
                return int(text)
        choices = ", ".join(map(str, allowed))
        valid = f"one of {choices}" if allowed else f"a whole number >= {minimum}"
        raise argparse.ArgumentTypeError(f"must be {valid} ({what}), got {text!r}")

    return parse


def build_parser() -> argparse.ArgumentParser:
    days = _whole(1, "whole packages, R5.1", DURATIONS_DAYS)
    parser = _OneLineParser(
        prog=PROG,
        description=(
            "Price a whole 3-, 7- or 30-day rental package times its lots (R5.1, R5.2), and the "
            "cost per accepted corpus only when a measured count is given (R5.3, R5.5). "
            "Nothing is extrapolated."
        ),
    )
    parser.add_argument("--offers", required=True, help="offers table, e.g. parameters/offers.yaml")
    parser.add_argument("--offer", required=True, help="offer id (or its unique prefix, e.g. b200)")
    parser.add_argument("--days", required=True, type=days, help="package length: 3, 7 or 30")
    billed = parser.add_mutually_exclusive_group(required=True)
    billed.add_argument("--lots", type=_whole(1, "billed lots, R5.1"), help="billed lots")
    billed.add_argument(
        "--gpus",
        type=_whole(1, "GPUs needed; lots = ceil(GPUs / GPUs per lot), R5.2"),
        help="GPUs needed instead of lots: lots = ceil(GPUs / GPUs per lot)",
    )
    parser.add_argument(
        "--accepted-results",
        type=_whole(0, "distinct corpora accepted in the period, R5.3; omit if not measured, R5.5"),
        default=None,
        help="distinct corpora actually accepted within the package period (R5.3); leave out "
        "when none was measured: only the package total is computed (R5.5)",
    )
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table")
    return parser


def format_quote(quote: PackageQuote, fmt: str) -> str:
    """The quote as a two-column table, a one-row CSV, or JSON; empty cost stays empty (R4.3)."""
    data = asdict(quote)
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(data), lineterminator="\n")
        writer.writeheader()
        writer.writerow({k: "" if v is None else v for k, v in data.items()})
        return buffer.getvalue()
    mark = quote.placeholder
    yes = "yes: invented example prices, not a quote (see note for how to enter a real quote)"
    shown = dict(data, placeholder=yes if mark else "no")
    for key in ("package_total_usd_minor", "cost_per_accepted_usd_minor"):
        cents = data[key]
        shown[key] = f"{cents} ({formats.price(cents, placeholder=mark)})"
        if cents is None:  # no measured count: the cost stays empty (R5.5)
            shown[key] = "(empty: no measured accepted result, R5.5)"
    if quote.accepted_results is None:
        shown["accepted_results"] = "(not given)"
    width = max(map(len, shown))
    return "".join(f"{key:<{width}}  {value}\n" for key, value in shown.items())


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, price, print. Returns the exit status (2 for unusable input)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help (0) and on bad arguments (2)
        return int(exc.code or 0)
    argument = "--offers"  # the argument an error is reported under
    try:
        offers = load_offers(args.offers)
        argument = "--offer"
        offer = resolve_offer(offers, args.offer, args.offers)
        argument = "--days/--lots/--gpus/--accepted-results"  # checked again, naming the rule
        quote = package_quote(
            offer, args.days, lots=args.lots, gpus=args.gpus, accepted_results=args.accepted_results
        )
    except GpubenchError as exc:
        message = " ".join(str(exc).split())  # one line, whatever the library wrote
        print(f"{PROG}: error: argument {argument}: {message}", file=sys.stderr)
        return exc.exit_code
    try:
        sys.stdout.write(format_quote(quote, args.format))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`calcul-forfaits ... | head -0`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # else Python reports it again at exit
        os.close(devnull)
        print(f"{PROG}: output stopped: standard output was closed by the reader", file=sys.stderr)
        return 141  # 128 + SIGPIPE, as a shell reports it
    return 0


if __name__ == "__main__":
    sys.exit(main())
