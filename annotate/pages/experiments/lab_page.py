"""Two generated pages beside the experiments: 本地实验 · On your own GPU, and 复习与实战路线 · Route.

The lab page gives the commands for one consumer GPU (an RTX 4070 Ti, 12 GiB) and what each run needs,
computed by annotate/trace/model/budget.py from the Qwen3-0.6B shape (the ``qwen3-0.6b`` preset's config),
beside the H200 measurement the model is checked against (bench/results/gpu-h200-full-depth.json). The route page orders
lesson → source exercises → closed-book check → the experiments → one's own GPU run; its progress
(ticks, and the lesson's self-assessment) is read from and kept in this browser's localStorage only
(docs/js/route.js).
"""
from __future__ import annotations

from pathlib import Path

from annotate.experiments import Experiment
from annotate.pages.base.folds import asset_tags
from annotate.pages.base.tracefmt import esc
from annotate.safe_html import literal

LAB_URI = "lab.md"
ROUTE_URI = "route.md"
#: the device the lab page is written for, and its memory in GiB
GPU, GPU_GIB = "RTX 4070 Ti", 12
#: prompt lengths the lab page budgets
LAB_TOKENS = (32, 512, 2048)
#: the lesson's self-assessment store (docs/lesson.md `data-store`), which the route page reads
SELF_ASSESSMENT_STORE = "annotate.lesson.decoder-block.v1"


_HEADER = ("| dtype | tokens | 权重（一份）weights (one copy) | 记录 recorded | 显存峰值 device memory (peak) | "
           "磁盘：检查点 disk: checkpoint | 装得下 {gib} GB 吗 · fits in {gib} GB? |\n| --- | --- | --- | --- | --- | --- | --- |")


def lab_pages(root: Path, found: list[Experiment]) -> dict[str, str]:
    """The lab and route pages (docs-relative URI -> Markdown)."""
    return {LAB_URI: lab_page(root, found), ROUTE_URI: route_page(found)}


def _budget_rows() -> str:
    """Markdown rows of the budget table (annotate/trace/model/budget.py, the code as it is)."""
    from annotate.trace.model import budget, runtime
    from annotate.trace.model.options import PRESETS

    preset = PRESETS["qwen3-0.6b"]
    config = runtime.preset_config(preset, preset.num_hidden_layers, "bfloat16")
    rows = []
    for dtype in ("bfloat16", "float32"):
        for tokens in LAB_TOKENS:
            b = budget.estimate(config, preset.num_hidden_layers, tokens, dtype)
            verdict = "✓ 装得下 fits" if b.device_memory <= GPU_GIB * budget.GIB else "✗ 装不下 does not fit"
            rows.append(f"| {dtype} | {tokens} | {budget.gib(b.weights)} | {budget.gib(b.recorded)} | "
                        f"{budget.gib(b.device_memory)} | {budget.gib(b.checkpoint_disk)} | {verdict} |")
    return "\n".join(rows)


def _measured(root: Path) -> str:
    """The H200 measurement beside the model's prediction for the same run (bench/results/gpu-h200-full-depth.json)."""
    import json

    from annotate.trace.model import budget, runtime
    from annotate.trace.model.options import PRESETS

    path = budget.measured_file(root)
    if not path.is_file():
        return ""
    data = json.loads(path.read_text(encoding="utf-8"))
    preset = PRESETS["qwen3-0.6b"]
    lines = []   # a list, not a table: the page's one table is the budget's
    for run in data["runs"]:
        config = runtime.preset_config(preset, int(run["layers"]), run["dtype"])
        layout = budget.Layout(bool(run["identify_on_device"]), bool(run["hf_lines_on_device"]))
        then = budget.estimate(config, int(run["layers"]), int(run["tokens"]), run["dtype"], layout=layout)
        now = budget.estimate(config, int(run["layers"]), int(run["tokens"]), run["dtype"])
        lines.append(f"- {int(run['layers'])} 层 × {int(run['tokens'])} token · {int(run['layers'])} layers × "
                     f"{int(run['tokens'])} tokens：实测峰值 measured peak **{float(run['max_allocated_gib']):.2f} GiB**；"
                     f"按当时的布局预测 predicted with that run's layout {budget.gib(then.device_memory)}"
                     f"{_short(then.device_memory / budget.GIB, float(run['max_allocated_gib']))}；"
                     f"按现在的代码预测 predicted for the code now {budget.gib(now.device_memory)}")
    device = esc(str(data["device"]))
    return (f"\n实测 Measured: {device}，torch {esc(str(data['torch']))}，{esc(str(data['date']))}，"
            f"`torch.cuda.max_memory_allocated()`。当时身份比对和 HF 逐行记录在 CPU 上运行；现在它们在设备上，"
            f"所以现在的预测更高（尚未在 GPU 上实测）。\n*Measured on {device} (torch {esc(str(data['torch']))}, "
            f"{esc(str(data['date']))}) as `torch.cuda.max_memory_allocated()`. That run identified and traced HF's lines "
            f"on the CPU; both now run on the device, so today's prediction is higher (not yet measured on a GPU).*\n\n"
            + "\n".join(lines) + "\n")


def _short(predicted_gib: float, measured_gib: float) -> str:
    """Says so where the model (with the run's layout) is under what was measured: the page promises no more."""
    under = 1 - predicted_gib / measured_gib
    return f"（模型比实测少 {100 * under:.1f} % · the model is {100 * under:.1f} % under the measurement）" if under > 0 else ""


