"""No test in ``tests/`` asserts an upper bound on elapsed wall-clock time.

Such an assertion races the machine's load: on a busy two-core machine a
request that is merely slow reads as a bug, and the suite fails for nothing.
Deadlines are fake-clock steps (``twisted.internet.task.Clock``,
``MemoryReactorClock``); "the server was not stalled" is checked by the server
still answering, or answering in the right order; speed claims live in
``bench/``.  A wait that must happen has a generous timeout that only guards
against a hang, outside any assertion.

The scan reads every module under ``tests/`` with :mod:`ast` and follows which
values are points in wall-clock time (``time.monotonic()``, ``time.time()``,
``perf_counter()``, ``datetime.now()``, the global reactor's ``seconds()``) and
which are durations (a point minus another time), through names, tuples,
containers (``append``, comprehensions, ``zip``), and what functions and
methods return, also across modules of ``tests/``, ``bench/`` (which the e2e
tests import) and ``kapiserver.testing``.  It reports as ``file:line``:

* an assertion that keeps a duration under a ceiling: ``assertLess(d, n)``,
  ``assertLessEqual``, their mirror images ``assertGreater(n, d)`` and
  ``assertGreaterEqual``, ``assertTrue(d < n)``, ``assertFalse(d > n)``,
  ``assert d < n``, ``assertAlmostEqual(d, n, delta=...)``;
* an assertion that "now" comes before a point in time (a deadline):
  ``assertLess(time.monotonic(), deadline)``.

Orderings of recorded points (``assertLess(first_at, second_at)``), lower
bounds (``assertGreater(d, n)``) and polling loops are not assertions of a
ceiling and pass; so does any arithmetic on a fake clock's ``seconds()``.
"""
from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

from twisted.trial import unittest

TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parent
BENCH = REPO / "bench"  # the e2e tests put it on sys.path and import its scripts by bare name

# Calls that read the wall clock (or the process's CPU clock), by their dotted name.
CLOCK_CALLS = frozenset({
    "time.monotonic", "time.monotonic_ns", "time.time", "time.time_ns", "time.perf_counter",
    "time.perf_counter_ns", "time.process_time", "monotonic", "perf_counter", "process_time",
    "datetime.now", "datetime.utcnow", "datetime.datetime.now", "datetime.datetime.utcnow",
})

UPPER_BOUND_ASSERTIONS = {  # method -> (index of the argument that must stay small, of its ceiling)
    "assertLess": (0, 1), "assertLessEqual": (0, 1), "assertGreater": (1, 0), "assertGreaterEqual": (1, 0),
}

POINT, DURATION = "point", "duration"
STORE_ONE = ("append", "appendleft", "add", "put", "put_nowait")  # container.append(item)
STORE_MANY = ("extend", "update")  # container.extend(items)


@dataclass(frozen=True)
class Tup:
    """A tuple whose items are known one by one."""
    items: tuple["Shape", ...]


@dataclass(frozen=True)
class Seq:
    """A list, set, dict or iterator whose every item (value) has one shape."""
    item: "Shape"


@dataclass(frozen=True)
class Instance:
    """An object of a class defined in a scanned module."""
    module: str
    cls: str


Shape = Union[None, str, Tup, Seq, Instance]
DEPTH = 4  # deeper shapes are cut to DURATION or nothing: keeps the fixpoint finite


def has_duration(shape: Shape) -> bool:
    if isinstance(shape, Tup):
        return any(has_duration(item) for item in shape.items)
    if isinstance(shape, Seq):
        return has_duration(shape.item)
    return shape == DURATION


def cut(shape: Shape, depth: int = DEPTH) -> Shape:
    if depth == 0 and isinstance(shape, (Tup, Seq)):
        return DURATION if has_duration(shape) else None
    if isinstance(shape, Tup):
        return Tup(tuple(cut(item, depth - 1) for item in shape.items))
    if isinstance(shape, Seq):
        return Seq(cut(shape.item, depth - 1))
    return shape


