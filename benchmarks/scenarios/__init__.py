"""One module per scenario; each has ``NAME``, ``TITLE`` and ``async run(ctx) -> list[Metric]``."""

from benchmarks.scenarios import (
    s1_round_trip,
    s2_edit_to_fresh,
    s3_dataflow_overhead,
    s4_cold_start,
    s5_memory,
    s6_output_volume,
    s7_context_cost,
    s8_plan_inspect,
    s9_cli_call,
    s10_warm_up,
    s11_big_edit,
    s12_mcp_startup,
    s13_remote,
    s14_checkpoints,
    s15_debugger,
    s16_plan_scale,
    s17_hidden_state,
    s18_first_result,
    s19_memo_fork,
    s20_output_memory,
)

#: Run order. Output volume goes last: when an execution hangs there it keeps the shared
#: kernel's main shell busy, which would skew what follows.
ALL = (
    s1_round_trip,
    s2_edit_to_fresh,
    s3_dataflow_overhead,
    s4_cold_start,
    s5_memory,
    s7_context_cost,
    s8_plan_inspect,
    s9_cli_call,
    s10_warm_up,
    s11_big_edit,
    s12_mcp_startup,
    s13_remote,
    s14_checkpoints,
    s15_debugger,
    s16_plan_scale,
    s17_hidden_state,
    s18_first_result,
    s19_memo_fork,
    s20_output_memory,
    s6_output_volume,
)
