"""`gpubench-nb`: parse the command line, make one library call, print the outcome."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gpubench_nb.errors import GpubenchError

EXIT_NOT_ACCEPTED = 1
EXIT_INTERRUPTED = 130
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for a writer whose pipe closed


def _validate(args: argparse.Namespace) -> int:
    from gpubench_nb.pipeline.validate import validate_experiment

    validate_experiment(args.experiment, sys.stdout)
    return 0


def _build_model(args: argparse.Namespace) -> int:
    from gpubench_nb.engine.backends import build_model
    from gpubench_nb.protocol.experiment import load_experiment

    path = build_model(load_experiment(args.experiment), force=args.force)
    print(f"model ready: {path}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from gpubench_nb.pipeline.progress import run_with_progress

    summary = run_with_progress(
        args.experiment,
        output_dir=args.output_dir,
        variants=args.variants,
        fresh=args.fresh,
        run_timeout_seconds=args.run_timeout,
        protocol=args.protocol,
        stream=sys.stderr,
    )
    print(summary)
    return 0


def _accept(args: argparse.Namespace) -> int:
    from gpubench_nb.protocol.accept import accept_predictions

    accepted = accept_predictions(
        args.experiment,
        args.predictions,
        checks=args.checks,
        reference_value=args.reference_value,
    )
    print(accepted.text())
    return 0 if accepted.report.corpus_accepted else EXIT_NOT_ACCEPTED


def _csv_check(args: argparse.Namespace) -> int:
    from gpubench_nb.protocol.results import validate_csv

    problems = validate_csv(Path(args.file))
    return _verdict(problems, f"{args.file}: valid (38 columns, R4)", refused=2)


def _check_bundle(args: argparse.Namespace) -> int:
    from gpubench_nb.protocol.audit import check_bundle

    problems = check_bundle(args.bundle)
    ok = f"{args.bundle}: every check re-derived and matching; manifest intact"
    return _verdict(problems, ok, refused=1)


def _verdict(problems: Sequence[str], ok: str, *, refused: int) -> int:
    """Each problem on stderr and exit ``refused``, or ``ok`` on stdout and exit 0."""
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return refused
    print(ok)
    return 0


def _notebooks(args: argparse.Namespace) -> int:
    from gpubench_nb.notebook_files import copy_notebooks, notebooks_dir

    paths = [notebooks_dir()] if args.copy is None else copy_notebooks(args.copy)
    print(*paths, sep="\n")
    return 0


def _report(args: argparse.Namespace) -> int:
    from gpubench_nb.report.comparison import render_comparison

    path = render_comparison(
        args.bundles, args.out, allow_mismatch=args.allow_mismatch, ledger=args.ledger
    )
    print(f"report written: {path}")
    return 0


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
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _classify(args: argparse.Namespace) -> int:
    from gpubench_nb.pipeline.classify import classify, summary

    result = classify(
        args.experiment,
        args.variant,
        output_dir=args.output_dir,
        reference_bundle=args.reference_bundle,
    )
    print(summary(result))
    return 0 if result.accepted else EXIT_NOT_ACCEPTED


def _ledger(args: argparse.Namespace) -> int:
    from gpubench_nb.economics.ledger import ledger_report

    text = ledger_report(
        args.offers,
        args.offer,
        days=args.days,
        lots=args.lots,
        start=args.start,
        bundle_dirs=args.bundles,
        machines=args.machine,
        fmt=args.format,
        out=args.out,
    )
    sys.stdout.write(text)
    if args.out:
        print(f"ledger written: {args.out}", file=sys.stderr)
    return 0


def _campaign_run(args: argparse.Namespace) -> int:
    from gpubench_nb.pipeline.campaign.run import run_campaign

    result = run_campaign(
        args.campaign,
        output_dir=args.output_dir,
        targets=args.targets,
        resubmit=args.resubmit,
        local_executor=args.local_executor,
        wait=not args.no_wait,
        run_timeout_seconds=args.run_timeout,
    )
    sys.stdout.write(result.states_text())
    if result.failed:
        print(
            "some targets failed (see `gpubench-nb campaign status`); run `campaign run` again "
            "to resume them",
            file=sys.stderr,
        )
        return EXIT_NOT_ACCEPTED
    return 0


def _campaign_status(args: argparse.Namespace) -> int:
    from gpubench_nb.pipeline.campaign.view import campaign_status, status_table

    print(status_table(campaign_status(args.campaign, output_dir=args.output_dir)))
    return 0


def _campaign_report(args: argparse.Namespace) -> int:
    from gpubench_nb.pipeline.campaign.view import campaign_report

    path = campaign_report(
        args.campaign, output_dir=args.output_dir, out=args.out, partial=args.partial
    )
    print(f"report written: {path}")
    return 0


def _add_campaign(sub: argparse._SubParsersAction) -> None:
    campaign = sub.add_parser("campaign", help="one frozen experiment on several machines")
    actions = campaign.add_subparsers(dest="action", required=True)
    p = actions.add_parser("run", help="freeze once, submit one job per target, resume the rest")
    p.add_argument("campaign", help="parameters/campaign-*.yaml")
    p.add_argument("--targets", nargs="+", metavar="ID", help="only these targets")
    p.add_argument(
        "--resubmit",
        nargs="+",
        metavar="ID",
        help="submit these targets again even if their recorded job may still be alive "
        "(a cluster whose sacct cannot tell)",
    )
    p.add_argument("--output-dir", default="outputs")
    p.add_argument(
        "--local-executor",
        choices=("local", "debug"),
        default="local",
        help="submitit executor of local targets (debug: in this process, for debugging)",
    )
    p.add_argument("--no-wait", action="store_true", help="return once Slurm jobs are submitted")
    p.add_argument("--run-timeout", type=_positive_int, default=1800, metavar="SECONDS")
    p.set_defaults(func=_campaign_run)
    p = actions.add_parser("status", help="per target: job, state, runs done, bundle verified")
    p.add_argument("campaign")
    p.add_argument("--output-dir", default="outputs")
    p.set_defaults(func=_campaign_status)
    p = actions.add_parser("report", help="the merged report of the targets' bundles")
    p.add_argument("campaign")
    p.add_argument("--output-dir", default="outputs")
    p.add_argument("--out", help="HTML path (default: outputs/<campaign>/report.html)")
    p.add_argument(
        "--partial", action="store_true", help="report the verified targets even if some are not"
    )
    p.set_defaults(func=_campaign_report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpubench-nb", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="validate an experiment YAML and print its summary")
    p.add_argument("experiment")
    p.set_defaults(func=_validate)
    p = sub.add_parser("build-model", help="build the preset model (bow, minilm) from its seed")
    p.add_argument("experiment")
    p.add_argument("--force", action="store_true", help="rebuild over a differing model folder")
    p.set_defaults(func=_build_model)
    p = sub.add_parser("run", help="run the whole schedule into outputs/<experiment_id>")
    p.add_argument("experiment")
    p.add_argument("--variants", nargs="+", metavar="ID", help="run only these variants")
    p.add_argument("--output-dir", default="outputs")
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
    p.set_defaults(func=_run)
    p = sub.add_parser("accept", help="acceptance checks of one predictions file (R1.5, R1.6)")
    p.add_argument("experiment")
    p.add_argument("predictions")
    p.add_argument(
        "--reference-value",
        type=_metric_value,
        default=None,
        help="the reference variant's value of the metric, in [0, 1] (tolerance base, R1.3)",
    )
    p.add_argument("--checks", help="where to write checks.json (default: beside predictions)")
    p.set_defaults(func=_accept)
    p = sub.add_parser("csv-check", help="validate a resultats-bruts.csv (R4)")
    p.add_argument("file")
    p.set_defaults(func=_csv_check)
    p = sub.add_parser("check-bundle", help="re-derive every check of a bundle")
    p.add_argument("bundle")
    p.set_defaults(func=_check_bundle)
    p = sub.add_parser("report", help="render one report over one or more bundles")
    p.add_argument("bundles", nargs="+")
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
    p.set_defaults(func=_report)
    p = sub.add_parser(
        "ledger",
        help="count the distinct corpora accepted on one rented machine within its package "
        "(R5.3); the count behind calcul-forfaits --accepted-results",
    )
    p.add_argument("bundles", nargs="+", metavar="BUNDLE")
    p.add_argument("--offer", required=True, help="offer id (or its unique prefix, e.g. h100)")
    p.add_argument("--offers", default="parameters/offers.yaml", help="offers table")
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
    p.set_defaults(func=_ledger)
    p = sub.add_parser(
        "classify",
        help="one accepted-or-not pass of a declared variant (no repeats, no timing), sealed as "
        "a small bundle the ledger counts (R5.3)",
    )
    p.add_argument("experiment")
    p.add_argument("--variant", required=True, metavar="ID", help="a declared variant")
    p.add_argument("--output-dir", default="outputs")
    p.add_argument(
        "--reference-bundle",
        metavar="DIR",
        help="the finished benchmark of this experiment, whose reference variant's quality the "
        "tolerance is measured against (needed unless --variant is the reference, R1.3)",
    )
    p.set_defaults(func=_classify)
    p = sub.add_parser(
        "notebooks",
        help="print the folder of the installed notebooks (for the plain papermill CLI)",
    )
    p.add_argument(
        "--copy", metavar="DIR", help="copy them into DIR instead (an existing copy is refused)"
    )
    p.set_defaults(func=_notebooks)
    _add_campaign(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below, not at exit
        return code
    except GpubenchError as exc:
        print(f"gpubench-nb {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(
            "interrupted: rerun the same command to resume; finished runs are kept", file=sys.stderr
        )
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _stdout_closed(args.command)
    except IsADirectoryError as exc:
        print(
            f"gpubench-nb {args.command}: {exc.filename} is a folder where a file is expected; "
            "give the file's path",
            file=sys.stderr,
        )
        return 2
    except NotADirectoryError as exc:
        print(
            f"gpubench-nb {args.command}: {exc.filename}: a part of this path is a file where a "
            "folder is expected; give a folder path",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:
        from gpubench_nb.errors import disk_full, storage_error

        if not disk_full(exc):
            raise
        # shutil's copies name the source first and the file being written second
        where = exc.filename2 or exc.filename or "a file of this command"
        print(f"gpubench-nb {args.command}: {storage_error(exc, where)}", file=sys.stderr)
        return 2


def _stdout_closed(command: str) -> int:
    """The reader of our output went away (`gpubench-nb ... | head`): say so, no traceback."""
    # Python would report the same broken pipe again when it flushes stdout at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    print(
        f"gpubench-nb {command}: output stopped: standard output was closed by the reader "
        "(e.g. `| head`); whatever the command writes to files is complete",
        file=sys.stderr,
    )
    return EXIT_STDOUT_CLOSED


if __name__ == "__main__":
    sys.exit(main())
