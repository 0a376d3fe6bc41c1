"""The `gpubench-nb` argument parser: one entry per subcommand in ``COMMANDS``. Each argument's
``dest`` is the parameter name of the library call `cli.py` makes, which passes them on as is."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any


def _within(cast: type, low: float, high: float, expected: str) -> Callable[[str], Any]:
    """An argparse type: a finite ``cast`` value in [low, high], else what is ``expected``."""

    def parse(text: str) -> Any:
        with suppress(ValueError):
            value = cast(text)
            if math.isfinite(value) and low <= value <= high:
                return value
        raise argparse.ArgumentTypeError(f"{text!r}: {expected}")

    return parse


# every metric in METRICS is within [0, 1]
_metric_value = _within(
    float, 0.0, 1.0, "the reference value must be in the metric's range [0, 1] (R1.3), e.g. 0.81"
)
_positive_int = _within(int, 1, math.inf, "must be at least 1 (a whole number: seconds, counts)")


SCHEMA_FILES = ("experiment", "offers", "campaign")
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


def _arg(*names: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One ``add_argument`` call, written down: its names and options."""
    return names, options


@dataclass(frozen=True)
class Command:
    """A subcommand; ``actions``: its own subcommands, like `campaign run`."""

    name: str
    summary: str
    description: str
    example: str
    arguments: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = ()
    actions: tuple[Command, ...] = ()

    def add_to(self, sub: argparse._SubParsersAction, prefix: str = "") -> None:
        p = sub.add_parser(
            self.name,
            help=self.summary,
            description=f"{self.summary}.\n\n{self.description}",
            epilog=f"example:\n  {self.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,  # line breaks kept
        )
        for names, options in self.arguments:
            p.add_argument(*names, **options)
        if self.actions:
            actions = p.add_subparsers(dest="action", required=True)
            for action in self.actions:
                action.add_to(actions, f"{self.name} ")
        else:
            p.set_defaults(handler=prefix + self.name)


EXPERIMENT = _arg(
    "experiment_path",
    metavar="experiment",
    help="the experiment YAML (e.g. parameters/demo.yaml); see `gpubench-nb --help`",
)
OUTPUT_DIR = _arg(
    "--output-dir",
    default="outputs",
    help="folder that receives one bundle per experiment, relative to the current folder "
    "(default: outputs)",
)
CAMPAIGN = _arg(
    "path",
    metavar="campaign",
    help="the campaign YAML (e.g. parameters/campaign-offers.yaml): one experiment, its targets",
)
RUN_TIMEOUT = _arg(
    "--run-timeout",
    dest="run_timeout_seconds",
    type=_positive_int,
    default=1800,
    metavar="SECONDS",
    help="a run silent this long is a dead run (row kept, R3.6)",
)
HTML_OUT = "HTML path outside any finished bundle (default: "

