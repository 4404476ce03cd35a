"""sol report --flamegraph: a well-formed, self-contained SVG with a rectangle per frame, widths
proportional to time, merged across the processes of data/survey."""
import xml.etree.ElementTree as ET

import pytest
from conftest import DATA, sol

SVG = "{http://www.w3.org/2000/svg}"
TOTAL_NS = 4340750


def frames(path):
    """[(name, title, x, y, width)] for every frame of the SVG at `path`."""
    root = ET.parse(path).getroot()  # raises on malformed XML
    assert root.tag == SVG + "svg"
    out = []
    for g in root.iter(SVG + "g"):
        title, rect = g.find(SVG + "title"), g.find(SVG + "rect")
        name = title.text.rsplit(" (", 1)[0]
        out.append((name, title.text, float(rect.get("x")), float(rect.get("y")), float(rect.get("width"))))
    return out


@pytest.fixture(scope="module")
def survey_svg(tmp_path_factory):
    out = tmp_path_factory.mktemp("fg") / "survey.svg"
    p = sol("report", DATA / "survey", "--flamegraph", out, check=0)
    assert "sgemm_" in p.stdout  # the table is still printed
    return frames(out)


def test_all_frames_present(survey_svg):
    names = {f[0] for f in survey_svg}
    assert names == {
        "all",
        # from the .folded files of r0-4242 and r1-4243
        "python3.11+0x5f00", "at::native::addmm_impl_cpu_", "at::native::cpublas::gemm", "sgemm_",
        "_PyEval_EvalFrameDefault", "matmul_f64", "cblas_dgemm",
        "at::native::mkldnn_convolution", "std::function<void (int&)>::operator()", "dnnl_primitive_execute",
        "scipy_gemv", "dgemv_",
        # 4300 has no .folded: from its summary's sites
        "main",
    }


def test_widths_proportional_to_time(survey_svg):
    by_name = {}
    for name, title, x, y, w in survey_svg:
        by_name.setdefault(name, []).append((title, x, y, w))
    (all_title, all_x, all_y, all_w), = by_name["all"]
    assert "100.0%" in all_title
    # The two ranks' sgemm_ stacks merge: 825000 + 1200000 ns.
    (title, x, y, w), = by_name["at::native::cpublas::gemm"]
    assert w / all_w == pytest.approx(2025000 / TOTAL_NS, rel=1e-3)
    assert "46.7%" in title
    # sgemm_ appears under gemm, under main (4300), and at the root (the killed process).
    widths = sorted(w for _, _, _, w in by_name["sgemm_"])
    assert [v / all_w for v in widths] == pytest.approx(sorted([30000 / TOTAL_NS, 85500 / TOTAL_NS, 2025000 / TOTAL_NS]), rel=1e-3)
    # Callers below callees: y decreases with depth.
    (_, _, y_caller, _), = by_name["at::native::addmm_impl_cpu_"]
    assert y < y_caller < all_y


def test_children_fit_inside_parents(survey_svg):
    # Every frame but "all" lies within the horizontal extent of "all".
    _, _, x0, _, w0 = next(f for f in survey_svg if f[0] == "all")
    for name, _, x, _, w in survey_svg:
        assert x0 - 1e-6 <= x and x + w <= x0 + w0 + 0.01, name


def test_single_summary_without_folded_uses_sites(tmp_path):
    out = tmp_path / "one.svg"
    sol("report", DATA / "diff" / "sol-a.summary.json", "--flamegraph", out, check=0)
    names = [f[0] for f in frames(out)]
    # Frames outermost first: main, then f_gemm, then the symbol.
    assert {"all", "main", "f_gemm", "g_gemm", "dot_loop", "axpy_once", "sgemm_", "saxpy_"} <= set(names)


def test_unwritable_flamegraph_is_an_error(tmp_path):
    p = sol("report", DATA / "survey", "--flamegraph", tmp_path / "no" / "such" / "dir.svg")
    assert p.returncode == 2
    assert any(l.startswith("sol: ") and "dir.svg" in l for l in p.stderr.splitlines())
