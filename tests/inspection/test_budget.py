"""Hostile objects: raising or hanging user code is summarized degraded within the budget."""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest


class RaisingEverywhere:
    def __repr__(self):
        raise RuntimeError("no repr")

    def __len__(self):
        raise ValueError("no len")

    def __sizeof__(self):
        raise TypeError("no sizeof")

    @property
    def prop(self):
        raise KeyError("prop")


class Sleepy:
    def __repr__(self):
        time.sleep(30)
        return "never"

    def __len__(self):
        time.sleep(30)
        return 0


class Swallower:
    """Swallows the first budget exception (bare except) and goes on sleeping."""

    def __repr__(self):
        try:
            time.sleep(30)
        except BaseException:
            pass
        time.sleep(30)
        return "never"


def test_raising_dunders_give_notes_not_failures(ik, summary_dict):
    s = summary_dict(ik, "r", {"r": RaisingEverywhere()})
    assert s["kind"] == "object" and s["type"].endswith("RaisingEverywhere")
    joined = " ".join(s["notes"])
    assert "sizeof failed: TypeError" in joined and "len() failed: ValueError" in joined
    assert "repr() failed: RuntimeError: no repr" in s["repr"]


def test_raising_property_on_a_path_is_an_error_not_a_crash(ik):
    payload = json.loads(ik.inspect_json("r.prop", 2.0, [], {}, ns={"r": RaisingEverywhere()}))
    assert payload["ok"] is False and "KeyError" in payload["error"]["message"]


@pytest.mark.parametrize("mode", ["alarm", "thread"])
def test_hanging_repr_and_len_are_degraded_within_budget(ik, summary_dict, mode):
    start = time.monotonic()
    s = summary_dict(ik, "h", {"h": Sleepy()}, budget_s=0.5, mode=mode)
    elapsed = time.monotonic() - start
    assert s["degraded"] is True and "0.5s" in s["degraded_reason"]
    assert s["type"].endswith("Sleepy") and s["memory_bytes"] > 0  # learnt before the hang
    assert elapsed < 2.0


def test_hanging_call_from_a_non_main_thread_uses_a_worker(ik, summary_dict):
    box = {}

    def run():
        start = time.monotonic()
        box["s"] = summary_dict(ik, "h", {"h": Sleepy()}, budget_s=0.5)
        box["elapsed"] = time.monotonic() - start

    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    assert box["s"]["degraded"] is True and box["elapsed"] < 2.0


def test_swallowed_alarm_fires_again(ik, summary_dict):
    start = time.monotonic()
    s = summary_dict(ik, "w", {"w": Swallower()}, budget_s=0.3, mode="alarm")
    assert s["degraded"] is True
    assert time.monotonic() - start < 2.0


def test_alarm_handler_and_running_timer_are_restored(ik):
    seen = []

    def mine(signum, frame):
        seen.append(signum)

    previous = signal.signal(signal.SIGALRM, mine)
    old_timer = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        ik.inspect_json("h", 0.2, [], {}, ns={"h": Sleepy()}, mode="alarm")
        assert signal.getsignal(signal.SIGALRM) is mine
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25.0 < remaining <= 30.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_timer[0]:
            signal.setitimer(signal.ITIMER_REAL, *old_timer)
    assert seen == []


def test_hanging_variable_in_namespace_degrades_only_that_entry(ik):
    ns = {"h": Sleepy(), "ok": [1, 2, 3]}
    start = time.monotonic()
    listing = json.loads(ik.namespace_json(1.0, {}, ns=ns, mode="alarm"))["namespace"]
    assert time.monotonic() - start < 2.0
    by_name = {e["name"]: e for e in listing["entries"]}
    assert by_name["h"]["degraded"] is True and listing["degraded"] is True
    assert by_name["ok"]["length"] == 3 and "degraded" not in by_name["ok"]
