"""The package's plan, kept: the layers of ARCHITECTURE.md (import-linter's contracts in
pyproject.toml), no import cycle between modules (imports inside functions counted), a short
ground floor, and pure maths that know nothing of distribution."""

import ast
import subprocess
import sys
from pathlib import Path

from repo import REPO

PACKAGE = REPO / "drmas"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported_modules(name: str) -> set[str]:
    """The drmas modules `name` imports anywhere in its file (top level and inside functions),
    each resolved to the module that defines it (`from drmas.x import f` -> drmas.x)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + [base]).strip(".")
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("drmas"):
                found.add(target)
    return found


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of `graph` closes (empty when there is none)."""
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_no_import_cycle_between_modules():
    cycles = find_cycles({name: imported_modules(name) for name in MODULES})
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import(tmp_path):
    """The check above can fail: two throw-away modules, the second importing the first
    inside a function, make a cycle."""
    a, b = tmp_path / "drmas" / "a.py", tmp_path / "drmas" / "b.py"
    a.parent.mkdir()
    a.write_text("from drmas.b import g\n")
    b.write_text("def g():\n    from drmas.a import f\n")
    saved = dict(MODULES)
    try:
        MODULES.clear()
        MODULES.update({"drmas.a": a, "drmas.b": b})
        graph = {name: imported_modules(name) for name in MODULES}
    finally:
        MODULES.clear()
        MODULES.update(saved)
    assert graph == {"drmas.a": {"drmas.b"}, "drmas.b": {"drmas.a"}}
    assert find_cycles(graph) == [["drmas.a", "drmas.b", "drmas.a"]]


def test_ground_floor_holds_at_most_six_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 6, top


def test_pure_modules_import_no_torch_distributed():
    """import-linter names external packages only whole, so torch.distributed is checked here
    (imports inside functions included)."""
    pure = [n for n in MODULES if n.startswith(("drmas.algos", "drmas.rewards"))
            or n == "drmas.evaluation.metrics"]
    assert {"drmas.algos.advantages", "drmas.rewards.math", "drmas.evaluation.metrics"} <= set(pure)
    for name in pure:
        for node in ast.walk(ast.parse(MODULES[name].read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            assert not any(n.startswith("torch.distributed") for n in names), (name, names)


def test_layers_match_architecture_md():
    """ARCHITECTURE.md's layer diagram is the import-linter contract, word for word."""
    import tomllib

    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    text = (REPO / "ARCHITECTURE.md").read_text()
    block = text[text.index("```layers") + len("```layers"):]
    block = block[:block.index("```")]
    drawn = [line.split("  ")[0].strip() for line in block.strip().splitlines()]
    assert drawn == contract["layers"]


def test_package_map_names_every_module():
    """ARCHITECTURE.md's package map names every module and subfolder of each folder of the
    package (a `mas/` folder per MAS counts as named by the map's list of them)."""
    import re

    text = (REPO / "ARCHITECTURE.md").read_text()
    rows = {m.group(1): m.group(2)
            for m in re.finditer(r"^\| `(\w+)/` \| (.*) \|$", text, re.M)}
    missing = []
    for folder in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        row = rows.get(folder.name)
        if row is None:
            missing.append(f"{folder.name}/ (no row)")
            continue
        for path in sorted(folder.iterdir()):
            if path.name in ("__init__.py", "__main__.py", "__pycache__"):
                continue
            name = f"`{path.name}/`" if path.is_dir() else f"`{path.name}`"
            if path.suffix in (".py", "") and name not in row:
                missing.append(f"{folder.name}/{path.name}")
    assert not missing, "not in ARCHITECTURE.md's package map: " + ", ".join(missing)


def test_import_linter_contracts_are_kept():
    """`lint-imports` (the test extra's import-linter) keeps both contracts of pyproject.toml."""
    exe = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(exe) if exe.exists() else "lint-imports", "--no-cache"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 kept, 0 broken" in proc.stdout
