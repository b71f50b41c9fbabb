"""Hostile checkpoints: nothing resumes silently wrong, a checkpoint cannot run code, one writer per output.

* A checkpoint proves itself: one SHA-256 covers its header and payload, so any changed byte is
  refused (a hypothesis property over every byte and every header field); a checkpoint re-signed
  after a change (a forged digest) is still checked field by field, by type and by sense, against
  the run's configuration. Every refusal is exit code 2 with one line on stderr naming the field,
  no traceback, the inputs byte-identical and no file left behind.
* A checkpoint is JSON data: no pickle is loaded during a resume, and a pickle checkpoint of an
  older version is refused without being loaded.
* One writer per checkpoint directory and per dataset directory (a lock naming the holder's PID);
  temporary files are removed only when their writer is gone; ``resume`` runs the output guard of
  ``run --out`` and removes the staging directories a killed write of the same run left.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.errors import InputError
from evolve.search.checkpoint import CHECKPOINT_FILE, LEGACY_CHECKPOINT_FILE, read_checkpoint, read_header
from evolve.search.config import resolve
from evolve.search.run_files import run_dir_name
from evolve.search.rundir import resume, run
from evolve.search.state import TIMING_COLUMNS
from evolve.traces.io import write_dataset
from evolve.files.atomic import remove_stale_temps
from evolve.files.locks import DirectoryLock, mkdtemp_locked, mkstemp_locked
from evolve.traces.synth.independent import generate_split

ROOT = Path(__file__).resolve().parents[1]
#: A small run: a checkpoint at generation 2 of 4 (it is stopped there).
SETTINGS = {"population": 20, "generations": 4, "migration_interval": 2, "seed": 1}


def _outcome(run_dir: Path) -> tuple:
    champion = json.loads((run_dir / "champion.json").read_text())
    hof = json.loads((run_dir / "hall_of_fame.json").read_text())
    rows = (run_dir / "logbook.csv").read_text().splitlines()
    header = rows[0].split(",")
    keep = [i for i, name in enumerate(header) if name not in TIMING_COLUMNS]
    return (champion["expression"], champion["features"], champion["metrics"], hof,
            [[r.split(",")[i] for i in keep] for r in rows])


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """The dataset, the outcome of the run left alone, and the checkpoint directory of the same run
    stopped after generation 2 (with its run directory)."""
    root = tmp_path_factory.mktemp("hostile-ckpt")
    data = root / "data"
    write_dataset(data, {"train": generate_split(60, 1), "valid": generate_split(20, 2)}, {"generator": "independent"})
    reference = run(resolve({"data": str(data), "out": str(root / "ref"), **SETTINGS}))
    rows: list = []
    stopped = run(resolve({"data": str(data), "out": str(root / "stopped"), **SETTINGS}),
                  progress=rows.append, stop=lambda: len(rows) > 2)
    assert stopped.checkpoint_dir is not None and read_header(stopped.checkpoint_dir / CHECKPOINT_FILE)["generation"] == 2
    return {"data": data, "reference": _outcome(reference.run_dir), "partial": stopped.checkpoint_dir,
            "run_dir": stopped.run_dir, "root": root}


def _copy(made: dict, tmp_path: Path) -> Path:
    """A copy of the stopped run's checkpoint directory in ``tmp_path/out``."""
    partial = tmp_path / "out" / made["partial"].name
    shutil.copytree(made["partial"], partial)
    return partial


