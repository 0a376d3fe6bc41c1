"""A stopped `run` ends with its message and no traceback (R3.6): the kernels it stops leave
asyncio tasks that end in DeadKernelError, which asyncio would print at exit."""

from __future__ import annotations

import asyncio
import gc
import logging

from gpubench_nb import cli
from gpubench_nb.pipeline import interrupt, progress


def test_a_stopped_run_silences_the_stopped_kernels_tasks(monkeypatch, capsys) -> None:
    def stopped(**_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(progress, "run_with_progress", stopped)
    monkeypatch.setattr(interrupt, "terminate_children", lambda: [])
    logger = logging.getLogger("asyncio")
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    assert cli.main(["run", "experiment.yaml"]) == 130
    assert "interrupted" in capsys.readouterr().err

    async def dies() -> None:
        raise RuntimeError("Kernel died")

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        loop = asyncio.new_event_loop()
        task = loop.create_task(dies())
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
        del task  # never retrieved: asyncio logs it when the task goes
        gc.collect()
    finally:
        logger.removeHandler(handler)
    assert not [r for r in records if r.levelno < logging.CRITICAL]
