"""The audit bundle (R1.2, R1.6, R5.6): where each file lives, its manifest, and its re-check."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.fingerprint import sha256_file

MANIFEST_NAME = "MANIFEST.sha256"
CSV_NAME = "resultats-bruts.csv"
SCHEDULE_NAME = "schedule.json"
ENVIRONMENT_NAME = "environment.json"
EXPECTED_IDS_NAME = "expected_ids.txt"
ECONOMICS_NAME = "economics.json"
REPORT_NAME = "report.html"
LOCK_NAME = "protocol.lock.json"
# A campaign freezes its protocol in <campaign>/frozen/, not in the campaign folder itself: a
# folder holding a protocol.lock.json is a bundle, and the targets' bundles must not lie in one.
CAMPAIGN_FROZEN_DIR = "frozen"
REFERENCE_NAME = "reference.json"  # the reference value a bundle was judged against (R1.3)
# One run's folder (run_dir) holds these three.
RUN_NAME = "run.json"
PREDICTIONS_NAME = "predictions.jsonl"
CHECKS_NAME = "checks.json"
DIAGNOSIS_NAME = "diagnosis.json"  # a CUDA_LAUNCH_BLOCKING=1 rerun of a device error, not a row


def run_dir(bundle_dir: Path, variant_id: str, phase: str, run_index: int) -> Path:
    """``runs/<variant>/<phase>-<n>``: predictions.jsonl, checks.json and run.json of one run."""
    return Path(bundle_dir) / "runs" / variant_id / f"{phase}-{run_index}"


def is_bundle(folder: Path) -> bool:
    """A bundle, finished (a manifest) or not (its lock beside the expected IDs or the kept
    protocol); a lone copied lock (`run --protocol`) does not make its folder a bundle."""
    if (folder / MANIFEST_NAME).is_file():
        return True
    frozen = (folder / LOCK_NAME).is_file()
    return frozen and ((folder / EXPECTED_IDS_NAME).is_file() or (folder / "protocol").is_dir())


def bundle_holding(path: Path) -> Path | None:
    """The bundle (finished or not) that is ``path`` or holds it, if any."""
    resolved = Path(path).resolve()
    for folder in (resolved, *resolved.parents):
        if is_bundle(folder):
            return folder
    return None


def sealed_bundle_holding(path: Path) -> Path | None:
    """The finished bundle (one with a manifest) that ``path`` would be written into, if any."""
    for folder in Path(path).resolve().parents:
        if (folder / MANIFEST_NAME).is_file():
            return folder
    return None


def comparison_report_path(bundle_dirs: list[Path]) -> Path:
    """``outputs/report-a+b.html`` for ``outputs/a`` + ``outputs/b``: where ``report`` writes by
    default, beside the first bundle, never inside a sealed one (R5.6)."""
    first = Path(bundle_dirs[0]).resolve()
    names = "+".join(Path(d).resolve().name for d in bundle_dirs)
    return first.parent / f"report-{names}.html"


def _walk(root: Path) -> tuple[list[Path], list[Path]]:
    """Regular files, and entries that are not (symlinks, FIFOs, sockets, devices), under root;
    symlinked folders are not followed: what the manifest seals lies inside the bundle."""
    regular: list[Path] = []
    other: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        for name in [*dirs]:
            if (here / name).is_symlink():
                other.append(here / name)
                dirs.remove(name)
        for name in files:
            path = here / name
            if path.is_symlink() or not stat.S_ISREG(path.lstat().st_mode):
                other.append(path)
            else:
                regular.append(path)
    return sorted(regular), sorted(other)


def foreign_entries(bundle_dir: Path) -> list[str]:
    """Entries of the bundle that are not regular files (symlinks and the like), by name."""
    root = Path(bundle_dir)
    return [path.relative_to(root).as_posix() for path in _walk(root)[1]]


def manifest_entries(bundle_dir: Path) -> dict[str, str]:
    """SHA-256 of every regular file in the bundle except the manifest itself, by relative
    path; dot-files included, so a file added under a hidden name is noticed too (R5.6)."""
    root = Path(bundle_dir)
    paths = {path.relative_to(root).as_posix(): path for path in _walk(root)[0]}
    return {name: sha256_file(path) for name, path in paths.items() if name != MANIFEST_NAME}


def write_manifest(bundle_dir: Path) -> Path:
    """Write ``MANIFEST.sha256`` (``sha256sum -c`` format), refusing non-regular entries (a link
    seals what can change behind it) and unwritable names (R5.6)."""
    foreign = foreign_entries(bundle_dir)
    if foreign:
        raise BundleError(
            f"{bundle_dir}: not regular files inside the bundle: {', '.join(foreign)}; a bundle "
            "holds plain files only (replace each link by a copy of the file, or remove it)",
            rule="R5.6",
        )
    entries = manifest_entries(bundle_dir)
    unsafe = [name for name in entries if "\n" in name or "\r" in name or "\\" in name]
    if unsafe:
        raise BundleError(
            f"{bundle_dir}: file names the manifest cannot hold one per line: {unsafe!r}; "
            "rename or remove them",
            rule="R5.6",
        )
    lines = [f"{digest}  {name}\n" for name, digest in entries.items()]
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
    for number, line in enumerate(split_lines(path.read_text(encoding="utf-8")), start=1):
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
        f"{_shown(name)}: present but not in the manifest" for name in actual if name not in listed
    ]
    problems += [
        f"{name}: not a regular file (symlink or special file); a bundle holds plain files only"
        for name in foreign_entries(bundle_dir)
    ]
    return problems


def split_lines(text: str) -> list[str]:
    """``text``'s lines, split on "\\n" only: str.splitlines would also cut a name or an ID at
    U+2028, \\x1c, \\x85 and the like (IDs and file names hold no line break)."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _shown(name: str) -> str:
    return repr(name) if any(not ch.isprintable() for ch in name) else name
