"""Symbols of C, C++ and Python files from tree-sitter's parsers; other firmware text (assembler,
linker scripts, makefiles, Kconfig, devicetree) as plain text in line windows.

tree-sitter and its per-language grammars ship as small abi3 wheels with no Python dependencies,
parse a file with syntax errors as well as the parts allow (a half-edited firmware file still has
its functions), and give every node's exact lines: docs/architecture.md says why it was chosen.
Only the tree's shape is read (node types and fields, stable since tree-sitter 0.22), never its
query language, whose API moved between releases.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cache
from typing import TYPE_CHECKING

from pytest_fwloop.core.code_symbols import FileSymbols, Literal, Symbol

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

#: File name suffixes per tree-sitter grammar.
_SUFFIXES = {
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".ino": "cpp",
    ".py": "python",
    ".pyi": "python",
}
#: The wheel that carries each grammar.
_GRAMMARS = {"c": "tree_sitter_c", "cpp": "tree_sitter_cpp", "python": "tree_sitter_python"}
#: Firmware text without a grammar here: indexed by its words, sent in line windows.
_PLAIN_SUFFIXES = frozenset(
    {".s", ".asm", ".ld", ".lds", ".x", ".mk", ".cmake", ".dts", ".dtsi", ".overlay", ".defconfig"}
)
_PLAIN_NAMES = frozenset({"makefile", "gnumakefile", "cmakelists.txt", "kconfig", "sconstruct"})
#: Lines per window of a plain text file.
PLAIN_WINDOW = 60
#: A longer file is not parsed (generated tables, amalgamations): listed by path only.
MAX_PARSE_BYTES = 2 * 1024 * 1024
_SIGNATURE_CHARS = 200
_LITERAL_CHARS = 200
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")

_IDENTIFIERS = frozenset({"identifier", "field_identifier", "type_identifier"})
_NAME_TYPES = frozenset(
    {
        "identifier",
        "field_identifier",
        "type_identifier",
        "qualified_identifier",
        "destructor_name",
        "operator_name",
    }
)
_CONTAINERS = frozenset(
    {
        "translation_unit",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "declaration_list",
        "linkage_specification",
        "template_declaration",
        "namespace_definition",
        "field_declaration_list",
        "module",
        "block",
        "decorated_definition",
    }
)


def language_of(path: str) -> str | None:
    """The grammar for `path` ("c", "cpp", "python"), "" for plain firmware text, None for a file
    the index leaves out."""
    name = path.rsplit("/", 1)[-1].lower()
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if suffix in _PLAIN_SUFFIXES or name in _PLAIN_NAMES or name.startswith("kconfig"):
        return ""
    # Assembler that runs through the C preprocessor keeps its capital S.
    return "" if path.endswith(".S") else None


def parse_source(path: str, data: bytes) -> FileSymbols | None:
    """The symbols of one file; None when the index leaves it out (not source, binary, huge)."""
    language = language_of(path)
    if language is None or len(data) > MAX_PARSE_BYTES or b"\0" in data[:8192]:
        return None
    if not language:
        return _plain(data.decode("utf-8", "replace"))
    tree = _parser(language).parse(data)
    return _Reader(data, language).read(tree.root_node)


@cache
def _parser(language: str) -> Parser:
    import importlib

    import tree_sitter

    grammar = importlib.import_module(_GRAMMARS[language])
    return tree_sitter.Parser(tree_sitter.Language(grammar.language()))


def _plain(text: str) -> FileSymbols:
    lines = text.splitlines()
    symbols = []
    for start in range(0, len(lines), PLAIN_WINDOW):
        window = lines[start : start + PLAIN_WINDOW]
        names = frozenset(_WORD.findall("\n".join(window)))
        first = next((line.strip() for line in window if line.strip()), "")
        end = start + len(window)
        symbols.append(
            Symbol(f"lines {start + 1}-{end}", "lines", start + 1, end, first[:80], names=names)
        )
    return FileSymbols("", len(lines), tuple(symbols), names=frozenset(_WORD.findall(text)))


class _Reader:
    """One walk over the syntax tree: identifiers and calls by line, literals, then the
    definitions, each taking the names of its lines."""

    def __init__(self, data: bytes, language: str) -> None:
        self.data = data
        self.language = language
        self.names_by_line: defaultdict[int, list[str]] = defaultdict(list)
        self.calls_by_line: defaultdict[int, list[str]] = defaultdict(list)
        self.literals: list[tuple[int, str]] = []

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def read(self, root: Node) -> FileSymbols:
        self._walk(root)
        symbols: list[Symbol] = []
        self._definitions(root, symbols)
        literals = tuple(
            Literal(text, line, tuple(dict.fromkeys(self.names_by_line.get(line, ()))))
            for line, text in self.literals
        )
        inside = {line for s in symbols for line in range(s.start_line, s.end_line + 1)}
        outside = frozenset(
            name
            for line, names in self.names_by_line.items()
            if line not in inside
            for name in names
        )
        line_count = root.end_point[0] + 1
        return FileSymbols(self.language, line_count, tuple(symbols), literals, outside)

    def _walk(self, root: Node) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            kind = node.type
            line = node.start_point[0] + 1
            if kind in _IDENTIFIERS:
                self.names_by_line[line].append(self.text(node))
                continue
            if kind in ("call_expression", "call"):
                callee = node.child_by_field_name("function")
                name = _last_name(callee, self) if callee is not None else None
                if name:
                    self.calls_by_line[line].append(name)
            elif kind in ("string_literal", "string", "raw_string_literal"):
                self.literals.append((line, self._literal(node)))
                continue
            stack.extend(node.children)

    def _literal(self, node: Node) -> str:
        parts = [
            self.text(child)
            for child in node.children
            if child.type in ("string_content", "escape_sequence", "raw_string_content")
        ]
        return "".join(parts)[:_LITERAL_CHARS]

    def _definitions(self, node: Node, found: list[Symbol]) -> None:
        for child in node.children:
            kind = child.type
            if kind in _CONTAINERS:
                self._definitions(child, found)
                continue
            symbol = self._symbol(child)
            if symbol is not None:
                found.append(symbol)
            if kind in ("class_specifier", "struct_specifier", "class_definition"):
                body = child.child_by_field_name("body")
                if body is not None:
                    self._definitions(body, found)

    def _symbol(self, node: Node) -> Symbol | None:
        kind = node.type
        name: str | None = None
        what = ""
        body = node.child_by_field_name("body")
        if kind == "function_definition":
            if self.language == "python":
                name, what = self._field_text(node, "name"), "function"
            else:
                name, what = _declarator_name(node, self), "function"
        elif kind == "class_definition":
            name, what = self._field_text(node, "name"), "class"
        elif kind in ("preproc_def", "preproc_function_def"):
            name, what = self._field_text(node, "name"), "macro"
        elif kind == "type_definition":
            declarator = node.child_by_field_name("declarator")
            name, what = (self.text(declarator) if declarator else None), "type"
        elif kind in ("struct_specifier", "union_specifier", "enum_specifier", "class_specifier"):
            if body is None:
                return None
            name, what = self._field_text(node, "name"), "type"
        elif kind == "declaration":
            name, what = _declarator_name(node, self), "variable"
            if _has_function_declarator(node):
                what = "prototype"
        elif kind == "expression_statement" and self.language == "python":
            assignment = node.children[0] if node.children else None
            if assignment is not None and assignment.type == "assignment":
                target = assignment.child_by_field_name("left")
                if target is not None and target.type == "identifier":
                    name, what = self.text(target), "variable"
        if not name:
            return None
        start, end = node.start_point[0] + 1, node.end_point[0] + 1
        if node.end_point[1] == 0 and end > start:  # a node that ends with its newline
            end -= 1
        head_end = body.start_byte if body is not None else node.end_byte
        signature = " ".join(
            self.data[node.start_byte : head_end].decode("utf-8", "replace").split()
        )
        lines = range(start, end + 1)
        names = {n for line in lines for n in self.names_by_line.get(line, ())}
        calls = {n for line in lines for n in self.calls_by_line.get(line, ())}
        names.discard(name)
        return Symbol(
            name,
            what,
            start,
            end,
            signature[:_SIGNATURE_CHARS],
            frozenset(calls - {name}),
            frozenset(names),
        )

    def _field_text(self, node: Node, field: str) -> str | None:
        child = node.child_by_field_name(field)
        return self.text(child) if child is not None else None


def _declarator_name(node: Node, reader: _Reader) -> str | None:
    """The declared name under C's nesting of declarators (`*f(int)`, `a[3] = {…}`)."""
    current: Node | None = node.child_by_field_name("declarator")
    while current is not None:
        if current.type in _NAME_TYPES:
            return _last_name(current, reader)
        current = current.child_by_field_name("declarator")
    return None


def _has_function_declarator(node: Node) -> bool:
    current: Node | None = node.child_by_field_name("declarator")
    while current is not None:
        if current.type == "function_declarator":
            return True
        current = current.child_by_field_name("declarator")
    return False


def _last_name(node: Node, reader: _Reader) -> str | None:
    """`b` of `a.b`, `a->b`, `ns::b`, `self.b`, or the identifier itself."""
    if node.type in ("identifier", "field_identifier", "type_identifier", "destructor_name"):
        return reader.text(node)
    for field in ("field", "attribute", "name"):
        child = node.child_by_field_name(field)
        if child is not None:
            return _last_name(child, reader)
    return None
