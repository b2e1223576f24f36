"""burnqed uses its frameworks (transformers, trl, torch, typer, peft, accelerate, datasets, pydantic…) through their
public hooks only: no class in burnqed/ overrides a private method of an external base class (a name with one leading
underscore that the base has: `_save_checkpoint`, `_clip_grad_norm`) or takes a private parameter in its override of
an external method (`save_model(self, output_dir, _internal_call)`), no code assigns a private attribute of a
framework's object (`scheduler._last_lr = …`; `self._x` only where no external base has `_x`), no module imports
a private module or name of an external package (`typer._click`), no call passes a private parameter (`_x=…`) to a
function that is not burnqed's own (`DOCUMENTED_PRIVATE` lists the few a library documents under such a name), no
code tells a class by its name (`type(e).__name__ == "UsageError"`, `e.__class__.__name__`, names read off an MRO:
`isinstance` against the public class instead) and none swaps an object's class (`obj.__class__ = …`). Each is a break
waiting for a release. Where burnqed must lean on more of a framework than its documented hooks, it does so in one
adapter module with a contract test per touch point (typer: burnqed/commands/typerapi.py,
tests/commands/test_typerapi.py).

The classes are read from the source (those built inside a function too, as the stages build their trainer and
callback classes on first use); each base is resolved through the module's imports and imported to read its MRO.
"""

from __future__ import annotations

import ast
import importlib
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("burnqed", "leankit", "minilean")


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def is_external(module: str) -> bool:
    """A third-party package's module (not ours, not the standard library's, not the builtins)."""
    top = module.split(".", 1)[0]
    return top not in OURS and top not in sys.stdlib_module_names and top != "builtins"


def imported_names(tree: ast.Module, module: str) -> dict[str, str]:
    """Every name an import anywhere in the module binds (a function's local imports too) → the dotted path it names."""
    names: dict[str, str] = {}
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".", 1)[0]] = alias.name if alias.asname else \
                    alias.name.split(".", 1)[0]
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{source}" if source else base
            for alias in node.names:
                names[alias.asname or alias.name] = f"{source}.{alias.name}"
    return names


def dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner is not None else None
    if isinstance(node, ast.Subscript):  # Generic[T], BaseModel subclasses' parameters
        return dotted(node.value)
    return None


def resolve(path: str) -> Any:
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise ImportError(path)


@dataclass(frozen=True)
class Finding:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def external_bases(cls_node: ast.ClassDef, tree: ast.Module, module: str) -> list[type]:
    """The external classes in the MRO of each base of `cls_node` (in `module`, parsed as `tree`): our own classes
    are followed through their source (nothing of burnqed is imported), an external one is imported."""
    names = _imported(tree, module)
    found: list[type] = []
    for base in cls_node.bases:
        path = dotted(base)
        if path is None:
            continue
        head, _, rest = path.partition(".")
        local = _class_in(tree, head) if not rest else None
        if local is not None and local is not cls_node:  # a class of this module (a function's local class too)
            found += external_bases(local, tree, module)
        elif head in names:  # else a builtin (object, Exception…)
            found += _external_of(names[head] + (f".{rest}" if rest else ""))
    return list(dict.fromkeys(found))


def _external_of(target: str, depth: int = 0) -> list[type]:
    """The external classes in the MRO of the class the dotted path `target` names."""
    if target.split(".", 1)[0] in OURS:
        module, _, name = target.rpartition(".")
        tree = _module_tree(module)
        if tree is None or depth > 8:
            return []
        node = _class_in(tree, name)
        if node is not None:
            return external_bases(node, tree, module)
        names = _imported(tree, module)  # a name the module imports from elsewhere
        return _external_of(names[name], depth + 1) if name in names else []
    if not is_external(target):  # the standard library's
        return []
    value = resolve(target)
    return [c for c in value.__mro__ if is_external(c.__module__)] if isinstance(value, type) else []


@cache
def _module_tree(module: str) -> ast.Module | None:
    base = ROOT / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return ast.parse(path.read_text(encoding="utf-8"))
    return None


def _imported(tree: ast.Module, module: str) -> dict[str, str]:
    key = (id(tree), module)
    if key not in _IMPORTED:
        _IMPORTED[key] = (tree, imported_names(tree, module))
    return _IMPORTED[key][1]


_IMPORTED: dict[tuple[int, str], tuple[ast.Module, dict[str, str]]] = {}  # the tree is kept: its id stays its own


