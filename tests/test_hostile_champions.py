"""Hostile champion files: the provenance fields a verification-length champion's scoring reads (``verify_with``,
``length_weighting``) and the format version, refused in one line naming the file and the key, by the reader,
by the commands that score a champion, and by ``promote`` and ``export`` (which must not write a verifier that
does not resolve into their output).
"""
from __future__ import annotations

import json

import pytest

from evolve.errors import InputError
from heuristics.champions import Champion, read_champion
from hostile_helpers import check

EXPR = "sub(2.5, draft_index)"


def _policy(ws, name="pol", **config) -> "Path":  # noqa: F821
    """A verification-length champion file in the workspace whose run configuration holds ``config``."""
    metrics = {"train": {"fitness": 1.0}, "valid": {"fitness": 1.0}}
    doc = Champion(name, EXPR, kind="verify-length", objective="tokens_per_second", metrics=metrics,
                   provenance={"config": {"evolve": "verify-length", **config}}).to_dict()
    path = ws.root / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


# (case, run configuration, key named)
BAD_TYPES = [
    ("verify-with-int", {"verify_with": 123}, "provenance.config.verify_with"),
    ("verify-with-float", {"verify_with": 0.5}, "provenance.config.verify_with"),
    ("verify-with-bool", {"verify_with": True}, "provenance.config.verify_with"),
    ("verify-with-list", {"verify_with": ["standard_rejection"]}, "provenance.config.verify_with"),
    ("verify-with-object", {"verify_with": {"rule": "x"}}, "provenance.config.verify_with"),
    ("verify-with-empty", {"verify_with": ""}, "provenance.config.verify_with"),
    ("verify-with-newline", {"verify_with": "a\nb"}, "provenance.config.verify_with"),
    ("weighting-int", {"length_weighting": 7}, "provenance.config.length_weighting"),
    ("weighting-list", {"length_weighting": ["call"]}, "provenance.config.length_weighting"),
]


@pytest.mark.parametrize("config,key", [c[1:] for c in BAD_TYPES], ids=[c[0] for c in BAD_TYPES])
def test_bad_setting_types_are_refused_by_the_reader(ws, config, key):
    path = _policy(ws, **config)
    with pytest.raises(InputError) as err:
        read_champion(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and key in message


def test_provenance_config_not_an_object_is_refused(ws):
    path = _policy(ws)
    doc = json.loads(path.read_text())
    doc["provenance"]["config"] = "verify-length"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"pol\.json: key 'provenance\.config' must be a JSON object"):
        read_champion(path)


@pytest.mark.parametrize("version,culprit", [("2", "'2'"), (3, "3"), (0, "0"), (True, "True"), (None, "None"),
                                             (2.0, "2.0"), ([2], "[2]")],
                         ids=["string", "future", "zero", "bool", "null", "float", "list"])
def test_bad_format_version_is_reported_naming_the_file(ws, version, culprit):
    path = ws.bad_champion(format_version=version)
    with pytest.raises(InputError) as err:
        read_champion(path)
    message = str(err.value)
    assert str(path) in message and "format_version" in message and culprit in message, message


def test_version_1_with_version_2_keys_says_which_version(ws):
    path = ws.bad_champion(format_version=1)
    with pytest.raises(InputError, match=r"bad\.json: missing key 'fitness' \(format_version 1 files have it; "
                                         r"a file with the key 'kind' is format_version 2\)"):
        read_champion(path)


# (case, run configuration, key, value named)
UNRESOLVED = [
    ("unknown-rule", {"verify_with": "no_such_rule"}, "verify_with", "no_such_rule"),
    ("missing-file", {"verify_with": "gone.json"}, "verify_with", "gone.json"),
    ("policy-verifies-policy", {"verify_with": "pol2"}, "verify_with", "pol2"),
    ("unknown-weighting", {"length_weighting": "sideways"}, "length_weighting", "sideways"),
    ("weighting-case", {"length_weighting": "Call"}, "length_weighting", "Call"),
]


@pytest.mark.parametrize("config,key,value", [c[1:] for c in UNRESOLVED], ids=[c[0] for c in UNRESOLVED])
def test_promote_refuses_a_champion_whose_settings_do_not_resolve(ws, config, key, value):
    if value == "pol2":
        _policy(ws, name="pol2")
        (ws.champs / "pol2.json").write_text((ws.root / "pol2.json").read_text())
    path = _policy(ws, **config)
    check(ws, "evolve", ["promote", path, "newname", "--champions-dir", ws.champs], 2,
          (str(path), f"provenance.config.{key}", value))


@pytest.mark.parametrize("config,key,value", [c[1:] for c in UNRESOLVED[:2] + UNRESOLVED[3:]],
                         ids=[c[0] for c in UNRESOLVED[:2] + UNRESOLVED[3:]])
@pytest.mark.parametrize("output", [False, True], ids=["stdout", "file"])
def test_export_refuses_a_champion_whose_settings_do_not_resolve(ws, config, key, value, output):
    path = _policy(ws, **config)
    extra = ["--output", ws.root / "m.py"] if output else []
    res = check(ws, "evolve", ["export", path, "--to", "numpy", *extra], 2,
                (str(path), f"provenance.config.{key}", value))
    assert "VERIFIER" not in res.stdout


@pytest.mark.parametrize("config,key", [c[1:] for c in BAD_TYPES[:3] + BAD_TYPES[7:8]],
                         ids=[c[0] for c in BAD_TYPES[:3] + BAD_TYPES[7:8]])
@pytest.mark.parametrize("command", ["promote", "export", "show"])
def test_commands_refuse_bad_setting_types(ws, config, key, command):
    path = _policy(ws, **config)
    args = {"promote": ["promote", path, "newname", "--champions-dir", ws.champs],
            "export": ["export", path, "--to", "numpy"], "show": ["show", path]}[command]
    check(ws, "evolve", args, 2, (str(path), key))


@pytest.mark.parametrize("config,key,value", [c[1:] for c in UNRESOLVED[:2] + UNRESOLVED[3:4]],
                         ids=[c[0] for c in UNRESOLVED[:2] + UNRESOLVED[3:4]])
def test_benchmark_names_the_champion_file_of_an_unresolved_setting(vocab_ws, config, key, value):
    path = _policy(vocab_ws, **config)
    check(vocab_ws, "benchmark", ["--data", vocab_ws.data, "--repeats", 1, "--champion", path], 2,
          (str(path), f"provenance.config.{key}", value))


def test_benchmark_refuses_a_verifier_of_123(vocab_ws):
    path = _policy(vocab_ws, verify_with=123)
    check(vocab_ws, "benchmark", ["--data", vocab_ws.data, "--repeats", 1, "--champion", path], 2,
          (str(path), "provenance.config.verify_with", "123"))


@pytest.mark.parametrize("config", [{}, {"verify_with": "standard_rejection"}, {"verify_with": "block_verification"},
                                    {"length_weighting": "position"}, {"verify_with": None}],
                         ids=["none", "standard", "block", "position", "null"])
def test_good_settings_promote_and_export(ws, config):
    path = _policy(ws, **config)
    check_ok = pytest.importorskip("hostile_helpers").invoke
    res = check_ok("evolve", ["export", path, "--to", "numpy"])
    assert res.exit_code == 0, res.output
    res = check_ok("evolve", ["promote", path, "newname", "--champions-dir", ws.champs])
    assert res.exit_code == 0, res.output
