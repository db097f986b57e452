"""SQL text as tokens: the tokenizer of the statement readers (:mod:`.ddl` and :mod:`.partitions`;
:mod:`.ddl` passes it on), and a cursor over the tokens.

Executable comments ``/*!NNNNN ... */`` keep their content; other comments and white space go.
Backticked identifiers come unquoted (kind ``qid``), strings unescaped (kind ``str``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>--[^\n]*|\#[^\n]*|/\*(?!!).*?\*/)
  | (?P<exec>/\*!\d*|\*/)
  | (?P<bq>`(?:[^`]|``)*`)
  | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<num>\d+(?:\.\d+)?)
  | (?P<word>[A-Za-z_$@][\w$@]*)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Tok:
    kind: str  # "id" (identifier or keyword), "qid" (backticked), "str", "num", "p"
    text: str

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "id" else ""


def tokenize(sql: str) -> list[Tok]:
    out: list[Tok] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        text = m.group()
        if kind in ("ws", "comment", "exec"):
            continue  # executable comments /*!NNNNN ... */ keep their content
        if kind == "bq":
            out.append(Tok("qid", text[1:-1].replace("``", "`")))
        elif kind == "str":
            body = text[1:-1]
            q = text[0]
            body = body.replace(q + q, q)
            body = re.sub(
                r"\\(.)", lambda m: {"n": "\n", "t": "\t", "0": "\0"}.get(m.group(1), m.group(1)), body
            )
            out.append(Tok("str", body))
        elif kind == "num":
            out.append(Tok("num", text))
        elif kind == "word":
            out.append(Tok("id", text))
        else:
            out.append(Tok("p", text))
    return out


class TokenCursor:
    """A position in a token list, with the small steps every statement reader takes.

    :param toks: the statement's tokens (:func:`tokenize`).
    :param default_schema: the schema of unqualified table names.
    """

    def __init__(self, toks: list[Tok], default_schema: str = "") -> None:
        self.t = toks
        self.i = 0
        self.default_schema = default_schema

    def peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def up(self, k: int = 0) -> str:
        t = self.peek(k)
        return t.upper if t else ""

    def eat(self, *words: str) -> bool:
        if self.up() in words:
            self.i += 1
            return True
        return False

    def eat_p(self, ch: str) -> bool:
        t = self.peek()
        if t is not None and t.kind == "p" and t.text == ch:
            self.i += 1
            return True
        return False

    def ident(self) -> str:
        t = self.peek()
        if t is None or t.kind not in ("id", "qid", "str"):
            raise ValueError("identifier expected")
        self.i += 1
        return t.text

    def qualified(self) -> tuple[str, str]:
        first = self.ident()
        if self.eat_p("."):
            return first, self.ident()
        return self.default_schema, first

    def skip_parens(self) -> None:
        """Skip a balanced ``( ... )`` starting at the current token."""
        if not self.eat_p("("):
            return
        depth = 1
        while self.i < len(self.t) and depth:
            t = self.t[self.i]
            if t.kind == "p" and t.text == "(":
                depth += 1
            elif t.kind == "p" and t.text == ")":
                depth -= 1
            self.i += 1