def _class_in(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name), None)


def findings(source: str, module: str) -> list[Finding]:
    """What breaks the rule in one module's source (named `module`)."""
    tree = ast.parse(source)
    return [*private_imports(tree, module), *private_overrides(tree, module), *private_assignments(tree, module),
            *private_keywords(tree, module), *class_names(tree, module), *class_swaps(tree, module)]


# Keyword parameters with a leading underscore that their library documents as its public interface: the name → the
# library and where it says so (test_each_documented_private_parameter_is_documented_there reads it).
DOCUMENTED_PRIVATE: dict[str, tuple[str, str]] = {
    "_preload_content": ("kubernetes", "kubernetes.client.CoreV1Api.read_namespace"),
    "_request_timeout": ("kubernetes", "kubernetes.client.CoreV1Api.read_namespace"),
}


def private_keywords(tree: ast.Module, module: str) -> list[Finding]:
    """A call passing a private keyword parameter (`_internal_call=True`) to a function that is not burnqed's own: one
    this module defines (called by its name, or as `self.`/`cls.` method) or imports from burnqed, leankit or
    minilean. A callee that cannot be told (a parameter, an object's method) counts as a library's."""
    names = _imported(tree, module)
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    out: list[Finding] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        private = [k.arg for k in node.keywords if k.arg is not None and is_private(k.arg)
                   and k.arg not in DOCUMENTED_PRIVATE]
        if private and not _ours(node.func, names, own):
            out += [Finding(f"{module}:{node.lineno}", f"passes the private parameter {name}= to "
                                                       f"{ast.unparse(node.func)}") for name in private]
    return out


def _ours(func: ast.expr, names: dict[str, str], own: set[str]) -> bool:
    path = dotted(func)
    if path is None:
        return False
    head, _, rest = path.partition(".")
    if not rest:
        return head in own or (head in names and names[head].split(".", 1)[0] in OURS)
    if head in {"self", "cls"} and "." not in rest:
        return rest in own
    return head in names and names[head].split(".", 1)[0] in OURS


def class_names(tree: ast.Module, module: str) -> list[Finding]:
    """A class told by its name: a comparison with `type(x).__name__`, `x.__class__.__name__` (or `__qualname__`), or
    the names of an MRO's classes read off (`{c.__name__ for c in type(e).__mro__}`). A name printed (an error
    message's `type(exc).__name__`) is no match."""
    out: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(_class_name(part) for part in [node.left, *node.comparators]):
            out.append(Finding(f"{module}:{node.lineno}", f"tells a class by its name: {ast.unparse(node)}"))
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            over_mro = any(isinstance(g.iter, ast.Attribute) and g.iter.attr == "__mro__" for g in node.generators)
            if over_mro and any(isinstance(sub, ast.Attribute) and sub.attr in {"__name__", "__qualname__"}
                                for sub in ast.walk(node)):
                out.append(Finding(f"{module}:{node.lineno}", f"reads class names off an MRO: {ast.unparse(node)}"))
    return out


def _class_name(node: ast.expr) -> bool:
    if not (isinstance(node, ast.Attribute) and node.attr in {"__name__", "__qualname__"}):
        return False
    of = node.value
    return (isinstance(of, ast.Call) and isinstance(of.func, ast.Name) and of.func.id == "type") or (
        isinstance(of, ast.Attribute) and of.attr == "__class__")


def class_swaps(tree: ast.Module, module: str) -> list[Finding]:
    """An object's class replaced: `obj.__class__ = Other` (or through setattr)."""
    out: list[Finding] = []
    for node in ast.walk(tree):
        out += [Finding(f"{module}:{_line(node)}", f"swaps the class of {ast.unparse(target.value)}")
                for target in _assigned(node) if isinstance(target, ast.Attribute) and target.attr == "__class__"]
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "__class__"):
            out.append(Finding(f"{module}:{_line(node)}", f"swaps the class of {ast.unparse(node.args[0])}"))
    return out


def private_imports(tree: ast.Module, module: str) -> list[Finding]:
    out: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level and is_external(node.module):
            if any(is_private(part) for part in node.module.split(".")):
                out.append(Finding(f"{module}:{node.lineno}", f"imports the private module {node.module}"))
            else:
                out += [Finding(f"{module}:{node.lineno}", f"imports the private name {node.module}.{alias.name}")
                        for alias in node.names if is_private(alias.name)]
        elif isinstance(node, ast.Import):
            out += [Finding(f"{module}:{node.lineno}", f"imports the private module {alias.name}")
                    for alias in node.names
                    if is_external(alias.name) and any(is_private(part) for part in alias.name.split("."))]
    return out


