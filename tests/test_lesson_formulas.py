"""A cite button under each display formula, naming the code its {{code …}} lines point at (annotate.pages.lesson.lesson_formulas)."""
from __future__ import annotations

import html

import pytest

from annotate.errors import UserError
from annotate.pages.lesson.lesson_formulas import expand
from annotate.pages.source.source_page import CITE_HEAD

from values_fixtures import repo_files, repo_sources

REPO_NORM = "nanovllm/layers/layernorm.py"
PAGE = "# 课名 Lesson\n\nintro\n\n## 5. RMSNorm · RMSNorm\n\ntext\n\n$$\n\\frac{x}{\\operatorname{rms}(x)}\n$$\n"


def _citation(text: str, nth: int = 0) -> list[str]:
    raw = text.split('data-cite-text="')[nth + 1].split('"', 1)[0]
    return html.unescape(raw.replace("&#10;", "\n")).split("\n")


def _line_of(path: str, needle: str) -> int:
    return next(i for i, t in enumerate(repo_sources()[path].lines, 1) if needle in t)


def test_a_formula_with_a_code_line_cites_page_section_tex_file_line_and_permalink() -> None:
    page = PAGE + "{{code layernorm.py › RMSNorm.rms_forward › x.mul_(torch.rsqrt(var + self.eps))}}\n\nafter\n"
    text = expand(page, "lesson.md", repo_sources(), files=repo_files())
    line = _line_of(REPO_NORM, "x.mul_(torch.rsqrt(var + self.eps))")
    cite = _citation(text)
    assert cite[0] == f"{CITE_HEAD} · nano-vllm"
    assert cite[1] == "页面 page: 课名 Lesson (lesson.md) · § 5. RMSNorm · RMSNorm"
    assert cite[2] == "公式 formula (TeX): \\frac{x}{\\operatorname{rms}(x)}"
    assert cite[3] == f"实现 code: {REPO_NORM}:{line} · RMSNorm.rms_forward"
    assert cite[4] == f"上游 upstream: {repo_files()[REPO_NORM].permalink(line)}" and "/blob/" in cite[4]
    assert "{{code" not in text and "\nafter" in text
    assert 'class="an-cite" data-cite="text"' in text and "引用 cite" in text


def test_a_formula_without_code_lines_still_gets_a_button_saying_so() -> None:
    text = expand(PAGE, "lesson.md", repo_sources())
    cite = _citation(text)
    assert cite[-1].startswith("实现 code: 本课没有指明") and len(cite) == 4


def test_a_symbol_alone_names_its_def_line_and_several_lines_are_kept_in_order() -> None:
    page = PAGE + "{{code qwen3.py › Qwen3MLP.forward}}\n{{code activation.py › SiluAndMul.forward › return F.silu(x) * y}}\n"
    cite = _citation(expand(page, "lesson.md", repo_sources(), files=repo_files()))
    mlp = repo_sources()["nanovllm/models/qwen3.py"].find("Qwen3MLP.forward")[0]
    assert cite[3] == f"实现 code: nanovllm/models/qwen3.py:{mlp} · Qwen3MLP.forward"
    assert cite[5].startswith("实现 code: nanovllm/layers/activation.py:") and cite[5].endswith("· SiluAndMul.forward")


def test_one_line_formulas_and_formulas_in_admonitions_get_their_button_at_their_indent() -> None:
    text = expand("# T\n\n!!! note\n\n    $$x = 1$$\n", "index.md", repo_sources())
    assert '\n    <div class="an-formula-cite"' in text and _citation(text)[2] == "公式 formula (TeX): x = 1"


@pytest.mark.parametrize("directive, says", [
    ("{{code layernorm.py › RMSNorm.rms_forward › x = nothing_here()}}", "not found"),
    ("{{code layernorm.py › RMSNorm.rms_forward › x.mul_(torch.rsqrt(var + self.eps)) › extra}}", "needs 'file › symbol'"),
    ("{{code nope.py › RMSNorm.rms_forward}}", "no such vendored file"),
    ("{{code layernorm.py › RMSNorm.no_such_method}}", "no_such_method"),
])
def test_a_bad_code_line_is_one_line_naming_page_and_line(directive: str, says: str) -> None:
    with pytest.raises(UserError) as info:
        expand(PAGE + directive + "\n", "lesson.md", repo_sources())
    msg = str(info.value)
    assert msg.startswith("docs/lesson.md:12: ") and says in msg and "\n" not in msg


def test_a_statement_that_occurs_twice_in_its_symbol_is_refused_as_ambiguous() -> None:
    from annotate.source import parse

    twice = {"pkg/twice.py": parse("def f(x):\n    x = x + 1\n    x = x + 1\n    return x\n", "pkg/twice.py")}
    with pytest.raises(UserError, match=r"^docs/lesson.md:12: .*occurs 2 times in f of pkg/twice.py; quote more"):
        expand(PAGE + "{{code twice.py › f › x = x + 1}}\n", "lesson.md", twice)


def test_a_code_line_away_from_a_formula_is_refused_and_one_in_code_is_kept() -> None:
    with pytest.raises(UserError, match=r"^docs/lesson.md:3: .*right after a display formula"):
        expand("# T\n\n{{code qwen3.py › Qwen3MLP.forward}}\n", "lesson.md", repo_sources())
    shown = "write `{{code a › b}}` so\n\n```\n$$\n{{code a › b}}\n```\n"
    assert expand(shown, "lesson.md", repo_sources()) == shown


def test_the_lesson_names_the_code_of_its_three_formulas() -> None:
    from values_fixtures import REPO

    text = expand((REPO / "docs" / "lesson.md").read_text(encoding="utf-8"), "lesson.md", repo_sources(),
                  files=repo_files())
    cites = [_citation(text, i) for i in range(text.count('data-cite-text="'))]
    named = [{x.split(" · ")[-1] for x in c if x.startswith("实现 code: nanovllm/")} for c in cites]
    assert [n for n in named if n] == [{"Qwen3DecoderLayer.forward"}, {"RMSNorm.rms_forward"},
                                       {"Qwen3MLP.forward", "SiluAndMul.forward"}]
    assert cites[0][3:5] == ["x_1 &= x + \\operatorname{Attn}\\big(\\operatorname{RMSNorm}_1(x)\\big) \\\\",
                             "x_2 &= x_1 + \\operatorname{MLP}\\big(\\operatorname{RMSNorm}_2(x_1)\\big)"]
