"""tests.support.models.quick_compiles: two test files use it in one worker process, so it must
leave inductor's configuration as it found it and work a second time (with a monkeypatch undo,
the second use failed: `SubConfigProxy has no attribute 'vec_isa_ok'`)."""

from __future__ import annotations

import os

from tests.support.models import quick_compiles


def test_quick_compiles_twice_in_one_process_restores_inductor_each_time() -> None:
    import torch._inductor.config as inductor

    before = (inductor.cpp.vec_isa_ok, inductor.compile_threads)
    for _ in range(2):
        with quick_compiles():
            assert inductor.cpp.vec_isa_ok is False and inductor.compile_threads == 1
            assert os.environ["TORCHINDUCTOR_VEC_ISA_OK"] == "0"
        assert (inductor.cpp.vec_isa_ok, inductor.compile_threads) == before
