"""One exception tree for locpriv, and the stable error codes used on the wire.

::

    LocprivError                           .code: the wire ErrorCode it stands for
    ├── ConfigError(ValueError)            bad configuration or CLI arguments   bad_parameters
    ├── DecodeError(ValueError)            a wire message we cannot accept      (its own .code)
    ├── InfeasibleError(ValueError)        privacy parameters that cannot be met bad_parameters
    │   ├── CloakInfeasible                no region meets (k, A_min, A_max) now cloak_infeasible
    │   ├── CloakTimeout                   temporal cloaking gave up            cloak_timeout
    │   ├── GroupInfeasible                P4: no group of k fits the window    group_infeasible
    │   └── UnknownUser                    no current location for the user     unknown_user
    ├── ServiceUnavailable                 shutting down, restarted             unavailable
    │   ├── Overloaded                     a bounded queue is full; retry later overloaded
    │   └── RateLimited                    the sender exceeded a rate limit     rate_limited
    ├── DataError(ValueError)              tabular input unusable (NaN, column) invalid_field
    ├── ProtocolError
    │   ├── RemoteError                    the other side answered with an error reply
    │   └── LocalProtocolError             we were asked to do something out of protocol
    ├── ServiceFailure                     a service cannot go on (exit non-zero, restart it)
    └── TransportError(ConnectionError)    broker unreachable or gone           unavailable
        └── RequestTimeout(TimeoutError)   no reply within the caller's timeout upstream_timeout

Every error that crosses the wire carries one :class:`ErrorCode` (stable, machine readable)
and a human ``reason``. :func:`remote_error` turns an error reply into an exception that is a
:class:`RemoteError` *and* the local class of its code, so ``except CloakTimeout`` catches a
service's ``cloak_timeout`` reply as well as the cloaking core's own.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Stable codes of :class:`locpriv.wire.messages.ErrorReply`; listed in docs/protocol.md."""

    MALFORMED = "malformed"
    """Payload is not JSON, not an object, or too large."""
    INVALID_FIELD = "invalid_field"
    """A field is missing, extra, of the wrong type or out of range."""
    UNSUPPORTED_VERSION = "unsupported_version"
    """The schema version is not one this service speaks."""
    UNKNOWN_TYPE = "unknown_type"
    """The ``type`` discriminator names no known message."""
    WRONG_TYPE = "wrong_type"
    """A valid message sent to a topic that does not take that type."""
    TOO_LARGE = "too_large"
    """The payload exceeds the service's size limit."""
    BAD_PARAMETERS = "bad_parameters"
    """Privacy parameters outside the operator's bounds (k, areas, delay)."""
    UNKNOWN_USER = "unknown_user"
    """No current location is known for the requesting user."""
    CLOAK_INFEASIBLE = "cloak_infeasible"
    """No region can satisfy the request (for example A_max too small for k)."""
    CLOAK_TIMEOUT = "cloak_timeout"
    """Temporal cloaking waited max_delay_s without finding a region."""
    GROUP_INFEASIBLE = "group_infeasible"
    """Protocol 4 found no group of k peers fitting the area window."""
    OVERLOADED = "overloaded"
    """A bounded queue is full; retry later."""
    RATE_LIMITED = "rate_limited"
    """The sender exceeded a rate limit."""
    UPSTREAM_TIMEOUT = "upstream_timeout"
    """The database server did not answer the mediator in time."""
    UNAVAILABLE = "unavailable"
    """The service is shutting down or a dependency is unreachable."""
    INTERNAL = "internal"
    """An unexpected failure inside the service (logged there)."""


class LocprivError(Exception):
    """Base of every exception raised by locpriv."""

    default_code: ErrorCode = ErrorCode.INTERNAL

    @property
    def code(self) -> ErrorCode:
        """The wire error code that represents this exception."""
        return self.default_code


class ConfigError(LocprivError, ValueError):
    """Invalid configuration, CLI argument or operator bound."""

    default_code = ErrorCode.BAD_PARAMETERS


