"""What dsched accepts as a name, in one place: parameter names (a grammar plus a reserved set) and
the Unicode names of projects, workflows and tasks (ARCHITECTURE.md §9).

Pure functions. The SDK checks locally with them, the server checks every request again with the
same functions, and the worker applies the parameter rules to the OUT parameters it parses and to
the environment it builds, so a rule cannot differ between the places that enforce it.

**Parameter names** reach a task as environment variable names. A name must be an identifier
(``[A-Za-z_][A-Za-z0-9_]*``, at most :data:`MAX_PARAM_NAME_LENGTH` characters) outside the
reserved set: variables that change how a task's interpreter, the loader or the tools a script
calls start or behave, so that whoever may start a run, or an upstream task's output, could
otherwise run commands of their choosing on a worker (``BASH_ENV='$(...)'``). Names are compared
with the reserved set without regard to case: some programs read both spellings (``http_proxy``),
and one rule is easier to reason about than a list of exceptions; so ``path``, ``home`` and ``env``
are refused as well.

**Names of projects, workflows and tasks** may be in any script (``每日报表``): at most
:data:`MAX_NAME_LENGTH` code points and :data:`MAX_NAME_BYTES` UTF-8 bytes; letters, marks,
digits, punctuation, symbols and the ASCII space; starting with a letter or digit; not ending with
a space; no control, format (bidi controls, zero-width characters), private-use, unassigned or
invisible filler characters, no other spaces, no ``/`` or ``\\``; and in Unicode normal form NFC.
A name not in NFC is refused rather than normalised: a name is an identity compared code point by
code point, and normalising silently would make a client's name differ from the one stored, or two
spellings meet one object. Worker groups stay ASCII (:data:`WORKER_GROUP_RE`): they are settings
of worker processes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from dsched.errors import FieldViolation
from dsched.reasons import Reason

INVALID_PARAMETER_NAME = Reason.INVALID_PARAMETER_NAME
RESERVED_PARAMETER_NAME = Reason.RESERVED_PARAMETER_NAME
# The reasons of a refused parameter name, the one that wins first (see reason_for).
PARAMETER_NAME_REASONS = (RESERVED_PARAMETER_NAME, INVALID_PARAMETER_NAME)

MAX_PARAM_NAME_LENGTH = 128
PARAM_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_SHELL = "bash or sh reads it at start-up or it changes how they run"
_PROGRAMS = "it decides which programs run"
_CONFIG = "it decides which configuration files programs read"
_LOADER = "the dynamic loader or the C library reads it"
_INTERPRETER = "an interpreter reads it at start-up"
_LAUNCHER = "Spark, Hadoop, Hive or Kerberos tools read it to pick code, configuration or identity"
_NETWORK = "it redirects or intercepts network traffic"
_COMMANDS = "git or ssh run commands or pick credentials from it"
_DSCHED = "dsched sets its DSCHED_ variables itself"

# Exact names (upper case) and why each is reserved.
RESERVED_NAMES: dict[str, str] = {
    **dict.fromkeys(
        [
            "ENV",
            "SHELLOPTS",
            "POSIXLY_CORRECT",
            "PS0",
            "PS1",
            "PS2",
            "PS3",
            "PS4",
            "PROMPT_COMMAND",
            "IFS",
            "CDPATH",
            "GLOBIGNORE",
            "EXECIGNORE",
            "FUNCNEST",
        ],
        _SHELL,
    ),
    **dict.fromkeys(["PATH", "SHELL"], _PROGRAMS),
    "HOME": _CONFIG,
    # glibc's own list of variables it removes for set-uid programs (UNSECURE_ENVVARS).
    **dict.fromkeys(
        [
            "GCONV_PATH",
            "GETCONF_DIR",
            "HOSTALIASES",
            "LOCALDOMAIN",
            "LOCPATH",
            "NIS_PATH",
            "NLSPATH",
            "RESOLV_HOST_CONF",
            "RES_OPTIONS",
            "TMPDIR",
            "TZDIR",
        ],
        _LOADER,
    ),
    **dict.fromkeys(
        [
            "NODE_OPTIONS",
            "NODE_PATH",
            "GEM_HOME",
            "GEM_PATH",
            "BUNDLE_GEMFILE",
            "CLASSPATH",
            "JAVA_HOME",
            "JAVA_TOOL_OPTIONS",
            "_JAVA_OPTIONS",
            "JDK_JAVA_OPTIONS",
        ],
        _INTERPRETER,
    ),
    **dict.fromkeys(
        [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "FTP_PROXY",
            "ALL_PROXY",
            "NO_PROXY",
            "SSL_CERT_FILE",
            "SSL_CERT_DIR",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
        ],
        _NETWORK,
    ),
    **dict.fromkeys(["SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "SSH_AUTH_SOCK"], _COMMANDS),
}

# Prefixes (upper case): whole families, including members added by later versions of the tools.
RESERVED_PREFIXES: dict[str, str] = {
    "BASH": _SHELL,  # BASH_ENV, BASHOPTS, BASH_FUNC_*, BASH_XTRACEFD, BASH_LOADABLES_PATH, ...
    "XDG_": _CONFIG,
    "LD_": _LOADER,
    "GLIBC_": _LOADER,  # GLIBC_TUNABLES
    "MALLOC_": _LOADER,
    "PYTHON": _INTERPRETER,
    "PERL": _INTERPRETER,  # PERL5LIB, PERL5OPT, PERLLIB, PERLIO, ...
    "RUBY": _INTERPRETER,
    "SPARK_": _LAUNCHER,
    "PYSPARK_": _LAUNCHER,
    "HADOOP_": _LAUNCHER,  # HADOOP_USER_NAME is any user under simple authentication
    "YARN_": _LAUNCHER,
    "HIVE_": _LAUNCHER,
    "KRB5": _LAUNCHER,
    "GIT_": _COMMANDS,  # GIT_SSH_COMMAND, GIT_CONFIG_*, GIT_EXEC_PATH, ...
    "DSCHED_": _DSCHED,
}


def reserved_because(name: str) -> str | None:
    """Why ``name`` is reserved (compared without regard to case), or None if it is not."""
    upper = name.upper()
    why = RESERVED_NAMES.get(upper)
    if why is not None:
        return why
    for prefix, why in RESERVED_PREFIXES.items():
        if upper.startswith(prefix):
            return why
    return None


def param_name_problem(name: str) -> tuple[str, str] | None:
    """``(reason, description)`` if ``name`` cannot be a parameter name, else None. The reason is
    :data:`INVALID_PARAMETER_NAME` (outside the grammar) or :data:`RESERVED_PARAMETER_NAME`."""
    if len(name) > MAX_PARAM_NAME_LENGTH or not PARAM_NAME_RE.match(name):
        return INVALID_PARAMETER_NAME, (
            f"parameter name {_shown(name)} is not an identifier: at most "
            f"{MAX_PARAM_NAME_LENGTH} ASCII letters, digits and '_', not starting with a digit"
        )
    why = reserved_because(name)
    if why is not None:
        return RESERVED_PARAMETER_NAME, (
            f"parameter name {name!r} is reserved: {why} (names are compared without regard to "
            "case)"
        )
    return None


def param_path(path: str, name: str) -> str:
    """The field path of parameter ``name`` in the map at ``path``: ``workflow.params['x']``.
    An over-long name is cut, so that a hostile name cannot make the error details huge."""
    return f"{path}[{_shown(name)}]"


def param_name_violation(path: str, name: str) -> FieldViolation | None:
    """A violation (with its reason) of parameter ``name`` in the map at ``path``, or None."""
    problem = param_name_problem(name)
    if problem is None:
        return None
    reason, description = problem
    return FieldViolation(param_path(path, name), description, reason)


def reason_for(violations: Iterable[FieldViolation], default: str) -> str:
    """The ``ErrorInfo.reason`` of a request refused for ``violations``: a reserved parameter
    name outranks an invalid one, and both outrank ``default`` (the field violations carry every
    problem; the reason names the one a client most needs to tell apart)."""
    reasons = {v.reason for v in violations}
    for reason in PARAMETER_NAME_REASONS:
        if reason in reasons:
            return reason
    return default


def _shown(name: str) -> str:
    return (
        repr(name)
        if len(name) <= MAX_PARAM_NAME_LENGTH
        else repr(name[:MAX_PARAM_NAME_LENGTH]) + "..."
    )


# ------------------------------------------------------------------ projects, workflows, tasks

MAX_NAME_LENGTH = 64
# 64 characters of any script of the Basic Multilingual Plane (CJK takes 3 bytes in UTF-8);
# characters beyond it (emoji, rare CJK extensions) take 4.
MAX_NAME_BYTES = 192
MAX_WORKER_GROUP_LENGTH = 64
WORKER_GROUP_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")

# General categories a name may contain: letters, marks, numbers, punctuation, symbols.
_ALLOWED = frozenset(
    [
        "Lu",
        "Ll",
        "Lt",
        "Lm",
        "Lo",
        "Mn",
        "Mc",
        "Me",
        "Nd",
        "Nl",
        "No",
        "Pc",
        "Pd",
        "Ps",
        "Pe",
        "Pi",
        "Pf",
        "Po",
        "Sm",
        "Sc",
        "Sk",
        "So",
    ]
)
_KINDS = {
    "Cc": "a control character",
    "Cf": "a format character (e.g. a bidi control or zero-width character)",
    "Cs": "a surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zs": "a space other than U+0020",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
# Default-ignorable characters that are letters or marks, not format characters: they render as
# nothing, so two names that look the same could differ only by them.
_INVISIBLE = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))
    + "".join(chr(c) for c in range(0xE0100, 0xE01F0))
)


def _char_problem(char: str) -> str | None:
    if char in "/\\":
        return "a path separator"
    if char == " ":
        return None
    category = unicodedata.category(char)
    if category not in _ALLOWED:
        return _KINDS.get(category, "not allowed")
    if char in _INVISIBLE:
        return "an invisible character"
    return None


def _describe(char: str) -> str:
    return f"U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')})"


# The ASCII characters a name may hold, read off _char_problem so the two cannot disagree.
_ASCII_ALLOWED = frozenset(c for c in map(chr, range(128)) if _char_problem(c) is None)


def name_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a project, workflow or task name (see the module), or
    None."""
    if not value:
        return "must not be empty"
    if len(value) > MAX_NAME_LENGTH:
        return f"is longer than {MAX_NAME_LENGTH} characters"
    if (
        value.isascii()
        and _ASCII_ALLOWED.issuperset(value)
        and value[0].isalnum()
        and value[-1] != " "
    ):
        # The common name, passed without a Unicode lookup per character (every dispatch checks
        # its task's name): ASCII letters and digits are the categories L and N, ASCII text is
        # NFC, and its UTF-8 takes one byte a character.
        return None
    return _character_problem(value)


