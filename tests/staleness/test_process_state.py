"""The host's words for hidden state name exactly what the in-kernel probe reports."""

from __future__ import annotations

import types

from ipykeep.kernel.inkernel import SETTINGS, STATEMON
from ipykeep.staleness.process_state import GENERATORS, LABELS, is_pseudo_name, symbol_label


def _settings_module() -> types.ModuleType:
    module = types.ModuleType(SETTINGS.name)
    exec(compile(SETTINGS.source, SETTINGS.path, "exec"), module.__dict__)
    return module


def test_every_observed_setting_and_generator_has_words() -> None:
    settings = _settings_module()
    reported = set(settings.NAMES) | {"<numpy.random>", "<random>"}
    assert reported == set(LABELS)
    assert set(LABELS) >= GENERATORS
    assert '"<numpy.random>", "<random>"' in STATEMON.source  # the generators statemon reports


def test_readers_follow_what_the_code_used() -> None:
    settings = _settings_module()
    import numpy as np

    ns = {"np": np, "weights": np.arange(3), "n": 3}
    uses = {"names": {"weights"}, "attrs": set(), "formats": True, "imports": False}
    present = set(settings.NAMES)
    read = set(settings.readers(uses, ns, present))
    assert {"<numpy.printoptions>", "<numpy.errstate>", "<warnings.filters>"} <= read
    assert "<sys.path>" not in read and "<os.cwd>" not in read
    # computing with an array formats nothing: print options are not read
    uses = {"names": {"weights"}, "attrs": {"sum"}, "formats": False, "imports": False}
    assert "<numpy.printoptions>" not in settings.readers(uses, ns, present)
    # a plain int is no library value
    uses = {"names": {"n"}, "attrs": set(), "formats": True, "imports": False}
    assert settings.readers(uses, ns, present) == []


def test_an_import_that_names_no_setter_is_not_the_cells_write() -> None:
    settings = _settings_module()
    quiet = {"names": {"sm"}, "attrs": {"api"}, "imports": True}
    assert settings.by_import("<warnings.filters>", quiet)
    loud = {"names": {"warnings"}, "attrs": {"filterwarnings"}, "imports": True}
    assert not settings.by_import("<warnings.filters>", loud)
    assert not settings.by_import("<warnings.filters>", {**quiet, "imports": False})


def test_labels() -> None:
    assert symbol_label("<numpy.printoptions>") == "numpy print options"
    assert symbol_label("weights") == "weights"
    assert is_pseudo_name("<os.cwd>") and not is_pseudo_name("cwd")
