"""Imports run one way: no module of ``kapiserver/`` imports from a layer above its own, and no
files import each other in a circle.

The layers are :data:`LAYERS`, ground first; ``docs/architecture.md`` ("Layers") shows the
same table and says why each package sits where it does (a test below keeps the two equal).
A package may import from its own layer and every layer below it, never from one above:
upstream's staging repositories depend on each other the same way (apimachinery below
apiserver's storage, the generic registry, authentication and flow control, the API types,
admission and apiextensions, the HTTP endpoints, the server library, then kube-apiserver's
composition root).

Every import counts, wherever it is written: at the top of a module, inside a function
(imported on first use to keep start-up light) or under ``if TYPE_CHECKING:`` (for
annotations only).  Each is the same dependency, only hidden.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional

from twisted.trial import unittest

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "kapiserver"

# The layers, ground first: the packages of kapiserver/ (and its top-level modules) in each.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("machinery", "kube_version"),
    ("storage", "cel"),
    ("registry",),
    ("request",),
    ("auth", "flowcontrol", "audit"),
    ("apis", "quota"),
    ("apiextensions", "admission"),
    ("endpoints",),
    ("aggregator", "controllers", "server"),
    ("app",),
    ("testing",),
)

# Imports from a layer above that could not be turned around yet: (importing module, imported
# module) -> why it is still there.  Each entry must still be needed (a test checks).
UPWARD_EXCEPTIONS: Mapping[tuple[str, str], str] = {}

# Circles of files that could not be broken yet: the files of the circle -> why.
CIRCLE_EXCEPTIONS: Mapping[frozenset[str], str] = {}


@dataclass(frozen=True)
class Import:
    """One module importing another: ``importer`` (dotted name) imports ``imported`` at ``line``."""

    importer: str
    imported: str
    path: Path
    line: int

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under ``root``: dotted name -> file."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: Mapping[str, Path]) -> str:
    """The module ``name`` is defined in: itself, or its nearest enclosing package."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports(root: Path) -> list[Import]:
    """Every import of a package module by a package module, in every scope of every file."""
    known = modules(root)
    found = []
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = node.module or ""
                if node.level:  # relative: from the package of the module, ``level - 1`` packages up
                    parts = package.split(".")
                    source = ".".join(parts[:len(parts) - (node.level - 1)] + ([source] if source else []))
                # ``from package import module`` imports the module; any other name lives in ``source``
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                           for alias in node.names]
            for target in targets:
                if target == PACKAGE or target.startswith(PACKAGE + "."):
                    found.append(Import(module, _resolve(target, known), path, node.lineno))
    return found


def layer_names() -> dict[str, int]:
    """Package (or top-level module) of kapiserver -> its layer's index (0: the ground)."""
    return {name: index for index, names in enumerate(LAYERS) for name in names}


def layer_of(module: str, layers: Mapping[str, int]) -> Optional[int]:
    """The layer of a dotted module name; the package's own ``__init__`` is ground."""
    parts = module.split(".")
    return 0 if len(parts) == 1 else layers.get(parts[1])


def upward(found: Iterable[Import], layers: Mapping[str, int]) -> list[Import]:
    """The imports from a layer above the importer's."""
    return [i for i in found
            if (layer_of(i.imported, layers) or 0) > (layer_of(i.importer, layers) or 0)]