def _character_problem(value: str) -> str | None:
    """:func:`name_problem`'s checks of the characters of a non-empty name of allowed length."""
    for char in value:
        problem = _char_problem(char)
        if problem is not None:
            return f"contains {_describe(char)}, {problem}"
    if unicodedata.category(value[0])[0] not in "LN":
        return f"must start with a letter or digit, not {_describe(value[0])}"
    if value[-1] == " ":
        return "must not end with a space"
    if not unicodedata.is_normalized("NFC", value):
        return "is not in Unicode normal form NFC (compose it, e.g. with unicodedata.normalize)"
    if len(value.encode()) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes in UTF-8"
    return None


def name_violation(path: str, value: str, what: str = "name") -> FieldViolation | None:
    """Checks a project, workflow or task name; returns a violation or None."""
    problem = name_problem(value)
    return None if problem is None else FieldViolation(path, f"{what} {problem}")


def worker_group_violation(path: str, value: str) -> FieldViolation | None:
    """Checks a worker group name (ASCII: letters, digits, '.', '_', '-'); a violation or None."""
    if len(value) > MAX_WORKER_GROUP_LENGTH or not WORKER_GROUP_RE.match(value):
        return FieldViolation(
            path,
            f"worker group {value[:MAX_WORKER_GROUP_LENGTH]!r} must be 1-{MAX_WORKER_GROUP_LENGTH} "
            "ASCII letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return None