def private_overrides(tree: ast.Module, module: str) -> list[Finding]:
    """In each class with an external base: a private name of that base defined in its body, or assigned to
    `self`/`cls` anywhere in it; a private parameter of a method that overrides one of that base's."""
    out: list[Finding] = []
    for node in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        candidates = {name for item in node.body for name in _defined(item) if is_private(name)} | {
            t.attr for sub in ast.walk(node) for t in _assigned(sub)
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in {"self", "cls"}
            and is_private(t.attr)}
        keyed = [(item, name) for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                 for name in _parameters(item) if is_private(name)]
        if not candidates and not keyed:  # nothing private of its own: its bases need not be looked up
            continue
        bases = external_bases(node, tree, module)

        def owner(name: str, bases: list[type] = bases) -> str | None:
            found = [f"{b.__module__}.{b.__qualname__}" for b in bases if is_private(name) and name in vars(b)]
            return found[0] if found else None

        for item in node.body:
            for name in _defined(item):
                if (base := owner(name)) is not None:
                    out.append(Finding(f"{module}:{item.lineno}", f"{node.name}.{name} overrides {base}.{name}"))
        for sub in ast.walk(node):
            for target in _assigned(sub):
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id in {"self", "cls"} and (base := owner(target.attr)) is not None):
                    out.append(Finding(f"{module}:{_line(sub)}", f"{node.name} assigns {base}'s private {target.attr}"))
        out += _private_parameters(node, keyed, bases, module)
    return out


def private_assignments(tree: ast.Module, module: str) -> list[Finding]:
    """A private attribute of an object other than `self`/`cls` assigned, deleted or set by name."""
    out: list[Finding] = []
    for node in ast.walk(tree):
        for target in _assigned(node):
            if (isinstance(target, ast.Attribute) and is_private(target.attr)
                    and not (isinstance(target.value, ast.Name) and target.value.id in {"self", "cls"})):
                out.append(Finding(f"{module}:{_line(node)}",
                                   f"assigns the private attribute {ast.unparse(target)} of another object"))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"setattr", "delattr"}
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and is_private(node.args[1].value)):
            out.append(Finding(f"{module}:{_line(node)}", f"{node.func.id} of the private {node.args[1].value}"))
    return out


def _private_parameters(node: ast.ClassDef, keyed: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]],
                        bases: list[type], module: str) -> list[Finding]:
    """Each private parameter (`keyed`) of a method of `node` that overrides a method of an external base."""
    out: list[Finding] = []
    for item, name in keyed:
        method = next((f"{b.__module__}.{b.__qualname__}.{item.name}" for b in bases if item.name in vars(b)), None)
        if method is not None:
            out.append(Finding(f"{module}:{item.lineno}",
                               f"{node.name}.{item.name} takes the private parameter {name} of {method}"))
    return out


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = function.args
    return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]


def _line(node: ast.AST) -> int:
    return int(getattr(node, "lineno", 0))


def _defined(item: ast.stmt) -> list[str]:
    """The names a statement of a class body defines (a method, a class attribute)."""
    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
        return [item.name]
    if isinstance(item, ast.Assign):
        return [t.id for t in item.targets if isinstance(t, ast.Name)]
    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
        return [item.target.id]
    return []


def _assigned(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return [t for target in node.targets for t in _flat(target)]
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for element in target.elts for t in _flat(element)]
    return [target]


def burnqed_findings() -> list[Finding]:
    return [finding for path in sorted((ROOT / "burnqed").rglob("*.py"))
            for finding in findings(path.read_text(encoding="utf-8"), module_name(path, ROOT))]


def test_burnqed_uses_its_frameworks_through_public_hooks_only() -> None:
    pytest.importorskip("trl")  # the stages' trainer classes subclass TRL's (the train extra)
    assert [str(f) for f in burnqed_findings()] == []


# ------------------------------------------------------------------------------- the check itself, on known sources


