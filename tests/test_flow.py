"""The flow diagram (annotate.pages.traces.flow): steps and labels come from the trace's identities; golden SVG."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from annotate.pages.traces.flow import extract, render_svg
from annotate.pages.base.tracefmt import sup_label
from goldens import compare_golden
from values_fixtures import href, mini

QWEN3 = "nanovllm/models/qwen3.py"


def test_two_last_layers_then_the_final_norm() -> None:
    flow = extract(mini())
    assert flow.layers == mini().layers()[-2:]
    assert [(s.layer, s.line) for s in flow.steps] == [
        (layer, line) for layer in flow.layers for line in (154, 155, 156, 157)] + [(None, 181)]
    assert [s.op.split("(")[0] for s in flow.steps[:4]] == ["input_layernorm", "self_attn", "post_attention_layernorm", "mlp"]
    assert flow.steps[1].lanes == (0,) and flow.steps[0].lanes == (0, 1)       # attention touches hidden_states only


def test_labels_are_the_identities_of_the_trace() -> None:
    trace, flow = mini(), extract(mini())
    for step in flow.steps:
        rec = next(r for r in trace.at(QWEN3, step.line, layer=step.layer) if r.function.endswith("forward"))
        for edge in step.out.values():
            assert edge.math == sup_label(rec.var(edge.var).label) and edge.line == rec.line
    last = flow.steps[-1].out[1]
    assert (last.var, last.math) == ("_", sup_label(f"x₂⁽{flow.layers[-1]}⁾"))
    # on entry to the first shown layer: what the previous layer's mlp / post_attention_layernorm produced
    assert (flow.entry[0].line, flow.entry[1].line) == (157, 156)


def test_svg_is_well_formed_linked_and_golden() -> None:
    svg = render_svg(extract(mini()), href)
    ET.fromstring(svg)
    links = set(re.findall(r'href="([^"]+)"', svg))
    layers = extract(mini()).layers
    page = "../source/nanovllm/models/qwen3.py.html"
    assert {f"{page}#L156&amp;layer={n}" for n in layers} <= links     # each layer's step opens that layer's panel
    assert f"{page}#L181" in links                                       # outside the layers: no layer
    assert "http" not in svg.replace("http://www.w3.org/2000/svg", "")
    compare_golden("values/flow.svg", svg + "\n")
