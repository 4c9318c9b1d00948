import gc
import sys

from ipykeep.kernel.execution import Execution, StreamOutput


def _msg(mtype, parent="p", **content):
    return {"header": {"msg_type": mtype}, "parent_header": {"msg_id": parent}, "content": content}


def _ex(**kw):
    return Execution(handle="c1", kernel_id="k1", code="", kind="scratch", **kw)


def test_streams_merge_and_clear_output_is_honoured():
    ex = _ex()
    ex.on_iopub(_msg("stream", name="stdout", text="a"))
    ex.on_iopub(_msg("stream", name="stdout", text="b\n"))
    ex.on_iopub(_msg("stream", name="stderr", text="warn\n"))
    assert ex.nbformat_outputs() == [
        {"output_type": "stream", "name": "stdout", "text": "ab\n"},
        {"output_type": "stream", "name": "stderr", "text": "warn\n"},
    ]
    ex.on_iopub(_msg("clear_output", wait=True))
    assert len(ex.outputs) == 2  # wait=True clears on the next output
    ex.on_iopub(_msg("display_data", data={"text/plain": "new"}, metadata={}))
    assert [o["output_type"] for o in ex.nbformat_outputs()] == ["display_data"]
    ex.on_iopub(_msg("clear_output", wait=False))
    assert ex.outputs == []


def test_error_and_results_recorded():
    ex = _ex()
    ex.on_iopub(_msg("execute_result", data={"text/plain": "2"}, metadata={}, execution_count=3))
    ex.on_iopub(
        _msg(
            "error",
            ename="ValueError",
            evalue="bad",
            traceback=["\x1b[31mTraceback\x1b[0m", "ValueError: bad"],
        )
    )
    ex.on_reply({"status": "error", "execution_count": 3})
    assert ex.outcome_after_idle() == "failed"
    assert ex.error["traceback"][0] == "Traceback"  # ANSI stripped for readers
    text, cursor = ex.text_since(0)
    assert text == "2\n" and cursor == 2


def test_cap_drops_the_rest_with_a_note():
    ex = _ex(cap=100)
    for _ in range(50):
        ex.on_iopub(_msg("stream", name="stdout", text="x" * 10))
    assert ex.recorded_bytes == 100 and ex.dropped_bytes == 400
    text, _ = ex.text_since(0)
    assert "not recorded" in text


def test_nothing_is_recorded_after_the_cap_even_small_messages():
    ex = _ex(cap=100)
    ex.on_iopub(_msg("stream", name="stdout", text="a" * 90))
    ex.on_iopub(_msg("stream", name="stdout", text="b" * 50))  # only its head fits
    ex.on_iopub(_msg("stream", name="stdout", text="c"))  # would fit, but comes after the cut
    text, _ = ex.text_since(0)
    assert "c" not in text.replace("recorded", "") and text.rstrip().endswith("is not recorded]")
    assert "a" * 90 + "b" * 10 + "\n[output past" in text
    assert ex.recorded_bytes == 100 and ex.dropped_bytes == 41


def test_one_message_larger_than_the_cap_keeps_its_head_and_the_marker():
    ex = _ex(cap=1000)
    ex.on_iopub(_msg("stream", name="stdout", text="early\n"))
    ex.on_iopub(_msg("stream", name="stdout", text="a" * 2100))
    ex.on_iopub(
        _msg("execute_result", data={"text/plain": "z" * 5000}, metadata={}, execution_count=1)
    )
    outputs = ex.nbformat_outputs()
    assert outputs == [{"output_type": "stream", "name": "stdout", "text": "early\n" + "a" * 994}]
    text, _ = ex.text_since(0)
    assert text.startswith("early\naaa") and text.rstrip().endswith("is not recorded]")


