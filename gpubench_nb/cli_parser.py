"""The `gpubench-nb` argument parser: one function per subcommand, with its help texts and one
example each; every subcommand names its handler (``handler``), which `cli.py` calls."""

from __future__ import annotations

import argparse
import math


def _metric_value(text: str) -> float:
    """A value of the declared metric: finite and within [0, 1] (every metric in METRICS is)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; e.g. 0.81") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is outside the metric's range [0, 1] (R1.3); give the reference value, "
            "e.g. 0.81"
        )
    return value


def _positive_int(text: str) -> int:
    """A whole number >= 1 (seconds, counts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


SCHEMA_FILES = ("experiment", "offers", "campaign")
EXPERIMENT_HELP = "the experiment YAML (e.g. parameters/demo.yaml); see `gpubench-nb --help`"
OUTPUT_DIR_HELP = (
    "folder that receives one bundle per experiment, relative to the current folder "
    "(default: outputs)"
)
TOP_DESCRIPTION = """\
Which GPU rental package classifies your text corpus at the lowest cost per accepted result:
first prove the outputs complete and good enough, then time them, then price them.

An experiment is one YAML file (e.g. parameters/demo.yaml) that declares, before anything
runs: the corpus and its classes, the model and tokenizer, the quality rule (metric, threshold,
tolerance), the one setting its variants change (e.g. batch 1, 4, 8), how runs are timed, and
optionally the rental offer to price. Its results go to one folder, the bundle,
outputs/<experiment_id>/.

The usual path:
  gpubench-nb validate parameters/demo.yaml    check the declaration and every file it names
  gpubench-nb build-model parameters/demo.yaml build a preset (bow, minilm) on train/tune
  gpubench-nb run parameters/demo.yaml         measure, accept, price; writes the bundle
  gpubench-nb report outputs/demo-bow-batch    one HTML report over one or more bundles
"""
TOP_EPILOG = """\
Paths: a path you type (the experiment, --output-dir, --offers, a bundle) is relative to the
current folder; a path written inside a YAML is relative to that YAML's folder. Each command
prints the absolute path of what it wrote. Exit codes: 0 done, 1 not accepted or some target
failed, 2 unusable input (the message names the rule and the fix).
"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples keep their line breaks; defaults are shown where given."""


def _command(
    sub: argparse._SubParsersAction, name: str, summary: str, description: str, example: str
) -> argparse.ArgumentParser:
    """A subcommand whose help has a short summary, a description and one example."""
    return sub.add_parser(
        name,
        help=summary,
        description=f"{summary}.\n\n{description}",
        epilog=f"example:\n  {example}",
        formatter_class=_HelpFormatter,
    )


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "validate",
        "check an experiment before running it",
        "Reads the experiment YAML, every file it names (corpus splits, offers table, model\n"
        "folder) and prints what a run would do. Nothing is written.",
        "gpubench-nb validate parameters/demo.yaml",
    )
    p.add_argument("experiment", help=EXPERIMENT_HELP)
    p.set_defaults(handler="validate")


def _add_build_model(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "build-model",
        "build the preset model (bow, minilm) from the experiment's train/tune splits",
        "Seeded and repeatable (R1.1); a folder already built from the same declaration is\n"
        "reused. The folder is written at model.path with the usual file modes (readable by\n"
        "colleagues under umask 022).",
        "gpubench-nb build-model parameters/demo.yaml",
    )
    p.add_argument("experiment", help=EXPERIMENT_HELP)
    p.add_argument("--force", action="store_true", help="rebuild over a differing model folder")
    p.set_defaults(handler="build-model")


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "run",
        "run the whole experiment into its bundle",
        "Freezes the declaration (protocol.lock.json), runs every variant 5 cold + 5 warm times,\n"
        "each in a fresh kernel (R3.7), checks every run's predictions (R1.5), prices the\n"
        "packages (R5) and writes report.html. Rerunning resumes: finished runs are kept.",
        "gpubench-nb run parameters/demo.yaml",
    )
    p.add_argument("experiment", help=EXPERIMENT_HELP)
    p.add_argument("--variants", nargs="+", metavar="ID", help="run only these variants")
    p.add_argument("--output-dir", default="outputs", help=OUTPUT_DIR_HELP)
    p.add_argument(
        "--fresh",
        action="store_true",
        help="set the existing bundle aside (renamed, not deleted) and start anew",
    )
    p.add_argument(
        "--run-timeout",
        type=_positive_int,
        default=1800,
        metavar="SECONDS",
        help="a run silent this long is a dead run (row kept, R3.6)",
    )
    p.add_argument(
        "--protocol",
        metavar="LOCK",
        help="a frozen protocol.lock.json (a campaign's): refuse unless this machine's "
        "declaration and fingerprints equal it, then freeze the bundle with it (R1.3)",
    )
    p.set_defaults(handler="run")