def _files(*roots: Path) -> dict[str, str]:
    """{path: sha256} of every file (and every directory, as "") below ``roots``."""
    state = {}
    for root in roots:
        for p in sorted(Path(root).rglob("*")):
            state[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
    return state


def _refused(target: Path, *args: str, watch: tuple[Path, ...] = (), culprits: tuple[str, ...] = ()) -> str:
    """``python -m evolve resume TARGET``: exit 2, one line naming ``culprits``, no traceback, ``watch``
    unchanged (no file changed, added or removed). Returns the line."""
    before = _files(*watch)
    res = CliRunner().invoke(evolve_cli, ["resume", str(target), "--no-progress", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert _files(*watch) == before
    for culprit in culprits:
        assert culprit in lines[0], (culprit, lines[0])
    return lines[0]


def _forge(path: Path, edit_head=None, edit_data=None) -> None:
    """Change a checkpoint's header or payload and sign it again (a valid SHA-256): only the checks by
    type and by sense stand between it and a resume."""
    magic, line, payload = path.read_bytes().split(b"\n", 2)
    head = json.loads(line)
    data = json.loads(payload) if payload else None
    if edit_head is not None:
        edit_head(head)
    if edit_data is not None:
        edit_data(data)
    payload = b"" if data is None else json.dumps(data, separators=(",", ":")).encode()
    head["payload_bytes"], head["sha256"] = len(payload), "0" * 64
    line = json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(magic + b"\n" + line + b"\n" + payload).hexdigest()
    line = line.replace(b'"sha256":"' + b"0" * 64 + b'"', b'"sha256":"' + digest.encode() + b'"')
    path.write_bytes(magic + b"\n" + line + b"\n" + payload)


# --- a checkpoint proves itself --------------------------------------------------------------------

def test_a_checkpoint_is_json_data_with_one_digest(made):
    raw = (made["partial"] / CHECKPOINT_FILE).read_bytes()
    magic, line, payload = raw.split(b"\n", 2)
    assert magic == b"specdec-evolve checkpoint 2" and not (made["partial"] / LEGACY_CHECKPOINT_FILE).exists()
    head, data = json.loads(line), json.loads(payload)
    assert set(data) >= {"islands", "logbook", "caches", "warm"} and len(data["logbook"]) == 3
    assert isinstance(data["islands"][0]["population"][0]["tree"], str)
    blank = line.replace(head["sha256"].encode(), b"0" * 64)
    assert hashlib.sha256(magic + b"\n" + blank + b"\n" + payload).hexdigest() == head["sha256"]


def test_a_changed_header_is_refused_by_the_digest(made, tmp_path):
    partial = _copy(made, tmp_path)
    path = partial / CHECKPOINT_FILE
    raw = path.read_bytes()
    old = b'"features":' + json.dumps(read_header(path)["features"], separators=(",", ":")).encode()
    assert raw.count(old) == 1
    path.write_bytes(raw.replace(old, b'"features":["draft_prob","target_prob"]'))
    _refused(partial, watch=(tmp_path, made["data"]), culprits=("SHA-256", "altered"))


def _set(*keys, value):
    """An editor setting ``data[k1][k2]... = value``."""
    def edit(data):
        for k in keys[:-1]:
            data = data[k]
        data[keys[-1]] = value
    return edit


def _cut_population(data):
    data["islands"][0]["population"] = data["islands"][0]["population"][:5]


def _generation_1000(data):
    data["generation"] = 1000
    for island in data["islands"]:
        island["generation"] = 1000


FORGED = {
    "two features": (_set("features", value=["draft_prob", "target_prob"]), None, ("'features'",)),
    "features as a string": (_set("features", value="draft_prob"), None, ("'features'",)),
    "an unknown feature": (_set("features", value=["draft_prob", "bogus"]), None, ("'features'", "bogus")),
    "generation 1000 of 4": (_set("generation", value=1000), _generation_1000, ("'generation'", "1000")),
    "generations changed": (_set("generations", value=100), None, ("'generations'",)),
    "an emptied logbook": (None, _set("logbook", value=[]), ("'logbook'", "0 rows")),
    "a short logbook": (None, lambda d: d.__setitem__("logbook", d["logbook"][:2]), ("'logbook'",)),
    "a population cut to 5": (None, _cut_population, ("'islands[0].population'", "5 individuals", "20")),
    "no islands": (None, _set("islands", value=[]), ("'islands'",)),
    "data_sha256 a list": (_set("data_sha256", value=["x"]), None, ("'data_sha256'",)),
    "data_sha256 not hex": (_set("data_sha256", "train", value="x" * 64), None, ("'data_sha256.train'",)),
    "an extra config key": (_set("config", "bogus_key", value=1), None,
                            ("the checkpoint's configuration is not valid", "'bogus_key'")),
    "population 'abc'": (_set("config", "population", value="abc"), None,
                         ("the checkpoint's configuration is not valid", "key 'population'", "expected an integer")),
    "a null setting": (_set("config", "seed", value=None), None, ("configuration is not valid", "key 'seed'")),
    "an extra header field": (_set("bogus", value=1), None, ("'bogus'",)),
    "a bad creation time": (_set("created", value="yesterday"), None, ("'created'",)),
    "interrupted differs": (None, _set("interrupted", value=False), ("'interrupted'",)),
    "a bad hall of fame size": (None, _set("islands", 0, "hof", "maxsize", value=5), ("'islands[0].hof.maxsize'",)),
    "a tree reading another feature": (None, _set("islands", 0, "population", 0, "tree", value="overlap"),
                                       ("'islands[0].population[0].tree'", "overlap")),
    "a tree that does not parse": (None, _set("islands", 0, "population", 1, "tree", value="__import__('os')"),
                                   ("'islands[0].population[1].tree'",)),
    "fitness as text": (None, _set("islands", 0, "population", 2, "wvalues", value=["high"]),
                        ("'islands[0].population[2].wvalues'",)),
    "a broken random state": (None, _set("islands", 0, "rng", 1, value=[1, 2, 3]), ("'islands[0].rng[1]'",)),
    "a broken numpy state": (None, _set("islands", 0, "np_rng", 2, value=9999), ("'islands[0].np_rng[2]'",)),
    "a negative count": (None, _set("evaluations", value=-1), ("'evaluations'",)),
    "a cache column cut short": (None, _set("caches", "train", "columns", "records", "data", value="AAAAAAAAAAA="),
                                 ("'caches.train.columns.records.data'", "holds 1 values")),
    "a cache column of text": (None, _set("caches", "valid", "columns", "fitness", value={"values": "x"}),
                               ("'caches.valid.columns.fitness.values'",)),
    "a cache of other metrics": (None, _set("caches", "train", "metrics", value="RelaxedMetrics"),
                                 ("'caches.train.metrics'",)),
}


@pytest.mark.parametrize("case", list(FORGED))
def test_a_re_signed_checkpoint_is_checked_field_by_field(case, made, tmp_path):
    edit_head, edit_data, culprits = FORGED[case]
    partial = _copy(made, tmp_path)
    _forge(partial / CHECKPOINT_FILE, edit_head, edit_data)
    line = _refused(partial, watch=(tmp_path, made["data"]), culprits=(str(partial),) + culprits)
    assert "option '" not in line  # a bad value of the checkpoint is never reported as an option


def test_the_untouched_copy_resumes_to_the_uninterrupted_result(made, tmp_path):
    partial = _copy(made, tmp_path)
    res = CliRunner().invoke(evolve_cli, ["resume", str(partial), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert _outcome(Path(res.stdout.strip().splitlines()[-1])) == made["reference"]
    assert not partial.exists()


def _legacy_cache_keys(data):
    for cache in data["caches"].values():
        cache["kind"] = cache.pop("metrics")


def test_a_checkpoint_with_the_old_cache_key_kind_resumes_to_the_same_result(made, tmp_path):
    """Checkpoints written before the caches' ``kind`` became ``metrics`` still resume, to the same result."""
    partial = _copy(made, tmp_path)
    _forge(partial / CHECKPOINT_FILE, None, _legacy_cache_keys)
    res = CliRunner().invoke(evolve_cli, ["resume", str(partial), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert _outcome(Path(res.stdout.strip().splitlines()[-1])) == made["reference"]


_HEADER_FIELDS = ("config", "features", "data_sha256", "generation", "generations", "interrupted", "payload_bytes",
                  "sha256")
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats(allow_nan=False)
                     | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


@pytest.fixture(scope="module")
def spoiled(made, tmp_path_factory) -> Path:
    """A scratch file for the properties."""
    return tmp_path_factory.mktemp("spoiled") / CHECKPOINT_FILE


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_changed_byte_is_refused(made, spoiled, data):
    raw = (made["partial"] / CHECKPOINT_FILE).read_bytes()
    where = data.draw(st.sampled_from(("header", "payload", "anywhere")))
    first = raw.index(b"\n") + 1
    second = raw.index(b"\n", first) + 1
    low, high = {"header": (first, second), "payload": (second, len(raw)), "anywhere": (0, len(raw))}[where]
    i = data.draw(st.integers(low, high - 1))
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != raw[i]))
    spoiled.write_bytes(raw[:i] + bytes([byte]) + raw[i + 1:])
    with pytest.raises(InputError):
        read_checkpoint(spoiled)
    cut = data.draw(st.integers(0, len(raw) - 1))
    spoiled.write_bytes(raw[:cut])
    with pytest.raises(InputError):
        read_checkpoint(spoiled)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(_HEADER_FIELDS), value=_JSON, resign=st.booleans())
def test_any_changed_header_field_is_refused(made, spoiled, field, value, resign):
    shutil.copy(made["partial"] / CHECKPOINT_FILE, spoiled)
    head = read_header(spoiled)
    raw_head = json.loads(spoiled.read_bytes().split(b"\n", 2)[1])
    if value == raw_head[field] or field in ("sha256", "payload_bytes") and resign:
        return  # not a change (the digest and the size are set again by signing)
    if resign:
        _forge(spoiled, _set(field, value=value))
    else:
        magic, line, payload = spoiled.read_bytes().split(b"\n", 2)
        raw_head[field] = value
        spoiled.write_bytes(magic + b"\n" + json.dumps(raw_head, sort_keys=True, separators=(",", ":")).encode()
                            + b"\n" + payload)
    with pytest.raises(InputError):
        read_checkpoint(spoiled)
    assert head["generation"] == 2


# --- a checkpoint cannot run code ------------------------------------------------------------------

class _Evil:
    """Unpickling it creates a directory (as a malicious pickle could do anything)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


def test_an_old_pickle_checkpoint_is_refused_unread(made, tmp_path):
    partial = tmp_path / "out" / ".run-20250101-000000-seed0.partial"
    partial.mkdir(parents=True)
    marker = tmp_path / "ran"
    (partial / LEGACY_CHECKPOINT_FILE).write_bytes(b"specdec-evolve checkpoint 1\n{}\n" + pickle.dumps(_Evil(marker)))
    for target in (partial, partial.parent):
        _refused(target, watch=(tmp_path,), culprits=("older version", "cannot be resumed safely"))
    (partial / CHECKPOINT_FILE).write_bytes((partial / LEGACY_CHECKPOINT_FILE).read_bytes())
    _refused(partial, watch=(tmp_path,), culprits=("older version",))
    assert not marker.exists()


def test_no_pickle_is_loaded_during_a_resume(made, tmp_path, monkeypatch):
    partial = _copy(made, tmp_path)
    calls = []

    def guard(original):
        def refuse(*args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.split(".")[0] in ("evolve", "heuristics", "deap"):
                calls.append(caller)
                raise AssertionError(f"{caller} unpickles")
            return original(*args, **kwargs)
        return refuse

    monkeypatch.setattr(pickle, "loads", guard(pickle.loads))
    monkeypatch.setattr(pickle, "load", guard(pickle.load))
    info = resume(partial)
    assert not calls and _outcome(info.run_dir) == made["reference"]


# --- resume: settings, data and where it writes ------------------------------------------------

def test_a_bad_run_json_is_named(made, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(made["run_dir"], run_dir)
    summary = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text("[1, 2]")
    _refused(run_dir, watch=(tmp_path,), culprits=("run.json", "not a run summary"))
    (run_dir / "run.json").write_text(json.dumps({**summary, "checkpoint_dir": 123}))
    _refused(run_dir, watch=(tmp_path,), culprits=("run.json", "'checkpoint_dir'"))
    (run_dir / "run.json").write_text("{not json")
    _refused(run_dir, watch=(tmp_path,), culprits=("run.json", "not valid JSON"))


def test_a_moved_dataset_is_named_with_the_data_option(made, tmp_path):
    partial = _copy(made, tmp_path)
    gone = str(tmp_path / "moved-away")

    def move(head):
        head["config"]["data"] = gone
        head["data_dir_absolute"] = gone
    _forge(partial / CHECKPOINT_FILE, move)
    line = _refused(partial, watch=(tmp_path, made["data"]), culprits=("option '--data'", gone, "is gone"))
    assert "generate_data" not in line
    res = CliRunner().invoke(evolve_cli, ["resume", str(partial), "--no-progress", "--data", str(made["data"])])
    assert res.exit_code == 0, res.output
    assert _outcome(Path(res.stdout.strip().splitlines()[-1])) == made["reference"]


def test_resume_runs_the_output_guard(made, tmp_path, monkeypatch):
    import evolve.files.guard as paths

    fake = tmp_path / "repo"
    (fake / "evolve").mkdir(parents=True)
    monkeypatch.setattr(paths, "ROOT", fake)
    inside = fake / "evolve" / made["partial"].name
    shutil.copytree(made["partial"], inside)
    _refused(inside, watch=(tmp_path, made["data"]), culprits=("inside the package's source",))
    dataset = tmp_path / "dataset"
    shutil.copytree(made["data"], dataset)
    shutil.copytree(made["partial"], dataset / made["partial"].name)
    _refused(dataset / made["partial"].name, watch=(tmp_path, made["data"]), culprits=("dataset directory",))
    own = made["data"] / made["partial"].name  # moved into the very dataset the run reads
    shutil.copytree(made["partial"], own)
    try:
        _refused(own, watch=(tmp_path, made["data"]), culprits=("also an input",))
    finally:
        shutil.rmtree(own)


def test_resume_removes_the_staging_left_by_a_killed_write_of_the_same_run(made, tmp_path):
    partial = _copy(made, tmp_path)
    out = partial.parent
    head = read_header(partial / CHECKPOINT_FILE)
    base = run_dir_name(resolve(head["config"]), datetime.fromisoformat(head["created"]))
    stale = out / f".{base}.tmp-abcd1234"  # as a SIGKILL during the write of the run directory leaves
    stale.mkdir()
    (stale / "run.json").write_text("{}")
    live, fd = mkdtemp_locked(out, f".{base}.tmp-")  # another writer of the same name, still at work
    try:
        info = resume(partial)
        assert not stale.exists() and live.exists()
    finally:
        os.close(fd)
    assert _outcome(info.run_dir) == made["reference"]
    assert remove_stale_temps(out, base) == [live]


# --- one writer per output --------------------------------------------------------------------------

def test_a_second_resume_is_refused_naming_the_first(made, tmp_path):
    partial = _copy(made, tmp_path)
    with DirectoryLock(partial, lambda who: who):  # as a first resume holds it
        line = _refused(partial, watch=(tmp_path, made["data"]), culprits=(f"PID {os.getpid()}", str(partial)))
    assert "another process" in line
    info = resume(partial)  # once the first is gone
    assert _outcome(info.run_dir) == made["reference"]
    assert not [p for p in partial.parent.iterdir() if p.name.startswith(".")]


def test_a_resume_while_the_run_goes_is_refused(made, tmp_path):
    refusals = []

    def progress(row):
        if row["gen"] == 1:
            partial = next((tmp_path / "out").glob(".run-*.partial"))
            with pytest.raises(InputError) as caught:
                resume(partial)
            refusals.append(str(caught.value))

    info = run(resolve({"data": str(made["data"]), "out": str(tmp_path / "out"), **SETTINGS}), progress=progress)
    assert len(refusals) == 1 and f"PID {os.getpid()}" in refusals[0] and "another process" in refusals[0]
    assert _outcome(info.run_dir) == made["reference"]


def test_two_resumes_at_once_write_one_run_directory(made, tmp_path):
    partial = _copy(made, tmp_path)
    out = partial.parent
    procs = [subprocess.Popen([sys.executable, "-m", "evolve", "resume", str(partial), "--no-progress"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    results = [(p.returncode, out.decode(), err.decode()) for p, (out, err) in zip(procs, outputs)]
    assert sorted(code for code, _, _ in results) == [0, 2], results
    refused = next(err for code, _, err in results if code == 2)
    assert len(refused.strip().splitlines()) == 1 and "Traceback" not in refused, refused
    assert len([p for p in out.iterdir() if p.name.startswith("run-")]) == 1
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_one_writer_per_dataset_directory(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    with DirectoryLock(out, lambda who: who):
        res = CliRunner().invoke(generate_cli, ["--model", "independent", "--out", str(out), "--sequences", "5"])
        assert res.exit_code == 2 and f"PID {os.getpid()}" in res.stderr, res.output
        assert len(res.stderr.strip().splitlines()) == 1
        assert "Traceback" not in res.output
    res = CliRunner().invoke(generate_cli, ["--model", "independent", "--out", str(out), "--sequences", "5"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["metadata.json", "test.parquet", "train.parquet",
                                                     "valid.parquet"]


def test_stale_temp_cleanup_spares_a_live_writer(tmp_path):
    fd, live = mkstemp_locked(tmp_path, ".train.parquet.tmp-")
    dead = tmp_path / ".train.parquet.tmp-abcd1234"  # left by a writer that was killed
    dead.write_bytes(b"x")
    try:
        assert remove_stale_temps(tmp_path, "train.parquet") == [dead]
        assert Path(live).exists()
    finally:
        os.close(fd)
    assert remove_stale_temps(tmp_path, "train.parquet") == [Path(live)]


# --- islands ---------------------------------------------------------------------------------------

def test_an_island_checkpoint_round_trips_through_the_file(made, tmp_path):
    pytest.importorskip("distributed")
    from evolve.cluster import ClusterOptions
    from evolve.eval.evaluator import EvalData
    from evolve.gp.primitives import CORE_FEATURES
    from evolve.search.checkpoint import header, split_sha256, write_checkpoint
    from evolve.search.islands import island_search
    from evolve.traces.io import load_split

    cfg = resolve({"data": str(made["data"]), "population": 12, "generations": 4, "seed": 2, "migration_interval": 2,
                   "islands": 2, "migrants": 2})
    traces = [load_split(made["data"], s) for s in ("train", "valid")]
    sha = {t.split: split_sha256(t.source, t.split) for t in traces}
    train, valid = (EvalData.from_traces(t) for t in traces)
    files = []

    def keep(snapshot):
        path = tmp_path / f"ckpt{len(files)}"
        write_checkpoint(path, header(cfg.to_dict(), CORE_FEATURES, sha, "2025-01-01T00:00:00+00:00", snapshot),
                         snapshot)
        files.append(path)

    options = ClusterOptions(workers=1)
    full = island_search(cfg, train, valid, CORE_FEATURES, sha, options, on_epoch=keep)
    _, snapshot = read_checkpoint(files[0])
    assert snapshot.generation == 2 and len(snapshot.islands) == 2 and snapshot.caches is None
    again = island_search(cfg, train, valid, CORE_FEATURES, sha, options, resume=snapshot)
    strip = [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in full.logbook]
    assert again.champion.expression == full.champion.expression
    assert [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in again.logbook] == strip
