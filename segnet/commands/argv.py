"""Each command's own reading of its command line, before Hydra parses it: the part of
the command that every entry point (``python train.py``, ``segnet-train``, a test)
goes through. Light to import: ``--help`` answers before torch is loaded."""

from __future__ import annotations

import re
from collections.abc import Sequence

from segnet.runs.folders import output_dir_as_run_dir, refuse_existing_run_dir
from segnet.runs.resume import resume_into_its_run

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


def train_argv(argv: Sequence[str]) -> list[str]:
    """``paths.output_dir=`` as Hydra's run folder; a resume (``ckpt_path=``) into its run,
    with the run's overrides; any other new run's folder checked to hold no run."""
    return resume_into_its_run(output_dir_as_run_dir(quote_name_rules(argv)))


def evaluate_argv(argv: Sequence[str]) -> list[str]:
    """``paths.output_dir=`` as Hydra's run folder, which must hold no earlier run's
    outputs (checked before Hydra writes its config there)."""
    argv = output_dir_as_run_dir(quote_name_rules(argv))
    refuse_existing_run_dir(argv)
    return argv


export_argv = evaluate_argv
