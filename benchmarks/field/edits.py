"""Seeded random edits of a notebook's code cells, of the kinds an agent makes.

Each edit is drawn from one kind (a number, a number inside a function body, a string literal,
a keyword of a fit call, a keyword of another call, a plotting-only argument, an inserted
filtering reassignment of a frame, an inserted in-place mutation, a rename through the
readers, a deleted cell, two independent cells swapped, a moved cell) and returns the new
cells with what it did. An edit that makes a fresh run fail is for the caller to discard.
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ipykeep.staleness.analysis import analyze_source


@dataclass(frozen=True)
class Cell:
    cell_id: str
    source: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Edit:
    kind: str
    #: one line saying what changed, for the report
    what: str
    cells: tuple[Cell, ...]
    #: cells whose source is new (edited or inserted): they must run whatever the plan says
    edited: frozenset[str] = field(default_factory=frozenset)
    #: a rename's (old name, new name): the new name holds what the old one held
    renamed: tuple[str, str] | None = None


#: what a fresh run of the original bound per cell: name -> kind (``DataFrame``, ``ndarray``,
#: ``list``, ``dict``, ``Series``…) and, for frames, their numeric columns
Bound = Mapping[str, Mapping[str, tuple[str, tuple[str, ...]]]]

KINDS = (
    "number",
    "number_in_function",
    "string",
    "fit_keyword",
    "keyword",
    "plot_argument",
    "filter_frame",
    "inplace",
    "rename",
    "delete",
    "swap",
    "move",
)

PLOT_CALLS = {
    "plot",
    "scatter",
    "hist",
    "bar",
    "barh",
    "figure",
    "subplots",
    "legend",
    "set_title",
    "set_xlabel",
    "set_ylabel",
    "title",
    "xlabel",
    "ylabel",
    "set_xlim",
    "set_ylim",
    "xlim",
    "ylim",
    "axis",
    "hlines",
    "errorbar",
    "qqplot",
    "abline_plot",
    "set",
    "axes",
    "rc",
}
PLOT_KEYWORDS = {
    "alpha": "number",
    "figsize": "size",
    "fontsize": "number",
    "size": "number",
    "color": "color",
    "c": "color",
    "linestyle": "linestyle",
    "label": "string",
    "loc": "loc",
    "bins": "number",
    "marker": "marker",
    "title": "string",
    "xlabel": "string",
    "ylabel": "string",
}
FIT_WORDS = re.compile(r"fit|glm|ols|wls|gls|quantreg|rlm|logit|probit|interp|GLM|OLS|WLS|Logit")


def _parseable(source: str) -> str:
    """The source with IPython magic and shell lines turned into comments, offsets unchanged."""
    lines = source.split("\n")
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith(("%", "!")):
            lines[i] = "#" + ln[1:] if ln else ln
    return "\n".join(lines)


def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(_parseable(source))
    except SyntaxError:
        return None


def _replace_span(source: str, node: ast.expr, text: str) -> str:
    """``source`` with ``node``'s text replaced (ast offsets are UTF-8 byte offsets)."""
    raw = source.encode()
    starts = [0]
    for ln in raw.split(b"\n")[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    assert node.end_lineno is not None and node.end_col_offset is not None
    a = starts[node.lineno - 1] + node.col_offset
    b = starts[node.end_lineno - 1] + node.end_col_offset
    return (raw[:a] + text.encode() + raw[b:]).decode()


def _new_number(rng: random.Random, value: object) -> str:
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int):
        return repr(value + rng.choice([1, 2]) if value >= 0 else value - 1)
    if isinstance(value, float):
        return repr(round(value * rng.choice([0.8, 1.25]), 6) or 0.5)
    raise TypeError(f"not a number: {value!r}")


def _numbers(tree: ast.AST) -> list[ast.Constant]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, (int, float))
        and not isinstance(n.value, bool)
    ]


def _in_functions(tree: ast.Module) -> list[ast.Constant]:
    out: list[ast.Constant] = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            body = fn.body if isinstance(fn.body, list) else [fn.body]
            for stmt in body:
                out.extend(_numbers(stmt))
    return out


