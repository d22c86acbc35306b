"""One exception class per STRATA_E* code (include/strata/errno.h).

Every error of libstrata is a StrataError carrying the code (``code``,
``errname``: "STRATA_EDATA") and, as its message, the lines libstrata
logged as errors during the call (file:line, key, peer), or the code's
text when it logged none. A class also derives from the built-in exception
a Python user would expect (InvalidArgument is a ValueError, OutOfMemory a
MemoryError, Timeout a TimeoutError)."""

from typing import Dict, List, Type


class StrataError(Exception):
    """An error of libstrata: ``code`` (negative), ``errname``, ``lines``
    (the error lines it logged)."""
    code = 0
    errname = "STRATA_E?"

    def __init__(self, message: str, lines: "List[str] | None" = None,
                 code: "int | None" = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.lines = list(lines or [])


def _cls(name: str, code: int, errname: str, doc: str, *bases) -> type:
    return type(name, (StrataError,) + bases,
                {"code": code, "errname": errname, "__doc__": doc,
                 "__module__": __name__})


# (class, code, STRATA_ name, extra base) in errno.h's order.
_TABLE = [
    ("InvalidArgument", -1, "EINVAL", ValueError),
    ("OutOfMemory", -2, "ENOMEM", MemoryError),
    ("NotSupported", -3, "ENOTSUP", None),
    ("Declined", -4, "EDECLINE", None),
    ("ABIMismatch", -5, "EABI", None),
    ("NotFound", -6, "ENOENT", LookupError),
    ("IOFailure", -7, "EIO", None),
    ("ConfigError", -8, "ECONFIG", ValueError),
    ("DataError", -9, "EDATA", ValueError),
    ("Timeout", -10, "ETIMEDOUT", TimeoutError),
    ("PeerError", -11, "EPEER", None),
    ("ProtocolError", -12, "EPROTO", None),
    ("TryAgain", -13, "EAGAIN", None),
    ("Canceled", -14, "ECANCELED", None),
    ("DeviceError", -15, "EDEVICE", None),
    ("StateError", -16, "ESTATE", None),
    ("InternalError", -17, "EINTERNAL", None),
    ("PluginNotFound", -18, "ENOPLUGIN", None),
    ("Stopped", -19, "ESTOPPED", None),
    ("Diverged", -20, "EDIVERGED", ArithmeticError),
    ("Untrusted", -21, "EUNTRUSTED", PermissionError),
]

BY_CODE: Dict[int, Type[StrataError]] = {}
for _name, _code, _short, _base in _TABLE:
    _k = _cls(_name, _code, "STRATA_" + _short,
              "STRATA_%s (%d)." % (_short, _code),
              *((_base,) if _base else ()))
    globals()[_name] = _k
    BY_CODE[_code] = _k
del _name, _code, _short, _base, _k

__all__ = ["StrataError", "BY_CODE"] + [t[0] for t in _TABLE]


def error_for(code: int, lines: List[str], fallback: str) -> StrataError:
    """The exception for `code`: the logged lines, else `fallback`."""
    cls = BY_CODE.get(code, StrataError)
    text = "\n".join(lines) if lines else fallback
    return cls(text, lines, code=code)