# fmt: off
COMMANDS = (
    Command("validate", "check an experiment before running it",
        "Reads the experiment YAML, every file it names (corpus splits, offers table, model\n"
        "folder) and prints what a run would do. Nothing is written.",
        "gpubench-nb validate parameters/demo.yaml", (EXPERIMENT,)),
    Command("build-model",
        "build the preset model (bow, minilm) from the experiment's train/tune splits",
        "Seeded and repeatable (R1.1); a folder already built from the same declaration is\n"
        "reused. The folder is written at model.path with the usual file modes (readable by\n"
        "colleagues under umask 022).", "gpubench-nb build-model parameters/demo.yaml",
        (EXPERIMENT,
         _arg("--force", action="store_true", help="rebuild over a differing model folder"))),
    Command("run", "run the whole experiment into its bundle",
        "Freezes the declaration (protocol.lock.json), runs every variant 5 cold + 5 warm times,\n"
        "each in a fresh kernel (R3.7), checks every run's predictions (R1.5), prices the\n"
        "packages (R5) and writes report.html. Rerunning resumes: finished runs are kept.",
        "gpubench-nb run parameters/demo.yaml",
        (EXPERIMENT,
         _arg("--variants", nargs="+", metavar="ID", help="run only these variants"),
         OUTPUT_DIR,
         _arg("--fresh", action="store_true",
              help="set the existing bundle aside (renamed, not deleted) and start anew"),
         RUN_TIMEOUT,
         _arg("--protocol", metavar="LOCK",
              help="a frozen protocol.lock.json (a campaign's): refuse unless this machine's "
              "declaration and fingerprints equal it, then freeze the bundle with it (R1.3)"))),
    Command("accept",
        "check one predictions file against the experiment's corpus (R1.5, R1.6)",
        "Every expected ID exactly once, no extra answer, a valid format and the declared\n"
        "quality; the checks are archived as checks.json. Exit 0 accepted, 1 not accepted.",
        "gpubench-nb accept parameters/demo.yaml my-run/predictions.jsonl",
        (EXPERIMENT,
         _arg("predictions",
              help='the predictions file: one {"id": ..., "label": ...} per line'),
         _arg("--reference-value", type=_metric_value, default=None,
              help="the reference variant's value of the metric, in [0, 1] (tolerance base, "
              "R1.3)"),
         _arg("--checks", help="where to write checks.json (default: beside predictions)"))),
    Command("csv-check",
        "check a resultats-bruts.csv against the fixed 38-column schema (R4)",
        "Lists every problem with its line and column; nothing is written.",
        "gpubench-nb csv-check outputs/demo-bow-batch/resultats-bruts.csv",
        (_arg("file", help="the CSV file to check"),)),
    Command("check-bundle",
        "re-derive every check of a finished bundle and verify its manifest (R5.6)",
        "Acceptance, prices and the CSV are recomputed from the kept files and compared.",
        "gpubench-nb check-bundle outputs/demo-bow-batch",
        (_arg("bundle", help="a bundle folder written by `gpubench-nb run`"),)),
    Command("report", "render one HTML report over one or more finished bundles",
        "Each bundle already holds its own report.html; this command compares several (e.g.\n"
        "the same experiment on two machines).",
        "gpubench-nb report outputs/demo-bow-batch outputs/demo-bow-batch-h100",
        (_arg("bundle_dirs", nargs="+", metavar="BUNDLE", help="bundle folders to report on"),
         _arg("--out", help=HTML_OUT + "beside the first bundle, report-<names>.html)"),
         _arg("--allow-mismatch", action="store_true",
              help="merge unlike bundles anyway; the report says so (R2.1)"),
         _arg("--ledger",
              help="a ledger.json from `gpubench-nb ledger --out`, shown (R5.3)"))),
    Command("ledger",
        "count the distinct corpora accepted on one rented machine within its package (R5.3)",
        "The count behind calcul-forfaits --accepted-results: five repeats of one corpus are\n"
        "one accepted corpus, not five.",
        "gpubench-nb ledger outputs/demo-bow-batch --offer h100 --days 7 --lots 1 "
        "--start 2026-12-01",
        (_arg("bundle_dirs", nargs="+", metavar="BUNDLE", help="bundle folders to count"),
         _arg("--offer", dest="offer_id", required=True, metavar="OFFER",
              help="offer id (or its unique prefix, e.g. h100)"),
         _arg("--offers", dest="offers_path", default="parameters/offers.yaml",
              metavar="OFFERS", help="offers table, relative to the current folder (default: "
              "parameters/offers.yaml)"),
         _arg("--days", required=True, type=_positive_int,
              help="package length: 3, 7 or 30 (R5.1)"),
         _arg("--lots", required=True, type=_positive_int, help="billed lots (R5.1, R5.2)"),
         _arg("--start", required=True,
              help="package start, UTC: 2026-12-01 or 2026-12-01T09:00:00Z"),
         _arg("--machine", dest="machines", action="append", metavar="HOST|GPU-UUID",
              help="the rented machine (repeatable); default: the machine of the first bundle"),
         _arg("--format", dest="fmt", choices=("table", "csv", "json"), default="table"),
         _arg("--out", help="also write the ledger as JSON (for `report --ledger`)"))),
    Command("classify",
        "one accepted-or-not pass of a declared variant, sealed as a small bundle (R5.3)",
        "No repeats and no timing: the deliverable the ledger counts.",
        "gpubench-nb classify parameters/demo.yaml --variant b8 "
        "--reference-bundle outputs/demo-bow-batch",
        (EXPERIMENT,
         _arg("--variant", dest="variant_id", required=True, metavar="ID",
              help="a declared variant"),
         OUTPUT_DIR,
         _arg("--reference-bundle", metavar="DIR",
              help="the finished benchmark of this experiment, whose reference variant's "
              "quality the tolerance is measured against (needed unless --variant is the "
              "reference, R1.3)"))),
    Command("notebooks",
        "print the folder of the installed notebooks (for the plain papermill CLI)",
        "The notebooks ship inside the package; run them with papermill from that folder, or\n"
        "copy them somewhere to edit them. Nothing is overwritten.",
        "gpubench-nb notebooks --copy my-notebooks",
        (_arg("--copy", metavar="DIR",
              help="copy them into DIR instead (an existing copy is refused)"),)),
    Command("schema",
        "print the JSON Schema of a file you write (what validate checks key by key)",
        "For an editor: the shipped YAMLs name docs/schema/<file>.json on their first line, so\n"
        "keys complete and typos show as you type. --reference prints docs/REFERENCE.md.",
        "gpubench-nb schema experiment > experiment.schema.json",
        (_arg("file", nargs="?", default="experiment", choices=SCHEMA_FILES, help="which"),
         _arg("--reference", action="store_true", help="the reference page (Markdown)"))),
    Command("campaign", "one frozen experiment on several machines",
        "`campaign run` freezes the experiment once and runs it on each target (Slurm or\n"
        "local); `campaign status` shows each target; `campaign report` merges their bundles.",
        "gpubench-nb campaign run parameters/campaign-offers.yaml", actions=(
        Command("run", "freeze once, submit one job per target, resume the rest",
            "A target already finished is not run again.",
            "gpubench-nb campaign run parameters/campaign-offers.yaml --targets here-cpu",
            (CAMPAIGN,
             _arg("--targets", nargs="+", metavar="ID", help="only these targets"),
             _arg("--resubmit", nargs="+", metavar="ID",
                  help="submit these targets again even if their recorded job may still be "
                  "alive (a cluster whose sacct cannot tell)"),
             OUTPUT_DIR,
             _arg("--local-executor", choices=("local", "debug"), default="local",
                  help="submitit executor of local targets (debug: in this process, for "
                  "debugging)"),
             _arg("--no-wait", dest="wait", action="store_false",
                  help="return once Slurm jobs are submitted"),
             RUN_TIMEOUT)),
        Command("status", "per target: job, state, runs done, bundle verified",
            "Reads the campaign folder; nothing is submitted.",
            "gpubench-nb campaign status parameters/campaign-offers.yaml",
            (CAMPAIGN, OUTPUT_DIR)),
        Command("report", "the merged report of the targets' bundles",
            "Refused while a target is not verified, unless --partial.",
            "gpubench-nb campaign report parameters/campaign-offers.yaml",
            (CAMPAIGN, OUTPUT_DIR,
             _arg("--out", help=HTML_OUT + "outputs/<campaign>/report.html)"),
             _arg("--partial", action="store_true",
                  help="report the verified targets even if some are not"))),
    )),
)
# fmt: on


def build_parser() -> argparse.ArgumentParser:
    """The `gpubench-nb` parser: its subcommands from ``COMMANDS``."""
    from gpubench_nb import __version__

    parser = argparse.ArgumentParser(
        prog="gpubench-nb",
        description=TOP_DESCRIPTION,
        epilog=TOP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpubench-nb {__version__}")
    sub = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_to(sub)
    return parser
