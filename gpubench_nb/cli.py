"""`gpubench-nb`: parse the command line, make one library call, print the outcome."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpubench_nb.cli_parser import build_parser
from gpubench_nb.errors import GpubenchError
from gpubench_nb.protocol.outputs import refuse_special

EXIT_NOT_ACCEPTED = 1
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for a writer whose pipe closed


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed arguments by name: the parser names each as the library call's parameter."""
    return {k: v for k, v in vars(args).items() if k not in ("command", "action", "handler")}


def _validate(args: argparse.Namespace) -> None:
    from gpubench_nb.pipeline.validate import validate_experiment

    validate_experiment(args.experiment_path, sys.stdout)


def _build_model(args: argparse.Namespace) -> None:
    from gpubench_nb.engine.backends import build_model
    from gpubench_nb.engine.backends.build import build_summary
    from gpubench_nb.protocol.experiment import load_experiment

    exp = load_experiment(args.experiment_path)
    path = build_model(exp, force=args.force)
    print(f"model ready: {Path(path).resolve()}", *build_summary(exp, path), sep="\n")


def _run(args: argparse.Namespace) -> None:
    from gpubench_nb.pipeline.interrupt import stop_on_signals, terminate_children
    from gpubench_nb.pipeline.progress import run_with_progress

    try:  # SIGTERM, SIGUSR2, SIGHUP are heard as Ctrl-C is: recorded, redone, non-zero (R3.6)
        with stop_on_signals(chain=()):
            summary = run_with_progress(**_given(args), stream=sys.stderr)
    except KeyboardInterrupt:
        terminate_children()  # no kernel goes on writing into the run to be redone
        # the stopped kernels' client tasks end in DeadKernelError: no traceback for that at exit
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        raise
    print(summary)


def _accept(args: argparse.Namespace) -> int:
    from gpubench_nb.protocol.accept import accept_predictions

    accepted = accept_predictions(**_given(args))
    print(accepted.text())
    return 0 if accepted.report.corpus_accepted else EXIT_NOT_ACCEPTED


def _csv_check(args: argparse.Namespace) -> int | None:
    from gpubench_nb.protocol.results import validate_csv

    return _verdict(validate_csv(Path(args.file)), f"{args.file}: valid (38 columns, R4)", 2)


def _check_bundle(args: argparse.Namespace) -> int | None:
    from gpubench_nb.economics.reprice import verify_bundle

    ok = f"{args.bundle}: every check re-derived and matching; manifest intact"
    return _verdict(verify_bundle(args.bundle), ok, 1)


def _verdict(problems: Sequence[str], ok: str, refused: int) -> int | None:
    """Each problem on stderr and exit ``refused``, or ``ok`` on stdout (exit 0)."""
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return refused
    print(ok)


def _notebooks(args: argparse.Namespace) -> None:
    from gpubench_nb.kernel import copy_notebooks, notebooks_dir
    from gpubench_nb.protocol.outputs import check_output_folder

    if args.copy is None:
        paths = [notebooks_dir()]
    else:  # the one output guard first (R5.6: never inside a bundle, symlinks resolved)
        paths = copy_notebooks(check_output_folder(Path(args.copy), option="--copy"))
    print(*paths, sep="\n")


def schemas() -> dict[str, dict]:
    """The declarations validate checks the files against, by file (``gpubench-nb schema``)."""
    from gpubench_nb.economics.offers import OFFERS
    from gpubench_nb.pipeline.campaign.file import CAMPAIGN
    from gpubench_nb.protocol.experiment_spec import EXPERIMENT

    return {"experiment": EXPERIMENT, "offers": OFFERS, "campaign": CAMPAIGN}


def _schema(args: argparse.Namespace) -> None:
    import json

    from gpubench_nb.protocol import schema

    if args.reference:
        print(schema.reference(schemas()), end="")
    else:
        document = schema.document(f"gpubench-nb {args.file} file", schemas()[args.file])
        print(json.dumps(document, indent=1, ensure_ascii=False))


