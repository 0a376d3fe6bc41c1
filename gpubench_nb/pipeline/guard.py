"""What `gpubench-nb run` checks before and around writing a bundle (R5.6, R1.3, R5.1): one
writer, no bundle inside a bundle, a tampered finished bundle never re-sealed, the pricing valid
before the first write, and all or nothing on a finished bundle: a rerun that adds no run works
on it with a copy set aside (swapped back on failure); one that adds runs unseals it first.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpubench_nb.economics.offers import (
    MACHINE_OFFER_ID,
    load_offers,
    package_quote,
    resolve_offer,
)
from gpubench_nb.errors import BundleError, GpubenchError
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.clock import utc_stamp
from gpubench_nb.protocol.experiment_spec import Experiment
from gpubench_nb.protocol.outputs import check_output_folder
from gpubench_nb.protocol.writer import bundle_writer


def backup_path(bundle_dir: Path) -> Path:
    """Where the sealed bundle is kept while a rerun rewrites it: beside it, never inside."""
    return bundle_dir.parent / f".{bundle_dir.name}.sealed-backup"


def refuse_tampered(bundle_dir: Path) -> None:
    """A finished bundle that check-bundle refuses is never resumed nor sealed again (R5.6)."""
    from gpubench_nb.economics.reprice import verify_bundle

    if problems := verify_bundle(bundle_dir):
        listing = "\n  ".join(problems)
        raise BundleError(
            f"{bundle_dir} is a finished bundle that check-bundle refuses:\n  {listing}\nIt "
            "will not be sealed again over these changes. Fix: restore the files from a copy of "
            "the bundle, or discard it with `gpubench-nb run --fresh` (it is set aside, renamed, "
            "not deleted) to measure anew",
            rule="R5.6",
        )


def validate_pricing(experiment: Experiment) -> None:
    """The whole pricing (offers table, offer, package) is valid, before any bundle is touched."""
    pricing = experiment.pricing
    if pricing is None:
        return
    table = load_offers(pricing.offers)
    if pricing.offer != MACHINE_OFFER_ID:  # that one is written from the recorded machine
        resolve_offer(table, pricing.offer, pricing.offers)
    for offer in table.values():  # 30_economics prices every offer of the table
        package_quote(offer, pricing.days, lots=pricing.lots, gpus=pricing.gpus)


def _trash(bundle_dir: Path) -> Path:
    """A name for what is being deleted (a partial copy, a failed attempt): never restored."""
    return bundle_dir.parent / f".{bundle_dir.name}.discarding"


def _drop(path: Path, bundle_dir: Path) -> None:
    """Rename ``path`` to the trash name first, so a kill mid-delete leaves nothing ambiguous."""
    trash = _trash(bundle_dir)
    shutil.rmtree(trash, ignore_errors=True)
    path.rename(trash)
    shutil.rmtree(trash)


def _restore_interrupted(bundle_dir: Path) -> None:
    """A backup left beside the bundle (a rerun that redid no run did not end): restored."""
    shutil.rmtree(_trash(bundle_dir), ignore_errors=True)
    backup = backup_path(bundle_dir)
    if not backup.is_dir():
        return
    if bundle_dir.exists():
        _drop(bundle_dir, bundle_dir)
    backup.rename(bundle_dir)


@contextmanager
def writing(experiment: Experiment, bundle_dir: Path, *, fresh: bool) -> Iterator[None]:
    """Hold the bundle for a whole run, after every check that must come before a write."""
    check_output_folder(bundle_dir.parent, option="--output-dir")  # never inside a bundle
    with bundle_writer(bundle_dir, " ".join(["gpubench-nb", *sys.argv[1:]])):
        _restore_interrupted(bundle_dir)
        if fresh and bundle_dir.exists():
            bundle_dir.rename(bundle_dir.with_name(f"{bundle_dir.name}.discarded-{utc_stamp()}"))
        if (bundle_dir / layout.MANIFEST_NAME).exists():
            refuse_tampered(bundle_dir)
        validate_pricing(experiment)
        created = not bundle_dir.exists()
        try:
            yield
        except Exception:
            # no half-made folder before the first row; after it, kept and resumable (R3.6)
            if created and not (bundle_dir / layout.CSV_NAME).exists():
                shutil.rmtree(bundle_dir, ignore_errors=True)
            raise


@contextmanager
def resealing(bundle_dir: Path, *, adds_runs: bool) -> Iterator[None]:
    """Around everything that rewrites a bundle after its checks (see the module docstring)."""
    manifest = bundle_dir / layout.MANIFEST_NAME
    if adds_runs or not manifest.exists():  # new runs: an unfinished, resumable bundle
        manifest.unlink(missing_ok=True)
        yield
        return
    backup = backup_path(bundle_dir)
    trash = _trash(bundle_dir)
    shutil.rmtree(trash, ignore_errors=True)
    shutil.copytree(bundle_dir, trash, symlinks=True)
    trash.rename(backup)  # only a complete copy is ever named as the backup
    try:
        yield
    except BaseException as exc:
        _drop(bundle_dir, bundle_dir)
        backup.rename(bundle_dir)
        if isinstance(exc, GpubenchError):
            raise type(exc)(
                f"{exc}\nThe finished bundle {bundle_dir} was left as it was (its manifest "
                "still verifies); fix the cause and rerun"
            ) from None
        raise
    _drop(backup, bundle_dir)