def join(a: Shape, b: Shape) -> Shape:
    """What a name holds when it may hold ``a`` or ``b``."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    if isinstance(a, Tup) and isinstance(b, Tup) and len(a.items) == len(b.items):
        return Tup(tuple(join(x, y) for x, y in zip(a.items, b.items)))
    if isinstance(a, Seq) and isinstance(b, Seq):
        return Seq(join(a.item, b.item))
    if has_duration(a) or has_duration(b):
        return DURATION
    return POINT if POINT in (a, b) else a


def item_of(shape: Shape) -> Shape:
    """The shape of what iterating over a value of ``shape`` yields."""
    if isinstance(shape, Seq):
        return shape.item
    if isinstance(shape, Tup):
        joined: Shape = None
        for item in shape.items:
            joined = join(joined, item)
        return joined
    return DURATION if shape == DURATION else None


def dotted(node: ast.AST) -> Optional[str]:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def is_constant(node: ast.AST) -> bool:
    """A number, an UPPER_CASE name or arithmetic of them: an offset, never a time."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float))
    if isinstance(node, ast.Name):
        return node.id.isupper()
    if isinstance(node, ast.Attribute):
        return node.attr.isupper()
    if isinstance(node, ast.UnaryOp):
        return is_constant(node.operand)
    if isinstance(node, ast.BinOp):
        return is_constant(node.left) and is_constant(node.right)
    return False


def own_returns(function: ast.AST) -> Iterator[ast.Return]:
    """The return statements of ``function`` itself, not of functions nested in it."""
    for child in ast.iter_child_nodes(function):
        if isinstance(child, ast.Return):
            yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from own_returns(child)


class Project:
    """The scanned modules, loaded on first use, and what their names hold."""

    def __init__(self) -> None:
        self.modules: dict[str, Optional[ModuleClock]] = {}
        self._paths: dict[str, Optional[pathlib.Path]] = {}

    def path_of(self, name: str) -> Optional[pathlib.Path]:
        """The file of module ``name`` if it is one the scan reads."""
        if name not in self._paths:
            self._paths[name] = self._find(name)
        return self._paths[name]

    def _find(self, name: str) -> Optional[pathlib.Path]:
        relative = pathlib.Path(*name.split("."))
        candidates = [REPO / relative.with_suffix(".py"), REPO / relative / "__init__.py"]
        if "." not in name:
            candidates.append(BENCH / relative.with_suffix(".py"))
        for path in candidates:
            inside = path.is_relative_to(TESTS) or path.is_relative_to(BENCH) \
                or path.is_relative_to(REPO / "kapiserver" / "testing")
            if inside and path.is_file():
                return path
        return None

    def module(self, name: str) -> Optional[ModuleClock]:
        if name not in self.modules:
            path = self.path_of(name)
            self.modules[name] = None if path is None else ModuleClock(self, name, path)
        return self.modules[name]

    def is_module(self, name: str) -> bool:
        return self.path_of(name) is not None

    def settle(self) -> None:
        """Learn until nothing new is learned (loading imported modules on the way)."""
        while True:
            changed = False
            for clock in list(self.modules.values()):
                if clock is not None and clock.learn():
                    changed = True
            if not changed:
                return


