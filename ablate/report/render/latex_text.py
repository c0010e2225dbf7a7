"""Plain Unicode text as ASCII LaTeX for text mode (`escape`): special characters, `<`, `>` and
`|` in math mode, Greek letters and symbols as macros, `code` as \\texttt. The output is pure ASCII,
so no Unicode error is possible in any document that \\inputs it, and one line, so no name can
end a paragraph inside a caption, heading or cell. Every study-derived name that reaches a
report's LaTeX (arms, tables, models, templates, the study's) goes through `escape`, and a
cross-reference through `label`."""

from __future__ import annotations

import re
import unicodedata

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "^": r"\^{}",
    "~": r"$\sim$",
    "<": "$<$",
    ">": "$>$",
    "|": "$|$",
}
_UNICODE = {
    "−": "$-$",
    "±": r"$\pm$",
    "×": r"$\times$",
    "·": r"$\cdot$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "≈": r"$\approx$",
    "≠": r"$\neq$",
    "→": r"$\rightarrow$",
    "←": r"$\leftarrow$",
    "∞": r"$\infty$",
    "√": r"$\surd$",
    "†": r"\dag{}",
    "‡": r"\ddag{}",
    "–": "--",
    "—": "---",
    "…": r"\ldots{}",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
    "¼": r"$\frac{1}{4}$",
    "½": r"$\frac{1}{2}$",
    "¾": r"$\frac{3}{4}$",
    "°": r"$^\circ$",
    "²": "$^2$",
    "³": "$^3$",
    "µ": r"$\mu$",
    "\u00a0": "~",
}
_GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "η": "eta",
    "θ": "theta", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu", "π": "pi", "ρ": "rho",
    "σ": "sigma", "τ": "tau", "φ": "phi", "χ": "chi", "ψ": "psi", "ω": "omega",
    "Γ": "Gamma", "Δ": "Delta", "Θ": "Theta", "Λ": "Lambda", "Π": "Pi", "Σ": "Sigma",
    "Φ": "Phi", "Ψ": "Psi", "Ω": "Omega",
}  # fmt: skip
_UNICODE.update({k: f"$\\{v}$" for k, v in _GREEK.items()})


def _char(ch: str) -> str:
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    if ch.isascii():
        return ch
    if ch in _UNICODE:
        return _UNICODE[ch]
    # accented letters lose their accent (é -> e); anything else is shown as '?'
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if c.isascii())
    return base or "?"


#: A line break with the blanks around it: a blank line is a paragraph break, an error inside a
#: caption, a heading or an `l` cell, so text is set on one line (TeX reads a break as a space).
_BREAK = re.compile(r"[ \t]*[\n\r\f\v][\s]*")
#: ASCII control characters: TeX refuses them ("invalid character"), and escape uses \x00-\x02.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def escape(text: str) -> str:
    """Plain Unicode text as ASCII LaTeX for text mode, on one line. `code` becomes
    \\texttt{code} and a 'quoted' word gets an opening quote; adjacent math groups are merged
    ($a$$b$ -> $ab$); a control character is shown as '?'."""
    text = _CONTROL.sub("?", _BREAK.sub(" ", text))
    parts = re.split(r"`([^`]*)`", text)  # odd indexes: code spans
    out = []
    for i, part in enumerate(parts):
        part = re.sub(r"(^|(?<=[\s(]))'(?=\S)", "\x00", part)  # an opening single quote
        part = re.sub(r'(^|(?<=[\s(]))"(?=\S)', "\x01", part).replace('"', "\x02")
        body = "".join(_char(c) for c in part)
        body = body.replace("\x00", "`").replace("\x01", "``").replace("\x02", "''")
        out.append(f"\\texttt{{{body}}}" if i % 2 else body)
    return re.sub(r"(?<!\\)\$\$", "", "".join(out))


def label(name: str) -> str:
    """`name` as the key of a \\label / \\ref: letters, digits and `_ : . -` pass (a key is
    never typeset); anything else, which could end the argument or start a comment, is `-`."""
    return re.sub(r"[^A-Za-z0-9_:.\-]", "-", name)
