"""Griffe extension for the API reference: fairnas's docstrings cross-reference with Sphinx roles
(``:class:`FaceTable```, ``:func:`~fairnas.search.run_search```, ``:mod:`.statistics```); mkdocstrings renders
Markdown, where such a role would show as literal text. This turns every role into a cross-reference that
mkdocs-autorefs links to the object's entry in the API reference.

The target is resolved as Python would see the name in the docstring's scope (its object, then the enclosing
class and module, their imports included); a name not in scope there is looked up as a unique public object name
anywhere in the package, and ``:attr:``/``:meth:`` also as an attribute the enclosing class assigns to ``self``
outside ``__init__`` (griffe does not list those). A reference to an object that exists is linked where the API
reference documents that object and shown as code where it does not (only the six public modules have pages). A
reference to nothing is written as a plain Markdown cross-reference, so ``mkdocs build --strict`` reports it: fix
the docstring's reference, never the build. A leading ``~`` shows the last component only, as in Sphinx. Loaded by
``mkdocs.yml`` (``plugins: mkdocstrings: ... options: extensions``).
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Module, Object

ROLE = re.compile(r":(?:py:)?(?P<role>class|func|meth|attr|data|mod|exc|obj):`(?P<tilde>~?)(?P<target>\.?[\w.]+)`")


def _objects(obj: Object):
    """``obj`` and every object it defines (aliases, i.e. imports, excluded)."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)


class SphinxRoles(Extension):
    """Rewrites the Sphinx roles of every docstring of a loaded package as cross-references."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        objects = list(_objects(pkg))
        self.paths = {obj.path for obj in objects}
        self.by_name: dict[str, set[str]] = {}
        for obj in objects:
            if not obj.name.startswith("_"):
                self.by_name.setdefault(obj.name, set()).add(obj.path)
        for obj in objects:
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = ROLE.sub(lambda match: self._reference(match, obj), obj.docstring.value)

    def _resolve(self, role: str, target: str, obj: Object) -> tuple[str, bool]:
        """(full path, whether that object exists)."""
        if target.startswith("."):                      # a module relative to the docstring's package
            module = obj if obj.is_module else obj.module
            package = module.path if module.is_package else module.path.rpartition(".")[0]
            return package + target, package + target in self.paths
        if target in self.paths:                        # a full path
            return target, True
        head, dot, rest = target.partition(".")
        try:
            path = obj.resolve(head) + dot + rest
        except Exception:                               # griffe's NameResolutionError: not in this scope
            path = None
        if path is not None:                            # in this package, or imported from elsewhere
            return path, path in self.paths or not path.startswith(obj.package.path + ".")
        if not dot and len(self.by_name.get(head, ())) == 1:
            return next(iter(self.by_name[head])), True
        cls = obj if obj.is_class else obj.parent if obj.parent is not None and obj.parent.is_class else None
        if role in {"attr", "meth"} and not dot and cls is not None \
                and re.search(rf"\bself\.{re.escape(head)}\s*[:=]", cls.source):
            return f"{cls.path}.{head}", True
        return target, False

    def _reference(self, match: re.Match, obj: Object) -> str:
        target = match["target"]
        shown = target.rsplit(".", 1)[-1] if match["tilde"] else target.lstrip(".")
        path, exists = self._resolve(match["role"], target, obj)
        if exists:  # linked where documented; otherwise shown as code, without a warning
            return f'<autoref identifier="{path}" optional><code>{shown}</code></autoref>'
        return f"[`{shown}`][{path}]"
