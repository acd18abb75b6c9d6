"""A page's math as the build renders it (annotate.docs_math.render_page_math) and as `annotate check` lists it."""
from __future__ import annotations

import shutil
from pathlib import Path

import markdown
import pytest

from annotate.docs_math import check_docs, render_page_math
from annotate.errors import UserError
from annotate.project import Project
from annotate.render.katex import MathError

REPO = Path(__file__).resolve().parents[1]


def test_render_page_math_replaces_arithmatex_spans_and_names_the_page_on_bad_latex() -> None:
    page = '<p>a <span class="arithmatex">\\(x &lt; 1\\)</span> b</p><div class="arithmatex">\\[y\\]</div>'
    out = render_page_math(page, lambda tex, display: f"[{tex}|{display}]", "docs/lesson.md")
    assert out == "<p>a [x < 1|False] b</p>[y|True]"

    def refuse(tex: str, display: bool) -> str:
        raise MathError("Undefined control sequence")

    with pytest.raises(UserError, match=r"^docs/lesson.md: math \$x < 1\$: Undefined control sequence; fix the LaTeX$"):
        render_page_math(page, refuse, "docs/lesson.md")


def test_check_docs_lists_every_pages_refused_formulas_with_one_converter(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy2(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs")
    with (root / "docs" / "lesson.md").open("a", encoding="utf-8") as f:
        f.write("\n\n## 坏公式 Bad\n\n行内 $\\bad{a} < 1$ 与\n\n$$\n\\bad{b}\n$$\n")
    with (root / "docs" / "writing.md").open("a", encoding="utf-8") as f:
        f.write("\n\n## 坏公式 Bad\n\n$\\bad{c}$\n")
    project = Project.load(root)
    assert project.pages()  # the config is loaded (validating it builds a converter of its own)
    built = []

    class Counted(markdown.Markdown):
        def __init__(self, **kwargs) -> None:
            built.append(kwargs)
            super().__init__(**kwargs)

    monkeypatch.setattr(markdown, "Markdown", Counted)
    checked: list[str] = []

    def math_check(tex: str) -> str | None:
        checked.append(tex)
        return "Undefined control sequence" if "\\bad" in tex else None

    problems = check_docs(project, math_check)
    assert len(built) == 1  # one converter for every page, reset between them
    assert problems == ["docs/lesson.md: math $\\bad{a} < 1$: Undefined control sequence; fix the LaTeX",
                        "docs/lesson.md: math $\\bad{b}$: Undefined control sequence; fix the LaTeX",
                        "docs/writing.md: math $\\bad{c}$: Undefined control sequence; fix the LaTeX"]
    assert sum("\\bad" in tex for tex in checked) == 3  # no page's formulas carried over into the next