class ModuleClock:
    """One module: its imports, what its names hold and what its functions return."""

    def __init__(self, project: Project, name: str, path: pathlib.Path, source: Optional[str] = None) -> None:
        self.project, self.name, self.path = project, name, path
        self.tree = ast.parse(path.read_text() if source is None else source, str(path))
        self.kinds: dict[str, Shape] = {}
        self._known: dict[int, Shape] = {}  # kind() of each node during one pass
        self.functions: dict[str, Shape] = {}  # module-level functions and Class.method
        self.methods: dict[str, Shape] = {}  # method name -> what any class's method of that name returns
        self.classes = {node.name for node in self.tree.body if isinstance(node, ast.ClassDef)}
        self._index()
        self.wall_reactor = False  # the module imports the global reactor: its seconds() is the wall clock
        self.imported_modules: dict[str, str] = {}  # local name -> module
        self.imported_names: dict[str, tuple[str, str]] = {}  # local name -> (module, name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                source_module = node.module or ""
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    source_module = f"{base}.{source_module}" if source_module else base
                for alias in node.names:
                    local = alias.asname or alias.name
                    if source_module == "twisted.internet" and alias.name == "reactor":
                        self.wall_reactor = True
                    elif project.is_module(f"{source_module}.{alias.name}"):
                        self.imported_modules[local] = f"{source_module}.{alias.name}"
                    else:
                        self.imported_names[local] = (source_module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname or "." not in alias.name:
                        self.imported_modules[alias.asname or alias.name] = alias.name

    # -- what an expression holds -------------------------------------------------------------

    def is_clock_call(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        name = dotted(node.func)
        return name in CLOCK_CALLS or (self.wall_reactor and name == "reactor.seconds")

    def kind(self, node: ast.AST) -> Shape:
        key = id(node)
        if key not in self._known:
            self._known[key] = self._kind(node)
        return self._known[key]

    def _kind(self, node: ast.AST) -> Shape:
        if self.is_clock_call(node):
            return POINT
        if isinstance(node, (ast.Name, ast.Attribute)):
            return self.kinds.get(ast.unparse(node))
        if isinstance(node, ast.Subscript):
            exact = self.kinds.get(ast.unparse(node))
            if exact is not None:
                return exact
            container = self.kind(node.value)
            if isinstance(node.slice, ast.Slice):
                return container
            if isinstance(container, Tup) and isinstance(node.slice, ast.Constant) \
                    and isinstance(node.slice.value, int) and -len(container.items) <= node.slice.value \
                    < len(container.items):
                return container.items[node.slice.value]
            return item_of(container)
        if isinstance(node, ast.BinOp):
            left, right = self.scalar(node.left), self.scalar(node.right)
            if isinstance(node.op, ast.Sub) and left == POINT:
                return POINT if is_constant(node.right) else DURATION
            if isinstance(node.op, ast.Sub) and right == POINT:
                return DURATION  # what is left until a point
            if POINT in (left, right) and DURATION not in (left, right) or isinstance(node.op, ast.Add) \
                    and POINT in (left, right):
                return POINT
            return DURATION if DURATION in (left, right) else None
        if isinstance(node, ast.UnaryOp):
            return self.kind(node.operand)
        if isinstance(node, ast.Await):
            return self.kind(node.value)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = tuple(self.kind(element) for element in node.elts)
            return Tup(items) if any(item is not None for item in items) else None
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            item = self.kind(node.elt)
            return None if item is None else Seq(item)
        if isinstance(node, ast.DictComp):
            item = self.kind(node.value)
            return None if item is None else Seq(item)
        if isinstance(node, (ast.Dict, ast.Set)):
            values = node.values if isinstance(node, ast.Dict) else node.elts
            joined: Shape = None
            for value in values:
                joined = join(joined, self.kind(value))
            return None if joined is None else Seq(joined)
        if isinstance(node, ast.IfExp):
            return join(self.kind(node.body), self.kind(node.orelse))
        if isinstance(node, ast.BoolOp):
            joined = None
            for value in node.values:
                joined = join(joined, self.kind(value))
            return joined
        if isinstance(node, ast.NamedExpr):
            return self.kind(node.value)
        return None  # constants, comparisons, strings, lambdas (read where they are called)

    def scalar(self, node: ast.AST) -> Shape:
        shape = self.kind(node)
        if isinstance(shape, (Tup, Seq)):
            return DURATION if has_duration(shape) else None
        return shape if shape in (POINT, DURATION) else None

    def call(self, node: ast.Call) -> Shape:
        func, args = node.func, node.args
        name = dotted(func)
        if name in ("zip", "itertools.zip_longest"):
            return Seq(Tup(tuple(item_of(self.kind(arg)) for arg in args)))
        if name == "enumerate" and args:
            return Seq(Tup((None, item_of(self.kind(args[0])))))
        if name in ("sorted", "list", "tuple", "set", "reversed", "iter", "frozenset") and args:
            item = item_of(self.kind(args[0]))
            return None if item is None else Seq(item)
        if name in ("max", "min", "sum", "next", "statistics.median", "statistics.mean") and args:
            if len(args) == 1:
                return item_of(self.kind(args[0]))
            joined: Shape = None
            for arg in args:
                joined = join(joined, self.kind(arg))
            return joined
        if name in ("abs", "round", "int", "float", "math.ceil", "math.floor") and args:
            return self.scalar(args[0])
        found = self.resolve(func)
        if found is not None:
            return found
        # A method of a value that holds a duration (``d.total_seconds()``), or a call given one.
        if isinstance(func, ast.Attribute) and has_duration(self.kind(func.value)):
            return DURATION
        if any(has_duration(self.kind(arg)) for arg in args):
            return DURATION
        return None

    def resolve(self, func: ast.AST) -> Shape:
        """What a call of ``func`` returns, when it is a function, method or class of a scanned module."""
        if isinstance(func, ast.Name):
            if func.id in self.imported_names:
                module_name, name = self.imported_names[func.id]
                module = self.project.module(module_name)
                return None if module is None else module.member(name)
            return self.member(func.id)
        if isinstance(func, ast.Attribute):
            base = dotted(func.value)
            if base in ("self", "cls"):
                return self.methods.get(func.attr)
            if base in self.imported_modules:
                module = self.project.module(self.imported_modules[base])
                return None if module is None else module.member(func.attr)
            owner = self.kind(func.value)
            if isinstance(owner, Instance):
                module = self.project.module(owner.module)
                return None if module is None else module.functions.get(f"{owner.cls}.{func.attr}")
        return None

    def member(self, name: str) -> Shape:
        """What calling this module's ``name`` returns: a function's result or a class's instance."""
        if name in self.classes:
            return Instance(self.name, name)
        return self.functions.get(name)

    # -- learning ---------------------------------------------------------------------------------

    def learn(self) -> bool:
        """One pass over the module; True if a name or function was found to hold more than known."""
        changed = False
        self._known.clear()  # what names hold may have changed since the last pass

        def mark(table: dict[str, Shape], key: str, shape: Shape) -> None:
            nonlocal changed
            new = cut(join(table.get(key), shape))
            if new is not None and new != table.get(key):
                table[key] = new
                changed = True

        def bind(target: ast.AST, shape: Shape) -> None:
            if shape is None:
                return
            if isinstance(target, (ast.Tuple, ast.List)):
                starred = any(isinstance(element, ast.Starred) for element in target.elts)
                for i, element in enumerate(target.elts):
                    if isinstance(shape, Tup) and len(shape.items) == len(target.elts) and not starred:
                        bind(element, shape.items[i])
                    else:
                        bind(element, item_of(shape) if not isinstance(shape, Instance) else None)
            elif isinstance(target, ast.Starred):
                item = item_of(shape)
                bind(target.value, None if item is None else Seq(item))
            elif isinstance(target, ast.Subscript):
                mark(self.kinds, ast.unparse(target), shape)
                keyed = isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)
                container = dotted(target.value)
                if container is not None and not keyed:  # d[k] = v for any k: the values of d
                    mark(self.kinds, container, Seq(shape))
            else:
                key = dotted(target)
                if key is not None:
                    mark(self.kinds, key, shape)

        for node in self.bindings:
            if isinstance(node, ast.Assign):
                shape = self.kind(node.value)
                for target in node.targets:
                    bind(target, shape)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                bind(node.target, self.kind(node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                bind(node.target, item_of(self.kind(node.iter)))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in STORE_ONE:
                    item = self.kind(node.args[0])
                else:
                    item = item_of(self.kind(node.args[0]))
                bind(node.func.value, None if item is None else Seq(item))
        for tables, returns in self.function_returns:
            returned: Shape = None
            for value in returns:
                returned = join(returned, self.kind(value))
            for table, key in tables:
                mark(table, key, returned)
        return changed

    def _index(self) -> None:
        """What each pass reads: the statements that bind names, and what each function returns."""
        self.bindings: list[ast.AST] = []
        self.function_returns: list[tuple[list[tuple[dict[str, Shape], str]], list[ast.expr]]] = []
        methods: dict[int, str] = {}  # id(method) -> its class
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) or isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) or \
                    isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                self.bindings.append(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                    and node.func.attr in STORE_ONE + STORE_MANY and dotted(node.func.value) is not None:
                self.bindings.append(node)
            elif isinstance(node, ast.ClassDef):
                for method in node.body:
                    if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        methods[id(method)] = node.name
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returns = [r.value for r in own_returns(node) if r.value is not None]
                if id(node) in methods:  # self.name(), or obj.name() on an instance of the class
                    tables = [(self.functions, f"{methods[id(node)]}.{node.name}"), (self.methods, node.name)]
                else:  # module-level, or nested in a function: called by its bare name
                    tables = [(self.functions, node.name)]
                self.function_returns.append((tables, returns))

    # -- the assertions ---------------------------------------------------------------------------

    def violations(self) -> Iterator[tuple[int, str]]:
        self._known.clear()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assert):
                if self.bounds(node.test, truth=True):
                    yield node.lineno, ast.unparse(node).splitlines()[0]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                method, args = node.func.attr, node.args
                bounded = False
                if method in UPPER_BOUND_ASSERTIONS and len(args) >= 2:
                    small, ceiling = UPPER_BOUND_ASSERTIONS[method]
                    bounded = self.ceiling(args[small], args[ceiling])
                elif method in ("assertTrue", "assertFalse") and args:
                    bounded = self.bounds(args[0], truth=method == "assertTrue")
                elif method == "assertAlmostEqual" and len(args) >= 2:
                    bounded = any(k.arg == "delta" for k in node.keywords) \
                        and (has_duration(self.kind(args[0])) or has_duration(self.kind(args[1])))
                if bounded:
                    yield node.lineno, ast.unparse(node).splitlines()[0]

    def ceiling(self, small: ast.AST, ceiling: ast.AST) -> bool:
        """Whether asserting ``small < ceiling`` bounds elapsed time from above."""
        if has_duration(self.kind(small)):
            return True
        return self.is_clock_call(small) and self.kind(ceiling) == POINT  # now is before a deadline

    def bounds(self, test: ast.AST, truth: bool) -> bool:
        """Whether asserting ``test`` (``truth``) or its negation bounds elapsed time from above."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.bounds(test.operand, not truth)
        if isinstance(test, ast.BoolOp):
            return any(self.bounds(value, truth) for value in test.values)
        if not isinstance(test, ast.Compare):
            return False
        operands = [test.left, *test.comparators]
        for op, (left, right) in zip(test.ops, zip(operands, operands[1:])):
            if isinstance(op, (ast.Lt, ast.LtE)):
                if self.ceiling(left, right) if truth else self.ceiling(right, left):
                    return True
            elif isinstance(op, (ast.Gt, ast.GtE)):
                if self.ceiling(right, left) if truth else self.ceiling(left, right):
                    return True
        return False


def wall_clock_bounds() -> list[str]:
    """``path:line: source`` of every assertion of an upper bound on elapsed time in ``tests/``."""
    project = Project()
    names = [".".join(path.relative_to(REPO).with_suffix("").parts) for path in sorted(TESTS.rglob("*.py"))]
    for name in names:
        project.module(name)
    project.settle()
    found = []
    for name in names:
        clock = project.module(name)
        assert clock is not None
        found += [f"{clock.path.relative_to(REPO)}:{line}: {source}" for line, source in sorted(clock.violations())]
    return found


def scan(source: str) -> list[str]:
    """The violations in one module's ``source`` (as if it were a test module)."""
    project = Project()
    clock = project.modules["tests.sample"] = ModuleClock(project, "tests.sample", TESTS / "sample.py", source)
    project.settle()
    return [text for _, text in clock.violations()]


SAMPLES = TESTS / "wall_clock_samples"


def samples_from(name: str) -> dict[str, str]:
    """Named samples of test code, kept as data (``## name`` then its lines): the forms the scan
    must report, and those it must leave alone."""
    samples: dict[str, str] = {}
    current = ""
    for line in (SAMPLES / name).read_text().splitlines(keepends=True):
        if line.startswith("## "):
            current = line[3:].strip()
            samples[current] = ""
        elif current:
            samples[current] += line
    return samples


class NoWallClockBoundsTests(unittest.TestCase):
    def test_no_test_asserts_an_upper_bound_on_elapsed_time(self) -> None:
        found = wall_clock_bounds()
        self.assertEqual(found, [], "assertions of an upper bound on wall-clock time (use a fake clock, an "
                                    "ordering, or bench/):\n" + "\n".join(found))

    def test_the_scan_reports_the_forms_it_forbids(self) -> None:
        # Guards the guard: each is reported once, else an empty scan of tests/ proves nothing.
        samples = samples_from("forbidden.txt")
        self.assertEqual(len(samples), 17)  # every form, none lost from the file
        for name, source in samples.items():
            self.assertEqual(len(scan(source)), 1, name)

    def test_the_scan_leaves_waits_orderings_and_fake_clocks_alone(self) -> None:
        samples = samples_from("allowed.txt")
        self.assertEqual(len(samples), 6)
        for name, source in samples.items():
            self.assertEqual(scan(source), [], name)
