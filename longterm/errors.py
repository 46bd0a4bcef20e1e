"""One error family for everything longterm raises on purpose.

The seam: callers catch ``LongTermMemoryError`` (or one of its few subclasses) and
never a client library's exception. Each message says what is wrong *and what to do
next*; the original exception stays chained as ``__cause__`` for debugging.

Why so few classes: users branch on "my input was bad", "my configuration is wrong",
"an optional package is missing" and "the server is unreachable"; finer distinctions
belong in the message, not in the type hierarchy.
"""

from __future__ import annotations

from types import ModuleType


class LongTermMemoryError(Exception):
    """Base class of every error longterm raises deliberately."""


class ConfigurationError(LongTermMemoryError, ValueError):
    """The configuration (backend name, backend_config, environment) is invalid."""


class InvalidInputError(LongTermMemoryError, ValueError):
    """A session, event, id or query given by the caller cannot be used."""


class MissingDependencyError(LongTermMemoryError, ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the optional package '{package}', which is not installed. "
            f"Install it with: pip install 'longterm[{extra}]'"
        )


class BackendUnavailableError(LongTermMemoryError, ConnectionError):
    """The backend's engine could not be reached or refused the operation."""


class BackendError(LongTermMemoryError, RuntimeError):
    """The backend's engine answered, but the operation failed."""


def require(module: str, *, package: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional module or raise MissingDependencyError naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(package, extra, purpose) from exc


def raise_ours_from(exc: Exception) -> None:
    """Re-raise a LongTermMemoryError that pydantic wrapped into a ValidationError.

    Our validators and ``model_post_init`` raise our own errors; pydantic turns any
    ValueError into a ValidationError, which would hide the message users need.
    """
    errors = getattr(exc, "errors", None)
    if callable(errors):
        for err in errors():
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, LongTermMemoryError):
                raise cause from None


def first_problem(exc: Exception, root: str) -> tuple[str, str]:
    """(where, message) of a pydantic ``ValidationError``'s first error, for our own message.

    ``where`` is the dotted location (``root`` when the error is the model's own), the
    message loses pydantic's ``"Value error, "`` prefix; a ``LongTermMemoryError`` raised
    by one of our validators is re-raised as itself instead (``raise_ours_from``).
    """
    raise_ours_from(exc)
    errors = getattr(exc, "errors", None)
    first = errors()[0] if callable(errors) and errors() else {"loc": (), "msg": str(exc)}
    where = ".".join(str(p) for p in first["loc"]) or root
    return where, str(first["msg"]).removeprefix("Value error, ")
