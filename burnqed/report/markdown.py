"""report.md: the iteration report as a researcher reads it (`report.build` builds the `Report`): its head, then every
section of `report.document.SECTIONS` in that order, each written by its own `markdown`.

    text = render_markdown(report)

Every solve rate is written `solved/n (rate, 95% Wilson interval)` (`result.rate_text`).
"""

from __future__ import annotations

from burnqed.report.core import _base_arm_text
from burnqed.report.document import SECTIONS, Report


def render_markdown(report: Report) -> str:
    """report.md."""
    lines = [f"# burnqed report: iteration {report.iteration}", "",
             f"Run root: `{report.root}`" + (f"; written by {report.made_by}" if report.made_by else "") + ".", "",
             "Every solve rate is shown as solved/n (rate, 95% Wilson score interval). On a few dozen theorems the "
             "interval spans ±10 points or more: a difference inside it may be chance.", ""]
    arm = report.base_arm
    if arm is not None and arm.differs:
        lines += [f"**The base arm is not the model SFT started from**: {_base_arm_text(arm)}.", ""]
    for section in SECTIONS:
        lines += section.markdown(section.shown(report))
    return "\n".join(lines)
