"""Issue 22 §3, §4, §9: the ledger counts only sealed bundles, a corpus is its content, and
the ledger JSON shown by `report --ledger` is consistent with itself (R5.3, R5.6)."""

from __future__ import annotations

import csv
import json
import unicodedata
from pathlib import Path

import pytest

from gpubench_nb.cli import main as cli_main
from gpubench_nb.economics.ledger import build_ledger, read_ledger
from gpubench_nb.errors import EconomicsError
from gpubench_nb.protocol.bundle import write_manifest
from gpubench_nb.protocol.corpus import CorpusItem, corpus_identity, make_corpus
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import build_lock
from gpubench_nb.protocol.records import FORMAT_VERSION
from tests.support.ledger import AFTER, H100, OFFERS_YAML, START, make_bundle, written_ledger

DEMO = Path(__file__).resolve().parents[2] / "parameters" / "demo.yaml"
CORPUS = [("n1", "mutt mail reader", "mail"), ("n2", "gimp paint", "graphics"), ("n3", "x", "web")]


def _counted(bundles: list[Path], **kwargs) -> dict:
    return build_ledger(H100, 7, 1, START, bundles, now=kwargs.pop("now", AFTER), **kwargs)


def _reason(ledger: dict, name: str) -> str:
    return next(e["reason"] for e in ledger["left_out"] if Path(e["bundle"]).name == name)


def _rewrite_csv(bundle: Path, **cells: str) -> None:
    path = bundle / "resultats-bruts.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row.update(cells)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def test_a_csv_edited_to_accepted_is_not_counted(tmp_path: Path) -> None:
    """Was: a bundle whose CSV was edited to turn its rows accepted was counted, while
    check-bundle failed on it. Now its manifest is verified first (R5.6)."""
    bundle = make_bundle(tmp_path, "b", corpus="b", date="2026-12-02", accepted=False)
    _rewrite_csv(bundle, quality_value="0.9", corpus_accepted="true")
    ledger = _counted([bundle])
    assert ledger["accepted_corpora"] == 0
    assert "seal does not verify" in _reason(ledger, "b")
    assert "resultats-bruts.csv: changed since the manifest was written" in _reason(ledger, "b")


def test_run_times_edited_into_the_window_are_not_counted(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, "early", corpus="a", date="2026-11-20")
    record = bundle / "runs" / "b4" / "warm-1" / "run.json"
    record.write_text(json.dumps({"started_utc": "2026-12-02T10:00:00Z"}), encoding="utf-8")
    env = json.loads((bundle / "environment.json").read_text(encoding="utf-8"))
    env["captured_utc"] = "2026-12-02T09:00:00Z"
    (bundle / "environment.json").write_text(json.dumps(env), encoding="utf-8")
    ledger = _counted([bundle])
    assert ledger["accepted_corpora"] == 0
    assert "changed since the manifest was written" in _reason(ledger, "early")


def test_a_bundle_without_a_manifest_is_not_counted(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, "unsealed", corpus="a", date="2026-12-02", sealed=False)
    ledger = _counted([bundle])
    assert ledger["accepted_corpora"] == 0
    assert _reason(ledger, "unsealed").startswith("no MANIFEST.sha256: not a finished bundle")


def test_an_edited_lock_identity_is_not_counted(tmp_path: Path) -> None:
    """The corpus identity sits outside sha256; lock_sha256 covers it (issue 22 §4, §5)."""
    bundle = make_bundle(tmp_path, "x", corpus="a", date="2026-12-02")
    lock = json.loads((bundle / "protocol.lock.json").read_text(encoding="utf-8"))
    lock["corpus_identity"] = "z" * 64
    (bundle / "protocol.lock.json").write_text(json.dumps(lock), encoding="utf-8")
    write_manifest(bundle)  # even re-sealed by hand, the lock's own seal is broken
    ledger = _counted([bundle])
    assert ledger["accepted_corpora"] == 0
    assert "lock_sha256 does not match" in _reason(ledger, "x")


@pytest.mark.parametrize("stamp", ["2026-13-45T99:00:00Z", "yesterday", None])
def test_a_malformed_or_missing_time_is_a_stated_reason(tmp_path: Path, stamp) -> None:
    """Was: a malformed time was silently skipped and the bundle placed by the others."""
    bundle = make_bundle(tmp_path, "t", corpus="a", date="2026-12-02", sealed=False)
    record = bundle / "runs" / "b4" / "warm-2" / "run.json"
    data = json.loads(record.read_text(encoding="utf-8"))
    data["finished_utc"] = stamp
    record.write_text(json.dumps(data), encoding="utf-8")
    write_manifest(bundle)
    ledger = _counted([bundle])
    reason = _reason(ledger, "t")
    assert "runs/b4/warm-2/run.json finished_utc" in reason
    assert ("missing" if stamp is None else repr(stamp)) in reason
    assert ledger["accepted_corpora"] == 0


