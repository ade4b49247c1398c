"""Tuning reports: an evaluation log computed into pandas frames, rendered to HTML, Markdown and PNG.

Importing this package is light: pandas and matplotlib load only when a report is built.
"""

from .data import ReportInputs, results_frame
from .pages import ReportFiles
from .render import build_report

__all__ = ["ReportFiles", "ReportInputs", "build_report", "results_frame"]