def _add_accept(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "accept",
        "check one predictions file against the experiment's corpus (R1.5, R1.6)",
        "Every expected ID exactly once, no extra answer, a valid format and the declared\n"
        "quality; the checks are archived as checks.json. Exit 0 accepted, 1 not accepted.",
        "gpubench-nb accept parameters/demo.yaml my-run/predictions.jsonl",
    )
    p.add_argument("experiment", help=EXPERIMENT_HELP)
    p.add_argument(
        "predictions", help='the predictions file: one {"id": ..., "label": ...} per line'
    )
    p.add_argument(
        "--reference-value",
        type=_metric_value,
        default=None,
        help="the reference variant's value of the metric, in [0, 1] (tolerance base, R1.3)",
    )
    p.add_argument("--checks", help="where to write checks.json (default: beside predictions)")
    p.set_defaults(handler="accept")


def _add_csv_check(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "csv-check",
        "check a resultats-bruts.csv against the fixed 38-column schema (R4)",
        "Lists every problem with its line and column; nothing is written.",
        "gpubench-nb csv-check outputs/demo-bow-batch/resultats-bruts.csv",
    )
    p.add_argument("file", help="the CSV file to check")
    p.set_defaults(handler="csv-check")


def _add_check_bundle(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "check-bundle",
        "re-derive every check of a finished bundle and verify its manifest (R5.6)",
        "Acceptance, prices and the CSV are recomputed from the kept files and compared.",
        "gpubench-nb check-bundle outputs/demo-bow-batch",
    )
    p.add_argument("bundle", help="a bundle folder written by `gpubench-nb run`")
    p.set_defaults(handler="check-bundle")


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "report",
        "render one HTML report over one or more finished bundles",
        "Each bundle already holds its own report.html; this command compares several (e.g.\n"
        "the same experiment on two machines).",
        "gpubench-nb report outputs/demo-bow-batch outputs/demo-bow-batch-h100",
    )
    p.add_argument("bundles", nargs="+", metavar="BUNDLE", help="bundle folders to report on")
    p.add_argument(
        "--out",
        help="HTML path outside any finished bundle (default: beside the first bundle, "
        "report-<names>.html)",
    )
    p.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="merge unlike bundles anyway; the report says so (R2.1)",
    )
    p.add_argument("--ledger", help="a ledger.json from `gpubench-nb ledger --out`, shown (R5.3)")
    p.set_defaults(handler="report")


def _add_ledger(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "ledger",
        "count the distinct corpora accepted on one rented machine within its package (R5.3)",
        "The count behind calcul-forfaits --accepted-results: five repeats of one corpus are\n"
        "one accepted corpus, not five.",
        "gpubench-nb ledger outputs/demo-bow-batch --offer h100 --days 7 --lots 1 "
        "--start 2026-12-01",
    )
    p.add_argument("bundles", nargs="+", metavar="BUNDLE", help="bundle folders to count")
    p.add_argument("--offer", required=True, help="offer id (or its unique prefix, e.g. h100)")
    p.add_argument(
        "--offers",
        default="parameters/offers.yaml",
        help="offers table, relative to the current folder (default: parameters/offers.yaml)",
    )
    p.add_argument(
        "--days", required=True, type=_positive_int, help="package length: 3, 7 or 30 (R5.1)"
    )
    p.add_argument("--lots", required=True, type=_positive_int, help="billed lots (R5.1, R5.2)")
    p.add_argument(
        "--start", required=True, help="package start, UTC: 2026-12-01 or 2026-12-01T09:00:00Z"
    )
    p.add_argument(
        "--machine",
        action="append",
        metavar="HOST|GPU-UUID",
        help="the rented machine (repeatable); default: the machine of the first bundle",
    )
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--out", help="also write the ledger as JSON (for `report --ledger`)")
    p.set_defaults(handler="ledger")


def _add_classify(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "classify",
        "one accepted-or-not pass of a declared variant, sealed as a small bundle (R5.3)",
        "No repeats and no timing: the deliverable the ledger counts.",
        "gpubench-nb classify parameters/demo.yaml --variant b8 "
        "--reference-bundle outputs/demo-bow-batch",
    )
    p.add_argument("experiment", help=EXPERIMENT_HELP)
    p.add_argument("--variant", required=True, metavar="ID", help="a declared variant")
    p.add_argument("--output-dir", default="outputs", help=OUTPUT_DIR_HELP)
    p.add_argument(
        "--reference-bundle",
        metavar="DIR",
        help="the finished benchmark of this experiment, whose reference variant's quality the "
        "tolerance is measured against (needed unless --variant is the reference, R1.3)",
    )
    p.set_defaults(handler="classify")


