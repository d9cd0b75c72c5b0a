"""The documentation's links and the recipes it names point at things that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation other than
    hyphens and underscores dropped, spaces turned into hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    lines = path.read_text().splitlines()
    return {heading_anchor(line.lstrip("#")) for line in lines if re.match(r"#{1,6} ", line)}


def test_heading_anchor_follows_github():
    assert heading_anchor(" Cases of two voxel sizes (`data.spacing`)") == (
        "cases-of-two-voxel-sizes-dataspacing"
    )
    assert heading_anchor("CamVid on a 2-core CPU (`camvid_quick`)") == (
        "camvid-on-a-2-core-cpu-camvid_quick"
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists():
            broken.append(f"{target} (no file {linked})")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no heading with anchor #{anchor} in {linked.name})")
    assert not broken, f"{doc.name} has links that lead nowhere: {broken}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_recipes_exist(doc: Path):
    recipes = {p.stem for p in (ROOT / "configs" / "experiment").glob("*.yaml")}
    named = set(re.findall(r"experiment=(\w+)", doc.read_text()))
    if doc.name == "README.md":
        assert named, f"{doc.name} names no recipe; the pattern no longer matches"
    assert named <= recipes, f"{doc.name} names recipes that do not exist: {named - recipes}"


def test_config_comments_point_at_existing_docs():
    missing = []
    for cfg in (ROOT / "configs").rglob("*.yaml"):
        for ref in re.findall(r"docs/[\w.-]+\.md", cfg.read_text()):
            if not (ROOT / ref).exists():
                missing.append(f"{cfg.relative_to(ROOT)} -> {ref}")
    assert not missing, missing


def test_train_help_lists_every_recipe_with_a_line_on_it():
    recipes = {p.stem for p in (ROOT / "configs" / "experiment").glob("*.yaml")}
    text = (ROOT / "configs" / "hydra" / "help" / "train.yaml").read_text()
    listed = set(re.findall(r"^    (\w+) {2,}\S", text, re.M))
    assert listed == recipes, f"--help lists {listed ^ recipes} wrongly"


COMMAND = re.compile(r"^(?:\$ )?python (train\.py|evaluate\.py) (.+?)(?:\s+#.*)?$", re.M)


def shown_commands() -> list[tuple[str, str, str]]:
    """Every ``python train.py ...`` and ``python evaluate.py ...`` line in a code block of
    the docs, with its page."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        # every fence with its info string, so that a ```text block's closing fence is
        # never taken for an opening one (the blocks after it would then be misread)
        for kind, block in re.findall(r"```([\w-]*)\n(.*?)```", text, re.S):
            if kind not in ("", "bash", "sh"):
                continue
            block = block.replace("\\\n", " ")
            # a shell variable the block sets (H=experiment=...) stands for its value
            values = {k: v.strip("'\"") for k, v in re.findall(r"^(\w+)=(\S+)\s*$", block, re.M)}
            for script, args in COMMAND.findall(block):
                for name, value in values.items():
                    args = args.replace(f"${name}", value)
                found.append((doc.name, script, args))
    return found


@pytest.mark.parametrize(("page", "script", "args"), shown_commands())
def test_commands_shown_in_the_docs_compose(page, script, args):
    """Each command a page shows composes with this project's configs: its recipes, groups
    and settings exist (placeholders such as <run> or ... stand for the user's paths)."""
    import shlex

    from segnet.commands.argv import quote_name_rules
    from tests.conftest import compose_config

    args = re.sub(r"<[^>]*>", "placeholder", args)  # <run>: the user's own path
    words = [w for w in shlex.split(args) if w not in ("-m", "--help", "--cfg", "job", "...")]
    if any(w.startswith(("hydra.", "hydra/")) for w in words):
        words = [w for w in words if not w.startswith(("hydra.", "hydra/"))]
    config = "train" if script == "train.py" else "evaluate"
    # sweeps' comma lists: the first value of each
    words = [w.split(",")[0] if "=" in w and not set("[{") & set(w) else w for w in words]
    words = [w for w in words if not w.startswith("$")]  # a shell variable the page sets
    # as the commands read them: a name rule's {id} quoted for Hydra
    compose_config(config, quote_name_rules(words))


def makefile_extras() -> str:
    (line,) = re.findall(r"^EXTRAS \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    return line


def test_the_install_docs_name_the_extras_make_install_installs():
    extras = makefile_extras()
    start = " ".join((ROOT / "docs" / "getting-started.md").read_text().split())
    assert f"with the `{extras}` extras" in start
    assert f"with the extras {extras}" in (ROOT / "Makefile").read_text()  # make help


def test_the_torch_the_docs_promise_is_the_one_the_package_takes():
    """pyproject.toml's floor is the oldest torch the docs promise; constraints.txt pins
    what make install installs, at or above that floor."""
    floor = re.search(r'"torch>=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    pinned = re.search(r"^torch==([\d.]+)$", (ROOT / "constraints.txt").read_text(), re.M)[1]
    as_tuple = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    assert as_tuple(pinned) >= as_tuple(floor)
    start = " ".join((ROOT / "docs" / "getting-started.md").read_text().split())
    assert f"torch {floor} and later" in start and f"torch {pinned}" in start
    assert f"torch {pinned}" in (ROOT / "README.md").read_text()
