"""Each command's own reading of its command line, before Hydra parses it: the part of
the command that every entry point (``python train.py``, ``segnet-train``, a test)
goes through. Light to import: ``--help`` answers before torch is loaded."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path

from segnet.runs.folders import output_dir_as_run_dir, refuse_existing_run_dir
from segnet.runs.resume import resume_into_its_run
from segnet.shell import hydra_value

# a file-name rule with its {id} (data.image_name, data.label_name) or {group}
# (data.groups), given unquoted
NAME_RULE = re.compile(
    r"^(\+{0,2}data\.(?:image_name|label_name|groups)=)((?!['\"]).*\{(?:id|group)\}.*)$"
)


def quote_name_rules(argv: Sequence[str]) -> list[str]:
    """``data.label_name='{id}_manual1'`` typed in a shell reaches Hydra without its
    quotes, and Hydra reads ``{...}`` as a dictionary (``no viable alternative at input
    '{id}'``): a name rule given so is quoted again, so the documented form works."""
    out = []
    for arg in argv:
        rule = NAME_RULE.match(arg)
        out.append(f"{rule[1]}'{rule[2]}'" if rule and "'" not in rule[2] else arg)
    return out


# a setting given on the command line (``+``/``++`` to add one); ``~key`` deletes, untouched
SETTING = re.compile(r"^(\+{0,2}[A-Za-z_][\w.@/-]*)=(.*)$", re.DOTALL)
# the items of a flat list, none quoted or nested: ``[fond,bâtiment]``
FLAT_LIST = re.compile(r"^\[([^\[\]{}'\"]*)\]$")


@functools.cache
def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def _parsed(arg: str):
    """Hydra's reading of one override, or None where its grammar refuses it."""
    try:
        return _parser().parse_override(arg)
    except Exception:  # HydraException, OverrideParseException: not Hydra's grammar
        return None


def _read_as(arg: str, value: object) -> str | None:
    """``arg`` where Hydra reads it as ``value`` and nothing else, else None."""
    parsed = _parsed(arg)
    return (
        arg
        if parsed is not None and not parsed.is_sweep_override() and parsed.value() == value
        else None
    )


def quote_plain_values(argv: Sequence[str]) -> list[str]:
    """A value typed as the shell passes it, which Hydra's grammar cannot read unquoted,
    quoted so that it means what it says: a path holding a letter outside ASCII
    (``data.root=/data/Études``), brackets, ``&``, ``#``, ``~`` or an apostrophe stops
    Hydra with a lexer error, and a path holding a comma is read as two values. A flat
    list's items are quoted likewise (``data.class_names=[fond,bâtiment]``). Values Hydra
    reads (sweeps, lists, interpolations, quoted values) are left as typed; a comma is
    taken for a path's only where that path exists."""
    out = []
    for arg in argv:
        setting = SETTING.match(arg)
        parsed = _parsed(arg) if setting else None
        if not setting or (parsed is not None and not _a_path_split(parsed, setting[2])):
            out.append(arg)
            continue
        key, value = setting[1], setting[2]
        items = FLAT_LIST.match(value)
        if items and items[1].strip():
            listed = [v.strip() for v in items[1].split(",")]
            quoted = f"{key}=[{','.join(hydra_value(v) for v in listed)}]"
            out.append(_read_as(quoted, listed) or arg)
        elif value[:1] not in ("[", "{", "'", '"', "$"):
            out.append(_quoted(key, value) or arg)
        else:
            out.append(arg)
    return out


def _quoted(key: str, value: str) -> str | None:
    """``key=value`` quoted so that Hydra reads ``value``: whole where it holds no comma or
    names a file or folder that exists, else each of its comma-separated values (a sweep,
    ``-m name=Été,Hiver``, stays a sweep); None where quoting does not make it readable."""
    if "," not in value or Path(value).expanduser().exists():
        return _read_as(f"{key}={hydra_value(value)}", value)
    items = value.split(",")
    quoted = f"{key}={','.join(hydra_value(v) for v in items)}"
    parsed = _parsed(quoted)
    swept = parsed is not None and parsed.is_sweep_override()
    return (
        quoted if swept and [getattr(v, "text", v) for v in parsed.value().list] == items else None
    )


def _a_path_split(parsed, value: str) -> bool:
    """Whether Hydra read ``value`` as a sweep of values split at its commas where the
    whole of it names a file or folder that exists."""
    return parsed.is_sweep_override() and "," in value and Path(value).expanduser().exists()


def train_argv(argv: Sequence[str]) -> list[str]:
    """``paths.output_dir=`` as Hydra's run folder; a resume (``ckpt_path=``) into its run,
    with the run's overrides; any other new run's folder checked to hold no run."""
    return quote_plain_values(resume_into_its_run(output_dir_as_run_dir(quote_name_rules(argv))))


def evaluate_argv(argv: Sequence[str]) -> list[str]:
    """``paths.output_dir=`` as Hydra's run folder, which must hold no earlier run's
    outputs (checked before Hydra writes its config there)."""
    argv = output_dir_as_run_dir(quote_name_rules(argv))
    refuse_existing_run_dir(argv)
    return quote_plain_values(argv)


export_argv = evaluate_argv