def test_the_notebook_says_what_past_the_cap_was_not_kept():
    ex = _ex(cap=100)
    ex.on_iopub(_msg("stream", name="stdout", text="a" * 250))
    head, note = ex.notebook_outputs()
    assert head == {"output_type": "stream", "name": "stdout", "text": "a" * 100}
    assert note["name"] == "stderr"
    assert note["text"] == "[output past 100 bytes is not recorded: 150 more were not kept]\n"
    assert ex.nbformat_outputs() == [head]  # the record and the result keep their own note
    within = _ex(cap=100)
    within.on_iopub(_msg("stream", name="stdout", text="b" * 100))
    assert within.notebook_outputs() == within.nbformat_outputs()


def test_a_large_rich_result_keeps_the_head_of_its_text():
    ex = _ex(cap=1000)
    ex.on_iopub(
        _msg(
            "execute_result",
            data={"text/plain": "z" * 5000, "text/html": "<b>" * 3000},
            metadata={},
            execution_count=1,
        )
    )
    (out,) = ex.nbformat_outputs()
    assert out["data"] == {"text/plain": "z" * 1000}
    assert ex.text_since(0)[0].rstrip().endswith("is not recorded]")


def test_terminal_escapes_are_stripped_from_text():
    from ipykeep.kernel.execution import strip_ansi

    raw = "a\x1b[31mred\x1b[0m b\x1b]52;c;ZXZpbA==\x07 c\x1b]0;title\x1b\\ d\x1bPq#0\x1b\\ e\x1b=f"
    assert strip_ansi(raw) == "ared b c d ef"


def test_cursors_read_only_new_output():
    ex = _ex()
    ex.on_iopub(_msg("stream", name="stdout", text="one\n"))
    text, cur = ex.text_since(0)
    ex.on_iopub(_msg("stream", name="stdout", text="two\n"))
    text2, _ = ex.text_since(cur)
    assert text == "one\n" and text2 == "two\n"


def _output_work(messages: int, monkeypatch) -> tuple[int, int]:
    """The work of recording ``messages`` stream messages and reading the outputs back: lines
    of Python executed (a loop over what was recorded so far shows here) and characters the
    stream joins copied (a join per message shows here). Counted, so load cannot move it."""
    joined = 0
    text = StreamOutput.text

    def counting_text(self):
        nonlocal joined
        if len(self.chunks) > 1:
            joined += sum(map(len, self.chunks))
        return text(self)

    lines = 0

    def tracer(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
        return tracer

    ex = _ex(cap=10**9)
    # garbage left by earlier tests in this worker (transports, sockets) is finalized by the
    # collector in whatever code runs when it triggers: its ``__del__`` lines are not this work
    gc.collect()
    gc.disable()
    with monkeypatch.context() as patch:
        patch.setattr(StreamOutput, "text", counting_text)
        sys.settrace(tracer)
        try:
            for i in range(messages):
                ex.on_iopub(_msg("stream", name="stdout", text=f"line {i:06d}\n"))
            ex.nbformat_outputs()
        finally:
            sys.settrace(None)
            gc.enable()
    return lines, joined


def test_output_handling_is_linear(monkeypatch):
    small_lines, small_joined = _output_work(2_000, monkeypatch)
    big_lines, big_joined = _output_work(20_000, monkeypatch)
    # 10x the messages: at most 10x the work (a fixed part aside); quadratic would be ~100x
    assert 0 < big_lines <= 10 * small_lines
    assert 0 < big_joined <= 10 * small_joined


def test_no_reply_and_no_output_is_lost_not_ok():
    """A request the kernel ended with idle but no reply and no output may never have run."""
    ex = _ex(reply_lost=True)
    assert ex.outcome_after_idle() == "lost"
    assert "may not have run" in ex.notes[-1]
    ran = _ex(reply_lost=True)
    ran.on_iopub(_msg("stream", name="stdout", text="1\n"))
    assert ran.outcome_after_idle() == "ok"  # its output shows it ran
    assert _ex().outcome_after_idle() == "ok"
