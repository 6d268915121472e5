"""verify --html and report --html: one offline file with every case's plots, failing cases first; tested as
a person would see it in headless Chromium (Debian's `chromium`) where it is installed.

The run: SiluBackward [64, 33] cases in bf16 and fp32 played by the correct kernel and three defects of the
catalogue (bf16 truncation, the unwritten last partial tile, a sign slip), each group under its own case
names so one verify judges them all.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from aclnn_cli.casedir import manifest as M

from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.device.emulate import emulate_case
from aclnn_cli.device.defects import find_variant

from helpers import run_cli, write_yaml

pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib: pip install 'aclnn-cli[report]'")
from PIL import Image  # noqa: E402  (matplotlib's dependency)

GROUPS = {"correct": None, "truncation": "bf16-truncate", "tile": "partial-tile-unwritten", "slip": "sign-slip"}
ARTIFACTS = Path(os.environ.get("ACLNN_TEST_ARTIFACTS")
                 or Path(__file__).resolve().parent.parent / "build" / "test-artifacts")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(report from verify --html, its verify JSON, report --html from the run's two shards, the tmp dir)."""
    tmp = tmp_path_factory.mktemp("html")
    text = "op: aclnnSiluBackward\ncases:\n" + "".join(
        f"  - {{name: {g}, dtype: [bfloat16, float32], shape: [64, 33], seed: 5}}\n" for g in GROUPS)
    out = tmp / "out"
    assert run_cli("gen", write_yaml(tmp, text), "-o", out, "-j", 1).exit_code == 0
    for d in casedirs.find_cases(out):
        defect = GROUPS[d.name.split("-")[1]]
        emulate_case(M.load(d), variant=find_variant(defect) if defect else None)
    r = run_cli("verify", out, "--html", tmp / "r.html", "--json", tmp / "v.json", "-j", 1)
    assert r.exit_code == 1, r.output
    for i in (1, 2):
        shard = run_cli("verify", out, "--shard", f"{i}/2", "--json", tmp / "shards" / f"{i}.json", "-j", 1)
        assert shard.exit_code == 1
    merged = run_cli("report", tmp / "shards", "--html", tmp / "merged.html")
    assert merged.exit_code == 1, merged.output
    return tmp / "r.html", json.loads((tmp / "v.json").read_text()), tmp / "merged.html", tmp


class Page(HTMLParser):
    """Tags and attributes of a page, the cases' statuses in page order, the images' sources."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def statuses(self) -> list[str]:
        return [a["data-status"] for t, a in self.tags if "data-status" in a]

    def images(self) -> list[str]:
        return [a.get("src", "") for t, a in self.tags if t == "img"]


def test_the_report_is_one_offline_file_with_decodable_plots(run):
    page = Page(run[0].read_text(encoding="utf-8"))
    tags = {t for t, _ in page.tags}
    assert not tags & {"script", "link", "iframe", "object", "embed"}  # nothing loaded from anywhere
    urls = [v for _, a in page.tags for k, v in a.items() if k in ("src", "href") and v]
    assert all(u.startswith(("data:image/png;base64,", "#")) for u in urls), [u[:40] for u in urls]
    images = page.images()
    assert len(images) == 8  # a figure per case: every case compared elements
    for src in images:
        png = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        png.load()
        assert png.width > 300 and png.height > 100


def test_failing_cases_come_first_each_with_its_verdict_limits_worst_elements_repro_and_plots(run):
    text, data = run[0].read_text(encoding="utf-8"), run[1]
    page = Page(text)
    statuses = page.statuses()
    expected = {c["case_id"]: c["status"] for c in data["cases"]}
    assert sorted(statuses) == sorted(expected.values())
    assert statuses == sorted(statuses, key=lambda s: s == "PASS")  # every non-passing case before any passing one
    assert sorted(k for k, s in expected.items() if s == "PASS") == ["silu_backward-correct-bfloat16",
                                                                    "silu_backward-correct-float32",
                                                                    "silu_backward-truncation-float32"]
    for case in (c for c in data["cases"] if c["status"] != "PASS"):
        block = text[text.index(f"{case['case_id']}</h3>"):]
        block = block[:block.index("</article>")]
        assert case["reason"].split(" (")[0] in block.replace("&gt;", ">") and "broken" not in block
        assert 'class="num over"' in block and "<th>coords</th>" in block and "repro: aclnn-cli gen " in block
        assert block.count("<img") == 1 and "Signed ulp histogram" in block
    passing = text[text.index('<section id="passing">'):]
    assert passing.count("<details") == 3 and passing.count("<img") == 3
    truncated = next(c for c in data["cases"] if c["case_id"] == "silu_backward-truncation-bfloat16")
    assert "biased toward zero" in truncated["reason"]
    assert truncated["errors"]["ulp_histogram"]["away_from_zero"] == []  # the bias: one-sided


def test_report_draws_the_same_page_from_merged_shard_results(run):
    """Plumbing: the page report --html draws from two shards' JSON holds the cases and plots verify --html drew
    in memory (the plots come from the JSON data alone: the same PNG bytes)."""
    own, merged = Page(run[0].read_text(encoding="utf-8")), Page(run[2].read_text(encoding="utf-8"))
    assert merged.statuses() == own.statuses() and sorted(merged.images()) == sorted(own.images())


def test_results_of_schema_1_merge_and_list_their_cases_without_plots(run, tmp_path):
    old = dict(run[1], schema="aclnn-cli/verify/1", cases=[{k: v for k, v in c.items() if k != "errors"}
                                                           for c in run[1]["cases"]])
    (tmp_path / "old.json").write_text(json.dumps(old))
    r = run_cli("report", tmp_path / "old.json", "--html", tmp_path / "old.html")
    assert r.exit_code == 1
    page = Page((tmp_path / "old.html").read_text(encoding="utf-8"))
    assert len(page.statuses()) == 8 and page.images() == []


def test_without_matplotlib_html_says_how_to_install_it_and_exits_2(run, tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    for args in (("verify", run[3] / "out"), ("report", run[3] / "v.json")):
        r = run_cli(*args, "--html", tmp_path / "r.html", "--json", tmp_path / "j.json")
        assert r.exit_code == 2 and r.output.strip().splitlines() == [
            "aclnn-cli: error: --html needs matplotlib: pip install 'aclnn-cli[report]' (or pip install matplotlib)"]
        assert not (tmp_path / "r.html").exists() and not (tmp_path / "j.json").exists()  # (no work done)


def test_nothing_but_the_html_report_imports_matplotlib(run):
    script = ("import sys\nfrom click.testing import CliRunner\nfrom aclnn_cli.cli.main import main\n"
              f"r = CliRunner().invoke(main, ['verify', {str(run[3] / 'out')!r}, '-j', '1', '--json', "
              f"{str(run[3] / 'again.json')!r}])\n"
              "r2 = CliRunner().invoke(main, ['report', sys.argv[1]])\n"
              "print(r.exit_code, r2.exit_code, 'matplotlib' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script, str(run[3] / "v.json")], capture_output=True, text=True)
    assert done.stdout.split() == ["1", "1", "False"], done.stderr


def test_bad_html_paths_and_broken_error_data_are_one_line_and_exit_2(run, tmp_path):
    r = run_cli("verify", run[3] / "out", "--html", tmp_path)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "is a directory" in r.output
    data = json.loads(json.dumps(run[1]))
    data["cases"][0]["errors"]["map"]["ulp_max"] = [[1.0]]  # (a passing case: its map has 2 x 2 merged blocks)
    (tmp_path / "bad.json").write_text(json.dumps(data))
    r = run_cli("report", tmp_path / "bad.json", "--html", tmp_path / "r.html")
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert f"{tmp_path / 'bad.json'}: case #1: 'errors': map.ulp_max must be 16 rows of 9 numbers" in r.output


CHECK = """<script>
window.__errors = [];
window.addEventListener('error',
  e => window.__errors.push(String(e.message || (e.target && e.target.outerHTML.slice(0, 120)))), true);