def test_a_window_that_has_not_begun_does_not_say_still_running(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, "a", corpus="a", date="2026-12-02")
    ledger = _counted([bundle], now=START.replace(day=1, month=11))
    assert ledger["window"]["status"] == "not begun"
    assert "still running" not in ledger["statement"]
    assert "has not begun" in ledger["statement"]


# --- §4: a corpus is its content --------------------------------------------------------------


def test_corpus_identity_is_order_independent_and_canonical() -> None:
    items = [CorpusItem(*t) for t in CORPUS]
    shuffled = [items[2], items[0], items[1]]
    assert corpus_identity(items) == corpus_identity(shuffled)
    assert make_corpus(Path("a"), items).revision != make_corpus(Path("b"), shuffled).revision
    decomposed = unicodedata.normalize("NFD", "café")
    composed = unicodedata.normalize("NFC", "café")
    assert decomposed != composed
    one = [CorpusItem(decomposed, "t", "mail"), *items[1:]]
    two = [CorpusItem(composed, "t", "mail"), *items[1:]]
    assert corpus_identity(one) == corpus_identity(two)
    # and it still tells different content apart
    assert corpus_identity(items) != corpus_identity([*items[:2], CorpusItem("n3", "x", "mail")])
    assert corpus_identity(items) != corpus_identity(items[:2])


def _old_bundle(root: Path, name: str, items: list[tuple[str, str, str]]) -> Path:
    """A bundle as today's main froze it: no corpus_identity, no lock_sha256 in the lock; its
    kept corpus copy (protocol/corpus.jsonl) is what the ledger reads the identity from."""
    corpus = make_corpus(Path("x"), [CorpusItem(*t) for t in items])
    bundle = make_bundle(root, name, corpus="a", date="2026-12-02", sealed=False)
    lock = build_lock(load_experiment(DEMO), {"corpus_revision": corpus.revision})
    for key in ("corpus_identity", "lock_sha256"):
        lock.pop(key, None)
    (bundle / "protocol.lock.json").write_text(json.dumps(lock), encoding="utf-8")
    kept = bundle / "protocol" / "corpus.jsonl"
    kept.parent.mkdir()
    lines = [json.dumps({"id": i, "text": t, "label": lab}) for i, t, lab in items]
    kept.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_manifest(bundle)
    return bundle


def test_the_same_items_in_another_order_count_once(tmp_path: Path) -> None:
    """Was: two accepted bundles of the same items in another order counted as two corpora."""
    first = _old_bundle(tmp_path, "first", CORPUS)
    second = _old_bundle(tmp_path, "second", list(reversed(CORPUS)))
    nfd = [(unicodedata.normalize("NFD", "n1é"), *CORPUS[0][1:]), *CORPUS[1:]]
    nfc = [(unicodedata.normalize("NFC", "n1é"), *CORPUS[0][1:]), *CORPUS[1:]]
    third = _old_bundle(tmp_path, "third", nfd)
    fourth = _old_bundle(tmp_path, "fourth", nfc)
    ledger = _counted([first, second, third, fourth])
    assert ledger["left_out"] == []
    assert ledger["accepted_corpora"] == 2  # CORPUS (both orders) and the é variant (NFC/NFD)
    groups = sorted(len(e["bundles"]) for e in ledger["accepted_corpus_identities"])
    assert groups == [2, 2]


def test_the_lock_records_the_corpus_identity(tmp_path: Path) -> None:
    items = [CorpusItem(*t) for t in CORPUS]
    lock = build_lock(load_experiment(DEMO), {"corpus_revision": "c" * 64}, corpus_identity(items))
    assert lock["corpus_identity"] == corpus_identity(items)
    assert "lock_sha256" in lock


# --- report --ledger: consistent or refused --------------------------------------------------


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return written_ledger(tmp_path)


def test_a_ledger_edited_to_999_is_refused(ledger_file: Path) -> None:
    """Was: `report --ledger` printed a count edited to 999 beside a statement saying 1."""
    assert read_ledger(ledger_file)["accepted_corpora"] == 1
    data = json.loads(ledger_file.read_text(encoding="utf-8"))
    data["accepted_corpora"] = 999
    ledger_file.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(EconomicsError, match="accepted_corpora is 999 but 1 distinct"):
        read_ledger(ledger_file)
    data["accepted_corpora"] = 1
    data["cost_per_accepted_usd_minor"] = 1
    ledger_file.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(EconomicsError, match="cost_per_accepted_usd_minor is 1"):
        read_ledger(ledger_file)


