"""build_model: build a preset from the declared experiment, or reuse a matching build."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpubench_nb.engine.backends.base import METADATA_FILE, read_metadata
from gpubench_nb.engine.backends.presets import BuildSpec, declaration
from gpubench_nb.engine.backends.registry import backend_entry
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment import build_options
from gpubench_nb.protocol.experiment_spec import PRESET_BACKENDS
from gpubench_nb.protocol.fingerprint import sha256_files

DEFAULT_CONTEXT = 128


def build_model(exp: Any, *, force: bool = False) -> Path:
    """Build the preset declared by ``exp`` at ``exp.model.path``; a folder built from the same
    declaration is reused, another replaced only with ``force`` (R1.1)."""
    from gpubench_nb.protocol.corpus import check_disjoint, load_experiment_corpus

    backend = exp.model.backend
    entry = backend_entry(backend)
    if not entry.preset:
        raise BackendError(
            f"model.backend {backend!r} has nothing to build: build-model builds the presets "
            f"{list(PRESET_BACKENDS)}; an hf model is a folder the user brings (model.path)"
        )
    preset = entry.module()  # its preset_source and build_preset
    options = build_options(backend, exp.model.build)
    source, source_files = preset.preset_source()
    train, tune = load_experiment_corpus(exp, "train"), load_experiment_corpus(exp, "tune")
    check_disjoint(load_experiment_corpus(exp, "eval"), {"train": train, "tune": tune})  # R1.4
    largest = max((v.settings.context for v in exp.variants), default=DEFAULT_CONTEXT)
    context = int(exp.fixed.get("context") or largest)  # the fixed context, else the largest
    provenance = {
        "train_revision": train.revision,
        "tune_revision": tune.revision,
        "classes": list(exp.classes),
        "source_revision": sha256_files(source_files, source),
    }
    splits = (train.texts, train.labels, tune.texts, tune.labels)
    spec = BuildSpec(*splits, exp.classes, exp.seed, context, options, provenance)
    # as it reads back from gpubench_model.json (tuples become lists)
    expected = json.loads(json.dumps(declaration(spec, backend, options), sort_keys=True))
    out_dir = Path(exp.model.path)
    if out_dir.exists():
        try:
            recorded = read_metadata(out_dir).declaration
        except BackendError:  # absent or unreadable
            recorded = None
        if recorded == expected:
            return out_dir
        _refuse_unless_forced(out_dir, recorded, expected, force)

    preset.build_preset(spec, out_dir)
    return out_dir


def _refuse_unless_forced(
    out_dir: Path, recorded: Mapping[str, Any] | None, expected: dict, force: bool
) -> None:
    """A different build at model.path is replaced only on --force, and a folder that
    build-model did not write (no gpubench_model.json) is never deleted."""
    foreign = not (out_dir / METADATA_FILE).is_file() and any(out_dir.iterdir())
    if foreign:
        raise BackendError(
            f"model.path {out_dir} exists and was not written by build-model (no "
            f"{METADATA_FILE}); it is left untouched even with --force. Change model.path",
            rule="R1.1",
        )
    if force or (recorded is None and not any(out_dir.iterdir())):
        return
    if recorded is None:
        differs = [f"{METADATA_FILE} unreadable"]
    else:
        keys = sorted(set(recorded) | set(expected))
        differs = [k for k in keys if recorded.get(k) != expected.get(k)]
    raise BackendError(
        f"model.path {out_dir} holds a model built from another declaration (differs in: "
        f"{', '.join(differs)}); pass --force to rebuild it there, or change model.path "
        "to build beside it",
        rule="R1.1",
    )


def build_summary(exp: Any, out_dir: Path) -> list[str]:
    """What build-model chose on tune (R1.4), for the terminal: the tune macro-F1, the choice
    (a warning at the edge of its grid) and the room quality.threshold leaves below tune."""
    meta = read_metadata(out_dir)
    tune, (name, value) = meta.tune_macro_f1, next(iter((meta.chosen or {}).items()))
    kept = meta.to_dict()  # each preset's own grid
    grid = kept.get("tune_macro_f1_by_epoch") or list(kept.get("tune_macro_f1_by_c") or {})
    tried = list(range(1, len(grid) + 1)) if name == "epochs" else [float(c) for c in grid]
    lines = [
        f"tune        macro-F1 {tune:.3f} on {meta.tune_count} tune items "
        f"(trained on {meta.train_count})",
        f"chosen      {name} = {value:g} (best on tune, of {len(tried)} tried: "
        f"{f'1-{len(tried)}' if name == 'epochs' else ', '.join(f'{t:g}' for t in tried)})",
    ]
    option = "max_epochs" if name == "epochs" else "c_grid"
    if len(tried) > 1 and (value == max(tried) or (name == "C" and value == min(tried))):
        lines.append(
            f"WARNING     {name} = {value:g} is at the edge of the grid tried: tune may improve "
            f"beyond it; widen model.build.{option} and rebuild with --force"
        )
    q = exp.quality
    room = tune - q.threshold if q.metric == "macro_f1" else None
    suggested = math.floor((tune - 0.05) * 100) / 100
    if room is None:
        lines.append(f"threshold   {q.metric} {q.threshold} (tune reports macro-F1 only)")
    elif room < 0.05:
        lines.append(
            f"WARNING     quality.threshold {q.threshold} leaves {room:+.3f} below tune; eval "
            f"often scores a few points lower: about {suggested:.2f} leaves room for it"
        )
    else:
        lines.append(f"threshold   {q.threshold}, {room:.3f} below tune: room for eval to differ")
    return lines
