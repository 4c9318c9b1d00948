"""``pipelined``: steps run at once, all are waited for, the first error is raised."""

from __future__ import annotations

import asyncio

import pytest

from ipykeep.kernel.driver import pipelined


async def test_steps_run_at_once_and_every_one_finishes_before_an_error_is_raised() -> None:
    began: list[str] = []
    finished: list[str] = []

    async def step(name: str, fail: bool = False) -> None:
        began.append(name)
        await asyncio.sleep(0.01)
        finished.append(f"{name} after {len(began)} began")
        if fail:
            raise ValueError(name)

    await pipelined(step("a"), step("b"), step("c"))
    assert began == ["a", "b", "c"]  # in the order given
    assert finished == ["a after 3 began", "b after 3 began", "c after 3 began"]  # together

    began.clear()
    finished.clear()
    with pytest.raises(ValueError, match="^a$"):
        await pipelined(step("a", fail=True), step("b", fail=True), step("c"))
    assert len(finished) == 3  # none left running