def _add_notebooks(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "notebooks",
        "print the folder of the installed notebooks (for the plain papermill CLI)",
        "The notebooks ship inside the package; run them with papermill from that folder, or\n"
        "copy them somewhere to edit them. Nothing is overwritten.",
        "gpubench-nb notebooks --copy my-notebooks",
    )
    p.add_argument(
        "--copy", metavar="DIR", help="copy them into DIR instead (an existing copy is refused)"
    )
    p.set_defaults(handler="notebooks")


CAMPAIGN_HELP = (
    "the campaign YAML (e.g. parameters/campaign-offers.yaml): one experiment, its targets"
)


def _add_schema(sub: argparse._SubParsersAction) -> None:
    p = _command(
        sub,
        "schema",
        "print the JSON Schema of a file you write (what validate checks key by key)",
        "For an editor: the shipped YAMLs name docs/schema/<file>.json on their first line, so\n"
        "keys complete and typos show as you type. --reference prints docs/REFERENCE.md.",
        "gpubench-nb schema experiment > experiment.schema.json",
    )
    p.add_argument("file", nargs="?", default="experiment", choices=SCHEMA_FILES, help="which")
    p.add_argument("--reference", action="store_true", help="the reference page (Markdown)")
    p.set_defaults(handler="schema")


def _add_campaign(sub: argparse._SubParsersAction) -> None:
    campaign = _command(
        sub,
        "campaign",
        "one frozen experiment on several machines",
        "`campaign run` freezes the experiment once and runs it on each target (Slurm or\n"
        "local); `campaign status` shows each target; `campaign report` merges their bundles.",
        "gpubench-nb campaign run parameters/campaign-offers.yaml",
    )
    actions = campaign.add_subparsers(dest="action", required=True)
    p = _command(
        actions,
        "run",
        "freeze once, submit one job per target, resume the rest",
        "A target already finished is not run again.",
        "gpubench-nb campaign run parameters/campaign-offers.yaml --targets here-cpu",
    )
    p.add_argument("campaign", help=CAMPAIGN_HELP)
    p.add_argument("--targets", nargs="+", metavar="ID", help="only these targets")
    p.add_argument(
        "--resubmit",
        nargs="+",
        metavar="ID",
        help="submit these targets again even if their recorded job may still be alive "
        "(a cluster whose sacct cannot tell)",
    )
    p.add_argument("--output-dir", default="outputs", help=OUTPUT_DIR_HELP)
    p.add_argument(
        "--local-executor",
        choices=("local", "debug"),
        default="local",
        help="submitit executor of local targets (debug: in this process, for debugging)",
    )
    p.add_argument("--no-wait", action="store_true", help="return once Slurm jobs are submitted")
    p.add_argument("--run-timeout", type=_positive_int, default=1800, metavar="SECONDS")
    p.set_defaults(handler="campaign run")
    p = _command(
        actions,
        "status",
        "per target: job, state, runs done, bundle verified",
        "Reads the campaign folder; nothing is submitted.",
        "gpubench-nb campaign status parameters/campaign-offers.yaml",
    )
    p.add_argument("campaign", help=CAMPAIGN_HELP)
    p.add_argument("--output-dir", default="outputs", help=OUTPUT_DIR_HELP)
    p.set_defaults(handler="campaign status")
    p = _command(
        actions,
        "report",
        "the merged report of the targets' bundles",
        "Refused while a target is not verified, unless --partial.",
        "gpubench-nb campaign report parameters/campaign-offers.yaml",
    )
    p.add_argument("campaign", help=CAMPAIGN_HELP)
    p.add_argument("--output-dir", default="outputs", help=OUTPUT_DIR_HELP)
    p.add_argument("--out", help="HTML path (default: outputs/<campaign>/report.html)")
    p.add_argument(
        "--partial", action="store_true", help="report the verified targets even if some are not"
    )
    p.set_defaults(handler="campaign report")


SUBCOMMANDS = (
    _add_validate,
    _add_build_model,
    _add_run,
    _add_accept,
    _add_csv_check,
    _add_check_bundle,
    _add_report,
    _add_ledger,
    _add_classify,
    _add_notebooks,
    _add_schema,
    _add_campaign,
)


def build_parser() -> argparse.ArgumentParser:
    """The `gpubench-nb` parser: one small function per subcommand."""
    from gpubench_nb import __version__

    parser = argparse.ArgumentParser(
        prog="gpubench-nb",
        description=TOP_DESCRIPTION,
        epilog=TOP_EPILOG,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpubench-nb {__version__}")
    sub = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return parser
