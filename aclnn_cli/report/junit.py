"""JUnit XML of a verify run (Jenkins, GitLab): one testcase per case, written case by case. Its own module:
only a run with --junit imports xml.etree."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from ..judge.results import PASS, RunResult
from ..tensor.storage import atomic_write_text
from .formats import element_line
from .rows import row_lines


_PLAIN = re.compile(r"[A-Za-z0-9_.+=:,;@/ -]*")  # attribute text ElementTree writes as it is (no escapes)


def _testcase(c: dict) -> ET.Element:
    tc = ET.Element("testcase", classname=f"{c['op']}.{c['dtype']}", name=c["case_id"])
    if c["status"] != PASS:
        tag = "error" if c["status"] == "ERROR" else "failure"
        el = ET.SubElement(tc, tag, type=c["status"], message=f"{c['status']}: {c['reason']}")
        lines = [f"{c['status']} ({c['standard']}): {c['reason']}"]
        lines += row_lines(c.get("rows") or [])
        lines += [element_line(w) for w in c.get("worst") or []]
        if c.get("repro"):
            lines.append(f"repro: {c['repro']}")
        el.text = "\n".join(lines)
    return tc


def _suite(statuses: list[str], name: str) -> ET.Element:
    return ET.Element("testsuite", name=name, tests=str(len(statuses)),
                         failures=str(sum(s not in (PASS, "ERROR") for s in statuses)),
                         errors=str(sum(s == "ERROR" for s in statuses)), skipped="0")


def junit_xml(cases: list[dict], name: str = "aclnn-cli verify") -> str:
    """JUnit XML (Jenkins, GitLab): one testcase per case; non-passing cases carry failure/error."""
    suite = _suite([c["status"] for c in cases], name)
    suite.extend(_testcase(c) for c in cases)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: Path, run: RunResult, name: str = "aclnn-cli verify") -> None:
    """junit_xml of the run's cases, the same bytes, written case by case (each testcase serialised
    as it stands indented in the whole suite)."""
    if not run.cases:
        return atomic_write_text(path, junit_xml([], name))

    def chunks():
        suite = _suite([c.status for c in run.cases], name)
        for i, c in enumerate(run.cases):
            if i and c.status == PASS and _PLAIN.fullmatch(c.op + c.dtype + c.case_id):
                yield f'  <testcase classname="{c.op}.{c.dtype}" name="{c.case_id}" />\n'  # (as ElementTree writes it)
                continue
            one = _suite([], name)
            one.append(_testcase(c.to_json(errors=False)))  # (the error data is not in JUnit)
            ET.indent(one)
            lines = ET.tostring(one, encoding="unicode", xml_declaration=i == 0).split("\n")
            if i == 0:  # the declaration and the suite's opening tag, with the run's counts
                first = ET.tostring(suite, encoding="unicode", xml_declaration=True).split("\n")
                yield first[0] + "\n" + first[1].replace(" />", ">") + "\n"
                lines = lines[1:]
            yield "\n".join(lines[1:-1]) + "\n"
        yield "</testsuite>\n"

    atomic_write_text(path, chunks())
