"""The audit bundle (R1.2, R1.6, R5.6): where each file lives, its manifest, and its re-check."""

from __future__ import annotations

import hashlib
from pathlib import Path

from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.errors import BundleError

MANIFEST_NAME = "MANIFEST.sha256"
CSV_NAME = "resultats-bruts.csv"
SCHEDULE_NAME = "schedule.json"
ENVIRONMENT_NAME = "environment.json"
EXPECTED_IDS_NAME = "expected_ids.txt"
ECONOMICS_NAME = "economics.json"
REPORT_NAME = "report.html"


def bundle_dir_for(output_dir: Path, experiment_id: str) -> Path:
    """``<output_dir>/<experiment_id>``: one folder per experiment."""
    return Path(output_dir) / experiment_id


def run_dir(bundle_dir: Path, variant_id: str, phase: str, run_index: int) -> Path:
    """``runs/<variant>/<phase>-<n>``: predictions.jsonl, checks.json and run.json of one run."""
    return Path(bundle_dir) / "runs" / variant_id / f"{phase}-{run_index}"


def sealed_bundle_holding(path: Path) -> Path | None:
    """The finished bundle (one with a manifest) that ``path`` would be written into, if any."""
    for folder in Path(path).resolve().parents:
        if (folder / MANIFEST_NAME).is_file():
            return folder
    return None


def comparison_report_path(bundle_dirs: list[Path]) -> Path:
    """Where ``gpubench-nb report`` writes by default: beside the first bundle, never inside one.

    A finished bundle is sealed by its manifest (R5.6); a report written into it afterwards
    would make ``check-bundle`` fail. ``outputs/a`` + ``outputs/b`` -> ``outputs/report-a+b.html``.
    """
    first = Path(bundle_dirs[0]).resolve()
    names = "+".join(Path(d).resolve().name for d in bundle_dirs)
    return first.parent / f"report-{names}.html"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_entries(bundle_dir: Path) -> dict[str, str]:
    """SHA-256 of every file in the bundle except the manifest itself, by relative path."""
    root = Path(bundle_dir)
    return {
        path.relative_to(root).as_posix(): _file_sha256(path)
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != MANIFEST_NAME and not path.name.startswith(".")
    }


def write_manifest(bundle_dir: Path) -> Path:
    """Write ``MANIFEST.sha256`` (``sha256sum`` format, so `sha256sum -c` can check it too)."""
    lines = [f"{digest}  {name}\n" for name, digest in manifest_entries(bundle_dir).items()]
    path = Path(bundle_dir) / MANIFEST_NAME
    write_text_atomic(path, "".join(lines))
    return path


def verify_manifest(bundle_dir: Path) -> list[str]:
    """Problems between the manifest and the files on disk (changed, missing or unlisted)."""
    path = Path(bundle_dir) / MANIFEST_NAME
    if not path.exists():
        raise BundleError(
            f"{path}: no manifest; finish the run (gpubench-nb run) first", rule="R5.6"
        )
    listed: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise BundleError(f"{path}:{number}: malformed manifest line {line!r}", rule="R5.6")
        listed[name] = digest
    actual = manifest_entries(bundle_dir)
    problems = [
        f"{name}: changed since the manifest was written"
        for name in listed
        if name in actual and actual[name] != listed[name]
    ]
    problems += [
        f"{name}: listed in the manifest but missing" for name in listed if name not in actual
    ]
    problems += [
        f"{name}: present but not in the manifest" for name in actual if name not in listed
    ]
    return problems
