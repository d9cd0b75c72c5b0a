"""The documentation's links and the recipes it names point at things that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
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
    assert named, f"{doc.name} names no recipe; the pattern no longer matches"
    assert named <= recipes, f"{doc.name} names recipes that do not exist: {named - recipes}"


def test_config_comments_point_at_existing_docs():
    missing = []
    for cfg in (ROOT / "configs").rglob("*.yaml"):
        for ref in re.findall(r"docs/[\w.-]+\.md", cfg.read_text()):
            if not (ROOT / ref).exists():
                missing.append(f"{cfg.relative_to(ROOT)} -> {ref}")
    assert not missing, missing
