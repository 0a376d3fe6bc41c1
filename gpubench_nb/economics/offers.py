"""The rental offers table and whole-package quotes, in integer cents (R5.1-R5.3, R5.5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpubench_nb.errors import EconomicsError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.yamlio import read_yaml

# R5.1: only whole packages of these lengths are priced; nothing is prorated between them.
DURATIONS_DAYS: tuple[int, ...] = (3, 7, 30)
ROUNDING_RULE = (
    "cost per accepted corpus = package total / accepted results, rounded to the nearest cent "
    "with exact halves rounded up, in integer arithmetic: (2 * total + n) // (2 * n)"
)

_PRICE = schema.integer("US cents for the whole package of one lot (USD 1,234.56: 123456)")
# One offer of the table; ``placeholder: true`` declares its prices invented examples, not a
# quote, and every price of it is marked wherever it is shown (formats.price).
OFFER = schema.section("one rental offer (R5.1, R5.2)", {
    "id": schema.text("what pricing.offer names", pattern=r"^\S(.*\S)?$"),
    "provider": schema.text("who quoted the prices, and when"),
    "gpu_model": schema.text("gpus_per_lot >= 1: e.g. H100 80GB; a cost needs runs on it (R5.7)"),
    "cpu_model": schema.text("gpus_per_lot 0 (CPU-only): the CPU as environment.json names it"),
    "gpus_per_lot": schema.integer("GPUs in one billed lot; 0: CPU-only", minimum=0),
    "package_price_usd_minor": schema.section(
        "days -> whole-package price of one lot", {str(d): _PRICE for d in DURATIONS_DAYS},
        required=[str(d) for d in DURATIONS_DAYS]),
    "placeholder": schema.flag("true: invented example prices, not a quote", default=False),
}, required=("id", "provider", "gpus_per_lot", "package_price_usd_minor"))  # fmt: skip
OFFERS = schema.section(
    "The offers table (`parameters/offers.yaml`): whole 3-, 7- and 30-day packages (R5.1).",
    {"offers": {"type": "array", "minItems": 1, "items": OFFER, "description": "the offers"}},
    required=("offers",),
)
_OFFER_FIELDS = tuple(OFFER["required"])
_OPTIONAL_FIELDS = tuple(k for k in schema.keys(OFFER) if k not in _OFFER_FIELDS)
# The demo's own offer: written for the machine a bundle ran on, with invented prices (USD 15,
# 30, 90), when pricing.offer names it; attributed by the one rule like any other offer.
MACHINE_OFFER_ID = "this-machine-example"
_MACHINE_PRICES = {3: 1500, 7: 3000, 30: 9000}
REAL_QUOTE_HOWTO = (
    "to enter a real quote, write the provider's whole-package prices in "
    "package_price_usd_minor, say who quoted them and when in provider, and remove "
    "'placeholder: true' from that offer in the offers table"
)


@dataclass(frozen=True)
class Offer:
    """One rental offer: the price of a whole 3-, 7- or 30-day package for ONE lot (R5.2)."""

    id: str
    provider: str
    gpu_model: str  # "" for a CPU-only offer
    gpus_per_lot: int  # 0: CPU-only hardware, named by cpu_model
    # days -> USD cents for the whole package of one lot; always exactly the keys 3, 7, 30.
    package_price_usd_minor: Mapping[int, int] = field(hash=False)
    placeholder: bool = False  # invented example prices, not a quote
    cpu_model: str | None = None  # a CPU-only offer's CPU, as environment.json records it

    @property
    def hardware(self) -> str:
        """What the offer rents: its GPU model, or ``CPU-only: <cpu_model>``."""
        return self.gpu_model if self.gpus_per_lot else f"CPU-only: {self.cpu_model}"

    def price_usd_minor(self, days: int) -> int:
        """The whole ``days``-day package price of one lot, in cents (R5.1)."""
        if days not in self.package_price_usd_minor:
            raise EconomicsError(
                f"days must be one of {_durations_text()} (whole packages), got {days!r}",
                rule="R5.1",
            )
        return self.package_price_usd_minor[days]


def _durations_text() -> str:
    return ", ".join(str(d) for d in DURATIONS_DAYS)


def _is_int(value: Any) -> bool:
    # YAML booleans are ints in Python; a price or a GPU count of `true` is a typo, not 1.
    return isinstance(value, int) and not isinstance(value, bool)


def load_offers(path: str | Path) -> dict[str, Offer]:
    """Read and validate an offers table; raise EconomicsError naming file, offer, field, fix."""
    path = Path(path)
    # The one YAML reader: a price given twice, an alias bomb or a huge file are refused.
    data = read_yaml(path, what="offers table", error=EconomicsError, rule="R5.1")

    if not isinstance(data, dict) or set(data) != {"offers"}:
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise EconomicsError(
            f"{path}: top level must be a mapping with the single key 'offers', got {keys!r}; "
            "fix: see the comment at the top of parameters/offers.yaml",
            rule="R5.1",
        )
    entries = data["offers"]
    if not isinstance(entries, list) or not entries:
        raise EconomicsError(
            f"{path}: 'offers' must be a non-empty list of offers, got {entries!r}", rule="R5.1"
        )

    offers: dict[str, Offer] = {}
    for index, entry in enumerate(entries):
        offer = _parse_offer(path, index, entry)
        if offer.id in offers:
            raise EconomicsError(
                f"{path}: offers[{index}] field 'id': duplicate id {offer.id!r} "
                "(already used by an earlier offer); fix: give every offer its own id",
                rule="R5.1",
            )
        offers[offer.id] = offer
    return offers


def _parse_offer(path: Path, index: int, entry: Any) -> Offer:
    """One entry of the offers table, checked field by field in the order written below."""
    offer_id = _offer_id(path, index, entry)
    where = f"{path}: offer {offer_id!r} (offers[{index}])"
    _check_field_names(where, entry)
    placeholder = _placeholder(where, entry.get("placeholder", False))
    gpus = _gpus_per_lot(where, entry["gpus_per_lot"])
    named, other = ("gpu_model", "cpu_model") if gpus else ("cpu_model", "gpu_model")
    kind = f"gpus_per_lot {gpus}: {'a GPU' if gpus else 'a CPU-only'} offer, named by {named}"
    if other in entry:
        raise EconomicsError(
            f"{where} fields 'gpus_per_lot' (got {gpus!r}) and {other!r}: {kind}; fix: remove "
            f"{other}, or set gpus_per_lot to match the hardware (0 for CPU-only)",
            rule="R5.2",
        )
    for name in ("provider", named):
        if not isinstance(entry.get(name), str) or not entry[name].strip():
            raise EconomicsError(
                f"{where} field {name!r}: must be non-empty text, got {entry.get(name)!r} "
                f"({kind}, the model name as environment.json records it)",
                rule="R5.1",
            )
    return Offer(
        id=offer_id,
        provider=entry["provider"],
        gpu_model=entry.get("gpu_model", ""),
        gpus_per_lot=gpus,
        package_price_usd_minor=_package_prices(where, entry["package_price_usd_minor"]),
        placeholder=placeholder,
        cpu_model=entry.get("cpu_model"),
    )


def machine_offer(gpu_models: tuple[str, ...], gpus: int | None, cpu_model: str | None) -> Offer:
    """The demo's own placeholder offer for the hardware a bundle recorded: its GPU model and
    GPU count, or (no GPU used) its CPU model, so that the demo shows a cost per accepted
    corpus on any machine while attribution stays the one rule (R2.4, R5.7)."""
    provider = (
        "written by gpubench-nb for the machine this bundle ran on (pricing.offer: "
        f"{MACHINE_OFFER_ID}): invented example prices, not a quote"
    )
    if gpus:
        model = " + ".join(gpu_models) or "GPU model not recorded"
        return Offer(MACHINE_OFFER_ID, provider, model, gpus, _MACHINE_PRICES, True)
    cpu = cpu_model or "CPU model not recorded"
    return Offer(MACHINE_OFFER_ID, provider, "", 0, _MACHINE_PRICES, True, cpu)


def _offer_id(path: Path, index: int, entry: Any) -> str:
    """The id of a mapping entry: non-empty text without surrounding spaces (R5.1)."""
    where = f"{path}: offers[{index}]"
    if not isinstance(entry, dict):
        raise EconomicsError(f"{where}: an offer must be a mapping, got {entry!r}", rule="R5.1")
    offer_id = entry.get("id")
    if not isinstance(offer_id, str) or not offer_id.strip() or offer_id != offer_id.strip():
        raise EconomicsError(
            f"{where} field 'id': must be a non-empty string without surrounding spaces, "
            f"got {offer_id!r}",
            rule="R5.1",
        )
    return offer_id


def _check_field_names(where: str, entry: dict[str, Any]) -> None:
    """Exactly the offer fields, and optionally ``placeholder`` (R5.1)."""
    unknown = sorted(set(entry) - set(_OFFER_FIELDS) - set(_OPTIONAL_FIELDS), key=str)
    missing = [name for name in _OFFER_FIELDS if name not in entry]
    if unknown or missing:
        raise EconomicsError(
            f"{where}: unknown fields {unknown} / missing fields {missing}; "
            f"fix: an offer has exactly the fields {list(_OFFER_FIELDS)}, and optionally "
            f"{list(_OPTIONAL_FIELDS)}",
            rule="R5.1",
        )


def _placeholder(where: str, placeholder: Any) -> bool:
    """``placeholder: true`` marks invented example prices, not a quote."""
    if not isinstance(placeholder, bool):
        raise EconomicsError(
            f"{where} field 'placeholder': must be true (invented example prices, not a quote) "
            f"or false, got {placeholder!r}; fix: write placeholder: true, or remove the field "
            "once the prices are a real quote",
            rule="R5.1",
        )
    return placeholder


def _gpus_per_lot(where: str, gpus: Any) -> int:
    """The GPUs in one billed lot: a whole number >= 0, 0 for CPU-only hardware (R5.2)."""
    if not _is_int(gpus) or gpus < 0:
        raise EconomicsError(
            f"{where} field 'gpus_per_lot': must be a whole number >= 0, got {gpus!r}; "
            "fix: the GPUs in one billed lot (2 for a B200 lot, usually 1; 0 for CPU-only "
            "hardware named by cpu_model)",
            rule="R5.2",
        )
    return gpus


def _package_prices(where: str, prices: Any) -> dict[int, int]:
    """Days -> cents for exactly the whole packages of DURATIONS_DAYS (R5.1), prices >= 1 (R4.2)."""
    if not isinstance(prices, dict):
        raise EconomicsError(
            f"{where} field 'package_price_usd_minor': must map 3, 7 and 30 (days) to a price "
            f"in cents, got {prices!r}",
            rule="R5.1",
        )
    for days, cents in prices.items():
        if not _is_int(days) or days not in DURATIONS_DAYS:
            raise EconomicsError(
                f"{where} field 'package_price_usd_minor.{days}': unknown duration {days!r}; "
                f"fix: use only the whole packages {_durations_text()} (days, written as "
                "integers)",
                rule="R5.1",
            )
        if not _is_int(cents) or cents < 1:
            # 0 is not a price (R5.1): the CSV schema refuses a package_total_usd_minor of 0,
            # so the table refuses it first, before any bundle is touched.
            zero = " (0 is not a price, R5.1: give the real price, or remove the offer)"
            raise EconomicsError(
                f"{where} field 'package_price_usd_minor.{days}': price must be a whole number "
                f"of US cents >= 1, got {cents!r}{zero if cents == 0 else ''}; fix: write "
                "USD 1,234.56 as 123456",
                rule="R4.2",
            )
    absent = [d for d in DURATIONS_DAYS if d not in prices]
    if absent:
        raise EconomicsError(
            f"{where} field 'package_price_usd_minor': no price for the {absent} day "
            f"package(s); fix: give the whole-package price for each of {_durations_text()} days",
            rule="R5.1",
        )
    return {d: prices[d] for d in DURATIONS_DAYS}


def resolve_offer(offers: Mapping[str, Offer], name: str) -> Offer:
    """The offer with id ``name``, or the only id starting with ``name + '-'`` (``b200``)."""
    if name in offers:
        return offers[name]
    matches = [offer for offer_id, offer in offers.items() if offer_id.startswith(f"{name}-")]
    if len(matches) == 1:
        return matches[0]
    kind = "ambiguous" if matches else "unknown"
    raise EconomicsError(f"{kind} offer {name!r}; valid values: {', '.join(offers)}", rule="R5.1")


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cost_per_accepted_usd_minor(total_usd_minor: int, accepted_results: int | None) -> int | None:
    """``total / accepted_results`` rounded per ROUNDING_RULE; None for None or 0 (R5.5)."""
    if accepted_results is None or accepted_results == 0:
        return None
    if not _is_int(accepted_results) or accepted_results < 0:
        raise EconomicsError(
            f"accepted_results must be a whole number >= 0, got {accepted_results!r}", rule="R5.3"
        )
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
    if not _is_int(days) or days not in DURATIONS_DAYS:
        raise EconomicsError(
            f"days must be one of {_durations_text()} (whole packages), got {days!r}",
            rule="R5.1",
        )
    if (lots is None) == (gpus is None):
        raise EconomicsError(
            f"give exactly one of lots (billed lots) or gpus (GPUs needed), got lots={lots!r}, "
            f"gpus={gpus!r}",
            rule="R5.1",
        )
    for name, value in (("lots", lots), ("gpus", gpus)):
        if value is not None and (not _is_int(value) or value < 1):
            raise EconomicsError(f"{name} must be a whole number >= 1, got {value!r}", rule="R5.1")
    if accepted_results is not None and (not _is_int(accepted_results) or accepted_results < 0):
        raise EconomicsError(
            "accepted_results must be a whole number >= 0 of distinct accepted corpora, or None "
            f"when none was measured (R5.5), got {accepted_results!r}",
            rule="R5.3",
        )

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
            f"{REAL_QUOTE_HOWTO}."
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


def break_even_accepted(challenger: PackageQuote, reference: PackageQuote) -> int | None:
    """Fewest accepted corpora for ``challenger`` to cost less per corpus than ``reference``.

    A threshold, not a forecast: it says nothing about how many corpora a package will deliver.
    Compared exactly (unrounded): the least n with challenger_total / n < reference_total /
    reference.accepted_results. None when the reference costs 0 (nothing beats it). The
    reference needs a measured accepted count (R5.5).
    """
    measured = reference.accepted_results
    if measured is None or measured == 0:
        raise EconomicsError(
            f"break-even against {reference.offer_id!r} needs its measured count of accepted "
            f"corpora, got {measured!r}; no cost per result exists to beat",
            rule="R5.5",
        )
    if reference.package_total_usd_minor == 0:
        return None
    return challenger.package_total_usd_minor * measured // reference.package_total_usd_minor + 1
