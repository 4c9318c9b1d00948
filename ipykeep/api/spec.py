"""What a declared daemon method is: its name, params model, result type and error codes.

``Method[P, R]`` is generic in its params model ``P`` and result type ``R`` so a type checker
follows a call: ``DaemonClient.invoke(methods.EXECUTE, ExecuteParams(...))`` is an
``ExecutionRecord``, and ``Binding(EXECUTE, engine.execute)`` must bind a callable returning one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from ipykeep.api import error_codes as codes
from ipykeep.api.errors import UsageError
from ipykeep.api.names import ALL


class Params(BaseModel):
    """Base of every params model: unknown arguments are refused (``bad_argument``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def kwargs(self) -> dict[str, Any]:
        """Every field as a keyword argument of the bound callable (the declared defaults win)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


#: Longest path and path component the system takes (Linux: PATH_MAX, NAME_MAX, in bytes).
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
#: Longest kernel id accepted (ids are ``k1``, ``k2``…).
MAX_KERNEL_ID = 64


def _a_path(value: str) -> str:
    # What the OS would refuse deep in the engine (a ValueError, ENAMETOOLONG) is a bad
    # argument here, said in the caller's terms.
    if "\0" in value:
        raise ValueError("not a path: it holds a NUL byte")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise ValueError(f"not a path: longer than {MAX_PATH_BYTES} bytes")
    if any(
        len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in value.split("/")
    ):
        raise ValueError(f"not a path: a name in it is longer than {MAX_NAME_BYTES} bytes")
    return value


def lone_surrogate_at(value: Any, where: str = "params") -> str | None:
    """Where in ``value`` (JSON-like) a string holds a lone surrogate (``"\\ud800"`` in JSON),
    which no file name, kernel message or notebook can carry; None when there is none."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = lone_surrogate_at(key, where) or lone_surrogate_at(item, f"{where}.{key}")
        if found:
            return found
    return None


def _cell_ref(value: Any) -> Any:
    # A 0-based index may come as a JSON number; a bool is not an index.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


#: A file or directory path.
PathArg = Annotated[str, AfterValidator(_a_path)]
#: A notebook cell: its nbformat id, or its 0-based index among all cells.
CellRef = Annotated[str, BeforeValidator(_cell_ref)]

#: The kernel a call is about: by id, or by its notebook; both optional with one kernel.
KernelIdField = Field(default=None, max_length=MAX_KERNEL_ID, description="kernel id, e.g. k1")
NotebookField = Field(default=None, description="notebook whose kernel to use")


class KernelParams(Params):
    """Names a kernel by id or by notebook (neither: the only one running)."""

    kernel_id: str | None = KernelIdField
    notebook: PathArg | None = NotebookField


P = TypeVar("P", bound=Params)
R = TypeVar("R")


@dataclass(frozen=True)
class Method(Generic[P, R]):
    """One daemon RPC method."""

    name: str
    params: type[P]
    #: The result's type: a model, ``list[model]``…
    result: Any
    #: Codes of the errors it raises on purpose (``errors.ANY_CALL`` are implied).
    errors: tuple[str, ...]
    doc: str

    def __post_init__(self) -> None:
        if self.name not in ALL:
            raise ValueError(f"{self.name!r} is not in api.names")
        unknown = [c for c in self.errors if c not in codes.ERROR_CLASSES]
        if unknown:
            raise ValueError(f"{self.name}: unregistered error codes {unknown}")

    @cached_property
    def result_adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.result)

    def validate(self, raw: Mapping[str, Any]) -> P:
        """``raw`` as the params model; a ``bad_argument`` error (``UsageError``) naming each
        argument that is unknown, missing or of the wrong type, never a ``ValidationError``."""
        bad_text = lone_surrogate_at(raw)
        if bad_text is not None:
            where = bad_text.removeprefix("params.") if bad_text != "params" else bad_text
            raise UsageError(
                f"{self.name}: bad argument(s): {where}: holds a lone surrogate (such as "
                "\\ud800), which is not valid Unicode text",
                hint="send text that encodes as UTF-8",
            )
        try:
            return self.params.model_validate(raw)
        except ValidationError as exc:
            problems = []
            for err in exc.errors()[:5]:
                where = ".".join(map(str, err["loc"])) or "params"
                if err["type"] == "extra_forbidden":
                    problems.append(f"unknown argument {where!r}")
                elif err["type"] == "missing":
                    problems.append(f"missing argument {where!r}")
                else:
                    problems.append(f"{where}: {err['msg']}")
            takes = ", ".join(self.params.model_fields) or "no arguments"
            raise UsageError(
                f"{self.name}: bad argument(s): {'; '.join(problems)}",
                hint=f"{self.name} takes: {takes}",
            ) from None

    def build(self, **kwargs: Any) -> P:
        """The params model from keyword arguments, checked as ``validate`` does."""
        return self.validate(kwargs)

    def dump_result(self, value: Any) -> Any:
        """The JSON form of a result: validated against the declared type, ``None``s left out."""
        # Model instances are taken as they are (pydantic does not revalidate them); a dict is
        # checked against the declared model, so a handler cannot drift from the contract.
        value = self.result_adapter.validate_python(value)
        return self.result_adapter.dump_python(value, mode="json", exclude_none=True)

    def load_result(self, raw: Any) -> R:
        """The typed result from its JSON form (client side)."""
        result: R = self.result_adapter.validate_python(raw)
        return result


class Served:
    """A declared method and what serves it, whatever their types: what a table holds.

    Not generic on purpose: a ``bind(...)`` written where a ``Served`` is expected gives the
    type checker no types to take from the context, so it checks the handler's result type
    against the method's declared one (a ``Binding[Any, Any]`` context would accept anything).
    """

    method: Method[Any, Any]
    handler: Callable[..., Any]


@dataclass(frozen=True)
class Binding(Served, Generic[P, R]):
    """A method bound to the callable that serves it: called with the params' fields as
    keyword arguments, returning the result (or an awaitable of it)."""

    method: Method[P, R]
    handler: Callable[..., Awaitable[R]] | Callable[..., R]


#: The methods one service serves (each service's ``bindings()`` returns them).
Bindings = tuple[Served, ...]


def bind(
    method: Method[P, R], handler: Callable[..., Awaitable[R]] | Callable[..., R]
) -> Binding[P, R]:
    """``method`` served by ``handler`` (the type checker holds its result to the declaration)."""
    return Binding(method, handler)