@pytest.mark.parametrize("version", [0, True, 99])
def test_a_ledger_of_an_unknown_version_or_a_key_twice_is_refused(ledger_file, version) -> None:
    """One format_version rule for every file the tool writes, the ledger too (R5.3, R5.6)."""
    data = json.loads(ledger_file.read_text(encoding="utf-8"))
    assert data["format_version"] == FORMAT_VERSION  # stamped under its seal
    ledger_file.write_text(json.dumps({**data, "format_version": version}), encoding="utf-8")
    with pytest.raises(EconomicsError, match=f"key 'format_version'.*got {json.dumps(version)}"):
        read_ledger(ledger_file)
    text = json.dumps(data)[:-1] + ', "accepted_corpora": 999}'
    ledger_file.write_text(text, encoding="utf-8")
    with pytest.raises(EconomicsError, match="'accepted_corpora' is given twice"):
        read_ledger(ledger_file)


# --- §2 / §9: where ledger --out may write ----------------------------------------------------


def _ledger_argv(tmp_path: Path, bundle: Path, out: Path, offers: Path | None = None) -> list:
    if offers is None:
        offers = tmp_path / "offers.yaml"
        offers.write_text(OFFERS_YAML, encoding="utf-8")
    return ["ledger", "--offers", str(offers), "--offer", "h100", "--days", "7", "--lots", "1",
            "--start", "2026-12-01", "--out", str(out), str(bundle)]  # fmt: skip


@pytest.mark.parametrize("where", ["inside", "lock", "offers", "other-bundle"])
def test_ledger_out_never_replaces_a_bundle_file_or_its_own_offers(
    tmp_path: Path, capsys, where: str
) -> None:
    bundle = make_bundle(tmp_path, "a", corpus="a", date="2026-12-02")
    other = make_bundle(tmp_path, "o", corpus="o", date="2026-12-02")
    offers = tmp_path / "offers.yaml"
    offers.write_text(OFFERS_YAML, encoding="utf-8")
    out = {
        "inside": bundle / "ledger.json",
        "lock": bundle / "protocol.lock.json",
        "offers": offers,
        "other-bundle": other / "runs" / "ledger.json",
    }[where]
    before = {p: p.read_bytes() for p in [*bundle.rglob("*"), offers] if p.is_file()}
    assert cli_main(_ledger_argv(tmp_path, bundle, out, offers)) == 2
    err = capsys.readouterr().err
    assert "R5.6" in err and "Fix:" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in before} == before
    assert not (bundle / "ledger.json").exists() and not (other / "runs" / "ledger.json").exists()


def test_ledger_out_naming_a_folder_names_the_users_path(tmp_path: Path, capsys) -> None:
    bundle = make_bundle(tmp_path, "a", corpus="a", date="2026-12-02")
    folder = tmp_path / "reports"
    folder.mkdir()
    assert cli_main(_ledger_argv(tmp_path, bundle, folder)) == 2
    err = capsys.readouterr().err
    assert f"--out {folder} is a folder" in err
    assert ".tmp" not in err and "Traceback" not in err


# --- bundles made by main before issue 22: readable, and counted by their content -----------

MAIN_BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "main-bundle"


def test_a_bundle_from_main_verifies_and_counts_by_its_kept_corpus(tmp_path: Path) -> None:
    """Its lock has no corpus_identity and no lock_sha256: its seal still verifies (sha256,
    experiment_id = the declaration's) and the ledger computes its identity from the kept
    corpus copy that the manifest seals, so it counts as the same corpus as a new bundle."""
    import shutil

    from gpubench_nb.economics.ledger import _corpus_identity
    from gpubench_nb.protocol.audit import check_bundle, kept_corpus, seal_problems
    from gpubench_nb.protocol.lock import LockRecord

    bundle = Path(shutil.copytree(MAIN_BUNDLE, tmp_path / "main-bundle"))
    lock = json.loads((bundle / "protocol.lock.json").read_text(encoding="utf-8"))
    assert "corpus_identity" not in lock and "lock_sha256" not in lock
    assert seal_problems(bundle) == [] and check_bundle(bundle) == []
    kept = kept_corpus(bundle, lock["declaration"])
    assert _corpus_identity(bundle, LockRecord.from_dict(lock)) == corpus_identity(kept.items)
    reordered = list(reversed(kept.items))
    assert _corpus_identity(bundle, LockRecord.from_dict(lock)) == corpus_identity(reordered)