def circles(found: Iterable[Import]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others (strongly
    connected components of more than one module), each sorted, in name order."""
    graph: dict[str, set[str]] = {}
    for i in found:
        if i.importer != i.imported:
            graph.setdefault(i.importer, set()).add(i.imported)
            graph.setdefault(i.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(graph):
        if start in index:
            continue
        # Tarjan's algorithm, iterative: (node, its successors not visited yet)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def documented_layers(text: str) -> list[tuple[str, ...]]:
    """The packages of each row of the table in the "Layers" section of architecture.md."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    return [tuple(re.findall(r"`([a-z_]+)`", row.split("|")[2])) for row in rows]


class LayerTests(unittest.TestCase):
    maxDiff = None

    def setUp(self) -> None:
        self.found = imports(REPO_ROOT)
        self.layers = layer_names()

    def test_every_package_has_a_layer(self) -> None:
        """A new package (or top-level module) is placed in the table before it is imported."""
        top = {name.split(".")[1] for name in modules(REPO_ROOT) if "." in name}
        self.assertEqual(sorted(top - set(self.layers)), [])
        self.assertEqual(sorted(set(self.layers) - top), [], "the table names packages that do not exist")

    def test_no_import_from_a_layer_above(self) -> None:
        names = {layer: ", ".join(packages) for layer, packages in enumerate(LAYERS)}
        problems = sorted({
            f"{i.where(REPO_ROOT)}: {i.importer} ({names[layer_of(i.importer, self.layers) or 0]}) imports "
            f"{i.imported} ({names[layer_of(i.imported, self.layers) or 0]}), a layer above"
            for i in upward(self.found, self.layers) if (i.importer, i.imported) not in UPWARD_EXCEPTIONS})
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_no_import_circle_between_files(self) -> None:
        problems = []
        for group in circles(self.found):
            if frozenset(group) in CIRCLE_EXCEPTIONS:
                continue
            members = set(group)
            edges = sorted({f"    {i.where(REPO_ROOT)}: imports {i.imported}" for i in self.found
                            if i.importer in members and i.imported in members and i.importer != i.imported})
            problems.append(f"these import each other: {', '.join(group)}\n" + "\n".join(edges))
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_exceptions_are_still_needed(self) -> None:
        """An exception whose import or circle is gone leaves the list (it only ever shrinks)."""
        arrows = {(i.importer, i.imported) for i in upward(self.found, self.layers)}
        self.assertEqual([key for key in UPWARD_EXCEPTIONS if key not in arrows], [])
        groups = {frozenset(group) for group in circles(self.found)}
        self.assertEqual([sorted(key) for key in CIRCLE_EXCEPTIONS if key not in groups], [])

    def test_architecture_doc_shows_the_same_layers(self) -> None:
        text = (REPO_ROOT / "docs" / "architecture.md").read_text()
        self.assertEqual(documented_layers(text), [tuple(names) for names in LAYERS])


class CheckerTests(unittest.TestCase):
    """The checks see every kind of import, so a hidden one cannot slip through."""

    def tree(self, files: Mapping[str, str]) -> Path:
        root = Path(self.mktemp())
        for name, text in {**{f"{PACKAGE}/__init__.py": ""}, **files}.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        return root

    def test_function_local_type_checking_and_relative_imports_count(self) -> None:
        root = self.tree({
            "kapiserver/machinery/__init__.py": "",
            "kapiserver/machinery/low.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from kapiserver.registry.store import Store\n"
                "def f():\n"
                "    from kapiserver.registry import store\n"
                "    import kapiserver.registry.store\n"),
            "kapiserver/registry/__init__.py": "",
            "kapiserver/registry/store.py": "from ..machinery import low\nfrom . import other\n",
            "kapiserver/registry/other.py": "NAME = 'other'\n",
        })
        found = imports(root)
        self.assertEqual(
            sorted((i.where(root), i.imported) for i in upward(found, {"machinery": 0, "registry": 2})),
            [("kapiserver/machinery/low.py:3", "kapiserver.registry.store"),
             ("kapiserver/machinery/low.py:5", "kapiserver.registry.store"),
             ("kapiserver/machinery/low.py:6", "kapiserver.registry.store")])
        self.assertEqual(circles(found), [["kapiserver.machinery.low", "kapiserver.registry.store"]])

    def test_a_circle_through_several_files(self) -> None:
        root = self.tree({
            "kapiserver/a.py": "from kapiserver import b\n",
            "kapiserver/b.py": "def f():\n    from kapiserver.c import g\n",
            "kapiserver/c.py": "import kapiserver.a\ndef g(): pass\n",
            "kapiserver/d.py": "from kapiserver import a\n",
        })
        self.assertEqual(circles(imports(root)), [["kapiserver.a", "kapiserver.b", "kapiserver.c"]])

    def test_the_documented_table_is_read_row_by_row(self) -> None:
        text = ("# A\n\n## Layers\n\n| Layer | Packages | Why |\n|---|---|---|\n"
                "| 0 | `machinery`, `kube_version` | ground |\n| 1 | `storage` | the `Storage` contract |\n"
                "\n## Next\n\n| 9 | `nothing` | |\n")
        self.assertEqual(documented_layers(text), [("machinery", "kube_version"), ("storage",)])
