"""Exceptions: one class per libplan status code, all under libplan.Error."""

from . import _lib


class Error(Exception):
    """A failing libplan call. `code` is the negative status (PLAN_E*),
    `status` its short name ("syntax", "invalid", ...); `file`, `line` and
    `column` (1-based, 0 when unknown) say where in the input it failed."""

    status = "error"

    def __init__(self, message, code=0, file="", line=0, column=0):
        super().__init__(message)
        self.message = message
        self.code = code
        self.file = file
        self.line = line
        self.column = column

    def __str__(self):
        where = self.file
        if where and self.line:
            where += ":%d" % self.line
            if self.column:
                where += ":%d" % self.column
        return "%s: %s" % (where, self.message) if where else self.message


PlanError = Error


class NoMemoryError(Error, MemoryError):
    status = "nomem"


class FileError(Error, OSError):
    """A file could not be read or written (PLAN_EIO)."""
    status = "io"

    def __init__(self, message, code=0, file="", line=0, column=0):
        Error.__init__(self, message, code, file, line, column)
        self.filename = file or None

    def __str__(self):
        return Error.__str__(self)


class ParseError(Error):
    """Not well-formed YAML, or not UTF-8 (PLAN_ESYNTAX); base class of the
    other load-time failures about a document's structure."""
    status = "syntax"


class SchemaError(ParseError):
    """Wrong structure: unknown field, wrong type, missing field."""
    status = "schema"


class VersionError(ParseError):
    """A format version this library cannot read."""
    status = "version"


class InvalidError(Error, ValueError):
    """Well-formed but meaningless: unknown op, dangling name, cycle, bad
    shape, illegal placement spelling; also a plan that does not lower."""
    status = "invalid"


class DriftError(InvalidError):
    """Plan.check_program(strict=True): the plan no longer fits the
    program (the first error's position; all findings in `findings`)."""


class LimitError(Error):
    """Over a documented limit: nesting, size, count."""
    status = "limit"


class UsageError(Error, ValueError):
    """A bad argument (also: using a closed handle)."""
    status = "usage"


class RangeError(UsageError, OverflowError):
    """An integer argument that does not fit the C type it is passed as
    (C would cut it short: 2**62 as an int is 0)."""


class NotFoundError(Error, LookupError):
    """A named object (op, tensor, part, profile) does not exist."""
    status = "notfound"


class UnsupportedError(Error):
    """Valid, but not available here (e.g. verifying a pipeline)."""
    status = "unsupported"


_BY_CODE = {-1: NoMemoryError, -2: FileError, -3: ParseError, -4: SchemaError,
            -5: VersionError, -6: InvalidError, -7: LimitError, -8: UsageError,
            -9: NotFoundError, -10: UnsupportedError}


def error_class(code):
    return _BY_CODE.get(code, Error)


def last_error(code):
    """The exception for status `code`, from the calling thread's last error
    (read right after the failing call, before any other libplan call)."""
    e = _lib.fn.error_last().contents
    msg = _lib.s(e.message) or _lib.s(_lib.fn.status_name(code))
    return error_class(code)(msg, code, _lib.s(e.file), e.line, e.column)


def check(rc):
    """Raises the mapped exception when rc is a negative status."""
    if rc < 0:
        raise last_error(rc)
    return rc
