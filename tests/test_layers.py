"""The suite's modules import one way: each layer (lab, harness, judging, reporting, then the
commands at the top) imports only the layers below it, and no module imports one that imports it
back."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"


def imports_of(path: Path) -> set:
    """The conformance modules `path` imports, those for annotations only (TYPE_CHECKING) included:
    a layer that needs a type of the one above it is a circle too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("conformance"):
            # `from conformance.harness import sandbox` imports a module of a package; `from
            # conformance.harness.sandbox import Lab` a name of a module: module_graph keeps
            # whichever is a module of the package.
            if node.module != "conformance":
                found.add(node.module)
            found.update(node.module + "." + alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("conformance."))
    return found


def module_graph(package: Path = PACKAGE) -> dict:
    """Each module of the package, its subpackages' included (classroom.command ...), and the
    package's modules it imports."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if "checks" not in parts:  # the checks are pytest's modules, not the suite's layers
            names[".".join(["conformance"] + parts)] = path
    return {name: {module for module in imports_of(path) if module in names} for name, path in names.items()}


def circles_in(graph: dict) -> list:
    circles = []

    def visit(module, path):
        for imported in sorted(graph.get(module, ())):
            if imported in path:
                circles.append(path[path.index(imported) :] + [imported])
            else:
                visit(imported, path + [imported])

    for module in graph:
        visit(module, [module])
    return sorted({" -> ".join(circle) for circle in circles})


def test_no_import_circle():
    assert not circles_in(module_graph()), "import circles: %s" % circles_in(module_graph())


def test_a_circle_through_an_annotation_is_found(tmp_path):
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "result.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from conformance.harness.processes import P\n"
    )
    (tmp_path / "harness" / "processes.py").write_text("from conformance.harness import result\n")
    assert circles_in(module_graph(tmp_path)) == [
        "conformance.harness.processes -> conformance.harness.result -> conformance.harness.processes",
        "conformance.harness.result -> conformance.harness.processes -> conformance.harness.result",
    ]


# Bottom to top. Above them: the commands and the tools built on them (classroom, selftest).
LAYERS = ("lab", "harness", "judging", "reporting")
# What may sit at the package's top: the commands, which use every layer.
COMMANDS = {"__main__", "cli", "plugin", "replay", "watch", "export", "usage"}


def layer_of(module: str) -> int:
    """A module's height: its layer's place, the top for anything else (commands, tools)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def upward_imports(graph: dict) -> list:
    return sorted(
        "%s imports %s" % (module, imported)
        for module, imports in graph.items()
        for imported in imports
        if layer_of(imported) > layer_of(module)
    )


def test_each_layer_imports_only_the_layers_below_it():
    assert not upward_imports(module_graph()), upward_imports(module_graph())


def test_an_upward_import_is_found(tmp_path):
    (tmp_path / "lab").mkdir()
    (tmp_path / "harness").mkdir()
    (tmp_path / "lab" / "config.py").write_text("from conformance.harness import sandbox\n")
    (tmp_path / "harness" / "sandbox.py").write_text("from conformance.lab import config\n")
    assert upward_imports(module_graph(tmp_path)) == ["conformance.lab.config imports conformance.harness.sandbox"]


def test_nothing_but_the_commands_is_left_at_the_top():
    top = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert top == COMMANDS, "a module at the top that belongs in a layer: %s" % sorted(top - COMMANDS)
    for layer in LAYERS:
        assert (PACKAGE / layer / "__init__.py").read_text().startswith('"""'), layer  # says what it holds


def test_the_layers_read_processes_result_expect():
    graph = module_graph()
    assert "conformance.harness.result" in graph["conformance.harness.processes"]
    assert "conformance.harness.processes" not in graph["conformance.harness.result"]
    assert "conformance.harness.result" in graph["conformance.judging.expect"]
    assert "conformance.judging.expect" not in graph["conformance.harness.result"]
