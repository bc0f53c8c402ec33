"""One registration mechanism: names -> objects, built-ins found by importing their package."""

import sys

import pytest

from drmas.errors import ConfigError
from drmas.registry import CORPORA, DEMONSTRATIONS, GENERATORS, MAS, REWARDS, Registry


def test_built_ins_are_found_without_a_module_list():
    assert MAS.names() == ["math", "math4", "search", "single"]
    assert DEMONSTRATIONS.names() == ["math", "math4", "search"]
    assert REWARDS.names() == ["arithmetic", "math", "qa"]
    assert GENERATORS.names() == ["arithmetic", "knowledge"]
    assert CORPORA.names() == ["knowledge"]
    assert REWARDS.get("qa")("<answer>Paris</answer>", ["paris"]) == 1.0


def test_unknown_names_and_duplicates():
    reg = Registry("widget", ())
    reg.register("a")(len)
    reg.register("a")(len)                              # the same object again: fine
    with pytest.raises(ValueError, match="widget 'a' registered twice"):
        reg.add("a", max)
    with pytest.raises(ConfigError, match="^unknown widget 'b'; known: a$"):
        reg.get("b")
    assert reg.find("b") is None and "a" in reg and "b" not in reg


def test_a_new_module_registers_itself(tmp_path, monkeypatch):
    """Adding an entry is adding a module (a MAS: a folder) to the registry's package."""
    pkg = tmp_path / "plugins_for_test"
    (pkg / "folder").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "one.py").write_text("from tests_registry_home import REG\nREG.add('one', 1)\n")
    (pkg / "folder" / "__init__.py").write_text("from tests_registry_home import REG\nREG.add('two', 2)\n")
    (pkg / "_private.py").write_text("raise RuntimeError('private modules are not imported')\n")
    home = type(sys)("tests_registry_home")
    home.REG = Registry("plugin", ("plugins_for_test",))
    monkeypatch.setitem(sys.modules, "tests_registry_home", home)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert home.REG.names() == ["one", "two"] and home.REG.get("two") == 2
