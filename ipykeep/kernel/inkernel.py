"""Installing ipykeep's in-kernel helper modules: one expression for every helper.

A helper is standard-library-only source that the engine sends into the user's kernel and
keeps as ``sys.modules[name]``, so later calls are short expressions on it. The install is a
single *expression*: it can ride on a ``user_expressions`` request (no execution count, no
history, no name bound in the user's globals) or be executed as a statement.

It installs when the module is missing or was built from other source (a daemon of another
version adopting the kernel), and does nothing otherwise, so sending it again is cheap and
never resets a helper's state. ``adopt`` names a function of the new module called with the
previous copy (or None), for helpers that carry state across an upgrade.
"""

from __future__ import annotations

import hashlib

#: Attribute recording which source a helper module was built from.
DIGEST_ATTR = "__ipykeep_digest__"


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def install_expression(
    module_name: str, source: str, *, adopt: str | None = None, result: str | None = None
) -> str:
    """An expression installing ``source`` as ``sys.modules[module_name]`` unless already there.

    It evaluates to the module's attribute ``result`` (e.g. its protocol version), or True.
    """
    digest = source_digest(source)
    filename = f"<ipykeep:{module_name}>"
    value = f"getattr(m, {result!r})" if result else "True"
    current = f"getattr(old, {result!r})" if result else "True"
    adopt_call = f"getattr(m, {adopt!r})(old), " if adopt else ""
    build = (
        "(lambda m: ("
        f"m.__dict__.update(__file__={filename!r}), "
        f"exec(compile({source!r}, {filename!r}, 'exec'), m.__dict__), "
        f"{adopt_call}"
        f"setattr(m, {DIGEST_ATTR!r}, {digest!r}), "
        f"sys.modules.__setitem__({module_name!r}, m), "
        f"{value})[-1])"
        f"(types.ModuleType({module_name!r}))"
    )
    return (
        "(lambda sys, types: (lambda old: "
        f"{current} if getattr(old, {DIGEST_ATTR!r}, None) == {digest!r} else {build})"
        f"(sys.modules.get({module_name!r})))"
        "(__import__('sys'), __import__('types'))"
    )