def _report(args: argparse.Namespace) -> None:
    from gpubench_nb.report.render import executed_notebook, render_comparison

    path = render_comparison(**_given(args))
    print(f"report written: {Path(path).resolve()}")
    print(f"its notebook:   {executed_notebook(path)} (what made it; rerun a cell there)")


def _classify(args: argparse.Namespace) -> int:
    from gpubench_nb.pipeline.classify import classify, summary

    print(summary(result := classify(**_given(args))))
    return 0 if result.accepted else EXIT_NOT_ACCEPTED


def _ledger(args: argparse.Namespace) -> None:
    from gpubench_nb.economics.ledger import ledger_report

    sys.stdout.write(ledger_report(**_given(args)))
    if args.out:
        print(f"ledger written: {Path(args.out).resolve()}", file=sys.stderr)


def _campaign_run(args: argparse.Namespace) -> int:
    from gpubench_nb.pipeline.campaign.run import run_campaign

    result = run_campaign(**_given(args))
    sys.stdout.write(result.states_text())
    if result.failed:
        print(
            "some targets failed (see `gpubench-nb campaign status`); run `campaign run` again "
            "to resume them",
            file=sys.stderr,
        )
    return EXIT_NOT_ACCEPTED if result.failed else 0


def _campaign_status(args: argparse.Namespace) -> None:
    from gpubench_nb.pipeline.campaign.view import campaign_status, status_table

    print(status_table(campaign_status(**_given(args))))


def _campaign_report(args: argparse.Namespace) -> None:
    from gpubench_nb.pipeline.campaign.view import campaign_report

    print(f"report written: {Path(campaign_report(**_given(args))).resolve()}")


# Each command's one library call, by its parser's name; a handler returns its exit code (None: 0)
HANDLERS: dict[str, Callable[[argparse.Namespace], int | None]] = {
    "validate": _validate,
    "build-model": _build_model,
    "run": _run,
    "accept": _accept,
    "csv-check": _csv_check,
    "check-bundle": _check_bundle,
    "report": _report,
    "ledger": _ledger,
    "classify": _classify,
    "notebooks": _notebooks,
    "schema": _schema,
    "campaign run": _campaign_run,
    "campaign status": _campaign_status,
    "campaign report": _campaign_report,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = HANDLERS[args.handler]  # the parser names each command's handler
    try:
        refuse_special(_given(args))  # an empty path, a FIFO or device: refused, never opened
        code = handler(args) or 0
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below, not at exit
        return code
    except GpubenchError as exc:
        print(f"gpubench-nb {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        note = getattr(exc, "note", None)  # what `run` recorded and kept (R3.6)
        default = "interrupted: rerun the same command to resume; finished runs are kept"
        print(note or default, file=sys.stderr)
        if note:
            print(f"resume: {_resume_command(argv)}", file=sys.stderr)
        name = getattr(exc, "signal_name", "SIGINT")  # 128 + the signal, as a shell reports
        return 128 + getattr(signal, name, signal.SIGINT)
    except BrokenPipeError:
        return _stdout_closed(args.command)
    except OSError as exc:
        text = _os_error_text(exc)
        if text is None:
            raise
        print(f"gpubench-nb {args.command}: {text}", file=sys.stderr)
        return 2


def _os_error_text(exc: OSError) -> str | None:
    """What a command says of a path of the wrong kind or a full disk (exit 2); None: a bug."""
    from gpubench_nb.errors import disk_full, storage_error

    if isinstance(exc, IsADirectoryError):
        return f"{exc.filename} is a folder where a file is expected; give the file's path"
    if isinstance(exc, NotADirectoryError):
        return f"{exc.filename}: a part of this path is a file, not a folder; give a folder path"
    # shutil's copies name the source first and the file being written second
    where = exc.filename2 or exc.filename or "a file of this command"
    return str(storage_error(exc, where)) if disk_full(exc) else None


def _resume_command(argv: Sequence[str] | None) -> str:
    """The command as typed, without --fresh (which would set the kept runs aside)."""
    import shlex

    given = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["gpubench-nb", *(a for a in given if a != "--fresh")])


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