def lab_page(root: Path, found: list[Experiment]) -> str:
    rows = _budget_rows()
    runs = "\n".join(f"annotate experiment {esc(x.name)} --device cuda --model ~/models/Qwen3-0.6B --force" for x in found)
    return f"""---
title: 本地实验 · On your own GPU
---
# 本地实验 · On your own GPU ({GPU}, {GPU_GIB} GB)

在自己的一块消费级显卡上用真实的 Qwen3 权重记录轨迹、运行五个实验并构建站点。下面的命令假定检查点在
`~/models/Qwen3-0.6B`（`config.json`、`*.safetensors` 和分词器文件）。
*Record traces of real Qwen3 weights on one consumer GPU, run the five experiments there and build the site. The commands
assume a checkpoint in `~/models/Qwen3-0.6B` (`config.json`, `*.safetensors`, the tokenizer files).*

## 1. 先算一算 · First, the budget

```sh
annotate budget --model ~/models/Qwen3-0.6B --tokens 512 --memory {GPU_GIB}
```

它只读 `config.json` 和权重文件的头部（不读任何张量），给出下表这样的数字；放不下时直接拒绝。
`annotate trace --device cuda` 在加载任何权重之前做同样的检查。
*It reads `config.json` and the weight files' headers only (no tensor) and prints numbers like the table below,
refusing when the run will not fit;
`annotate trace --device cuda` makes the same check before loading any weight.*

Qwen3-0.6B 的形状（28 层）。显存按追踪中最满的阶段计：两份权重（nano-vllm 与 HF 参照实现）、记录的副本、
HF 逐层的 eager 注意力（heads × T² 的分数）、cuBLAS 工作区、身份比对的候选栈和 HF 逐行记录的副本
（各项见 `annotate/trace/model/budget.py`）。
*The Qwen3-0.6B shape (28 layers). Device memory is the fullest stage of a trace: both models' weights (nano-vllm and the
HF reference), the recorded copies, HF's eager attention one layer at a time (heads × T² scores), cuBLAS's workspace,
the identification stacks and HF's traced lines' copies (each term: `annotate/trace/model/budget.py`).*

{_HEADER.format(gib=GPU_GIB)}
{rows}
{_measured(root)}
## 2. 记录基线 · Record the baseline

```sh
annotate trace --device cuda --model ~/models/Qwen3-0.6B --prompt "你好，世界" --out traces/cuda-qwen3
annotate trace --device cuda --model ~/models/Qwen3-0.6B --tokens 512
```

## 3. 五个实验 · The five experiments

每个实验用与基线相同的选项运行（命令行选项覆盖实验文件里的 `baseline:`），结果写入 `traces/experiments/NAME`。
*Each runs with the baseline's options (command-line options override the file's `baseline:`), into
`traces/experiments/NAME`.*

```sh
{runs}
```

## 4. 构建站点 · Build the site

```sh
annotate build && python3 -m http.server -d site   # 或直接打开 or open site/index.html
```

另见 See also: [实验 · Experiments](experiments/index.md) · [复习与实战路线 · Route](route.md) ·
[实验文件格式 · The experiment format](experiment-format.md)
"""


def route_page(found: list[Experiment]) -> str:
    """Lesson → exercises → closed-book check → experiments → own GPU run, with ticks kept in this browser."""
    steps = [("lesson", "课程：两个变量的数据流", "The lesson: the flow of two variables", "lesson.md#1-the-textbook-block", ""),
             ("exercises", "源码练习", "Source exercises", "lesson.md#8-source-exercises", ""),
             ("closed-book", "闭卷自测", "Closed-book self-check", "lesson.md#9-closed-book-self-check", ""),
             *((f"exp-{x.name}", f"实验：{x.title.zh}", f"Experiment: {x.title.en}", f"experiments/{x.name}.md",
                f"annotate experiment {x.name}") for x in found),
             ("gpu", "在自己的 GPU 上运行", "A run on your own GPU", "lab.md", "annotate budget --model DIR --memory 12")]
    items = []
    for key, zh, en, link, command in steps:
        cmd = f" <code>{esc(command)}</code>" if command else ""
        items.append(f'<li data-step="{esc(key)}"><label><input type="checkbox" data-step="{esc(key)}"> '
                     f'<a href="{esc(_html(link))}">{literal(zh)} · {literal(en)}</a></label>{cmd}</li>')
    return f"""---
title: 复习与实战路线 · Route
---
# 复习与实战路线 · A route for review and practice

按顺序走：先读课程，做源码练习和闭卷自测，再跑五个实验，最后在自己的 GPU 上运行。勾选完成的步骤；
自我评估（课程第 10 节）的结果也显示在这里。
*In order: read the lesson, do the source exercises and the closed-book check, run the five experiments, then a run on
your own GPU. Tick the steps you have done; your self-assessment (lesson §10) shows here too.*

<div class="an-route" data-store="annotate.route.v1" data-selfassess="{SELF_ASSESSMENT_STORE}" markdown="0">
<p class="an-route-privacy"><strong>只保存在本浏览器。</strong>勾选只写入这个浏览器的 localStorage，不会发送到任何地方。<br>
<em>Stored only in this browser (localStorage). Nothing is sent anywhere.</em></p>
<ol class="an-route-steps">
{chr(10).join(items)}
</ol>
<p class="an-route-progress" role="status">进度 progress: <span class="an-route-done">0</span> / {len(steps)}</p>
<p class="an-route-selfassess">自我评估 self-assessment: <span class="an-route-sa">还没有 none yet</span>
(<a href="lesson.html#10-self-assessment">课程第 10 节 lesson §10</a>)</p>
</div>
{asset_tags(ROUTE_URI, "js/route.js")}"""


def _html(link: str) -> str:
    """A docs-relative Markdown link as the built page's URL (raw HTML links are not rewritten by MkDocs)."""
    page, _, anchor = link.partition("#")
    return page.removesuffix(".md") + ".html" + (f"#{anchor}" if anchor else "")
