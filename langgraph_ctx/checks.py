"""The checks of options: one rule per kind of value, one message style, one error type.

Every public constructor and method checks its numbers, flags, paths, callables, strings and
lists here, before it stores or writes anything, and a bad value is a `ConfigError` (a
`ValueError` too) that names the argument, shows the value and its type, and says what to
pass instead, instead of a `TypeError` or an `AttributeError` from deep inside:

    max_chars must be a whole number >= 1, got str '10'; pass e.g. max_chars=20000

A value of the right kind outside its range gets the shorter `max_chars must be >= 1, got 0`.
`owner` prefixes the message with the call, as in `Compaction(keep_last=True): ...`.

The rules, decided once, here:

- whole numbers (`check_int`): an `int`. Never a `bool` (`True` is not a count) and never a
  float, not even a whole one like `2000.0`: a computed value is rounded on purpose
  (`int(x)`), not by us. Integers of other libraries (numpy's `int64`) are refused the same
  way; pass `int(x)`.
- numbers (`check_number`): an `int` or a `float` (numpy's `float64` is one), never a `bool`,
  and finite: `nan` compares false with every bound and `inf` is no share of anything.
- flags (`check_bool`): `True` or `False` only. The string `"false"` is truthy, which would
  be read as the opposite of what was written; `0`/`1` are refused too.
- paths (`check_path`): a `str` or an `os.PathLike` giving a `str`, not empty (`""` would be
  the working directory). Bytes paths are refused.
- callables (`check_callable`): anything `callable`.
- strings (`check_str`): a `str`, not empty unless `empty=True`.
- lists (`check_list`): a list or tuple, not a `str` (`"abc"` is not three items) nor a dict.
- objects of the package or a library (`check_type`): an instance of the type named.

`optional=True` also accepts `None`.

Example:
    >>> check_int("n", "10", minimum=1, example=20)
    Traceback (most recent call last):
    ...
    langgraph_ctx.errors.ConfigError: n must be a whole number >= 1, got str '10'; pass e.g. n=20
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from langgraph_ctx.errors import ConfigError, shorten


def _refuse(
    name: str,
    value: Any,
    rule: str,
    example: Any,
    owner: str | None,
    note: str | None,
    *,
    right_kind: bool = False,
) -> NoReturn:
    """Raise the one message of every check: `[owner(name=value): ]name must be rule, got ...`.

    A value of the wrong kind is shown with its type, cut short (`got str '10'`); one of the
    right kind outside its range (`right_kind`) as itself (`got 0`).
    """
    shown = repr(value) if right_kind else shorten(value, 40)
    got = repr(value) if right_kind else f"{type(value).__name__} {shorten(value)}"
    prefix = f"{owner}({name}={shown}): " if owner else ""
    tail = f"; pass e.g. {name}={example!r}" if example is not None else ""
    extra = f" ({note})" if note else ""
    msg = f"{prefix}{name} must be {rule}, got {got}{tail}{extra}"
    raise ConfigError(msg)


def _or_none(rule: str, optional: bool) -> str:
    return f"{rule} or None" if optional else rule


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int | None = 0,
    maximum: int | None = None,
    optional: bool = False,
    example: Any = None,
    owner: str | None = None,
    note: str | None = None,
) -> None:
    """Refuse `value` unless it is an `int` (not a bool) in `[minimum, maximum]`.

    Args:
        name: The argument's name, as the caller wrote it.
        value: The value given.
        minimum: The smallest value allowed (None: no lower bound).
        maximum: The largest value allowed (None: no upper bound).
        optional: Also accept None.
        example: A good value, shown as `name=example` (None: no example).
        owner: The class or function the argument belongs to, shown as `owner(name=value)`.
        note: A short word on what the argument does, shown in parentheses at the end.

    Raises:
        ConfigError: `value` is not a whole number in range.
    """
    if value is None and optional:
        return
    bounds = " and ".join(
        part
        for part in (
            f">= {minimum}" if minimum is not None else "",
            f"<= {maximum}" if maximum is not None else "",
        )
        if part
    )
    if not isinstance(value, int) or isinstance(value, bool):
        rule = _or_none(f"a whole number {bounds}".rstrip(), optional)
        _refuse(name, value, rule, example, owner, note)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        rule = _or_none(bounds, optional)
        _refuse(name, value, rule, example, owner, note, right_kind=True)


def check_number(
    name: str,
    value: Any,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    optional: bool = False,
    example: Any = None,
    owner: str | None = None,
    note: str | None = None,
) -> None:
    """Refuse `value` unless it is a finite `int` or `float` (not a bool) within the bounds.

    Args:
        name: The argument's name.
        value: The value given.
        gt: Exclusive lower bound.
        ge: Inclusive lower bound.
        lt: Exclusive upper bound.
        le: Inclusive upper bound.
        optional: Also accept None.
        example: A good value.
        owner: The class or function the argument belongs to.
        note: A short word on what the argument does.

    Raises:
        ConfigError: `value` is not a finite number within the bounds.
    """
    if value is None and optional:
        return
    low = (f"({gt:g}", gt) if gt is not None else (f"[{ge:g}", ge) if ge is not None else None
    high = (f"{lt:g})", lt) if lt is not None else (f"{le:g}]", le) if le is not None else None
    if low and high:
        bounds = f"in {low[0]}, {high[0]}"
    elif low:
        bounds = f"{'>' if gt is not None else '>='} {low[1]:g}"
    elif high:
        bounds = f"{'<' if lt is not None else '<='} {high[1]:g}"
    else:
        bounds = ""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        rule = _or_none(f"a finite number {bounds}".rstrip(), optional)
        _refuse(name, value, rule, example, owner, note)
    if (
        (gt is not None and not value > gt)
        or (ge is not None and not value >= ge)
        or (lt is not None and not value < lt)
        or (le is not None and not value <= le)
    ):
        rule = _or_none(f"a number {bounds}", optional)
        _refuse(name, value, rule, example, owner, note, right_kind=True)


def check_bool(
    name: str,
    value: Any,
    *,
    optional: bool = False,
    owner: str | None = None,
    note: str | None = None,
) -> None:
    """Refuse `value` unless it is `True` or `False` (or None, when `optional`).

    Raises:
        ConfigError: `value` is not a bool; strings such as "false" included.
    """
    if isinstance(value, bool) or (value is None and optional):
        return
    rule = "True, False or None" if optional else "True or False"
    word = value.strip().lower() if isinstance(value, str) else None
    example = word in ("true", "yes", "on", "1") or (type(value) is int and value == 1)
    _refuse(name, value, rule, example, owner, note)


def check_str(
    name: str,
    value: Any,
    *,
    optional: bool = False,
    empty: bool = False,
    example: Any = None,
    owner: str | None = None,
    note: str | None = None,
) -> None:
    """Refuse `value` unless it is a `str` (non-empty unless `empty`).

    Raises:
        ConfigError: `value` is not a string, or an empty one where text is needed.
    """
    if value is None and optional:
        return
    if not isinstance(value, str) or (not empty and not value):
        rule = _or_none("a string" if empty else "a non-empty string", optional)
        _refuse(name, value, rule, example, owner, note)


def check_path(
    name: str,
    value: Any,
    *,
    example: Any = None,
    owner: str | None = None,
    note: str | None = None,
) -> None:
    """Refuse `value` unless it is a non-empty `str` or `os.PathLike` path of text.

    Raises:
        ConfigError: `value` is not a path, is a bytes path, or is empty.
    """
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str) or not text:
        rule = "a directory path (a non-empty str or pathlib.Path)"
        _refuse(name, value, rule, example, owner, note)


def check_callable(
    name: str,
    value: Any,
    *,
    what: str = "callable",
    optional: bool = False,
    example: Any = None,
    owner: str | None = None,
    note: str | None = None,
) -> None:
    """Refuse `value` unless it is callable.

    Args:
        name: The argument's name.
        value: The value given.
        what: The rule as the message says it, e.g. "a function from text to text".
        optional: Also accept None.
        example: A good value, as source text (shown as `name=example`, unquoted).
        owner: The class or function the argument belongs to.
        note: A short word on what the argument does.

    Raises:
        ConfigError: `value` is not callable.
    """
    if callable(value) or (value is None and optional):
        return
    shown = _Source(example) if isinstance(example, str) else example
    _refuse(name, value, _or_none(what, optional), shown, owner, note)


def check_type(
    name: str,
    value: Any,
    kind: type | tuple[type, ...],
    *,
    rule: str,
    optional: bool = False,
    example: str | None = None,
    owner: str | None = None,
    note: str | None = None,
) -> None:
    """Refuse `value` unless it is an instance of `kind` (or None, when `optional`).

    Args:
        name: The argument's name.
        value: The value given.
        kind: The type (or types) accepted.
        rule: The rule as the message says it, e.g. "an Archive bound to a thread".
        optional: Also accept None.
        example: A good value, as source text (shown as `name=example`, unquoted).
        owner: The class or function the argument belongs to.
        note: A short word on what the argument does.

    Raises:
        ConfigError: `value` is not of type `kind`.
    """
    if isinstance(value, kind) or (value is None and optional):
        return
    shown = None if example is None else _Source(example)
    _refuse(name, value, _or_none(rule, optional), shown, owner, note)


def check_list(
    name: str, value: Any, what: str, *, of: type | None = None, owner: str | None = None
) -> None:
    """Refuse a string, a dict or a non-sequence where a list is expected (None passes).

    Args:
        name: The argument's name.
        value: The value given.
        what: What the list holds, with an example: "strings, e.g. ['Answer in French.']".
        of: The type every item must have (None: any).
        owner: The class or function the argument belongs to.

    Raises:
        ConfigError: `value` is not a list (`"abc"` is not three items), or an item is not
            of type `of` (named as `name[i]`).
    """
    if value is None:
        return
    prefix = f"{owner}: " if owner else ""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        msg = (
            f"{prefix}{name} must be a list, got {type(value).__name__} {shorten(value)}; "
            f"pass a list of {what}"
        )
        raise ConfigError(msg)
    for i, item in enumerate(value):
        if of is not None and not isinstance(item, of):
            msg = (
                f"{prefix}{name}[{i}] must be a {of.__name__}, got {type(item).__name__} "
                f"{shorten(item)}; pass a list of {what}"
            )
            raise ConfigError(msg)


class _Source(str):
    """An example shown as written (`redact=lambda text: ...`), not as a quoted string."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)
