"""A report's two pages: a self-contained HTML page (plots embedded as base64 data URIs, so it still
works when moved on its own) and a Markdown page (plots linked by relative path); all text from
records is escaped, and both end with the list of files the report wrote."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

from .tables import Section, Table

CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1.5em 0}img{max-width:100%}.headline{font-size:1.05em}.note{color:#666}"""


@dataclass(frozen=True)
class ReportFiles:
    """Paths of the files ``build_report`` wrote."""

    html: Path
    markdown: Path
    images: tuple[Path, ...]

    @property
    def all(self) -> tuple[Path, ...]:
        """Every file written: the HTML page, the Markdown page, then the PNG plots."""
        return (self.html, self.markdown, *self.images)


def html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{html.escape(c)}</td>' if num else f"<td>{html.escape(c)}</td>"
            for c, num in zip(row, table.numeric, strict=True)
        )
        + "</tr>\n"
        for row in table.rows
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def md_cell(text: str) -> str:
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def md_table(table: Table) -> str:
    lines = [
        "| " + " | ".join(md_cell(h) for h in table.headers) + " |",
        "|" + "|".join("---:" if num else "---" for num in table.numeric) + "|",
    ]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def html_section(section: Section) -> str:
    parts = [f"<h2>{html.escape(section.title)}</h2>"]
    parts += [f"<p>{html.escape(text)}</p>" for text in section.text]
    if section.table is not None:
        parts.append(html_table(section.table))
    return "\n".join(parts)


def md_section(section: Section) -> str:
    parts = [f"## {md_cell(section.title)}", *(md_cell(text) for text in section.text)]
    if section.table is not None:
        parts.append(md_table(section.table))
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Page:
    """What both pages show: the title, the headline lines, the sections, the plots (file, caption)
    and a note after the plots (empty: none)."""

    title: str
    headline: tuple[str, ...]
    sections: tuple[Section, ...]
    images: tuple[tuple[Path, str], ...]
    note: str


def file_notes(files: ReportFiles, images: tuple[tuple[Path, str], ...]) -> list[tuple[str, str]]:
    notes = [
        (files.html.name, "this report as one self-contained page (plots embedded)"),
        (files.markdown.name, "this report in Markdown (plots linked)"),
    ]
    return notes + [(image.name, caption) for image, caption in images]


def write_html(files: ReportFiles, page: Page) -> None:
    title, headline, sections, images, note = page.title, page.headline, page.sections, page.images, page.note
    figures = "\n".join(
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,'
        f'{base64.b64encode(image.read_bytes()).decode("ascii")}"><figcaption>{html.escape(caption)}'
        f"</figcaption></figure>"
        for image, caption in images
    )
    body = "\n".join(html_section(section) for section in sections)
    note_html = f'<p class="note">{html.escape(note)}</p>\n' if note else ""
    head = "\n".join(f'<p class="headline">{html.escape(text)}</p>' for text in headline)
    listed = "\n".join(
        f"<li><code>{html.escape(name)}</code>: {html.escape(what)}</li>" for name, what in file_notes(files, images)
    )
    files.html.write_text(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n{head}\n{body}\n<h2>Plots</h2>\n{figures}\n{note_html}"
        f"<h2>Files written</h2>\n<p>In the report directory:</p>\n<ul>\n{listed}\n</ul>\n</body>\n</html>\n",
        encoding="utf-8",
    )


def write_markdown(files: ReportFiles, page: Page) -> None:
    title, headline, sections, images, note = page.title, page.headline, page.sections, page.images, page.note
    parts = [f"# {md_cell(title)}", *(md_cell(text) for text in headline)]
    parts += [md_section(section) for section in sections]
    parts.append("## Plots\n\n" + "\n\n".join(f"![{caption}]({image.name})" for image, caption in images))
    if note:
        parts.append(f"_{note}_")
    parts.append(
        "## Files written\n\nIn the report directory:\n\n"
        + "\n".join(f"- `{name}`: {md_cell(what)}" for name, what in file_notes(files, images))
    )
    files.markdown.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
