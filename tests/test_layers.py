"""The suite's modules import one way: no module imports one that imports it back."""

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
            if node.module == "conformance":
                found.update("conformance." + alias.name for alias in node.names)
            else:
                found.add(node.module)
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
        if "tests" not in parts:  # the checks are pytest's modules, not the suite's layers
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
    (tmp_path / "result.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from conformance.processes import P\n"
    )
    (tmp_path / "processes.py").write_text("from conformance.result import Result\n")
    assert circles_in(module_graph(tmp_path)) == [
        "conformance.processes -> conformance.result -> conformance.processes",
        "conformance.result -> conformance.processes -> conformance.result",
    ]


def test_the_layers_read_processes_result_expect():
    graph = module_graph()
    assert "conformance.result" in graph["conformance.processes"]
    assert "conformance.processes" not in graph["conformance.result"]
    assert "conformance.result" in graph["conformance.expect"]
    assert "conformance.expect" not in graph["conformance.result"]
