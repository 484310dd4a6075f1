"""Every module path README.md and docs/*.md name is importable as written.

What counts as a module path (the rule the docs are written to):

* outside fenced blocks: an inline code span (one pair of backticks) whose
  whole text is a dotted name, ``a.b`` or longer, of Python identifiers, whose
  first part is ``tool_failure_guard`` or one of its rooms (``guard``,
  ``session``, ``rollout``, ``statecharts``, ``evaluation``, ``core``,
  ``commands`` ...: its subpackages, but ``telemetry``);
* in a fenced ``python`` block: every ``import M`` / ``from M import a, b`` whose
  ``M`` starts the same way (the names imported are checked too).

Not module paths, so never checked: a file name (its last part a file
extension: ``guard.py``, ``session.md``) and a telemetry signal name (the
strings of ``tool_failure_guard.telemetry.names``, e.g.
``tool_failure_guard.prompt``).

A path starting with a room (``session.transport...``) is wrong as written:
the room is only ``tool_failure_guard.<name>`` (a top-level ``session`` would be
a user's own ``session.py``); the message names the right spelling when that
one resolves.  A ``tool_failure_guard`` path is resolved the way a user who
installed the package would: the longest prefix that imports is the module,
every further part is an attribute (``getattr``).  Resolution runs in a
subprocess outside the checkout, so importing the adapters' frameworks never
leaks into this test process.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tool_failure_guard"
#: The package's rooms (its subpackages), a doc's likely slip when written without the package.
#: Not ``telemetry``: ``telemetry.resourceAttributes`` and the like are settings and signal keys.
ROOMS = frozenset(
    p.parent.name for p in (ROOT / PACKAGE).glob("*/__init__.py") if p.parent.name != "telemetry"
)
FIRST_PARTS = ROOMS | {PACKAGE}
FILE_EXTENSIONS = frozenset({"py", "md", "json", "jsonl", "toml", "txt", "yaml", "yml", "sh"})
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\b")
TOP_LEVEL_AWAIT = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT

RESOLVE = r"""
import importlib, json, sys

def resolve(path):
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            value = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and not name.startswith(exc.name):
                return f"importing {name} fails: {exc!r}"  # a missing dependency, not the name
            continue
        except Exception as exc:
            return f"importing {name} fails: {exc!r}"
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return f"{name} has no attribute {attribute!r} (module path {name!r} imports)"
            value = getattr(value, attribute)
            name = f"{name}.{attribute}"
        return None
    return f"no module {parts[0]!r}"

print(json.dumps({path: resolve(path) for path in json.load(sys.stdin)}))
"""


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def signal_names() -> frozenset[str]:
    """The telemetry names (strings of ``tool_failure_guard/telemetry/names.py``): not modules."""
    tree = ast.parse(
        (ROOT / "tool_failure_guard" / "telemetry" / "names.py").read_text(encoding="utf-8")
    )
    return frozenset(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def counts(path: str, signals: frozenset[str]) -> bool:
    parts = path.split(".")
    return parts[0] in FIRST_PARTS and parts[-1] not in FILE_EXTENSIONS and path not in signals


def block_imports(text: str) -> list[str]:
    """``M`` and ``M.name`` of each import in a python block (a line regex if it does not parse)."""
    try:
        tree = compile(text, "<doc block>", "exec", flags=TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError:
        return [m.group(1) for line in text.splitlines() if (m := FROM_IMPORT.match(line))]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found.extend(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
    return found


def named_paths() -> list[tuple[str, int, str]]:
    """(file relative to the root, line, path) of every module path the docs name."""
    signals = signal_names()
    found: list[tuple[str, int, str]] = []
    for document in documents():
        name = document.relative_to(ROOT).as_posix()
        lines = document.read_text(encoding="utf-8").splitlines()
        fence: tuple[int, str] | None = None  # (first line, language) of the open block
        body: list[str] = []
        for number, line in enumerate(lines, 1):
            if line.lstrip().startswith("```"):
                if fence is None:
                    fence, body = (number, line.lstrip()[3:].strip()), []
                    continue
                start, language = fence
                fence = None
                if language == "python":
                    for path in block_imports("\n".join(body) + "\n"):
                        if counts(path, signals):
                            offset = next(
                                (i for i, text in enumerate(body) if path.split(".")[-1] in text),
                                0,
                            )
                            found.append((name, start + 1 + offset, path))
                continue
            if fence is not None:
                body.append(line)
                continue
            for span in SPAN.finditer(line):
                path = span.group(1)
                if DOTTED.fullmatch(path) and counts(path, signals):
                    found.append((name, number, path))
    return found


def resolve(paths: set[str]) -> dict[str, str | None]:
    done = subprocess.run(
        [sys.executable, "-c", RESOLVE],
        input=json.dumps(sorted(paths)),
        capture_output=True,
        text=True,
        cwd="/",  # not the checkout: its top-level folders must not import as packages
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, str | None] = json.loads(done.stdout)
    return result


def test_the_rule_finds_module_paths_and_skips_file_and_signal_names() -> None:
    signals = signal_names()
    assert counts("tool_failure_guard.core.error_type_of", signals)
    assert counts("session.transport.agent.GuardedAgent", signals)
    assert counts("commands.cli.main", signals)
    assert not counts("telemetry.resourceAttributes", signals)  # a settings key
    assert not counts("session.py", signals)
    assert not counts("tool_failure_guard.prompt", signals)  # an event name
    assert not counts("agent.clone", signals)
    assert block_imports("from tool_failure_guard.core import outcomes\nawait x\n") == [
        "tool_failure_guard.core",
        "tool_failure_guard.core.outcomes",
    ]
    assert resolve({"tool_failure_guard.core.nope", "tool_failure_guard.nope.x"}) == {
        "tool_failure_guard.core.nope": (
            "tool_failure_guard.core has no attribute 'nope' "
            "(module path 'tool_failure_guard.core' imports)"
        ),
        "tool_failure_guard.nope.x": "tool_failure_guard has no attribute 'nope' "
        "(module path 'tool_failure_guard' imports)",
    }


def test_every_module_path_in_the_docs_is_importable_as_written() -> None:
    found = named_paths()
    assert len(found) > 20  # the rule still finds the docs' paths
    spelled = {
        path: path if path.startswith(f"{PACKAGE}.") else f"{PACKAGE}.{path}"
        for _, _, path in found
    }
    resolved = resolve(set(spelled.values()))
    wrong = []
    for document, line, path in found:
        full, problem = spelled[path], resolved[spelled[path]]
        if full != path:
            fix = f"write `{full}`" if problem is None else f"and `{full}` fails too: {problem}"
            problem = (
                f"installed, `{path.split('.')[0]}` is `{PACKAGE}.{path.split('.')[0]}`; {fix}"
            )
        if problem is not None:
            wrong.append(f"{document}:{line}: `{path}`: {problem}")
    assert wrong == [], "module paths in the docs that do not import as written:\n" + "\n".join(
        wrong
    )
