"""The page writers: one `Page`'s blocks (`blocks`), in their order, as report.md and as
report.html, one self-contained file (figures inlined as base64 PNG, nothing fetched). Each
writer formats every block; none adds, drops or reorders one, so the two files say the same
things in the same order."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from ablate.report.render import formats
from ablate.report.render.blocks import (
    Block,
    Box,
    Bullets,
    Figure,
    Fold,
    Heading,
    Links,
    Page,
    Paragraph,
    Stamp,
    TableBlock,
)
from ablate.report.render.figures import caption

# Reads on a phone (390 px) as on a desktop: wide tables scroll inside their own box, figures
# shrink to the page, long words break; tests/test_browser.py checks there is no page overflow.
CSS = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 0.75em;"
    "overflow-wrap:anywhere}table{border-collapse:collapse;font-size:12px;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;overflow-wrap:normal}"
    "caption{text-align:left;font-size:12px;color:#333;caption-side:bottom}"
    ".findings{background:#f6f8fa;padding:0.5em 1.5em;border-left:4px solid #3b73b9}"
    ".note{font-size:11px;color:#555}.scroll{overflow-x:auto;max-width:100%}"
    "figure{margin:1em 0}img{max-width:min(640px,100%);height:auto}"
    "td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "code{background:#f0f0f0;padding:0 2px;border-radius:2px}"
    "details.appendix>summary{cursor:pointer;margin:1.5em 0}"
    "details.appendix>summary>h1{display:inline;font-size:1.4em}"
)


def _markdown(block: Block) -> list[str]:
    """The block's lines, each block followed by a blank line."""
    text = formats.markdown_text
    match block:
        case Heading(words, level):
            return [f"{'#' * level} {words}", ""]
        case Stamp(words):
            return [f"_{words}_", ""]
        case Paragraph(words):
            return [text(words), ""]
        case Links(targets):
            return [" · ".join(f"[{k}]({v}/report.md)" for k, v in targets.items()), ""]
        case Bullets(title, items):
            return [f"**{title}**", "", *[f"- {text(s)}" for s in items], ""]
        case TableBlock(table):
            return [formats.to_markdown(table).removesuffix("\n"), ""]
        case Figure(png):
            return [f"![{text(caption(png))}](figures/{png.name})", ""]
        case Box(inner):
            return [line for b in inner for line in _markdown(b)]
        case Fold(summary, inner):
            return ["---", "", f"# {summary}", "", *(line for b in inner for line in _markdown(b))]
    raise TypeError(f"no Markdown for {block!r}")


def markdown(page: Page) -> str:
    return "\n".join(line for block in page.blocks for line in _markdown(block)) + "\n"


def _figure_html(png: Path) -> str:
    encoded = base64.b64encode(png.read_bytes()).decode()
    text = html.escape(caption(png), quote=True)
    return (
        f"<figure><img alt='{text}' src='data:image/png;base64,{encoded}'>"
        f"<figcaption>{text}</figcaption></figure>"
    )


def _html(block: Block) -> str:
    esc = formats.html_text
    match block:
        case Heading(words, level):
            return f"<h{level}>{esc(words)}</h{level}>"
        case Stamp(words):
            return f"<p><em>{esc(words)}</em></p>"
        case Paragraph(words):
            return f"<p>{esc(words)}</p>"
        case Links(targets):
            links = (
                f"<a href='{html.escape(v)}/report.html'>{esc(k)}</a>" for k, v in targets.items()
            )
            return f"<p>{' · '.join(links)}</p>"
        case Bullets(title, items):
            return f"<h3>{esc(title)}</h3><ul>{''.join(f'<li>{esc(s)}</li>' for s in items)}</ul>"
        case TableBlock(table):
            return formats.to_html(table)
        case Figure(png):
            return _figure_html(png)
        case Box(inner):
            return f"<div class='findings'>{''.join(map(_html, inner))}</div>"
        case Fold(summary, inner):
            body = "".join(map(_html, inner))
            return (
                f"<details class='appendix'><summary><h1>{esc(summary)}</h1></summary>"
                f"{body}</details>"
            )
    raise TypeError(f"no HTML for {block!r}")


def page_html(page: Page) -> str:
    head = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{html.escape(page.tab)}</title><style>{CSS}</style></head><body>"
    )
    return head + "".join(map(_html, page.blocks)) + "</body></html>\n"


def write_markdown(page: Page, folder: Path) -> Path:
    path = folder / "report.md"
    path.write_text(markdown(page))
    return path


def write_html(page: Page, folder: Path) -> Path:
    path = folder / "report.html"
    path.write_text(page_html(page))
    return path