def _call_name(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _display_strings(tree: ast.Module) -> list[ast.Constant]:
    """String literals that are text for people: printed, titles, labels, formats."""
    out: list[ast.Constant] = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        name = _call_name(call)
        if name in {"print", "set_title", "set_xlabel", "set_ylabel", "title", "xlabel", "ylabel"}:
            out += [
                a for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            for a in call.args:  # "%4.2f" % ... and f-strings inside print
                if isinstance(a, ast.BinOp) and isinstance(a.left, ast.Constant):
                    if isinstance(a.left.value, str):
                        out.append(a.left)
        for kw in call.keywords:
            if kw.arg in {"label", "title", "xlabel", "ylabel"} and isinstance(
                kw.value, ast.Constant
            ):
                if isinstance(kw.value.value, str):
                    out.append(kw.value)
    return [s for s in out if str(s.value).strip()]


def _edit_source(
    rng: random.Random, cells: list[Cell], pick: Callable[[ast.Module], Sequence[ast.AST]]
) -> tuple[int, ast.AST, str] | None:
    found = [
        (i, node)
        for i, c in enumerate(cells)
        if (t := _tree(c.source)) is not None
        for node in pick(t)
    ]
    if not found:
        return None
    i, node = rng.choice(found)
    return i, node, cells[i].source


def _with_source(cells: list[Cell], i: int, source: str) -> tuple[Cell, ...]:
    out = list(cells)
    out[i] = Cell(cells[i].cell_id, source, cells[i].tags)
    return tuple(out)


def _span_edit(kind: str, cells: list[Cell], i: int, node: ast.expr, new: str, what: str) -> Edit:
    """Cell ``i`` with ``node``'s text replaced by ``new``: an edit of that one cell."""
    source = _with_source(cells, i, _replace_span(cells[i].source, node, new))
    return Edit(kind, what, source, frozenset({cells[i].cell_id}))


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= 70 else one[:67] + "…"


def _number_edit(rng: random.Random, cells: list[Cell], in_function: bool) -> Edit | None:
    hit = _edit_source(rng, cells, _in_functions if in_function else _numbers)
    if hit is None:
        return None
    i, node, src = hit
    assert isinstance(node, ast.Constant)
    new = _new_number(rng, node.value)
    kind = "number_in_function" if in_function else "number"
    line = _short(src.splitlines()[node.lineno - 1])
    return _span_edit(
        kind, cells, i, node, new, f"{cells[i].cell_id}: {node.value!r} -> {new} in {line}"
    )


def _string_edit(rng: random.Random, cells: list[Cell]) -> Edit | None:
    hit = _edit_source(rng, cells, _display_strings)
    if hit is None:
        return None
    i, node, src = hit
    assert isinstance(node, ast.Constant)
    text = str(node.value)
    new = repr(text.replace(text.strip(), text.strip() + " (edited)", 1))
    return _span_edit("string", cells, i, node, new, f"{cells[i].cell_id}: {text!r} -> {new}")


def _keywords(tree: ast.Module, fit: bool) -> list[ast.keyword]:
    out = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        name = _call_name(call)
        is_fit = bool(FIT_WORDS.search(name))
        if fit != is_fit or name in PLOT_CALLS:
            continue
        for kw in call.keywords:
            v = kw.value
            number = isinstance(v, ast.Constant) and isinstance(v.value, (int, float, bool))
            negative = isinstance(v, ast.UnaryOp) and isinstance(v.operand, ast.Constant)
            if kw.arg and (number or negative):
                out.append(kw)
    return out


def _keyword_edit(rng: random.Random, cells: list[Cell], fit: bool) -> Edit | None:
    hit = _edit_source(rng, cells, lambda t: _keywords(t, fit))
    if hit is None:
        return None
    i, kw, src = hit
    assert isinstance(kw, ast.keyword)
    value = kw.value
    if isinstance(value, ast.UnaryOp):
        operand = value.operand
        assert isinstance(operand, ast.Constant) and isinstance(operand.value, (int, float))
        new = _new_number(rng, -operand.value)
    else:
        assert isinstance(value, ast.Constant)
        new = _new_number(rng, value.value)
    return _span_edit(
        "fit_keyword" if fit else "keyword",
        cells,
        i,
        value,
        new,
        f"{cells[i].cell_id}: {kw.arg}={ast.unparse(value)} -> {kw.arg}={new}",
    )


def _plot_keywords(tree: ast.Module) -> list[ast.keyword]:
    out = []
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and _call_name(call) in PLOT_CALLS:
            out += [kw for kw in call.keywords if kw.arg in PLOT_KEYWORDS]
    return out


def _plot_value(rng: random.Random, kw: ast.keyword) -> str | None:
    how = PLOT_KEYWORDS[kw.arg or ""]
    v = kw.value
    const = v.value if isinstance(v, ast.Constant) else None
    if how == "number" and isinstance(const, (int, float)) and not isinstance(const, bool):
        return _new_number(rng, const)
    if how == "size" and isinstance(v, ast.Tuple) and len(v.elts) == 2:
        return rng.choice(["(6, 4)", "(10, 5)", "(7, 7)"])
    if how == "color":
        return repr(rng.choice(["tab:orange", "purple", "0.3"]))
    if how == "linestyle":
        return repr(rng.choice(["dashed", "dotted", "-."]))
    if how == "string" and isinstance(const, str):
        return repr(const + " (edited)")
    if how == "loc":
        return repr(rng.choice(["upper left", "lower right"]))
    if how == "marker":
        return repr(rng.choice(["x", "s"]))
    return None


def _plot_edit(rng: random.Random, cells: list[Cell]) -> Edit | None:
    hit = _edit_source(rng, cells, _plot_keywords)
    if hit is None:
        return None
    i, kw, src = hit
    assert isinstance(kw, ast.keyword)
    new = _plot_value(rng, kw)
    if new is None:
        return None
    return _span_edit(
        "plot_argument",
        cells,
        i,
        kw.value,
        new,
        f"{cells[i].cell_id}: {kw.arg}={ast.unparse(kw.value)} -> {kw.arg}={new}",
    )


def _insert_after(cells: list[Cell], i: int, cid: str, source: str) -> tuple[Cell, ...]:
    out = list(cells)
    out.insert(i + 1, Cell(cid, source))
    return tuple(out)


def _bound_of(
    cells: list[Cell], bound: Bound, kinds: set[str]
) -> list[tuple[int, str, str, tuple[str, ...]]]:
    """(cell index, name, kind, numeric columns) for each name of one of ``kinds`` a cell binds."""
    out = []
    for i, c in enumerate(cells):
        for name, (kind, cols) in sorted(bound.get(c.cell_id, {}).items()):
            if kind in kinds:
                out.append((i, name, kind, cols))
    return out


def _filter_edit(rng: random.Random, cells: list[Cell], bound: Bound) -> Edit | None:
    frames = _bound_of(cells, bound, {"DataFrame"})
    if not frames:
        return None
    i, name, _, cols = rng.choice(frames)
    if cols and rng.random() < 0.6:
        col = rng.choice(cols)
        src = f"{name} = {name}[{name}[{col!r}] > {name}[{col!r}].min()]"
    else:
        src = f"{name} = {name}.iloc[: len({name}) - 1]"
    return Edit(
        "filter_frame",
        f"insert after {cells[i].cell_id}: {src}",
        _insert_after(cells, i, "field-filter", src),
        frozenset({"field-filter"}),
    )


def _inplace_edit(rng: random.Random, cells: list[Cell], bound: Bound) -> Edit | None:
    found = _bound_of(cells, bound, {"DataFrame", "ndarray", "list", "dict", "Series"})
    if not found:
        return None
    i, name, kind, _ = rng.choice(found)
    src = {
        "DataFrame": f"{name}.drop({name}.index[-1], inplace=True)",
        "ndarray": f"{name}.flat[0] = {name}.flat[-1]",
        "list": f"{name}.append({name}[-1])",
        "dict": f"{name}['field_edit'] = 1",
        "Series": f"{name}.iloc[0] = {name}.iloc[-1]",
    }[kind]
    return Edit(
        "inplace",
        f"insert after {cells[i].cell_id}: {_short(src)}",
        _insert_after(cells, i, "field-inplace", src),
        frozenset({"field-inplace"}),
    )


def _name_tokens(source: str, name: str) -> list[tuple[int, int]] | None:
    """(line, col) of every ``name`` token that is a variable (not an attribute, keyword
    argument or parameter); None when the cell does not tokenize."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(_parseable(source)).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    out = []
    for k, tok in enumerate(toks):
        if tok.type != tokenize.NAME or tok.string != name:
            continue
        prev = toks[k - 1].string if k else ""
        nxt = toks[k + 1].string if k + 1 < len(toks) else ""
        if prev == "." or (nxt == "=" and prev in {"(", ","}):
            return None  # an attribute or keyword of that name: renaming would be ambiguous
        out.append(tok.start)
    return out


def _rename_edit(rng: random.Random, cells: list[Cell], bound: Bound) -> Edit | None:
    definers: dict[str, list[int]] = {}
    for i, c in enumerate(cells):
        for name in analyze_source(c.source).defs:
            definers.setdefault(name, []).append(i)
    names = sorted(n for n, where in definers.items() if len(where) == 1 and len(n) > 1)
    rng.shuffle(names)
    for name in names:
        if any(f"%{name}" in c.source or "$" + name in c.source for c in cells):
            continue
        spots = [_name_tokens(c.source, name) for c in cells]
        if any(s is None for s in spots) or sum(len(s or []) for s in spots) < 2:
            continue
        if any(re.search(rf"['\"][^'\"]*\b{name}\b", c.source) for c in cells):
            continue  # mentioned inside a string (a formula, a query): not a plain rename
        new_name = f"{name}_renamed"
        out = list(cells)
        edited = set()
        for i, (c, at) in enumerate(zip(cells, spots)):
            if not at:
                continue
            lines = c.source.split("\n")
            for line, col in sorted(at, reverse=True):
                ln = lines[line - 1]
                lines[line - 1] = ln[:col] + new_name + ln[col + len(name) :]
            out[i] = Cell(c.cell_id, "\n".join(lines), c.tags)
            edited.add(c.cell_id)
        return Edit(
            "rename",
            f"{name} -> {new_name} in {', '.join(sorted(edited))}",
            tuple(out),
            frozenset(edited),
            renamed=(name, new_name),
        )
    return None


def _delete_edit(rng: random.Random, cells: list[Cell]) -> Edit | None:
    i = rng.randrange(len(cells))
    return Edit(
        "delete",
        f"delete {cells[i].cell_id}: {_short(cells[i].source)}",
        tuple(c for k, c in enumerate(cells) if k != i),
        frozenset(),
    )


def _independent(a: Cell, b: Cell) -> bool:
    x, y = analyze_source(a.source), analyze_source(b.source)
    if not (x.parseable and y.parseable):
        return False
    wx, wy = x.defs | x.mutates, y.defs | y.mutates
    return not (wx & (y.uses | wy) or wy & x.uses)


def _swap_edit(rng: random.Random, cells: list[Cell]) -> Edit | None:
    pairs = [i for i in range(len(cells) - 1) if _independent(cells[i], cells[i + 1])]
    if not pairs:
        return None
    i = rng.choice(pairs)
    out = list(cells)
    out[i], out[i + 1] = out[i + 1], out[i]
    return Edit(
        "swap", f"swap {cells[i].cell_id} and {cells[i + 1].cell_id}", tuple(out), frozenset()
    )


def _move_edit(rng: random.Random, cells: list[Cell]) -> Edit | None:
    i = rng.randrange(len(cells))
    to = min(max(i + rng.choice([-3, -2, 2, 3]), 0), len(cells) - 1)
    if to == i:
        return None
    out = list(cells)
    cell = out.pop(i)
    out.insert(to, cell)
    return Edit("move", f"move {cell.cell_id} from {i} to {to}", tuple(out), frozenset())


def draw_edit(rng: random.Random, cells: list[Cell], bound: Bound, kind: str) -> Edit | None:
    """One edit of ``kind`` (one of ``KINDS``), or None when the notebook offers none."""
    cells = list(cells)
    if kind in ("number", "number_in_function"):
        return _number_edit(rng, cells, kind == "number_in_function")
    if kind == "string":
        return _string_edit(rng, cells)
    if kind in ("fit_keyword", "keyword"):
        return _keyword_edit(rng, cells, kind == "fit_keyword")
    if kind == "plot_argument":
        return _plot_edit(rng, cells)
    if kind == "filter_frame":
        return _filter_edit(rng, cells, bound)
    if kind == "inplace":
        return _inplace_edit(rng, cells, bound)
    if kind == "rename":
        return _rename_edit(rng, cells, bound)
    if kind == "delete":
        return _delete_edit(rng, cells)
    if kind == "swap":
        return _swap_edit(rng, cells)
    if kind == "move":
        return _move_edit(rng, cells)
    raise ValueError(f"unknown edit kind {kind!r}; one of {', '.join(KINDS)}")
