"""Campaigns on a real three-node Slurm (n1 in partition ``a``; n2, n3 in ``b``): jobs spread
over the nodes, the controller restarted, a node marked down, a node killed, two campaigns at once.

One story, in one cluster (``slurm_cluster.THREE_NODES``, no accounting), each step timed by
what the previous one left on disk. Campaign ``spread`` has three targets: ``on-a`` (partition
``a``) and two exclusive targets of ``b``, ``node-down`` and ``node-killed``, whose first job
hangs in its warm run (a setup line sets ``GPUBENCH_FAULT`` once) so that a node can fail
under it mid-run. Campaign ``beside`` (``a`` and ``b``, the same experiment and offers table)
runs at the same time from another process. With both waiting: the controller is stopped and
started again (both runs say "controller unreachable" and go on; ``campaign status`` says it
with what to do); ``node-down``'s node is marked down (``scontrol update state=down``): Slurm
requeues its job, which resumes its bundle; ``node-killed``'s node loses its slurmd and job
processes to SIGKILL, and its job (``--no-requeue``) is recorded failed with the node's reason,
its half-written bundle refused by the merged report, until ``campaign run`` again resumes it.
Runs only under ``CI=true`` or ``GPUBENCH_TEST_SLURM=1`` (it starts system daemons); skips
where a real Slurm cannot be started, except under ``CI=true``, where it fails instead.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("submitit", reason="campaigns need submitit: pip install '.[slurm]'")

from gpubench_nb.errors import BundleError
from gpubench_nb.pipeline.campaign.state import verification
from gpubench_nb.pipeline.campaign.view import campaign_report, campaign_status, status_table
from gpubench_nb.protocol.bundle import MANIFEST_NAME
from gpubench_nb.protocol.results import read_rows
from tests.support import slurm_cluster
from tests.support.experiments import campaign_experiment

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
STORY_TIMEOUT_SECONDS = 600
DOWN_REASON = "gpubench test: node marked down"
HANG = "hang@batch:1@phase:warm"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm_cluster.Cluster]:
    root = tmp_path_factory.mktemp("slurm3")
    with slurm_cluster.running(root, slurm_cluster.THREE_NODES) as started:
        yield started


def _target(
    target_id: str, partition: str, folder: Path, *, hang_once: bool = False, **slurm: Any
) -> dict[str, Any]:
    reach = {"partition": partition, "gpus": 0, "time_limit_minutes": 30, **slurm}
    if hang_once:  # the first job only: a requeued or a new one runs clean
        mark = folder / f"hung-once-{target_id}"
        reach["setup"] = [
            f"if [ ! -e {mark} ]; then touch {mark}; export GPUBENCH_FAULT='{HANG}'; fi"
        ]
    return {"id": target_id, "offer": {"id": "h100-example", "days": 7, "lots": 1}, "slurm": reach}


def _campaigns(folder: Path, data_dir: Path) -> tuple[Path, Path]:
    """The tiny bow experiment (1 cold + 1 warm run) and two campaigns of it, one offers table."""
    campaign_experiment(folder, "multinode", data_dir, "real-Slurm test, one cold and one warm run")
    offers = str(REPO / "parameters" / "offers.yaml")
    spread = [
        _target("on-a", "a", folder),
        _target("node-down", "b", folder, hang_once=True),
        _target("node-killed", "b", folder, hang_once=True, sbatch={"no-requeue": True}),
    ]
    beside = [_target("beside", "a", folder, exclusive=False)]
    paths = []
    for campaign_id, targets in (("spread", spread), ("beside", beside)):
        data = {"campaign_id": campaign_id, "experiment": "experiment.yaml", "offers": offers}
        path = folder / f"campaign-{campaign_id}.yaml"
        path.write_text(yaml.safe_dump({**data, "targets": targets}, sort_keys=False), "utf-8")
        paths.append(path)
    return paths[0], paths[1]


class _Story:
    """The campaign processes and the deadline of the whole story."""

    def __init__(self, cluster: slurm_cluster.Cluster, folder: Path) -> None:
        self.cluster, self.folder, self.out = cluster, folder, folder / "outputs"
        self.deadline = time.monotonic() + STORY_TIMEOUT_SECONDS
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, campaign: Path) -> None:
        command = [sys.executable, "-m", "gpubench_nb.cli", "campaign", "run", str(campaign)]
        with open(self.folder / f"{name}.log", "wb") as log:
            self.processes[name] = subprocess.Popen(
                [*command, "--output-dir", str(self.out)],
                cwd=self.folder,
                env=self.cluster.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(encoding="utf-8", errors="replace")

    def finish(self, name: str) -> tuple[int, str]:
        """Wait for a `campaign run` to end: its exit code and output."""
        process = self.processes.pop(name)
        self.until(lambda: process.poll() is not None, f"`campaign run` {name} to end")
        return process.returncode, self.log(name)

    def until(self, ready: Callable[[], Any], what: str) -> Any:
        while not (found := ready()):
            for name, process in self.processes.items():
                if process.poll() is not None and process.returncode != 0:
                    pytest.fail(f"`campaign run` {name} ended before {what}:\n{self.log(name)}")
            if time.monotonic() > self.deadline:
                logs = "\n".join(f"--- {n}\n{self.log(n)}" for n in self.processes)
                pytest.fail(f"gave up waiting for {what}\n{logs}\n{self.cluster.logs()}")
            time.sleep(0.3)
        return found

    def entry(self, campaign: str, target: str) -> dict[str, Any]:
        path = self.out / campaign / "campaign.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))["targets"].get(target) or {}
        except (OSError, ValueError, KeyError):
            return {}

    def warm_started(self, target: str) -> bool:
        return (self.out / "spread" / target / "runs" / "b4" / "warm-1" / "run.json").exists()

    def stop(self) -> None:
        for process in list(self.processes.values()):
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def story(
    cluster: slurm_cluster.Cluster, tmp_path_factory: pytest.TempPathFactory, data_dir: Path
) -> Iterator[dict[str, Any]]:
    started = time.monotonic()
    folder = tmp_path_factory.mktemp("multinode")
    spread, beside = _campaigns(folder, data_dir)
    run = _Story(cluster, folder)
    seen: dict[str, Any] = {"cluster": cluster, "spread": spread, "beside": beside, "out": run.out}
    spread_dir = run.out / "spread"
    try:
        run.start("spread", spread)
        run.until(lambda: run.entry("spread", "on-a").get("state") == "completed", "on-a")
        seen["on-a before"] = {
            name: ((spread_dir / "on-a" / name).read_bytes(), _mtime(spread_dir / "on-a" / name))
            for name in (MANIFEST_NAME, "resultats-bruts.csv")
        }
        for target in ("node-down", "node-killed"):  # both hang in their warm run
            run.until(lambda t=target: run.warm_started(t), f"{target}'s warm run")
        jobs = {t: run.entry("spread", t)["job_id"] for t in ("node-down", "node-killed")}
        nodes = {t: cluster.node_of(job) for t, job in jobs.items()}
        seen["first jobs"], seen["first nodes"] = jobs, nodes
        run.start("beside", beside)  # the second campaign, while the first one waits
        run.until(lambda: "submitted job" in run.log("beside"), "beside's submission")
        # waiting on node-down (on-a is done), spread knows where its job runs
        run.until(lambda: run.entry("spread", "node-down").get("node"), "node-down's node")
        seen["times"] = {"jobs spread and hung": time.monotonic() - started}
        # -- the controller restarted mid-campaign
        cluster.stop_controller()
        for name in ("spread", "beside"):
            run.until(lambda n=name: "controller unreachable" in run.log(n), f"{name} unreachable")
        seen["status, controller down"] = campaign_status(spread, output_dir=run.out)
        cluster.start_controller()
        seen["times"]["controller restarted"] = time.monotonic() - started
        # -- node-down's node marked down by an admin, node-killed's node killed outright
        cluster.run(
            "scontrol", "update", f"nodename={nodes['node-down']}", "state=down",
            f"reason={DOWN_REASON}",
        )  # fmt: skip
        seen["killed pids"] = cluster.kill_node(nodes["node-killed"])
        run.until(lambda: run.entry("spread", "node-down").get("requeued"), "the requeue noted")
        cluster.run("scontrol", "update", f"nodename={nodes['node-down']}", "state=resume")
        # node-killed (--no-requeue) ends NODE_FAIL once the controller finds its node dead
        status = lambda: campaign_status(spread, output_dir=run.out)  # noqa: E731
        seen["status, one failed"] = run.until(
            lambda: (rows := status())[2]["state"].startswith("failed") and rows,
            "node-killed's NODE_FAIL",
        )
        seen["times"]["node failed"] = time.monotonic() - started
        seen["half-written"] = verification(spread_dir / "node-killed", _lock(spread_dir))
        try:
            campaign_report(spread, output_dir=run.out)
        except BundleError as exc:
            seen["report refused"] = str(exc)
        run.processes["spread"].send_signal(signal.SIGINT)  # Ctrl-C: stops the waiting only
        seen["spread"] = run.finish("spread")
        # -- `campaign run` again: waits for node-down, records and resubmits node-killed
        run.start("again", spread)
        run.until(lambda: run.entry("spread", "node-killed").get("history"), "the resubmission")
        seen["failed entry"] = run.entry("spread", "node-killed")["history"][0]
        cluster.start_slurmd(nodes["node-killed"])  # back in service (ReturnToService=1)
        seen["again"], seen["beside"] = run.finish("again"), run.finish("beside")
        seen["times"]["both campaigns finished"] = time.monotonic() - started
    finally:
        run.stop()
    seen["status, end"] = campaign_status(spread, output_dir=run.out)
    print(f"\nthree-node Slurm story: {seen['times']} (s)")
    print(status_table(seen["status, one failed"]))
    print(status_table(seen["status, end"]))
    print(status_table(campaign_status(beside, output_dir=run.out)))
    yield seen


def _mtime(path: Path) -> int:
    return path.stat().st_mtime_ns


def _lock(campaign_dir: Path) -> str:
    return json.loads((campaign_dir / "campaign.json").read_text(encoding="utf-8"))["lock_sha256"]


def _environment(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "environment.json").read_text(encoding="utf-8"))


def test_targets_spread_over_both_partitions_and_merge_into_one_report(
    story: dict[str, Any],
) -> None:
    out = story["out"]
    assert story["again"][0] == 0, story["again"][1]
    assert story["beside"][0] == 0, story["beside"][1]  # two campaigns at once both finish
    where = {}
    for campaign, targets in (("spread", ("on-a", "node-down", "node-killed")),
                              ("beside", ("beside",))):  # fmt: skip
        state = json.loads((out / campaign / "campaign.json").read_text(encoding="utf-8"))
        for target in targets:
            bundle = out / campaign / target
            assert verification(bundle, state["lock_sha256"]) == "verified", target  # check-bundle
            slurm = _environment(bundle)["slurm"]  # R2.4: the node and job it was measured in
            assert slurm["node"] == slurm["node_list"] and slurm["job_id"], slurm
            assert slurm["partition"] == ("b" if target.startswith("node") else "a")
            where[target] = (slurm["node"], slurm["job_id"])
            assert state["targets"][target]["state"] == "completed"
        assert (out / campaign / "report.html").is_file()  # the merged report
    print(f"\nnode, job of each bundle: {where}")
    assert where["on-a"][0] == where["beside"][0] == "n1"
    assert where["node-down"] == (
        story["first nodes"]["node-down"],
        story["first jobs"]["node-down"],
    )
    assert where["node-killed"] == (
        story["first nodes"]["node-killed"],
        story["first jobs"]["node-killed"],
    )  # environment.json is written by the first job; each run's record names its own
    assert "every target completed; merged report" in story["again"][1]
    assert "every target completed; merged report" in story["beside"][1]


def test_a_node_marked_down_requeues_its_job_which_resumes_the_bundle(
    story: dict[str, Any],
) -> None:
    entry = json.loads((story["out"] / "spread" / "campaign.json").read_text())["targets"]
    down = entry["node-down"]
    node = story["first nodes"]["node-down"]
    assert down["attempts"] == 1 and down["job_id"] == story["first jobs"]["node-down"]
    assert down["requeued"] == f"requeued by Slurm after node {node} down: {DOWN_REASON}"
    # the node's SIGTERM reached the job: the warm run was discarded, recorded, redone (R3.6)
    assert [(e["run"], e["signal"]) for e in down["interruptions"]] == [("b4/warm-1", "SIGTERM")]
    rows = read_rows(story["out"] / "spread" / "node-down" / "resultats-bruts.csv")
    assert sorted(r["phase"] for r in rows) == ["cold", "load", "warm"]
    warm = next(r for r in rows if r["phase"] == "warm")
    assert "R3.6: 1 earlier attempt of this run interrupted by SIGTERM" in warm["notes"]
    record = json.loads(
        (story["out"] / "spread/node-down/runs/b4/warm-1/run.json").read_text("utf-8")
    )
    assert record["environment"]["slurm"]["restart_count"] == 1  # the requeued job redid it
    log = story["spread"][1]
    assert f"node-down: job {down['job_id']} requeued by Slurm after node {node} down" in log


def test_a_killed_node_fails_its_target_with_the_node_reason_and_a_rerun_resumes_it(
    story: dict[str, Any],
) -> None:
    node = story["first nodes"]["node-killed"]
    failed = story["failed entry"]
    assert failed["job_id"] == story["first jobs"]["node-killed"] and failed["state"] == "failed"
    assert "NODE_FAIL" in failed["error"] and "stopped from outside" in failed["error"]
    assert f"node {node} down" in failed["error"] and "Not responding" in failed["error"]
    # the half-written bundle is neither sealed nor merged
    assert story["half-written"] == "not finished (no manifest)"
    assert "node-killed: not finished (no manifest)" in story["report refused"]
    entry = json.loads((story["out"] / "spread" / "campaign.json").read_text())["targets"]
    killed = entry["node-killed"]
    assert killed["attempts"] == 2 and killed["state"] == "completed"
    rows = read_rows(story["out"] / "spread" / "node-killed" / "resultats-bruts.csv")
    assert sorted(r["phase"] for r in rows) == ["cold", "load", "warm"]  # the cold run kept
    cold = next(r for r in rows if r["phase"] == "cold")
    assert f"job={failed['job_id']}" in cold["notes"]  # measured by the first job, not redone


def test_nothing_finished_is_lost_or_sealed_again(story: dict[str, Any]) -> None:
    finished = story["out"] / "spread" / "on-a"
    for name, (content, mtime) in story["on-a before"].items():
        assert (finished / name).read_bytes() == content, name
        assert _mtime(finished / name) == mtime, name
    entry = json.loads((story["out"] / "spread" / "campaign.json").read_text())["targets"]
    assert entry["on-a"]["attempts"] == 1 and not entry["on-a"].get("history")
    assert "on-a: submitted" not in story["again"][1]  # the rerun submitted node-killed only
    assert story["again"][1].count("submitted job") == 1


def test_a_restarted_controller_is_said_unreachable_then_waited_for(
    story: dict[str, Any],
) -> None:
    rows = {row["target"]: row for row in story["status, controller down"]}
    for target in ("node-down", "node-killed"):
        assert rows[target]["state"] == "submitted (Slurm: UNKNOWN)", rows[target]
        error = rows[target]["error"]
        assert error.startswith("controller unreachable (scontrol:"), error
        assert "neither marked failed nor submitted again" in error and "scontrol ping" in error
    assert rows["on-a"]["state"] == "completed"
    for name in ("spread", "beside"):
        log = story[name][1]
        assert ": UNKNOWN (controller unreachable" in log, name
        assert log.count("controller unreachable") == 1, log  # said once, not per poll
    entry = json.loads((story["out"] / "spread" / "campaign.json").read_text())["targets"]
    assert entry["node-down"]["attempts"] == 1  # never marked failed, never resubmitted


def test_status_says_what_happened_in_one_line_per_target(story: dict[str, Any]) -> None:
    table = status_table(story["status, one failed"]).splitlines()
    header, rows, notes = table[0], table[1:4], table[4:]
    assert header.split()[:6] == ["target", "reach", "offer", "job", "node", "state"]
    assert [row.split()[0] for row in rows] == ["on-a", "node-down", "node-killed"]
    said: dict[str, str] = {}  # the first line below the table of each target says it all
    for line in notes:
        said.setdefault(line.split(":")[0], line)
    assert "requeued by Slurm after node" in said["node-down"]
    assert "NODE_FAIL" in said["node-killed"] and "Not responding" in said["node-killed"]
    assert " failed (Slurm: NODE_FAIL" in rows[2]


def test_no_daemon_outlives_the_cluster(cluster: slurm_cluster.Cluster) -> None:
    cluster.stop()
    assert not slurm_cluster._processes_of(cluster.conf)
    assert cluster.run("scontrol", "ping", check=False).returncode != 0