window.addEventListener('load', () => {
  // synchronous (the DOM is dumped once load handlers return): drawing an image on a canvas decodes it
  const images = [...document.images].map(i => {
    if (!i.complete || !i.naturalWidth) return [i.alt, 0, 0, 0];
    const c = document.createElement('canvas');
    c.width = i.naturalWidth; c.height = i.naturalHeight;
    const g = c.getContext('2d');
    g.drawImage(i, 0, 0);
    const px = g.getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let k = 0; k < px.length; k += 4) if (px[k] < 200 || px[k + 1] < 200 || px[k + 2] < 200) ink++;
    return [i.alt, i.naturalWidth, i.naturalHeight, ink];
  });
  const order = [...document.querySelectorAll('[data-status]')].map(e => e.dataset.status);
  const out = document.createElement('pre');
  out.id = 'aclnn-check';
  out.textContent = JSON.stringify({images, order, errors: window.__errors});
  document.body.appendChild(out);
});
</script>"""


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def test_in_headless_chromium_the_report_has_no_errors_every_plot_decodes_and_failures_come_first(run, tmp_path):
    """Chromium's own headless flags, no driver library: --dump-dom of a copy of the page with a checking script
    (errors of any element; each image decoded by drawing it on a canvas, its size and how many pixels carry
    ink; the cases' order), all synchronous in the load event so the dump holds them; --enable-logging for
    console messages; a --screenshot of the page as it is, kept in build/test-artifacts (ACLNN_TEST_ARTIFACTS)."""
    browser = _chromium()
    if browser is None:
        pytest.skip("Chromium not found: install Debian's chromium (apt-get install chromium; make test does it "
                    "where it can) to run the browser test")
    checked = tmp_path / "checked.html"
    checked.write_text(run[0].read_text(encoding="utf-8").replace("<head>", "<head>\n" + CHECK, 1), encoding="utf-8")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--enable-logging=stderr", "--v=0", "--dump-dom",
                          checked.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="aclnn-check">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    result = json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                        .replace("&amp;", "&"))
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [] and result["errors"] == []
    images = result["images"]  # (alt, width, height, ink: pixels drawn in something darker than light grey)
    assert len(images) == 8 and all(w > 300 and h > 100 and ink > 1000 for _, w, h, ink in images), images
    order = result["order"]
    assert order[0] == "FAIL" and order == sorted(order, key=lambda s: s == "PASS") and order.count("PASS") == 3
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "html-report.png"
    shot.unlink(missing_ok=True)
    done = subprocess.run([*flags, "--hide-scrollbars", "--window-size=1300,2400", f"--screenshot={shot}",
                           run[0].as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists(), done.stderr[-2000:]
    image = Image.open(shot)
    assert image.size == (1300, 2400) and image.convert("L").getextrema()[0] < 100  # (not a blank page)
