"""``HANDLER_MODULES``: where a worker's handlers come from, and the only place they may.

Names resolve as uvicorn resolves its app: from the current directory first, so
``HANDLER_MODULES=revenue faust -A app worker`` run in the folder holding
``revenue/`` finds it without ``PYTHONPATH`` (the ``faust`` script puts its own
folder, not the current one, at the head of ``sys.path``). The worker, the
migrations and ``trace`` all look the same way.

The list is an allowlist. A ``@handler`` registered from a module outside it (one
that a listed module imports from elsewhere) would run without that module's
migrations, publishing into real topics: the worker refuses to start and names it.
A listed package covers its submodules (``handlers`` covers ``handlers.points``).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from types import ModuleType

from app.errors import ConfigurationError, raised_at
from app.registry import HandlerSpec, Registry


def search_current_directory() -> None:
    """Put the current directory at the head of ``sys.path`` unless it is there already."""
    here = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == here for entry in sys.path):
        sys.path.insert(0, here)


def import_handler_modules(names: Sequence[str]) -> None:
    """Import ``names`` (found from the current directory first) so their ``@handler``s
    register; a module that cannot be found is a ``ConfigurationError``."""
    search_current_directory()
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # The listed module itself, or one that it imports (then: where).
            missing = exc.name or ""
            inside = "" if name == missing or name.startswith(f"{missing}.") else _where(exc)
            raise ConfigurationError(
                f"HANDLER_MODULES: cannot import {name!r}: {exc}{inside}"
            ) from None
        except SyntaxError as exc:  # the file and line say it all: no traceback needed
            where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "its source"
            raise ConfigurationError(
                f"HANDLER_MODULES: {name!r} does not compile: {exc.msg} ({where})"
            ) from None
        except ConfigurationError:
            raise  # a @handler's own mistake, said in its words
        except Exception as exc:  # the module's code failed as it ran: what and where
            raise ConfigurationError(
                f"HANDLER_MODULES: importing {name!r} failed: {type(exc).__name__}: {exc}"
                f"{_where(exc)}"
            ) from None


def _where(exc: BaseException) -> str:
    """`` (file, line N)`` of the innermost frame of ``exc``'s traceback outside Python's
    import machinery: the line of the handler package that failed."""
    found = raised_at(exc, lambda filename: not filename.startswith("<frozen"))
    return f" ({found})" if found else ""


def check_allowlist(registry: Registry, names: Sequence[str]) -> None:
    """Raise ``ConfigurationError`` naming every module outside ``names`` that registered a
    ``@handler`` in ``registry``."""
    check_specs(registry.specs(), names)


def imported_by(names: Sequence[str]) -> set[str]:
    """The modules ``names`` (and their submodules) import, directly or through others:
    every module reached from theirs through a module, or an object of one, they hold."""
    todo: list[ModuleType | None] = [
        module for name, module in list(sys.modules.items()) if listed(name, names)
    ]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module is None or module.__name__ in seen:
            continue
        seen.add(module.__name__)
        for value in list(vars(module).values()):
            if isinstance(value, ModuleType):
                todo.append(value)
            elif isinstance(owner := getattr(value, "__module__", None), str):
                todo.append(sys.modules.get(owner))
    return seen


def listed(module: str, names: Sequence[str]) -> bool:
    """Whether ``module`` is one of ``names`` or a submodule of one."""
    return any(module == name or module.startswith(f"{name}.") for name in names)


def check_specs(specs: Iterable[HandlerSpec], names: Sequence[str]) -> None:
    """``check_allowlist`` for ``specs`` (the handlers an import registered, say)."""
    outside: dict[str, set[str]] = {}
    for spec in specs:
        module = spec.fn.__module__
        if not listed(module, names):
            outside.setdefault(module, set()).add(spec.consumer)
    if not outside:
        return
    found = "; ".join(
        f"{module!r} registers consumer {', '.join(map(repr, sorted(consumers)))}"
        for module, consumers in sorted(outside.items())
    )
    raise ConfigurationError(
        f"HANDLER_MODULES={','.join(names)!r} is the list of modules whose handlers run, and "
        f"{found} from outside it (imported by one of them?): add the module to "
        "HANDLER_MODULES, so that its migrations run too, or stop importing it"
    )
