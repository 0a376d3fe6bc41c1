"""The rental offers table and whole-package quotes, in integer cents (R5.1-R5.3, R5.5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpubench_nb.errors import EconomicsError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.records import Record, key
from gpubench_nb.protocol.yamlio import read_yaml

# R5.1: only whole packages of these lengths are priced; nothing is prorated between them.
DURATIONS_DAYS: tuple[int, ...] = (3, 7, 30)
ROUNDING_RULE = (
    "cost per accepted corpus = package total / accepted results, rounded to the nearest cent "
    "with exact halves rounded up, in integer arithmetic: (2 * total + n) // (2 * n)"
)

# The demo's own offer: written for the machine a bundle ran on, with invented prices (USD 15,
# 30, 90), when pricing.offer names it; attributed by the one rule like any other offer.
MACHINE_OFFER_ID = "this-machine-example"
_MACHINE_PRICES = {3: 1500, 7: 3000, 30: 9000}
MACHINE_OFFER_ORIGIN = (
    "written by gpubench-nb, with invented prices, for the machine a bundle ran on (an "
    "experiment's pricing.offer), in no offers table; to price a real package, name an offer "
    "of your offers table that holds the provider's quote"
)
_DAYS = ", ".join(map(str, DURATIONS_DAYS))
REAL_QUOTE_HOWTO = (
    "to enter a real quote, write the provider's whole-package prices in "
    "package_price_usd_minor, say who quoted them and when in provider, and remove "
    "'placeholder: true' from that offer in the offers table"
)


def real_quote_howto(offer_ids: Any) -> str:
    """Where the placeholder prices of ``offer_ids`` come from, and how to get a real cost."""
    table = ", ".join(i for i in offer_ids if i != MACHINE_OFFER_ID)
    said = [f"{table}: from the offers table; {REAL_QUOTE_HOWTO}"] * bool(table)
    said += [f"{MACHINE_OFFER_ID}: {MACHINE_OFFER_ORIGIN}"] * (MACHINE_OFFER_ID in offer_ids)
    return "; ".join(said)


_PRICE = schema.integer(
    "US cents for the whole package of one lot (USD 1,234.56: 123456)",
    rule="R4.2",
    fix=f"give the whole-package price of each of {_DAYS} days in whole US cents >= 1 (write "
    "USD 1,234.56 as 123456; 0 is not a price, R5.1)",
)
_PRICES = {  # exactly 3, 7, 30: text in JSON, integers after yaml.safe_load (jsonschema: both)
    "type": "object", "description": "days -> whole-package price of one lot",
    "properties": {str(d): _PRICE for d in DURATIONS_DAYS}, "additionalProperties": _PRICE,
    "propertyNames": {"enum": [*DURATIONS_DAYS, *map(str, DURATIONS_DAYS)]},
    "minProperties": 3, "maxProperties": 3,
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Offer(Record):
    """One rental offer (R5.1, R5.2)."""

    RULE = "R5.1"
    CLOSED = True
    ERROR = EconomicsError
    FIX = "see the comment at the top of parameters/offers.yaml"
    id: str = key(
        schema.text("what pricing.offer names", pattern=r"^\S(.*\S)?$"),
        why="must be a non-empty string without surrounding spaces",
    )
    provider: str = key(schema.text("who quoted the prices, and when"))
    gpu_model: str = key(  # "" for a CPU-only offer
        schema.text("gpus_per_lot >= 1: e.g. H100 80GB; a cost needs runs on it (R5.7)"), ""
    )
    cpu_model: str | None = key(
        schema.text("gpus_per_lot 0 (CPU-only): the CPU as environment.json names it"), None
    )
    gpus_per_lot: int = key(
        schema.integer("GPUs in one billed lot; 0: CPU-only", minimum=0),
        rule="R5.2",
        fix="the GPUs in one billed lot (2 for a B200 lot, usually 1; 0 for CPU-only hardware "
        "named by cpu_model)",
    )
    # days -> US cents for the whole package of one lot; always exactly the keys 3, 7, 30.
    package_price_usd_minor: Mapping[int, int] = field(hash=False, metadata=_PRICES)
    placeholder: bool = key(
        schema.flag("true: invented example prices, not a quote", default=False),
        fix="write placeholder: true, or remove the field once the prices are a real quote",
    )

    @property
    def hardware(self) -> str:
        """What the offer rents: its GPU model, or ``CPU-only: <cpu_model>``."""
        return self.gpu_model if self.gpus_per_lot else f"CPU-only: {self.cpu_model}"

    def price_usd_minor(self, days: int) -> int:
        """The whole ``days``-day package price of one lot, in cents (R5.1)."""
        if not _is_int(days) or days not in self.package_price_usd_minor:
            raise EconomicsError(
                f"days must be one of {_DAYS} (whole packages), got {days!r}",
                rule="R5.1",
            )
        return self.package_price_usd_minor[days]

    def _checked(self, where: Any) -> Offer:
        """The hardware named as the lot says (R5.2); the prices keyed by whole days."""
        gpus = self.gpus_per_lot
        named, other = ("gpu_model", "cpu_model") if gpus else ("cpu_model", "gpu_model")
        kind = f"gpus_per_lot {gpus}: {'a GPU' if gpus else 'a CPU-only'} offer, named by {named}"
        if other in (self.data or {}):
            where.at(other).fail(
                f"fields 'gpus_per_lot' (got {gpus!r}) and {other!r}: {kind}",
                f"remove {other}, or set gpus_per_lot to match the hardware (0 for CPU-only)",
                rule="R5.2",
            )
        elif not getattr(self, named):
            where.at(named).fail(
                f"missing: {kind} needs {named!r}, the model name as environment.json records it",
                f"write {named}: <the model name as environment.json records it>",
            )
        prices = {int(days): cents for days, cents in self.package_price_usd_minor.items()}
        for days in [d for d in DURATIONS_DAYS if d not in prices]:
            where.at(f"package_price_usd_minor.{days}").fail("missing", _PRICE["fix"])
        return replace(self, package_price_usd_minor={d: prices.get(d) for d in DURATIONS_DAYS})


@dataclass(frozen=True, kw_only=True)
class OffersTable(Record):
    """The offers table (`parameters/offers.yaml`): whole 3-, 7- and 30-day packages (R5.1)."""

    RULE = "R5.1"
    CLOSED = True
    ERROR = EconomicsError
    FIX = Offer.FIX
    offers: tuple[Offer, ...] = key({"minItems": 1, "description": "the offers"})

    def _checked(self, where: Any) -> OffersTable:
        """Every offer its own id (R5.1)."""
        ids = [offer and offer.id for offer in self.offers]
        for index, offer_id in enumerate(ids):
            if offer_id and offer_id in ids[:index]:
                where.at(f"offers[{index}] ({offer_id}).id").fail(
                    f"duplicate id {offer_id!r} (already used by an earlier offer)",
                    "give every offer its own id",
                )
        return self


OFFERS = OffersTable.schema()


def _is_int(value: Any) -> bool:
    # YAML booleans are ints in Python; a price or a GPU count of `true` is a typo, not 1.
    return isinstance(value, int) and not isinstance(value, bool)


def load_offers(path: str | Path) -> dict[str, Offer]:
    """Read and validate an offers table; EconomicsError naming file, offer, key, rule, fix."""
    # The one YAML reader: a price given twice, an alias bomb or a huge file are refused.
    data = read_yaml(path, what="offers table", error=EconomicsError, rule="R5.1")
    return {offer.id: offer for offer in OffersTable.from_dict(data, str(path)).offers}


def machine_offer(gpu_models: tuple[str, ...], gpus: int | None, cpu_model: str | None) -> Offer:
    """The demo's placeholder offer for a bundle's hardware, attributed like any other (R5.7)."""
    provider = (
        "written by gpubench-nb for the machine this bundle ran on (pricing.offer: "
        f"{MACHINE_OFFER_ID}): invented example prices, not a quote"
    )
    model = " + ".join(gpu_models) or "GPU model not recorded"
    return Offer(
        id=MACHINE_OFFER_ID,
        provider=provider,
        gpu_model=model if gpus else "",
        gpus_per_lot=gpus or 0,
        package_price_usd_minor=_MACHINE_PRICES,
        placeholder=True,
        cpu_model=None if gpus else cpu_model or "CPU model not recorded",
    )


def resolve_offer(offers: Mapping[str, Offer], name: str, source: Any = "") -> Offer:
    """The offer with id ``name``, or the only one starting with ``name + '-'`` (``b200``)."""
    if name in offers:
        return offers[name]
    matches = [offer for offer_id, offer in offers.items() if offer_id.startswith(f"{name}-")]
    if len(matches) == 1:
        return matches[0]
    kind = "ambiguous" if matches else "unknown"
    why = f"{kind} offer {name!r}" + (f" in {source}" if source else "")
    if name == MACHINE_OFFER_ID:  # no table holds it
        why = f"{name!r} is not in {source or 'the offers table'}: {MACHINE_OFFER_ORIGIN}"
    raise EconomicsError(f"{why}; valid values: {', '.join(offers)}", rule="R5.1")


@dataclass(frozen=True)
class PackageQuote:
    """The whole-package total for ``lots`` lots, and a cost per result only if measured."""

    offer_id: str
    gpu_model: str
    gpus_per_lot: int
    days: int
    lots: int
    package_total_usd_minor: int
    accepted_results: int | None
    # None when accepted_results is None (not measured, R5.5) or 0 (no accepted result).
    cost_per_accepted_usd_minor: int | None
    rounding_rule: str
    note: str
    placeholder: bool = False  # the offer's prices are invented examples, not a quote


def cost_per_accepted_usd_minor(total_usd_minor: int, accepted_results: int | None) -> int | None:
    """``total / accepted_results`` rounded per ROUNDING_RULE; None for None or 0 (R5.5)."""
    if accepted_results is not None and (not _is_int(accepted_results) or accepted_results < 0):
        raise EconomicsError(
            "accepted_results must be a whole number >= 0 of distinct accepted corpora, or None "
            f"when none was measured (R5.5), got {accepted_results!r}",
            rule="R5.3",
        )
    if not accepted_results:
        return None
    return (2 * total_usd_minor + accepted_results) // (2 * accepted_results)


def package_quote(
    offer: Offer,
    days: int,
    *,
    lots: int | None = None,
    gpus: int | None = None,
    accepted_results: int | None = None,
) -> PackageQuote:
    """Price ``days`` days of ``offer``: whole package × lots (R5.1); lots = ceil(gpus / lot)."""
    if (lots is None) == (gpus is None):
        raise EconomicsError(
            f"give exactly one of lots (billed lots) or gpus (GPUs needed), got lots={lots!r}, "
            f"gpus={gpus!r}",
            rule="R5.1",
        )
    for name, value in (("lots", lots), ("gpus", gpus)):
        if value is not None and (not _is_int(value) or value < 1):
            raise EconomicsError(f"{name} must be a whole number >= 1, got {value!r}", rule="R5.1")
    lots, total, notes = package_terms(offer, days, lots, gpus)
    cost = cost_per_accepted_usd_minor(total, accepted_results)
    if accepted_results is None:
        notes.append(
            "No measured accepted count: only the package total is computed; the cost per "
            "accepted corpus stays empty, never estimated (R5.5)."
        )
    elif accepted_results == 0:
        notes.append("0 accepted corpora: no accepted result, so no cost per result (R5.5, R5.7).")
    else:
        notes.append(
            f"Cost per accepted corpus = {total} / {accepted_results} distinct accepted corpora "
            f"= {cost} cents (nearest cent, halves up; R5.3)."
        )
    if offer.placeholder:
        notes.append(
            f"PLACEHOLDER: {offer.id}'s prices are invented examples, not a quote; "
            f"{real_quote_howto([offer.id])}."
        )
    return PackageQuote(
        offer_id=offer.id,
        gpu_model=offer.gpu_model,
        gpus_per_lot=offer.gpus_per_lot,
        days=days,
        lots=lots,
        package_total_usd_minor=total,
        accepted_results=accepted_results,
        cost_per_accepted_usd_minor=cost,
        rounding_rule=ROUNDING_RULE,
        note=" ".join(notes),
        placeholder=offer.placeholder,
    )


def package_terms(
    offer: Offer, days: int, lots: int | None, gpus: int | None
) -> tuple[int, int, list[str]]:
    """Billed lots, package total in cents, and the sentences that explain them (R5.1, R5.2)."""
    per_lot = offer.gpus_per_lot
    notes = []
    if gpus is not None and not per_lot:
        lots = 1
        notes.append(f"{offer.id} is CPU-only: 1 lot, whatever GPUs are asked for (R5.2).")
    elif gpus is not None:
        lots = -(-gpus // per_lot)  # ceil without floats
        spare = lots * per_lot - gpus
        notes.append(
            f"{gpus} GPU(s) needed -> lots = ceil({gpus} / {per_lot} GPUs per lot) = {lots}"
            + (f", so {spare} billed GPU(s) beyond the need" if spare else "")
            + " (R5.2)."
        )
    assert lots is not None
    price = offer.price_usd_minor(days)
    total = price * lots
    notes.append(
        f"Whole {days}-day package of {offer.id}: {price} cents per lot x {lots} lot(s) = "
        f"{total} cents (R5.1)."
    )
    if per_lot > 1:
        notes.append(
            f"One lot holds {per_lot} GPUs and its price covers the lot; renting them does not "
            "mean a program used them all (R5.2, R2.5)."
        )
    return lots, total, notes


def break_even_accepted(challenger: PackageQuote, reference: PackageQuote) -> int:
    """Fewest accepted corpora for ``challenger`` to cost less per corpus than ``reference``,
    compared unrounded; a package costs at least 1 cent (R5.1), so one always exists (R5.5)."""
    measured = reference.accepted_results
    if measured is None or measured == 0:
        raise EconomicsError(
            f"break-even against {reference.offer_id!r} needs its measured count of accepted "
            f"corpora, got {measured!r}; no cost per result exists to beat",
            rule="R5.5",
        )
    return challenger.package_total_usd_minor * measured // reference.package_total_usd_minor + 1