class DecodeError(LocprivError, ValueError):
    """A wire message was rejected.

    ``field`` names the offending field (dotted path) when there is one.
    """

    def __init__(self, code: ErrorCode, reason: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self._code = code
        self.reason = reason
        self.field = field

    @property
    def code(self) -> ErrorCode:
        return self._code


class InfeasibleError(LocprivError, ValueError):
    """Privacy parameters that cannot be met on the given data or population."""

    default_code = ErrorCode.BAD_PARAMETERS


class CloakInfeasible(InfeasibleError):
    """No cloaking region satisfies (k, A_min, A_max) for this user now."""

    default_code = ErrorCode.CLOAK_INFEASIBLE


class CloakTimeout(InfeasibleError):
    """Temporal cloaking gave up after the request's tolerance."""

    default_code = ErrorCode.CLOAK_TIMEOUT


class GroupInfeasible(InfeasibleError):
    """Protocol 4: no k-group of replies spans A_min < A < A_max. ``reason_code`` is the
    :class:`~locpriv.core.grouping.InfeasibleReason` value (``too_few_replies``,
    ``area_too_small``, ...) when this device chose no group, None for an error reply."""

    default_code = ErrorCode.GROUP_INFEASIBLE

    def __init__(self, message: str, reason_code: str | None = None) -> None:
        super().__init__(message)
        self.reason_code = reason_code


class UnknownUser(InfeasibleError):
    """No current location is known for the requesting user (code ``unknown_user``)."""

    default_code = ErrorCode.UNKNOWN_USER


class ServiceUnavailable(LocprivError):
    """The service is shutting down, restarted, or cannot reach a dependency."""

    default_code = ErrorCode.UNAVAILABLE


class Overloaded(ServiceUnavailable):
    """A bounded queue or table is full; retry later (code ``overloaded``)."""

    default_code = ErrorCode.OVERLOADED


class RateLimited(ServiceUnavailable):
    """The sender exceeded a rate limit; retry later (code ``rate_limited``)."""

    default_code = ErrorCode.RATE_LIMITED


class DataError(LocprivError, ValueError):
    """Tabular input that cannot be anonymised as asked (names the column)."""

    default_code = ErrorCode.INVALID_FIELD


class ProtocolError(LocprivError):
    """A protocol-level failure."""


class RemoteError(ProtocolError):
    """The other side answered with an error reply; ``details`` is its ``details`` object as a
    dict (the right tile, the profile bounds; docs/protocol.md, "Errors") or None."""

    def __init__(
        self,
        code: ErrorCode | str,
        reason: str,
        field: str | None = None,
        details: dict[str, object] | None = None,
    ) -> None:
        super().__init__(f"{code}: {reason}")
        self.details = details
        try:
            self._code = ErrorCode(code)
        except ValueError:
            self._code = ErrorCode.INTERNAL
        self.raw_code = str(code)
        self.reason = reason
        self.field = field

    @property
    def code(self) -> ErrorCode:
        return self._code


class LocalProtocolError(ProtocolError):
    """This side was asked to act out of protocol (a programming error)."""


class ServiceFailure(LocprivError):
    """A running service cannot go on (a task died, publishing is wedged): the process must
    exit with a non-zero status so that its supervisor restarts it."""

    default_code = ErrorCode.UNAVAILABLE


class TransportError(LocprivError, ConnectionError):
    """The MQTT broker is unreachable or the connection was lost."""

    default_code = ErrorCode.UNAVAILABLE


class RequestTimeout(TransportError, TimeoutError):
    """No reply arrived within the caller's timeout."""

    default_code = ErrorCode.UPSTREAM_TIMEOUT


_LOCAL_OF_CODE: dict[ErrorCode, type[LocprivError]] = {
    ErrorCode.BAD_PARAMETERS: InfeasibleError,
    ErrorCode.CLOAK_INFEASIBLE: CloakInfeasible,
    ErrorCode.CLOAK_TIMEOUT: CloakTimeout,
    ErrorCode.GROUP_INFEASIBLE: GroupInfeasible,
    ErrorCode.UNKNOWN_USER: UnknownUser,
    ErrorCode.UNAVAILABLE: ServiceUnavailable,
    ErrorCode.OVERLOADED: Overloaded,
    ErrorCode.RATE_LIMITED: RateLimited,
    ErrorCode.UPSTREAM_TIMEOUT: RequestTimeout,
}
_REMOTE_OF_CODE: dict[ErrorCode, type[RemoteError]] = {
    code: type(f"Remote{local.__name__}", (RemoteError, local), {"__module__": __name__})
    for code, local in _LOCAL_OF_CODE.items()
}


def remote_error(
    code: ErrorCode | str,
    reason: str,
    field: str | None = None,
    details: dict[str, object] | None = None,
) -> RemoteError:
    """The exception for an error reply: a :class:`RemoteError` that is also the local class of
    ``code`` (``CloakTimeout`` for ``cloak_timeout``, ``Overloaded`` for ``overloaded``, ...);
    codes that only describe our own request (``invalid_field``, ...) give a plain one."""
    try:
        cls = _REMOTE_OF_CODE.get(ErrorCode(code), RemoteError)
    except ValueError:
        cls = RemoteError
    return cls(code, reason, field, details)
