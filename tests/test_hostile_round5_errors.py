"""Every file a command reads, damaged, is named in the command's one-line error.

The cases are generated from what the commands read: every command with an output option runs once per scenario on
real inputs (:mod:`command_world`), and every file it opens for reading is recorded. Then each distinct file (with
the first scenario that reads it) is damaged in each way of :data:`DAMAGES` (emptied; bytes of no format; for a JSON
or TOML file, a JSON array; for a JSON file whose top-level object has keys, each key given a value of another JSON
type) and the scenario is run again: it must fail with exit code 2 and one ``error:`` line naming the file (a file of a model
directory: the option and the directory, as transformers' loaders do not say which file failed), with no traceback;
the file is put back afterwards. So a reader whose error names neither the file nor the option it came
from (or that lets an exception through) fails here, whichever command reaches it.
"""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")
from command_world import ROOTS, build_world, read_by, scenario_args, scenarios  # noqa: E402

#: How a file is damaged: name -> (applies to the file?, new bytes from the old).
DAMAGES = {
    "empty": (lambda p: True, lambda raw: b""),
    "no format": (lambda p: True, lambda raw: b"\x00\xff\xfe not this format \x80\n"),
    "a JSON array": (lambda p: p.suffix in (".json", ".toml", ".jsonl"), lambda raw: b"[1, 2]\n"),
}
#: Files a command reads that are not damaged here, and why.
UNDAMAGED = {
    "model.safetensors": "the weights are read by safetensors; a damaged file is named by transformers' loader",
}
#: Damages that leave a valid file, and why: (file suffix, damage).
VALID = {(".toml", "empty"): "an empty run configuration is a configuration of defaults (the error is then about the "
                             "default dataset it leaves, naming its setting)"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The world of :mod:`command_world`, and the first scenario that reads each of its files."""
    before = os.environ.get("SPECDEC_CHAMPIONS_DIR")
    w = build_world(tmp_path_factory.mktemp("world"))
    cwd = os.getcwd()
    os.chdir(w.cwd)
    try:
        w.readers = {}
        for path, index in scenarios():
            args = scenario_args(path, index, w)
            for file in sorted(read_by(ROOTS[path[0]], args, w)):
                w.readers.setdefault(file, (path, args))
    finally:
        os.chdir(cwd)
    yield w
    if before is None:
        os.environ.pop("SPECDEC_CHAMPIONS_DIR", None)
    else:
        os.environ["SPECDEC_CHAMPIONS_DIR"] = before


def _key_damages(raw: bytes) -> list[tuple[str, bytes]]:
    """A JSON object's keys given a value of another type (a string becomes a number, anything else a string)."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(doc, dict):
        return []
    out = []
    for key, value in doc.items():
        wrong = 12345 if isinstance(value, str) else "not this"
        out.append((f"key {key!r} of another type", json.dumps({**doc, key: wrong}).encode()))
    return out


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("damage", list(DAMAGES) + ["keys of another type"])
def test_a_damaged_file_is_named_by_whichever_command_reads_it(world, damage, monkeypatch):
    monkeypatch.chdir(world.cwd)
    failures = []
    checked = 0
    for file, (path, args) in sorted(world.readers.items()):
        if file.name in UNDAMAGED:
            continue
        raw = file.read_bytes()
        if damage == "keys of another type":
            variants = _key_damages(raw)
        else:
            applies, make = DAMAGES[damage]
            variants = [(damage, make(raw))] if applies(file) and (file.suffix, damage) not in VALID else []
        for what, bad in variants:
            file.write_bytes(bad)
            try:
                res = CliRunner().invoke(ROOTS[path[0]], args)
            finally:
                file.write_bytes(raw)
            checked += 1
            if res.exit_code == 0 and damage == "keys of another type":
                continue  # a key the reader does not read (free-form provenance, a comment): no error to name it
            lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
            named = len(lines) == 1 and (str(file) in lines[0] or (file.parent / "config.json").is_file()
                                         and str(file.parent) in lines[0] and "option '" in lines[0])
            if res.exit_code != 2 or not named or "Traceback" in res.output:
                failures.append(f"{' '.join(path)}: {file.relative_to(world.root.resolve())} {what}: exit "
                                f"{res.exit_code}: {(lines or [res.output.strip()[-300:]])[0][:300]}"
                                f"{' ' + repr(res.exception)[:200] if res.exception and res.exit_code != 2 else ''}")
    assert checked, "no file was damaged"
    assert not failures, f"{len(failures)} of {checked}:\n" + "\n".join(failures)
