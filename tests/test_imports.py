"""The shape of the package: each room imports only the rooms its docstring allows, no
import cycles, serving apart from the training stack, few loose modules and no function
too long to read."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "segnet"
TRAINING_STACK = ("lightning", "pytorch_lightning", "hydra", "omegaconf", "torchmetrics")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every ``segnet`` module -> the ``segnet`` modules it imports, at any level
    (function-level imports included: a cycle hidden in a function is still a cycle)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # "from segnet.data import camvid" imports the module segnet.data.camvid
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                if target in files and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_segnet_has_no_import_cycle():
    graph = import_graph()
    assert (
        "segnet.commands.train" in graph["segnet.sweeps.study"]
    )  # the graph sees function-level imports
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


# Each room and the rooms it may import (besides itself and the loose modules); the
# package docstrings (segnet/__init__.py and each room's) say the same in words
MAY_IMPORT = {
    "models": set(),
    "data": set(),
    "serving": {"models", "data"},
    "training": {"models", "data", "serving"},
    "runs": {"models", "data", "serving", "training"},
    "commands": {"models", "data", "serving", "training", "runs"},
    "sweeps": {"models", "data", "serving", "training", "runs", "commands"},
}
# the loose modules and the rooms each may import: writing files, quoting for a shell,
# the log file and the console scripts
LOOSE = {
    "segnet": set(),
    "segnet.files": set(),
    "segnet.logs": set(),
    "segnet.shell": set(),
    "segnet.cli": {"commands", "runs", "sweeps"},
}
# the commands' short names (python -m segnet.predict), each a few lines that hand over
SHORT_NAMES = {
    "segnet.predict": {"serving", "commands"},
    "segnet.export": {"serving", "commands"},
    "segnet.bench": {"commands"},
}
LOOSE.update(SHORT_NAMES)


def room(module: str) -> str | None:
    """The room a module is in (``serving``), None for a loose module."""
    return None if module in LOOSE else module.split(".")[1]


def wrong_imports(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in graph.items():
        own = room(module)
        allowed = MAY_IMPORT[own] if own else LOOSE[module]
        for target in targets:
            other = room(target)
            if other is not None and other != own and other not in allowed:
                wrong.append(f"{module} imports {target}")
    return wrong


def test_rooms_import_only_the_rooms_below_them():
    graph = import_graph()
    unplaced = {room(m) for m in graph} - set(MAY_IMPORT) - {None}
    assert not unplaced, f"rooms without a rule in MAY_IMPORT: {unplaced}"
    assert not wrong_imports(graph), "\n".join(wrong_imports(graph))


# each data format's own modules; everything outside segnet/data asks segnet.data.formats
# (prediction) or the DataModule class a config names (evaluation, resume)
FORMAT_MODULES = {
    f"segnet.data.{name}"
    for name in ("camvid", "camvid_datamodule", "nifti", "nifti_datamodule", "images",
                 "images_datamodule")
}  # fmt: skip


def test_nothing_outside_data_imports_a_particular_format():
    graph = import_graph()
    assert set(graph) >= FORMAT_MODULES
    leaks = [
        f"{module} imports {target}"
        for module, targets in graph.items()
        if not module.startswith("segnet.data")
        for target in targets & FORMAT_MODULES
    ]
    assert not leaks, "\n".join(leaks)


def test_the_room_check_sees_a_wrong_import():
    graph = {"segnet.training.module": {"segnet.runs.resume", "segnet.files"}}
    assert wrong_imports(graph) == ["segnet.training.module imports segnet.runs.resume"]


def test_at_most_six_modules_lie_loose():
    loose = {"segnet" if p.stem == "__init__" else f"segnet.{p.stem}" for p in PACKAGE.glob("*.py")}
    assert loose == set(LOOSE), sorted(loose)
    assert len(loose - set(SHORT_NAMES)) <= 6, sorted(loose)
    for name in SHORT_NAMES:  # a short name hands over and holds nothing of its own
        path = PACKAGE / f"{name.split('.')[1]}.py"
        assert len(path.read_text().splitlines()) <= 12, path


def test_every_room_says_what_may_import_it():
    for name in MAY_IMPORT:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert doc and "import" in doc, f"segnet/{name}/__init__.py: say what it may import"


def long_functions(limit: int = 80) -> list[str]:
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{module_name(path)}.{node.name}: {lines} lines")
    return found


def test_no_function_is_over_80_lines():
    assert not long_functions(), long_functions()
    assert long_functions(limit=30), "the measure finds long functions at a lower limit"


def test_import_segnet_installs_nothing_and_short_names_are_the_current_modules():
    """``import segnet`` leaves Python's import system as it was; the short names users'
    scripts import give the current objects, not copies."""
    code = (
        "import sys\n"
        "before = list(sys.meta_path)\n"
        "import segnet\n"
        "assert sys.meta_path == before, sys.meta_path\n"
        "from segnet.predict import Predictor\n"
        "from segnet.serving.predict import Predictor as P\n"
        "from segnet.export import export_checkpoint as export\n"
        "from segnet.serving.export import export_checkpoint as e\n"
        "assert Predictor is P and export is e\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


SHORT_COMMANDS = ("segnet.export", "segnet.predict", "segnet.bench")

# Each command run as ``python -m`` runs it, in one interpreter (one start of torch, not
# three): its --help printed, and how it exited.
RUN_AS_MAIN = """
import contextlib, io, runpy, sys
for command in sys.argv[1:]:
    sys.argv = [command, "--help"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_module(command, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
    print(repr((command, code, out.getvalue())))
"""


def test_short_command_names_run_the_commands(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", RUN_AS_MAIN, *SHORT_COMMANDS],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    runs = [ast.literal_eval(line) for line in out.stdout.splitlines() if line.startswith("(")]
    assert [command for command, _, _ in runs] == list(SHORT_COMMANDS), out.stdout
    for command, code, printed in runs:
        assert code == 0, (command, printed)
        assert f"python -m {command}" in printed, (command, printed)


SERVING_MODULES = (
    "segnet.serving.predict",
    "segnet.serving.loading",
    "segnet.serving.export",
    "segnet.serving.inference",
    "segnet.serving.ensemble",
    "segnet.serving.model_card",
    "segnet.commands.predict",
)


def test_serving_modules_do_not_import_the_training_stack():
    """All of them imported in one interpreter: what none of them loads, no one of them
    loads alone either."""
    code = (
        f"import sys, {', '.join(SERVING_MODULES)}; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TRAINING_STACK!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize(
    "module",
    [
        "segnet.commands.argv",  # each command's own reading of its command line
        "segnet.cli",  # train.py, evaluate.py and the console scripts
        "segnet.runs.resume",
        "segnet.runs.typos",
        "segnet.sweeps.summary",  # Hydra's callbacks, loaded at every start
        "segnet.sweeps.preflight",
        "hydra_plugins.segnet_parallel.launcher",
    ],
)
def test_what_runs_before_the_work_does_not_load_torch(module):
    """What a command loads before Hydra has parsed its command line, or Hydra at every
    start, stays light: --help and a refused override answer in a second or two."""
    code = f"import sys, {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