def test_an_override_of_a_private_method_of_a_framework_class_is_found() -> None:
    source = '''
def trainer_class():
    from transformers import Trainer

    class Mine(Trainer):
        def _save_checkpoint(self, model, trial):
            pass

        def _my_own_helper(self):
            pass

        def save_model(self, output_dir=None, _internal_call=False):
            pass

    return Mine
'''
    assert [str(f) for f in findings(source, "burnqed.example")] == [
        "burnqed.example:6: Mine._save_checkpoint overrides transformers.trainer.Trainer._save_checkpoint",
        "burnqed.example:12: Mine.save_model takes the private parameter _internal_call of "
        "transformers.trainer.Trainer.save_model"]


def test_a_subclass_of_a_subclass_and_a_private_attribute_are_found() -> None:
    source = '''
import torch
from torch.optim.lr_scheduler import LambdaLR


class Base(torch.nn.Module):
    pass


class Mine(Base):
    def _apply(self, fn):
        return self

    def restore(self, scheduler):
        scheduler._last_lr = [1.0]
        self._version = 2
        self._mine = 1


class Schedule(LambdaLR):
    _initial_step = None
'''
    assert [str(f) for f in findings(source, "burnqed.example")] == [
        "burnqed.example:11: Mine._apply overrides torch.nn.modules.module.Module._apply",
        "burnqed.example:16: Mine assigns torch.nn.modules.module.Module's private _version",
        "burnqed.example:21: Schedule._initial_step overrides torch.optim.lr_scheduler.LRScheduler._initial_step",
        "burnqed.example:15: assigns the private attribute scheduler._last_lr of another object",
    ]


def test_a_private_import_of_an_external_package_is_found_and_ours_are_not() -> None:
    source = '''
from typer._click.core import Context
from typer import _click
import typer._click.exceptions
from burnqed.storage.faults import _last_uri
from ._shared import ROOT
'''
    assert [str(f) for f in findings(source, "burnqed.workflows.example")] == [
        "burnqed.workflows.example:2: imports the private module typer._click.core",
        "burnqed.workflows.example:3: imports the private name typer._click",
        "burnqed.workflows.example:4: imports the private module typer._click.exceptions",
    ]


def test_a_private_parameter_passed_to_a_library_is_found_and_ours_and_documented_ones_are_not() -> None:
    source = '''
from burnqed.storage import put_bytes
from transformers import Trainer
import kubernetes.client as k8s


def helper(x, _depth=0):
    return helper(x, _depth=_depth + 1)


class Mine(Trainer):
    def _walk(self, _seen=None):
        return self._walk(_seen=set())

    def save(self, parent, method):
        parent.save_model("out", _internal_call=True)
        put_bytes("s3://b/k", b"", _retry=2)
        method("name", _preload_content=False, _request_timeout=15)
        Trainer.save_model(self, "out", _internal_call=True, output_dir="x")
'''
    assert [str(f) for f in findings(source, "burnqed.example")] == [
        "burnqed.example:16: passes the private parameter _internal_call= to parent.save_model",
        "burnqed.example:19: passes the private parameter _internal_call= to Trainer.save_model",
    ]


def test_each_documented_private_parameter_is_documented_there() -> None:
    for name, (package, function) in DOCUMENTED_PRIVATE.items():
        pytest.importorskip(package)
        assert f":param {name}:" in (resolve(function).__doc__ or ""), (name, function)


def test_a_class_told_by_its_name_and_a_swapped_class_are_found_and_a_printed_name_is_not() -> None:
    source = '''
import typer


def kind(exc, param, other):
    if type(exc).__name__ == "NoArgsIsHelpError":
        return 1
    if exc.__class__.__qualname__ in ("UsageError", "ClickException"):
        return 2
    names = {cls.__name__ for cls in type(exc).__mro__ if cls.__module__.startswith("typer")}
    param.__class__ = other
    setattr(param, "__class__", other)
    raise ValueError(f"{type(exc).__name__}: {exc}")
'''
    assert [str(f) for f in findings(source, "burnqed.commands.example")] == [
        "burnqed.commands.example:6: tells a class by its name: type(exc).__name__ == 'NoArgsIsHelpError'",
        "burnqed.commands.example:8: tells a class by its name: exc.__class__.__qualname__ in ('UsageError', "
        "'ClickException')",
        "burnqed.commands.example:10: reads class names off an MRO: {cls.__name__ for cls in type(exc).__mro__ if "
        "cls.__module__.startswith('typer')}",
        "burnqed.commands.example:11: swaps the class of param",
        "burnqed.commands.example:12: swaps the class of param",
    ]
