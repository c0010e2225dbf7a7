"""A tiny, bounded arithmetic evaluator for countdown answers (never `eval`).

Grammar: expr = term (('+' | '-') term)* ; term = factor (('*' | '/') factor)* ;
factor = NUMBER | '(' expr ')'. No unary minus, no powers, no names. Exact arithmetic with
`Fraction`. Bounded by construction: the text, each number's digits, the parenthesis depth and
every intermediate value are capped before any work, so `9**9**9**9`, a million-digit number or
100 kB of garbage is rejected in microseconds.
"""

from __future__ import annotations

from fractions import Fraction

MAX_CHARS = 200
MAX_DIGITS = 9
MAX_DEPTH = 32
MAX_MAGNITUDE = 10**18
_OPERATORS = "+-*/()"


class ExpressionError(ValueError):
    """The text is not a valid bounded expression (the model's fault, not a verifier error)."""


def tokenize(text: str) -> list[str]:
    """Numbers and operator characters; spaces skipped; anything else is an error."""
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"expression longer than {MAX_CHARS} characters")
    tokens: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in _OPERATORS:
            tokens.append(ch)
            i += 1
        elif "0" <= ch <= "9":
            j = i
            while j < len(text) and "0" <= text[j] <= "9":
                j += 1
            if j - i > MAX_DIGITS:
                raise ExpressionError(f"number with more than {MAX_DIGITS} digits")
            tokens.append(text[i:j])
            i = j
        else:
            raise ExpressionError(f"unexpected character {ch!r}")
    if not tokens:
        raise ExpressionError("empty expression")
    return tokens


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.numbers: list[int] = []

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ExpressionError("expression ends too early")
        self.pos += 1
        return token

    def expr(self, depth: int) -> Fraction:
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.take()
            right = self.term(depth)
            value = _bounded(value + right if op == "+" else value - right)
        return value

    def term(self, depth: int) -> Fraction:
        value = self.factor(depth)
        while self.peek() in ("*", "/"):
            op = self.take()
            right = self.factor(depth)
            if op == "/" and right == 0:
                raise ExpressionError("division by zero")
            value = _bounded(value * right if op == "*" else value / right)
        return value

    def factor(self, depth: int) -> Fraction:
        token = self.take()
        if token == "(":
            if depth >= MAX_DEPTH:
                raise ExpressionError(f"parentheses nested deeper than {MAX_DEPTH}")
            value = self.expr(depth + 1)
            if self.take() != ")":
                raise ExpressionError("missing ')'")
            return value
        if token.isdigit():
            self.numbers.append(int(token))
            return Fraction(int(token))
        raise ExpressionError(f"unexpected {token!r}")


def _bounded(value: Fraction) -> Fraction:
    if abs(value.numerator) > MAX_MAGNITUDE or value.denominator > MAX_MAGNITUDE:
        raise ExpressionError("intermediate value too large")
    return value


def evaluate(text: str) -> tuple[Fraction, tuple[int, ...]]:
    """(exact value, the numbers used in order) of `text`; ExpressionError if invalid."""
    parser = _Parser(tokenize(text))
    value = parser.expr(0)
    if parser.peek() is not None:
        raise ExpressionError(f"unexpected {parser.peek()!r} after the expression")
    return value, tuple(parser.numbers)
